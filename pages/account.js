// A signed-in user's own account, a client of better-auth's /api/auth/* wire with the session cookie: name and
// e-mail, password, the second factor (the QR code is drawn by POST /api/account/totp-qr, the URI shown as text
// too) and backup codes, passkeys, sessions, linked identity providers, the applications allowed to sign the user
// in (the identity provider's consents, withdrawn here), organizations and invitations. Signed out:
// to /sign-in, which comes back here. Every section loads and fails on its own; text from the server is set as
// text only.
import { act, api, createPasskey, currentSession, h, passkeyRefusal, passkeysAvailable, say } from "./common.js";

const $ = (id) => document.getElementById(id);
let session = null;

/// A moment as the browser's local date and time, the exact UTC instant on hover.
function when(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return h("span", { text: "—" });
  return h("time", { datetime: date.toISOString(), title: `${date.toISOString().replace(".000", "")} UTC`,
    text: date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" }) });
}

/// A device in a few words from its user agent: browser and system, or the agent itself when unknown.
function device(agent) {
  if (!agent) return "Unknown device";
  const browser = /Edg\//.test(agent) ? "Edge" : /Firefox\//.test(agent) ? "Firefox" : /Chrom(e|ium)\//.test(agent)
    ? "Chrome" : /Safari\//.test(agent) ? "Safari" : null;
  const system = /Android/.test(agent) ? "Android" : /iPhone|iPad/.test(agent) ? "iOS" : /Mac OS X/.test(agent)
    ? "macOS" : /Windows/.test(agent) ? "Windows" : /Linux/.test(agent) ? "Linux" : null;
  return browser && system ? `${browser} on ${system}` : agent.slice(0, 80);
}

function toSignIn() {
  location.replace(`/sign-in?${new URLSearchParams({ returnTo: location.pathname + location.search })}`);
}

/// Runs a section's work; a 401 means the session ended: to sign-in.
async function guarded(line, control, work) {
  const ok = await act(line, control, work);
  if (!ok && (await currentSession().catch(() => undefined)) === null) toSignIn();
  return ok;
}

// --- name and e-mail ---------------------------------------------------------------------------------------------

function profile() {
  const { user } = session;
  $("email").replaceChildren(user.email, user.emailVerified ? " (confirmed)" : " (not confirmed yet)");
  $("name").value = user.name ?? "";
  $("password-username").value = user.email;
}

$("name-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const name = $("name").value.trim();
  if (name === "") return say($("name-msg"), "Enter a name.", true);
  guarded($("name-msg"), $("name-submit"), async () => {
    await api("POST", "/api/auth/update-user", { name });
    session.user.name = name;
    $("who").textContent = `${name} (${session.user.email})`;
    return "Name saved.";
  });
});

// --- password ----------------------------------------------------------------------------------------------------

$("password-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const [current, fresh, again] = ["current-password", "new-password", "confirm-password"].map($);
  const line = $("password-msg");
  if (current.value === "") return say(line, "Enter your current password.", true);
  if (fresh.value.length < 8) return say(line, "The new password needs at least 8 characters.", true);
  if (fresh.value !== again.value) return say(line, "The two new passwords are not the same.", true);
  guarded(line, $("password-submit"), async () => {
    await api("POST", "/api/auth/change-password",
      { currentPassword: current.value, newPassword: fresh.value, revokeOtherSessions: $("revoke-others").checked });
    for (const input of [current, fresh, again]) input.value = "";
    loadSessions();
    return "Password changed.";
  });
});

// --- the second factor -------------------------------------------------------------------------------------------

function twoFactorState() {
  const on = session.user.twoFactorEnabled;
  $("two-factor-state").textContent = on
    ? "On: signing in asks for a code from your authenticator app (or a backup code) after the password."
    : "Off: your password alone signs you in.";
  $("enable").hidden = on;
  $("new-codes").hidden = !on;
  $("disable").hidden = !on;
}

function confirmingPassword(line) {
  const input = $("two-factor-current");
  if (input.value === "") {
    say(line, "Enter your password to confirm.", true);
    input.focus();
    return null;
  }
  return input.value;
}

function showBackupCodes(codes) {
  $("backup-codes").replaceChildren(...codes.map((c) => h("li", {}, h("code", { text: c }))));
  $("backup").hidden = false;
}

$("enable").addEventListener("click", () => {
  const line = $("two-factor-msg");
  const password = confirmingPassword(line);
  if (password === null) return;
  guarded(line, $("enable"), async () => {
    const { totpURI, backupCodes } = await api("POST", "/api/auth/two-factor/enable", { password });
    $("two-factor-current").value = "";
    // The QR code is drawn by the server (no QR library here); the URI in the body, never in an address.
    const svg = await fetch("/api/account/totp-qr", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ uri: totpURI }),
    });
    if (svg.ok) $("qr").src = `data:image/svg+xml;base64,${btoa(await svg.text())}`;
    $("qr").hidden = !svg.ok;
    $("totp-uri").textContent = totpURI;
    $("enrol").hidden = false;
    showBackupCodes(backupCodes);
    $("totp-code").focus();
    return "Almost done: enter a code from the app to turn the second factor on.";
  });
});

$("confirm-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const code = $("totp-code").value.replace(/\s+/g, "");
  const line = $("two-factor-msg");
  if (code === "") return say(line, "Enter the code the app shows.", true);
  guarded(line, $("confirm-submit"), async () => {
    await api("POST", "/api/auth/two-factor/verify-totp", { code });
    $("totp-code").value = "";
    $("enrol").hidden = true;
    $("must-enrol").hidden = true;
    for (const id of ["passkeys", "sessions", "identities", "apps", "organizations"]) $(id).hidden = false;
    session.user.twoFactorEnabled = true;
    twoFactorState();
    loadAll();
    return "The second factor is on.";
  });
});

$("new-codes").addEventListener("click", () => {
  const line = $("two-factor-msg");
  const password = confirmingPassword(line);
  if (password === null) return;
  guarded(line, $("new-codes"), async () => {
    const { backupCodes } = await api("POST", "/api/auth/two-factor/generate-backup-codes", { password });
    $("two-factor-current").value = "";
    showBackupCodes(backupCodes);
    return "New backup codes made; the old ones no longer work.";
  });
});

$("disable").addEventListener("click", () => {
  const line = $("two-factor-msg");
  const password = confirmingPassword(line);
  if (password === null) return;
  guarded(line, $("disable"), async () => {
    await api("POST", "/api/auth/two-factor/disable", { password });
    $("two-factor-current").value = "";
    $("backup").hidden = true;
    session.user.twoFactorEnabled = false;
    twoFactorState();
    return "The second factor is off.";
  });
});

// --- passkeys ----------------------------------------------------------------------------------------------------

async function loadPasskeys() {
  const line = $("passkeys-msg");
  try {
    const passkeys = await api("GET", "/api/auth/passkey/list-user-passkeys");
    $("passkey-list").replaceChildren(...(passkeys.length ? passkeys.map(passkeyRow)
      : [h("li", { class: "empty", text: "No passkey yet." })]));
  } catch (e) {
    say(line, e.message, true);
  }
}

function passkeyRow(p) {
  const label = p.name || "Unnamed passkey";
  const rename = h("button", { type: "button", class: "secondary", text: "Rename", "aria-label": `Rename ${label}` });
  const remove = h("button", { type: "button", class: "danger", text: "Delete", "aria-label": `Delete ${label}` });
  const line = $("passkeys-msg");
  rename.addEventListener("click", () => {
    const name = prompt("New name of the passkey", label);
    if (name === null || name.trim() === "") return;
    guarded(line, rename, async () => {
      await api("POST", "/api/auth/passkey/update-passkey", { id: p.id, name: name.trim() });
      await loadPasskeys();
      return "Passkey renamed.";
    });
  });
  remove.addEventListener("click", () => {
    if (!confirm(`Delete the passkey "${label}"? It will no longer sign you in.`)) return;
    guarded(line, remove, async () => {
      await api("POST", "/api/auth/passkey/delete-passkey", { id: p.id });
      await loadPasskeys();
      return "Passkey deleted.";
    });
  });
  return h("li", { "data-passkey": p.id },
    h("span", { class: "what" }, h("strong", { text: label }), " · added ", when(p.createdAt)),
    h("span", { class: "actions" }, rename, remove));
}

$("passkey-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const name = $("passkey-name").value.trim();
  const line = $("passkeys-msg");
  if (name === "") return say(line, "Name the passkey (where it lives, for instance).", true);
  guarded(line, $("passkey-add"), async () => {
    const options = await api("GET", `/api/auth/passkey/generate-register-options?${new URLSearchParams({ name })}`);
    let response;
    try {
      response = await createPasskey(options);
    } catch (e) {
      throw new Error(passkeyRefusal(e));
    }
    await api("POST", "/api/auth/passkey/verify-registration", { response, name });
    $("passkey-name").value = "";
    await loadPasskeys();
    return "Passkey added.";
  });
});

// --- sessions ----------------------------------------------------------------------------------------------------

async function loadSessions() {
  const line = $("sessions-msg");
  try {
    const sessions = await api("GET", "/api/auth/list-sessions");
    sessions.sort((a, b) => (a.id === session.session.id ? -1 : b.id === session.session.id ? 1
      : b.createdAt.localeCompare(a.createdAt)));
    $("session-list").replaceChildren(...sessions.map(sessionRow));
    $("revoke-others-now").hidden = sessions.length < 2;
  } catch (e) {
    say(line, e.code === "SESSION_NOT_FRESH" ? "Sign in again to see your sessions (this one is over a day old)." : e.message, true);
  }
}

function sessionRow(s) {
  const mine = s.id === session.session.id;
  const what = h("span", { class: "what" }, h("strong", { text: device(s.userAgent) }),
    mine ? h("span", { class: "tag", text: "this browser" }) : null,
    h("br"), s.ipAddress ? `${s.ipAddress} · ` : "", "signed in ", when(s.createdAt));
  if (mine) return h("li", { "data-session": s.id, class: "current" }, what);
  const revoke = h("button", { type: "button", class: "danger", text: "Sign out",
    "aria-label": `Sign out ${device(s.userAgent)}, signed in ${new Date(s.createdAt).toLocaleString()}` });
  revoke.addEventListener("click", () => guarded($("sessions-msg"), revoke, async () => {
    await api("POST", "/api/auth/revoke-session", { token: s.token });
    await loadSessions();
    return "That session has ended.";
  }));
  return h("li", { "data-session": s.id }, what, h("span", { class: "actions" }, revoke));
}

$("revoke-others-now").addEventListener("click", () => guarded($("sessions-msg"), $("revoke-others-now"), async () => {
  await api("POST", "/api/auth/revoke-other-sessions", {});
  await loadSessions();
  return "Every other session has ended.";
}));

// --- linked identity providers -----------------------------------------------------------------------------------

async function loadIdentities() {
  const line = $("identities-msg");
  try {
    const [accounts, { providers }] = await Promise.all([
      api("GET", "/api/auth/list-accounts"),
      api("GET", "/api/account/providers"),
    ]);
    const names = new Map(providers.map((p) => [p.id, p.name]));
    $("identity-list").replaceChildren(...(accounts.length ? accounts.map((a) => identityRow(a, names, accounts.length))
      : [h("li", { class: "empty", text: "None." })]));
    const linked = new Set(accounts.map((a) => a.providerId));
    $("link-buttons").replaceChildren(...providers.filter((p) => !linked.has(p.id)).map((p) => {
      const link = h("button", { type: "button", class: "secondary", "data-provider": p.id, text: `Link ${p.name}` });
      link.addEventListener("click", () => guarded(line, link, async () => {
        const { url } = await api("POST", "/api/auth/link-social",
          { provider: p.id, callbackURL: new URL("/account/", location.origin).href, disableRedirect: true });
        location.assign(url);
      }));
      return link;
    }));
  } catch (e) {
    say(line, e.message, true);
  }
}

function identityRow(a, names, count) {
  const password = a.providerId === "credential";
  const label = password ? "Password" : names.get(a.providerId) ?? a.providerId;
  const what = h("span", { class: "what" }, h("strong", { text: label }), " · since ", when(a.createdAt));
  // The last way in is never removed (the server refuses it too): no button for it.
  if (password || count < 2) return h("li", {}, what);
  const unlink = h("button", { type: "button", class: "danger", text: "Unlink", "aria-label": `Unlink ${label}` });
  unlink.addEventListener("click", () => guarded($("identities-msg"), unlink, async () => {
    await api("POST", "/api/auth/unlink-account", { providerId: a.providerId, accountId: a.accountId });
    await loadIdentities();
    return `${label} no longer signs you in.`;
  }));
  return h("li", {}, what, h("span", { class: "actions" }, unlink));
}

// --- apps you allowed (the identity provider's consents) ---------------------------------------------------------

// What each standard scope lets an application do, as the consent page words it; its own scopes by name.
const SCOPES = {
  openid: "know who you are",
  profile: "see your name and picture",
  email: "see your e-mail address",
  offline_access: "stay signed in while you are away",
};

async function loadApps() {
  const line = $("apps-msg");
  try {
    const consents = await api("GET", "/api/auth/oauth2/get-consents");
    consents.sort((a, b) => (a.clientName ?? a.clientId).localeCompare(b.clientName ?? b.clientId));
    $("app-list").replaceChildren(...(consents.length ? consents.map(appRow)
      : [h("li", { class: "empty", text: "No application signs you in through this service." })]));
  } catch (e) {
    say(line, e.message, true);
  }
}

function appRow(c) {
  const name = c.clientName ?? `${c.clientId} (removed)`;
  const may = c.scopes.map((s) => SCOPES[s] ?? s).join(", ");
  const what = h("span", { class: "what" }, h("strong", { text: name }), h("br"),
    may ? `May ${may} · ` : "", "allowed ", when(c.createdAt));
  const withdraw = h("button", { type: "button", class: "danger", text: "Withdraw",
    "aria-label": `Withdraw ${name}'s access` });
  withdraw.addEventListener("click", () => guarded($("apps-msg"), withdraw, async () => {
    await api("POST", "/api/auth/oauth2/delete-consent", { id: c.id });
    await loadApps();
    return `${name} will ask you again before it signs you in.`;
  }));
  return h("li", { "data-consent": c.id }, what, h("span", { class: "actions" }, withdraw));
}

// --- organizations and invitations -------------------------------------------------------------------------------

async function loadOrganizations() {
  const line = $("organizations-msg");
  try {
    const organizations = await api("GET", "/api/auth/organization/list");
    $("organization-list").replaceChildren(...(organizations.length
      ? organizations.map((o) => h("li", { "data-organization": o.id },
        h("span", { class: "what" }, h("strong", { text: o.name }), ` · ${o.slug}`,
          o.id === session.session.activeOrganizationId ? h("span", { class: "tag", text: "active" }) : null)))
      : [h("li", { class: "empty", text: "You are a member of no organization." })]));
  } catch (e) {
    say(line, e.message, true);
  }
  try {
    const invitations = (await api("GET", "/api/auth/organization/list-user-invitations"))
      .filter((i) => i.status === "pending");
    $("invitation-list").replaceChildren(...(invitations.length ? invitations.map(invitationRow)
      : [h("li", { class: "empty", text: "No invitation waiting." })]));
  } catch (e) {
    // Invitations are listed only to a confirmed address (an unconfirmed one may be someone else's).
    const text = session.user.emailVerified ? e.message
      : "Confirm your e-mail address to see the invitations sent to it (the invitation mail's link works too).";
    $("invitation-list").replaceChildren(h("li", { class: "empty", text }));
  }
}

/// ` · into N teams` for an invitation into teams (the plugin's `teamId`: ids joined by commas); the invitee may not
/// list the organization's teams before joining, so their names are not shown.
function intoTeams(i) {
  const n = i.teamId ? i.teamId.split(",").length : 0;
  return n ? ` · into ${n} team${n === 1 ? "" : "s"}` : "";
}

function invitationRow(i) {
  const org = i.organizationName ?? "an organization";
  const accept = h("button", { type: "button", text: "Accept", "aria-label": `Accept the invitation to ${org}` });
  const reject = h("button", { type: "button", class: "secondary", text: "Decline", "aria-label": `Decline the invitation to ${org}` });
  const line = $("organizations-msg");
  accept.addEventListener("click", () => guarded(line, accept, async () => {
    await api("POST", "/api/auth/organization/accept-invitation", { invitationId: i.id });
    session = await currentSession();
    await loadOrganizations();
    return `You joined ${org}.`;
  }));
  reject.addEventListener("click", () => guarded(line, reject, async () => {
    await api("POST", "/api/auth/organization/reject-invitation", { invitationId: i.id });
    await loadOrganizations();
    return `Invitation to ${org} declined.`;
  }));
  return h("li", { "data-invitation": i.id },
    h("span", { class: "what" }, h("strong", { text: org }), ` · as ${i.role}${intoTeams(i)} · until `, when(i.expiresAt)),
    h("span", { class: "actions" }, accept, reject));
}

// --- start -------------------------------------------------------------------------------------------------------

function loadAll() {
  loadPasskeys();
  loadSessions();
  loadIdentities();
  loadApps();
  loadOrganizations();
}

$("sign-out").addEventListener("click", async () => {
  try {
    await api("POST", "/api/auth/sign-out");
  } finally {
    location.replace("/sign-in?returnTo=%2Faccount%2F");
  }
});

async function start() {
  try {
    session = await currentSession();
  } catch (e) {
    $("loading").hidden = true;
    return say($("error"), e.message, true);
  }
  if (!session) return toSignIn();
  $("loading").hidden = true;
  $("who").textContent = `${session.user.name} (${session.user.email})`;
  $("sign-out").hidden = false;
  $("sections").hidden = false;
  $("passkey-form").hidden = !passkeysAvailable;
  if (!passkeysAvailable) say($("passkeys-msg"), "This browser cannot use passkeys here (they need HTTPS).");
  profile();
  twoFactorState();
  // A role that requires a second factor refuses every other call until one is set up (403 TWO_FACTOR_REQUIRED):
  // the first call says so.
  try {
    await api("GET", "/api/auth/list-accounts");
  } catch (e) {
    if (e.code === "TWO_FACTOR_REQUIRED") {
      $("must-enrol").hidden = false;
      for (const id of ["passkeys", "sessions", "identities", "apps", "organizations"]) $(id).hidden = true;
      return;
    }
  }
  loadAll();
}

start();
