// The sign-in page: e-mail and password (then the second factor's step when the account has one), a passkey, or
// an identity provider; then on to `returnTo` when it is a path on this site (common.js, returnPath), else to the
// account page. The sign-in answers carry the session token: only their `twoFactorRedirect` flag is read; the
// session itself is the HttpOnly cookie.
import { api, currentSession, h, passkeyRefusal, passkeysAvailable, returnPath, say, usePasskey } from "./common.js";

const params = new URLSearchParams(location.search);
const target = returnPath(params.get("returnTo"));
// The identity provider asks for a new sign-in (an application said prompt=login, or wants a younger session than
// this one): its way back carries `login_after` and counts only a session begun since, so the form is shown even
// to someone signed in (continuing with the old session would only come back here).
const signInAgain = new URL(target, location.origin).searchParams.has("login_after");
const $ = (id) => document.getElementById(id);
const error = $("error");
const title = $("title");
const forms = ["password-form", "reset-form", "second-factor", "signed-in", "others"].map($);

function fail(message, input) {
  say(error, message, true);
  for (const i of document.querySelectorAll("[aria-invalid]")) i.removeAttribute("aria-invalid");
  if (input) {
    input.setAttribute("aria-invalid", "true");
    input.focus();
  }
}

function showOnly(...shown) {
  for (const f of forms) f.hidden = !shown.includes(f);
  say(error, "");
}

/// Signed in: on to where the person was going (`replace`, so Back does not return to this form). A session whose
/// role requires a second factor it does not have yet can do nothing there but enrol one (403 TWO_FACTOR_REQUIRED
/// on every other call): to the account page instead, which says so and enrols it.
async function done() {
  try {
    await api("GET", "/api/auth/list-accounts");
  } catch (e) {
    if (e.code === "TWO_FACTOR_REQUIRED") return location.replace("/account/");
  }
  location.replace(target);
}

// --- e-mail and password ---------------------------------------------------------------------------------------

$("password-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const email = $("email");
  const password = $("password");
  if (!email.value.includes("@")) return fail("Enter your e-mail address.", email);
  if (password.value === "") return fail("Enter your password.", password);
  const button = $("submit");
  button.disabled = true;
  try {
    const answer = await api("POST", "/api/auth/sign-in/email",
      { email: email.value, password: password.value, rememberMe: $("remember").checked });
    password.value = "";
    if (answer?.twoFactorRedirect) return secondFactorStep();
    await done();
  } catch (e) {
    fail(e.message);
  } finally {
    button.disabled = false;
  }
});

// --- the second factor -----------------------------------------------------------------------------------------

let backup = false;

function secondFactorStep() {
  showOnly($("second-factor"));
  title.textContent = "Second step";
  backup = false;
  describeCodeStep();
  $("code").value = "";
  $("code").focus();
}

function describeCodeStep() {
  $("second-factor-intro").textContent = backup
    ? "Enter one of the backup codes you saved when you set up the second factor. Each works once."
    : "Enter the 6-digit code your authenticator app shows for this account.";
  $("code-label").textContent = backup ? "Backup code" : "Code";
  $("code-hint").textContent = backup ? "A backup code is used up once it signs you in." : "The code changes every 30 seconds.";
  $("code").setAttribute("inputmode", backup ? "text" : "numeric");
  $("use-backup").textContent = backup ? "Use the authenticator app instead" : "Use a backup code instead";
}

$("use-backup").addEventListener("click", (event) => {
  event.preventDefault();
  backup = !backup;
  describeCodeStep();
  $("code").focus();
});

$("second-factor").addEventListener("submit", async (event) => {
  event.preventDefault();
  const code = $("code");
  const value = code.value.replace(/\s+/g, "");
  if (value === "") return fail(backup ? "Enter a backup code." : "Enter the code.", code);
  const button = $("code-submit");
  button.disabled = true;
  try {
    const path = backup ? "/api/auth/two-factor/verify-backup-code" : "/api/auth/two-factor/verify-totp";
    await api("POST", path, { code: value, trustDevice: $("trust").checked });
    await done();
  } catch (e) {
    // The step expired (or was never started): back to the password.
    if (e.code === "INVALID_TWO_FACTOR_COOKIE") {
      start();
      return fail("The sign-in took too long. Enter your password again.");
    }
    fail(e.message, code);
  } finally {
    button.disabled = false;
  }
});

// --- passkeys and identity providers ---------------------------------------------------------------------------

$("passkey").addEventListener("click", async () => {
  const button = $("passkey");
  button.disabled = true;
  say(error, "");
  try {
    const options = await api("GET", "/api/auth/passkey/generate-authenticate-options");
    let response;
    try {
      response = await usePasskey(options);
    } catch (e) {
      return fail(passkeyRefusal(e));
    }
    await api("POST", "/api/auth/passkey/verify-authentication", { response });
    await done();
  } catch (e) {
    fail(e.message);
  } finally {
    button.disabled = false;
  }
});

async function providerButtons() {
  let providers = [];
  try {
    ({ providers } = await api("GET", "/api/account/providers"));
  } catch {
    return; // the other ways in still work
  }
  const list = $("providers");
  list.replaceChildren(...providers.map((p) => h("button", {
    type: "button",
    class: "secondary",
    "data-provider": p.id,
    text: `Sign in with ${p.name}`,
    onclick: async (event) => {
      const button = event.currentTarget;
      button.disabled = true;
      try {
        // The provider sends the browser back to the callback, which then goes to `target`; a refusal comes back
        // here with ?error=. Absolute URLs on this origin: the server takes a relative one only without an
        // encoded slash, which `returnTo` in a query always has.
        const callbackURL = new URL(target, location.origin).href;
        const errorCallbackURL = new URL(`/sign-in?${new URLSearchParams({ returnTo: target })}`, location.origin).href;
        const { url } = await api("POST", "/api/auth/sign-in/social",
          { provider: p.id, callbackURL, errorCallbackURL, disableRedirect: true });
        location.assign(url);
      } catch (e) {
        fail(e.message);
        button.disabled = false;
      }
    },
  })));
  return providers.length > 0;
}

// --- start -----------------------------------------------------------------------------------------------------

async function start() {
  title.textContent = "Sign in";
  let session = null;
  try {
    session = await currentSession();
  } catch {
    // Unknown: offer the form; signing in says what is wrong.
  }
  if (session && !signInAgain) {
    showOnly($("signed-in"));
    $("signed-in-as").textContent = session.user.email;
    $("continue").href = target;
    return;
  }
  if (session) title.textContent = "Sign in again";
  $("passkey").hidden = !passkeysAvailable;
  const anyProvider = await providerButtons();
  showOnly($("password-form"), ...(passkeysAvailable || anyProvider ? [$("others")] : []));
  const problem = params.get("error");
  if (problem) fail(`Signing in through the provider did not work (${problem}).`);
}

$("switch").addEventListener("click", async () => {
  try {
    await api("POST", "/api/auth/sign-out");
  } catch {
    // Signed out or not, the form asks again.
  }
  start();
});

$("forgot").addEventListener("click", (event) => {
  event.preventDefault();
  showOnly($("reset-form"));
  title.textContent = "Reset your password";
  $("reset-email").value = $("email").value;
  $("reset-email").focus();
});

$("reset-back").addEventListener("click", (event) => {
  event.preventDefault();
  start();
});

$("reset-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const email = $("reset-email");
  if (!email.value.includes("@")) return fail("Enter your e-mail address.", email);
  const button = $("reset-submit");
  button.disabled = true;
  try {
    await api("POST", "/api/auth/request-password-reset", { email: email.value });
    say($("reset-msg"), "If an account has this address, a link to reset its password is on its way.");
  } catch (e) {
    fail(e.message);
  } finally {
    button.disabled = false;
  }
});

start();
