// Revocation, measured against better-auth: the time from an acknowledged ban, sign-out or password change to the
// first refused session check made with a copy of the session's cookies (what someone who stole them holds), and
// get-session throughput, for four setups on one machine in one run:
//   service-auth on one node; service-auth on two nodes over PostgreSQL (the change on node A, the checks on B);
//   better-auth 1.7.25 (SQLite) with its cookie cache off, and on (5 minutes, its documented setting).
// Started by benches/revocation.sh, which builds the release binary, starts PostgreSQL and passes their
// addresses. Only 127.0.0.1 is contacted.
import { spawn, execFile } from "node:child_process";
import { promisify } from "node:util";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startBetterAuth } from "../tests/migration/better-auth-server.mjs";

const require = createRequire(new URL("../tests/migration/package.json", import.meta.url));
const Database = require("better-sqlite3");

const BIN = process.env.SERVICE_AUTH_BIN;
const PG_URL = process.env.PG_URL;
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const DURATION = Number(process.env.DURATION ?? 8);
// How long a check keeps being answered before we stop waiting: past the cookie cache's 5 minutes.
const CAP_MS = Number(process.env.CAP_SECS ?? 330) * 1000;
const POLL_MS = 20;
const PASSWORD = "revocation bench password 1";
const ADMIN = { email: "admin@bench.example", password: "revocation bench admin 1" };

/** A client's cookies, as a browser keeps them. */
class Jar {
  constructor(cookies = new Map()) { this.cookies = cookies; }
  copy() { return new Jar(new Map(this.cookies)); }
  header() { return [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; "); }
  take(response) {
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(";");
      const i = pair.indexOf("=");
      const [name, value] = [pair.slice(0, i).trim(), pair.slice(i + 1).trim()];
      const gone = !value || attrs.some((a) => /^\s*max-age=0\s*$/i.test(a));
      if (gone) this.cookies.delete(name); else this.cookies.set(name, value);
    }
  }
}

async function call(base, path, { jar, body, method = body ? "POST" : "GET" } = {}) {
  const headers = { origin: base };
  if (body) headers["content-type"] = "application/json";
  if (jar?.cookies.size) headers.cookie = jar.header();
  const response = await fetch(base + path, { method, headers, body: body && JSON.stringify(body) });
  jar?.take(response);
  const text = await response.text();
  return { status: response.status, json: text ? JSON.parse(text) : null };
}

async function signIn(base, email) {
  const jar = new Jar();
  let r;
  // Two nodes: an account made on A a moment ago reaches B within the follower's delay.
  for (let tries = 0; tries < 100; tries++) {
    r = await call(base, "/api/auth/sign-in/email", { jar, body: { email, password: PASSWORD } });
    if (r.status !== 401) break;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  if (r.status !== 200) throw new Error(`sign-in ${email} at ${base}: ${r.status} ${JSON.stringify(r.json)}`);
  // One session check, so that a cookie cache (where there is one) is in the jar as a browser would hold it.
  await call(base, "/api/auth/get-session", { jar });
  return jar;
}

/** Milliseconds from `act`'s acknowledgement to the first get-session at `checkBase` with `stolen` that finds no
 *  session; `null` when it is still answered after CAP_MS. */
async function revocationDelay(act, checkBase, stolen) {
  // Two nodes: a session started on A reaches B a moment later; the clock starts once B serves it.
  for (let tries = 0; ; tries++) {
    const before = await call(checkBase, "/api/auth/get-session", { jar: stolen.copy() });
    if (before.json?.session) break;
    if (tries === 100) throw new Error(`the stolen cookies open no session before the change at ${checkBase}`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  await act();
  const acknowledged = performance.now();
  while (performance.now() - acknowledged < CAP_MS) {
    const r = await call(checkBase, "/api/auth/get-session", { jar: stolen.copy() });
    if (r.status === 200 && !r.json?.session) return performance.now() - acknowledged;
    if (r.status === 401) return performance.now() - acknowledged;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  return null;
}

let users = 0;
/** One measurement of each change: each on an account of its own, the three at once (the cache's wait is long). */
async function measureRound(setup) {
  const { base, checkBase, adminJar } = setup;
  const fresh = async () => {
    const email = `victim-${process.pid}-${++users}@bench.example`;
    const r = await call(base, "/api/auth/sign-up/email", { jar: new Jar(), body: { name: "Victim", email, password: PASSWORD } });
    if (r.status !== 200) throw new Error(`sign-up at ${base}: ${r.status} ${JSON.stringify(r.json)}`);
    return { email, id: r.json.user.id };
  };
  const [banned, signedOut, changed] = [await fresh(), await fresh(), await fresh()];
  const ban = async () => {
    const stolen = await signIn(checkBase, banned.email);
    return revocationDelay(async () => {
      const r = await call(base, "/api/auth/admin/ban-user", { jar: adminJar, body: { userId: banned.id } });
      if (r.status !== 200) throw new Error(`ban: ${r.status} ${JSON.stringify(r.json)}`);
    }, checkBase, stolen);
  };
  const signOut = async () => {
    const own = await signIn(base, signedOut.email);
    // The same session's cookies as someone else holds them, checked on the other node where there is one.
    const stolen = own.copy();
    return revocationDelay(async () => {
      const r = await call(base, "/api/auth/sign-out", { jar: own, body: {} });
      if (r.status !== 200) throw new Error(`sign-out: ${r.status} ${JSON.stringify(r.json)}`);
    }, checkBase, stolen);
  };
  const passwordChange = async () => {
    const own = await signIn(base, changed.email);
    const stolen = await signIn(checkBase, changed.email);
    return revocationDelay(async () => {
      const body = { currentPassword: PASSWORD, newPassword: PASSWORD + "x", revokeOtherSessions: true };
      const r = await call(base, "/api/auth/change-password", { jar: own, body });
      if (r.status !== 200) throw new Error(`change-password: ${r.status} ${JSON.stringify(r.json)}`);
    }, checkBase, stolen);
  };
  const [b, s, p] = await Promise.all([ban(), signOut(), passwordChange()]);
  return { ban: b, "sign-out": s, "password change": p };
}

// Asynchronous: better-auth answers from this very process, whose event loop must keep running meanwhile.
async function wrk(url, jar) {
  const args = ["-t2", "-c16", `-d${DURATION}s`, "-H", `Cookie: ${jar.header()}`, url];
  const { stdout: out } = await promisify(execFile)("wrk", args, { encoding: "utf8" });
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1];
  if (non2xx) throw new Error(`get-session under load at ${url}: ${non2xx} non-2xx answers`);
  return rps;
}

const children = [];
const work = mkdtempSync(join(tmpdir(), "revocation-"));
function startNode(name, port, backend) {
  const env = {
    ...process.env,
    SERVICE_AUTH_LOG: "warn",
    SERVICE_AUTH_LISTEN: `127.0.0.1:${port}`,
    SERVICE_AUTH_DATA_DIR: join(work, name),
    SERVICE_AUTH_STORE_BACKEND: backend,
    SERVICE_AUTH_BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
    SERVICE_AUTH_BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
  };
  if (backend === "postgres") env.SERVICE_AUTH_STORE_URL = PG_URL;
  // Every request comes from 127.0.0.1: the per-address limits would measure themselves.
  const config = join(work, `${name}.toml`);
  writeFileSync(config, "[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\n");
  const child = spawn(BIN, ["--config", config, "serve"], { env, stdio: ["ignore", "ignore", "inherit"] });
  children.push(child);
  return `http://127.0.0.1:${port}`;
}
async function ready(base) {
  for (;;) {
    try { if ((await fetch(base + "/readyz")).ok) return; } catch {}
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
async function adminJar(base, signUpFirst) {
  if (signUpFirst) await call(base, "/api/auth/sign-up/email", { jar: new Jar(), body: { name: "Admin", ...ADMIN } });
  const jar = new Jar();
  const r = await call(base, "/api/auth/sign-in/email", { jar, body: ADMIN });
  if (r.status !== 200) throw new Error(`admin sign-in at ${base}: ${r.status}`);
  return jar;
}

async function setups() {
  const one = startNode("one", 3941, "embedded");
  const a = startNode("a", 3942, "postgres");
  await ready(a);
  const b = startNode("b", 3943, "postgres");
  await Promise.all([ready(one), ready(b)]);
  const list = [
    { name: "service-auth, one node", base: one, checkBase: one, adminJar: await adminJar(one) },
    { name: "service-auth, two nodes (change on A, checks on B)", base: a, checkBase: b, adminJar: await adminJar(a) },
  ];
  for (const [name, cookieCache] of [["better-auth 1.7.25, cookie cache off", false], ["better-auth 1.7.25, cookie cache on (5 min)", true]]) {
    const file = join(work, `${cookieCache ? "cache" : "nocache"}.sqlite`);
    // The administrator's id is only known once it exists: sign up on a first server, then serve with it listed.
    const first = await startBetterAuth(new Database(file));
    const r = await call(first.baseURL, "/api/auth/sign-up/email", { jar: new Jar(), body: { name: "Admin", ...ADMIN } });
    await first.close();
    const session = cookieCache ? { cookieCache: { enabled: true, maxAge: 5 * 60 } } : undefined;
    const server = await startBetterAuth(new Database(file), { adminUserIds: [r.json.user.id], session });
    children.push({ kill: () => server.close() });
    list.push({ name, base: server.baseURL, checkBase: server.baseURL, adminJar: await adminJar(server.baseURL) });
  }
  return list;
}

const median = (xs) => { const s = [...xs].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const show = (ms) => (ms === null ? `> ${CAP_MS / 1000} s` : ms < 1000 ? `${ms.toFixed(1)} ms` : `${(ms / 1000).toFixed(1)} s`);

try {
  const rows = [];
  for (const setup of await setups()) {
    const delays = { ban: [], "sign-out": [], "password change": [] };
    // With the cookie cache every measurement waits out the cache: one round says it.
    const rounds = setup.name.includes("cache on") ? 1 : ROUNDS;
    for (let i = 0; i < rounds; i++) {
      const round = await measureRound(setup);
      for (const [k, v] of Object.entries(round)) delays[k].push(v === null ? Infinity : v);
    }
    const reader = `reader-${process.pid}-${++users}@bench.example`;
    await call(setup.base, "/api/auth/sign-up/email", { jar: new Jar(), body: { name: "Reader", email: reader, password: PASSWORD } });
    const rps = await wrk(setup.checkBase + "/api/auth/get-session", await signIn(setup.checkBase, reader));
    const m = (k) => { const v = median(delays[k]); return show(Number.isFinite(v) ? v : null); };
    rows.push(`| ${setup.name} | ${m("ban")} | ${m("sign-out")} | ${m("password change")} | ${rounds} | ${Math.round(rps)} |`);
    console.error(rows.at(-1));
  }
  console.log(`\nRevocation (median of the rounds; cap ${CAP_MS / 1000} s) and get-session throughput (wrk, 16 connections, ${DURATION} s):\n`);
  console.log("| setup | ban → refused | sign-out → refused | password change → refused | rounds | get-session req/s |");
  console.log("|---|---|---|---|---|---|");
  for (const row of rows) console.log(row);
} finally {
  for (const child of children) child.kill();
  rmSync(work, { recursive: true, force: true });
}
