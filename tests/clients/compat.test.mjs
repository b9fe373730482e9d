// The real better-auth client (createAuthClient) against a running service-auth server, carrying cookies as a
// browser would (a cookie jar, and an Origin header on every request). Run by ./run.sh, which starts the server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createAuthClient } from "better-auth/client";
import { adminClient } from "better-auth/client/plugins";
import { jarFetch } from "./jar.mjs";

const BASE = process.env.SERVICE_AUTH_URL;
const ADMIN = { email: process.env.ADMIN_EMAIL, password: process.env.ADMIN_PASSWORD };
const COOKIE = "service-auth.session_token";

/** A client with its own cookie jar: what one browser profile would hold. */
function browser() {
  const jar = new Map();
  const customFetchImpl = jarFetch(BASE, jar);
  const client = createAuthClient({ baseURL: BASE, fetchOptions: { customFetchImpl }, plugins: [adminClient()] });
  return { client, jar };
}

const unique = (tag) => `${tag}-${Date.now()}-${Math.floor(Math.random() * 1e6)}@example.com`;
const PASSWORD = "correct horse battery staple";

test("sign-up, get-session, sign-out, sign-in through the client", async () => {
  const { client, jar } = browser();
  const email = unique("ann");
  const up = await client.signUp.email({ name: "Ann", email, password: PASSWORD });
  assert.equal(up.error, null);
  assert.equal(up.data.user.email, email);
  assert.equal(up.data.user.role, "user");
  assert.equal(typeof up.data.token, "string");
  assert.ok(jar.has(COOKIE), "the session cookie was set");

  const session = await client.getSession();
  assert.equal(session.error, null);
  assert.equal(session.data.user.email, email);
  assert.equal(session.data.session.userId, session.data.user.id);

  const out = await client.signOut();
  assert.equal(out.error, null);
  assert.equal(out.data.success, true);
  assert.ok(!jar.has(COOKIE), "sign-out cleared the cookie");
  assert.equal((await client.getSession()).data, null);

  const again = await client.signIn.email({ email, password: PASSWORD });
  assert.equal(again.error, null);
  assert.equal(again.data.redirect, false);
  assert.equal(again.data.user.email, email);
  assert.equal((await client.getSession()).data.user.email, email);
});

test("a duplicate sign-up is the client's error with status 422 and the library's code", async () => {
  const { client } = browser();
  const email = unique("dup");
  assert.equal((await client.signUp.email({ name: "Dup", email, password: PASSWORD })).error, null);
  const second = await browser().client.signUp.email({ name: "Dup", email: email.toUpperCase(), password: PASSWORD });
  assert.equal(second.data, null);
  assert.equal(second.error.status, 422);
  assert.equal(second.error.code, "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL");
});

test("a wrong password is status 401 INVALID_EMAIL_OR_PASSWORD", async () => {
  const { client } = browser();
  const email = unique("pw");
  await client.signUp.email({ name: "Pw", email, password: PASSWORD });
  const wrong = await browser().client.signIn.email({ email, password: "not the password" });
  assert.equal(wrong.data, null);
  assert.equal(wrong.error.status, 401);
  assert.equal(wrong.error.code, "INVALID_EMAIL_OR_PASSWORD");
});

test("a banned account gets 403 BANNED_USER and its session ends", async () => {
  const user = browser();
  const email = unique("ban");
  const up = await user.client.signUp.email({ name: "Ban", email, password: PASSWORD });
  const admin = browser();
  assert.equal((await admin.client.signIn.email(ADMIN)).error, null);
  const ban = await fetch(`${BASE}/api/admin/users`, {
    method: "PATCH",
    headers: { "content-type": "application/json", cookie: `${COOKIE}=${admin.jar.get(COOKIE)}`, origin: BASE },
    body: JSON.stringify({ userId: up.data.user.id, banned: true }),
  });
  assert.equal(ban.status, 200);
  assert.equal((await user.client.getSession()).data, null, "the ban ended the live session");
  const refused = await browser().client.signIn.email({ email, password: PASSWORD });
  assert.equal(refused.error.status, 403);
  assert.equal(refused.error.code, "BANNED_USER");
});

test("rememberMe: false gives a browser-session cookie the client still uses", async () => {
  const { client, jar } = browser();
  const email = unique("short");
  await browser().client.signUp.email({ name: "Short", email, password: PASSWORD });
  const r = await client.signIn.email({ email, password: PASSWORD, rememberMe: false });
  assert.equal(r.error, null);
  assert.ok(jar.has(COOKIE));
  assert.equal((await client.getSession()).data.user.email, email);
});

test("account lifecycle: changePassword, updateUser, listSessions, revokeSession(s), deleteUser", async () => {
  const { client, jar } = browser();
  const email = unique("life");
  assert.equal((await client.signUp.email({ name: "Life", email, password: PASSWORD })).error, null);
  const second = browser();
  assert.equal((await second.client.signIn.email({ email, password: PASSWORD })).error, null);

  // updateUser: name and picture.
  const updated = await client.updateUser({ name: "Life Two", image: "https://cdn.example/l.png" });
  assert.equal(updated.error, null);
  assert.equal(updated.data.status, true);
  assert.equal((await client.getSession()).data.user.name, "Life Two");

  // listSessions: both, the caller's own with its token, the other with an opaque handle.
  const listed = await client.listSessions();
  assert.equal(listed.error, null);
  assert.equal(listed.data.length, 2);
  const own = jar.get(COOKIE);
  const other = listed.data.find((s) => s.token !== own);
  assert.ok(other, "the other session is listed");

  // revokeSession with the handle ends the other browser's session.
  assert.equal((await client.revokeSession({ token: other.token })).error, null);
  assert.equal((await second.client.getSession()).data, null);

  // changePassword: a wrong current password is INVALID_PASSWORD; the right one with revokeOtherSessions gives a
  // new session (and cookie), and the old password stops working.
  const wrong = await client.changePassword({ currentPassword: "not the password", newPassword: "a brand-new passphrase" });
  assert.equal(wrong.error.status, 400);
  assert.equal(wrong.error.code, "INVALID_PASSWORD");
  const changed = await client.changePassword({
    currentPassword: PASSWORD,
    newPassword: "a brand-new passphrase",
    revokeOtherSessions: true,
  });
  assert.equal(changed.error, null);
  assert.equal(typeof changed.data.token, "string");
  assert.equal(jar.get(COOKIE), changed.data.token, "the new session's cookie was set");
  assert.equal((await client.getSession()).data.user.email, email);
  const old = await second.client.signIn.email({ email, password: PASSWORD });
  assert.equal(old.error.status, 401);

  // revokeOtherSessions keeps the current one; revokeSessions ends every one.
  assert.equal((await second.client.signIn.email({ email, password: "a brand-new passphrase" })).error, null);
  assert.equal((await client.revokeOtherSessions()).error, null);
  assert.equal((await second.client.getSession()).data, null);
  assert.equal((await client.getSession()).data.user.email, email);
  assert.equal((await second.client.signIn.email({ email, password: "a brand-new passphrase" })).error, null);
  assert.equal((await second.client.revokeSessions()).error, null);
  assert.equal((await client.getSession()).data, null);
  assert.equal((await second.client.getSession()).data, null);

  // deleteUser with the password: the account is gone.
  assert.equal((await client.signIn.email({ email, password: "a brand-new passphrase" })).error, null);
  const deleted = await client.deleteUser({ password: "a brand-new passphrase" });
  assert.equal(deleted.error, null);
  assert.equal(deleted.data.success, true);
  assert.equal((await client.getSession()).data, null);
  const gone = await client.signIn.email({ email, password: "a brand-new passphrase" });
  assert.equal(gone.error.status, 401);
});

/** The newest reset link's token in the Maildir the test SMTP server writes (waits up to 15 s for `count` mails). */
async function resetTokenFromMail(to, count) {
  const { readdir, readFile } = await import("node:fs/promises");
  for (let i = 0; i < 150; i++) {
    let files = [];
    try { files = await readdir(`${process.env.MAILDIR}/new`); } catch {}
    const mails = [];
    for (const f of files) mails.push(await readFile(`${process.env.MAILDIR}/new/${f}`, "utf8"));
    const mine = mails.filter((m) => m.includes(`To: ${to}`));
    if (mine.length >= count) {
      const text = mine.map((m) => m.replace(/=\r?\n/g, "")).join("\n");
      const tokens = [...text.matchAll(/reset-password\/([A-Za-z0-9_-]{43})/g)].map((m) => m[1]);
      return tokens[tokens.length - 1];
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no reset mail for ${to}`);
}

test("password reset: requestPasswordReset mails a link, resetPassword sets the password and ends sessions", async () => {
  const { client } = browser();
  const email = unique("reset");
  assert.equal((await client.signUp.email({ name: "Reset", email, password: PASSWORD })).error, null);
  const asked = await client.requestPasswordReset({ email, redirectTo: "/reset" });
  assert.equal(asked.error, null);
  assert.equal(asked.data.status, true);
  const ghost = await client.requestPasswordReset({ email: unique("ghost") });
  assert.deepEqual(ghost.data, asked.data, "an unknown e-mail gets the same answer");

  const token = await resetTokenFromMail(email, 1);
  const reset = await client.resetPassword({ newPassword: "renewed by mail 1", token });
  assert.equal(reset.error, null);
  assert.equal(reset.data.status, true);
  assert.equal((await client.getSession()).data, null, "the session ended with the reset");
  assert.equal((await client.signIn.email({ email, password: PASSWORD })).error.status, 401);
  assert.equal((await client.signIn.email({ email, password: "renewed by mail 1" })).error, null);
  const again = await client.resetPassword({ newPassword: "renewed by mail 2", token });
  assert.equal(again.error.code, "INVALID_TOKEN");
});

test("e-mail verification: sendVerificationEmail mails a link, verifyEmail marks the address verified", async () => {
  const { client } = browser();
  const email = unique("verify");
  assert.equal((await client.signUp.email({ name: "Verify", email, password: PASSWORD })).error, null);
  assert.equal((await client.getSession()).data.user.emailVerified, false);
  const sent = await client.sendVerificationEmail({ email });
  assert.equal(sent.error, null);
  assert.equal(sent.data.status, true);
  const { readdir, readFile } = await import("node:fs/promises");
  let token;
  for (let i = 0; i < 150 && !token; i++) {
    let files = [];
    try { files = await readdir(`${process.env.MAILDIR}/new`); } catch {}
    for (const f of files) {
      const text = (await readFile(`${process.env.MAILDIR}/new/${f}`, "utf8")).replace(/=\r?\n/g, "").replace(/=3D/g, "=");
      const found = text.includes(`To: ${email}`) && text.match(/verify-email\?token=([A-Za-z0-9_-]{43})/);
      if (found) token = found[1];
    }
    if (!token) await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(token, "a verification mail arrived");
  const verified = await client.verifyEmail({ query: { token } });
  assert.equal(verified.error, null);
  assert.equal(verified.data.status, true);
  assert.equal((await client.getSession()).data.user.emailVerified, true);
  const again = await client.verifyEmail({ query: { token } });
  assert.equal(again.error.code, "INVALID_TOKEN");
});

test("admin plugin: listUsers, createUser, setRole, banUser, unbanUser, listUserSessions, revokeUserSession(s), setUserPassword, removeUser, hasPermission", async () => {
  const { client: admin } = browser();
  assert.equal((await admin.signIn.email(ADMIN)).error, null);
  const email = unique("staff");
  const created = await admin.admin.createUser({ email, password: PASSWORD, name: "Staff", role: "qa_manager" });
  assert.equal(created.error, null);
  const id = created.data.user.id;
  assert.equal(created.data.user.role, "qa_manager");

  const found = await admin.admin.listUsers({ query: { searchValue: email.split("@")[0], searchField: "email", limit: 10 } });
  assert.equal(found.error, null);
  assert.equal(found.data.total, 1);
  assert.equal(found.data.users[0].id, id);

  const role = await admin.admin.setRole({ userId: id, role: "pharmacist_in_charge" });
  assert.equal(role.data.user.role, "pharmacist_in_charge");

  const staff = browser();
  assert.equal((await staff.client.signIn.email({ email, password: PASSWORD })).error, null);
  const sessions = await admin.admin.listUserSessions({ userId: id });
  assert.equal(sessions.data.sessions.length, 1);
  assert.equal((await admin.admin.revokeUserSession({ sessionToken: sessions.data.sessions[0].token })).data.success, true);
  assert.equal((await staff.client.getSession()).data, null, "the revoked session ended");

  assert.equal((await staff.client.signIn.email({ email, password: PASSWORD })).error, null);
  const banned = await admin.admin.banUser({ userId: id, banReason: "left" });
  assert.equal(banned.data.user.banned, true);
  assert.equal((await staff.client.getSession()).data, null, "the ban ended the session");
  assert.equal((await staff.client.signIn.email({ email, password: PASSWORD })).error.status, 403);
  assert.equal((await admin.admin.unbanUser({ userId: id })).data.user.banned, false);

  assert.equal((await admin.admin.setUserPassword({ userId: id, newPassword: "set by the admin" })).data.status, true);
  assert.equal((await staff.client.signIn.email({ email, password: PASSWORD })).error.status, 401);
  assert.equal((await staff.client.signIn.email({ email, password: "set by the admin" })).error, null);
  assert.equal((await admin.admin.revokeUserSessions({ userId: id })).data.success, true);
  assert.equal((await staff.client.getSession()).data, null);

  const allowed = await admin.admin.hasPermission({ permissions: { user: ["ban"] } });
  assert.equal(allowed.data.success, true);
  assert.equal((await admin.admin.removeUser({ userId: id })).data.success, true);
  assert.equal((await staff.client.signIn.email({ email, password: "set by the admin" })).error.status, 401);
});

test("admin plugin: updateUser, banUser with banExpiresIn, impersonateUser, stopImpersonating, listUsers paging", async () => {
  const { client: admin, jar } = browser();
  assert.equal((await admin.signIn.email(ADMIN)).error, null);
  const adminToken = jar.get(COOKIE);
  const tag = unique("paged").split("@")[0];
  const ids = [];
  for (let i = 0; i < 3; i++) {
    const made = await admin.admin.createUser({ email: `${tag}-${i}@example.com`, password: PASSWORD, name: `Paged ${i}` });
    assert.equal(made.error, null);
    ids.push(made.data.user.id);
  }
  const page = async (offset) =>
    (await admin.admin.listUsers({ query: { searchValue: tag, searchField: "email", searchOperator: "starts_with", limit: 2, offset } })).data;
  const [first, second] = [await page(0), await page(2)];
  assert.equal(first.total, 3);
  assert.deepEqual([...first.users, ...second.users].map((u) => u.id), ids, "two pages, every user once, in creation order");

  const updated = await admin.admin.updateUser({ userId: ids[0], data: { name: "Renamed", emailVerified: true } });
  assert.equal(updated.error, null);
  assert.equal(updated.data.name, "Renamed");
  const fetched = await admin.admin.getUser({ query: { id: ids[0] } });
  assert.equal(fetched.error, null);
  assert.deepEqual([fetched.data.name, fetched.data.emailVerified], ["Renamed", true], "get-user sees the change");
  assert.equal((await admin.admin.updateUser({ userId: ids[0], data: { password: "x" } })).error.code, "PASSWORD_CANNOT_BE_UPDATED_VIA_UPDATE_USER");

  const staff = browser();
  const email = `${tag}-1@example.com`;
  assert.equal((await staff.client.signIn.email({ email, password: PASSWORD })).error, null);
  const banned = await admin.admin.banUser({ userId: ids[1], banReason: "cool off", banExpiresIn: 1 });
  assert.equal(banned.error, null);
  assert.ok(banned.data.user.banExpires, "the ban's end is shown");
  assert.equal((await staff.client.getSession()).data, null, "the ban ended the session");
  assert.equal((await staff.client.signIn.email({ email, password: PASSWORD })).error.status, 403);
  await new Promise((resolve) => setTimeout(resolve, 1300));
  assert.equal((await staff.client.signIn.email({ email, password: PASSWORD })).error, null, "the ban ended by itself");

  const acting = await admin.admin.impersonateUser({ userId: ids[2] });
  assert.equal(acting.error, null);
  assert.equal(acting.data.user.id, ids[2]);
  const now = await admin.getSession();
  assert.equal(now.data.user.id, ids[2], "the browser is the user now");
  assert.ok(now.data.session.impersonatedBy, "and the session says who is behind it");
  const stopped = await admin.admin.stopImpersonating();
  assert.equal(stopped.error, null);
  assert.equal(jar.get(COOKIE), adminToken, "the administrator's own session is back");
  assert.equal((await admin.getSession()).data.user.email, ADMIN.email);
  assert.equal((await admin.admin.impersonateUser({ userId: (await admin.getSession()).data.user.id })).error.status, 403);
});
