// A real browser on another origin. Starts a static page server and a release service-auth trusting that page's
// origin, bundles the better-auth client for the browser (esbuild), and drives headless Chromium (Debian's
// `chromium`, through puppeteer-core) through a page that signs up, reads the session, signs out and in.
// The same page loaded from an untrusted origin (`localhost` instead of `127.0.0.1`: another origin and another
// site) must not get through. A third test drives @better-auth/passkey's passkeyClient() against a CDP virtual
// authenticator on a page at http://localhost (a secure context). Run by ./run.sh, which builds the server first.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

import { build } from "esbuild";
import puppeteer from "puppeteer-core";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");
const binary = process.env.SERVICE_AUTH_BIN ?? join(root, "target", "release", "service-auth");
const chromiumPath = process.env.CHROMIUM ?? "/usr/bin/chromium";
const password = "a web page passphrase"; // the page's own, see page/app.js

let pages; // the static page server
let server; // the service-auth child process
let serviceURL;
let browser;
let work;

/// The page's script with the better-auth client bundled in: one ES module, no CDN, nothing fetched at run time.
async function bundle() {
  const out = await build({
    entryPoints: [join(here, "page", "app.js")],
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    write: false,
    logLevel: "silent",
  });
  return out.outputFiles[0].contents;
}

async function startPages() {
  const files = {
    "/": { type: "text/html; charset=utf-8", body: await readFile(join(here, "page", "index.html")) },
    "/app.js": { type: "text/javascript; charset=utf-8", body: await bundle() },
  };
  const pageServer = createServer((req, res) => {
    const file = files[new URL(req.url, "http://x").pathname];
    if (!file) return res.writeHead(404).end();
    res.writeHead(200, { "content-type": file.type }).end(file.body);
  });
  pageServer.listen(0, "127.0.0.1");
  await once(pageServer, "listening");
  return pageServer;
}

/// A release server on a fresh data directory, trusting exactly `origin`; resolves to its base URL once it says
/// `listening on`.
async function startService(origin, name = "data") {
  const config = join(work, `${name}.toml`);
  await writeFile(config, `trusted_origins = ["${origin}"]\n`);
  const child = spawn(binary, [], {
    cwd: work,
    env: {
      ...process.env,
      SERVICE_AUTH_CONFIG: config,
      SERVICE_AUTH_LISTEN: "127.0.0.1:0",
      SERVICE_AUTH_DATA_DIR: join(work, name),
      SERVICE_AUTH_LOG: "warn",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk) => (stderr += chunk));
  const url = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
      const m = out.match(/listening on (\S+)/);
      if (m) resolve(`http://${m[1]}`);
    });
    child.on("exit", (code) => reject(new Error(`service-auth exited (${code}) before listening:\n${stderr}`)));
    // unref: a pending timer must not keep the test process alive once the server is up.
    setTimeout(() => reject(new Error(`service-auth did not listen within 20 s:\n${stderr}`)), 20_000).unref();
  });
  return { child, url };
}

/// Opens the page at `origin` for `scenario` and returns the steps it recorded. `prepare` runs on the page before
/// it loads (a virtual authenticator); `api` is the service the page talks to.
async function runPage(origin, scenario, params, { prepare, api = serviceURL } = {}) {
  const page = await browser.newPage();
  try {
    if (prepare) await prepare(page);
    const query = new URLSearchParams({ api, scenario, ...params });
    await page.goto(`${origin}/?${query}`);
    await page.waitForFunction(() => window.__done === true, { timeout: 20_000 });
    return await page.evaluate(() => window.__steps);
  } finally {
    await page.close();
  }
}

/// Signs in directly (no browser, no Origin): the server's own view of whether an account exists.
async function signInStatus(email) {
  const r = await fetch(`${serviceURL}/api/auth/sign-in/email`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email, password }),
  });
  return r.status;
}

before(async () => {
  work = await mkdtemp(join(tmpdir(), "service-auth-browser-"));
  pages = await startPages();
  const pagePort = pages.address().port;
  ({ child: server, url: serviceURL } = await startService(`http://127.0.0.1:${pagePort}`));
  browser = await puppeteer.launch({
    executablePath: chromiumPath,
    // CI runs as root, where Chromium's sandbox cannot start; the page is our own.
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
    headless: true,
  });
});

let passkeyServer; // the service the passkey page uses, started by its test

after(async () => {
  await browser?.close();
  pages?.close();
  for (const child of [server, passkeyServer]) {
    if (child && child.exitCode === null) {
      child.kill("SIGTERM");
      await once(child, "exit");
    }
  }
  if (work) await rm(work, { recursive: true, force: true });
});

test("a page on a trusted origin signs up, reads the session, signs out and in with the better-auth client", async () => {
  const origin = `http://127.0.0.1:${pages.address().port}`;
  const steps = await runPage(origin, "trusted", { email: "trusted@example.com" });
  assert.deepEqual(
    steps.map((s) => s.name),
    [
      "sign up",
      "session after sign-up",
      "sign out",
      "no session after sign-out",
      "sign in",
      "session after sign-in",
      "sign out again",
      "no session at the end",
    ],
  );
  for (const s of steps) assert.ok(s.ok, `${s.name}: ${s.detail}`);
  // The account is real: the server itself knows it.
  assert.equal(await signInStatus("trusted@example.com"), 200);
});

test("the same page on an untrusted origin gets nothing through", async () => {
  // localhost is not 127.0.0.1 for the browser: another origin, not in trusted_origins.
  const origin = `http://localhost:${pages.address().port}`;
  const steps = await runPage(origin, "untrusted", { email: "untrusted@example.com", known: "trusted@example.com" });
  assert.deepEqual(
    steps.map((s) => s.name),
    ["sign up is refused", "sign in is refused", "session is unreadable"],
  );
  for (const s of steps) assert.ok(s.ok, `${s.name}: ${s.detail}`);
  // The refused preflight kept the sign-up from ever reaching the server.
  assert.equal(await signInStatus("untrusted@example.com"), 401);
});

test("passkeys through @better-auth/passkey's passkeyClient(): register, sign out, sign in with the passkey alone, delete", async () => {
  // WebAuthn needs a secure context: http://localhost is one, so page and service are both on localhost (one
  // site, so the session cookie goes with the page's requests). The service's [passkeys] keeps its defaults:
  // relying party `localhost`, and the trusted origin on it as the one origin passkeys may be used from.
  const pagePort = pages.address().port;
  const origin = `http://localhost:${pagePort}`;
  let url;
  ({ child: passkeyServer, url } = await startService(origin, "passkeys"));
  const api = url.replace("127.0.0.1", "localhost");
  // The browser's own WebAuthn against a virtual authenticator, as a platform authenticator with a fingerprint
  // would answer: discoverable credentials, user verification that succeeds.
  const prepare = async (page) => {
    const cdp = await page.createCDPSession();
    await cdp.send("WebAuthn.enable");
    await cdp.send("WebAuthn.addVirtualAuthenticator", {
      options: {
        protocol: "ctap2",
        transport: "internal",
        hasResidentKey: true,
        hasUserVerification: true,
        isUserVerified: true,
        automaticPresenceSimulation: true,
      },
    });
  };
  const steps = await runPage(origin, "passkey", { email: "passkey@example.com" }, { prepare, api });
  assert.deepEqual(
    steps.map((s) => s.name),
    [
      "sign up",
      "add a passkey",
      "the passkey is listed",
      "rename it",
      "sign out",
      "no session after sign-out",
      "sign in with the passkey alone",
      "session after the passkey",
      "delete the passkey",
      "no passkey left",
      "sign out at the end",
      "the deleted passkey signs nobody in",
    ],
  );
  for (const s of steps) assert.ok(s.ok, `${s.name}: ${s.detail}`);
});
