// The real `twoFactorClient()` (better-auth 1.7.25) against a running service-auth server: enable TOTP, sign in
// through `twoFactorRedirect`, use and reuse a backup code, trust a device, regenerate codes, disable; codes by
// mail (`sendOtp`, `verifyOtp`; run.sh turns `[two_factor] codes_by_mail` on), read from the real SMTP server's
// Maildir. Codes are computed here with node's own HMAC-SHA1 (RFC 6238), as an authenticator app would, from the
// URI's secret.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { createAuthClient } from "better-auth/client";
import { twoFactorClient } from "better-auth/client/plugins";
import { jarFetch } from "./jar.mjs";

const BASE = process.env.SERVICE_AUTH_URL;
const COOKIE = "service-auth.session_token";
const PASSWORD = "correct horse battery staple";

/** A client with its own cookie jar (one browser profile); `redirects` records each onTwoFactorRedirect call. */
function browser(jar = new Map()) {
  const redirects = [];
  const customFetchImpl = jarFetch(BASE, jar);
  const plugins = [twoFactorClient({ onTwoFactorRedirect: (ctx) => redirects.push(ctx.twoFactorMethods) })];
  const client = createAuthClient({ baseURL: BASE, fetchOptions: { customFetchImpl }, plugins });
  return { client, jar, redirects };
}

const unique = (tag) => `${tag}-${Date.now()}-${Math.floor(Math.random() * 1e6)}@example.com`;

function base32Decode(text) {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = 0, value = 0;
  const out = [];
  for (const c of text.replace(/=+$/, "").toUpperCase()) {
    value = (value << 5) | alphabet.indexOf(c);
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 255);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

/** The RFC 6238 code of `key` for time step `step`. */
function totp(key, step) {
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(step));
  const mac = createHmac("sha1", key).update(counter).digest();
  const offset = mac[19] & 15;
  return String((mac.readUInt32BE(offset) & 0x7fffffff) % 1e6).padStart(6, "0");
}

/** The current step, waiting past a step's last three seconds so that the server reads the same one. */
async function step() {
  const left = 30 - (Math.floor(Date.now() / 1000) % 30);
  if (left <= 3) await new Promise((r) => setTimeout(r, (left + 1) * 1000));
  return Math.floor(Date.now() / 30000);
}

const keyOf = (uri) => base32Decode(new URL(uri).searchParams.get("secret"));

test("twoFactorClient: enable, sign in through twoFactorRedirect, backup codes, trusted device, disable", async () => {
  const email = unique("tfa");
  const { client, jar } = browser();
  assert.equal((await client.signUp.email({ name: "Tfa", email, password: PASSWORD })).error, null);

  const wrong = await client.twoFactor.enable({ password: "not the password" });
  assert.equal(wrong.error.status, 400);
  assert.equal(wrong.error.code, "INVALID_PASSWORD");
  const enabled = await client.twoFactor.enable({ password: PASSWORD });
  assert.equal(enabled.error, null);
  assert.ok(enabled.data.totpURI.startsWith("otpauth://totp/"), enabled.data.totpURI);
  assert.equal(enabled.data.backupCodes.length, 10);
  const key = keyOf(enabled.data.totpURI);
  const uri = await client.twoFactor.getTotpUri({ password: PASSWORD });
  assert.equal(uri.error, null);
  assert.deepEqual(keyOf(uri.data.totpURI), key);

  let now = await step();
  const bad = await client.twoFactor.verifyTotp({ code: totp(key, now + 5) });
  assert.equal(bad.error.status, 401);
  assert.equal(bad.error.code, "INVALID_CODE");
  const on = await client.twoFactor.verifyTotp({ code: totp(key, now) });
  assert.equal(on.error, null);
  assert.equal(on.data.user.twoFactorEnabled, true);
  assert.equal((await client.getSession()).data.user.twoFactorEnabled, true);
  assert.equal((await client.signOut()).error, null);

  // A second browser signs in: the redirect, no session, then the code opens it.
  const other = browser();
  const first = await other.client.signIn.email({ email, password: PASSWORD });
  assert.equal(first.error, null);
  assert.equal(first.data.twoFactorRedirect, true);
  assert.deepEqual(other.redirects, [["totp", "otp"]], "onTwoFactorRedirect was called with the methods");
  assert.ok(!other.jar.has(COOKIE), "no session before the second factor");
  assert.ok(other.jar.has("service-auth.two_factor"), "the two-factor cookie");
  assert.equal((await other.client.getSession()).data, null);
  now = await step();
  const passed = await other.client.twoFactor.verifyTotp({ code: totp(key, now + 1), trustDevice: true });
  assert.equal(passed.error, null);
  assert.equal(passed.data.user.email, email);
  assert.ok(other.jar.has(COOKIE) && !other.jar.has("service-auth.two_factor"));
  assert.ok(other.jar.has("service-auth.trust_device"), "the trusted-device cookie");
  assert.equal((await other.client.getSession()).data.user.email, email);

  // The trusted device signs in with the password alone.
  assert.equal((await other.client.signOut()).error, null);
  const trusted = await other.client.signIn.email({ email, password: PASSWORD });
  assert.equal(trusted.error, null);
  assert.equal(trusted.data.user.email, email, "a session at once on a trusted device");
  assert.equal(other.redirects.length, 1);

  // A third browser uses a backup code, once.
  const third = browser();
  assert.equal((await third.client.signIn.email({ email, password: PASSWORD })).data.twoFactorRedirect, true);
  const backup = await third.client.twoFactor.verifyBackupCode({ code: enabled.data.backupCodes[0] });
  assert.equal(backup.error, null);
  assert.equal((await third.client.getSession()).data.user.email, email);
  const fourth = browser();
  await fourth.client.signIn.email({ email, password: PASSWORD });
  const reused = await fourth.client.twoFactor.verifyBackupCode({ code: enabled.data.backupCodes[0] });
  assert.equal(reused.error.status, 401);
  assert.equal(reused.error.code, "INVALID_BACKUP_CODE");

  // New codes: the old ones die, a new one works.
  const fresh = await third.client.twoFactor.generateBackupCodes({ password: PASSWORD });
  assert.equal(fresh.error, null);
  assert.equal(fresh.data.status, true);
  assert.equal(fresh.data.backupCodes.length, 10);
  const old = await fourth.client.twoFactor.verifyBackupCode({ code: enabled.data.backupCodes[1] });
  assert.equal(old.error.code, "INVALID_BACKUP_CODE");
  const renewed = await fourth.client.twoFactor.verifyBackupCode({ code: fresh.data.backupCodes[0] });
  assert.equal(renewed.error, null);

  // Off: the password alone signs in again, and the trusted device's trust is gone with the factor.
  const off = await fourth.client.twoFactor.disable({ password: PASSWORD });
  assert.equal(off.error, null);
  assert.equal(off.data.status, true);
  const plain = await browser().client.signIn.email({ email, password: PASSWORD });
  assert.equal(plain.error, null);
  assert.equal(plain.data.user.twoFactorEnabled, false);
});

/** The newest sign-in code mailed to `to`, once `count` of them have arrived (at most 30 s). */
async function mailedCode(to, count) {
  for (let i = 0; i < 300; i++) {
    let files = [];
    try { files = await readdir(`${process.env.MAILDIR}/new`); } catch {}
    const mine = [];
    for (const f of files) {
      const text = await readFile(`${process.env.MAILDIR}/new/${f}`, "utf8");
      if (text.includes(`To: ${to}`) && text.includes("Subject: Your sign-in code")) mine.push(text);
    }
    if (mine.length >= count) {
      const codes = mine.map((m) => m.match(/^\s*(\d{6})\s*$/m)?.[1]);
      assert.ok(codes.every(Boolean), "a code in each message");
      return { all: codes };
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no sign-in code mailed to ${to}`);
}

test("twoFactorClient: sendOtp and verifyOtp, at sign-in and with a session", async () => {
  const email = unique("otp");
  const { client } = browser();
  assert.equal((await client.signUp.email({ name: "Otp", email, password: PASSWORD })).error, null);
  const enabled = await client.twoFactor.enable({ password: PASSWORD });
  const key = keyOf(enabled.data.totpURI);
  assert.equal((await client.twoFactor.verifyTotp({ code: totp(key, await step()) })).error, null);

  // Signed in: a code for this session.
  const sent = await client.twoFactor.sendOtp();
  assert.equal(sent.error, null);
  assert.equal(sent.data.status, true);
  const first = (await mailedCode(email, 1)).all[0];
  const mine = await client.twoFactor.verifyOtp({ code: first });
  assert.equal(mine.error, null);
  assert.equal(mine.data.user.email, email);
  const again = await client.twoFactor.verifyOtp({ code: first });
  assert.equal(again.error.code, "OTP_HAS_EXPIRED", "used once");

  // The sign-in step: the redirect lists otp, the mailed code opens the session.
  const other = browser();
  const signIn = await other.client.signIn.email({ email, password: PASSWORD });
  assert.equal(signIn.data.twoFactorRedirect, true);
  assert.deepEqual(other.redirects, [["totp", "otp"]]);
  assert.equal((await other.client.twoFactor.sendOtp()).error, null);
  const { all } = await mailedCode(email, 2);
  const code = all.find((c) => c !== first) ?? all[all.length - 1];
  const wrong = await other.client.twoFactor.verifyOtp({ code: code === "000000" ? "111111" : "000000" });
  assert.equal(wrong.error.status, 401);
  assert.equal(wrong.error.code, "INVALID_CODE");
  const passed = await other.client.twoFactor.verifyOtp({ code, trustDevice: true });
  assert.equal(passed.error, null);
  assert.equal(passed.data.user.email, email);
  assert.ok(other.jar.has(COOKIE) && !other.jar.has("service-auth.two_factor"));
  assert.ok(other.jar.has("service-auth.trust_device"), "trustDevice: the trusted-device cookie");
  assert.equal((await other.client.getSession()).data.user.email, email);
});
