// The real `magicLinkClient()` and `emailOTPClient()` (better-auth 1.7.25) against a running service-auth server:
// sign-in by a mailed link (followed as a browser would, and through `magicLink.verify`), and by a mailed code;
// address verification and password reset by code. run.sh turns `[magic_link]` and `[email_otp]` on; the mail is
// read from the real SMTP server's Maildir.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdir, readFile } from "node:fs/promises";
import { createAuthClient } from "better-auth/client";
import { emailOTPClient, magicLinkClient } from "better-auth/client/plugins";
import { jarFetch } from "./jar.mjs";

const BASE = process.env.SERVICE_AUTH_URL;
const COOKIE = "service-auth.session_token";
const PASSWORD = "correct horse battery staple";

/** A client with its own cookie jar: one browser profile. */
function browser() {
  const jar = new Map();
  const customFetchImpl = jarFetch(BASE, jar);
  const plugins = [magicLinkClient(), emailOTPClient()];
  const client = createAuthClient({ baseURL: BASE, fetchOptions: { customFetchImpl }, plugins });
  return { client, jar, fetch: customFetchImpl };
}

const unique = (tag) => `${tag}-${Date.now()}-${Math.floor(Math.random() * 1e6)}@example.com`;

/** The messages to `to` with `subject`, once `count` of them have arrived (at most 30 s), quoted-printable undone. */
async function mails(to, subject, count) {
  for (let i = 0; i < 300; i++) {
    let files = [];
    try { files = await readdir(`${process.env.MAILDIR}/new`); } catch {}
    const mine = [];
    for (const f of files) {
      const text = (await readFile(`${process.env.MAILDIR}/new/${f}`, "utf8")).replace(/=\r?\n/g, "").replace(/=3D/g, "=");
      if (text.includes(`To: ${to}`) && text.includes(`Subject: ${subject}`)) mine.push(text);
    }
    if (mine.length >= count) return mine;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no "${subject}" mailed to ${to}`);
}

/** The sign-in link of the `count`-th sign-in mail to `to`, as a URL. */
async function mailedLink(to, count) {
  const text = (await mails(to, "Your sign-in link", count))[count - 1];
  const link = text.match(/(https?:\/\/\S+\/api\/auth\/magic-link\/verify\?[^\s<"]+)/)?.[1];
  assert.ok(link, "a sign-in link in the message");
  return new URL(link.replace(/&amp;/g, "&"));
}

/** The six-digit code of the `count`-th message to `to` with `subject`. */
async function mailedCode(to, subject, count) {
  const text = (await mails(to, subject, count))[count - 1];
  const code = text.match(/^\s*(\d{6})\s*$/m)?.[1];
  assert.ok(code, "a code in the message");
  return code;
}

test("magicLinkClient: signIn.magicLink, then the mailed link followed as a browser would", async () => {
  const email = unique("link");
  const { client, jar, fetch } = browser();
  const asked = await client.signIn.magicLink({ email, name: "Link User", callbackURL: "/home", newUserCallbackURL: "/welcome" });
  assert.equal(asked.error, null);
  assert.deepEqual(asked.data, { status: true });
  const link = await mailedLink(email, 1);
  assert.equal(link.searchParams.get("callbackURL"), "/home");
  // The browser opens the link: the server answers with the cookie and a redirect to the new user's page.
  const opened = await fetch(`${BASE}${link.pathname}${link.search}`, { redirect: "manual" });
  assert.equal(opened.status, 302);
  assert.equal(opened.headers.get("location"), "/welcome");
  assert.ok(jar.has(COOKIE), "the session cookie was set");
  const session = await client.getSession();
  assert.equal(session.error, null);
  assert.equal(session.data.user.email, email);
  assert.equal(session.data.user.name, "Link User");
  assert.equal(session.data.user.emailVerified, true);
  // Once only.
  const again = await fetch(`${BASE}${link.pathname}${link.search}`, { redirect: "manual" });
  assert.equal(again.headers.get("location"), "/home?error=INVALID_TOKEN");
});

test("magicLinkClient: magicLink.verify with the token answers the session and ends an unproven account's password", async () => {
  const email = unique("squat");
  const squatter = browser();
  assert.equal((await squatter.client.signUp.email({ name: "Squatter", email, password: PASSWORD })).error, null);
  const owner = browser();
  assert.equal((await owner.client.signIn.magicLink({ email })).error, null);
  const token = (await mailedLink(email, 1)).searchParams.get("token");
  const verified = await owner.client.magicLink.verify({ query: { token } });
  assert.equal(verified.error, null);
  assert.equal(verified.data.user.email, email);
  assert.equal(verified.data.user.emailVerified, true);
  assert.equal(verified.data.session.token, verified.data.token);
  assert.ok(owner.jar.has(COOKIE));
  assert.equal((await owner.client.getSession()).data.user.email, email);
  assert.equal((await squatter.client.getSession()).data, null, "the squatter's session ended");
  const refused = await browser().client.signIn.email({ email, password: PASSWORD });
  assert.equal(refused.error.status, 401, "the squatter's password ended");
  // An untrusted redirect is the client's error.
  const evil = await owner.client.signIn.magicLink({ email, callbackURL: "https://evil.example/x" });
  assert.equal(evil.error.status, 403);
  assert.equal(evil.error.code, "INVALID_CALLBACK_URL");
});

test("emailOTPClient: sendVerificationOtp and signIn.emailOtp make an account and sign in; wrong codes are the plugin's errors", async () => {
  const email = unique("otp");
  const { client, jar } = browser();
  const sent = await client.emailOtp.sendVerificationOtp({ email, type: "sign-in" });
  assert.equal(sent.error, null);
  assert.deepEqual(sent.data, { success: true });
  const code = await mailedCode(email, "Your sign-in code", 1);
  const wrong = code === "000000" ? "111111" : "000000";
  const refused = await client.signIn.emailOtp({ email, otp: wrong });
  assert.equal(refused.error.status, 400);
  assert.equal(refused.error.code, "INVALID_OTP");
  const checked = await client.emailOtp.checkVerificationOtp({ email, type: "sign-in", otp: code });
  assert.equal(checked.error.code, "USER_NOT_FOUND", "a right code, but no account yet (better-auth's answer)");
  const signedIn = await client.signIn.emailOtp({ email, otp: code, name: "Otp User" });
  assert.equal(signedIn.error, null);
  assert.equal(signedIn.data.user.email, email);
  assert.equal(signedIn.data.user.name, "Otp User");
  assert.equal(typeof signedIn.data.token, "string");
  assert.ok(jar.has(COOKIE));
  assert.equal((await client.getSession()).data.user.emailVerified, true);
  const reused = await browser().client.signIn.emailOtp({ email, otp: code });
  assert.equal(reused.error.code, "INVALID_OTP", "used up");
});

test("emailOTPClient: verifyEmail proves the address; requestPasswordReset and resetPassword set a new password", async () => {
  const email = unique("reset");
  const { client } = browser();
  assert.equal((await client.signUp.email({ name: "Reset", email, password: PASSWORD })).error, null);
  assert.equal((await client.getSession()).data.user.emailVerified, false);
  assert.equal((await client.emailOtp.sendVerificationOtp({ email, type: "email-verification" })).error, null);
  const code = await mailedCode(email, "Your verification code", 1);
  const checked = await client.emailOtp.checkVerificationOtp({ email, type: "email-verification", otp: code });
  assert.equal(checked.error, null);
  assert.deepEqual(checked.data, { success: true });
  const verified = await client.emailOtp.verifyEmail({ email, otp: code });
  assert.equal(verified.error, null);
  assert.equal(verified.data.status, true);
  assert.equal(verified.data.token, null);
  assert.equal(verified.data.user.emailVerified, true);

  const asked = await browser().client.emailOtp.requestPasswordReset({ email });
  assert.equal(asked.error, null);
  assert.deepEqual(asked.data, { success: true });
  const resetCode = await mailedCode(email, "Your password reset code", 1);
  const short = await browser().client.emailOtp.resetPassword({ email, otp: resetCode, password: "short" });
  assert.equal(short.error.code, "PASSWORD_TOO_SHORT");
  const reset = await browser().client.emailOtp.resetPassword({ email, otp: resetCode, password: "a new password here" });
  assert.equal(reset.error, null);
  assert.deepEqual(reset.data, { success: true });
  assert.equal((await client.getSession()).data, null, "every session ended with the reset");
  assert.equal((await browser().client.signIn.email({ email, password: PASSWORD })).error.status, 401);
  assert.equal((await browser().client.signIn.email({ email, password: "a new password here" })).error, null);
});
