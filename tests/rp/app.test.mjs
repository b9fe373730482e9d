// A real application on another origin signing a person in through service-auth's identity provider in headless
// Chromium (Debian's `chromium`, through puppeteer-core): app/ is a static page served at http://localhost:<port>
// (another site than the service at http://127.0.0.1:<port>) doing the code flow with PKCE with fetch and
// WebCrypto as a public client; the person signs in on the service's sign-in page and allows the application on
// its consent page; back at the application, the page redeems the code and shows the name userinfo answers. The
// service trusts no origin (`trusted_origins` is empty): an OAuth client needs none.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
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
async function signInThroughApp(page, user, path, { signedIn = false, consent = true, problems }) {
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
  await Promise.all([page.waitForNavigation(), page.click("#submit")]);

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
