// What the sign-in, account and invitation pages share: the API call, building markup from data (text only, never
// parsed as HTML), the return path after sign-in (the open-redirect rule), and WebAuthn's JSON encoding (the server
// speaks @simplewebauthn's: binary fields as base64url).

/// An answer the server refused: its status, better-auth's code and the server's own words.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/// Calls the API with the session cookie (same origin). Answers JSON, or `null` for an empty body.
export async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError(0, "NETWORK", "The server cannot be reached. Check the connection and try again.");
  }
  const data = await response.json().catch(() => null);
  if (response.ok) return data;
  let message = data?.message ?? data?.error_description ?? data?.error ?? `The server answered ${response.status}.`;
  if (response.status === 429) message = `Too many attempts. Try again in ${response.headers.get("Retry-After") ?? "a few"} seconds.`;
  throw new ApiError(response.status, data?.code ?? "", message);
}

/// The signed-in user and session, or null.
export async function currentSession() {
  const answer = await api("GET", "/api/auth/get-session");
  return answer?.user ? answer : null;
}

/// An element with attributes (`on*` keys are listeners) and children (strings become text nodes).
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "text") el.textContent = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

let uid = 0;
/// A label and its control, tied by id.
export function field(labelText, control, hint) {
  control.id ||= `f${++uid}`;
  const parts = [h("label", { for: control.id, text: labelText }), control];
  if (hint) {
    const hintEl = h("small", { id: `${control.id}-hint`, text: hint });
    control.setAttribute("aria-describedby", hintEl.id);
    parts.push(hintEl);
  }
  return h("div", { class: "field" }, parts);
}

/// A message line that screen readers announce (`role="status"`, or `alert` for errors).
export function say(line, text, error = false) {
  line.textContent = text;
  line.className = error ? "error" : "done";
  line.setAttribute("role", error ? "alert" : "status");
  line.hidden = text === "";
}

/// Runs `work` for a control: disables it meanwhile and shows the outcome (or the server's refusal) on `line`.
export async function act(line, control, work) {
  control.disabled = true;
  say(line, "");
  try {
    const done = await work();
    if (typeof done === "string") say(line, done);
    return true;
  } catch (e) {
    say(line, e.message || "Something went wrong.", true);
    return false;
  } finally {
    control.disabled = false;
  }
}

/// Where to go once signed in: `raw` when it is a path on this site, else `fallback`. Its path part keeps the same
/// rules as the server's redirect targets: one leading `/`, no `//` (another host), no backslash (which browsers
/// read as `/`), no encoded slash or backslash; nowhere a control character; and resolved here it must stay on this
/// origin. The query may hold anything (an authorization request's own `redirect_uri`, encoded): it cannot change
/// where the browser goes. A refused value is dropped, never followed: a link must not send a signed-in user away.
export function returnPath(raw, fallback = "/account/") {
  if (typeof raw !== "string" || raw === "" || /[\u0000-\u001f\u007f]/.test(raw)) return fallback;
  const path = raw.split(/[?#]/, 1)[0];
  const lower = path.toLowerCase();
  if (!path.startsWith("/") || path.includes("//") || path.includes("\\") || lower.includes("%2f") || lower.includes("%5c")) {
    return fallback;
  }
  try {
    const url = new URL(raw, location.origin);
    if (url.origin !== location.origin) return fallback;
    return url.pathname + url.search + url.hash;
  } catch {
    return fallback;
  }
}

// --- WebAuthn: the server's JSON options to the browser's objects and the credential back to JSON ---------------

function fromB64url(text) {
  const b64 = text.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(text.length / 4) * 4, "=");
  return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)).buffer;
}

function toB64url(buffer) {
  let text = "";
  for (const byte of new Uint8Array(buffer)) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/// Whether this browser can use passkeys at all (a secure context with WebAuthn).
export const passkeysAvailable = typeof window.PublicKeyCredential === "function" && window.isSecureContext;

/// `navigator.credentials.create` with the options of `passkey/generate-register-options`; the credential as JSON.
export async function createPasskey(options) {
  const publicKey = {
    ...options,
    challenge: fromB64url(options.challenge),
    user: { ...options.user, id: fromB64url(options.user.id) },
    excludeCredentials: (options.excludeCredentials ?? []).map((c) => ({ ...c, id: fromB64url(c.id) })),
  };
  const credential = await navigator.credentials.create({ publicKey });
  const r = credential.response;
  return asJson(credential, {
    attestationObject: toB64url(r.attestationObject),
    transports: r.getTransports?.() ?? [],
  });
}

/// `navigator.credentials.get` with the options of `passkey/generate-authenticate-options`; the assertion as JSON.
export async function usePasskey(options) {
  const publicKey = {
    ...options,
    challenge: fromB64url(options.challenge),
    allowCredentials: (options.allowCredentials ?? []).map((c) => ({ ...c, id: fromB64url(c.id) })),
  };
  const credential = await navigator.credentials.get({ publicKey });
  const r = credential.response;
  return asJson(credential, {
    authenticatorData: toB64url(r.authenticatorData),
    signature: toB64url(r.signature),
    userHandle: r.userHandle ? toB64url(r.userHandle) : undefined,
  });
}

/// A WebAuthn credential as the passkey routes take it: the binary fields base64url, `response` its own fields.
function asJson(credential, response) {
  return {
    id: credential.id,
    rawId: toB64url(credential.rawId),
    type: credential.type,
    authenticatorAttachment: credential.authenticatorAttachment ?? undefined,
    clientExtensionResults: credential.getClientExtensionResults(),
    response: { clientDataJSON: toB64url(credential.response.clientDataJSON), ...response },
  };
}

/// A browser's refusal of a WebAuthn ceremony in words (the person cancelled, or no authenticator answered).
export function passkeyRefusal(e) {
  if (e?.name === "NotAllowedError") return "The passkey request was cancelled or timed out.";
  if (e?.name === "InvalidStateError") return "This authenticator already holds a passkey for this account.";
  return e?.message || "The passkey could not be used.";
}
