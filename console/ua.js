// A session's device in words: the browser and the system named by its User-Agent header, parsed here in the page
// (the server stores the header as it came). Only the common families are named; anything else is shown as the
// first word of the header, so an unusual client still says what it is.

/// Browsers, most specific first: Edge and Opera say "Chrome" too, and every browser on iOS says "Safari".
const BROWSERS = [
  [/\bEdg(?:e|A|iOS)?\/(\d+)/, "Edge"],
  [/\bOPR\/(\d+)/, "Opera"],
  [/\bSamsungBrowser\/(\d+)/, "Samsung Internet"],
  [/\bFirefox\/(\d+)/, "Firefox"],
  [/\bFxiOS\/(\d+)/, "Firefox"],
  [/\bCriOS\/(\d+)/, "Chrome"],
  [/\bHeadlessChrome\/(\d+)/, "Headless Chrome"],
  [/\bChrom(?:e|ium)\/(\d+)/, "Chrome"],
  [/\bVersion\/(\d+)[.\d]* (?:Mobile\/\S+ )?Safari\//, "Safari"],
  [/^curl\/(\d+)/, "curl"],
  [/^node(?:-fetch)?\b/, "Node.js"],
  [/^undici\b/, "Node.js"],
  [/^python-requests\/(\d+)/, "Python requests"],
  [/^Go-http-client\/(\d+)/, "Go"],
];

/// Systems, most specific first: Android says "Linux", iOS says "like Mac OS X".
const SYSTEMS = [
  [/\b(?:iPhone|iPod)\b/, "iOS"],
  [/\biPad\b/, "iPadOS"],
  [/\bAndroid(?: (\d+))?/, "Android"],
  [/\bCrOS\b/, "ChromeOS"],
  [/\bWindows NT 10\.0\b/, "Windows"],
  [/\bWindows NT (\d+\.\d+)/, "Windows"],
  [/\bMac OS X\b/, "macOS"],
  [/\bLinux\b/, "Linux"],
];

/// `{browser, system}` for a User-Agent header: for example `{browser: "Firefox 128", system: "Windows"}`; either
/// may be null when nothing is recognised.
export function parseUserAgent(agent) {
  const ua = (agent ?? "").trim();
  if (!ua) return { browser: null, system: null };
  let browser = null;
  for (const [pattern, name] of BROWSERS) {
    const m = ua.match(pattern);
    if (m) {
      browser = m[1] ? `${name} ${m[1]}` : name;
      break;
    }
  }
  let system = null;
  for (const [pattern, name] of SYSTEMS) {
    const m = ua.match(pattern);
    if (m) {
      system = name === "Android" && m[1] ? `Android ${m[1]}` : name;
      break;
    }
  }
  if (!browser && !system) browser = ua.split(/[\s/;(]/)[0] || null;
  return { browser, system };
}

/// The device in words: "Firefox 128 on Windows", "curl 8", "an unknown device".
export function describeDevice(agent) {
  const { browser, system } = parseUserAgent(agent);
  if (browser && system) return `${browser} on ${system}`;
  return browser ?? system ?? "an unknown device";
}
