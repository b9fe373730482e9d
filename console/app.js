// The administration console: a client of the service's own API, served from the binary at /admin/.
//
// - No token ever reaches this script: the session cookie is HttpOnly, every call goes with credentials
//   "same-origin", and the answers that carry a token (sign-in, impersonation and its end) are never read, only
//   their status. Who is signed in comes from GET /api/admin/status.
// - Text from the server is put in the page with textContent only (never parsed as HTML), so a name cannot
//   become markup; the Content-Security-Policy refuses inline script and style as a second line.
// - Hash routing (#/overview, #/users, #/users/<id>, #/organizations, #/organizations/<id>, #/audit, #/status,
//   #/webhooks, #/clients and #/clients/<client_id>, the identity provider's applications):
//   the server serves one page, and the back button works. Pages beyond these are modules of their own
//   (overview.js), built with the helpers exported at the end of this file.

import { describeDevice } from "./ua.js";
import { overviewPage } from "./overview.js";
import { auditPage } from "./audit.js";
import { accessSections, createUserSection, describeFactors, exportLinks, historySection, profileSections, secondFactors } from "./users.js";

import { webhooksPage, webhookPage } from "./webhooks.js";
import { clientsPage, clientPage } from "./clients.js";
import { orgAdminStart, memberSections } from "./orgadmin.js";
import { ssoSections } from "./sso.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const who = document.getElementById("who");
const signOutButton = document.getElementById("sign-out");

/// What GET /api/admin/status said last: the administrator, the configured roles, the counts.
let status = null;
/// The e-mail typed at sign-in, to say which account is not an administrator.
let lastEmail = "";
/// Organizations by id, for names in the user lists; refreshed when a page needs them.
let orgs = new Map();

// --- building the page --------------------------------------------------------------------------------------

/// An element with attributes (`on*` keys are listeners) and children (strings become text nodes).
function h(tag, attrs = {}, ...children) {
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
/// A label and its control, tied by id (every control has a label, for screen readers and for clicking).
function field(labelText, control, hint) {
  control.id ||= `f${++uid}`;
  const parts = [h("label", { for: control.id, text: labelText }), control];
  if (hint) {
    const hintEl = h("small", { id: `${control.id}-hint`, text: hint });
    control.setAttribute("aria-describedby", hintEl.id);
    parts.push(hintEl);
  }
  return h("div", { class: "field" }, parts);
}

/// The message line beside a form or button: errors in words, next to what caused them.
function messageLine(id) {
  return h("p", { class: "msg", id, role: "status", "aria-live": "polite" });
}

function say(line, text, isError = false) {
  line.textContent = text;
  line.classList.toggle("error", isError);
  line.classList.toggle("ok", !isError && text !== "");
}

/// Replaces the page's content; the new heading takes the focus, so keyboard and screen reader users start there.
function show(title, ...content) {
  document.title = `${title} · service-auth console`;
  const heading = h("h1", { tabindex: "-1", text: title });
  main.replaceChildren(heading, ...content);
  heading.focus();
  for (const link of nav.querySelectorAll("a")) {
    const here = location.hash.startsWith(link.getAttribute("href"));
    if (here) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

// Times in the browser's own time zone (where the administrator is), the exact UTC instant on hover (`at`): the
// audit log, the server's logs and the exports are in UTC, so the one is always a pointer away from the other.
const dateFormat = new Intl.DateTimeFormat("en-GB", { dateStyle: "medium", timeStyle: "medium" });
const utcFormat = new Intl.DateTimeFormat("en-GB", { dateStyle: "medium", timeStyle: "medium", timeZone: "UTC" });
/// A moment as text, in the browser's time zone.
function when(iso) {
  return iso ? dateFormat.format(new Date(iso)) : "—";
}
/// A moment as a `<time>` element: the browser's time zone, and UTC in its title (shown on hover).
function at(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  return h("time", { datetime: date.toISOString(), title: `${utcFormat.format(date)} UTC`, text: dateFormat.format(date) });
}

function bytes(n) {
  if (n === null || n === undefined) return "unknown";
  const units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i === 0 ? n : n.toFixed(1)} ${units[i]}`;
}

// On a narrow screen each table row is shown as a card (console.css): every cell carries its column's name, copied
// here from the table's headings whenever rows appear, so no page has to remember to.
new MutationObserver(() => {
  for (const table of main.querySelectorAll("table")) {
    const names = [...table.querySelectorAll("thead th")].map((th) => th.textContent);
    for (const row of table.querySelectorAll("tbody tr")) {
      [...row.cells].forEach((cell, i) => {
        if (names[i] && !cell.hasAttribute("data-label")) cell.setAttribute("data-label", names[i]);
      });
    }
  }
}).observe(main, { childList: true, subtree: true });

function orgName(id) {
  if (!id) return "—";
  return orgs.get(id)?.name ?? id;
}

// --- the API ------------------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/// Calls the API with the session cookie. `read: false` for answers that carry a token: only the status is
/// looked at. Errors become an ApiError with the server's own words ({error} or {code, message}).
async function api(method, path, body, { read = true } = {}) {
  const init = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError(0, "The server cannot be reached. Check the connection and try again.");
  }
  if (response.ok) return read ? response.json() : null;
  const data = await response.json().catch(() => null);
  let message = data?.error ?? data?.message ?? `The server answered ${response.status}.`;
  // Signed in a moment ago, a 401 means the session ended; at sign-in it means what the server says.
  if (response.status === 401 && status) message = "Your session has ended. Sign in again.";
  if (response.status === 429) message = `Too many attempts. Try again in ${response.headers.get("Retry-After") ?? "a few"} seconds.`;
  if (response.status === 403 && message === "administrator role required") message = "This account is not an administrator.";
  throw new ApiError(response.status, message);
}

/// Runs `work` for a form or button: disables it meanwhile, shows the outcome on `line`. A 401 goes to sign-in.
async function act(line, control, work) {
  control.disabled = true;
  say(line, "Working…");
  try {
    const done = await work();
    say(line, done ?? "Done.");
    return true;
  } catch (e) {
    if (e instanceof ApiError && e.status === 401 && status) {
      boot();
      return false;
    }
    say(line, e.message, true);
    return false;
  } finally {
    control.disabled = false;
  }
}

async function loadOrgs() {
  const { organizations } = await api("GET", "/api/admin/organizations");
  orgs = new Map(organizations.map((o) => [o.id, o]));
  return organizations;
}

// --- the confirmation dialog --------------------------------------------------------------------------------

const dialog = document.getElementById("confirm");

/// A real modal dialog (focus kept inside, Escape cancels). Resolves to false, or to true (or what `extra`'s
/// `value()` gives) when confirmed.
function confirmAction({ title, text, confirmLabel, extra }) {
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-extra").replaceChildren(...(extra ? [extra.element] : []));
  const ok = document.getElementById("confirm-ok");
  const cancel = document.getElementById("confirm-cancel");
  ok.textContent = confirmLabel;
  const opener = document.activeElement;
  return new Promise((resolve) => {
    const finish = (value) => {
      ok.removeEventListener("click", onOk);
      cancel.removeEventListener("click", onCancel);
      dialog.removeEventListener("cancel", onCancel);
      dialog.close();
      opener?.focus?.();
      resolve(value);
    };
    const onOk = () => finish(extra ? extra.value() : true);
    const onCancel = (event) => {
      event.preventDefault();
      finish(false);
    };
    ok.addEventListener("click", onOk);
    cancel.addEventListener("click", onCancel);
    dialog.addEventListener("cancel", onCancel);
    dialog.showModal();
    cancel.focus();
  });
}

// --- start, sign-in, sign-out -------------------------------------------------------------------------------

/// Asks the server who we are: no session → sign-in; a session that is not an administrator's → that page.
async function boot() {
  try {
    status = await api("GET", "/api/admin/status");
  } catch (e) {
    status = null;
    nav.hidden = true;
    signOutButton.hidden = e.status !== 403;
    who.textContent = "";
    if (e.status === 401) return signInPage();
    if (e.status === 403 && sessionStorage.getItem("impersonating")) return impersonatingPage();
    // An organization's owner or admin gets their organizations' page (orgadmin.js); anyone else this one.
    if (e.status === 403) return (await orgAdminStart(lastEmail)) || notAdminPage();
    return show("The console cannot start", h("p", { class: "msg error", text: e.message }));
  }
  sessionStorage.removeItem("impersonating");
  nav.hidden = false;
  signOutButton.hidden = false;
  who.textContent = `Signed in as ${status.signed_in_as.email}`;
  if (!location.hash.startsWith("#/") || location.hash === "#/sign-in") location.hash = "#/overview";
  else route();
}

function signInPage() {
  const email = h("input", { type: "email", name: "email", autocomplete: "username", required: true });
  const password = h("input", { type: "password", name: "password", autocomplete: "current-password", required: true });
  const button = h("button", { type: "submit", text: "Sign in" });
  const line = messageLine("sign-in-msg");
  const form = h("form", { id: "sign-in", "aria-label": "Sign in" },
    field("E-mail", email), field("Password", password), button, line);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    lastEmail = email.value;
    const signedIn = await act(line, button, async () => {
      // The answer carries the session token: not read, the cookie is all the console needs.
      await api("POST", "/api/auth/sign-in/email", { email: email.value, password: password.value, rememberMe: false }, { read: false });
      return "Signed in.";
    });
    if (signedIn) {
      password.value = "";
      boot();
    }
  });
  show("Sign in", h("p", { text: "Administrators of this service sign in here with their e-mail and password." }), form);
}

function notAdminPage() {
  const account = lastEmail ? `The account ${lastEmail}` : "The account you are signed in with";
  show("Not an administrator",
    h("p", { id: "not-admin", text: `${account} is not an administrator, so this console cannot be used with it.` }),
    h("p", { text: "Sign out and sign in with an administrator's account, or ask an administrator for the role." }));
}

function impersonatingPage() {
  const target = sessionStorage.getItem("impersonating");
  const button = h("button", { type: "button", text: "Stop impersonating" });
  const line = messageLine("impersonation-msg");
  button.addEventListener("click", async () => {
    const stopped = await act(line, button, async () => {
      // Like sign-in, the answer carries the administrator's token again: not read.
      await api("POST", "/api/auth/admin/stop-impersonating", {}, { read: false });
    });
    if (stopped) {
      sessionStorage.removeItem("impersonating");
      boot();
    }
  });
  show("Impersonating",
    h("p", { id: "impersonating", text: `This browser is signed in as ${target}. The impersonation ends by itself within an hour.` }),
    button, line);
}

signOutButton.addEventListener("click", async () => {
  try {
    await api("POST", "/api/auth/sign-out", undefined, { read: false });
  } catch {
    // Signed out or not, the next step is the sign-in page, which asks the server.
  }
  sessionStorage.removeItem("impersonating");
  status = null;
  lastEmail = "";
  if (location.hash === "#/sign-in") boot();
  else location.hash = "#/sign-in"; // the hashchange finds no status and starts again
});

// --- routing ------------------------------------------------------------------------------------------------

/// Each navigation counts; the page stays `aria-busy` until the newest one has rendered, and then names the address
/// it rendered (`data-shown`), so assistive technology and the browser tests can tell the previous page's content
/// from the one the address now names.
let navigations = 0;

async function route() {
  const mine = ++navigations;
  const hash = location.hash;
  main.setAttribute("aria-busy", "true");
  try {
    await render();
  } finally {
    if (mine === navigations) {
      main.removeAttribute("aria-busy");
      main.dataset.shown = hash;
    }
  }
}

async function render() {
  if (!status) return boot();
  const [path, query = ""] = location.hash.slice(1).split("?");
  const params = new URLSearchParams(query);
  const parts = path.split("/").filter(Boolean);
  try {
    if (parts[0] === "overview") return await overviewPage();
    if (parts[0] === "users" && parts[1]) return await userPage(parts[1]);
    if (parts[0] === "users") return await usersPage(params);
    if (parts[0] === "organizations" && parts[1]) return await organizationPage(parts[1]);
    if (parts[0] === "organizations") return await organizationsPage();
    if (parts[0] === "audit") return await auditPage(params);
    if (parts[0] === "status") return await statusPage();
    if (parts[0] === "webhooks" && parts[1]) return await webhookPage(parts[1]);
    if (parts[0] === "webhooks") return await webhooksPage();
    if (parts[0] === "clients" && parts[1]) return await clientPage(decodeURIComponent(parts[1]));
    if (parts[0] === "clients") return await clientsPage();
    show("Not found", h("p", { text: "There is no such page in the console." }), h("a", { href: "#/users", text: "Users" }));
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return boot();
    show("Something went wrong", h("p", { class: "msg error", role: "alert", text: e.message }));
  }
}

window.addEventListener("hashchange", () => {
  if (dialog.open) dialog.close();
  route();
});

// --- users --------------------------------------------------------------------------------------------------

/// Users, 50 a page, filtered by the server (q, role, banned, organization). The filters live in the address, so
/// a search can be bookmarked and the back button returns to it; "Next page" follows the server's cursor.
async function usersPage(params) {
  await loadOrgs();
  const q = h("input", { type: "search", name: "q", value: params.get("q") ?? "", autocomplete: "off" });
  // The start of an e-mail is found in the server's e-mail index at any number of accounts; text inside e-mails
  // and names needs a pass over every account (fine at 100,000, about a second or two at 1,000,000).
  const match = h("select", { name: "match" },
    h("option", { value: "prefix", text: "E-mail starts with", selected: params.get("match") !== "contains" }),
    h("option", { value: "contains", text: "E-mail or name contains", selected: params.get("match") === "contains" }));
  const role = h("select", { name: "role" }, h("option", { value: "", text: "Any role" }),
    status.roles.map((r) => h("option", { value: r, text: r, selected: params.get("role") === r })));
  const banned = h("select", { name: "banned" },
    h("option", { value: "", text: "Banned or not" }),
    h("option", { value: "true", text: "Banned", selected: params.get("banned") === "true" }),
    h("option", { value: "false", text: "Not banned", selected: params.get("banned") === "false" }));
  const org = h("select", { name: "organization" },
    h("option", { value: "", text: "Any organization" }),
    h("option", { value: "none", text: "No organization", selected: params.get("org") === "none" }),
    [...orgs.values()].map((o) => h("option", { value: o.id, text: o.name, selected: params.get("org") === o.id })));
  const button = h("button", { type: "submit", text: "Search" });
  const line = messageLine("users-msg");
  const form = h("form", { role: "search", id: "user-search", "aria-label": "Find users" },
    field("Search", q, "For example user42@, or a part of a name with “contains”"), field("Match", match),
    field("Role", role), field("Banned", banned), field("Organization", org), button);
  const results = h("div", { id: "user-results" });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    performance.clearMarks();
    performance.mark("search-submitted");
    const next = new URLSearchParams();
    if (q.value.trim()) next.set("q", q.value.trim());
    if (match.value === "contains") next.set("match", "contains");
    if (role.value) next.set("role", role.value);
    if (banned.value) next.set("banned", banned.value);
    if (org.value) next.set("org", org.value);
    const target = `#/users?${next}`;
    if (location.hash === target) loadPage();
    else location.hash = target; // the hashchange renders the page again, which loads the rows
  });
  const exportBox = h("div", { id: "export-box" });
  show("Users", form, line, exportBox, results, createUserSection());
  if (q.value) q.focus();

  const cursors = []; // the cursors of the pages before this one, for "Previous page"
  let cursor = null;
  async function loadPage() {
    const query = new URLSearchParams({ limit: "50" });
    if (params.get("q")) {
      query.set("q", params.get("q"));
      query.set("match", params.get("match") === "contains" ? "contains" : "prefix");
    }
    if (params.get("role")) query.set("role", params.get("role"));
    if (params.get("banned")) query.set("banned", params.get("banned"));
    if (params.get("org")) query.set("organization_id", params.get("org"));
    if (cursor) query.set("cursor", cursor);
    say(line, "Searching…");
    let page;
    try {
      page = await api("GET", `/api/admin/users?${query}`);
    } catch (e) {
      if (e.status === 401) return boot();
      say(line, e.message, true);
      return;
    }
    const rows = page.users.map((u) => h("tr", {},
      h("td", {}, h("a", { href: `#/users/${u.id}`, text: u.email })),
      h("td", { text: u.name }),
      h("td", { text: u.role }),
      h("td", { text: orgName(u.organization_id) }),
      h("td", { text: u.banned ? "Banned" : "No" }),
      h("td", { class: "factors", "data-user": u.id, text: "…" }),
      h("td", {}, at(u.created_at))));
    const table = h("table", { id: "users-table" },
      h("caption", { text: "Users, oldest first" }),
      h("thead", {}, h("tr", {}, ["E-mail", "Name", "Role", "Organization", "Banned", "Second factor", "Created"].map((c) => h("th", { scope: "col", text: c })))),
      h("tbody", {}, rows));
    const pager = h("div", { class: "pager" });
    if (cursors.length) {
      pager.append(h("button", { type: "button", text: "Previous page", onclick: () => { cursor = cursors.pop(); loadPage(); } }));
    }
    if (page.next_cursor) {
      pager.append(h("button", { type: "button", id: "next-page", text: "Next page",
        onclick: () => { cursors.push(cursor); cursor = page.next_cursor; loadPage(); } }));
    }
    results.replaceChildren(...(rows.length ? [table] : []), pager);
    let took = "";
    if (performance.getEntriesByName("search-submitted").length) {
      const measure = performance.measure("search", "search-submitted");
      took = ` (${Math.round(measure.duration)} ms)`;
      performance.clearMarks("search-submitted");
    }
    const total = `${page.total.toLocaleString("en")} in all`;
    const count = rows.length === 0 ? "No user matches." : `${rows.length} user${rows.length === 1 ? "" : "s"} on this page${page.next_cursor ? ", more on the next" : ""}; ${total}.`;
    exportBox.replaceChildren(...(rows.length ? [exportLinks(query)] : []));
    say(line, count + took);
    // Who has which second factor: a call of its own once the rows are shown (the list's items keep their keys).
    const factors = await secondFactors(page.users.map((u) => u.id)).catch(() => new Map());
    for (const cell of table.querySelectorAll("td.factors")) cell.textContent = describeFactors(factors.get(cell.dataset.user));
  }
  await loadPage();
}

/// One user: every change goes through the same API as any client, and each shows its outcome beside it.
async function userPage(id) {
  await loadOrgs();
  const user = await api("GET", `/api/auth/admin/get-user?id=${encodeURIComponent(id)}`);
  const reload = () => userPage(id);
  const self = user.id === status.signed_in_as.id;

  const details = h("dl", { id: "user-details" },
    h("dt", { text: "Name" }), h("dd", { text: user.name }),
    // better-auth's username plugin: the name (normalised) and, when it differs beyond case, how it is shown.
    ...(user.username ? [h("dt", { text: "Username" }), h("dd", { id: "user-username",
      text: user.displayUsername && user.displayUsername.toLowerCase() !== user.username
        ? `${user.username} (shown as ${user.displayUsername})` : user.displayUsername ?? user.username })] : []),
    h("dt", { text: "Role" }), h("dd", { id: "user-role", text: user.role }),
    h("dt", { text: "Primary organization" }), h("dd", { id: "user-org", text: orgName(user.organizationId) }),
    h("dt", { text: "Banned" }), h("dd", { id: "user-banned",
      text: user.banned ? `Yes: ${user.banReason ?? "no reason given"}${user.banExpires ? `, until ${when(user.banExpires)}` : ", no end"}` : "No" }),
    h("dt", { text: "E-mail verified" }), h("dd", { text: user.emailVerified ? "Yes" : "No" }),
    h("dt", { text: "Created" }), h("dd", {}, at(user.createdAt)),
    h("dt", { text: "Id" }), h("dd", {}, h("code", { text: user.id })));

  // Role
  const role = h("select", { name: "role" }, status.roles.map((r) => h("option", { value: r, text: r, selected: r === user.role })));
  const roleButton = h("button", { type: "submit", text: "Change role" });
  const roleLine = messageLine("role-msg");
  const roleForm = h("form", { id: "role-form", "aria-labelledby": "role-heading" }, field("Role", role), roleButton, roleLine);
  roleForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (await act(roleLine, roleButton, async () => {
      await api("PATCH", "/api/admin/users", { userId: user.id, role: role.value });
      return `Role changed to ${role.value}.`;
    })) refreshDetails();
  });

  // Ban / unban
  const banLine = messageLine("ban-msg");
  let banForm;
  if (user.banned) {
    const unban = h("button", { type: "submit", text: "Unban" });
    banForm = h("form", { id: "ban-form", "aria-labelledby": "ban-heading" }, unban, banLine);
    banForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (await act(banLine, unban, async () => {
        await api("PATCH", "/api/admin/users", { userId: user.id, banned: false });
        return "Unbanned.";
      })) reload();
    });
  } else {
    const reason = h("input", { type: "text", name: "reason", maxlength: "500" });
    const ends = h("select", { name: "ends" },
      [["", "Never (until unbanned)"], ["3600", "In 1 hour"], ["86400", "In 1 day"], ["604800", "In 7 days"], ["2592000", "In 30 days"]]
        .map(([v, t]) => h("option", { value: v, text: t })));
    const ban = h("button", { type: "submit", class: "danger", text: "Ban user" });
    banForm = h("form", { id: "ban-form", "aria-labelledby": "ban-heading" },
      field("Reason (optional)", reason, "Shown to administrators and kept in the audit log"), field("Ban ends", ends), ban, banLine);
    banForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      const sure = await confirmAction({ title: `Ban ${user.email}?`, confirmLabel: "Ban user",
        text: "Every session of this user ends now, and signing in is refused until the ban ends or is lifted." });
      if (!sure) return say(banLine, "Not banned.");
      const body = { userId: user.id, banned: true };
      if (reason.value.trim()) body.banReason = reason.value.trim();
      if (ends.value) body.banExpiresIn = Number(ends.value);
      if (await act(banLine, ban, async () => {
        await api("PATCH", "/api/admin/users", body);
        return "Banned.";
      })) reload();
    });
  }

  // Organization
  const org = h("select", { name: "organization" }, h("option", { value: "", text: "No organization" }),
    [...orgs.values()].map((o) => h("option", { value: o.id, text: o.name, selected: o.id === user.organizationId })));
  const orgButton = h("button", { type: "submit", text: "Move" });
  const orgLine = messageLine("org-msg");
  const orgForm = h("form", { id: "org-form", "aria-labelledby": "org-heading" }, field("Primary organization", org,
    "The account's organizationId (what the seed and the admin API set); memberships with roles are below"), orgButton, orgLine);
  orgForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (await act(orgLine, orgButton, async () => {
      await api("PATCH", "/api/admin/users", { userId: user.id, organizationId: org.value || null });
      return org.value ? `Moved to ${orgName(org.value)}.` : "Now in no organization.";
    })) {
      refreshDetails();
      access.refreshMemberships().catch(() => {});
    }
  });

  // Sessions
  const sessionsLine = messageLine("sessions-msg");
  const sessionsBox = h("div", { id: "sessions" });
  async function loadSessions() {
    const { sessions } = await api("POST", "/api/auth/admin/list-user-sessions", { userId: user.id });
    // Who impersonates, in words: their e-mail (one look-up per administrator, most often none).
    const adminNames = new Map();
    await Promise.all([...new Set(sessions.map((s) => s.impersonatedBy).filter(Boolean))].map(async (id) => {
      adminNames.set(id, (await api("GET", `/api/auth/admin/get-user?id=${encodeURIComponent(id)}`).catch(() => null))?.email ?? id);
    }));
    if (!sessions.length) {
      sessionsBox.replaceChildren(h("p", { id: "no-sessions", text: "No live session." }));
      return;
    }
    const rows = sessions.map((s) => {
      const revoke = h("button", { type: "button", class: "danger", text: "Revoke",
        "aria-label": `Revoke the session started ${when(s.createdAt)} from ${s.ipAddress || "an unknown address"}` });
      revoke.addEventListener("click", async () => {
        const sure = await confirmAction({ title: "Revoke this session?", confirmLabel: "Revoke",
          text: `The session started ${when(s.createdAt)} ends now; whoever uses it must sign in again.` });
        if (!sure) return say(sessionsLine, "Not revoked.");
        // `token` here is the session's handle (its id), never a real token: only hashes are stored.
        if (await act(sessionsLine, revoke, async () => {
          await api("POST", "/api/auth/admin/revoke-user-session", { sessionToken: s.token });
          return "Session revoked.";
        })) loadSessions().catch((e) => say(sessionsLine, e.message, true));
      });
      const kind = !s.impersonatedBy ? "Signed in"
        : `Impersonation by ${s.impersonatedBy === status.signed_in_as.id ? "you" : (adminNames.get(s.impersonatedBy) ?? s.impersonatedBy)}`;
      return h("tr", {},
        h("td", {}, at(s.createdAt)), h("td", {}, at(s.expiresAt)),
        h("td", { class: "agent", title: s.userAgent || null }, describeDevice(s.userAgent), h("br"), s.ipAddress || "unknown address"),
        h("td", { text: kind }), h("td", {}, revoke));
    });
    sessionsBox.replaceChildren(h("table", { id: "sessions-table" },
      h("caption", { text: `${sessions.length} live session${sessions.length === 1 ? "" : "s"}` }),
      h("thead", {}, h("tr", {}, ["Started", "Expires", "Device and address", "Kind", "Action"].map((c) => h("th", { scope: "col", text: c })))),
      h("tbody", {}, rows)));
  }

  // Password
  const password = h("input", { type: "password", name: "new-password", autocomplete: "new-password", minlength: "8", maxlength: "128", required: true });
  const passwordButton = h("button", { type: "submit", text: "Set password" });
  const passwordLine = messageLine("password-msg");
  const passwordForm = h("form", { id: "password-form", "aria-labelledby": "password-heading" },
    field("New password", password, "15 to 128 characters (8 if the user has an authenticator), not a common password; every session of the user ends"), passwordButton, passwordLine);
  passwordForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const sure = await confirmAction({ title: `Set a new password for ${user.email}?`, confirmLabel: "Set password",
      text: "The old password stops working and every session of this user ends." });
    if (!sure) return say(passwordLine, "Password unchanged.");
    if (await act(passwordLine, passwordButton, async () => {
      await api("POST", "/api/auth/admin/set-user-password", { userId: user.id, newPassword: password.value });
      password.value = "";
      return "Password set; the user's sessions have ended.";
    })) loadSessions().catch(() => {});
  });

  // Impersonate, remove
  const impersonate = h("button", { type: "button", id: "impersonate", text: "Impersonate" });
  const remove = h("button", { type: "button", id: "remove", class: "danger", text: "Remove user" });
  const dangerLine = messageLine("danger-msg");
  impersonate.addEventListener("click", async () => {
    const sure = await confirmAction({ title: `Impersonate ${user.email}?`, confirmLabel: "Impersonate",
      text: "This browser becomes signed in as this user for at most an hour; both the start and the end are audited." });
    if (!sure) return say(dangerLine, "Not impersonating.");
    if (await act(dangerLine, impersonate, async () => {
      await api("POST", "/api/auth/admin/impersonate-user", { userId: user.id }, { read: false });
    })) {
      sessionStorage.setItem("impersonating", user.email);
      boot();
    }
  });
  remove.addEventListener("click", async () => {
    const sure = await confirmAction({ title: `Remove ${user.email}?`, confirmLabel: "Remove user",
      text: "The account and all its sessions are deleted. This cannot be undone." });
    if (!sure) return say(dangerLine, "Not removed.");
    if (await act(dangerLine, remove, async () => {
      await api("POST", "/api/auth/admin/remove-user", { userId: user.id });
      return "Removed.";
    })) location.hash = "#/users";
  });

  // Second factors, ways in, organizations (users.js).
  const access = await accessSections(user, { sessionsEnded: () => loadSessions().catch(() => {}) });

  async function refreshDetails() {
    const fresh = await api("GET", `/api/auth/admin/get-user?id=${encodeURIComponent(id)}`);
    document.getElementById("user-role").textContent = fresh.role;
    document.getElementById("user-org").textContent = orgName(fresh.organizationId);
  }

  // The sections side by side where the screen is wide (console.css, .user-grid), the tables across the width; one
  // column on a phone. Reading order stays the order here.
  show(user.email,
    h("p", {}, h("a", { href: "#/users", text: "All users" })),
    details,
    h("div", { class: "user-grid" },
    ...profileSections(user, reload),
    h("section", { "aria-labelledby": "role-heading" }, h("h2", { id: "role-heading", text: "Role" }), roleForm),
    h("section", { "aria-labelledby": "ban-heading" }, h("h2", { id: "ban-heading", text: user.banned ? "Ban" : "Ban" }), banForm),
    h("section", { "aria-labelledby": "org-heading" }, h("h2", { id: "org-heading", text: "Primary organization" }), orgForm),
    h("section", { "aria-labelledby": "sessions-heading" }, h("h2", { id: "sessions-heading", text: "Sessions" }), sessionsBox, sessionsLine),
    ...access.sections,
    h("section", { "aria-labelledby": "password-heading" }, h("h2", { id: "password-heading", text: "Password" }), passwordForm),
    h("section", { "aria-labelledby": "danger-heading" }, h("h2", { id: "danger-heading", text: "Impersonate or remove" }),
      self ? h("p", { text: "This is your own account: you cannot impersonate or remove yourself." }) : h("div", { class: "buttons" }, impersonate, remove),
      dangerLine)));
  await loadSessions();
  main.append(await historySection(user));
}

// --- organizations ------------------------------------------------------------------------------------------

function slugFrom(name) {
  return name.toLowerCase().normalize("NFKD").replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 63);
}

async function organizationsPage() {
  const list = await loadOrgs();
  const name = h("input", { type: "text", name: "name", required: true, maxlength: "100" });
  const slug = h("input", { type: "text", name: "slug", required: true, maxlength: "63", pattern: "[a-z0-9]+(-[a-z0-9]+)*" });
  let slugTouched = false;
  slug.addEventListener("input", () => (slugTouched = true));
  name.addEventListener("input", () => {
    if (!slugTouched) slug.value = slugFrom(name.value);
  });
  const button = h("button", { type: "submit", text: "Create organization" });
  const line = messageLine("create-org-msg");
  const form = h("form", { id: "create-org", "aria-labelledby": "create-org-heading" },
    field("Name", name), field("Slug", slug, "Lower-case letters, digits and hyphens; unique"), button, line);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let created;
    if (await act(line, button, async () => {
      created = (await api("POST", "/api/admin/organizations", { name: name.value, slug: slug.value })).organization;
      return `Created ${created.name}.`;
    })) {
      await organizationsPage();
      say(document.getElementById("create-org-msg"), `Created ${created.name}.`);
    }
  });
  const table = list.length
    ? h("table", { id: "orgs-table" }, h("caption", { text: `${list.length} organization${list.length === 1 ? "" : "s"}` }),
      h("thead", {}, h("tr", {}, ["Name", "Slug", "Created"].map((c) => h("th", { scope: "col", text: c })))),
      h("tbody", {}, list.map((o) => h("tr", {},
        h("td", {}, h("a", { href: `#/organizations/${o.id}`, text: o.name })), h("td", { text: o.slug }), h("td", {}, at(o.created_at))))))
    : h("p", { text: "No organization yet." });
  show("Organizations",
    h("section", { "aria-labelledby": "create-org-heading" }, h("h2", { id: "create-org-heading", text: "New organization" }), form),
    h("section", { "aria-labelledby": "orgs-heading" }, h("h2", { id: "orgs-heading", text: "All organizations" }), table));
}

/// The members shown on an organization's page; the users page lists all of them, page by page.
const MEMBERS_SHOWN = 100;

async function organizationPage(id) {
  const { organization: org } = await api("GET", `/api/admin/organizations/${encodeURIComponent(id)}`);
  // The first page only, with the organization's total: the users page lists every member, page by page.
  const { members, total } = await api("GET", `/api/admin/organizations/${encodeURIComponent(id)}/members?limit=${MEMBERS_SHOWN}`);
  await loadOrgs();

  const name = h("input", { type: "text", name: "name", value: org.name, required: true, maxlength: "100" });
  const slug = h("input", { type: "text", name: "slug", value: org.slug, required: true, maxlength: "63" });
  const renameButton = h("button", { type: "submit", text: "Save" });
  const renameLine = messageLine("rename-msg");
  const renameForm = h("form", { id: "rename-org", "aria-labelledby": "rename-heading" }, field("Name", name), field("Slug", slug), renameButton, renameLine);
  renameForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const change = {};
    if (name.value !== org.name) change.name = name.value;
    if (slug.value !== org.slug) change.slug = slug.value;
    if (!Object.keys(change).length) return say(renameLine, "Nothing changed.");
    if (await act(renameLine, renameButton, async () => {
      const { organization } = await api("PATCH", `/api/admin/organizations/${encodeURIComponent(id)}`, change);
      Object.assign(org, organization);
      document.querySelector("h1").textContent = organization.name;
      return "Saved.";
    })) await loadOrgs();
  });

  const memberRows = members.map((u) => h("tr", {},
    h("td", {}, h("a", { href: `#/users/${u.id}`, text: u.email })), h("td", { text: u.name }), h("td", { text: u.role })));
  const membersBox = members.length
    ? [h("table", { id: "members-table" },
      h("caption", { text: `${total} member${total === 1 ? "" : "s"}${total > members.length ? `, the first ${members.length} shown` : ""}` }),
      h("thead", {}, h("tr", {}, ["E-mail", "Name", "Role"].map((c) => h("th", { scope: "col", text: c })))),
      h("tbody", {}, memberRows)),
    h("p", {}, h("a", { href: `#/users?org=${encodeURIComponent(id)}`, text: "All members on the users page" }))]
    : [h("p", { id: "no-members", text: "No account has this as its primary organization." })];

  const deleteButton = h("button", { type: "button", id: "delete-org", class: "danger", text: "Delete organization" });
  const deleteLine = messageLine("delete-org-msg");
  deleteButton.addEventListener("click", async () => {
    const detach = h("input", { type: "checkbox", id: "detach-members", name: "detach" });
    const extra = {
      element: h("div", { class: "field inline" }, detach,
        h("label", { for: "detach-members", text: `Also take its ${total} member${total === 1 ? "" : "s"} out of it (they stay, in no organization)` })),
      value: () => ({ detach: detach.checked }),
    };
    const answer = await confirmAction({ title: `Delete ${org.name}?`, confirmLabel: "Delete", extra,
      text: "The organization is deleted. One that still has members is refused unless they are taken out with it." });
    if (!answer) return say(deleteLine, "Not deleted.");
    if (await act(deleteLine, deleteButton, async () => {
      await api("DELETE", `/api/admin/organizations/${encodeURIComponent(id)}?detach_members=${answer.detach}`);
      return "Deleted.";
    })) location.hash = "#/organizations";
  });

  show(org.name,
    h("p", {}, h("a", { href: "#/organizations", text: "All organizations" })),
    h("section", { "aria-labelledby": "rename-heading" }, h("h2", { id: "rename-heading", text: "Name and slug" }), renameForm),
    h("section", { "aria-labelledby": "members-heading" }, h("h2", { id: "members-heading", text: "Accounts with this as their primary organization" }),
      h("p", { class: "note", text: "An account's primary organization is its organizationId (set by the seed, the import or an administrator); the members with roles, who may also belong to other organizations, are listed below." }),
      membersBox),
    h("section", { "aria-labelledby": "delete-heading" }, h("h2", { id: "delete-heading", text: "Delete" }), deleteButton, deleteLine));
  // Memberships with their roles, and invitations, through the organization plugin's calls (orgadmin.js): a global
  // administrator acts there as an owner of every organization. Above the deletion, which stays last.
  // Then its single sign-on providers, policy and SCIM tokens (sso.js).
  const [memberParts, ssoParts] = await Promise.all([memberSections(org, "owner", status.signed_in_as.id), ssoSections(org)]);
  main.querySelector('[aria-labelledby="delete-heading"]').before(...memberParts, ...ssoParts);
}

// --- status -------------------------------------------------------------------------------------------------

async function statusPage() {
  const [current, config] = await Promise.all([api("GET", "/api/admin/status"), api("GET", "/api/admin/config")]);
  status = current;
  const backup = !status.backups_configured
    ? "Not configured ([backup] dir in config.toml)"
    : status.last_backup_at ? when(status.last_backup_at) : "None yet";
  const rows = [
    ["Version", status.version],
    ["Signed in as", `${status.signed_in_as.name} <${status.signed_in_as.email}>`],
    ["Users", status.users.toLocaleString("en")],
    ["Sessions", status.sessions.toLocaleString("en")],
    ["Organizations", status.organizations.toLocaleString("en")],
    ["Store size", bytes(status.store_bytes)],
    ["Last backup", backup],
    ["Roles", status.roles.join(", ")],
    ["Administrators without a second factor", status.administrators_without_second_factor === 0 ? "None"
      : `${status.administrators_without_second_factor} (each sets one up on their account page, /account/; to require one, set [two_factor] required_for_roles = ["admin"])`],
  ];
  const list = (pairs, id) => h("dl", { id }, pairs.flatMap(([k, v]) => [h("dt", { text: k }), h("dd", { text: v })]));
  show("Status", list(rows, "status"), mailPanel(config), configPanel(config));
}

/// Mail: whether a transport is configured, how the last attempt ended, and a test message to any address.
function mailPanel(config) {
  const last = config.last_delivery;
  const outcome = !config.mail_configured ? "No mail transport ([email] smtp_url or directory in config.toml)"
    : !last ? "No message sent since the server started"
    : last.ok ? `Accepted by the mail server ${when(last.at)}`
    : `Failed ${when(last.at)}: ${last.error}`;
  const line = messageLine("test-mail-msg");
  const to = h("input", { type: "email", name: "to", required: true, value: status.signed_in_as.email });
  const send = h("button", { type: "submit", text: "Send a test mail", disabled: !config.mail_configured });
  const form = h("form", { id: "test-mail", "aria-label": "Send a test mail" }, field("To", to), send);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    act(line, send, async () => {
      await api("POST", "/api/admin/test-mail", { to: to.value });
      return `Queued for ${to.value}. Reload this page in a few seconds to see how the mail server answered.`;
    });
  });
  return h("section", { "aria-labelledby": "mail-h" }, h("h2", { id: "mail-h", text: "Mail" }),
    h("p", { id: "last-delivery", text: `Last delivery: ${outcome}` }), form, line);
}

/// The configuration in effect, one collapsible section each; which settings `service-auth reload` changes.
function configPanel(config) {
  const value = (v) => v === null ? "not set" : typeof v === "object" ? JSON.stringify(v) : String(v);
  const sections = Object.entries(config.settings).map(([name, v]) => {
    const pairs = v !== null && typeof v === "object" && !Array.isArray(v) ? Object.entries(v) : [[name, v]];
    const waiting = config.need_restart.includes(name) ? " (changed in the file: restart to apply)" : "";
    return h("details", { class: "config-section" },
      h("summary", { text: `[${name}]${waiting}` }),
      h("dl", {}, pairs.flatMap(([k, x]) => [h("dt", { text: k }), h("dd", { text: value(x) })])));
  });
  const reloaded = config.reloaded_at ? `last reloaded ${when(config.reloaded_at)}` : "not reloaded since it started";
  return h("section", { id: "config", "aria-labelledby": "config-h" }, h("h2", { id: "config-h", text: "Configuration in effect" }),
    h("p", { text: `From ${config.source ?? "built-in defaults and the environment"}; ${reloaded}. Passwords in URLs show as "redacted"; client secrets are never shown.` }),
    h("p", { text: `Changed by service-auth reload (or SIGHUP) without a restart: ${config.live.join("; ")}. Every other setting needs a restart.` }),
    sections);
}

// What the page modules (overview.js, webhooks.js, …) build with. `status` is a live binding: always the latest
// answer.
export { h, field, messageLine, say, show, when, at, api, act, ApiError, confirmAction, loadOrgs, orgName, orgs, status };

boot();
