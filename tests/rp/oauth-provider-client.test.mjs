// @better-auth/oauth-provider's client plugin (oauthProviderClient(), 1.7.5) with better-auth 1.7.25's
// createAuthClient, unchanged, against service-auth's identity provider (issue #46): every call of the plugin's
// wire that the service serves, made through the client as an application's pages make them (the session in a
// cookie jar, service.mjs): the authorization request answered to a script, the consent page's client lookup and
// answer, and the user's consents listed, read, narrowed and withdrawn.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createAuthClient } from "better-auth/client";
import { oauthProviderClient } from "@better-auth/oauth-provider/client";

import { RP, admin, newUser, register, startService } from "./service.mjs";

let service, adminBrowser;

before(async () => {
  service = await startService();
  adminBrowser = await admin(service.base);
});

after(async () => {
  await service?.stop();
});

function clientFor(user) {
  return createAuthClient({
    baseURL: service.base,
    plugins: [oauthProviderClient()],
    fetchOptions: { customFetchImpl: user.browser.customFetchImpl },
  });
}

/// An authorization request's parameters (PKCE S256 with a fixed challenge: the code is never redeemed here).
function request(clientId, scope) {
  return {
    response_type: "code", client_id: clientId, redirect_uri: RP, scope, state: "plugin-state",
    code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", code_challenge_method: "S256",
  };
}

test("the consent page's calls: the client's name, the authorization answered to a script, the consent's answer", async () => {
  const { client_id } = await register(adminBrowser, { client_name: "Plugin app", redirect_uris: [RP] });
  const user = await newUser(service.base, "Plugin");
  const authClient = clientFor(user);

  const named = await authClient.oauth2.publicClient({ query: { client_id } });
  assert.equal(named.error, null, JSON.stringify(named.error));
  assert.equal(named.data.client_id, client_id);
  assert.equal(named.data.client_name, "Plugin app");
  const unknown = await authClient.oauth2.publicClient({ query: { client_id: "no-such-client" } });
  assert.equal(unknown.error.status, 404);

  // The authorization request through the client: a script's request gets the redirect as JSON, to the consent page.
  const asked = await authClient.oauth2.authorize({ query: request(client_id, "openid profile") });
  assert.equal(asked.error, null, JSON.stringify(asked.error));
  assert.equal(asked.data.redirect, true);
  const consentPage = new URL(asked.data.url, service.base);
  assert.equal(consentPage.pathname, "/consent");

  // The consent page's answer with the page's query, as the client plugin sends it.
  const denied = await authClient.oauth2.consent({ accept: false, oauth_query: consentPage.search.slice(1) });
  assert.equal(denied.error, null, JSON.stringify(denied.error));
  const deniedUrl = new URL(denied.data.url);
  assert.equal(deniedUrl.searchParams.get("error"), "access_denied");
  assert.equal(deniedUrl.searchParams.get("state"), "plugin-state");

  const allowed = await authClient.oauth2.consent({ accept: true, oauth_query: consentPage.search.slice(1) });
  assert.equal(allowed.error, null, JSON.stringify(allowed.error));
  assert.equal(allowed.data.redirect, true);
  const back = new URL(allowed.data.url);
  assert.equal(`${back.origin}${back.pathname}`, RP);
  assert.ok(back.searchParams.get("code"));
  assert.equal(back.searchParams.get("iss"), service.issuer);

  // Remembered: the same request now goes straight back to the client.
  const again = await authClient.oauth2.authorize({ query: request(client_id, "openid") });
  assert.ok(again.data.url.startsWith(`${RP}?code=`), again.data.url);

  // Without a session the consent's answer is refused.
  const signedOut = createAuthClient({ baseURL: service.base, plugins: [oauthProviderClient()] });
  const refused = await signedOut.oauth2.consent({ accept: true, oauth_query: consentPage.search.slice(1) });
  assert.equal(refused.error.status, 401);
});

test("a user's consents through the client: listed, read, narrowed and withdrawn", async () => {
  const a = await register(adminBrowser, { client_name: "Reader", redirect_uris: [RP] });
  const b = await register(adminBrowser, { client_name: "Writer", redirect_uris: [RP] });
  const user = await newUser(service.base, "Owner");
  const authClient = clientFor(user);
  for (const [{ client_id }, scope] of [[a, "openid profile email"], [b, "openid"]]) {
    const asked = await authClient.oauth2.authorize({ query: request(client_id, scope) });
    const page = new URL(asked.data.url, service.base);
    const allowed = await authClient.oauth2.consent({ accept: true, oauth_query: page.search.slice(1) });
    assert.equal(allowed.error, null, JSON.stringify(allowed.error));
  }

  const list = await authClient.oauth2.getConsents();
  assert.equal(list.error, null, JSON.stringify(list.error));
  assert.equal(list.data.length, 2);
  const mine = list.data.find((c) => c.clientId === a.client_id);
  assert.deepEqual(mine.scopes, ["openid", "profile", "email"]);
  assert.equal(mine.userId, user.id);

  const one = await authClient.oauth2.getConsent({ query: { id: mine.id } });
  assert.deepEqual(one.data, mine);

  const narrowed = await authClient.oauth2.updateConsent({ id: mine.id, update: { scopes: ["openid", "email"] } });
  assert.equal(narrowed.error, null, JSON.stringify(narrowed.error));
  assert.deepEqual(narrowed.data.scopes, ["openid", "email"]);
  // A scope given up is asked for again; one kept is not.
  const kept = await authClient.oauth2.authorize({ query: request(a.client_id, "openid email") });
  assert.ok(kept.data.url.startsWith(`${RP}?code=`), kept.data.url);
  const dropped = await authClient.oauth2.authorize({ query: request(a.client_id, "openid profile") });
  assert.equal(new URL(dropped.data.url, service.base).pathname, "/consent");

  const withdrawn = await authClient.oauth2.deleteConsent({ id: mine.id });
  assert.equal(withdrawn.error, null, JSON.stringify(withdrawn.error));
  const left = await authClient.oauth2.getConsents();
  assert.deepEqual(left.data.map((c) => c.clientId), [b.client_id]);
  const gone = await authClient.oauth2.getConsent({ query: { id: mine.id } });
  assert.equal(gone.error.status, 404);

  // Another user's consent is not theirs to read or withdraw.
  const other = clientFor(await newUser(service.base, "Other"));
  assert.equal((await other.oauth2.getConsent({ query: { id: left.data[0].id } })).error.status, 404);
  assert.equal((await other.oauth2.deleteConsent({ id: left.data[0].id })).error.status, 404);
});
