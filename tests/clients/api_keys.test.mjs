// The real `apiKeyClient()` (@better-auth/api-key 1.7.5, with better-auth 1.7.25's client) against a running
// service-auth server: create, list, get, update, verify (an administrator's server-side call), delete, and a call
// authenticated by the key alone in `x-api-key` (the client has no key mode: the header goes in fetchOptions).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createAuthClient } from "better-auth/client";
import { apiKeyClient } from "@better-auth/api-key/client";
import { jarFetch } from "./jar.mjs";

const BASE = process.env.SERVICE_AUTH_URL;
const PASSWORD = "correct horse battery staple";
const unique = (tag) => `${tag}-${Date.now()}-${Math.floor(Math.random() * 1e6)}@example.com`;

function browser(jar = new Map()) {
  const customFetchImpl = jarFetch(BASE, jar);
  return createAuthClient({ baseURL: BASE, fetchOptions: { customFetchImpl }, plugins: [apiKeyClient()] });
}

test("apiKeyClient: create, list, get, update, a call by x-api-key, verify, delete", async () => {
  const client = browser();
  const email = unique("keys");
  assert.equal((await client.signUp.email({ name: "Keys", email, password: PASSWORD })).error, null);

  const created = await client.apiKey.create({ name: "ci", prefix: "sa_", expiresIn: 60 * 60 * 24 * 7 });
  assert.equal(created.error, null);
  const key = created.data.key;
  assert.match(key, /^sa_[a-zA-Z]{64}$/);
  assert.equal(created.data.start, key.slice(0, 6));
  assert.equal(created.data.rateLimitMax, 10);

  const refused = await client.apiKey.create({ name: "x".repeat(33) });
  assert.equal(refused.error.status, 400);
  assert.equal(refused.error.code, "INVALID_NAME_LENGTH");

  const listed = await client.apiKey.list();
  assert.equal(listed.error, null);
  assert.equal(listed.data.total, 1);
  assert.equal(listed.data.apiKeys[0].id, created.data.id);
  assert.equal(listed.data.apiKeys[0].key, undefined, "the secret is shown once");

  const got = await client.apiKey.get({ query: { id: created.data.id } });
  assert.equal(got.error, null);
  assert.equal(got.data.name, "ci");

  const updated = await client.apiKey.update({ keyId: created.data.id, name: "renamed" });
  assert.equal(updated.error, null);
  assert.equal(updated.data.name, "renamed");
  const nothing = await client.apiKey.update({ keyId: created.data.id });
  assert.equal(nothing.error.code, "NO_VALUES_TO_UPDATE");

  // A client with no cookie at all, only the key: it is the owner's session.
  const script = createAuthClient({ baseURL: BASE, plugins: [apiKeyClient()] });
  const session = await script.getSession({ fetchOptions: { headers: { "x-api-key": key } } });
  assert.equal(session.error, null);
  assert.equal(session.data.user.email, email);
  assert.equal(session.data.session.token, key);
  const viaKey = await script.apiKey.list({ fetchOptions: { headers: { "x-api-key": key } } });
  assert.equal(viaKey.error, null);
  assert.equal(viaKey.data.apiKeys[0].requestCount, 2);
  const unknown = await script.getSession({ fetchOptions: { headers: { "x-api-key": "a".repeat(64) } } });
  assert.equal(unknown.error.status, 401);
  assert.equal(unknown.error.code, "INVALID_API_KEY");

  // verify is the plugin's server-side call: here an administrator's.
  const admin = browser();
  const signedIn = await admin.signIn.email({ email: process.env.ADMIN_EMAIL, password: process.env.ADMIN_PASSWORD });
  assert.equal(signedIn.error, null);
  const verified = await admin.$fetch("/api-key/verify", { method: "POST", body: { key } });
  assert.equal(verified.error, null);
  assert.equal(verified.data.valid, true);
  assert.equal(verified.data.key.id, created.data.id);
  const notAdmin = await client.$fetch("/api-key/verify", { method: "POST", body: { key } });
  assert.equal(notAdmin.error.status, 403);

  const deleted = await client.apiKey.delete({ keyId: created.data.id });
  assert.equal(deleted.error, null);
  assert.equal(deleted.data.success, true);
  const gone = await script.getSession({ fetchOptions: { headers: { "x-api-key": key } } });
  assert.equal(gone.error.status, 401);
  const again = await client.apiKey.get({ query: { id: created.data.id } });
  assert.equal(again.error.status, 404);
  assert.equal(again.error.code, "KEY_NOT_FOUND");
});
