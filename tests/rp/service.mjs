// What the relying-party suites share: a service-auth server on a fresh data directory with a bootstrap
// administrator, a browser played by a cookie jar (redirects followed by hand, signing in through the sign-in
// page's API and answering the consent page as its script does), and the administrator's calls.
import { spawn } from "node:child_process";
import http from "node:http";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";

export const ADMIN = { email: "admin@rp.example", password: "relying party suite admin password" };
export const PASSWORD = "a relying party passphrase";
/// A confidential web client's redirect URI: never fetched, the jar stops when a redirect points there.
export const RP = "https://rp.example/cb";
export const BYE = "https://rp.example/signed-out";

/// Starts the server (`SERVICE_AUTH_BIN`) with `extra` TOML; answers `{base, issuer, stop()}` once it listens.
/// `top`: top-level TOML keys (before the first table); `listen`: the address (any free port by default); `env`: more
/// variables; `bootstrap`: whether this server makes the administrator (one node of two does).
export async function startService(extra = "", { top = "", listen = "127.0.0.1:0", env = {}, bootstrap = true } = {}) {
  const work = mkdtempSync(join(tmpdir(), "rp-suite-"));
  writeFileSync(join(work, "config.toml"), `${top}[rate_limit]\nsign_in_per_address = 0\nsign_up_per_address = 0\n${extra}`);
  const child = spawn(process.env.SERVICE_AUTH_BIN, ["serve"], {
    cwd: work,
    env: {
      ...process.env,
      SERVICE_AUTH_CONFIG: join(work, "config.toml"),
      SERVICE_AUTH_LISTEN: listen,
      SERVICE_AUTH_DATA_DIR: join(work, "data"),
      SERVICE_AUTH_LOG: "warn",
      ...(bootstrap
        ? { SERVICE_AUTH_BOOTSTRAP_ADMIN_EMAIL: ADMIN.email, SERVICE_AUTH_BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password }
        : {}),
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk) => (stderr += chunk));
  const base = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
      const m = out.match(/listening on (\S+)/);
      if (m) resolve(`http://${m[1]}`);
    });
    child.on("error", reject);
    child.on("exit", (code) => reject(new Error(`service-auth exited (${code}) before listening:\n${stderr}`)));
    setTimeout(() => reject(new Error(`service-auth did not listen within 30 s:\n${stderr}`)), 30_000).unref();
  });
  const stop = async () => {
    if (child.exitCode === null) {
      child.kill("SIGTERM");
      await once(child, "exit");
    }
    rmSync(work, { recursive: true, force: true });
  };
  return { base, issuer: `${base}/api/auth`, stop, stderr: () => stderr };
}

/// An HTTP exchange as a `Response`, through node:http: Node's `fetch` always sends `Sec-Fetch-Mode: cors`, which
/// makes the provider answer a redirect as JSON (the plugin's rule for scripts), where a browser's navigation
/// sends `navigate` and gets the 302.
function send(url, { method = "GET", headers = new Headers(), body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers: Object.fromEntries(headers) }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => {
        const out = new Headers();
        for (let i = 0; i < res.rawHeaders.length; i += 2) out.append(res.rawHeaders[i], res.rawHeaders[i + 1]);
        const empty = [204, 304].includes(res.statusCode) || method === "HEAD";
        resolve(new Response(empty ? null : Buffer.concat(chunks), { status: res.statusCode, headers: out }));
      });
    });
    req.on("error", reject);
    req.end(body);
  });
}

/// One browser profile: a cookie jar per host. `request` is a navigation unless told otherwise (`api` is the
/// pages' `fetch`, which sends their origin).
export function browser(base) {
  const jars = new Map();
  const jarOf = (url) => {
    const host = new URL(url).host;
    if (!jars.has(host)) jars.set(host, new Map());
    return jars.get(host);
  };
  const request = async (url, init = {}) => {
    const jar = jarOf(url);
    const headers = new Headers(init.headers);
    if (!headers.has("sec-fetch-mode")) {
      headers.set("sec-fetch-mode", "navigate");
      headers.set("accept", "text/html,application/xhtml+xml");
    }
    if (jar.size) headers.set("cookie", [...jar].map(([k, v]) => `${k}=${v}`).join("; "));
    const response = await send(url, { ...init, headers });
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(";").map((s) => s.trim());
      const [name, value] = [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)];
      if (attrs.some((a) => a.toLowerCase() === "max-age=0")) jar.delete(name);
      else jar.set(name, value);
    }
    return response;
  };
  /** A call a page of the service makes with `fetch` (JSON, same origin). */
  const api = (path, body) =>
    request(new URL(path, base), {
      method: body === undefined ? "GET" : "POST",
      headers: { origin: base, accept: "application/json", "sec-fetch-mode": "cors", ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  /** A `customFetchImpl` for better-auth's `createAuthClient`: the pages' `fetch`, through this jar. */
  const customFetchImpl = (input, init = {}) => {
    const headers = new Headers(init.headers);
    headers.set("origin", base);
    headers.set("sec-fetch-mode", "cors");
    return request(input.toString(), { ...init, headers });
  };
  return { request, api, customFetchImpl, cookies: () => jarOf(base) };
}

/// Signs up a user in its own browser; answers `{id, email, name, browser}` (signed in).
export async function newUser(base, name) {
  const b = browser(base);
  const email = `${name.toLowerCase()}-${Math.random().toString(36).slice(2, 8)}@rp.example`;
  const r = await b.api("/api/auth/sign-up/email", { email, password: PASSWORD, name: `${name} Tester` });
  assert.equal(r.status, 200, await r.clone().text());
  const body = await r.json();
  return { id: body.user.id, email, name: `${name} Tester`, browser: b };
}

/// The administrator's signed-in browser.
export async function admin(base) {
  const b = browser(base);
  const r = await b.api("/api/auth/sign-in/email", ADMIN);
  assert.equal(r.status, 200, await r.clone().text());
  return b;
}

/// Registers a client as the administrator (`POST /api/admin/oidc/clients`); answers `{client_id, client_secret}`.
export async function register(adminBrowser, body) {
  const r = await adminBrowser.api("/api/admin/oidc/clients", body);
  assert.equal(r.status, 201, await r.clone().text());
  const answer = await r.json();
  return { client_id: answer.client.client_id, client_secret: answer.client_secret };
}

/**
 * The browser's way through an authorization request: follows redirects by hand; on the sign-in page signs in
 * through its API as `user` (when given) and goes on to its `returnTo`; on the consent page answers as its script
 * does (`consent`: `true`, `false`, or a narrower `scope` string). Answers the URL the provider sent the browser to
 * at `redirectUri`, or the refusal (`{status, body}`) it showed instead.
 */
export async function through(b, base, url, redirectUri, { user, consent = true } = {}) {
  let at = new URL(url);
  const seen = [];
  for (let i = 0; i < 12; i++) {
    if (at.href.startsWith(redirectUri)) return { callback: at, seen };
    const r = await b.request(at);
    if (r.status !== 302) {
      return { status: r.status, body: await r.text(), seen };
    }
    const next = new URL(r.headers.get("location"), at);
    if (next.origin === base && next.pathname === "/sign-in") {
      seen.push("sign-in");
      assert.ok(user, `asked to sign in (${next})`);
      const page = await b.request(next);
      assert.equal(page.status, 200);
      const signIn = await b.api("/api/auth/sign-in/email", { email: user.email, password: PASSWORD });
      if (signIn.status !== 200) return { status: signIn.status, body: await signIn.text(), seen };
      at = new URL(next.searchParams.get("returnTo"), base);
    } else if (next.origin === base && next.pathname === "/consent") {
      seen.push("consent");
      const page = await b.request(next);
      assert.equal(page.status, 200);
      const answer = { accept: consent !== false, oauth_query: next.search.slice(1) };
      if (typeof consent === "string") answer.scope = consent;
      const r = await b.api("/api/auth/oauth2/consent", answer);
      assert.equal(r.status, 200, await r.clone().text());
      at = new URL((await r.json()).url);
    } else {
      at = next;
    }
  }
  assert.fail("too many redirects");
}
