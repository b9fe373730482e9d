// Moving from better-auth, end to end: a real better-auth server (admin and organization plugins) fills its
// database through its own API; `service-auth import-better-auth` imports it; the better-auth client signs in
// against service-auth with the same passwords. Once on SQLite, once on PostgreSQL. Run by ./run.sh, which builds
// the binary and starts PostgreSQL.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { createAuthClient } from "better-auth/client";
import { createHmac } from "node:crypto";
import { adminClient, organizationClient, twoFactorClient } from "better-auth/client/plugins";
import { SECRET, startBetterAuth } from "./better-auth-server.mjs";

const BIN = process.env.SERVICE_AUTH_BIN;
const PG_URL = process.env.PG_URL;
assert.ok(BIN, "SERVICE_AUTH_BIN must name the service-auth binary (run ./run.sh)");
assert.ok(PG_URL, "PG_URL must name a PostgreSQL database (run ./run.sh)");

const PEOPLE = {
  root: { name: "Root Admin", email: "root@example.com", password: "root has a long passphrase" },
  alice: { name: "Alice", email: "alice@example.com", password: "alice's old password" },
  bob: { name: "Bob", email: "bob@example.com", password: "bob's old password" },
  carol: { name: "Carol", email: "carol@example.com", password: "carol's old password" },
  dave: { name: "Dave", email: "dave@example.com", password: "dave's old password" },
  erin: { name: "Erin", email: "erin@example.com", password: "erin's old password" },
  frank: { name: "Frank", email: "frank@example.com", password: "frank never comes back" },
};

/** A better-auth client with its own cookie jar, sending the Origin a browser on `base` would. */
function browser(base) {
  const jar = new Map();
  const customFetchImpl = async (input, init = {}) => {
    const headers = new Headers(init.headers);
    headers.set("origin", base);
    if (jar.size) headers.set("cookie", [...jar].map(([k, v]) => `${k}=${v}`).join("; "));
    const response = await fetch(input, { ...init, headers });
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(";").map((s) => s.trim());
      const [name, value] = [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)];
      if (attrs.some((a) => a.toLowerCase() === "max-age=0")) jar.delete(name);
      else jar.set(name, value);
    }
    return response;
  };
  return createAuthClient({
    baseURL: base,
    fetchOptions: { customFetchImpl },
    plugins: [adminClient(), organizationClient(), twoFactorClient()],
  });
}

/** The RFC 6238 code of the `otpauth://` URI's secret for the current 30-second step plus `ahead`. */
function totp(uri, ahead = 0) {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = 0, value = 0;
  const key = [];
  for (const c of new URL(uri).searchParams.get("secret")) {
    value = (value << 5) | alphabet.indexOf(c);
    bits += 5;
    if (bits >= 8) {
      key.push((value >>> (bits - 8)) & 255);
      bits -= 8;
    }
  }
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(Date.now() / 30000) + ahead));
  const mac = createHmac("sha1", Buffer.from(key)).update(counter).digest();
  return String((mac.readUInt32BE(mac[19] & 15) & 0x7fffffff) % 1e6).padStart(6, "0");
}

/** Waits past a step's last three seconds, so that the code computed is the one the server expects. */
async function settle() {
  const left = 30 - (Math.floor(Date.now() / 1000) % 30);
  if (left <= 3) await new Promise((r) => setTimeout(r, (left + 1) * 1000));
}

const ok = (result, what) => {
  assert.equal(result.error, null, `${what}: ${JSON.stringify(result.error)}`);
  return result.data;
};

/**
 * Fills `database` through better-auth: an administrator, users signed up and created by the administrator,
 * roles (one not configured in service-auth, one list), a ban, two organizations and their members. Returns the
 * better-auth ids by person and organization slug.
 */
async function fill(database) {
  const ids = {};
  // The first administrator: signs up, then (listed in adminUserIds) gives itself the role.
  let ba = await startBetterAuth(database);
  ids.root = ok(await browser(ba.baseURL).signUp.email(PEOPLE.root), "sign up root").user.id;
  await ba.close();
  ba = await startBetterAuth(database, { adminUserIds: [ids.root] });
  const root = browser(ba.baseURL);
  ok(await root.signIn.email(PEOPLE.root), "sign in root");
  ok(await root.admin.setRole({ userId: ids.root, role: "admin" }), "root becomes admin");

  const alice = browser(ba.baseURL);
  ids.alice = ok(await alice.signUp.email(PEOPLE.alice), "sign up alice").user.id;
  ids.bob = ok(await browser(ba.baseURL).signUp.email(PEOPLE.bob), "sign up bob").user.id;
  for (const who of ["carol", "dave", "erin", "frank"]) {
    ids[who] = ok(await root.admin.createUser({ ...PEOPLE[who], role: "user" }), `create ${who}`).user.id;
  }
  ok(await root.admin.setRole({ userId: ids.dave, role: ["qa_manager", "user"] }), "dave: two roles");
  ok(await root.admin.setRole({ userId: ids.erin, role: "superuser" }), "erin: a role service-auth lacks");
  ok(await root.admin.banUser({ userId: ids.bob, banReason: "left the company" }), "ban bob");

  ids["st-mary"] = ok(await alice.organization.create({ name: "St Mary Pharmacy", slug: "st-mary" }), "org").id;
  ids.north = ok(await root.organization.create({ name: "North Clinic", slug: "north" }), "org north").id;
  // Members added by the server API (as an application's back end does); alice's second membership comes over
  // beside her first (her primary organization).
  const add = (userId, organizationId) =>
    ba.auth.api.addMember({ body: { userId, organizationId, role: "member" } });
  await add(ids.carol, ids["st-mary"]);
  await add(ids.alice, ids.north);
  // Alice turns on better-auth's second factor: an authenticator app, confirmed with a first code.
  const enrolled = ok(await alice.twoFactor.enable({ password: PEOPLE.alice.password }), "alice enables 2FA");
  await settle();
  ok(await alice.twoFactor.verifyTotp({ code: totp(enrolled.totpURI) }), "alice confirms 2FA");
  ids.aliceTotp = enrolled.totpURI;
  ids.aliceBackup = enrolled.backupCodes;
  await ba.close();
  return ids;
}

/** Runs the binary to completion. */
function run(args, env) {
  const out = spawnSync(BIN, args, { env: { ...process.env, ...env }, encoding: "utf8" });
  return { status: out.status, stdout: out.stdout, stderr: out.stderr };
}

/** Starts service-auth on `env`'s data directory; resolves with its base URL and a stop function. */
async function serve(env) {
  const child = spawn(BIN, ["serve"], { env: { ...process.env, ...env, SERVICE_AUTH_LISTEN: "127.0.0.1:0" } });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const addr = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/listening on (\S+)/);
      if (m) resolve(m[1]);
    });
    child.on("exit", (code) => reject(new Error(`service-auth exited ${code}: ${stderr}`)));
  });
  const stop = () =>
    new Promise((resolve) => {
      child.on("exit", resolve);
      child.kill("SIGTERM");
    });
  return { base: `http://${addr}`, stop, stderr: () => stderr };
}

async function migrateAndCheck(source, database) {
  const ids = await fill(database.handle);
  await database.done();

  const work = fs.mkdtempSync(path.join(os.tmpdir(), "service-auth-migration-"));
  fs.writeFileSync(
    path.join(work, "config.toml"),
    `[roles]\nallowed = ["admin", "qa_manager", "user"]\ndefault = "user"\n` +
      `[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\n`,
  );
  const env = {
    SERVICE_AUTH_CONFIG: path.join(work, "config.toml"),
    SERVICE_AUTH_DATA_DIR: path.join(work, "data"),
    SERVICE_AUTH_LOG: "info",
  };
  const mapping = path.join(work, "mapping.jsonl");

  const dry = run(["import-better-auth", ...source, "--dry-run"], env);
  assert.equal(dry.status, 0, dry.stderr);
  assert.match(dry.stderr, /would import \(dry run, nothing written\): 7 users \(1 administrators, 1 banned; 7 with/);
  const real = run(["import-better-auth", ...source, "--mapping-out", mapping], { ...env, BETTER_AUTH_SECRET: SECRET });
  assert.equal(real.status, 0, real.stderr);
  assert.match(real.stderr, /1 second factor\(s\) \(authenticator app and backup codes\) imported/);
  assert.match(real.stderr, /imported: 7 users .* 2 organizations, 4 memberships/);
  assert.match(real.stderr, /role "superuser" imported as user/);
  const again = run(["import-better-auth", ...source], env);
  assert.notEqual(again.status, 0, "a second run finds every e-mail taken");
  assert.match(again.stderr, /already has an account in the data directory/);

  const map = Object.fromEntries(
    fs.readFileSync(mapping, "utf8").trim().split("\n").map((l) => JSON.parse(l)).map((m) => [m.better_auth_id, m.id]),
  );
  assert.equal(Object.keys(map).length, 9, "7 users and 2 organizations");

  const server = await serve(env);
  try {
    const signIn = async (who) => {
      const client = browser(server.base);
      return { client, result: await client.signIn.email({ email: PEOPLE[who].email, password: PEOPLE[who].password }) };
    };
    const { client: root, result: rootIn } = await signIn("root");
    assert.equal(ok(rootIn, "root signs in").user.role, "admin");
    assert.equal(rootIn.data.user.id, map[ids.root], "the mapping file names the new id");

    // Alice's second factor came over: the password alone is not enough, a code from the same app is.
    const { client: aliceClient, result: aliceIn } = await signIn("alice");
    assert.equal(ok(aliceIn, "alice's password").twoFactorRedirect, true);
    await settle();
    const alice = ok(await aliceClient.twoFactor.verifyTotp({ code: totp(ids.aliceTotp, 1) }), "alice's code").user;
    assert.equal(alice.twoFactorEnabled, true);
    const { client: viaBackup } = await signIn("alice");
    ok(await viaBackup.twoFactor.verifyBackupCode({ code: ids.aliceBackup[0] }), "alice's backup code");
    assert.equal(alice.organizationId, map[ids["st-mary"]], "the first membership is the primary one");
    // Every membership came over with its role: the organization she created as its owner, the other as member.
    const hers = ok(await aliceClient.organization.list(), "alice's organizations");
    assert.deepEqual(hers.map((o) => o.slug).sort(), ["north", "st-mary"]);
    const role = async (slug) =>
      ok(await aliceClient.organization.getActiveMemberRole({ query: { organizationId: map[ids[slug]] } }), slug).role;
    assert.equal(await role("st-mary"), "owner");
    assert.equal(await role("north"), "member");
    assert.equal(alice.role, "user");
    const carol = ok((await signIn("carol")).result, "carol signs in").user;
    assert.equal(carol.organizationId, map[ids["st-mary"]]);
    assert.equal(ok((await signIn("dave")).result, "dave").user.role, "qa_manager");
    assert.equal(ok((await signIn("erin")).result, "erin").user.role, "user");

    const bob = (await signIn("bob")).result;
    assert.equal(bob.error?.status, 403);
    assert.equal(bob.error?.code, "BANNED_USER");
    const wrong = await browser(server.base).signIn.email({ email: PEOPLE.alice.email, password: "not it at all" });
    assert.equal(wrong.error?.status, 401);

    const users = ok(await root.admin.listUsers({ query: { limit: 100 } }), "list users").users;
    const listedBob = users.find((u) => u.email === PEOPLE.bob.email);
    assert.equal(listedBob.banned, true);
    assert.equal(listedBob.banReason, "left the company");
    assert.equal(ok(await root.getSession(), "session").user.email, PEOPLE.root.email);
  } finally {
    await server.stop();
  }
  // The start-up log says how many imported hashes there were (the server logs it once the state is loaded).
  assert.match(server.stderr(), /legacy_password_hashes=7/);

  const exported = run(["export"], env);
  assert.equal(exported.status, 0, exported.stderr);
  const hashes = Object.fromEntries(
    exported.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
      .filter((l) => l.type === "user")
      .map((l) => [l.email, l.password_hash]),
  );
  for (const who of ["root", "alice", "carol", "dave", "erin", "bob"]) {
    assert.match(hashes[PEOPLE[who].email], /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/, `${who} was re-hashed`);
  }
  assert.match(hashes[PEOPLE.frank.email], /^[0-9a-f]{32}:[0-9a-f]{128}$/, "frank's hash waits for his sign-in");

  // Restarted, the imported state and the sessions are all there.
  const again2 = await serve(env);
  try {
    const root = browser(again2.base);
    ok(await root.signIn.email(PEOPLE.root), "root signs in with argon2id now");
    const orgs = await (
      await fetch(`${again2.base}/api/admin/organizations`, {
        headers: { cookie: `service-auth.session_token=${await tokenOf(root)}` },
      })
    ).json();
    assert.deepEqual(orgs.organizations.map((o) => o.slug).sort(), ["north", "st-mary"]);
  } finally {
    await again2.stop();
  }
  assert.match(again2.stderr(), /legacy_password_hashes=1/, "only frank has not signed in");
  fs.rmSync(work, { recursive: true, force: true });
}

async function tokenOf(client) {
  return ok(await client.getSession(), "session").session.token;
}

test("a better-auth SQLite database moves over; everyone signs in with the old password", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "better-auth-sqlite-"));
  const file = path.join(dir, "auth.db");
  const db = new Database(file);
  await migrateAndCheck(["--sqlite", file], { handle: db, done: async () => db.close() });
  fs.rmSync(dir, { recursive: true, force: true });
});

test("a better-auth PostgreSQL database moves over; everyone signs in with the old password", async () => {
  const pool = new pg.Pool({ connectionString: PG_URL });
  await migrateAndCheck(["--postgres", PG_URL], { handle: pool, done: () => pool.end() });
});
