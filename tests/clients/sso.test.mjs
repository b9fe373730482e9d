// The real ssoClient() of @better-auth/sso (the 1.7 line that goes with better-auth 1.7.25) against a running
// service-auth server (run.sh): an organization's owner registers a SAML provider (sso.register), reads and changes
// it (sso.providers, sso.getProvider, sso.updateProvider), asks for its domain's TXT record
// (sso.requestDomainVerification), and signIn.sso reaches it by e-mail, organization slug and providerId; the
// sign-in is followed to its end through a real SAML identity provider (samlify, tests/saml/idp.mjs) posting to the
// ACS, and the session is the client's; a roleMapping set through sso.updateProvider gives the IdP's groups their
// role at the next sign-in. An OpenID Connect registration whose issuer is not trusted, and the plugin's codes as
// the client hands them over. Run by ./run.sh.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { createAuthClient } from "better-auth/client";
import { organizationClient } from "better-auth/client/plugins";
import { ssoClient } from "@better-auth/sso/client";
import { jarFetch } from "./jar.mjs";

const BASE = process.env.SERVICE_AUTH_URL;
const PASSWORD = "correct horse battery staple";
const stamp = `${Date.now()}${Math.floor(Math.random() * 1e6)}`;

function browser() {
  const jar = new Map();
  const client = createAuthClient({
    baseURL: BASE,
    fetchOptions: { customFetchImpl: jarFetch(BASE, jar) },
    plugins: [organizationClient(), ssoClient()],
  });
  return { client, jar };
}

/** The SAML identity provider of tests/saml: one JSON line per login, answered with the signed response. */
function samlIdp() {
  const script = fileURLToPath(new URL("../saml/idp.mjs", import.meta.url));
  // samlify warns on stderr about the SP metadata it is given (no single logout): not this test's concern.
  const child = spawn(process.execPath, [script], { stdio: ["pipe", "pipe", "ignore"] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => JSON.parse((await lines.next()).value);
  return {
    first: next(),
    async login(request) {
      child.stdin.write(`${JSON.stringify(request)}\n`);
      const answer = await next();
      assert.equal(answer.error, undefined, answer.error);
      return answer;
    },
    stop: () => child.kill(),
  };
}

/** Signs `email` in through the IdP (its response bent by `variant`) from a fresh browser, which posts the IdP's
 *  signed answer to the ACS as the IdP's page makes it: that browser, the ACS's answer, and the same post again. */
async function throughIdp(idp, spMetadata, email, variant = {}) {
  const who = browser();
  const started = await who.client.signIn.sso({ email, callbackURL: "/dashboard", newUserCallbackURL: "/welcome" });
  assert.equal(started.error, null);
  const answer = await idp.login({ sp: spMetadata, login: started.data.url, email, name: "Ann Example", variant });
  const form = new URLSearchParams({ SAMLResponse: answer.SAMLResponse });
  if (answer.RelayState) form.set("RelayState", answer.RelayState);
  const post = () => jarFetch("https://idp.saml.test", who.jar)(answer.acs, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: form,
    redirect: "manual",
  });
  return { who, posted: await post(), postAgain: post };
}

test("ssoClient: register a SAML provider, read and change it, and signIn.sso by email, slug and id to a session", async (t) => {
  const idp = samlIdp();
  t.after(() => idp.stop());
  const { entityID, sso, cert } = await idp.first;

  const owner = browser();
  const up = await owner.client.signUp.email({ name: "SSO Owner", email: `sso-owner-${stamp}@example.com`, password: PASSWORD });
  assert.equal(up.error, null);
  const slug = `sso-${stamp}`;
  const org = await owner.client.organization.create({ name: "SSO Org", slug });
  assert.equal(org.error, null);
  const domain = `sso${stamp}.test`;
  const providerId = `saml-${stamp}`;
  const issuer = `${BASE}/api/auth/sso/saml2/sp/metadata?providerId=${providerId}`;

  const registered = await owner.client.sso.register({
    providerId,
    issuer,
    domain,
    organizationId: org.data.id,
    samlConfig: {
      entryPoint: sso,
      cert,
      idpMetadata: { entityID },
      wantAssertionsSigned: true,
      callbackUrl: "/dashboard",
    },
  });
  assert.equal(registered.error, null, JSON.stringify(registered.error));
  assert.equal(registered.data.providerId, providerId);
  assert.equal(registered.data.organizationId, org.data.id);
  assert.equal(registered.data.domainVerified, false);
  assert.equal(registered.data.oidcConfig, null);
  assert.ok(!JSON.stringify(registered.data).includes("PRIVATE KEY"), "no key in the answer");

  const listed = await owner.client.sso.providers();
  assert.equal(listed.error, null);
  const mine = listed.data.providers.find((p) => p.providerId === providerId);
  assert.equal(mine.type, "saml");
  assert.equal(mine.samlConfig.idpEntityID ?? entityID, entityID);
  const got = await owner.client.sso.getProvider({ query: { providerId } });
  assert.equal(got.error, null);
  assert.equal(got.data.providerId, providerId);
  const unknown = await owner.client.sso.getProvider({ query: { providerId: `none-${stamp}` } });
  assert.equal(unknown.error.status, 404);
  assert.equal(unknown.error.code, "PROVIDER_NOT_FOUND");

  // Not verified yet: no sign-in through it, in the plugin's words.
  const early = await browser().client.signIn.sso({ providerId, callbackURL: "/dashboard" });
  assert.equal(early.error.status, 401);
  assert.equal(early.error.code, "PROVIDER_DOMAIN_HAS_NOT_BEEN_VERIFIED");
  const asked = await owner.client.sso.requestDomainVerification({ providerId });
  assert.equal(asked.error, null);
  assert.match(asked.data.domainVerificationToken, /^[A-Za-z0-9]{24}$/);
  // A change of its domains (before they are verified: a change after takes the verification back).
  const changed = await owner.client.sso.updateProvider({ providerId, domain: `${domain},eu.${domain}` });
  assert.equal(changed.error, null, JSON.stringify(changed.error));
  assert.equal(changed.data.domain, `${domain},eu.${domain}`);
  // No DNS here: the service administrator confirms the domains instead (docs/guides/sso.md).
  const admin = browser();
  const signedIn = await admin.client.signIn.email({ email: process.env.ADMIN_EMAIL, password: process.env.ADMIN_PASSWORD });
  assert.equal(signedIn.error, null);
  const confirmed = await jarFetch(BASE, admin.jar)(`${BASE}/api/admin/sso/providers/${providerId}/verify-domain`, { method: "POST" });
  assert.equal(confirmed.status, 200, await confirmed.text());

  // signIn.sso by each way of naming the provider: the IdP's URL with the AuthnRequest, and a redirect.
  const metadata = await fetch(`${BASE}/api/auth/sso/saml2/sp/metadata?providerId=${providerId}`);
  assert.equal(metadata.status, 200);
  const spMetadata = await metadata.text();
  for (const by of [{ email: `ann@${domain}` }, { organizationSlug: slug }, { providerId }, { domain }]) {
    const { client } = browser();
    const started = await client.signIn.sso({ ...by, callbackURL: "/dashboard", errorCallbackURL: "/sso-error" });
    assert.equal(started.error, null, `${JSON.stringify(by)}: ${JSON.stringify(started.error)}`);
    assert.equal(started.data.redirect, true);
    assert.ok(started.data.url.startsWith(`${sso}?SAMLRequest=`), started.data.url);
  }

  // Followed to its end: the IdP's signed answer posted to the ACS from the browser that started it.
  const { who: ann, posted, postAgain } = await throughIdp(idp, spMetadata, `ann@${domain}`);
  assert.equal(posted.status, 302, await posted.text());
  assert.equal(posted.headers.get("location"), "/welcome", "a new account goes to newUserCallbackURL");
  const session = await ann.client.getSession();
  assert.equal(session.error, null);
  assert.equal(session.data.user.email, `ann@${domain}`);
  assert.equal(session.data.user.name, "Ann Example");
  const roleOfAnn = async () => {
    const members = await owner.client.organization.listMembers({ query: { organizationId: org.data.id } });
    return members.data.members.find((m) => m.user.email === `ann@${domain}`)?.role;
  };
  assert.equal(await roleOfAnn(), "member");

  // The same response again: refused (it answered a request that is spent).
  const replay = await postAgain();
  assert.equal(replay.status, 400);

  // roleMapping (this service's own field) goes through the client's updateProvider as it is: the IdP's groups
  // attribute makes ann an admin at her next sign-in.
  const mappings = [{ group: "Admins", role: "admin" }];
  const mapped = await owner.client.sso.updateProvider({ providerId, roleMapping: { mappings } });
  assert.equal(mapped.error, null, JSON.stringify(mapped.error));
  assert.deepEqual(mapped.data.roleMapping, { claim: null, mappings });
  const again = await throughIdp(idp, spMetadata, `ann@${domain}`, { attributes: { groups: ["Staff", "Admins"] } });
  assert.equal(again.posted.status, 302, await again.posted.text());
  assert.equal(await roleOfAnn(), "admin");

  const removed = await owner.client.sso.deleteProvider({ providerId });
  assert.equal(removed.error, null, JSON.stringify(removed.error));
  const gone = await browser().client.signIn.sso({ providerId, callbackURL: "/dashboard" });
  assert.equal(gone.error.status, 404);
  assert.equal(gone.error.code, "NO_PROVIDER_FOUND_FOR_THE_ISSUER");
});

test("ssoClient: the plugin's refusals as the client hands them over", async () => {
  const owner = browser();
  const up = await owner.client.signUp.email({ name: "SSO Other", email: `sso-other-${stamp}@example.com`, password: PASSWORD });
  assert.equal(up.error, null);
  const org = await owner.client.organization.create({ name: "SSO Other", slug: `sso-other-${stamp}` });
  assert.equal(org.error, null);
  const oidc = await owner.client.sso.register({
    providerId: `oidc-${stamp}`,
    issuer: "https://idp.untrusted.example",
    domain: `other${stamp}.test`,
    organizationId: org.data.id,
    oidcConfig: { clientId: "c", clientSecret: "s" },
  });
  assert.equal(oidc.error.status, 400, "an issuer not on a trusted origin is never fetched");
  assert.equal(oidc.error.code, "discovery_untrusted_origin", "the plugin's lower-case discovery code");
  const reserved = await owner.client.sso.register({
    providerId: "credential",
    issuer: `${BASE}/api/auth/sso/saml2/sp/metadata?providerId=credential`,
    domain: `other${stamp}.test`,
    organizationId: org.data.id,
    samlConfig: { entryPoint: "https://idp.saml.test/sso", cert: "x", idpMetadata: { entityID: "e" } },
  });
  assert.equal(reserved.error.status, 422, "the plugin's status");
  assert.equal(reserved.error.code, "THIS_PROVIDERID_IS_RESERVED_AND_CANNOT_BE_USED_FOR_AN_SSO_PROVIDER");
  const nothing = await browser().client.signIn.sso({ callbackURL: "/dashboard" });
  assert.equal(nothing.error.status, 400);
  assert.equal(nothing.error.code, "EMAIL_ORGANIZATIONSLUG_DOMAIN_OR_PROVIDERID_IS_REQUIRED");
  const none = await browser().client.signIn.sso({ email: `someone@none${stamp}.test`, callbackURL: "/dashboard" });
  assert.equal(none.error.status, 404);
  assert.equal(none.error.code, "NO_PROVIDER_FOUND_FOR_THE_ISSUER");
  const anonymous = await browser().client.sso.providers();
  assert.equal(anonymous.error.status, 401);
});
