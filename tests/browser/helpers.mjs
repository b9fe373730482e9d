// What the Chromium suites of the service's own pages share: a release server on a fresh data directory, the
// browser, and axe-core's check in light and dark.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFile, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

import puppeteer from "puppeteer-core";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");
const binary = process.env.SERVICE_AUTH_BIN ?? join(root, "target", "release", "service-auth");
const chromiumPath = process.env.CHROMIUM ?? "/usr/bin/chromium";
const axeSource = await readFile(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/// A release server on a fresh data directory with `config` (TOML); resolves once it says `listening on`.
export async function startService(dir, config, env = {}) {
  await writeFile(join(dir, "config.toml"), config);
  const child = spawn(binary, [], {
    cwd: dir,
    env: {
      ...process.env,
      SERVICE_AUTH_CONFIG: join(dir, "config.toml"),
      SERVICE_AUTH_LISTEN: "127.0.0.1:0",
      SERVICE_AUTH_DATA_DIR: join(dir, "data"),
      SERVICE_AUTH_LOG: "info",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const state = { child, stderr: "" };
  child.stderr.on("data", (chunk) => (state.stderr += chunk));
  state.url = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
      const m = out.match(/listening on (\S+)/);
      if (m) resolve(`http://${m[1]}`);
    });
    child.on("exit", (code) => reject(new Error(`service-auth exited (${code}) before listening:\n${state.stderr}`)));
    setTimeout(() => reject(new Error(`service-auth did not listen within 20 s:\n${state.stderr}`)), 20_000).unref();
  });
  return state;
}

export async function stopService(state) {
  if (state && state.child.exitCode === null) {
    state.child.kill("SIGTERM");
    await once(state.child, "exit");
  }
}

/// axe-core on `page` as it is now, in light and in dark; fails on any serious or critical violation, naming it.
export async function checkAccessibility(page, name) {
  for (const scheme of ["light", "dark"]) {
    await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: scheme }]);
    await page.evaluate(axeSource);
    const results = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
    const bad = results.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
    assert.deepEqual(bad.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(" ")).join("; ")}`), [],
      `accessibility violations on ${name} (${scheme})`);
  }
  await page.emulateMediaFeatures([]);
}

export async function launchBrowser() {
  // CI runs as root, where Chromium's sandbox cannot start; the pages are our own.
  return puppeteer.launch({
    executablePath: chromiumPath,
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
    headless: true,
  });
}

