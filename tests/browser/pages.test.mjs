// The service's own pages, in headless Chromium against a release server (Debian's `chromium`, through
// puppeteer-core): the reset-password form and the "e-mail verified" page the mailed links lead to when the
// application names no page of its own. Mail goes to a directory transport the test reads the links from.
// axe-core checks each page in light and dark (no serious or critical violation). Run by ./run.sh.
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";

import { checkAccessibility, launchBrowser, startService, stopService } from "./helpers.mjs";

let work;
let server; // { child, url, stderr }
let browser;

/// The link in the newest message to `to` not read before (the directory transport's files), as a URL on the
/// running server (the message's links start with the configured base_url).
const read = new Set();
async function nextLink(to) {
  for (let i = 0; i < 300; i++) {
    for (const name of (await readdir(join(work, "mail")).catch(() => [])).filter((n) => n.endsWith(".eml"))) {
      if (read.has(name)) continue;
      const text = (await readFile(join(work, "mail", name), "utf8")).replace(/=\r?\n/g, "").replace(/=3D/g, "=");
      if (!text.includes(`To: ${to}`)) continue;
      read.add(name);
      const path = text.match(/http:\/\/auth\.test(\/api\/auth\/\S+)/)[1];
      return `${server.url}${path}`;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no message to ${to}`);
}

async function api(path, body) {
  const r = await fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

before(async () => {
  work = await mkdtemp(join(tmpdir(), "service-auth-pages-"));
  server = await startService(work,
    `base_url = "http://auth.test"\n[rate_limit]\nsign_in_per_address = 0\n[email]\ndirectory = "${join(work, "mail")}"\n`);
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await stopService(server);
  if (work) await rm(work, { recursive: true, force: true });
});

test("a reset link without the application's page leads to the service's form, which sets the password", async () => {
  const email = "reset-page@example.com";
  assert.equal((await api("/api/auth/sign-up/email", { name: "Reset", email, password: "the first passphrase" })).status, 200);
  assert.equal((await api("/api/auth/request-password-reset", { email })).status, 200);
  const link = await nextLink(email);
  const page = await browser.newPage();
  const problems = [];
  // Script errors and policy violations; the 400 the short password provokes is the answer under test.
  page.on("console", (m) => m.type() === "error" && !/status of 400/.test(m.text()) && problems.push(m.text()));
  page.on("pageerror", (e) => problems.push(e.message));
  try {
    await page.goto(link);
    assert.match(new URL(page.url()).pathname, /^\/auth\/reset-password$/);
    assert.equal(await page.$eval("h1", (h) => h.textContent), "Choose a new password");
    await checkAccessibility(page, "reset form");

    // Two different passwords: said next to the form, announced, nothing sent.
    await page.type("#password", "a new passphrase");
    await page.type("#confirm", "another passphrase");
    await page.click("#submit");
    await page.waitForSelector("#error:not([hidden])");
    assert.equal(await page.$eval("#error", (e) => e.textContent), "The two passwords are not the same.");
    assert.equal(await page.$eval("#error", (e) => e.getAttribute("role")), "alert");
    await checkAccessibility(page, "reset form with an error");

    // A password the server refuses: its message, shown.
    await page.$eval("#password", (i) => (i.value = ""));
    await page.$eval("#confirm", (i) => (i.value = ""));
    await page.type("#password", "short");
    await page.type("#confirm", "short");
    await page.click("#submit");
    await page.waitForFunction(() => /short/i.test(document.getElementById("error").textContent));

    await page.$eval("#password", (i) => (i.value = ""));
    await page.$eval("#confirm", (i) => (i.value = ""));
    await page.type("#password", "a new passphrase");
    await page.type("#confirm", "a new passphrase");
    await page.click("#submit");
    await page.waitForSelector("#done:not([hidden])");
    assert.equal(await page.$eval("h1", (h) => h.textContent), "Password changed");
    await checkAccessibility(page, "password changed");
    assert.equal((await api("/api/auth/sign-in/email", { email, password: "a new passphrase" })).status, 200);
    assert.equal((await api("/api/auth/sign-in/email", { email, password: "the first passphrase" })).status, 401);

    // The same link again: spent.
    await page.goto(link);
    assert.equal(await page.$eval("h1", (h) => h.textContent), "This link is no longer valid");
    await checkAccessibility(page, "spent reset link");
    assert.deepEqual(problems, [], "no script error and no policy violation");
  } finally {
    await page.close();
  }
});

test("a verification link without the application's page verifies and says so", async () => {
  const email = "verify-page@example.com";
  assert.equal((await api("/api/auth/sign-up/email", { name: "Verify", email, password: "a checking passphrase" })).status, 200);
  assert.equal((await api("/api/auth/send-verification-email", { email })).status, 200);
  const link = await nextLink(email);
  const page = await browser.newPage();
  try {
    await page.goto(link);
    assert.equal(new URL(page.url()).pathname, "/auth/email-verified");
    assert.equal(await page.$eval("h1", (h) => h.textContent), "E-mail address confirmed");
    await checkAccessibility(page, "e-mail verified");
    const signIn = await api("/api/auth/sign-in/email", { email, password: "a checking passphrase" });
    assert.equal(signIn.body.user.emailVerified, true);
    await page.goto(link);
    assert.equal(await page.$eval("h1", (h) => h.textContent), "This link is no longer valid");
  } finally {
    await page.close();
  }
});

test("the first-run setup link creates the first administrator in the browser, once", async () => {
  const dir = await mkdtemp(join(tmpdir(), "service-auth-setup-"));
  const fresh = await startService(dir, "[rate_limit]\nsign_in_per_address = 0\n");
  const page = await browser.newPage();
  try {
    const logged = fresh.stderr.match(/(http:\/\/\S+\/admin\/setup\?token=[A-Za-z0-9_-]{43})/);
    assert.ok(logged, `no setup link in the log:\n${fresh.stderr}`);
    await page.goto(logged[1]);
    assert.equal(await page.$eval("h1", (h) => h.textContent), "Create the first administrator");
    await checkAccessibility(page, "setup form");
    await page.type("#name", "First Admin");
    await page.type("#email", "first@example.com");
    await page.type("#password", "an opening passphrase 1");
    await page.type("#confirm", "an opening passphrase 1");
    await page.click("#submit");
    await page.waitForSelector("#done:not([hidden])");
    assert.equal(await page.$eval("h1", (h) => h.textContent), "Administrator created");
    assert.equal(await page.$eval("#created", (e) => e.textContent), "first@example.com");
    await checkAccessibility(page, "administrator created");
    const signIn = await fetch(`${fresh.url}/api/auth/sign-in/email`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: "first@example.com", password: "an opening passphrase 1" }),
    });
    assert.equal((await signIn.json()).user.role, "admin");

    // The same link again: the page says it is set up, and a forced submit is refused.
    await page.goto(logged[1]);
    assert.equal(await page.$eval("h1", (h) => h.textContent), "This service has an administrator");
    await checkAccessibility(page, "set up already");
    const again = await fetch(`${fresh.url}/api/admin/setup`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token: new URL(logged[1]).searchParams.get("token"), name: "Second",
        email: "second@example.com", password: "another passphrase" }),
    });
    assert.equal(again.status, 403);
  } finally {
    await page.close();
    await stopService(fresh);
    await rm(dir, { recursive: true, force: true });
  }
});
