// The audit log, searched on the server (GET /api/admin/audit with action, actor_id, target_id, from, to): the
// conditions live in the address (#/audit?action=…&by=…&on=…&from=…&to=…), so a search can be bookmarked and the
// back button returns to it. "By" and "On" take an e-mail (or an organization's name, or an id); the page turns
// them into ids. Every id in a row is shown by name: the user's e-mail, the organization's name.

import { api, at, field, h, loadOrgs, messageLine, orgs, say, show, status } from "./app.js";

/// The actions the server writes (`domain::audit::action`), in words; the search offers them as suggestions (any
/// text is accepted), and the tables show the words with the code beside. An action missing here shows its code.
export const ACTION_WORDS = {
  "user.created": "Account created",
  "user.role_changed": "Role changed",
  "user.banned": "Banned",
  "user.unbanned": "Unbanned",
  "user.ban_reason_changed": "Ban reason changed",
  "user.ban_expired": "Ban ran out",
  "user.organization_changed": "Primary organization changed",
  "user.profile_updated": "Profile changed",
  "user.password_changed": "Password changed by its owner",
  "user.password_set": "Password set by an administrator",
  "user.password_reset": "Password reset through the mailed link",
  "user.link_requested": "Mailed link asked for",
  "user.email_verified": "E-mail address confirmed",
  "user.deleted": "Account deleted",
  "user.impersonation_started": "Impersonation started",
  "user.impersonation_stopped": "Impersonation ended",
  "user.two_factor_enrolment": "Second factor: set-up started",
  "user.two_factor_enabled": "Second factor turned on",
  "user.two_factor_backup_codes": "New backup codes",
  "user.two_factor_disabled": "Second factor turned off",
  "user.two_factor_reset": "Second factor reset by an administrator",
  "user.two_factor_code_mailed": "Sign-in code mailed",
  "session.revoked": "Sessions ended",
  "sign_in.succeeded": "Signed in",
  "sign_in.failed": "Sign-in failed",
  "sign_in.refused": "Sign-in refused",
  "sign_in.failures_summarised": "Failed sign-ins, counted together",
  "sign_in.second_factor_failed": "Wrong second-factor code",
  "sign_in.second_factor_passed": "Second factor passed",
  "sign_in.provider": "Signed in through a provider",
  "organization.created": "Organization created",
  "organization.updated": "Organization changed",
  "organization.deleted": "Organization deleted",
  "member.added": "Member added",
  "member.role_changed": "Member's role changed",
  "member.removed": "Member removed",
  "member.left": "Member left",
  "team.created": "Team created",
  "team.updated": "Team renamed",
  "team.deleted": "Team removed",
  "team.member_added": "Added to a team",
  "team.member_removed": "Taken out of a team",
  "role.created": "Organization role created",
  "role.updated": "Organization role changed",
  "role.deleted": "Organization role deleted",
  "oauth_client.created": "Application registered",
  "oauth_client.updated": "Application changed",
  "oauth_client.secret_rotated": "Application's secret replaced",
  "oauth_client.deleted": "Application deleted",
  "oauth_consent.granted": "Application allowed",
  "oauth_consent.updated": "Application's access changed",
  "oauth_consent.revoked": "Application's access withdrawn",
  "oauth_grant.issued": "Application given tokens",
  "oauth_grant.revoked": "Application's tokens revoked",
  "invitation.sent": "Invitation sent",
  "invitation.accepted": "Invitation accepted",
  "invitation.rejected": "Invitation declined",
  "invitation.canceled": "Invitation withdrawn",
  "passkey.registered": "Passkey added",
  "passkey.renamed": "Passkey renamed",
  "passkey.deleted": "Passkey deleted",
  "account.linked": "Provider linked",
  "account.unlinked": "Provider unlinked",
  "oidc.signing_keys_rotated": "Signing keys rotated",
  "config.reloaded": "Configuration reloaded",
  "mail.failed": "Mail given up",
  "sso_provider.created": "SSO provider registered",
  "sso_provider.updated": "SSO provider changed",
  "sso_provider.deleted": "SSO provider removed",
  "sso_provider.domain_verification_requested": "SSO domain verification asked for",
  "sso_provider.domain_verified": "SSO domain verified",
  "sso_policy.updated": "Require-SSO policy changed",
  "scim_token.created": "SCIM token created",
  "scim_token.revoked": "SCIM token revoked",
  "scim.user_updated": "Account changed by SCIM",
};
const ACTIONS = Object.keys(ACTION_WORDS);

/// An action in words with its code beside (the code is what the search and the export use).
export function actionCell(action) {
  const words = ACTION_WORDS[action];
  return h("td", { "data-action": action }, words ? [h("span", { text: words }), " "] : [], h("code", { text: action }));
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const UUIDS = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

/// The id `text` names: an id as it is, an organization by its name, a user by their exact e-mail (found in the
/// server's e-mail index). Throws, in words, when nothing has that name.
async function idOf(text, what) {
  const wanted = text.trim();
  if (UUID.test(wanted)) return wanted.toLowerCase();
  const org = [...orgs.values()].find((o) => o.name.toLowerCase() === wanted.toLowerCase());
  if (org) return org.id;
  const query = new URLSearchParams({ q: wanted.toLowerCase(), match: "prefix", limit: "10" });
  const { users } = await api("GET", `/api/admin/users?${query}`);
  const user = users.find((u) => u.email === wanted.toLowerCase());
  if (!user) throw new Error(`${what}: no user has the e-mail ${wanted}, and no organization that name.`);
  return user.id;
}

/// What the entries' ids stand for: an organization's name, a user's e-mail (one get-user per distinct id on the
/// page), or the id itself for what no longer exists.
export async function namesOf(ids) {
  await loadOrgs();
  const names = new Map();
  await Promise.all([...new Set(ids.filter(Boolean))].map(async (id) => {
    if (orgs.has(id)) return names.set(id, { kind: "organization", text: orgs.get(id).name });
    try {
      const user = await api("GET", `/api/auth/admin/get-user?id=${encodeURIComponent(id)}`);
      names.set(id, { kind: "user", text: user.email });
    } catch {
      names.set(id, { kind: "gone", text: id });
    }
  }));
  return names;
}

function subject(id, name) {
  if (!id) return "—";
  if (id === status.signed_in_as.id) return h("a", { href: `#/users/${id}`, text: "you" });
  if (name.kind === "user") return h("a", { href: `#/users/${id}`, text: name.text });
  if (name.kind === "organization") return h("a", { href: `#/organizations/${id}`, text: name.text });
  return h("code", { title: "no longer exists, or not a user or organization", text: id });
}

/// An entry's detail with the ids in it (a move: "none -> <id>") replaced by the names they stand for.
function namedDetail(detail, names) {
  return (detail || "").replace(UUIDS, (id) => orgs.get(id)?.name ?? (names.get(id)?.kind === "user" ? names.get(id).text : id));
}

/// A table of entries, newest first, every id by name. `columns` leaves out what the page says already.
export async function entriesTable(entries, { id, caption, columns = ["When", "Action", "By", "On", "Address", "Detail"] }) {
  const names = await namesOf(entries.flatMap((e) => [e.actor_id, e.target_id]));
  const cell = {
    When: (e) => h("td", {}, at(e.at)),
    Action: (e) => actionCell(e.action),
    By: (e) => h("td", {}, subject(e.actor_id, names.get(e.actor_id))),
    On: (e) => h("td", {}, subject(e.target_id, names.get(e.target_id))),
    Address: (e) => h("td", { text: e.ip_address || "—" }),
    Detail: (e) => h("td", { class: "detail", text: namedDetail(e.detail, names) }),
  };
  return h("table", { id },
    h("caption", { text: caption }),
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col", text: c })))),
    h("tbody", {}, entries.map((e) => h("tr", {}, columns.map((c) => cell[c](e))))));
}

/// "2026-11-26T03:40:05" (a datetime-local field, read as UTC) → RFC 3339; "" stays "".
function utc(local) {
  if (!local) return "";
  return `${local.length === 16 ? `${local}:00` : local}Z`;
}

export async function auditPage(params) {
  await loadOrgs();
  const action = h("input", { type: "text", name: "action", list: "audit-actions", value: params.get("action") ?? "", autocomplete: "off", spellcheck: "false" });
  const by = h("input", { type: "text", name: "by", value: params.get("by") ?? "", autocomplete: "off" });
  const on = h("input", { type: "text", name: "on", value: params.get("on") ?? "", autocomplete: "off" });
  const from = h("input", { type: "datetime-local", name: "from", step: "1", value: params.get("from") ?? "" });
  const to = h("input", { type: "datetime-local", name: "to", step: "1", value: params.get("to") ?? "" });
  const button = h("button", { type: "submit", text: "Search" });
  const line = messageLine("audit-msg");
  const form = h("form", { id: "audit-filter", role: "search", "aria-label": "Search the audit log" },
    field("Action", action, "For example user.banned"), h("datalist", { id: "audit-actions" }, ACTIONS.map((a) => h("option", { value: a, label: ACTION_WORDS[a] }))),
    field("By", by, "An e-mail or an id"), field("On", on, "An e-mail, an organization's name, or an id"),
    field("From (UTC)", from), field("To (UTC)", to), button);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    for (const input of [action, by, on, from, to]) if (input.value.trim()) next.set(input.name, input.value.trim());
    const target = `#/audit?${next}`;
    if (location.hash === target) window.dispatchEvent(new HashChangeEvent("hashchange"));
    else location.hash = target;
  });
  const results = h("div", { id: "audit-results" });
  show("Audit log", form, line, results);

  const query = new URLSearchParams({ limit: "50" });
  try {
    if (params.get("action")) query.set("action", params.get("action"));
    if (params.get("by")) query.set("actor_id", await idOf(params.get("by"), "By"));
    if (params.get("on")) query.set("target_id", await idOf(params.get("on"), "On"));
  } catch (e) {
    return say(line, e.message, true);
  }
  if (params.get("from")) query.set("from", utc(params.get("from")));
  if (params.get("to")) query.set("to", utc(params.get("to")));
  if (params.get("cursor")) query.set("cursor", params.get("cursor"));
  const searching = [...query.keys()].some((k) => !["limit", "cursor"].includes(k));
  say(line, "Searching…");
  let page;
  try {
    page = await api("GET", `/api/admin/audit?${query}`);
  } catch (e) {
    return say(line, e.message, true);
  }
  const { entries, next_cursor } = page;
  const table = await entriesTable(entries, { id: "audit-table",
    caption: `${searching ? "Matching entries" : "Entries"}${params.get("cursor") ? ", older" : ""}, newest first` });
  const pager = h("div", { class: "pager" });
  const here = new URLSearchParams(params);
  here.delete("cursor");
  if (params.get("cursor")) pager.append(h("a", { href: `#/audit?${here}`, class: "button", text: "Newest entries" }));
  if (next_cursor) {
    here.set("cursor", next_cursor);
    pager.append(h("a", { href: `#/audit?${here}`, id: "older", class: "button", text: "Older entries" }));
  }
  results.replaceChildren(...(entries.length ? [table] : []), pager);
  const count = entries.length === 0 ? (next_cursor ? "None among the entries searched so far; older ones may match." : "No entry matches.")
    : `${entries.length} entr${entries.length === 1 ? "y" : "ies"}${next_cursor ? ", older ones on the next page" : ""}.`;
  say(line, count);
}
