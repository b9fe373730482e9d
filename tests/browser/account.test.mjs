// The sign-in page, the account page and the invitation page, in headless Chromium against a release server
// (Debian's `chromium`, through puppeteer-core). The server listens on a port chosen here and its base_url is
// http://localhost:<port>: a secure context, so passkeys work against a CDP virtual authenticator. Mail goes to a
// real SMTP server (aiosmtpd, from tests/requirements.txt, as the other mail tests) that writes a Maildir, where
// the invitation's link is read. TOTP codes are computed here from the URI the page shows. axe-core checks each
// page in light and dark; the pages are also used at 375 px wide. Run by ./run.sh.
import { spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { once } from "node:events";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";

import { checkAccessibility, launchBrowser, startService } from "./helpers.mjs";

const ADMIN = { email: "admin@account.test", password: "the account suite's admin passphrase" };
let work;
let smtp; // the aiosmtpd child
let server; // { child, url, stderr }
let base; // http://localhost:<port>
let browser;

async function freePort() {
  const probe = createServer();
  probe.listen(0, "127.0.0.1");
  await once(probe, "listening");
  const { port } = probe.address();
  probe.close();
  await once(probe, "close");
  return port;
}

/// RFC 6238 (SHA-1, 6 digits, 30 s) from an otpauth:// URI's base32 secret, at `at` (ms).
function totp(uri, at = Date.now()) {
  const secret = new URL(uri).searchParams.get("secret").replace(/=+$/, "").toUpperCase();
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = "";
  for (const c of secret) bits += alphabet.indexOf(c).toString(2).padStart(5, "0");
  const key = Buffer.from(bits.match(/.{8}/g).map((b) => parseInt(b, 2)));
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(at / 30_000)));
  const mac = createHmac("sha1", key).update(counter).digest();
  const offset = mac[mac.length - 1] & 0xf;
  return String((mac.readUInt32BE(offset) & 0x7fffffff) % 1_000_000).padStart(6, "0");
}

/// A call to the API outside the browser (no Origin: a server's call), with `cookie` if given; the answer and the
/// session cookie it set.
async function call(method, path, body, cookie, agent) {
  const headers = { "content-type": "application/json" };
  if (cookie) headers.cookie = cookie;
  if (agent) headers["user-agent"] = agent;
  const r = await fetch(`${server.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const set = r.headers.getSetCookie().map((c) => c.split(";")[0]).filter((c) => !c.endsWith("="));
  return { status: r.status, body: await r.json().catch(() => null), cookie: set.find((c) => /session_token=/.test(c)) };
}

async function signUp(name, email, password) {
  const r = await call("POST", "/api/auth/sign-up/email", { name, email, password });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.cookie;
}

/// The newest message to `to` in the Maildir that was not read before.
const read = new Set();
async function nextMail(to) {
  const dir = join(work, "mail", "new");
  for (let i = 0; i < 300; i++) {
    for (const name of await readdir(dir).catch(() => [])) {
      if (read.has(name)) continue;
      const text = (await readFile(join(dir, name), "utf8")).replace(/=\r?\n/g, "").replace(/=3D/g, "=");
      if (!new RegExp(`^To: .*${to.replace(".", "\\.")}`, "mi").test(text)) continue;
      read.add(name);
      return text;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no message to ${to}`);
}

/// A fresh browser context (its own cookies) and a page in it, at `width` px (desktop otherwise). Collects script
/// errors and policy violations.
async function freshPage(width = 1280) {
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  await page.setViewport({ width, height: 900 });
  page.problems = [];
  page.on("console", (m) => m.type() === "error" && !/status of (4\d\d)/.test(m.text()) && page.problems.push(m.text()));
  page.on("pageerror", (e) => page.problems.push(e.message));
  page.close = ((close) => async () => {
    await close.call(page);
    await context.close();
  })(page.close);
  return page;
}

async function signInOnPage(page, email, password) {
  await page.waitForSelector("#password-form:not([hidden])");
  await page.$eval("#email", (i) => (i.value = ""));
  await page.$eval("#password", (i) => (i.value = ""));
  await page.type("#email", email);
  await page.type("#password", password);
  await page.click("#submit");
}

/// Nothing is wider than the window (no sideways scrolling on a phone).
async function assertFits(page, name) {
  const { scroll, width } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: innerWidth }));
  assert.ok(scroll <= width, `${name} is ${scroll} px wide in a ${width} px window`);
}

before(async () => {
  work = await mkdtemp(join(tmpdir(), "service-auth-account-"));
  const smtpPort = await freePort();
  smtp = spawn("python3", ["-m", "aiosmtpd", "-n", "-l", `127.0.0.1:${smtpPort}`, "-c", "aiosmtpd.handlers.Mailbox",
    join(work, "mail")], { stdio: "ignore" });
  const port = await freePort();
  base = `http://localhost:${port}`;
  server = await startService(work,
    `base_url = "${base}"\n[roles]\nallowed = ["user", "admin", "operator"]\ndefault = "user"\n`
    + `[two_factor]\nrequired_for_roles = ["operator"]\n[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\nmail_per_address = 0\n`
    + `mail_per_email = 0\n[email]\nsmtp_url = "smtp://127.0.0.1:${smtpPort}"\n`,
    { SERVICE_AUTH_LISTEN: `127.0.0.1:${port}`, SERVICE_AUTH_BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      SERVICE_AUTH_BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  if (server && server.child.exitCode === null) {
    server.child.kill("SIGTERM");
    await once(server.child, "exit");
  }
  if (smtp && smtp.exitCode === null) {
    smtp.kill("SIGTERM");
    await once(smtp, "exit");
  }
  if (work) await rm(work, { recursive: true, force: true });
});

test("the front page links the console and the account page, and the log names both", async () => {
  assert.match(server.stderr, new RegExp(`the administration console is at ${base}/admin/`));
  assert.match(server.stderr, new RegExp(`each user's account page is at ${base}/account/`));
  const page = await freshPage();
  try {
    await page.goto(`${base}/`);
    await checkAccessibility(page, "front page");
    assert.equal(await page.$eval("#console-link", (a) => a.href), `${base}/admin/`);
    assert.equal(await page.$eval("#account-link", (a) => a.href), `${base}/account/`);
  } finally {
    await page.close();
  }
});

test("sign-in with a second factor goes back to returnTo; a returnTo elsewhere is never followed", async () => {
  const email = "second-step@example.com";
  const password = "a passphrase for factor two";
  const cookie = await signUp("Second Step", email, password);
  const enabled = await call("POST", "/api/auth/two-factor/enable", { password }, cookie);
  assert.equal(enabled.status, 200, JSON.stringify(enabled.body));
  const uri = enabled.body.totpURI;
  assert.equal((await call("POST", "/api/auth/two-factor/verify-totp", { code: totp(uri) }, cookie)).status, 200);

  const page = await freshPage(375);
  try {
    const back = "/accept-invitation?id=returned-here";
    await page.goto(`${base}/sign-in?${new URLSearchParams({ returnTo: back })}`);
    await checkAccessibility(page, "sign-in");
    await assertFits(page, "sign-in at 375 px");
    // A wrong password: said, announced, no step further.
    await signInOnPage(page, email, "not the passphrase");
    await page.waitForSelector("#error:not([hidden])");
    assert.equal(await page.$eval("#error", (e) => e.getAttribute("role")), "alert");
    await signInOnPage(page, email, password);
    await page.waitForSelector("#second-factor:not([hidden])");
    assert.equal(await page.$eval("h1", (e) => e.textContent), "Second step");
    await checkAccessibility(page, "second step");
    await assertFits(page, "second step at 375 px");
    // A wrong code, then the right one.
    await page.type("#code", "000000" === totp(uri) ? "111111" : "000000");
    await page.click("#code-submit");
    await page.waitForSelector("#error:not([hidden])");
    await page.$eval("#code", (i) => (i.value = ""));
    // The next window's code: the current one was spent on the enrolment, and a code works once.
    await page.type("#code", totp(uri, Date.now() + 30_000));
    await Promise.all([page.waitForNavigation(), page.click("#code-submit")]);
    assert.equal(page.url(), `${base}${back}`);
    // Signed in for real: the account page shows the account.
    await page.goto(`${base}/account/`);
    await page.waitForFunction((e) => document.getElementById("email")?.textContent.startsWith(e), {}, email);
    assert.deepEqual(page.problems, []);
  } finally {
    await page.close();
  }

  // A backup code instead of the app's code: the page's other path of the same step.
  const backupPage = await freshPage();
  try {
    await backupPage.goto(`${base}/sign-in?returnTo=%2Faccount%2F`);
    await signInOnPage(backupPage, email, password);
    await backupPage.waitForSelector("#second-factor:not([hidden])");
    await backupPage.click("#use-backup");
    assert.equal(await backupPage.$eval("#code-label", (e) => e.textContent), "Backup code");
    await backupPage.type("#code", enabled.body.backupCodes[0]);
    await Promise.all([backupPage.waitForNavigation(), backupPage.click("#code-submit")]);
    assert.equal(backupPage.url(), `${base}/account/`);
    assert.deepEqual(backupPage.problems, []);
  } finally {
    await backupPage.close();
  }

  // Elsewhere: another site, a protocol-relative address, a backslash, a script, an encoded slash, user info: each
  // dropped for the account page (same origin), never followed.
  const refused = ["https://evil.example/", "//evil.example/x", "/\\evil.example", "javascript:alert(1)",
    "/%2F%2Fevil.example", `${base}@evil.example/`, "http://localhost:1/x", " /x"];
  const plain = { email: "plain-return@example.com", password: "back to where I was 1" };
  await signUp("Plain Return", plain.email, plain.password);
  for (const returnTo of refused) {
    const p = await freshPage();
    try {
      await p.goto(`${base}/sign-in?${new URLSearchParams({ returnTo })}`);
      await signInOnPage(p, plain.email, plain.password);
      await p.waitForFunction(() => location.pathname !== "/sign-in", { timeout: 10_000 });
      assert.equal(p.url(), `${base}/account/`, `returnTo=${returnTo}`);
      assert.deepEqual(p.problems, [], returnTo);
    } finally {
      await p.close();
    }
  }
  // A path here, with a query that holds an encoded address (as an authorization request's redirect_uri): kept.
  const p = await freshPage();
  try {
    const authorize = "/account/?redirect_uri=https%3A%2F%2Fapp.example%2Fcb";
    await p.goto(`${base}/sign-in?${new URLSearchParams({ returnTo: authorize })}`);
    await signInOnPage(p, plain.email, plain.password);
    await p.waitForFunction(() => location.pathname !== "/sign-in", { timeout: 10_000 });
    assert.equal(p.url(), `${base}${authorize}`);
  } finally {
    await p.close();
  }
});

test("the account page enrols TOTP from its QR code's URI, adds a passkey, ends another session", async () => {
  const email = "account-page@example.com";
  const password = "a passphrase for settings";
  const signedUp = await signUp("Account Page", email, password);
  // Another session of the same user, elsewhere, to be ended from the page.
  const other = await call("POST", "/api/auth/sign-in/email", { email, password }, undefined,
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Firefox/140.0");
  assert.equal(other.status, 200);

  const page = await freshPage();
  try {
    // The browser's own WebAuthn against a virtual authenticator (a platform one with user verification).
    const cdp = await page.createCDPSession();
    await cdp.send("WebAuthn.enable");
    const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", { options: { protocol: "ctap2",
      transport: "internal", hasResidentKey: true, hasUserVerification: true, isUserVerified: true,
      automaticPresenceSimulation: true } });

    // Signed out, the account page sends the browser to sign-in, which comes back.
    await page.goto(`${base}/account/`);
    await page.waitForFunction(() => location.pathname === "/sign-in");
    assert.equal(new URL(page.url()).searchParams.get("returnTo"), "/account/");
    await signInOnPage(page, email, password);
    await page.waitForFunction(() => location.pathname === "/account/");
    await page.waitForSelector("#sections:not([hidden])");
    await page.waitForSelector("#session-list li[data-session]");
    assert.match(await page.$eval("#email", (e) => e.textContent), /^account-page@example\.com/);
    await checkAccessibility(page, "account page");

    // The second factor: the QR code is an image the page drew from the server's SVG; the URI beside it is what
    // an authenticator reads, and a code computed from it turns the factor on.
    await page.type("#two-factor-current", password);
    await page.click("#enable");
    await page.waitForSelector("#enrol:not([hidden])");
    const uri = await page.$eval("#totp-uri", (e) => e.textContent);
    assert.match(uri, /^otpauth:\/\/totp\/.*secret=[A-Z2-7]+/);
    await page.waitForFunction(() => document.getElementById("qr").complete && document.getElementById("qr").naturalWidth > 0);
    assert.match(await page.$eval("#qr", (i) => i.src), /^data:image\/svg\+xml;base64,/);
    assert.equal(await page.$$eval("#backup-codes li", (l) => l.length), 10);
    await checkAccessibility(page, "enrolment");
    await page.type("#totp-code", totp(uri));
    await page.click("#confirm-submit");
    await page.waitForFunction(() => document.getElementById("two-factor-state").textContent.startsWith("On"));
    const again = await call("POST", "/api/auth/sign-in/email", { email, password });
    assert.equal(again.body.twoFactorRedirect, true, "the password alone no longer signs in");

    // A passkey: registered with the virtual authenticator, renamed, then it signs in on its own.
    await page.type("#passkey-name", "Test laptop");
    await page.click("#passkey-add");
    await page.waitForSelector("#passkey-list li[data-passkey]");
    assert.match(await page.$eval("#passkey-list", (e) => e.textContent), /Test laptop/);
    const { credentials } = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
    assert.equal(credentials.length, 1);
    page.once("dialog", (d) => d.accept("Work laptop"));
    await page.click("#passkey-list li[data-passkey] button.secondary");
    await page.waitForFunction(() => /Work laptop/.test(document.getElementById("passkey-list").textContent));

    // Sessions: this browser's first, the sign-up's and the one in Firefox; that one is ended from here and works
    // no more, the others go on.
    const rows = await page.$$eval("#session-list li[data-session]", (l) => l.map((li) => li.textContent));
    assert.equal(rows.length, 3, rows.join(" | "));
    assert.match(rows[0], /this browser/);
    const firefox = await page.$$eval("#session-list li[data-session]",
      (l) => l.findIndex((li) => li.textContent.includes("Firefox on Windows")));
    assert.ok(firefox > 0, rows.join(" | "));
    await page.click(`#session-list li[data-session]:nth-child(${firefox + 1}) button.danger`);
    await page.waitForFunction(() => document.querySelectorAll("#session-list li[data-session]").length === 2);
    assert.doesNotMatch(await page.$eval("#session-list", (e) => e.textContent), /Firefox/);
    assert.equal((await call("GET", "/api/auth/get-session", undefined, other.cookie)).body, null);
    assert.equal((await call("GET", "/api/auth/get-session", undefined, signedUp)).body.user.email, email);

    // Light and dark, and a phone's width.
    await checkAccessibility(page, "account page, everything set up");
    await page.setViewport({ width: 375, height: 800 });
    await assertFits(page, "account page at 375 px");
    await checkAccessibility(page, "account page at 375 px");
    await page.screenshot({ path: join(process.env.SHOTS ?? work, "account-375.png"), fullPage: true });

    // Sign out; the passkey alone signs in again (no password, no code), back to the account page.
    await Promise.all([page.waitForNavigation(), page.click("#sign-out")]);
    await page.waitForSelector("#passkey:not([hidden])");
    await page.click("#passkey");
    await page.waitForFunction(() => location.pathname === "/account/");
    await page.waitForSelector("#sections:not([hidden])");
    assert.deepEqual(page.problems, []);
  } finally {
    await page.close();
  }
});

test("an invitation is accepted from the mailed link, through sign-in and back", async () => {
  const admin = await call("POST", "/api/auth/sign-in/email", ADMIN);
  assert.equal(admin.status, 200, JSON.stringify(admin.body));
  const org = await call("POST", "/api/auth/organization/create", { name: "Acme Rockets", slug: "acme-rockets" }, admin.cookie);
  assert.equal(org.status, 200, JSON.stringify(org.body));
  const invitee = { email: "invitee@example.com", password: "a guest of the rocket team" };
  await signUp("Invitee", invitee.email, invitee.password);
  const invited = await call("POST", "/api/auth/organization/invite-member",
    { email: invitee.email, role: "member", organizationId: org.body.id }, admin.cookie);
  assert.equal(invited.status, 200, JSON.stringify(invited.body));
  const mail = await nextMail(invitee.email);
  const link = mail.match(/(http:\/\/localhost:\d+\/accept-invitation\?id=[A-Za-z0-9_-]+)/)[1];
  assert.ok(link.startsWith(`${base}/accept-invitation?id=`), link);

  const page = await freshPage(375);
  try {
    await page.goto(link);
    await page.waitForSelector("#signed-out:not([hidden])");
    await checkAccessibility(page, "invitation, signed out");
    await Promise.all([page.waitForNavigation(), page.click("#sign-in")]);
    assert.equal(new URL(page.url()).pathname, "/sign-in");
    await signInOnPage(page, invitee.email, invitee.password);
    await page.waitForFunction(() => location.pathname === "/accept-invitation");
    assert.equal(page.url(), link);
    await page.waitForSelector("#invitation:not([hidden])");
    assert.equal(await page.$eval("#organization", (e) => e.textContent), "Acme Rockets");
    assert.equal(await page.$eval("#inviter", (e) => e.textContent), ADMIN.email);
    assert.equal(await page.$eval("#role", (e) => e.textContent), "member");
    await checkAccessibility(page, "invitation");
    await assertFits(page, "invitation at 375 px");
    await page.click("#accept");
    await page.waitForSelector("#answered:not([hidden])");
    assert.equal(await page.$eval("#outcome", (e) => e.textContent), "You are now a member of Acme Rockets.");
    await checkAccessibility(page, "invitation accepted");
    // The account page lists the organization.
    await page.goto(`${base}/account/`);
    await page.waitForFunction(() => /Acme Rockets/.test(document.getElementById("organization-list")?.textContent ?? ""));
    // The same link again: answered already, and the page says so.
    await page.goto(link);
    await page.waitForSelector("#error:not([hidden])");
    assert.deepEqual(page.problems, []);
  } finally {
    await page.close();
  }
  const orgs = await call("GET", "/api/auth/organization/list", undefined,
    (await call("POST", "/api/auth/sign-in/email", invitee)).cookie);
  assert.deepEqual(orgs.body.map((o) => o.slug), ["acme-rockets"]);
});

test("a role that requires a second factor signs in to the account page, which enrols one, then the rest opens", async () => {
  const user = { email: "operator@example.com", password: "a passphrase for the shift" };
  const made = await call("POST", "/api/auth/sign-up/email", { name: "Operator", ...user });
  assert.equal(made.status, 200, JSON.stringify(made.body));
  const admin = await call("POST", "/api/auth/sign-in/email", ADMIN);
  const set = await call("POST", "/api/auth/admin/set-role", { userId: made.body.user.id, role: "operator" }, admin.cookie);
  assert.equal(set.status, 200, JSON.stringify(set.body));

  const page = await freshPage();
  try {
    // returnTo names a page the session could not use yet: the account page instead.
    await page.goto(`${base}/sign-in?${new URLSearchParams({ returnTo: "/accept-invitation?id=later" })}`);
    await signInOnPage(page, user.email, user.password);
    await page.waitForFunction(() => location.pathname === "/account/");
    await page.waitForSelector("#must-enrol:not([hidden])");
    assert.equal(await page.$eval("#sessions", (s) => s.hidden), true);
    await checkAccessibility(page, "account page, second factor required");
    await page.type("#two-factor-current", user.password);
    await page.click("#enable");
    await page.waitForSelector("#enrol:not([hidden])");
    const uri = await page.$eval("#totp-uri", (e) => e.textContent);
    await page.type("#totp-code", totp(uri));
    await page.click("#confirm-submit");
    await page.waitForFunction(() => document.getElementById("two-factor-state").textContent.startsWith("On"));
    await page.waitForSelector("#must-enrol[hidden]");
    await page.waitForSelector("#session-list li[data-session]");
    assert.equal(await page.$eval("#sessions", (s) => s.hidden), false);
    assert.deepEqual(page.problems, []);
  } finally {
    await page.close();
  }
});

test("the account page lists the apps a user allowed and withdraws one, which then asks again", async () => {
  const email = "allowed@example.com";
  const password = "pale horses drink slowly at dawn";
  const cookie = await signUp("Wiki Reader", email, password);
  const admin = (await call("POST", "/api/auth/sign-in/email", ADMIN)).cookie;
  const rp = "https://rp.example/cb";
  const made = await call("POST", "/api/admin/oidc/clients", { client_name: "Team Wiki", redirect_uris: [rp] }, admin);
  assert.equal(made.status, 201, JSON.stringify(made.body));
  const clientId = made.body.client.client_id;
  // Where the authorization request leads this user (fetch gets the plugin's {redirect, url}).
  const authorize = async () => {
    const query = new URLSearchParams({ response_type: "code", client_id: clientId, redirect_uri: rp,
      scope: "openid profile", code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
      code_challenge_method: "S256" });
    const r = await call("GET", `/api/auth/oauth2/authorize?${query}`, undefined, cookie);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.url;
  };
  const ask = await authorize();
  assert.match(ask, /^\/consent\?/);
  const allowed = await call("POST", "/api/auth/oauth2/consent",
    { accept: true, oauth_query: ask.split("?")[1] }, cookie);
  assert.equal(allowed.status, 200, JSON.stringify(allowed.body));
  assert.ok((await authorize()).startsWith(`${rp}?code=`), "remembered");

  const page = await freshPage();
  try {
    await page.goto(`${base}/sign-in?returnTo=%2Faccount%2F`);
    await signInOnPage(page, email, password);
    await page.waitForFunction(() => location.pathname === "/account/");
    await page.waitForSelector("#app-list li[data-consent]");
    const row = await page.$eval("#app-list li[data-consent]", (li) => li.textContent);
    assert.match(row, /Team Wiki/);
    assert.match(row, /know who you are, see your name and picture/);
    await checkAccessibility(page, "account page with an app allowed");
    await page.click("#app-list li[data-consent] button.danger");
    await page.waitForSelector("#app-list li.empty");
    assert.match(await page.$eval("#apps-msg", (p) => p.textContent), /Team Wiki will ask you again/);
    assert.match(await authorize(), /^\/consent\?/, "asked again after the withdrawal");
    assert.deepEqual(page.problems, []);
  } finally {
    await page.close();
  }
});

test("the device page: signed out, to sign-in and back; the code entered, the app shown, approved; the device gets its tokens", async () => {
  const email = "device-owner@example.com";
  const password = "seven quiet lanterns over the harbour";
  await signUp("Device Owner", email, password);
  const admin = (await call("POST", "/api/auth/sign-in/email", ADMIN)).cookie;
  const grant = "urn:ietf:params:oauth:grant-type:device_code";
  const made = await call("POST", "/api/admin/oidc/clients", { client_name: "Deploy CLI", token_endpoint_auth_method: "none",
    grant_types: [grant], scope: "openid email offline_access" }, admin);
  assert.equal(made.status, 201, JSON.stringify(made.body));
  const clientId = made.body.client.client_id;
  // What a command-line tool sends (forms, no cookie, no Origin).
  const form = async (path, fields) => {
    const r = await fetch(`${server.url}${path}`, { method: "POST", body: new URLSearchParams(fields),
      headers: { "content-type": "application/x-www-form-urlencoded" } });
    return { status: r.status, body: await r.json() };
  };
  const started = await form("/api/auth/oauth2/device_authorization", { client_id: clientId, scope: "openid email" });
  assert.equal(started.status, 200, JSON.stringify(started.body));
  const device = started.body;
  assert.equal(device.verification_uri, `${base}/device`);
  const poll = () => form("/api/auth/oauth2/token", { grant_type: grant, device_code: device.device_code, client_id: clientId });
  assert.equal((await poll()).body.error, "authorization_pending");

  const page = await freshPage(375);
  try {
    // The address the device shows, typed by hand: signed out, the page sends the person to sign in and back.
    await page.goto(device.verification_uri);
    await page.waitForFunction(() => location.pathname === "/sign-in");
    await signInOnPage(page, email, password);
    await page.waitForFunction(() => location.pathname === "/device");
    await page.waitForSelector("#enter:not([hidden])");
    await checkAccessibility(page, "device page, the code asked for");
    // Typed as people do: lower case, without the dash.
    await page.type("#code", device.user_code.replace("-", "").toLowerCase());
    await page.click("#next");
    await page.waitForSelector("#ask:not([hidden])");
    assert.equal(await page.$eval("#client", (e) => e.textContent), "Deploy CLI");
    assert.equal(await page.$eval("#shown", (e) => e.textContent), device.user_code);
    assert.equal(await page.$eval("#user", (e) => e.textContent), email);
    const asked = await page.$$eval("#scopes li", (items) => items.map((li) => li.textContent));
    assert.deepEqual(asked, ["know who you are (your account's identifier)",
      "see your e-mail address and whether it is confirmed"]);
    await checkAccessibility(page, "device page, the request shown");
    await assertFits(page, "device page");
    await page.click("#allow");
    await page.waitForSelector("#done:not([hidden])");
    assert.match(await page.$eval("#done", (e) => e.textContent), /^Done: the device is signed in/);
    assert.equal(await page.$eval("#ask", (e) => e.hidden), true);
    assert.deepEqual(page.problems, []);
  } finally {
    await page.close();
  }

  // The device's next poll (after its interval) gets the tokens, for this person.
  await new Promise((resolve) => setTimeout(resolve, 5_100));
  const tokens = await poll();
  assert.equal(tokens.status, 200, JSON.stringify(tokens.body));
  assert.equal(tokens.body.scope, "openid email");
  const claims = JSON.parse(Buffer.from(tokens.body.id_token.split(".")[1], "base64url"));
  const me = await call("POST", "/api/auth/sign-in/email", { email, password });
  assert.equal(claims.sub, (await call("GET", "/api/auth/get-session", undefined, me.cookie)).body.user.id);
});
