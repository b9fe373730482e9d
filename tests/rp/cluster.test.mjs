// openid-client against two nodes sharing one PostgreSQL database (docs/cluster.md; PG_URL, which run.sh starts):
// a grant issued on node A is refreshed on node B, whose ID token verifies against B's JWKS (the keys A made, read
// from the database); a refresh token reused on A ends the grant on B; a revocation on B is seen by introspection
// on A; a service's token from B is introspected on A. Both nodes have A's address as `base_url`, so they are one
// issuer; the library's configuration for B is A's metadata with B's endpoints.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as oidc from "openid-client";

import { RP, admin, newUser, register, startService, through } from "./service.mjs";

let a, b, keyDir, adminBrowser;
/// How long a node may take to see another's change (`max_staleness_secs` below, and a second more).
const STALENESS_MS = 3_000;

async function freePort() {
  const server = createServer().listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

before(async () => {
  assert.ok(process.env.PG_URL, "PG_URL names the PostgreSQL database of the two nodes (tests/rp/run.sh starts one)");
  keyDir = mkdtempSync(join(tmpdir(), "rp-cluster-key-"));
  const port = await freePort();
  const top = `base_url = "http://127.0.0.1:${port}"\n`;
  const store = `[store]\nbackend = "postgres"\nurl = "${process.env.PG_URL}"\nmax_staleness_secs = 2\n`;
  // Every node reads the same data key, which seals the signing keys in the database.
  const env = { SERVICE_AUTH_DATA_KEY_FILE: join(keyDir, "data.key") };
  a = await startService(store, { top, listen: `127.0.0.1:${port}`, env });
  b = await startService(store, { top, env, bootstrap: false });
  adminBrowser = await admin(a.base);
});

after(async () => {
  await b?.stop();
  await a?.stop();
  if (keyDir) rmSync(keyDir, { recursive: true, force: true });
});

/// The library's configuration for `client` on node A (from the discovery document) and on node B (the same
/// issuer's metadata with B's endpoints).
async function configure(client) {
  const auth = () => oidc.ClientSecretBasic(client.client_secret);
  const onA = await oidc.discovery(new URL(a.issuer), client.client_id, {}, auth(), { execute: [oidc.allowInsecureRequests] });
  const meta = onA.serverMetadata();
  assert.equal(meta.issuer, a.issuer);
  const toB = (url) => url.replace(a.base, b.base);
  const onB = new oidc.Configuration(
    { ...meta, token_endpoint: toB(meta.token_endpoint), jwks_uri: toB(meta.jwks_uri),
      userinfo_endpoint: toB(meta.userinfo_endpoint), introspection_endpoint: toB(meta.introspection_endpoint),
      revocation_endpoint: toB(meta.revocation_endpoint) },
    client.client_id, {}, auth(),
  );
  for (const config of [onA, onB]) {
    oidc.allowInsecureRequests(config);
    oidc.enableNonRepudiationChecks(config);
  }
  return { onA, onB };
}

/// Polls `check` until it holds or another node's change had time enough to arrive.
async function eventually(check, what) {
  const until = Date.now() + STALENESS_MS;
  for (;;) {
    if (await check()) return;
    if (Date.now() > until) assert.fail(`${what}: not seen within ${STALENESS_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function grant(config, user) {
  const verifier = oidc.randomPKCECodeVerifier();
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri: RP, scope: "openid profile offline_access", state: "st", nonce: "no",
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: "S256",
  });
  const way = await through(user.browser, a.base, url, RP, { user });
  return oidc.authorizationCodeGrant(config, way.callback, { pkceCodeVerifier: verifier, expectedState: "st", expectedNonce: "no" });
}

test("a grant issued on node A is refreshed on node B; a refresh token reused on A ends it on B", async () => {
  const client = await register(adminBrowser, {
    client_name: "Two nodes", redirect_uris: [RP], skip_consent: true, scope: "openid profile offline_access",
  });
  const { onA, onB } = await configure(client);
  const user = await newUser(a.base, "Nodes");
  const first = await grant(onA, user);

  let second;
  await eventually(async () => {
    second = await oidc.refreshTokenGrant(onB, first.refresh_token).catch(() => undefined);
    return second !== undefined;
  }, "the grant on node B");
  assert.equal(second.claims().sub, user.id, "B's ID token verifies against B's JWKS");
  assert.equal(second.claims().iss, a.issuer);
  assert.equal((await oidc.fetchUserInfo(onB, second.access_token, user.id)).name, user.name);
  assert.equal((await oidc.tokenIntrospection(onA, second.access_token)).active, true);

  // The first refresh token again, on A: refused, and the grant is over on B too.
  await eventually(async () => {
    const e = await oidc.refreshTokenGrant(onA, first.refresh_token).then(() => undefined, (e) => e);
    return e?.error === "invalid_grant";
  }, "the reuse refused on A");
  await eventually(async () => !(await oidc.tokenIntrospection(onB, second.access_token)).active, "the grant ended on B");
  const e = await oidc.refreshTokenGrant(onB, second.refresh_token).then(() => undefined, (e) => e);
  assert.equal(e?.error, "invalid_grant");
});

test("a revocation on node B is seen by introspection on node A; a service's token from B is known to A", async () => {
  const client = await register(adminBrowser, {
    client_name: "Revoked", redirect_uris: [RP], skip_consent: true, scope: "openid profile offline_access",
  });
  const { onA, onB } = await configure(client);
  const user = await newUser(a.base, "Revoke");
  const tokens = await grant(onA, user);
  await eventually(async () => (await oidc.tokenIntrospection(onB, tokens.access_token)).active, "the grant on B");
  await oidc.tokenRevocation(onB, tokens.refresh_token);
  await eventually(async () => !(await oidc.tokenIntrospection(onA, tokens.access_token)).active, "the revocation on A");

  const billing = await register(adminBrowser, {
    client_name: "billing", grant_types: ["client_credentials"], scope: "invoices:read",
  });
  const service = await configure(billing);
  let token;
  await eventually(async () => {
    token = await oidc.clientCredentialsGrant(service.onB).catch(() => undefined);
    return token !== undefined;
  }, "the client on B");
  await eventually(async () => (await oidc.tokenIntrospection(service.onA, token.access_token)).active, "B's token on A");
});
