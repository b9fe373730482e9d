// A browser application on another origin than the service, using the better-auth client as front-end code does.
// It runs one scenario, chosen by ?scenario=, checks each result itself and shows it: one <li> per step, and
// window.__steps / window.__done for the test that drives the browser.
import { createAuthClient } from "better-auth/client";
import { passkeyClient } from "@better-auth/passkey/client";

const params = new URLSearchParams(location.search);
const api = params.get("api"); // the service's base URL, e.g. http://127.0.0.1:41234
const email = params.get("email"); // the account this page signs up (or, untrusted, tries to)
const known = params.get("known"); // untrusted: an account that exists, with the same password
const password = "a web page passphrase";
// The client sends credentials ("include") by default; said here too, since that is what this page is about.
// passkeyClient() as an application adds it; it changes nothing for the other scenarios.
const auth = createAuthClient({ baseURL: api, fetchOptions: { credentials: "include" }, plugins: [passkeyClient()] });

const steps = [];
function record(name, ok, detail) {
  steps.push({ name, ok, detail });
  const li = document.createElement("li");
  li.textContent = `${ok ? "PASS" : "FAIL"} ${name}: ${detail}`;
  document.getElementById("steps").append(li);
}

// Runs `call`, records whether `check` holds for its result; a thrown error is a result too (a CORS refusal
// surfaces as a failed fetch).
async function step(name, call, check) {
  let result;
  try {
    result = await call();
  } catch (e) {
    result = { thrown: String(e) };
  }
  const ok = Boolean(check(result));
  record(name, ok, JSON.stringify(summary(result)));
  return result;
}

// What is worth showing of a client result: the user's e-mail, the error's status and code, never the token.
function summary(r) {
  if (!r || r.thrown) return r;
  return { user: r.data?.user?.email ?? null, success: r.data?.success, error: r.error && { status: r.error.status, code: r.error.code } };
}

const signedIn = (r) => !r.error && r.data?.user?.email === email;
const noSession = (r) => !r.error && r.data === null;
// The browser keeps the answer from the page: better-fetch reports a failed fetch as an error without a
// status from the server (or the call throws); there is no data either way.
const refused = (r) => Boolean(r.thrown) || (!r.data && r.error && !(r.error.status >= 200));

async function trusted() {
  await step("sign up", () => auth.signUp.email({ name: "Browser", email, password }), signedIn);
  await step("session after sign-up", () => auth.getSession(), signedIn);
  await step("sign out", () => auth.signOut(), (r) => !r.error && r.data?.success === true);
  await step("no session after sign-out", () => auth.getSession(), noSession);
  await step("sign in", () => auth.signIn.email({ email, password }), signedIn);
  await step("session after sign-in", () => auth.getSession(), signedIn);
  await step("sign out again", () => auth.signOut(), (r) => !r.error && r.data?.success === true);
  await step("no session at the end", () => auth.getSession(), noSession);
}

async function untrusted() {
  await step("sign up is refused", () => auth.signUp.email({ name: "Browser", email, password }), refused);
  await step("sign in is refused", () => auth.signIn.email({ email: known, password }), refused);
  await step("session is unreadable", () => auth.getSession(), refused);
}

// Passkeys through @better-auth/passkey's client, with the browser's own WebAuthn (the test gives the page a virtual
// authenticator): register one, sign out, sign in with the passkey alone (no e-mail), delete it.
async function passkey() {
  await step("sign up", () => auth.signUp.email({ name: "Browser", email, password }), signedIn);
  const added = await step("add a passkey", () => auth.passkey.addPasskey({ name: "Browser key" }), (r) => !r.error && r.data?.name === "Browser key");
  const listed = (n) => (r) => !r.error && Array.isArray(r.data) && r.data.length === n;
  await step("the passkey is listed", () => auth.passkey.listUserPasskeys(), listed(1));
  await step("rename it", () => auth.passkey.updatePasskey({ id: added.data?.id, name: "Laptop" }), (r) => !r.error && r.data?.passkey?.name === "Laptop");
  await step("sign out", () => auth.signOut(), (r) => !r.error && r.data?.success === true);
  await step("no session after sign-out", () => auth.getSession(), noSession);
  await step("sign in with the passkey alone", () => auth.signIn.passkey(), signedIn);
  await step("session after the passkey", () => auth.getSession(), signedIn);
  await step("delete the passkey", () => auth.passkey.deletePasskey({ id: added.data?.id }), (r) => !r.error && r.data?.status === true);
  await step("no passkey left", () => auth.passkey.listUserPasskeys(), listed(0));
  await step("sign out at the end", () => auth.signOut(), (r) => !r.error && r.data?.success === true);
  await step("the deleted passkey signs nobody in", () => auth.signIn.passkey(), (r) => Boolean(r.error) && !r.data);
}

const scenarios = { trusted, untrusted, passkey };
try {
  await scenarios[params.get("scenario")]();
} catch (e) {
  record("scenario", false, String(e));
}
document.getElementById("state").textContent = "done";
window.__steps = steps;
window.__done = true;
