// openid-client (v6, OpenID Certified; oauth4webapi underneath) as a relying party of service-auth's identity
// provider (issue #46): discovery, the code flow with PKCE through the service's sign-in and consent pages, the ID
// token checked by the library (signature against the JWKS, issuer, audience, nonce, at_hash, iss in the
// authorization response), userinfo, refresh with rotation and reuse detection, client credentials, revocation,
// introspection, end-session, and every refusal a relying party meets. The browser is a cookie jar following
// redirects by hand (service.mjs). Each test registers its own clients and users, so each stands alone.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import * as oauth from "oauth4webapi";
import * as oidc from "openid-client";

import { BYE, PASSWORD, RP, admin, browser, newUser, register, startService, through } from "./service.mjs";

let service, adminBrowser;

before(async () => {
  service = await startService();
  adminBrowser = await admin(service.base);
});

after(async () => {
  await service?.stop();
});

/// The library's configuration for a registered client, from the issuer's discovery document. Plain http on
/// loopback needs `allowInsecureRequests`; the non-repudiation checks make the library verify every ID token's
/// signature against the published JWKS (by default it trusts the TLS channel of the token endpoint).
async function configure({ client_id, client_secret }, metadata = {}) {
  const auth = client_secret ? oidc.ClientSecretBasic(client_secret) : oidc.None();
  const config = await oidc.discovery(new URL(service.issuer), client_id, metadata, auth, {
    execute: [oidc.allowInsecureRequests],
  });
  oidc.enableNonRepudiationChecks(config);
  return config;
}

/// An authorization request as the library builds it, with PKCE S256, `state` and `nonce`.
async function start(config, redirectUri, parameters = {}) {
  const verifier = oidc.randomPKCECodeVerifier();
  const state = oidc.randomState();
  const nonce = oidc.randomNonce();
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri: redirectUri,
    scope: "openid profile email",
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
    code_challenge_method: "S256",
    state,
    nonce,
    ...parameters,
  });
  return { url, checks: { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce } };
}

/// The whole code flow for `user` in `b`: the request, the browser's way through the pages, the library's grant.
async function codeFlow(config, user, { redirectUri = RP, parameters = {}, consent = true, b = user.browser } = {}) {
  const { url, checks } = await start(config, redirectUri, parameters);
  const way = await through(b, service.base, url, redirectUri, { user, consent });
  assert.ok(way.callback, `no way back to the client: ${way.status} ${way.body}`);
  const tokens = await oidc.authorizationCodeGrant(config, way.callback, checks);
  return { tokens, callback: way.callback, checks, seen: way.seen };
}

/// What a refused promise was refused with.
async function refusal(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail("expected a refusal");
}

test("discovery, the code flow with PKCE through sign-in and consent, the ID token checked, userinfo", async () => {
  const client = await register(adminBrowser, { client_name: "Certified RP", redirect_uris: [RP] });
  const config = await configure(client);
  const meta = config.serverMetadata();
  assert.equal(meta.issuer, service.issuer);
  assert.deepEqual(meta.code_challenge_methods_supported, ["S256"]);
  assert.equal(meta.authorization_response_iss_parameter_supported, true);

  // A new browser, signed out: to the sign-in page, back to the request, to the consent page, back to the client.
  const user = await newUser(service.base, "Ada");
  const fresh = browser(service.base);
  const { tokens, callback, checks, seen } = await codeFlow(config, user, { b: fresh });
  assert.deepEqual(seen, ["sign-in", "consent"]);
  assert.equal(callback.searchParams.get("iss"), service.issuer, "RFC 9207's iss, which the library checks");
  assert.equal(tokens.token_type.toLowerCase(), "bearer");
  assert.equal(tokens.scope, "openid profile email");
  assert.equal(tokens.refresh_token, undefined, "no offline_access, no refresh token");
  const claims = tokens.claims();
  assert.equal(claims.sub, user.id);
  assert.equal(claims.iss, service.issuer);
  assert.equal(claims.aud, client.client_id);
  assert.equal(claims.nonce, checks.expectedNonce);
  assert.ok(claims.auth_time <= claims.iat);
  assert.ok(tokens.expiresIn() > 800 && tokens.expiresIn() <= 900, `${tokens.expiresIn()}`);

  const info = await oidc.fetchUserInfo(config, tokens.access_token, claims.sub);
  assert.deepEqual(info, {
    sub: user.id,
    name: user.name,
    given_name: user.name.split(" ")[0],
    family_name: user.name.split(" ")[1],
    email: user.email,
    email_verified: false,
  });
  // Another user's subject: the library refuses the answer.
  await assert.rejects(oidc.fetchUserInfo(config, tokens.access_token, "someone-else"));

  // The consent is remembered: the next request goes straight back with a code.
  const again = await codeFlow(config, user, { b: fresh });
  assert.deepEqual(again.seen, []);
  assert.notEqual(again.tokens.access_token, tokens.access_token);
});

test("a resource server checks the access token offline as RFC 9068 has it (oauth4webapi)", async () => {
  const client = await register(adminBrowser, {
    client_name: "API caller", redirect_uris: [RP], skip_consent: true, scope: "openid email",
  });
  const config = await configure(client);
  const user = await newUser(service.base, "Res");
  const { tokens } = await codeFlow(config, user, { parameters: { scope: "openid email" } });
  // What a resource server does with a bearer token: the issuer's metadata and JWKS, no call to the provider.
  const as = config.serverMetadata();
  const request = new Request("https://api.rp.example/invoices", {
    headers: { authorization: `Bearer ${tokens.access_token}` },
  });
  const claims = await oauth.validateJwtAccessToken(as, request, client.client_id, {
    [oauth.allowInsecureRequests]: true,
  });
  assert.equal(claims.sub, user.id);
  assert.equal(claims.client_id, client.client_id);
  assert.equal(claims.iss, service.issuer);
  assert.equal(claims.scope, "openid email");
  // Another audience than the token names: refused by the resource server's own check.
  await assert.rejects(
    oauth.validateJwtAccessToken(as, request, "https://another-api.example", { [oauth.allowInsecureRequests]: true }),
  );
});

test("max_age and prompt=login: a sign-in again, once, and the library checks auth_time", async () => {
  const client = await register(adminBrowser, { client_name: "Fresh", redirect_uris: [RP], skip_consent: true });
  const config = await configure(client);
  const user = await newUser(service.base, "Age");
  const first = await codeFlow(config, user);
  await new Promise((resolve) => setTimeout(resolve, 2_100));
  const { url, checks } = await start(config, RP, { max_age: "1" });
  const way = await through(user.browser, service.base, url, RP, { user });
  assert.deepEqual(way.seen, ["sign-in"], "the session is older than max_age");
  const tokens = await oidc.authorizationCodeGrant(config, way.callback, { ...checks, maxAge: 1 });
  assert.ok(tokens.claims().auth_time > first.tokens.claims().auth_time, "auth_time is the new sign-in's");

  // max_age=0, a sign-in every time: one sign-in, then the code (the way back once led to the sign-in page for
  // ever, no session being younger than 0 seconds).
  const zero = await start(config, RP, { max_age: "0" });
  const wayZero = await through(user.browser, service.base, zero.url, RP, { user });
  assert.deepEqual(wayZero.seen, ["sign-in"]);
  const fresh = await oidc.authorizationCodeGrant(config, wayZero.callback, { ...zero.checks, maxAge: 0 });
  assert.ok(fresh.claims().auth_time >= tokens.claims().auth_time);

  // prompt=login: the sign-in page again, though signed in; the code once signed in anew.
  const login = await start(config, RP, { prompt: "login" });
  const wayLogin = await through(user.browser, service.base, login.url, RP, { user });
  assert.deepEqual(wayLogin.seen, ["sign-in"]);
  const again = await oidc.authorizationCodeGrant(config, wayLogin.callback, login.checks);
  assert.ok(again.claims().auth_time >= fresh.claims().auth_time);
});

test("ID tokens signed with each algorithm a client may register verify in the library", async () => {
  const user = await newUser(service.base, "Alg");
  for (const alg of ["EdDSA", "ES256", "RS256"]) {
    const client = await register(adminBrowser, {
      client_name: `RP ${alg}`, redirect_uris: [RP], skip_consent: true, id_token_signed_response_alg: alg,
    });
    const config = await configure(client, { id_token_signed_response_alg: alg });
    const { tokens } = await codeFlow(config, user);
    const header = JSON.parse(Buffer.from(tokens.id_token.split(".")[0], "base64url"));
    assert.equal(header.alg, alg);
    assert.equal(tokens.claims().sub, user.id, alg);
  }
  // client_secret_post, as registered: the library sends the secret in the form.
  const post = await register(adminBrowser, {
    client_name: "RP post", redirect_uris: [RP], skip_consent: true, token_endpoint_auth_method: "client_secret_post",
  });
  const config = await oidc.discovery(new URL(service.issuer), post.client_id, {}, oidc.ClientSecretPost(post.client_secret), {
    execute: [oidc.allowInsecureRequests],
  });
  const { tokens } = await codeFlow(config, user);
  assert.equal(tokens.claims().aud, post.client_id);
});

test("key rotation: a key published ahead verifies from the library's cached JWKS; one signing at once needs a fresh JWKS", async () => {
  // A server of its own: a rotation changes the signing key for every client.
  const own = await startService();
  try {
    const ownAdmin = await admin(own.base);
    const client = await register(ownAdmin, { client_name: "Rotating", redirect_uris: [RP], skip_consent: true });
    const user = await newUser(own.base, "Key");
    const jwksFetches = { count: 0 };
    const configure = async () => {
      const config = await oidc.discovery(new URL(own.issuer), client.client_id, {}, oidc.ClientSecretBasic(client.client_secret), {
        execute: [oidc.allowInsecureRequests],
      });
      oidc.enableNonRepudiationChecks(config);
      config[oidc.customFetch] = (url, options) => {
        if (new URL(url).pathname.endsWith("/jwks")) jwksFetches.count++;
        return fetch(url, options);
      };
      return config;
    };
    const flow = async (config) => {
      const { url, checks } = await start(config, RP);
      const way = await through(user.browser, own.base, url, RP, { user });
      return oidc.authorizationCodeGrant(config, way.callback, checks);
    };
    const kid = (tokens) => JSON.parse(Buffer.from(tokens.id_token.split(".")[0], "base64url")).kid;
    const first = await flow(await configure());
    const oldKid = kid(first);

    // Published two seconds ahead: the library's JWKS, fetched now, already holds the key that will sign.
    const rotate = (lead) => ownAdmin.api("/api/admin/oidc/keys/rotate", { algs: ["EdDSA"], lead_secs: lead });
    assert.equal((await rotate(2)).status, 200);
    const config = await configure();
    jwksFetches.count = 0;
    assert.equal(kid(await flow(config)), oldKid, "the old key signs until the new one's time");
    await new Promise((resolve) => setTimeout(resolve, 2_200));
    const next = await flow(config);
    assert.notEqual(kid(next), oldKid, "the new key signs now");
    assert.equal(jwksFetches.count, 1, "both verified from the one JWKS fetched");

    // Signing at once (lead 0): the library's copy of the JWKS is under a minute old, so it does not fetch it
    // again for the unknown kid (oauth4webapi refetches only a copy a minute old) and refuses the ID token; a
    // relying party that fetches the JWKS anew verifies it.
    assert.equal((await rotate(0)).status, 200);
    const e = await refusal(flow(config));
    assert.equal(e.code, "OAUTH_KEY_SELECTION_FAILED", String(e));
    assert.equal(jwksFetches.count, 1, "no second fetch within the minute");
    const after = await flow(await configure());
    assert.notEqual(kid(after), kid(next));
    assert.equal(jwksFetches.count, 2);
  } finally {
    await own.stop();
  }
});

test("a public native client: PKCE alone at a loopback redirect on any port", async () => {
  const client = await register(adminBrowser, {
    client_name: "CLI", application_type: "native", token_endpoint_auth_method: "none",
    redirect_uris: ["http://127.0.0.1/callback"], scope: "openid profile offline_access",
  });
  assert.equal(client.client_secret, null);
  const config = await configure(client);
  const user = await newUser(service.base, "Cli");
  const redirectUri = "http://127.0.0.1:53682/callback";
  const { tokens, seen } = await codeFlow(config, user, {
    redirectUri, parameters: { scope: "openid profile offline_access" },
  });
  assert.deepEqual(seen, ["consent"]);
  assert.equal(tokens.claims().sub, user.id);
  assert.ok(tokens.refresh_token);
  const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token);
  assert.equal(refreshed.claims().sub, user.id);
  // Without PKCE a public client is refused, back at its redirect URI.
  const plain = oidc.buildAuthorizationUrl(config, { redirect_uri: redirectUri, scope: "openid", state: "s" });
  const way = await through(user.browser, service.base, plain, redirectUri, { user });
  const e = await refusal(oidc.authorizationCodeGrant(config, way.callback, { expectedState: "s" }));
  assert.ok(e instanceof oidc.AuthorizationResponseError, String(e));
  assert.equal(e.error, "invalid_request");
});

test("refresh tokens rotate at every use; a reused one ends the whole grant", async () => {
  const client = await register(adminBrowser, {
    client_name: "Offline", redirect_uris: [RP], skip_consent: true, scope: "openid profile email offline_access",
  });
  const config = await configure(client);
  const user = await newUser(service.base, "Rot");
  const { tokens } = await codeFlow(config, user, { parameters: { scope: "openid email offline_access" } });
  assert.ok(tokens.refresh_token);
  const authTime = tokens.claims().auth_time;

  const second = await oidc.refreshTokenGrant(config, tokens.refresh_token);
  assert.notEqual(second.refresh_token, tokens.refresh_token, "rotated");
  assert.equal(second.claims().sub, user.id);
  assert.equal(second.claims().auth_time, authTime, "the refreshed ID token keeps auth_time");
  assert.equal(second.claims().nonce, undefined);
  // Narrowed to fewer scopes for the new access token; the grant keeps its own.
  const narrow = await oidc.refreshTokenGrant(config, second.refresh_token, { scope: "openid" });
  assert.equal(narrow.scope, "openid");
  const info = await oidc.fetchUserInfo(config, narrow.access_token, user.id);
  assert.equal(info.email, undefined, "the narrowed token sees no e-mail");
  const third = await oidc.refreshTokenGrant(config, narrow.refresh_token);
  assert.match(third.scope, /email/);
  assert.equal((await oidc.tokenIntrospection(config, third.access_token)).active, true);

  // The first refresh token again: refused, and the grant is over (the newest refresh token and access token too).
  const e = await refusal(oidc.refreshTokenGrant(config, tokens.refresh_token));
  assert.ok(e instanceof oidc.ResponseBodyError, String(e));
  assert.equal(e.error, "invalid_grant");
  const after = await refusal(oidc.refreshTokenGrant(config, third.refresh_token));
  assert.equal(after.error, "invalid_grant");
  assert.equal((await oidc.tokenIntrospection(config, third.access_token)).active, false);
  const denied = await refusal(oidc.fetchUserInfo(config, third.access_token, user.id));
  assert.ok(denied instanceof oidc.WWWAuthenticateChallengeError, String(denied));
  assert.equal(denied.status, 401);
});

test("client credentials: a service's own token, introspected and revoked", async () => {
  const service_client = await register(adminBrowser, {
    client_name: "billing", grant_types: ["client_credentials"], scope: "invoices:read invoices:write",
  });
  const config = await configure(service_client);
  const all = await oidc.clientCredentialsGrant(config);
  assert.equal(all.scope, "invoices:read invoices:write");
  assert.equal(all.refresh_token, undefined);
  assert.equal(all.id_token, undefined);
  const one = await oidc.clientCredentialsGrant(config, { scope: "invoices:read" });
  assert.equal(one.scope, "invoices:read");
  const seen = await oidc.tokenIntrospection(config, one.access_token);
  assert.equal(seen.active, true);
  assert.equal(seen.client_id, service_client.client_id);
  assert.equal(seen.sub, service_client.client_id, "the client's own token names it as subject");
  assert.equal(seen.scope, "invoices:read");

  // A scope it was not registered with, a user's scope: invalid_scope.
  for (const scope of ["invoices:delete", "openid"]) {
    const e = await refusal(oidc.clientCredentialsGrant(config, { scope }));
    assert.equal(e.error, "invalid_scope", scope);
  }
  // A wrong secret: 401 with the Basic challenge (RFC 6749 §5.2), which the library raises as a challenge error,
  // the body still saying invalid_client.
  const wrong = await configure({ client_id: service_client.client_id, client_secret: "not-the-secret" });
  const e = await refusal(oidc.clientCredentialsGrant(wrong));
  assert.ok(e instanceof oidc.WWWAuthenticateChallengeError, String(e));
  assert.equal(e.status, 401);
  assert.equal(e.cause[0].scheme, "basic");
  assert.equal((await e.response.json()).error, "invalid_client");

  await oidc.tokenRevocation(config, one.access_token);
  assert.equal((await oidc.tokenIntrospection(config, one.access_token)).active, false);
  assert.equal((await oidc.tokenIntrospection(config, all.access_token)).active, true, "another grant stays");
});

test("introspection and revocation of a user's tokens: the whole grant ends, another client learns nothing", async () => {
  const body = { redirect_uris: [RP], skip_consent: true, scope: "openid email offline_access" };
  const a = await register(adminBrowser, { client_name: "A", ...body });
  const b = await register(adminBrowser, { client_name: "B", ...body });
  const configA = await configure(a);
  const configB = await configure(b);
  const user = await newUser(service.base, "Intro");
  const { tokens } = await codeFlow(configA, user, { parameters: { scope: "openid email offline_access" } });

  const access = await oidc.tokenIntrospection(configA, tokens.access_token);
  assert.equal(access.active, true);
  assert.equal(access.sub, user.id);
  assert.equal(access.client_id, a.client_id);
  assert.equal(access.iss, service.issuer);
  const refresh = await oidc.tokenIntrospection(configA, tokens.refresh_token, { token_type_hint: "refresh_token" });
  assert.equal(refresh.active, true);
  assert.deepEqual(await oidc.tokenIntrospection(configB, tokens.access_token), { active: false });

  // Another client's revocation is answered alike and ends nothing.
  await oidc.tokenRevocation(configB, tokens.refresh_token);
  assert.equal((await oidc.tokenIntrospection(configA, tokens.access_token)).active, true);
  // The client's own: the refresh token, and with it the access token of its grant.
  await oidc.tokenRevocation(configA, tokens.refresh_token, { token_type_hint: "refresh_token" });
  assert.equal((await oidc.tokenIntrospection(configA, tokens.access_token)).active, false);
  assert.equal((await oidc.tokenIntrospection(configA, tokens.refresh_token)).active, false);
  const e = await refusal(oidc.refreshTokenGrant(configA, tokens.refresh_token));
  assert.equal(e.error, "invalid_grant");
  // Revoking again, or an unknown token: the same empty 200 (RFC 7009 §2.2).
  await oidc.tokenRevocation(configA, tokens.refresh_token);
  await oidc.tokenRevocation(configA, "not-a-token");
});

test("end-session: the library's logout URL ends the session its ID token names and returns to the client", async () => {
  const client = await register(adminBrowser, {
    client_name: "Ends", redirect_uris: [RP], skip_consent: true, enable_end_session: true,
    post_logout_redirect_uris: [BYE], scope: "openid profile",
  });
  const config = await configure(client);
  assert.equal(config.serverMetadata().end_session_endpoint, `${service.issuer}/oauth2/end-session`);
  const user = await newUser(service.base, "Bye");
  const { tokens } = await codeFlow(config, user, { parameters: { scope: "openid profile" } });
  assert.ok(tokens.claims().sid, "sid for a client that may end the session");

  // A redirect that is not registered: refused, and nothing ended.
  const stray = oidc.buildEndSessionUrl(config, {
    id_token_hint: tokens.id_token, post_logout_redirect_uri: "https://rp.example/elsewhere",
  });
  assert.equal((await user.browser.request(stray)).status, 400);
  assert.equal((await user.browser.api("/api/auth/get-session")).status, 200);
  assert.notEqual(await (await user.browser.api("/api/auth/get-session")).json(), null);

  const url = oidc.buildEndSessionUrl(config, {
    id_token_hint: tokens.id_token, post_logout_redirect_uri: BYE, state: "bye-state",
  });
  const r = await user.browser.request(url);
  assert.equal(r.status, 302);
  const to = new URL(r.headers.get("location"));
  assert.equal(`${to.origin}${to.pathname}`, BYE);
  assert.equal(to.searchParams.get("state"), "bye-state");
  assert.equal(await (await user.browser.api("/api/auth/get-session")).json(), null, "signed out");
  const denied = await refusal(oidc.fetchUserInfo(config, tokens.access_token, user.id));
  assert.equal(denied.status, 401, "the session's tokens ended with it");
});

// --- what a relying party is refused ------------------------------------------------------------------------------

test("a redirect URI not registered byte for byte is refused at the provider, never followed", async () => {
  const client = await register(adminBrowser, { client_name: "Exact", redirect_uris: [RP] });
  const config = await configure(client);
  const user = await newUser(service.base, "Redir");
  for (const wrong of [`${RP}/`, "https://rp.example/cb?x=1", "https://evil.example/cb"]) {
    const { url } = await start(config, wrong);
    const r = await user.browser.request(url);
    assert.equal(r.status, 400, wrong);
    assert.equal(r.headers.get("location"), null);
    assert.equal((await r.json()).error, "invalid_redirect", wrong, "the plugin's code");
  }
  // And at the token endpoint: a code sent to RP, redeemed from another path (the library sends the URL it was
  // called back at as redirect_uri).
  const { url, checks } = await start(config, RP);
  const way = await through(user.browser, service.base, url, RP, { user });
  const elsewhere = new URL(way.callback);
  elsewhere.pathname = "/other";
  const e = await refusal(oidc.authorizationCodeGrant(config, elsewhere, checks));
  assert.equal(e.error, "invalid_grant");
});

test("a code is redeemed once (a reuse ends its grant), and only by the client it was issued to", async () => {
  const body = { redirect_uris: [RP], skip_consent: true };
  const a = await register(adminBrowser, { client_name: "Mine", ...body });
  const b = await register(adminBrowser, { client_name: "Thief", ...body });
  const configA = await configure(a);
  const configB = await configure(b);
  const user = await newUser(service.base, "Code");

  // Client B presents client A's code (same redirect URI, the right verifier): refused; the code is spent.
  const stolen = await start(configA, RP);
  const way = await through(user.browser, service.base, stolen.url, RP, { user });
  const e = await refusal(oidc.authorizationCodeGrant(configB, way.callback, stolen.checks));
  assert.equal(e.error, "invalid_grant");
  const spent = await refusal(oidc.authorizationCodeGrant(configA, way.callback, stolen.checks));
  assert.equal(spent.error, "invalid_grant", "a code tried by another client is spent");

  // Reused by its own client: the second redemption is refused.
  const { tokens, callback, checks } = await codeFlow(configA, user);
  const reused = await refusal(oidc.authorizationCodeGrant(configA, callback, checks));
  assert.ok(reused instanceof oidc.ResponseBodyError, String(reused));
  assert.equal(reused.error, "invalid_grant");
  // And the grant its first redemption made is over (RFC 9700 §4.2.1): its access token no longer introspects.
  assert.equal((await oidc.tokenIntrospection(configA, tokens.access_token)).active, false);
  await assert.rejects(oidc.fetchUserInfo(configA, tokens.access_token, user.id));

  // The wrong PKCE verifier: refused.
  const other = await start(configA, RP);
  const way2 = await through(user.browser, service.base, other.url, RP, { user });
  const badVerifier = { ...other.checks, pkceCodeVerifier: oidc.randomPKCECodeVerifier() };
  assert.equal((await refusal(oidc.authorizationCodeGrant(configA, way2.callback, badVerifier))).error, "invalid_grant");
});

test("prompt=none without a session answers login_required, without consent consent_required", async () => {
  const client = await register(adminBrowser, { client_name: "Silent", redirect_uris: [RP] });
  const config = await configure(client);
  const nobody = browser(service.base);
  const { url, checks } = await start(config, RP, { prompt: "none" });
  const way = await through(nobody, service.base, url, RP);
  assert.deepEqual(way.seen, [], "no sign-in page for prompt=none");
  const e = await refusal(oidc.authorizationCodeGrant(config, way.callback, checks));
  assert.ok(e instanceof oidc.AuthorizationResponseError, String(e));
  assert.equal(e.error, "login_required");

  const user = await newUser(service.base, "Silent");
  const second = await start(config, RP, { prompt: "none" });
  const way2 = await through(user.browser, service.base, second.url, RP, { user });
  const e2 = await refusal(oidc.authorizationCodeGrant(config, way2.callback, second.checks));
  assert.equal(e2.error, "consent_required");

  // Once consented, prompt=none gets a code.
  await codeFlow(config, user);
  const third = await start(config, RP, { prompt: "none" });
  const way3 = await through(user.browser, service.base, third.url, RP, { user });
  const tokens = await oidc.authorizationCodeGrant(config, way3.callback, third.checks);
  assert.equal(tokens.claims().sub, user.id);
});

test("a banned user's tokens stop at once and the user cannot sign in to get new ones", async () => {
  const client = await register(adminBrowser, {
    client_name: "Ban", redirect_uris: [RP], skip_consent: true, scope: "openid profile email offline_access",
  });
  const config = await configure(client);
  const user = await newUser(service.base, "Banned");
  const { tokens } = await codeFlow(config, user, { parameters: { scope: "openid email offline_access" } });
  assert.equal((await oidc.tokenIntrospection(config, tokens.access_token)).active, true);

  const ban = await adminBrowser.api("/api/auth/admin/ban-user", { userId: user.id, banReason: "relying party test" });
  assert.equal(ban.status, 200, await ban.clone().text());

  assert.equal((await oidc.tokenIntrospection(config, tokens.access_token)).active, false);
  assert.equal((await oidc.tokenIntrospection(config, tokens.refresh_token)).active, false);
  assert.equal((await refusal(oidc.refreshTokenGrant(config, tokens.refresh_token))).error, "invalid_grant");
  assert.equal((await refusal(oidc.fetchUserInfo(config, tokens.access_token, user.id))).status, 401);
  // A new authorization: the session is gone, and the sign-in page's sign-in is refused.
  const { url } = await start(config, RP);
  const way = await through(user.browser, service.base, url, RP, { user });
  assert.equal(way.callback, undefined, "no code for a banned user");
  assert.deepEqual(way.seen, ["sign-in"]);
  assert.equal(way.status, 403, way.body);
});

test("scopes not granted: not registered, narrowed at consent, widened at refresh, or denied", async () => {
  const client = await register(adminBrowser, {
    client_name: "Scopes", redirect_uris: [RP], scope: "openid profile email offline_access",
  });
  const config = await configure(client);
  const user = await newUser(service.base, "Scope");

  // A scope the client was not registered with: invalid_scope, back at the client.
  const unknown = await start(config, RP, { scope: "openid admin:all" });
  const way = await through(user.browser, service.base, unknown.url, RP, { user });
  const e = await refusal(oidc.authorizationCodeGrant(config, way.callback, unknown.checks));
  assert.ok(e instanceof oidc.AuthorizationResponseError, String(e));
  assert.equal(e.error, "invalid_scope");

  // Denied at the consent page: access_denied.
  const denied = await start(config, RP);
  const way2 = await through(user.browser, service.base, denied.url, RP, { user, consent: false });
  assert.equal((await refusal(oidc.authorizationCodeGrant(config, way2.callback, denied.checks))).error, "access_denied");

  // The user allows fewer scopes than asked: the tokens carry only those, userinfo answers only theirs.
  const { tokens } = await codeFlow(config, user, {
    parameters: { scope: "openid profile email offline_access" }, consent: "openid profile offline_access",
  });
  assert.equal(tokens.scope, "openid profile offline_access");
  const info = await oidc.fetchUserInfo(config, tokens.access_token, user.id);
  assert.equal(info.name, user.name);
  assert.equal(info.email, undefined, "email was not granted");
  // A refresh asking for more than the grant: invalid_scope, and the refresh token is not spent.
  const wider = await refusal(oidc.refreshTokenGrant(config, tokens.refresh_token, { scope: "openid email" }));
  assert.equal(wider.error, "invalid_scope");
  const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token);
  assert.equal(refreshed.scope, "openid profile offline_access");
});

const DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";

/// The person's part of the device flow (RFC 8628 §3.3), as a browser does it: opens `verification_uri_complete`
/// (the /device page, which sends a signed-out person to the sign-in page and back), signs in there, and answers
/// as the page's script does: its look-up of the code, then the Approve or Deny button's call. Answers the look-up.
async function onTheDevicePage(device, user, accept) {
  const b = browser(service.base);
  const complete = new URL(device.verification_uri_complete);
  assert.equal(`${complete.origin}${complete.pathname}`, device.verification_uri);
  const page = await b.request(complete);
  assert.equal(page.status, 200);
  assert.match(page.headers.get("content-type"), /^text\/html/);
  // Signed out: the page's script finds no session and goes to the sign-in page, which comes back here.
  assert.equal((await (await b.api("/api/auth/get-session")).json())?.user, undefined);
  const returnTo = `${complete.pathname}${complete.search}`;
  assert.equal((await b.request(new URL(`/sign-in?${new URLSearchParams({ returnTo })}`, service.base))).status, 200);
  const signIn = await b.api("/api/auth/sign-in/email", { email: user.email, password: PASSWORD });
  assert.equal(signIn.status, 200, await signIn.clone().text());
  assert.equal((await b.request(new URL(returnTo, service.base))).status, 200);
  const code = complete.searchParams.get("user_code");
  const lookUp = await b.api(`/api/auth/oauth2/device?${new URLSearchParams({ user_code: code })}`);
  assert.equal(lookUp.status, 200, await lookUp.clone().text());
  const found = await lookUp.json();
  const answered = await b.api("/api/auth/oauth2/device", { user_code: found.user_code, accept });
  assert.equal(answered.status, 200, await answered.clone().text());
  assert.deepEqual(await answered.json(), { success: true });
  return found;
}

test("the device flow: the library starts it and polls while the user approves on /device; ID token checked, refresh", async () => {
  const client = await register(adminBrowser, {
    client_name: "Deploy CLI", token_endpoint_auth_method: "none", grant_types: [DEVICE_GRANT],
    scope: "openid profile email offline_access",
  });
  const config = await configure(client);
  const meta = config.serverMetadata();
  assert.equal(meta.device_authorization_endpoint, `${service.issuer}/oauth2/device_authorization`);
  assert.ok(meta.grant_types_supported.includes(DEVICE_GRANT), String(meta.grant_types_supported));
  // What each of the library's polls of the token endpoint heard.
  const heard = [];
  config[oidc.customFetch] = async (url, options) => {
    const response = await fetch(url, options);
    if (new URL(url).pathname.endsWith("/oauth2/token")) {
      heard.push(response.ok ? "tokens" : (await response.clone().json()).error);
    }
    return response;
  };

  const device = await oidc.initiateDeviceAuthorization(config, { scope: "openid email offline_access" });
  assert.match(device.user_code, /^[A-HJ-NP-Z2-9]{4}-[A-HJ-NP-Z2-9]{4}$/);
  assert.equal(device.verification_uri, `${service.base}/device`);
  assert.equal(device.expires_in, 1800);
  assert.equal(device.interval, 5);
  const polling = oidc.pollDeviceAuthorizationGrant(config, device);
  // The user approves once the library has polled at least once (and heard that the request waits).
  while (heard.length === 0) await new Promise((resolve) => setTimeout(resolve, 100));
  const user = await newUser(service.base, "Devi");
  const shown = await onTheDevicePage(device, user, true);
  assert.deepEqual(shown, {
    client_id: client.client_id, client_name: "Deploy CLI", scope: "openid email offline_access",
    user_code: device.user_code,
  });

  const tokens = await polling;
  assert.deepEqual(heard, ["authorization_pending", "tokens"], "the library kept the interval: no slow_down");
  assert.equal(tokens.scope, "openid email offline_access");
  const claims = tokens.claims();
  assert.equal(claims.sub, user.id);
  assert.equal(claims.iss, service.issuer);
  assert.equal(claims.aud, client.client_id);
  assert.equal(claims.nonce, undefined);
  assert.ok(claims.auth_time <= claims.iat);
  const info = await oidc.fetchUserInfo(config, tokens.access_token, claims.sub);
  assert.equal(info.email, user.email);

  // The refresh token refreshes as the code flow's does: a new ID token for the same user, the token rotated.
  const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token);
  assert.equal(refreshed.claims().sub, user.id);
  assert.equal(refreshed.claims().aud, client.client_id);
  assert.notEqual(refreshed.refresh_token, tokens.refresh_token);
  assert.equal(refreshed.scope, "openid email offline_access");

  // The device code was redeemed once: polled again, invalid_grant.
  const again = await refusal(oidc.pollDeviceAuthorizationGrant(config, { ...device, interval: 0 }));
  assert.equal(again.error, "invalid_grant");
});

test("the device flow denied on /device: the library's poll ends with access_denied", async () => {
  const client = await register(adminBrowser, {
    client_name: "Set-top box", token_endpoint_auth_method: "none", grant_types: [DEVICE_GRANT], scope: "openid",
  });
  const config = await configure(client);
  const device = await oidc.initiateDeviceAuthorization(config, {});
  const user = await newUser(service.base, "Deny");
  await onTheDevicePage(device, user, false);
  const e = await refusal(oidc.pollDeviceAuthorizationGrant(config, device));
  assert.ok(e instanceof oidc.ResponseBodyError, String(e));
  assert.equal(e.error, "access_denied");
});
