// The real `usernameClient()` (better-auth 1.7.25) against a running service-auth server: sign-up with a username,
// sign-in by it (the session atom refreshed), the availability check, update-user with a username, and the
// plugin's error codes as the client reads them. run.sh turns `[username]` on.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createAuthClient } from "better-auth/client";
import { usernameClient } from "better-auth/client/plugins";
import { jarFetch } from "./jar.mjs";

const BASE = process.env.SERVICE_AUTH_URL;
const COOKIE = "service-auth.session_token";
const PASSWORD = "correct horse battery staple";

/** A client with its own cookie jar: one browser profile. */
function browser() {
  const jar = new Map();
  const customFetchImpl = jarFetch(BASE, jar);
  const client = createAuthClient({ baseURL: BASE, fetchOptions: { customFetchImpl }, plugins: [usernameClient()] });
  return { client, jar };
}

/** A name no other test (nor an earlier run against the same server) has: 3 to 30 of [A-Za-z0-9_.]. */
const fresh = (tag) => `${tag}_${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;

test("usernameClient: signUp.email with a username, signIn.username in another case, getSession", async () => {
  const name = fresh("Cleo");
  const email = `${name.toLowerCase()}@example.com`;
  const { client } = browser();
  const up = await client.signUp.email({ email, password: PASSWORD, name: "Cleo", username: name });
  assert.equal(up.error, null);
  assert.equal(up.data.user.username, name.toLowerCase());
  assert.equal(up.data.user.displayUsername, name);
  const other = browser();
  const signedIn = await other.client.signIn.username({ username: name.toUpperCase(), password: PASSWORD });
  assert.equal(signedIn.error, null);
  assert.equal(signedIn.data.redirect, false);
  assert.equal(signedIn.data.user.email, email);
  assert.equal(signedIn.data.user.username, name.toLowerCase());
  assert.ok(other.jar.has(COOKIE), "the session cookie was set");
  const session = await other.client.getSession();
  assert.equal(session.error, null);
  assert.equal(session.data.user.username, name.toLowerCase());
  assert.equal(session.data.user.displayUsername, name);
});

test("usernameClient: a wrong password and an unknown name are one error; malformed names get the plugin's codes", async () => {
  const name = fresh("dex");
  const { client } = browser();
  await client.signUp.email({ email: `${name}@example.com`, password: PASSWORD, name: "Dex", username: name });
  for (const username of [name, fresh("nobody")]) {
    const failed = await client.signIn.username({ username, password: "a wrong password entirely" });
    assert.equal(failed.data, null);
    assert.equal(failed.error.status, 401);
    assert.equal(failed.error.code, "INVALID_USERNAME_OR_PASSWORD");
  }
  const short = await client.signIn.username({ username: "ab", password: PASSWORD });
  assert.equal(short.error.status, 422);
  assert.equal(short.error.code, "USERNAME_TOO_SHORT");
  const bad = await client.isUsernameAvailable({ username: "not valid!" });
  assert.equal(bad.error.status, 422);
  assert.equal(bad.error.code, "INVALID_USERNAME");
  const long = await client.signUp.email({ email: `${fresh("l")}@example.com`, password: PASSWORD, name: "L", username: "x".repeat(31) });
  assert.equal(long.error.status, 400);
  assert.equal(long.error.code, "USERNAME_TOO_LONG");
});

test("usernameClient: isUsernameAvailable, a taken name and its look-alike refused, updateUser frees the old name", async () => {
  const name = fresh("lola");
  const { client } = browser();
  assert.deepEqual((await client.isUsernameAvailable({ username: name })).data, { available: true });
  await client.signUp.email({ email: `${name}@example.com`, password: PASSWORD, name: "Fern", username: name });
  assert.deepEqual((await client.isUsernameAvailable({ username: name.toUpperCase() })).data, { available: false });
  assert.deepEqual((await client.isUsernameAvailable({ username: "admin" })).data, { available: false });
  const twin = await browser().client.signUp.email({ email: `${fresh("twin")}@example.com`, password: PASSWORD, name: "Twin", username: name.replace(/l/g, "1") });
  assert.equal(twin.error.status, 400);
  assert.equal(twin.error.code, "USERNAME_IS_ALREADY_TAKEN");
  const renamed = fresh("fern_two");
  const updated = await client.updateUser({ username: renamed, displayUsername: "Fern Two" });
  assert.equal(updated.error, null);
  const session = await client.getSession();
  assert.equal(session.data.user.username, renamed);
  assert.equal(session.data.user.displayUsername, "Fern Two");
  assert.deepEqual((await client.isUsernameAvailable({ username: name })).data, { available: true });
});
