// Back-channel logout (OpenID Connect Back-Channel Logout 1.0) as a relying party receives it: the relying party
// signs its user in with openid-client (the ID token's `sid`), listens on loopback for the provider's POST, and
// checks each logout token as §2.6 says with `jose` against the provider's JWKS (signature, `typ: logout+jwt`,
// `iss`, `aud`, `iat`, the back-channel event, `sid` or `sub`, no `nonce`). A ban reaches it; a sign-out of one
// session reaches it for that session alone.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import * as jose from "jose";
import * as oidc from "openid-client";

import { RP, admin, newUser, register, startService, through } from "./service.mjs";

const EVENT = "http://schemas.openid.net/event/backchannel-logout";
let service, adminBrowser, receiver, receiverUrl;
/// Every logout token received, in order, and who waits for the next.
const received = [];
const waiting = [];

before(async () => {
  // The relying party's back-channel endpoint on loopback, which the provider reaches only when told it may.
  receiver = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      const form = new URLSearchParams(body);
      received.push({ contentType: req.headers["content-type"], token: form.get("logout_token") });
      while (waiting.length) waiting.shift()();
      res.writeHead(200, { "cache-control": "no-store" }).end();
    });
  });
  receiver.listen(0, "127.0.0.1");
  await once(receiver, "listening");
  receiverUrl = `http://127.0.0.1:${receiver.address().port}/backchannel`;
  service = await startService("[webhooks]\nallow_internal_targets = true\n");
  adminBrowser = await admin(service.base);
});

after(async () => {
  receiver?.close();
  await service?.stop();
});

/// The next logout token to arrive after `count` were received (the deliverer sends it soon after the commit).
async function logoutAfter(count) {
  const deadline = Date.now() + 15_000;
  while (received.length <= count) {
    if (Date.now() > deadline) assert.fail("no logout token within 15 s");
    await Promise.race([new Promise((resolve) => waiting.push(resolve)), new Promise((r) => setTimeout(r, 250))]);
  }
  return received[count];
}

/// §2.6's checks of a logout token, by the relying party, with the provider's published keys.
async function validLogout(entry, config, client) {
  assert.match(entry.contentType, /^application\/x-www-form-urlencoded/);
  const meta = config.serverMetadata();
  const jwks = jose.createRemoteJWKSet(new URL(meta.jwks_uri));
  const { payload, protectedHeader } = await jose.jwtVerify(entry.token, jwks, {
    issuer: meta.issuer,
    audience: client.client_id,
    typ: "logout+jwt",
    algorithms: meta.id_token_signing_alg_values_supported,
    maxTokenAge: "2 minutes",
  });
  assert.ok(protectedHeader.kid);
  assert.deepEqual(payload.events, { [EVENT]: {} });
  assert.equal(payload.nonce, undefined, "a logout token never has a nonce");
  assert.ok(payload.jti);
  assert.ok(payload.sid || payload.sub);
  return payload;
}

async function signedIn(config, user) {
  const verifier = oidc.randomPKCECodeVerifier();
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri: RP, scope: "openid profile", state: "bc", nonce: "bc-nonce",
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: "S256",
  });
  const way = await through(user.browser, service.base, url, RP, { user });
  return oidc.authorizationCodeGrant(config, way.callback, { pkceCodeVerifier: verifier, expectedState: "bc", expectedNonce: "bc-nonce" });
}

test("a ban sends the relying party a logout token it verifies against the JWKS, naming the session it knows", async () => {
  const client = await register(adminBrowser, {
    client_name: "Wiki", redirect_uris: [RP], skip_consent: true, backchannel_logout_uri: receiverUrl,
  });
  const config = await oidc.discovery(new URL(service.issuer), client.client_id, {}, oidc.ClientSecretBasic(client.client_secret), {
    execute: [oidc.allowInsecureRequests],
  });
  assert.equal(config.serverMetadata().backchannel_logout_supported, true);
  const user = await newUser(service.base, "Logout");
  const tokens = await signedIn(config, user);
  const sid = tokens.claims().sid;
  assert.ok(sid, "the ID token names the session for a client with a back-channel URI");

  const before = received.length;
  const ban = await adminBrowser.api("/api/auth/admin/ban-user", { userId: user.id });
  assert.equal(ban.status, 200, await ban.clone().text());
  const claims = await validLogout(await logoutAfter(before), config, client);
  assert.equal(claims.sid, sid);
  assert.equal(claims.sub, user.id);
});

test("signing out of one session sends a logout for that session alone", async () => {
  const client = await register(adminBrowser, {
    client_name: "Notes", redirect_uris: [RP], skip_consent: true, backchannel_logout_uri: receiverUrl,
  });
  const config = await oidc.discovery(new URL(service.issuer), client.client_id, {}, oidc.ClientSecretBasic(client.client_secret), {
    execute: [oidc.allowInsecureRequests],
  });
  const user = await newUser(service.base, "Two");
  const first = await signedIn(config, user);
  const before = received.length;
  const out = await user.browser.api("/api/auth/sign-out", {});
  assert.equal(out.status, 200, await out.clone().text());
  const claims = await validLogout(await logoutAfter(before), config, client);
  assert.equal(claims.sid, first.claims().sid);
  await new Promise((resolve) => setTimeout(resolve, 500));
  assert.equal(received.length, before + 1, "one token for the one session");
});
