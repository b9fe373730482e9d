// A real application on another origin signing a person in through service-auth's identity provider in headless
// Chromium (Debian's `chromium`, through puppeteer-core): app/ is a static page served at http://localhost:<port>
// (another site than the service at http://127.0.0.1:<port>) doing the code flow with PKCE with fetch and
// WebCrypto as a public client; the person signs in on the service's sign-in page and allows the application on
// its consent page; back at the application, the page redeems the code and shows the name userinfo answers. Also
// `prompt=login` (the sign-in page asks a signed-in person again) and a person with a second factor (the password,
// then the authenticator's code). The service trusts no origin (`trusted_origins` is empty): an OAuth client needs
// none. Each test has a browser profile of its own.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { once } from "node:events";
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import puppeteer from "puppeteer-core";

import { PASSWORD, admin, newUser, register, startService } from "./service.mjs";

const here = dirname(fileURLToPath(import.meta.url));
let service, app, appOrigin, chromium;
const config = {};

before(async () => {
  service = await startService();
  const files = {
    "/": ["text/html; charset=utf-8", await readFile(join(here, "app", "index.html"))],
    "/callback": ["text/html; charset=utf-8", await readFile(join(here, "app", "index.html"))],
    "/app.js": ["text/javascript; charset=utf-8", await readFile(join(here, "app", "app.js"))],
    // Where the application is sent back after signing out at the service (its post_logout_redirect_uri).
    "/bye": ["text/html; charset=utf-8", '<!doctype html><html lang="en"><title>Bye</title><p id="bye">Signed out</p></html>'],
  };
  app = createServer((req, res) => {
    const path = new URL(req.url, "http://x").pathname;
    if (path === "/config.json") return res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(config));
    const file = files[path];
    if (!file) return res.writeHead(404).end();
    res.writeHead(200, { "content-type": file[0] }).end(file[1]);
  });
  app.listen(0, "127.0.0.1");
  await once(app, "listening");
  appOrigin = `http://localhost:${app.address().port}`;
  chromium = await puppeteer.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    // CI runs as root, where Chromium's sandbox cannot start; the pages are our own.
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
    headless: true,
  });
});

after(async () => {
  await chromium?.close();
  app?.close();
  await service?.stop();
});

/// Registers the application (a public client: a browser application holds no secret; its loopback redirect matches
/// on any port, RFC 8252) and points the page at it.
async function registerApp() {
  const client = await register(await admin(service.base), {
    client_name: "Notes", application_type: "native", token_endpoint_auth_method: "none",
    redirect_uris: ["http://localhost/callback"], scope: "openid profile",
  });
  Object.assign(config, { issuer: service.issuer, client_id: client.client_id });
}

/// From the application's page at `path` through the service's pages and back: answers the page, signed in.
/// `signedIn`: whether the browser already has a session at the service (then the sign-in page must still ask,
/// as `prompt=login` wants); `consent`: whether the consent page is expected.
async function signInThroughApp(page, user, path, { signedIn = false, consent = true, secondFactor, problems }) {
  await page.goto(`${appOrigin}${path}`);
  await page.waitForSelector("#sign-in:not([hidden]), #status[data-state=error]");
  const start = await page.$eval("#status", (e) => e.textContent);
  assert.equal(start, "Signed out", `the application says: ${start}; ${problems.join("; ")}`);
  await Promise.all([page.waitForNavigation(), page.click("#sign-in")]);

  // The service's sign-in page (the application's request waits in returnTo).
  await page.waitForSelector("#email", { visible: true });
  assert.equal(new URL(page.url()).origin, service.base);
  assert.equal(new URL(page.url()).pathname, "/sign-in");
  assert.equal(await page.$eval("#signed-in", (e) => e.hidden), true, "no offer to continue with the old session");
  assert.equal(await page.$eval("#title", (e) => e.textContent), signedIn ? "Sign in again" : "Sign in");
  await page.type("#email", user.email);
  await page.type("#password", PASSWORD);
  if (secondFactor) {
    // The password is right; the page asks for the authenticator's code, then goes on to the request.
    await page.click("#submit");
    await page.waitForSelector("#code", { visible: true });
    await page.type("#code", await secondFactor());
    await Promise.all([page.waitForNavigation(), page.click("#code-submit")]);
  } else {
    await Promise.all([page.waitForNavigation(), page.click("#submit")]);
  }

  if (consent) {
    // The consent page names the application; Allow sends the browser back to it.
    await page.waitForSelector("#allow", { visible: true });
    assert.equal(new URL(page.url()).pathname, "/consent");
    assert.equal(await page.$eval("#client", (e) => e.textContent), "Notes");
    await Promise.all([page.waitForNavigation(), page.click("#allow")]);
  }

  // Back at the application, which redeems the code and asks userinfo.
  await page.waitForSelector("#status[data-state]");
  const status = await page.$eval("#status", (e) => e.textContent);
  assert.equal(status, "Signed in", `the application says: ${status}; ${problems.join("; ")}`);
  assert.equal(new URL(page.url()).origin, appOrigin);
  assert.equal(await page.$eval("#name", (e) => e.textContent), user.name);
}

/// RFC 6238's code of the base32 `secret` for the current 30-second step, waiting out a step's last seconds so
/// that the server reads the same step.
async function totp(secret, stepsAgo = 0) {
  const left = 30 - (Math.floor(Date.now() / 1000) % 30);
  if (left <= 3) await new Promise((resolve) => setTimeout(resolve, (left + 1) * 1000));
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = 0, value = 0;
  const key = [];
  for (const c of secret.replace(/=+$/, "").toUpperCase()) {
    value = (value << 5) | alphabet.indexOf(c);
    bits += 5;
    if (bits >= 8) {
      key.push((value >>> (bits - 8)) & 255);
      bits -= 8;
    }
  }
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(Date.now() / 30_000) - stepsAgo));
  const mac = createHmac("sha1", Buffer.from(key)).update(counter).digest();
  const offset = mac[19] & 15;
  return String((mac.readUInt32BE(offset) & 0x7fffffff) % 1e6).padStart(6, "0");
}

/// A page in a browser profile of its own (no cookie from another test), with its script errors collected.
async function freshPage() {
  const context = await chromium.createBrowserContext();
  const page = await context.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push(e.message));
  page.on("console", (m) => m.type() === "error" && problems.push(m.text()));
  return { page, problems, close: () => context.close() };
}

test("an application on another origin signs a person in through the sign-in and consent pages in Chromium", async () => {
  await registerApp();
  const user = await newUser(service.base, "Chrome");
  const { page, problems, close } = await freshPage();
  try {
    await signInThroughApp(page, user, "/", { problems });
  } finally {
    await close();
  }
});

test("prompt=login: the sign-in page asks a signed-in person to sign in again, then back to the application", async () => {
  await registerApp();
  const user = await newUser(service.base, "Again");
  const { page, problems, close } = await freshPage();
  try {
    await signInThroughApp(page, user, "/", { problems });
    // Signed in at the service now, and the application allowed: prompt=login still asks for the password.
    await signInThroughApp(page, user, "/?prompt=login", { signedIn: true, consent: false, problems });
  } finally {
    await close();
  }
});

test("a person with a second factor signs in to the application: the password, then the authenticator's code", async () => {
  await registerApp();
  const user = await newUser(service.base, "Factor");
  const enabled = await user.browser.api("/api/auth/two-factor/enable", { password: PASSWORD });
  assert.equal(enabled.status, 200, await enabled.clone().text());
  const secret = new URL((await enabled.json()).totpURI).searchParams.get("secret");
  // Enrolled with the previous step's code (the server allows one step of drift), so that the current step's code
  // is still unspent for the sign-in.
  const verified = await user.browser.api("/api/auth/two-factor/verify-totp", { code: await totp(secret, 1) });
  assert.equal(verified.status, 200, await verified.clone().text());
  const { page, problems, close } = await freshPage();
  try {
    await signInThroughApp(page, user, "/", { secondFactor: () => totp(secret), problems });
  } finally {
    await close();
  }
});

test("the authorization request posted as a form from another site: a signed-in person goes straight back", async () => {
  await registerApp();
  const user = await newUser(service.base, "Poster");
  const { page, problems, close } = await freshPage();
  try {
    await signInThroughApp(page, user, "/", { problems });
    // Signed in at the service and the application allowed: the posted request (303 to its GET, which carries
    // the SameSite=Lax cookie a cross-site POST does not) comes straight back with a code.
    await page.goto(`${appOrigin}/?method=post`);
    await page.waitForSelector("#sign-in:not([hidden])");
    await Promise.all([page.waitForNavigation(), page.click("#sign-in")]);
    await page.waitForSelector("#status[data-state]");
    const status = await page.$eval("#status", (e) => e.textContent);
    assert.equal(status, "Signed in", `the application says: ${status}; ${problems.join("; ")}`);
    assert.equal(new URL(page.url()).origin, appOrigin, "no page of the service in between");
    assert.equal(await page.$eval("#name", (e) => e.textContent), user.name);
  } finally {
    await close();
  }
});

test("the logout confirmation page: a person asked to sign out stays signed in, then signs out and is sent back", async () => {
  const bye = `${appOrigin}/bye`;
  const client = await register(await admin(service.base), {
    client_name: "Notes", application_type: "native", token_endpoint_auth_method: "none",
    redirect_uris: ["http://localhost/callback"], scope: "openid profile",
    enable_end_session: true, post_logout_redirect_uris: [bye],
  });
  Object.assign(config, { issuer: service.issuer, client_id: client.client_id });
  const user = await newUser(service.base, "Leaver");
  const { page, problems, close } = await freshPage();
  const signedIn = () =>
    page.evaluate(async () => (await (await fetch("/api/auth/get-session")).json())?.user?.email ?? null);
  // The application's sign-out link, with no ID token to hint with: the service asks the person.
  const logout = `${service.base}/api/auth/oauth2/end-session?${new URLSearchParams({
    client_id: client.client_id, post_logout_redirect_uri: bye, state: "st",
  })}`;
  try {
    await signInThroughApp(page, user, "/", { problems });
    await page.goto(logout);
    await page.waitForSelector("#confirm", { visible: true });
    assert.equal(new URL(page.url()).pathname, "/sign-out");
    assert.equal(await page.$eval("#user", (e) => e.textContent), user.email);
    assert.equal(await page.evaluate(() => document.activeElement?.id), "confirm", "the choice has the focus");
    // Stay signed in: nothing ends.
    await page.click("#cancel");
    await page.waitForSelector("#kept", { visible: true });
    assert.equal(await signedIn(), user.email);
    // Asked again, the person signs out: back at the application's registered address, with its state.
    await page.goto(logout);
    await page.waitForSelector("#confirm", { visible: true });
    await Promise.all([page.waitForNavigation(), page.click("#confirm")]);
    const back = new URL(page.url());
    assert.equal(`${back.origin}${back.pathname}`, bye);
    assert.equal(back.searchParams.get("state"), "st");
    await page.goto(`${service.base}/sign-out`);
    await page.waitForSelector("#done", { visible: true });
    assert.equal(await signedIn(), null, "the session has ended");
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});
