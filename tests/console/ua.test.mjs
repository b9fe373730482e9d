// console/ua.js, the session's device in words, on the user agents of common browsers and tools (no browser or
// server needed: node:test runs it beside console.test.mjs).
import { test } from "node:test";
import assert from "node:assert/strict";

import { describeDevice, parseUserAgent } from "../../console/ua.js";

test("common browsers and systems are named", () => {
  const cases = [
    ["Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0", "Firefox 128 on Windows"],
    ["Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", "Safari 17 on iOS"],
    ["Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36", "Chrome 126 on Android 14"],
    ["Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0", "Edge 126 on macOS"],
    ["Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15", "Safari 17 on macOS"],
    ["Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 OPR/116.0.0.0", "Opera 116 on Linux"],
    ["Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36", "Chrome 126 on ChromeOS"],
    ["curl/7.88.1", "curl 7"],
    ["node", "Node.js"],
    ["", "an unknown device"],
    ["some-agent/1.0", "some-agent"],
  ];
  for (const [agent, words] of cases) assert.equal(describeDevice(agent), words, agent);
  assert.deepEqual(parseUserAgent(null), { browser: null, system: null });
});
