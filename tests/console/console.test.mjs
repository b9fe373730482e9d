// The administration console in a real browser (Debian's `chromium`, headless, through puppeteer-core) against a
// release server holding 100,000 seeded users (./run.sh starts it). One administrator's session, step by step:
// each step does what a person would (typing, clicking, the confirmation dialog) and asserts what the page then
// shows. axe-core checks every page (no serious or critical violation); a screenshot of each goes to docs/console/.
import { createHmac } from "node:crypto";
import { mkdir, readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";

import puppeteer from "puppeteer-core";

const base = process.env.SERVICE_AUTH_URL;
const shots = process.env.SCREENSHOTS;
const chromiumPath = process.env.CHROMIUM ?? "/usr/bin/chromium";
const PASSWORD = "seed-password-1"; // every seeded account's, see `service-auth seed`
const TARGET = "user4242@seed.example";
/// Accounts seeded by run.sh (the administrator among them); SEED_USERS=5000 there for a quicker run.
const SEEDED = Number(process.env.SEED_USERS ?? 100000);
const axeSource = await readFile(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

let browser;
let page;
/// What the page printed as errors, and the policy violations Chromium reported: both must stay empty.
const problems = [];
const timings = { search: [], inPage: [], firstPage: [] };

before(async () => {
  assert.ok(base, "SERVICE_AUTH_URL is set by run.sh");
  if (shots) await mkdir(shots, { recursive: true });
  browser = await puppeteer.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--lang=en-GB"],
  });
  page = await browser.newPage();
  // True once the page the address names has rendered: the console marks <main> busy while it renders and names
  // the address it rendered last (the previous page can carry the same heading and message line).
  await page.evaluateOnNewDocument(() => {
    window.rendered = () => {
      const main = document.querySelector("#main");
      return !!main && !main.hasAttribute("aria-busy") && (main.dataset.shown === undefined || main.dataset.shown === location.hash);
    };
  });
  await page.setViewport({ width: 1280, height: 860 });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    // Chromium logs every 4xx answer as a failed resource; the steps provoke some on purpose (401 before sign-in,
    // 403 for a non-administrator, 409 for a taken slug) and assert what the page says about each.
    if (m.type() === "error" && !/the server responded with a status of 4\d\d/.test(m.text())) {
      problems.push(`console: ${m.text()}`);
    }
  });
});

after(async () => {
  await browser?.close();
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  if (timings.search.length) {
    console.log(`users page, 100,000 users: search "user4242@" submit → row shown, median of ${timings.search.length}: ` +
      `${median(timings.search).toFixed(1)} ms (runs: ${timings.search.map((t) => t.toFixed(1)).join(", ")})`);
  }
  if (timings.inPage.length) {
    console.log(`users page, 100,000 users: the same, as the page measures it (submit event → rows in the document), ` +
      `median of ${timings.inPage.length}: ${median(timings.inPage)} ms (runs: ${timings.inPage.join(", ")})`);
  }
  if (timings.firstPage.length) {
    console.log(`users page, 100,000 users: unfiltered first page (50 rows), median of ${timings.firstPage.length}: ` +
      `${median(timings.firstPage).toFixed(1)} ms`);
  }
});

// --- helpers ------------------------------------------------------------------------------------------------

/// axe-core on the page as it is now; evaluated through the DevTools protocol (the page's own policy allows no
/// injected script, rightly). Fails on any serious or critical violation, naming it.
async function checkAccessibility(name) {
  if (!(await page.evaluate(() => typeof window.axe === "object"))) await page.evaluate(axeSource);
  const results = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
  const bad = results.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  assert.deepEqual(bad.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(" ")).join("; ")}`), [],
    `accessibility violations on ${name}`);
}

async function screenshot(name) {
  if (shots) await page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
}

/// A screenshot of the part of the page from `first`'s top to `last`'s bottom (a long page's sections of interest).
async function screenshotOf(name, first, last) {
  if (!shots) return;
  const clip = await page.evaluate((a, b) => {
    const top = document.querySelector(a).getBoundingClientRect().top + scrollY - 16;
    const bottom = document.querySelector(b).getBoundingClientRect().bottom + scrollY + 16;
    return { x: 0, y: Math.max(0, top), width: document.documentElement.clientWidth, height: bottom - Math.max(0, top) };
  }, first, last);
  await page.screenshot({ path: `${shots}/${name}.png`, clip, captureBeyondViewport: true });
}

async function heading() {
  return page.$eval("h1", (el) => el.textContent);
}

async function waitForHeading(text) {
  await page.waitForFunction((t) => document.querySelector("h1")?.textContent === t && rendered(), { timeout: 10_000 }, text);
}

async function textOf(selector) {
  return page.$eval(selector, (el) => el.textContent.trim());
}

/// Waits until `selector`'s text matches `pattern` (a message line after an action), and returns it.
async function waitForText(selector, pattern) {
  await page.waitForFunction((s, p, f) => new RegExp(p, f).test(document.querySelector(s)?.textContent ?? ""),
    { timeout: 10_000 }, selector, pattern.source, pattern.flags);
  return textOf(selector);
}

/// Clicks `selector`, which opens the confirmation dialog, and answers it.
async function confirmWith(selector, answer, beforeAnswer) {
  await page.click(selector);
  await page.waitForSelector("dialog#confirm[open]");
  if (beforeAnswer) await beforeAnswer();
  await page.click(answer === "ok" ? "#confirm-ok" : "#confirm-cancel");
  await page.waitForSelector("dialog#confirm:not([open])");
}

/// A session of `email` opened from outside the browser (as the user's phone would), and whether it still works.
async function signInElsewhere(email) {
  const r = await fetch(`${base}/api/auth/sign-in/email`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ email, password: PASSWORD }),
  });
  assert.equal(r.status, 200, await r.text());
  return r.headers.getSetCookie()[0].split(";")[0];
}
async function isLive(cookie) {
  const r = await fetch(`${base}/api/auth/get-session`, { headers: { Cookie: cookie } });
  return (await r.json()) !== null;
}

/// Whether the console's sections are shown: the `hidden` attribute must win over the header's flex layout.
async function navShown() {
  return page.$eval("#nav", (n) => getComputedStyle(n).display !== "none" && n.getBoundingClientRect().height > 0);
}

/// RFC 6238 as an authenticator app computes it (SHA-1, 6 digits, 30 s) from the base32 secret of a totpURI.
function totpCode(uri) {
  const secret = new URL(uri).searchParams.get("secret").replace(/=+$/, "").toUpperCase();
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  const key = [];
  let bits = 0;
  let value = 0;
  for (const c of secret) {
    value = ((value << 5) | alphabet.indexOf(c)) & 0xffff;
    bits += 5;
    if (bits >= 8) {
      key.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(Date.now() / 30_000)));
  const mac = createHmac("sha1", Buffer.from(key)).update(counter).digest();
  const offset = mac[19] & 0x0f;
  return String((mac.readUInt32BE(offset) & 0x7fffffff) % 1_000_000).padStart(6, "0");
}

/// Turns on an authenticator app for `email` through the auth API, as the user would; returns their session.
async function enableTotp(email) {
  const cookie = await signInElsewhere(email);
  const call = (path, body) => fetch(`${base}/api/auth/two-factor/${path}`, {
    method: "POST", headers: { "Content-Type": "application/json", Cookie: cookie }, body: JSON.stringify(body) });
  const enabled = await call("enable", { password: PASSWORD });
  assert.equal(enabled.status, 200, await enabled.clone().text());
  const { totpURI } = await enabled.json();
  // The server accepts one step either side, so a step ending meanwhile does not matter.
  const verified = await call("verify-totp", { code: totpCode(totpURI) });
  assert.equal(verified.status, 200, await verified.text());
  return cookie;
}

async function signIn(email) {
  await page.type("#sign-in input[type=email]", email);
  await page.type("#sign-in input[type=password]", PASSWORD);
  await page.keyboard.press("Enter");
}

// --- the walk -----------------------------------------------------------------------------------------------

let userId;
let elsewhere;

test("the console is served by the binary and asks to sign in", async () => {
  const response = await page.goto(`${base}/admin/`);
  assert.equal(response.status(), 200);
  assert.match(response.headers()["content-security-policy"], /script-src 'self'; style-src 'self'/);
  await waitForHeading("Sign in");
  assert.equal(await navShown(), false, "no console sections before signing in");
  // Keyboard: the first Tab from the page's heading lands on the labelled e-mail field.
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement.labels?.[0]?.textContent), "E-mail");
  await checkAccessibility("sign-in");
  await screenshot("sign-in");
});

test("a wrong password is said in words next to the form", async () => {
  await page.type("#sign-in input[type=email]", "admin@seed.example");
  await page.type("#sign-in input[type=password]", "not the password");
  await page.keyboard.press("Enter");
  assert.match(await waitForText("#sign-in-msg", /invalid/i), /Invalid email or password/i);
  assert.equal(await heading(), "Sign in");
  await page.$eval("#sign-in", (form) => form.reset());
});

test("an account that is not an administrator is refused", async () => {
  await signIn("user17@seed.example");
  await waitForHeading("Not an administrator");
  assert.match(await textOf("#not-admin"), /user17@seed\.example is not an administrator/);
  assert.equal(await navShown(), false, "no console sections for a non-administrator");
  // The API says the same to this session: the page is not the guard, the server is.
  const status = await page.evaluate(async () => (await fetch("/api/admin/users?limit=1", { credentials: "same-origin" })).status);
  assert.equal(status, 403);
  await checkAccessibility("not-admin");
  await screenshot("not-admin");
  await page.click("#sign-out");
  await waitForHeading("Sign in");
});

/// A known sequence, from outside the browser: 2 sign-ups, 2 sign-ins, 3 wrong passwords for one address and then
/// a lock-out (run.sh sets three failures per address). With the two sign-ins and the failure above, the overview
/// must show these counts.
const KNOWN = { sign_ins: 4, failed_sign_ins: 4, sign_ups: 2, lockouts: 1, password_resets: 0 };

test("a known sequence of sign-ups, sign-ins, failures and a lock-out", async () => {
  const post = (path, body) => fetch(`${base}${path}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  for (const who of ["overview-a", "overview-b"]) {
    assert.equal((await post("/api/auth/sign-up/email", { name: who, email: `${who}@example.com`, password: PASSWORD })).status, 200);
  }
  for (let i = 0; i < 2; i++) await signInElsewhere("user42@seed.example");
  for (let i = 0; i < 3; i++) {
    assert.equal((await post("/api/auth/sign-in/email", { email: "user43@seed.example", password: "wrong password" })).status, 401);
  }
  assert.equal((await post("/api/auth/sign-in/email", { email: "user43@seed.example", password: PASSWORD })).status, 429);
});

test("the administrator signs in and lands on the overview, whose charts show the known counts", async () => {
  await signIn("admin@seed.example");
  await waitForHeading("Overview");
  assert.equal(await navShown(), true);
  assert.equal(await page.$eval('#nav a[aria-current="page"]', (a) => a.textContent), "Overview");
  for (const period of ["hours", "days"]) {
    // What each chart draws (its bars' values) and what its table says, per counter, summed over the period.
    const drawn = await page.$$eval(`#charts-${period} figure`, (figures) => Object.fromEntries(figures.map((f) => [
      f.id.split("-").slice(2).join("-"),
      {
        bars: [...f.querySelectorAll("svg rect.bar")].reduce((sum, r) => sum + Number(r.dataset.value), 0),
        table: [...f.querySelectorAll("table tbody td")].reduce((sum, td) => sum + Number(td.textContent), 0),
        total: Number(f.querySelector(".chart-total").textContent.replace(/,/g, "")),
        count: f.querySelectorAll("svg rect.bar").length,
        rows: f.querySelectorAll("table tbody tr").length,
      },
    ])));
    for (const [counter, n] of Object.entries(KNOWN)) {
      assert.deepEqual(drawn[counter], { bars: n, table: n, total: n, count: period === "hours" ? 24 : 30, rows: period === "hours" ? 24 : 30 },
        `${counter} over the ${period}`);
    }
  }
  // The tallest bar of a chart with counts is the chart's full height; the chart is hidden from screen readers,
  // whose table holds the same numbers.
  assert.equal(await page.$eval("#chart-hours-sign_ins svg", (s) => s.getAttribute("aria-hidden")), "true");
  const facts = await page.$$eval("#overview-facts dt", (dts) => Object.fromEntries(dts.map((dt) => [dt.textContent, dt.nextElementSibling.textContent])));
  assert.match(facts["Active sessions"], /^\d{1,3}(,\d{3})*$/);
  assert.match(facts["Accounts created in the last 7 days"], /^\d{1,3}(,\d{3})*$/);
  assert.equal(facts.Outbox, "No mail transport configured");
  assert.match(facts["Newest backup"], /Not configured/);
  assert.equal(facts.Webhooks, "No endpoint");
  // The seeded administrator signs in with a password alone: counted, and the page says where to look.
  assert.equal(facts["Administrators without a second factor"], "1");
  assert.match(await textOf("#admins-without-factor"), /^1 administrator signs in with a password alone\. .*required_for_roles = \["admin"\]/);
  assert.equal(await page.$eval("#admins-without-factor a", (a) => a.getAttribute("href")), "#/users?role=admin");
  // Where each of them sets one up: their account page (served by the binary too).
  assert.equal(await page.$eval("#enrol-link", (a) => a.getAttribute("href")), "/account/");
  await checkAccessibility("overview");
  await screenshot("overview");
});

test("the administrator sees the first page of the users", async () => {
  await page.click('#nav a[href="#/users"]');
  await waitForHeading("Users");
  await page.waitForSelector("#users-table tbody tr");
  assert.equal(await page.$$eval("#users-table tbody tr", (rows) => rows.length), 50);
  assert.equal((await textOf("#users-msg")).replace(/ \(\d+ ms\)$/, ""),
    `50 users on this page, more on the next; ${(SEEDED + 2).toLocaleString("en")} in all.`);
  assert.equal(await textOf("#who"), "Signed in as admin@seed.example");
  // No token in the page: the session cookie is HttpOnly and nothing the script keeps holds one.
  assert.equal(await page.evaluate(() => document.cookie), "");
  // Next page follows the server's cursor.
  const first = await textOf("#users-table tbody tr td a");
  await page.click("#next-page");
  await page.waitForFunction((f) => document.querySelector("#users-table tbody tr td a")?.textContent !== f, {}, first);
  assert.equal(await page.$$eval("#users-table tbody tr", (rows) => rows.length), 50);
  // The first page again, as a search without filters: submit → 50 rows shown, for the timing's median.
  for (let i = 0; i < 7; i++) {
    await page.evaluate(() => document.querySelector("#users-table")?.remove());
    const started = performance.now();
    await page.click("#user-search button[type=submit]");
    await page.waitForSelector("#users-table tbody tr:nth-child(50)");
    timings.firstPage.push(performance.now() - started);
  }
});

test("one user is found among 100,000 by e-mail prefix", async () => {
  elsewhere = [await signInElsewhere(TARGET), await signInElsewhere(TARGET)];
  // Keyboard only: focus the search box, type, Enter submits.
  await page.focus("#user-search input[type=search]");
  await page.keyboard.type("user4242@");
  const started = performance.now();
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.querySelectorAll("#users-table tbody tr").length === 1);
  timings.search.push(performance.now() - started);
  assert.equal(await textOf("#users-table tbody tr td a"), TARGET);
  assert.match(await textOf("#users-msg"), /^1 user on this page; 1 in all\. \(\d+ ms\)$/);
  assert.equal(await page.evaluate(() => location.hash), "#/users?q=user4242%40");
  await checkAccessibility("users");
  await screenshot("users");
  // The same search again, for the timing's median: the search box keeps the text, Enter submits it again.
  for (let i = 0; i < 6; i++) {
    await page.evaluate(() => document.querySelector("#users-table")?.remove());
    const again = performance.now();
    await page.click("#user-search button[type=submit]");
    await page.waitForFunction(() => document.querySelectorAll("#users-table tbody tr").length === 1);
    timings.search.push(performance.now() - again);
    // The page's own measure, from the submit event to the rows in the document (no test-driver round trips).
    timings.inPage.push(Number((await textOf("#users-msg")).match(/\((\d+) ms\)/)[1]));
  }
});

test("the user's page: change the role", async () => {
  await page.click("#users-table tbody tr td a");
  await waitForHeading(TARGET);
  userId = await textOf("#user-details code");
  assert.equal(await textOf("#user-role"), "user");
  await page.select("#role-form select", "pharmacist_in_charge");
  await page.click("#role-form button[type=submit]");
  assert.equal(await waitForText("#role-msg", /Role changed/), "Role changed to pharmacist_in_charge.");
  assert.equal(await textOf("#user-role"), "pharmacist_in_charge");
});

test("revoke one of the user's sessions, through the confirmation dialog", async () => {
  await page.waitForSelector("#sessions-table");
  assert.equal(await page.$$eval("#sessions-table tbody tr", (rows) => rows.length), 2);
  // Cancelled: nothing happens.
  await confirmWith("#sessions-table tbody tr button", "cancel");
  assert.equal(await waitForText("#sessions-msg", /Not revoked/), "Not revoked.");
  assert.equal(await page.$$eval("#sessions-table tbody tr", (rows) => rows.length), 2);
  await confirmWith("#sessions-table tbody tr button", "ok", () => screenshot("confirm"));
  assert.equal(await waitForText("#sessions-msg", /revoked/), "Session revoked.");
  await page.waitForFunction(() => document.querySelectorAll("#sessions-table tbody tr").length === 1);
  const live = await Promise.all(elsewhere.map(isLive));
  assert.deepEqual(live.filter(Boolean).length, 1, "exactly one of the two sessions ended");
});

test("ban the user with a reason and an end", async () => {
  await page.type("#ban-form input[name=reason]", "Left the pharmacy");
  await page.select("#ban-form select", "604800");
  await confirmWith("#ban-form button[type=submit]", "ok");
  await page.waitForFunction(() => /^Yes/.test(document.querySelector("#user-banned")?.textContent ?? ""));
  assert.match(await textOf("#user-banned"), /^Yes: Left the pharmacy, until \d{1,2} \w{3} \d{4}, \d\d:\d\d:\d\d$/);
  // A ban ends every session at once.
  await page.waitForSelector("#no-sessions");
  assert.deepEqual(await Promise.all(elsewhere.map(isLive)), [false, false]);
  assert.equal(await page.$eval("#ban-form button", (b) => b.textContent), "Unban");
});

test("the user's page: name, verified flag, mailed links and history", async () => {
  await page.$eval("#profile-form input[name=name]", (i) => (i.value = ""));
  await page.type("#profile-form input[name=name]", "Renamed by the console");
  await page.click("#profile-form #verified");
  await page.click("#profile-form button[type=submit]");
  await page.waitForFunction(() => [...document.querySelectorAll("#user-details dt")]
    .some((dt) => dt.textContent === "Name" && dt.nextElementSibling.textContent === "Renamed by the console"));
  const details = await page.$$eval("#user-details dt", (dts) => Object.fromEntries(dts.map((dt) => [dt.textContent, dt.nextElementSibling.textContent])));
  assert.equal(details.Name, "Renamed by the console");
  assert.equal(details["E-mail verified"], "No", "seeded accounts are verified; the box was unticked");
  const fresh = await page.evaluate(async (id) => (await fetch(`/api/auth/admin/get-user?id=${id}`)).json(), userId);
  assert.deepEqual([fresh.name, fresh.emailVerified], ["Renamed by the console", false]);
  // Not verified now: "send the verification again" is offered. Mailed links need a mail transport, which this
  // server has not: the page says so beside the buttons.
  await page.click("#send-verification");
  assert.match(await waitForText("#links-msg", /mail/i), /mail/i);
  assert.ok(await page.$eval("#links-msg", (p) => p.classList.contains("error")));
  await page.click("#send-reset");
  await page.waitForFunction(() => document.querySelector("#links-msg").textContent !== "Working…");
  assert.ok(await page.$eval("#links-msg", (p) => p.classList.contains("error")));
  // The history: every change above, newest first, by name.
  await page.waitForSelector("#history-table tbody tr");
  await page.waitForFunction(() => document.querySelector("#history-table tbody tr td:nth-child(2)")?.dataset.action === "user.profile_updated");
  // The action in words, its code beside (cells read by code below).
  assert.equal(await textOf("#history-table tbody tr td:nth-child(2)"), "Profile changed user.profile_updated");
  const history = await page.$$eval("#history-table tbody tr", (trs) => trs.map((tr) => [...tr.cells].slice(1).map((c) => c.dataset.action ?? c.textContent)));
  assert.deepEqual(history[0], ["user.profile_updated", "you", TARGET, "name, e-mail marked unverified"]);
  for (const action of ["user.banned", "session.revoked", "user.role_changed", "sign_in.succeeded"]) {
    assert.ok(history.some(([a, by, on]) => a === action && on === TARGET), `${action} in ${JSON.stringify(history)}`);
  }
  await checkAccessibility("user with history");
});

test("the audit log shows the ban, searched on the server", async () => {
  await page.click('#nav a[href="#/audit"]');
  await waitForHeading("Audit log");
  await page.waitForSelector("#audit-table tbody tr");
  await page.type("#audit-filter input[name=action]", "user.banned");
  await page.click("#audit-filter button[type=submit]");
  await page.waitForFunction(() => location.hash === "#/audit?action=user.banned" && rendered());
  assert.match(await textOf("#audit-msg"), /^\d+ entr(y|ies)/);
  const rows = await page.$$eval("#audit-table tbody tr", (trs) => trs.map((tr) => [...tr.cells].map((c) => c.dataset.action ?? c.textContent)));
  assert.ok(rows.length >= 1);
  const [, action, by, on, , detail] = rows[0];
  assert.equal(action, "user.banned");
  assert.equal(by, "you");
  assert.equal(on, TARGET);
  assert.equal(await page.$eval("#audit-table tbody tr td:nth-child(4) a", (a) => a.getAttribute("href")), `#/users/${userId}`);
  assert.match(detail, /Left the pharmacy/);
  // By action and target (an e-mail, turned into the id by the page): the server finds the one role change.
  await page.goto(`${base}/admin/#/audit?action=user.role_changed&on=${encodeURIComponent(TARGET)}`);
  await waitForHeading("Audit log");
  await page.waitForFunction(() => /entr(y|ies)|No entry/.test(document.querySelector("#audit-msg")?.textContent ?? ""));
  assert.deepEqual(await page.$$eval("#audit-table tbody tr", (trs) => trs.map((tr) => [...tr.cells].slice(1, 6).map((c) => c.dataset.action ?? c.textContent))),
    [["user.role_changed", "you", TARGET, "127.0.0.1", "user -> pharmacist_in_charge"]]);
  // Times to the second, in the browser's time zone (Chromium here runs in the machine's), UTC on hover.
  assert.match(await textOf("#audit-table tbody td"), /^\d{1,2} \w{3} \d{4}, \d\d:\d\d:\d\d$/);
  assert.match(await page.$eval("#audit-table tbody td time", (t) => t.title), /^\d{1,2} \w{3} \d{4}, \d\d:\d\d:\d\d UTC$/);
  assert.equal(await textOf("#audit-table tbody tr td:nth-child(2) span"), "Role changed");
  // In another time zone (Kathmandu, UTC+5:45: the minutes differ too), the same entry in its time, UTC on hover.
  await page.emulateTimezone("Asia/Kathmandu");
  await page.reload();
  await page.waitForSelector("#audit-table tbody td time");
  const [shown, utc] = await page.$eval("#audit-table tbody td time", (t) => [t.textContent, t.title]);
  const minutes = (text) => Number(text.match(/\d\d:(\d\d):\d\d/)[1]);
  assert.equal((minutes(shown) - minutes(utc) + 60) % 60, 45, `${shown} against ${utc}`);
  await page.emulateTimezone();
  await page.reload();
  await page.waitForSelector("#audit-table tbody td time");
  // A time range after now finds nothing; an unknown e-mail is said in words.
  await page.goto(`${base}/admin/#/audit?action=user.banned&from=2999-01-01T00:00:00`);
  await waitForHeading("Audit log");
  assert.equal(await waitForText("#audit-msg", /No entry/), "No entry matches.");
  await page.goto(`${base}/admin/#/audit?by=nobody%40example.com`);
  await waitForHeading("Audit log");
  assert.match(await waitForText("#audit-msg", /no user/), /no user has the e-mail nobody@example\.com/);
  await page.goto(`${base}/admin/#/audit`);
  await waitForHeading("Audit log");
  await page.waitForSelector("#audit-table tbody tr");
  await checkAccessibility("audit");
  await screenshot("audit");
});

test("create an organization; a taken slug is said next to the form", async () => {
  await page.click('#nav a[href="#/organizations"]');
  await waitForHeading("Organizations");
  await page.type("#create-org input[name=name]", "St Mary Pharmacy");
  assert.equal(await page.$eval("#create-org input[name=slug]", (i) => i.value), "st-mary-pharmacy");
  await page.click("#create-org button[type=submit]");
  assert.equal(await waitForText("#create-org-msg", /Created/), "Created St Mary Pharmacy.");
  assert.deepEqual(await page.$$eval("#orgs-table tbody a", (as) => as.map((a) => a.textContent)), ["St Mary Pharmacy"]);
  await page.type("#create-org input[name=name]", "St Mary Pharmacy");
  await page.click("#create-org button[type=submit]");
  assert.match(await waitForText("#create-org-msg", /slug/i), /slug/i);
  assert.ok(await page.$eval("#create-org-msg", (p) => p.classList.contains("error")));
  await page.$eval("#create-org", (form) => form.reset());
  await checkAccessibility("organizations");
  await screenshot("organizations");
});

test("move the user into the organization", async () => {
  await page.goto(`${base}/admin/#/users/${userId}`);
  await waitForHeading(TARGET);
  assert.equal(await textOf("#no-memberships"), "Member of no organization.");
  const orgValue = await page.$$eval("#org-form option", (os) => os.find((o) => o.textContent === "St Mary Pharmacy").value);
  await page.select("#org-form select", orgValue);
  await page.click("#org-form button[type=submit]");
  assert.equal(await waitForText("#org-msg", /Moved/), "Moved to St Mary Pharmacy.");
  assert.equal(await textOf("#user-org"), "St Mary Pharmacy");
  // The memberships follow: the organization by name, linked to its page, the role, and that it is the primary one.
  await page.waitForSelector("#memberships-table tbody tr");
  const memberships = await page.$$eval("#memberships-table tbody tr", (trs) => trs.map((tr) => [...tr.cells].slice(0, 3).map((c) => c.textContent)));
  assert.deepEqual(memberships, [["St Mary Pharmacy", "member", "Primary"]]);
  assert.equal(await page.$eval("#memberships-table tbody a", (a) => a.getAttribute("href")), `#/organizations/${orgValue}`);
  // Ways in: the seeded password, and no identity of another provider (this server has none configured; unlinking
  // one is tested over HTTP, tests/api/oauth.rs).
  assert.equal(await textOf("#has-password"), "Yes");
  assert.equal(await textOf("#no-identities"), "No identity of another provider is linked.");
  await checkAccessibility("user");
  await screenshot("user");
});

test("second factors: who has which in the list, the user's page, and the administrator's reset", async () => {
  const enrolled = "user4243@seed.example";
  const session = await enableTotp(enrolled);
  await page.goto(`${base}/admin/#/users?q=${encodeURIComponent("user4243@")}`);
  await waitForHeading("Users");
  const column = await page.$$eval("#users-table thead th", (ths) => ths.map((th) => th.textContent).indexOf("Second factor"));
  assert.ok(column > 0);
  await page.waitForFunction((i) => document.querySelector(`#users-table tbody tr td:nth-child(${i + 1})`)?.textContent !== "…", {}, column);
  assert.deepEqual(await page.$$eval("#users-table tbody tr", (trs, i) => trs.map((tr) => [tr.cells[0].textContent, tr.cells[i].textContent]), column),
    [[enrolled, "Authenticator app"]]);
  // Others on a page say so too: no factor.
  await page.goto(`${base}/admin/#/users?q=${encodeURIComponent("user4244@")}`);
  await waitForHeading("Users");
  await page.waitForFunction((i) => document.querySelector(`#users-table tbody tr td:nth-child(${i + 1})`)?.textContent === "None", {}, column);

  await page.goto(`${base}/admin/#/users?q=${encodeURIComponent("user4243@")}`);
  await waitForHeading("Users");
  await page.click("#users-table tbody tr td a");
  await waitForHeading(enrolled);
  assert.equal(await textOf("#totp-state"), "On");
  assert.equal(await textOf("#backup-codes"), "10 of 10 left");
  assert.equal(await textOf("#no-passkeys"), "No passkey.");
  await checkAccessibility("user with a second factor");
  await screenshot("user-second-factor");
  // Cancelled: nothing happens. Confirmed: the factor is gone and every session of the user has ended.
  await confirmWith("#reset-two-factor", "cancel");
  assert.equal(await waitForText("#factors-msg", /Not reset/), "Not reset.");
  assert.equal(await isLive(session), true);
  await confirmWith("#reset-two-factor", "ok");
  assert.equal(await waitForText("#factors-msg", /reset;/), "Second factor reset; every session of the user has ended.");
  await page.waitForFunction(() => document.querySelector("#totp-state")?.textContent === "Off");
  assert.equal(await textOf("#backup-codes"), "—");
  assert.equal(await page.$("#reset-two-factor"), null, "nothing left to reset");
  assert.equal(await isLive(session), false);
  await page.waitForSelector("#no-sessions");
  // Audited, and in the user's history.
  await page.goto(`${base}/admin/#/users?q=${encodeURIComponent("user4243@")}`);
  await waitForHeading("Users");
  await page.click("#users-table tbody tr td a");
  await waitForHeading(enrolled);
  await page.waitForSelector("#history-table tbody tr");
  const actions = await page.$$eval("#history-table tbody tr", (trs) => trs.map((tr) => tr.cells[1].dataset.action));
  for (const action of ["user.two_factor_reset", "user.two_factor_enabled"]) assert.ok(actions.includes(action), `${action} in ${actions.join(", ")}`);
});

test("create a user with a role and an organization", async () => {
  const org = await page.evaluate(async () => (await (await fetch("/api/admin/organizations", { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ name: "Night Shift", slug: "night-shift" }) })).json()).organization);
  await page.goto(`${base}/admin/#/users`);
  await waitForHeading("Users");
  await page.waitForSelector("#create-user select[name=organization] option:nth-child(3)");
  await page.type("#create-user input[name=email]", "created@example.com");
  await page.type("#create-user input[name=name]", "Created In Console");
  await page.select("#create-user select[name=role]", "qa_manager");
  await page.select("#create-user select[name=organization]", org.id);
  await page.click("#create-user button[type=submit]");
  assert.equal(await waitForText("#create-user-msg", /Created/), "Created created@example.com in Night Shift. Open their page");
  await page.click("#created-user");
  await waitForHeading("created@example.com");
  assert.equal(await textOf("#user-role"), "qa_manager");
  assert.equal(await textOf("#user-org"), "Night Shift");
  // A second time: the server refuses the taken e-mail, and the page says so beside the form.
  await page.goto(`${base}/admin/#/users`);
  await waitForHeading("Users");
  await page.type("#create-user input[name=email]", "created@example.com");
  await page.type("#create-user input[name=name]", "Again");
  await page.click("#create-user button[type=submit]");
  await page.waitForFunction(() => document.querySelector("#create-user-msg")?.classList.contains("error"));
  await checkAccessibility("users with create");
});

test("the filtered user list exported as CSV and JSON matches the API's list", async () => {
  await page.goto(`${base}/admin/#/users?q=user42`);
  await waitForHeading("Users");
  await page.waitForSelector("#export-csv");
  const [csvHref, jsonHref] = await Promise.all(["#export-csv", "#export-json"].map((s) => page.$eval(s, (a) => a.getAttribute("href"))));
  assert.equal(csvHref, "/api/admin/users/export?q=user42&match=prefix&format=csv");
  const { csv, json, listed, total } = await page.evaluate(async (csvHref, jsonHref) => {
    const listed = [];
    let cursor = null;
    let total;
    do {
      const page = await (await fetch(`/api/admin/users?q=user42&match=prefix&limit=1000${cursor ? `&cursor=${cursor}` : ""}`)).json();
      listed.push(...page.users);
      total = page.total;
      cursor = page.next_cursor;
    } while (cursor);
    return { csv: await (await fetch(csvHref)).text(), json: await (await fetch(jsonHref)).json(), listed, total };
  }, csvHref, jsonHref);
  assert.equal(listed.length, total);
  assert.ok(listed.length > 10, `${listed.length}`);
  assert.deepEqual(json, listed);
  const lines = csv.trimEnd().split("\r\n");
  assert.equal(lines[0], "id,name,email,role,organization_id,banned,created_at");
  // The seeded names hold no comma or quote, so a line is its fields joined by commas.
  assert.deepEqual(lines.slice(1), listed.map((u) => [u.id, u.name, u.email, u.role, u.organization_id ?? "", u.banned, u.created_at].join(",")));
});

test("the organization lists its member; deleting it needs the detach option", async () => {
  await page.click('#nav a[href="#/organizations"]');
  await waitForHeading("Organizations");
  await page.click("#orgs-table tbody a");
  await waitForHeading("St Mary Pharmacy");
  assert.deepEqual(await page.$$eval("#members-table tbody a", (as) => as.map((a) => a.textContent)), [TARGET]);
  await checkAccessibility("organization");
  await screenshot("organization");
  // Rename: the heading follows, and the organizations list shows the new name.
  await page.$eval("#rename-org input[name=name]", (i) => (i.value = ""));
  await page.type("#rename-org input[name=name]", "St Mary Hospital Pharmacy");
  await page.click("#rename-org button[type=submit]");
  assert.equal(await waitForText("#rename-msg", /Saved/), "Saved.");
  assert.equal(await heading(), "St Mary Hospital Pharmacy");
  // Without taking the member out, the server refuses, and the page says why beside the button.
  await confirmWith("#delete-org", "ok");
  assert.match(await waitForText("#delete-org-msg", /member/i), /member/i);
  assert.ok(await page.$eval("#delete-org-msg", (p) => p.classList.contains("error")));
  await confirmWith("#delete-org", "ok", () => page.click("#detach-members"));
  await waitForHeading("Organizations");
  assert.deepEqual(await page.$$eval("#orgs-table tbody a", (as) => as.map((a) => a.textContent)), ["Night Shift"]);
  await page.click('#nav a[href="#/audit"]');
  await waitForHeading("Audit log");
  await page.waitForSelector("#audit-table tbody tr");
  const orgEntries = await page.$$eval("#audit-table tbody tr", (trs) => trs.map((tr) => tr.cells[1].dataset.action));
  assert.equal(orgEntries[0], "organization.deleted");
  assert.ok(orgEntries.includes("organization.updated"), orgEntries.join(", "));
  await page.goto(`${base}/admin/#/users/${userId}`);
  await waitForHeading(TARGET);
  assert.equal(await textOf("#user-org"), "—");
  assert.equal(await textOf("#no-memberships"), "Member of no organization.");
});

test("impersonate another user, stop, then set their password and remove them", async () => {
  const other = "user5@seed.example";
  const otherSession = await signInElsewhere(other);
  await page.goto(`${base}/admin/#/users?q=${encodeURIComponent("user5@")}`);
  await page.waitForFunction((e) => document.querySelector("#users-table tbody tr td a")?.textContent === e, {}, other);
  await page.click("#users-table tbody tr td a");
  await waitForHeading(other);
  await confirmWith("#impersonate", "ok");
  await waitForHeading("Impersonating");
  assert.match(await textOf("#impersonating"), /signed in as user5@seed\.example/);
  assert.equal(await navShown(), false, "no console sections while impersonating");
  await checkAccessibility("impersonating");
  await screenshot("impersonating");
  await page.click("#impersonating ~ button");
  await waitForHeading(other);
  assert.equal(await textOf("#who"), "Signed in as admin@seed.example");
  // A new password ends the user's sessions; the page says so.
  await page.type("#password-form input[type=password]", "a new passphrase for the fifth");
  await confirmWith("#password-form button[type=submit]", "ok");
  assert.equal(await waitForText("#password-msg", /Password set/), "Password set; the user's sessions have ended.");
  assert.equal(await isLive(otherSession), false);
  await confirmWith("#remove", "ok");
  await waitForHeading("Users");
  const gone = await page.evaluate(async (q) => (await (await fetch(`/api/admin/users?q=${q}`)).json()).users.length,
    encodeURIComponent("user5@"));
  assert.equal(gone, 0);
});

test("the overview names a failing webhook endpoint and its queued deliveries", async () => {
  // Nothing listens on port 9 here; run.sh counts an endpoint failing after one second.
  const hook = await page.evaluate(async () => (await (await fetch("/api/admin/webhooks", { method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ url: "http://127.0.0.1:9/hooks", events: ["user.deleted"] }) })).json()).webhook);
  assert.equal((await page.evaluate(async (id) => (await fetch(`/api/admin/webhooks/${id}/test`, { method: "POST" })).status, hook.id)), 202);
  // Waits (not a timed assertion) for the deliverer's second refused attempt, which marks the endpoint failing.
  await page.waitForFunction(async (id) => (await (await fetch(`/api/admin/webhooks/${id}`)).json()).webhook.failing, { timeout: 30_000, polling: 500 }, hook.id);
  const { webhook } = await page.evaluate(async (id) => (await fetch(`/api/admin/webhooks/${id}`)).json(), hook.id);
  await page.goto(`${base}/admin/#/overview`);
  await waitForHeading("Overview");
  const facts = await page.$$eval("#overview-facts dt", (dts) => Object.fromEntries(dts.map((dt) => [dt.textContent, dt.nextElementSibling.textContent])));
  assert.match(facts.Webhooks, /^1 endpoint on, 1 failing; \d+ deliver(y|ies) queued$/);
  assert.ok(Number(facts.Webhooks.match(/(\d+) deliver/)[1]) >= 1, facts.Webhooks);
  const failing = await page.$$eval("#failing-webhooks li", (lis) => lis.map((li) => [li.querySelector("a").textContent, li.querySelector("a").getAttribute("href")]));
  assert.deepEqual(failing, [[webhook.url, `#/webhooks/${webhook.id}`]]);
  await checkAccessibility("overview with a failing webhook");
  await screenshot("overview-attention");
});

test("the status panel", async () => {
  await page.click('#nav a[href="#/status"]');
  await waitForHeading("Status");
  const facts = await page.$$eval("#status dt", (dts) => Object.fromEntries(dts.map((dt) => [dt.textContent, dt.nextElementSibling.textContent])));
  assert.equal(facts.Users, (SEEDED - 1 + 3).toLocaleString("en")); // one removed above, two signed up, one created
  assert.match(facts.Sessions, /^\d{1,3}(,\d{3})*$/);
  assert.equal(facts.Organizations, "1");
  assert.match(facts["Store size"], /^\d+(\.\d)? MiB$/);
  assert.match(facts["Last backup"], /Not configured/);
  assert.match(facts.Version, /^\d+\.\d+\.\d+/);
  // The configuration in effect (#50): one collapsible section each, opened on a click; this server has no mail
  // transport, so the page says so and the test mail's button is off.
  const sections = await page.$$eval("#config details summary", (ss) => ss.map((s) => s.textContent));
  for (const name of ["[session]", "[passwords]", "[rate_limit]", "[email]", "[store]"]) assert.ok(sections.includes(name), `${name} in ${sections}`);
  await page.evaluate(() => [...document.querySelectorAll("#config summary")].find((s) => s.textContent === "[session]").click());
  const session = await page.$$eval("#config details[open] dt", (dts) => Object.fromEntries(dts.map((dt) => [dt.textContent, dt.nextElementSibling.textContent])));
  assert.equal(session.idle_timeout_secs, "3600", JSON.stringify(session));
  assert.match(await page.$eval("#config", (c) => c.textContent), /Changed by service-auth reload \(or SIGHUP\) without a restart: \[passwords\]/);
  assert.match(await page.$eval("#last-delivery", (p) => p.textContent), /No mail transport/);
  assert.equal(await page.$eval("#test-mail button", (b) => b.disabled), true);
  await checkAccessibility("status");
  await screenshot("status");
});

/// A call to the identity provider's authorization endpoint as `cookie`'s user (fetch: the plugin's JSON answer):
/// where it leads, `/consent?…` or the client with a code.
async function authorizeAs(cookie, clientId, redirectUri) {
  const query = new URLSearchParams({ response_type: "code", client_id: clientId, redirect_uri: redirectUri,
    scope: "openid profile", code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", code_challenge_method: "S256" });
  const r = await fetch(`${base}/api/auth/oauth2/authorize?${query}`, { headers: { Cookie: cookie } });
  assert.equal(r.status, 200, await r.clone().text());
  return (await r.json()).url;
}

/// The token endpoint's answer to `secret` for client `id` (a made-up code: 400 for the right secret, 401 for a
/// wrong one).
async function tokenStatus(id, secret) {
  const r = await fetch(`${base}/api/auth/oauth2/token`, { method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded", Authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString("base64")}` },
    body: new URLSearchParams({ grant_type: "authorization_code", code: "not-a-code", redirect_uri: "https://grafana.example.com/login/generic_oauth", code_verifier: "x".repeat(43) }) });
  return r.status;
}

test("applications: register one with its secret shown once, change it, a new secret, disable, delete", async () => {
  await page.click('#nav a[href="#/clients"]');
  await waitForHeading("Applications");
  await page.type('#client-create input[name="client_name"]', "Grafana");
  await page.type('#client-create textarea[name="redirect_uris"]', "https://grafana.example.com/login/generic_oauth");
  await page.click('#client-create button[type="submit"]');
  await waitForText("#client-create-msg", /Registered Grafana/);
  const id = await textOf("#new-client-id");
  const secret = await textOf("#new-client-secret");
  assert.match(id, /^[A-Za-z]{32}$/);
  assert.match(secret, /^[A-Za-z]{32}$/);
  assert.equal(await page.$eval(`#clients-table tr[data-client="${id}"] td`, (td) => td.textContent), "Grafana");
  assert.equal(await textOf("#clients-table caption"), "1 application, newest first");
  assert.equal(await tokenStatus(id, secret), 400, "the shown secret is the client's");
  await checkAccessibility("applications");
  await screenshot("clients");

  await page.click(`#clients-table tr[data-client="${id}"] a`);
  await waitForHeading("Grafana");
  assert.ok(!(await page.content()).includes(secret), "the secret is shown once");
  await page.$eval('#client-edit textarea[name="redirect_uris"]', (t) => { t.value += "\nhttps://grafana.example.com/other"; });
  await page.$eval('#client-edit input[name="scope"]', (i) => { i.value = "openid profile email"; });
  await page.type('#client-edit input[name="backchannel_logout_uri"]', "https://grafana.example.com/backchannel");
  await page.click('#client-edit button[type="submit"]');
  await waitForText("#client-msg", /^Saved\.$/);
  const stored = await page.evaluate(async (i) => (await (await fetch(`/api/admin/oidc/clients/${i}`)).json()).client, id);
  assert.deepEqual(stored.redirect_uris, ["https://grafana.example.com/login/generic_oauth", "https://grafana.example.com/other"]);
  assert.equal(stored.scope, "openid profile email");
  assert.equal(stored.backchannel_logout_uri, "https://grafana.example.com/backchannel");
  assert.match(await textOf("#client"), /Back-channel logouthttps:\/\/grafana\.example\.com\/backchannel/);
  // Emptied: no back-channel logout any more.
  await page.$eval('#client-edit input[name="backchannel_logout_uri"]', (i) => { i.value = ""; });
  await page.click('#client-edit button[type="submit"]');
  await waitForText("#client", /Back-channel logoutNone/);
  const cleared = await page.evaluate(async (i) => (await (await fetch(`/api/admin/oidc/clients/${i}`)).json()).client, id);
  assert.equal(cleared.backchannel_logout_uri, null);

  await confirmWith("#rotate-client-secret", "ok");
  await waitForText("#client-msg", /Secret replaced/);
  const renewed = await textOf("#new-client-secret");
  assert.match(renewed, /^[A-Za-z]{32}$/);
  assert.notEqual(renewed, secret);
  assert.equal(await tokenStatus(id, secret), 401, "the old secret stopped");
  assert.equal(await tokenStatus(id, renewed), 400);

  await page.click("#toggle-client");
  await waitForText("#client-msg", /^Disabled\.$/);
  assert.match(await textOf("#client"), /Disabled: its users cannot sign in/);
  assert.equal((await fetch(`${base}/api/auth/oauth2/public-client?client_id=${id}`)).status, 404);
  await checkAccessibility("an application");
  await screenshot("client");

  await confirmWith("#delete-client", "ok");
  await waitForHeading("Applications");
  assert.equal(await page.$(`#clients-table tr[data-client="${id}"]`), null);
  assert.equal(await page.evaluate(async (i) => (await fetch(`/api/admin/oidc/clients/${i}`)).status, id), 404);
});

test("a user's page lists the applications they allowed; withdrawing one makes it ask again", async () => {
  const rp = "https://wiki.example.com/callback";
  const made = await page.evaluate(async (uri) => (await (await fetch("/api/admin/oidc/clients", { method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ client_name: "Team wiki", redirect_uris: [uri] }) })).json()).client, rp);
  const email = "user77@seed.example";
  const cookie = await signInElsewhere(email);
  const ask = await authorizeAs(cookie, made.client_id, rp);
  assert.match(ask, /^\/consent\?/);
  const allowed = await fetch(`${base}/api/auth/oauth2/consent`, { method: "POST",
    headers: { "Content-Type": "application/json", Cookie: cookie },
    body: JSON.stringify({ accept: true, oauth_query: ask.split("?")[1] }) });
  assert.equal(allowed.status, 200, await allowed.text());
  assert.ok((await authorizeAs(cookie, made.client_id, rp)).startsWith(`${rp}?code=`), "remembered");

  const user = await page.evaluate(async (q) => (await (await fetch(`/api/admin/users?q=${q}`)).json()).users[0], encodeURIComponent(email));
  await page.goto(`${base}/admin/#/users/${user.id}`);
  await waitForHeading(email);
  await page.waitForSelector("#consents-table");
  const row = await page.$eval("#consents-table tbody tr", (tr) => [...tr.cells].map((td) => td.textContent));
  assert.equal(row[0], "Team wiki");
  assert.equal(row[1], "openid profile");
  await checkAccessibility("a user's page with an application allowed");
  await confirmWith("#consents-table tbody tr button.danger", "ok");
  await waitForText("#consents-msg", /Withdrawn: Team wiki asks again/);
  await page.waitForSelector("#no-consents");
  assert.match(await authorizeAs(cookie, made.client_id, rp), /^\/consent\?/, "asked again");
  const audit = await page.evaluate(async (id) => (await (await fetch(`/api/admin/audit?action=oauth_consent.revoked&target_id=${id}`)).json()).entries, user.id);
  assert.equal(audit.length, 1);
  assert.equal(audit[0].actor_id, (await page.evaluate(async () => (await (await fetch("/api/admin/status")).json()).signed_in_as.id)));
});

/// Every page again in the dark scheme (prefers-color-scheme: dark): axe-core clean there too (contrast above
/// all), and at 375 px wide nothing scrolls sideways.
test("every page is accessible in the dark scheme and fits 375 px", async () => {
  const pages = [["overview", "#/overview", "Overview"], ["users", "#/users?q=user4242%40", "Users"],
    ["user", `#/users/${userId}`, TARGET], ["organizations", "#/organizations", "Organizations"],
    ["audit", "#/audit", "Audit log"], ["status", "#/status", "Status"], ["clients", "#/clients", "Applications"]];
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "dark" }]);
  assert.equal(await page.evaluate(() => matchMedia("(prefers-color-scheme: dark)").matches), true);
  for (const [name, hash, title] of pages) {
    await page.goto(`${base}/admin/${hash}`);
    await waitForHeading(title);
    await page.waitForNetworkIdle({ idleTime: 200 });
    assert.equal(await page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor), "rgb(20, 24, 29)", `${name} is dark`);
    await checkAccessibility(`${name} (dark)`);
    if (name === "overview" || name === "user") await screenshot(`${name}-dark`);
  }
  await page.setViewport({ width: 375, height: 812 });
  for (const [name, hash, title] of pages) {
    await page.goto(`${base}/admin/${hash}`);
    await waitForHeading(title);
    await page.waitForNetworkIdle({ idleTime: 200 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.equal(overflow, 0, `${name} scrolls sideways at 375 px`);
    await checkAccessibility(`${name} (dark, 375 px)`);
    if (name === "user" || name === "users") await screenshot(`${name}-375`);
  }
  await page.setViewport({ width: 1280, height: 860 });
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "light" }]);
});

// --- delegated administration (#29) ------------------------------------------------------------------------
// On the second server run.sh starts (ORG_URL, mail written to ORG_MAIL_DIR): an organization's admin, who is no
// administrator of the service, manages that organization's members and invitations, and no other organization.
// Everything the steps set up goes through the organization plugin's calls, as a front end would.

const orgBase = process.env.ORG_URL;
const mailDir = process.env.ORG_MAIL_DIR;
const people = {};
const orgIds = {};

/// One call to the second server as `cookie`'s user: the status and the parsed answer.
async function orgCall(cookie, method, path, body) {
  const r = await fetch(`${orgBase}${path}`, {
    method,
    headers: { ...(body ? { "Content-Type": "application/json" } : {}), ...(cookie ? { Cookie: cookie } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

async function signUpOn(email, name) {
  const r = await fetch(`${orgBase}/api/auth/sign-up/email`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ email, name, password: PASSWORD }),
  });
  assert.equal(r.status, 200, await r.text());
  return r.headers.getSetCookie()[0].split(";")[0];
}

/// The invitation id in the mail to `email` (the outbox delivered it to ORG_MAIL_DIR); polls until it is there.
const mailsRead = new Set();
async function invitationMailedTo(email) {
  const { readdir } = await import("node:fs/promises");
  for (let tries = 0; tries < 400; tries++) {
    for (const name of (await readdir(mailDir)).filter((n) => n.endsWith(".eml") && !mailsRead.has(n))) {
      const text = (await readFile(`${mailDir}/${name}`, "utf8")).replace(/=\r?\n/g, "");
      const to = text.split(/\r?\n/).find((l) => /^to:/i.test(l)) ?? "";
      const found = text.match(/accept-invitation\?id(?:=3D|=)([0-9a-f-]{36})/);
      if (!to.toLowerCase().includes(email) || !found) continue;
      mailsRead.add(name);
      return found[1];
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`no invitation mailed to ${email}`);
}

/// `who` joins `org` with `role`: invited by `inviter`, the mailed invitation accepted.
async function joinOn(inviter, org, who, role) {
  const sent = await orgCall(people[inviter], "POST", "/api/auth/organization/invite-member", { email: who, role, organizationId: org });
  assert.equal(sent.status, 200, JSON.stringify(sent.body));
  const id = await invitationMailedTo(who);
  const accepted = await orgCall(people[who], "POST", "/api/auth/organization/accept-invitation", { invitationId: id });
  assert.equal(accepted.status, 200, JSON.stringify(accepted.body));
}

async function membersOf(org, as = "owner@riverside.example") {
  const r = await orgCall(people[as], "GET", `/api/auth/organization/list-members?organizationId=${org}&limit=100`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

/// The `data-member` of the row of `email` in the members table.
async function memberRow(email) {
  const id = await page.$$eval("#org-members-table tbody tr", (trs, e) => trs.find((tr) => tr.cells[0].textContent === e)?.dataset.member, email);
  assert.ok(id, `${email} is listed`);
  return `#org-members-table tr[data-member="${id}"]`;
}

async function memberEmails() {
  return page.$$eval("#org-members-table tbody tr", (trs) => trs.map((tr) => tr.cells[0].textContent));
}

test("organization admin: two organizations, an owner, an admin and a member, set up through the plugin's calls", async () => {
  assert.ok(orgBase && mailDir, "ORG_URL and ORG_MAIL_DIR are set by run.sh");
  for (const [email, name] of [["owner@riverside.example", "Olivia Owner"], ["manager@riverside.example", "Manny Manager"],
    ["clerk@riverside.example", "Clara Clerk"], ["staff@riverside.example", "Sam Staff"], ["head@hillside.example", "Hugo Head"]]) {
    people[email] = await signUpOn(email, name);
  }
  const create = async (who, name, slug) => {
    const r = await orgCall(people[who], "POST", "/api/auth/organization/create", { name, slug });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.id;
  };
  orgIds.riverside = await create("owner@riverside.example", "Riverside Pharmacy", "riverside");
  orgIds.hillside = await create("head@hillside.example", "Hillside Clinic", "hillside");
  await joinOn("owner@riverside.example", orgIds.riverside, "manager@riverside.example", "admin");
  await joinOn("owner@riverside.example", orgIds.riverside, "clerk@riverside.example", "member");
  assert.equal((await membersOf(orgIds.riverside)).total, 3);
});

test("organization admin: a plain member of an organization still sees “Not an administrator”", async () => {
  await page.goto(`${orgBase}/admin/`);
  await waitForHeading("Sign in");
  await signIn("clerk@riverside.example");
  await waitForHeading("Not an administrator");
  assert.match(await textOf("#not-admin"), /clerk@riverside\.example is not an administrator/);
  assert.equal(await navShown(), false);
  await page.click("#sign-out");
  await waitForHeading("Sign in");
});

test("organization admin: signed in, they see their organizations only, with its members", async () => {
  await signIn("manager@riverside.example");
  await waitForHeading("Your organizations");
  assert.equal(await navShown(), false, "no console sections for an organization admin");
  assert.equal(await textOf("#who"), "Signed in as manager@riverside.example");
  assert.deepEqual(await page.$$eval("#my-orgs-table tbody tr", (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent))),
    [["Riverside Pharmacy", "riverside", "admin"]]);
  await checkAccessibility("my organizations");
  await screenshot("my-organizations");
  await page.click("#my-orgs-table tbody a");
  await waitForHeading("Riverside Pharmacy");
  assert.deepEqual(await memberEmails(), ["owner@riverside.example", "manager@riverside.example", "clerk@riverside.example"]);
  assert.equal(await textOf("#org-members-table caption"), "3 members (1–3 of 3)");
  const names = await page.$$eval("#org-members-table tbody tr", (trs) => trs.map((tr) => tr.cells[1].textContent));
  assert.deepEqual(names.map((n) => n.endsWith(" (you)")), [false, true, false], "the signed-in admin's own row is marked");
  // An admin neither changes an owner nor grants `owner` (the server refuses both; the page does not offer them).
  assert.equal(await page.$(`${await memberRow("owner@riverside.example")} select`), null);
  assert.deepEqual(await page.$$eval(`${await memberRow("clerk@riverside.example")} option`, (os) => os.map((o) => o.value)), ["member", "admin"]);
  assert.deepEqual(await page.$$eval("#invite-form select option", (os) => os.map((o) => o.value)), ["member", "admin"]);
  await page.waitForSelector("#no-invitations");
  // With teams on (this server's [organizations] teams), the organization's teams are listed: its default team.
  assert.deepEqual(await page.$$eval("#teams-table tbody tr", (trs) => trs.map((tr) => tr.cells[0].textContent)), ["Riverside Pharmacy"]);
});

test("organization admin: invites staff by mail; the invitation is listed, one is canceled, one accepted", async () => {
  await page.type("#invite-form input[type=email]", "staff@riverside.example");
  await page.click("#invite-form button[type=submit]");
  assert.equal(await waitForText("#invite-msg", /Invitation sent|rror/), "Invitation sent to staff@riverside.example as member.");
  await page.waitForSelector("#invitations-table");
  await page.type("#invite-form input[type=email]", "temp@riverside.example");
  await page.select("#invite-form select", "admin");
  await page.click("#invite-form button[type=submit]");
  assert.equal(await waitForText("#invite-msg", /temp@/), "Invitation sent to temp@riverside.example as admin.");
  await page.waitForFunction(() => document.querySelectorAll("#invitations-table tbody tr").length === 2);
  // Into no team (the form names none): the Teams column says so.
  assert.deepEqual(await page.$$eval("#invitations-table tbody tr", (trs) => trs.map((tr) => [...tr.cells].slice(0, 3).map((c) => c.textContent))),
    [["staff@riverside.example", "member", "none"], ["temp@riverside.example", "admin", "none"]]);
  await checkAccessibility("organization admin: members and invitations");
  await screenshot("my-organization");
  // Cancel one, through the confirmation dialog: the server marks it canceled.
  const temp = await page.$$eval("#invitations-table tbody tr", (trs) => trs.find((tr) => tr.cells[0].textContent === "temp@riverside.example").dataset.invitation);
  await confirmWith(`#invitations-table tr[data-invitation="${temp}"] button`, "ok");
  assert.equal(await waitForText("#org-invitations-msg", /canceled/), "Invitation of temp@riverside.example canceled.");
  await page.waitForFunction(() => document.querySelectorAll("#invitations-table tbody tr").length === 1);
  const listed = await orgCall(people["owner@riverside.example"], "GET", `/api/auth/organization/list-invitations?organizationId=${orgIds.riverside}`);
  assert.equal(listed.body.find((i) => i.email === "temp@riverside.example").status, "canceled");
  // The other was mailed through the outbox; its recipient accepts it from the mail, and the page then lists them.
  const id = await invitationMailedTo("staff@riverside.example");
  const accepted = await orgCall(people["staff@riverside.example"], "POST", "/api/auth/organization/accept-invitation", { invitationId: id });
  assert.equal(accepted.status, 200, JSON.stringify(accepted.body));
  await page.reload();
  await waitForHeading("Riverside Pharmacy");
  await page.waitForSelector("#no-invitations");
  assert.deepEqual(await memberEmails(),
    ["owner@riverside.example", "manager@riverside.example", "clerk@riverside.example", "staff@riverside.example"]);
});

test("organization admin: changes a member's role and removes a member", async () => {
  const staff = await memberRow("staff@riverside.example");
  await page.select(`${staff} select`, "admin");
  await page.click(`${staff} button:not(.danger)`);
  assert.equal(await waitForText("#org-members-msg", /is now|rror|not/), "staff@riverside.example is now admin.");
  assert.equal((await membersOf(orgIds.riverside)).members.find((m) => m.user.email === "staff@riverside.example").role, "admin");
  // Cancelled first: nothing happens; then confirmed.
  const clerk = await memberRow("clerk@riverside.example");
  await confirmWith(`${clerk} button.danger`, "cancel");
  assert.equal(await waitForText("#org-members-msg", /Not removed/), "Not removed.");
  await confirmWith(`${clerk} button.danger`, "ok");
  assert.equal(await waitForText("#org-members-msg", /removed\./), "clerk@riverside.example removed.");
  await page.waitForFunction(() => document.querySelectorAll("#org-members-table tbody tr").length === 3);
  assert.deepEqual(await memberEmails(), ["owner@riverside.example", "manager@riverside.example", "staff@riverside.example"]);
  const after = await membersOf(orgIds.riverside);
  assert.equal(after.total, 3);
  assert.ok(!after.members.some((m) => m.user.email === "clerk@riverside.example"), "the server ended the membership");
  await checkAccessibility("organization admin: after the changes");
});

test("organization admin: another organization is not listed, not shown, and refused by the server", async () => {
  await page.goto(`${orgBase}/admin/#/my-organizations/${orgIds.hillside}`);
  await waitForHeading("Organization not available");
  assert.match(await textOf("#org-refused"), /not one you own or administer\. The server says: You are not a member of this organization/);
  await checkAccessibility("organization admin: another organization");
  // The server, asked with this browser's session: the plugin's reads of the other organization answer 403 and its
  // changes are refused, and nothing of the service's global administration answers.
  const answers = await page.evaluate(async (org, base) => {
    const get = async (path) => (await fetch(path)).status;
    const post = async (path, body) => (await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })).status;
    return {
      listMembers: await get(`${base}/list-members?organizationId=${org}`),
      full: await get(`${base}/get-full-organization?organizationId=${org}`),
      invitations: await get(`${base}/list-invitations?organizationId=${org}`),
      invite: await post(`${base}/invite-member`, { email: "mole@riverside.example", role: "member", organizationId: org }),
      update: await post(`${base}/update`, { organizationId: org, data: { name: "Taken over" } }),
      remove: await post(`${base}/remove-member`, { memberIdOrEmail: "head@hillside.example", organizationId: org }),
      adminStatus: await get("/api/admin/status"),
      adminUsers: await get("/api/admin/users?limit=1"),
      adminOrgs: await get("/api/admin/organizations"),
      pluginUsers: await get("/api/auth/admin/list-users"),
    };
  }, orgIds.hillside, "/api/auth/organization");
  assert.deepEqual({ listMembers: answers.listMembers, full: answers.full, invitations: answers.invitations },
    { listMembers: 403, full: 403, invitations: 403 });
  for (const change of ["invite", "update", "remove"]) assert.ok(answers[change] >= 400 && answers[change] < 500, `${change}: ${answers[change]}`);
  for (const global of ["adminStatus", "adminUsers", "adminOrgs"]) assert.equal(answers[global], 403, global);
  assert.ok([401, 403].includes(answers.pluginUsers), `list-users: ${answers.pluginUsers}`);
  const hillside = await membersOf(orgIds.hillside, "head@hillside.example");
  assert.deepEqual(hillside.members.map((m) => m.user.email), ["head@hillside.example"]);
  const named = await orgCall(people["head@hillside.example"], "GET", `/api/auth/organization/get-full-organization?organizationId=${orgIds.hillside}`);
  assert.equal(named.body.name, "Hillside Clinic");
  // The console's other addresses lead back to their organizations.
  await page.goto(`${orgBase}/admin/#/users`);
  await waitForHeading("Your organizations");
});

test("organization admin: the pages are accessible in the dark scheme and fit 375 px", async () => {
  const pages = [["#/my-organizations", "Your organizations"], [`#/my-organizations/${orgIds.riverside}`, "Riverside Pharmacy"],
    [`#/my-organizations/${orgIds.hillside}`, "Organization not available"]];
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "dark" }]);
  for (const width of [1280, 375]) {
    await page.setViewport({ width, height: 812 });
    for (const [hash, title] of pages) {
      await page.goto(`${orgBase}/admin/${hash}`);
      await waitForHeading(title);
      await page.waitForNetworkIdle({ idleTime: 200 });
      assert.equal(await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth), 0,
        `${title} scrolls sideways at ${width} px`);
      await checkAccessibility(`${title} (dark, ${width} px)`);
      if (width === 375 && title === "Riverside Pharmacy") await screenshot("my-organization-375");
    }
  }
  await page.setViewport({ width: 1280, height: 860 });
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "light" }]);
  await page.click("#sign-out");
  await waitForHeading("Sign in");
});

test("a global administrator sees and manages every organization's members on its page", async () => {
  await signIn("admin@seed.example");
  await waitForHeading("Overview");
  await page.goto(`${orgBase}/admin/#/organizations`);
  await waitForHeading("Organizations");
  assert.deepEqual((await page.$$eval("#orgs-table tbody a", (as) => as.map((a) => a.textContent))).sort(), ["Hillside Clinic", "Riverside Pharmacy"]);
  await page.goto(`${orgBase}/admin/#/organizations/${orgIds.hillside}`);
  await waitForHeading("Hillside Clinic");
  await page.waitForSelector("#org-members-table");
  assert.deepEqual(await memberEmails(), ["head@hillside.example"]);
  // A global administrator acts as an owner there: `owner` is offered, and an invitation goes out.
  assert.deepEqual(await page.$$eval("#invite-form select option", (os) => os.map((o) => o.value)), ["member", "admin", "owner"]);
  await page.type("#invite-form input[type=email]", "deputy@hillside.example");
  await page.select("#invite-form select", "admin");
  await page.click("#invite-form button[type=submit]");
  assert.equal(await waitForText("#invite-msg", /deputy|rror/), "Invitation sent to deputy@hillside.example as admin.");
  await page.waitForSelector("#invitations-table");
  assert.ok(await invitationMailedTo("deputy@hillside.example"));
  await checkAccessibility("organization, as a global administrator");
  await screenshot("organization-members");
  // Paging: 23 more members of Riverside (an administrator's organizationId is a membership), 26 in all, 25 a page.
  await page.evaluate(async (org) => {
    const call = async (method, path, body) => {
      const r = await fetch(path, { method, headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
      if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
      return r.json();
    };
    for (let i = 0; i < 23; i++) {
      const { user } = await call("POST", "/api/auth/admin/create-user", { email: `pharmacist${i}@riverside.example`, name: `Pharmacist ${i}` });
      await call("PATCH", "/api/admin/users", { userId: user.id, organizationId: org });
    }
  }, orgIds.riverside);
  await page.goto(`${orgBase}/admin/#/organizations/${orgIds.riverside}`);
  await waitForHeading("Riverside Pharmacy");
  await page.waitForSelector("#org-members-table");
  const caption = (text) => page.waitForFunction((t) => document.querySelector("#org-members-table caption")?.textContent === t, { timeout: 10_000 }, text);
  await caption("26 members (1–25 of 26)");
  assert.equal(await page.$$eval("#org-members-table tbody tr", (trs) => trs.length), 25);
  await page.click("#members-next");
  await caption("26 members (26–26 of 26)");
  assert.deepEqual(await memberEmails(), ["pharmacist22@riverside.example"]);
  await page.click("#members-previous");
  await caption("26 members (1–25 of 26)");
});

// --- single sign-on and SCIM on an organization's page (#48) --------------------------------------------------
// Still the global administrator on the second server: Riverside gets a SAML provider (registered through the SSO
// plugin's call, as an owner's front end would; SAML because registering it reads nothing from the network, with the
// SAML suite's test IdP certificate), and the page then confirms its domain, turns require-SSO on and off, and makes
// a SCIM token, shown once, then revokes it. Each step is checked at the server, not only on the page.

/// A SCIM list call to the second server with `token` as the bearer: its status.
async function scimStatus(token) {
  return (await fetch(`${orgBase}/api/auth/scim/v2/Users`, { headers: { Authorization: `Bearer ${token}` } })).status;
}

test("an organization's page: its SSO provider's domain confirmed, require-SSO turned on and off, a SCIM token shown once and revoked", async () => {
  const cert = await readFile(new URL("../saml/idp-cert.pem", import.meta.url), "utf8");
  const registered = await page.evaluate(async (org, cert, base) => {
    const r = await fetch("/api/auth/sso/register", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ providerId: "riverside-saml", issuer: `${base}/api/auth/sso/saml2/sp/metadata?providerId=riverside-saml`,
        domain: "riverside.example", organizationId: org,
        samlConfig: { entryPoint: "https://idp.riverside.example/sso", cert, idpMetadata: { entityID: "https://idp.riverside.example" } } }) });
    return { status: r.status, body: await r.text() };
  }, orgIds.riverside, cert, orgBase);
  assert.equal(registered.status, 200, registered.body);
  // The previous step left the browser on this address: a reload renders it again, with the new provider.
  await page.goto(`${orgBase}/admin/#/organizations/${orgIds.riverside}`);
  await page.reload();
  await waitForHeading("Riverside Pharmacy");
  await page.waitForSelector("#sso-providers-table");
  const cells = () => page.$$eval("#sso-providers-table tbody tr", (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
  assert.deepEqual(await cells(), [["riverside-saml", "SAML 2.0", `${orgBase}/api/auth/sso/saml2/sp/metadata?providerId=riverside-saml`,
    "riverside.example", "Not verified", "Confirm domain"]]);
  assert.equal(await page.$eval("#require-sso", (c) => c.checked), false);
  assert.match(await textOf("#sso-policy-domains"), /No domain of this organization is verified yet/);
  assert.equal(await textOf("#no-scim-tokens"), "No SCIM token.");
  await checkAccessibility("organization: single sign-on, before");

  // Confirm the domain: cancelled first (nothing changes), then confirmed; the server audits it, naming the way.
  await confirmWith('#sso-providers-table tr[data-provider="riverside-saml"] button', "cancel");
  assert.equal(await waitForText("#sso-providers-msg", /not confirmed/), "Domain not confirmed.");
  await confirmWith('#sso-providers-table tr[data-provider="riverside-saml"] button', "ok");
  assert.equal(await waitForText("#sso-providers-msg", /verified for/), "riverside.example verified for riverside-saml.");
  await page.waitForFunction(() => document.querySelector("#sso-providers-table tbody tr")?.cells[4].textContent === "Verified");
  assert.equal(await page.$('#sso-providers-table tbody button'), null, "a verified provider offers no confirmation");
  assert.equal(await textOf("#sso-policy-domains"), "Covers the verified domains riverside.example and their subdomains.");
  const verified = await page.evaluate(async () => (await (await fetch("/api/admin/audit?action=sso_provider.domain_verified")).json()).entries);
  assert.equal(verified.length, 1);
  assert.match(verified[0].detail, /riverside-saml: domain riverside\.example verified by an administrator's confirmation/);

  // Require SSO: the owner's password stops working (the server's answer, SSO_REQUIRED); off again, it works.
  const ownerSignIn = async () => (await fetch(`${orgBase}/api/auth/sign-in/email`, { method: "POST",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify({ email: "owner@riverside.example", password: PASSWORD }) }));
  assert.equal((await ownerSignIn()).status, 200);
  await confirmWith("#require-sso", "cancel");
  assert.equal(await waitForText("#sso-policy-msg", /unchanged/), "Policy unchanged.");
  assert.equal(await page.$eval("#require-sso", (c) => c.checked), false);
  await confirmWith("#require-sso", "ok");
  assert.equal(await waitForText("#sso-policy-msg", /now required/), "Single sign-on is now required for the verified domains.");
  assert.equal(await page.$eval("#require-sso", (c) => c.checked), true);
  const refused = await ownerSignIn();
  assert.equal(refused.status, 403);
  assert.equal((await refused.json()).code, "SSO_REQUIRED");
  await checkAccessibility("organization: single sign-on required");

  // A SCIM token: shown once with a copy button; it works; the list shows its id and never the token; a reload
  // shows it no more; revoked, the directory is refused.
  await browser.defaultBrowserContext().overridePermissions(orgBase, ["clipboard-read", "clipboard-write", "clipboard-sanitized-write"]);
  await page.click("#scim-token-form button[type=submit]");
  assert.equal(await waitForText("#scim-tokens-msg", /created|rror/), "Token created. Copy it now: it is not shown again.");
  const token = await textOf("#new-scim-token-value");
  assert.match(token, /^scim_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/);
  await page.click("#copy-scim-token");
  assert.equal(await waitForText("#scim-copy-msg", /./), "Copied to the clipboard.");
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), token);
  assert.equal(await scimStatus(token), 200);
  await page.waitForSelector("#scim-tokens-table");
  const tokenId = token.slice(5, 37);
  const rows = await page.$$eval("#scim-tokens-table tbody tr", (trs) => trs.map((tr) => [tr.dataset.token.replaceAll("-", ""), tr.cells[1].textContent, tr.cells[3].textContent]));
  assert.deepEqual(rows, [[tokenId, "scim.users.read, scim.users.write, scim.groups.read, scim.groups.write", "Never"]]);
  assert.ok(!(await page.$eval("#scim-tokens-table", (t) => t.textContent)).includes(token.slice(38)), "the list never shows the token");
  await checkAccessibility("organization: a new SCIM token");
  await screenshotOf("organization-sso", "#sso-providers-heading", "#scim-tokens-msg");
  await page.click("#require-sso"); // turning it off asks nothing
  assert.equal(await waitForText("#sso-policy-msg", /no longer/), "Single sign-on is no longer required.");
  assert.equal(await page.$eval("#require-sso", (c) => c.checked), false);
  assert.equal((await ownerSignIn()).status, 200);
  const policies = await page.evaluate(async () => (await (await fetch("/api/admin/audit?action=sso_policy.updated")).json()).entries);
  assert.equal(policies.length, 2);
  await page.reload();
  await waitForHeading("Riverside Pharmacy");
  await page.waitForSelector("#scim-tokens-table");
  assert.ok(!(await page.content()).includes(token.slice(38)), "the token is not shown again");
  await confirmWith("#scim-tokens-table tbody button.danger", "cancel");
  assert.equal(await waitForText("#scim-tokens-msg", /kept/), "Token kept.");
  await confirmWith("#scim-tokens-table tbody button.danger", "ok");
  assert.equal(await waitForText("#scim-tokens-msg", /revoked/), "Token revoked.");
  await page.waitForSelector("#no-scim-tokens");
  assert.equal(await scimStatus(token), 401);
  const made = await page.evaluate(async () => (await (await fetch("/api/admin/audit?action=scim_token.created")).json()).entries);
  const revoked = await page.evaluate(async () => (await (await fetch("/api/admin/audit?action=scim_token.revoked")).json()).entries);
  assert.equal(made.length, 1);
  assert.equal(revoked.length, 1);
  assert.ok(!JSON.stringify([made, revoked]).includes(token.slice(38)), "the audit log never names the token");

  // Dark scheme and a 375 px phone: accessible, nothing scrolls sideways.
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "dark" }]);
  for (const width of [1280, 375]) {
    await page.setViewport({ width, height: 812 });
    await page.goto(`${orgBase}/admin/#/organizations/${orgIds.riverside}`);
    await waitForHeading("Riverside Pharmacy");
    await page.waitForSelector("#sso-providers-table");
    await page.waitForNetworkIdle({ idleTime: 200 });
    assert.equal(await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth), 0,
      `the organization's page scrolls sideways at ${width} px`);
    await checkAccessibility(`organization: single sign-on (dark, ${width} px)`);
    if (width === 375) await screenshotOf("organization-sso-375", "#sso-providers-heading", "#scim-tokens-msg");
  }
  await page.setViewport({ width: 1280, height: 860 });
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "light" }]);
});

test("an organization's owner sees its single sign-on and manages its SCIM tokens; an admin of it only sees them", async () => {
  const open = async (email) => {
    await page.click("#sign-out");
    await waitForHeading("Sign in");
    await signIn(email);
    await waitForHeading("Your organizations");
    await page.goto(`${orgBase}/admin/#/my-organizations/${orgIds.riverside}`);
    await waitForHeading("Riverside Pharmacy");
    await page.waitForSelector("#sso-providers-table");
  };
  const provider = [["riverside-saml", "SAML 2.0", `${orgBase}/api/auth/sso/saml2/sp/metadata?providerId=riverside-saml`,
    "riverside.example", "Verified", "—"]];
  await open("owner@riverside.example");
  assert.deepEqual(await page.$$eval("#sso-providers-table tbody tr", (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent))), provider);
  assert.equal(await page.$eval("#require-sso", (c) => c.disabled), false, "an owner changes the policy");
  await page.waitForSelector("#no-scim-tokens");
  await page.click("#scim-token-form button[type=submit]");
  assert.equal(await waitForText("#scim-tokens-msg", /created|rror/), "Token created. Copy it now: it is not shown again.");
  const token = await textOf("#new-scim-token-value");
  assert.equal(await scimStatus(token), 200);
  await checkAccessibility("organization owner: single sign-on");
  await confirmWith("#scim-tokens-table tbody button.danger", "ok");
  assert.equal(await waitForText("#scim-tokens-msg", /revoked/), "Token revoked.");
  assert.equal(await scimStatus(token), 401);

  // An admin of the organization (not an owner): the providers and the policy to read, nothing to change.
  await open("manager@riverside.example");
  assert.deepEqual(await page.$$eval("#sso-providers-table tbody tr", (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent))), provider);
  assert.equal(await page.$eval("#require-sso", (c) => c.disabled), true);
  assert.equal(await textOf("#sso-policy-owners"), "Only an owner of the organization changes it.");
  assert.equal(await page.$("#scim-token-form"), null);
  assert.match(await textOf("#scim-owners"), /Only an owner/);
  await checkAccessibility("organization admin: single sign-on");
  await page.click("#sign-out");
  await waitForHeading("Sign in");
});

test("no script error and no policy violation on any page", () => {
  assert.deepEqual(problems, []);
});
