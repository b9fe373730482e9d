// The real better-auth client (createAuthClient, 1.7.25) signing in through a real OpenID Connect provider
// (oidc-provider, provider.mjs) with a release service-auth server between them. The browser is played by a
// cookie jar per host and redirects followed by hand; the client's own calls go through its fetch. The last test is
// an app that gets its ID token from the provider itself (as a native SDK does) and signs in with `idToken`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import readline from "node:readline";
import { createHash } from "node:crypto";
import { createAuthClient } from "better-auth/client";

const COOKIE = "service-auth.session_token";
let idp, server, work, BASE, ISSUER;

function lines(child) {
  const rl = readline.createInterface({ input: child.stdout });
  const queue = [];
  const waiting = [];
  rl.on("line", (line) => (waiting.length ? waiting.shift()(line) : queue.push(line)));
  return () => (queue.length ? Promise.resolve(queue.shift()) : new Promise((resolve) => waiting.push(resolve)));
}

before(async () => {
  idp = spawn("node", ["provider.mjs"], { stdio: ["pipe", "pipe", "ignore"] });
  const idpLine = lines(idp);
  ISSUER = JSON.parse(await idpLine()).issuer;
  work = mkdtempSync(join(tmpdir(), "oidc-client-"));
  writeFileSync(join(work, "secret"), "svc-secret\n");
  writeFileSync(
    join(work, "config.toml"),
    `[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\n` +
      `[[oauth.providers]]\nid = "local"\nissuer = "${ISSUER}"\nclient_id = "svc"\nclient_secret_file = "secret"\n` +
      `trusted_for_linking = true\n`,
  );
  server = spawn(process.env.SERVICE_AUTH_BIN, ["serve"], {
    cwd: work,
    env: { ...process.env, SERVICE_AUTH_LISTEN: "127.0.0.1:0", SERVICE_AUTH_DATA_DIR: join(work, "data"), SERVICE_AUTH_LOG: "warn" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const serverLine = lines(server);
  for (;;) {
    const line = await serverLine();
    if (line.startsWith("listening on ")) {
      BASE = `http://${line.slice("listening on ".length).trim()}`;
      break;
    }
  }
  const uris = [`${BASE}/api/auth/callback/local`, `${BASE}/api/auth/oauth2/callback/local`, `${BASE}/app/callback`];
  idp.stdin.write(`${JSON.stringify({ clients: [{ client_id: "svc", client_secret: "svc-secret", redirect_uris: uris }] })}\n`);
  assert.match(await idpLine(), /ready/);
});

after(() => {
  server?.kill();
  idp?.stdin.end();
  idp?.kill();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** One browser profile: a cookie jar per host, shared by the client's calls and the navigation. */
function browser() {
  const jars = new Map();
  const jarOf = (url) => {
    const host = new URL(url).host;
    if (!jars.has(host)) jars.set(host, new Map());
    return jars.get(host);
  };
  const request = async (url, init = {}) => {
    const jar = jarOf(url);
    const headers = new Headers(init.headers);
    if (jar.size) headers.set("cookie", [...jar].map(([k, v]) => `${k}=${v}`).join("; "));
    const response = await fetch(url, { ...init, headers, redirect: "manual" });
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(";").map((s) => s.trim());
      const [name, value] = [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)];
      if (attrs.some((a) => a.toLowerCase() === "max-age=0")) jar.delete(name);
      else jar.set(name, value);
    }
    return response;
  };
  const customFetchImpl = (input, init = {}) => {
    const headers = new Headers(init.headers);
    headers.set("origin", BASE);
    return request(input.toString(), { ...init, headers });
  };
  const client = createAuthClient({ baseURL: BASE, fetchOptions: { customFetchImpl } });
  /** Follows `url` through the provider, logging in as `login` when asked; returns where the callback sends us. */
  const through = async (url, login) => {
    let response = await request(url);
    for (let i = 0; i < 12; i++) {
      if (url.includes("/api/auth/callback/") || url.includes("/api/auth/oauth2/callback/")) {
        assert.equal(response.status, 302, await response.text());
        return new URL(response.headers.get("location"), url).pathname + new URL(response.headers.get("location"), url).search;
      }
      if (response.status >= 300 && response.status < 400) {
        url = new URL(response.headers.get("location"), url).toString();
        response = await request(url);
      } else if (response.status === 200) {
        assert.match(await response.text(), /name="login"/);
        response = await request(url, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ login }).toString(),
        });
      } else {
        assert.fail(`stuck at ${url}: ${response.status}`);
      }
    }
    assert.fail("too many redirects");
  };
  /** The app's own code flow as the client `svc` (PKCE, `nonce`) to its redirect URI: the provider's tokens. */
  const tokensFromProvider = async (login, nonce) => {
    const redirectUri = `${BASE}/app/callback`;
    const verifier = "an-app-s-own-pkce-verifier-of-43-characters-or-more";
    const challenge = createHash("sha256").update(verifier).digest("base64url");
    const params = new URLSearchParams({
      client_id: "svc", response_type: "code", scope: "openid email profile", redirect_uri: redirectUri,
      state: "app-state", nonce, code_challenge: challenge, code_challenge_method: "S256",
    });
    let url = `${ISSUER}/auth?${params}`;
    let response = await request(url);
    let code;
    for (let i = 0; i < 12 && !code; i++) {
      const location = response.headers.get("location");
      if (response.status >= 300 && response.status < 400 && location.startsWith(redirectUri)) {
        code = new URL(location).searchParams.get("code");
      } else if (response.status >= 300 && response.status < 400) {
        url = new URL(location, url).toString();
        response = await request(url);
      } else {
        assert.match(await response.text(), /name="login"/);
        response = await request(url, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ login }).toString(),
        });
      }
    }
    assert.ok(code, "the provider's code");
    const token = await fetch(`${ISSUER}/token`, {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: `Basic ${Buffer.from("svc:svc-secret").toString("base64")}`,
      },
      body: new URLSearchParams({ grant_type: "authorization_code", code, redirect_uri: redirectUri, code_verifier: verifier }),
    });
    assert.equal(token.status, 200);
    return token.json();
  };
  return { client, through, tokensFromProvider, session: () => jarOf(BASE).get(COOKIE) };
}

test("signIn.social: a new account, then the same account again", async () => {
  const alice = browser();
  const started = await alice.client.signIn.social({
    provider: "local",
    callbackURL: "/home",
    newUserCallbackURL: "/welcome",
    errorCallbackURL: "/oops",
    disableRedirect: true,
  });
  assert.equal(started.error, null);
  assert.equal(started.data.redirect, false);
  assert.ok(started.data.url.startsWith(`${ISSUER}/auth?`), started.data.url);
  assert.equal(await alice.through(started.data.url, "alice@example.com"), "/welcome");
  assert.ok(alice.session(), "the session cookie");
  const session = await alice.client.getSession();
  assert.equal(session.data.user.email, "alice@example.com");
  assert.equal(session.data.user.emailVerified, true);

  const accounts = await alice.client.listAccounts();
  assert.equal(accounts.error, null);
  assert.deepEqual(accounts.data.map((a) => a.providerId), ["local"]);
  assert.equal(accounts.data[0].accountId, "alice@example.com");

  const again = browser();
  const second = await again.client.signIn.social({ provider: "local", callbackURL: "/home", disableRedirect: true });
  assert.equal(await again.through(second.data.url, "alice@example.com"), "/home");
  assert.equal((await again.client.getSession()).data.user.id, session.data.user.id);
});

test("signIn.oauth2 (the generic plugin's call) comes back through oauth2/callback", async () => {
  const bo = browser();
  const started = await bo.client.signIn.oauth2({ providerId: "local", callbackURL: "/home", disableRedirect: true });
  assert.equal(started.error, null);
  assert.ok(started.data.url.includes(encodeURIComponent("/api/auth/oauth2/callback/local")), started.data.url);
  assert.equal(await bo.through(started.data.url, "bo@example.com"), "/home");
  assert.equal((await bo.client.getSession()).data.user.email, "bo@example.com");
});

test("linkSocial links the identity to the signed-in account; unlinkAccount removes it, never the last", async () => {
  const carol = browser();
  const up = await carol.client.signUp.email({ name: "Carol", email: "carol@example.com", password: "correct horse battery staple" });
  assert.equal(up.error, null);
  const linking = await carol.client.linkSocial({ provider: "local", callbackURL: "/linked", disableRedirect: true });
  assert.equal(linking.error, null);
  assert.equal(await carol.through(linking.data.url, "carol@example.com"), "/linked");
  const accounts = await carol.client.listAccounts();
  assert.deepEqual(accounts.data.map((a) => a.providerId).sort(), ["credential", "local"]);
  const local = accounts.data.find((a) => a.providerId === "local");

  const unlinked = await carol.client.unlinkAccount({ providerId: "local", accountId: local.accountId });
  assert.equal(unlinked.error, null);
  assert.equal(unlinked.data.status, true);
  const last = await carol.client.unlinkAccount({ providerId: "credential", accountId: up.data.user.id });
  assert.equal(last.error.status, 400);
  assert.equal(last.error.code, "FAILED_TO_UNLINK_LAST_ACCOUNT");
});

test("an unverified identity meeting an existing account is refused with a code", async () => {
  const dan = browser();
  await dan.client.signUp.email({ name: "Dan", email: "dan@example.com", password: "correct horse battery staple" });
  const other = browser();
  const started = await other.client.signIn.social({ provider: "local", callbackURL: "/home", errorCallbackURL: "/oops", disableRedirect: true });
  assert.equal(await other.through(started.data.url, "dan@example.com#unverified"), "/oops?error=account_not_linked");
  assert.equal(other.session(), undefined);
});

test("signIn.social with idToken: the app's own ID token signs in at once, a wrong nonce is refused", async () => {
  const eve = browser();
  const tokens = await eve.tokensFromProvider("eve@example.com", "app-nonce");
  const wrong = await eve.client.signIn.social({
    provider: "local",
    idToken: { token: tokens.id_token, nonce: "another-nonce", accessToken: tokens.access_token },
  });
  assert.equal(wrong.error.status, 401);
  assert.equal(wrong.error.code, "INVALID_TOKEN");
  assert.equal(eve.session(), undefined);
  const signedIn = await eve.client.signIn.social({
    provider: "local",
    idToken: { token: tokens.id_token, nonce: "app-nonce", accessToken: tokens.access_token },
  });
  assert.equal(signedIn.error, null);
  assert.equal(signedIn.data.redirect, false);
  assert.equal(signedIn.data.user.email, "eve@example.com");
  assert.equal(signedIn.data.token, eve.session(), "the session cookie");
  const session = await eve.client.getSession();
  assert.equal(session.data.user.email, "eve@example.com");
  const accounts = await eve.client.listAccounts();
  assert.deepEqual(accounts.data.map((a) => a.providerId), ["local"]);
});
