// Console, round two, on the users pages: create a user (with role and organization), the filtered list as a
// file (CSV or JSON, streamed by the server: a plain link, so the browser saves it as it arrives), who has which
// second factor in the list, and on a user's page their name and verified flag, the mailed links (reset,
// verification), their second factors (with the administrator's reset), their ways in (password and the
// identities of other providers, each with Unlink), their organizations, the applications they allowed (each
// with a withdrawal, console/clients.js), and their audit history.

import { act, api, at, confirmAction, field, h, messageLine, orgName, orgs, say, status } from "./app.js";
import { entriesTable } from "./audit.js";
import { consentsSection } from "./clients.js";

/// The "Create user" section of the users page.
export function createUserSection() {
  const email = h("input", { type: "email", name: "email", required: true, autocomplete: "off" });
  const name = h("input", { type: "text", name: "name", required: true, maxlength: "100", autocomplete: "off" });
  const password = h("input", { type: "password", name: "password", minlength: "8", maxlength: "128", autocomplete: "new-password" });
  const role = h("select", { name: "role" }, status.roles.map((r) => h("option", { value: r, text: r, selected: r === "user" })));
  const org = h("select", { name: "organization" }, h("option", { value: "", text: "No organization" }),
    [...orgs.values()].map((o) => h("option", { value: o.id, text: o.name })));
  const button = h("button", { type: "submit", text: "Create user" });
  const line = messageLine("create-user-msg");
  const form = h("form", { id: "create-user", "aria-labelledby": "create-user-heading" },
    field("E-mail", email), field("Name", name),
    field("Password (optional)", password, "Empty: nobody knows it; send the user a reset link"),
    field("Role", role), field("Organization", org), button, line);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let created;
    await act(line, button, async () => {
      const into = org.value;
      const body = { email: email.value.trim(), name: name.value.trim(), role: role.value };
      if (password.value) body.password = password.value;
      ({ user: created } = await api("POST", "/api/auth/admin/create-user", body));
      // The organization is a second call (the plugin's create-user takes none): said apart if it fails.
      if (into) {
        try {
          await api("PATCH", "/api/admin/users", { userId: created.id, organizationId: into });
        } catch (e) {
          throw new Error(`Created ${created.email}, but not moved into ${orgName(into)}: ${e.message}`);
        }
      }
      form.reset();
      return `Created ${created.email}${into ? ` in ${orgName(into)}` : ""}.`;
    });
    if (created) line.append(" ", h("a", { href: `#/users/${created.id}`, id: "created-user", text: "Open their page" }));
  });
  return h("section", { "aria-labelledby": "create-user-heading" },
    h("h2", { id: "create-user-heading", text: "Create a user" }), form);
}

/// Links that download the list as it is filtered now (the server's query, without the page window).
export function exportLinks(query) {
  const filters = new URLSearchParams(query);
  filters.delete("limit");
  filters.delete("cursor");
  const link = (format) => {
    const q = new URLSearchParams(filters);
    q.set("format", format);
    return h("a", { href: `/api/admin/users/export?${q}`, id: `export-${format}`, class: "button", download: "",
      text: `Export as ${format.toUpperCase()}` });
  };
  return h("div", { class: "buttons", id: "export" }, link("csv"), link("json"));
}

/// Name and verified flag (the plugin's update-user), then the mailed links: a password reset, and the
/// verification again while the address is not verified (the public calls, which answer alike for any address).
export function profileSections(user, refresh) {
  const name = h("input", { type: "text", name: "name", value: user.name, required: true, maxlength: "100" });
  const verified = h("input", { type: "checkbox", name: "verified", id: "verified", checked: user.emailVerified });
  const save = h("button", { type: "submit", text: "Save" });
  const line = messageLine("profile-msg");
  const form = h("form", { id: "profile-form", "aria-labelledby": "profile-heading" }, field("Name", name),
    h("div", { class: "field inline" }, verified, h("label", { for: "verified", text: "E-mail address verified" })), save, line);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = {};
    if (name.value.trim() !== user.name) data.name = name.value.trim();
    if (verified.checked !== user.emailVerified) data.emailVerified = verified.checked;
    if (!Object.keys(data).length) return say(line, "Nothing changed.");
    if (await act(line, save, async () => {
      const { user: saved } = await api("POST", "/api/auth/admin/update-user", { userId: user.id, data });
      Object.assign(user, saved);
      return "Saved.";
    })) refresh();
  });

  const reset = h("button", { type: "button", id: "send-reset", text: "Send a password reset link" });
  const verify = h("button", { type: "button", id: "send-verification", text: "Send the verification link again" });
  const linksLine = messageLine("links-msg");
  reset.addEventListener("click", () => act(linksLine, reset, async () => {
    await api("POST", "/api/auth/request-password-reset", { email: user.email });
    return `A reset link is on its way to ${user.email}.`;
  }));
  verify.addEventListener("click", () => act(linksLine, verify, async () => {
    await api("POST", "/api/auth/send-verification-email", { email: user.email });
    return `A verification link is on its way to ${user.email}.`;
  }));
  return [
    h("section", { "aria-labelledby": "profile-heading" }, h("h2", { id: "profile-heading", text: "Name and e-mail" }), form),
    h("section", { "aria-labelledby": "links-heading" }, h("h2", { id: "links-heading", text: "Mailed links" }),
      h("div", { class: "buttons" }, reset, user.emailVerified ? null : verify), linksLine),
  ];
}

/// The user's history: the audit entries where they are the actor or the target, newest first.
export async function historySection(user) {
  const box = h("div", { id: "history" });
  const section = h("section", { "aria-labelledby": "history-heading" }, h("h2", { id: "history-heading", text: "History" }), box);
  const shown = 20;
  const { entries, next_cursor } = await api("GET", `/api/admin/audit?subject_id=${encodeURIComponent(user.id)}&limit=${shown}`);
  if (!entries.length) {
    box.replaceChildren(h("p", { id: "no-history", text: "Nothing in the audit log yet." }));
    return section;
  }
  const table = await entriesTable(entries, { id: "history-table", caption: `The newest ${entries.length} entries about this user`,
    columns: ["When", "Action", "By", "On", "Detail"] });
  const more = new URLSearchParams({ on: user.email });
  box.replaceChildren(table, next_cursor ? h("p", {}, h("a", { href: `#/audit?${more}`, text: "Things done to this user, in the audit log" })) : "");
  return section;
}

// --- second factors, ways in, organizations -----------------------------------------------------------------

/// A user's second factors in words, from one item of GET /api/admin/users/second-factors: "Authenticator app,
/// 2 passkeys", "None".
export function describeFactors(f) {
  if (!f) return "—";
  const parts = [];
  if (f.totp === "on") parts.push("Authenticator app");
  if (f.totp === "pending") parts.push("Authenticator app (not confirmed)");
  if (f.passkeys) parts.push(`${f.passkeys} passkey${f.passkeys === 1 ? "" : "s"}`);
  return parts.length ? parts.join(", ") : "None";
}

/// Who has which second factor, for the users on a page of the list: id → item. A call of its own, so the list's
/// items keep their seven keys.
export async function secondFactors(ids) {
  if (!ids.length) return new Map();
  const { users } = await api("GET", `/api/admin/users/second-factors?ids=${ids.map(encodeURIComponent).join(",")}`);
  return new Map(users.map((f) => [f.id, f]));
}

/// The sections of a user's page about how they sign in and where they belong: second factors (with the reset),
/// ways in (with Unlink), organizations. `sessionsEnded` is called after a reset, which ends every session of the
/// account. Returns the sections and `refreshMemberships`, for the organization form above them.
export async function accessSections(user, { sessionsEnded }) {
  const self = user.id === status.signed_in_as.id;
  const path = `/api/admin/users/${encodeURIComponent(user.id)}`;

  // Second factors: the authenticator app and its backup codes, the passkeys by name, and the reset.
  const factorsBox = h("div", { id: "factors" });
  const factorsLine = messageLine("factors-msg");
  const reset = h("button", { type: "button", id: "reset-two-factor", class: "danger", text: "Reset the second factor" });
  reset.addEventListener("click", async () => {
    const sure = await confirmAction({ title: `Reset the second factor of ${user.email}?`, confirmLabel: "Reset",
      text: "Their authenticator app and backup codes stop working, and every session and trusted device of the account ends. They sign in with the password alone until they set up a new one." });
    if (!sure) return say(factorsLine, "Not reset.");
    if (await act(factorsLine, reset, async () => {
      const { reset: done } = await api("POST", `${path}/two-factor/reset`, {});
      return done ? "Second factor reset; every session of the user has ended." : "This user had no second factor.";
    })) {
      await loadFactors().catch((e) => say(factorsLine, e.message, true));
      sessionsEnded();
    }
  });
  async function loadFactors() {
    const [factors, { passkeys }] = await Promise.all([secondFactors([user.id]), api("GET", `${path}/passkeys`)]);
    const f = factors.get(user.id);
    const totp = f.totp === "on" ? "On" : f.totp === "pending" ? "Being set up (no code confirmed yet)" : "Off";
    const codes = f.backup_codes_left === null ? "—" : `${f.backup_codes_left} of 10 left`;
    const kind = (p) => (p.device_type === "multiDevice" ? "Synced" : "This device only");
    const passkeyList = passkeys.length
      ? h("table", { id: "passkeys-table" },
        h("caption", { text: `${passkeys.length} passkey${passkeys.length === 1 ? "" : "s"}` }),
        h("thead", {}, h("tr", {}, ["Name", "Kind", "Added"].map((c) => h("th", { scope: "col", text: c })))),
        h("tbody", {}, passkeys.map((p) => h("tr", {},
          h("td", { text: p.name || "(unnamed)" }), h("td", { text: kind(p) }), h("td", {}, at(p.created_at))))))
      : h("p", { id: "no-passkeys", text: "No passkey." });
    factorsBox.replaceChildren(
      h("dl", { id: "factor-details" },
        h("dt", { text: "Authenticator app" }), h("dd", { id: "totp-state", text: totp }),
        h("dt", { text: "Backup codes" }), h("dd", { id: "backup-codes", text: codes })),
      passkeyList,
      ...(f.totp !== "off" && !self ? [h("div", { class: "buttons" }, reset)] : []));
  }

  // Ways in: the password, and each identity of another provider, with Unlink (never the last way in).
  const waysBox = h("div", { id: "ways-in" });
  const waysLine = messageLine("ways-msg");
  async function loadWays() {
    const { password, accounts } = await api("GET", `${path}/accounts`);
    const last = !password && accounts.length === 1;
    const rows = accounts.map((a) => {
      const unlink = h("button", { type: "button", class: "danger", text: "Unlink",
        "aria-label": `Unlink the ${a.provider_id} identity ${a.account_id}` });
      unlink.addEventListener("click", async () => {
        const sure = await confirmAction({ title: `Unlink ${a.provider_id} from ${user.email}?`, confirmLabel: "Unlink",
          text: `Signing in through ${a.provider_id} as ${a.email || a.account_id} no longer opens this account.` });
        if (!sure) return say(waysLine, "Not unlinked.");
        if (await act(waysLine, unlink, async () => {
          await api("DELETE", `${path}/accounts/${encodeURIComponent(a.id)}`);
          return `Unlinked ${a.provider_id}.`;
        })) loadWays().catch((e) => say(waysLine, e.message, true));
      });
      return h("tr", {},
        h("td", { text: a.provider_id }), h("td", {}, h("code", { text: a.account_id })), h("td", { text: a.email || "—" }),
        h("td", {}, at(a.created_at)), h("td", {}, last ? "The only way in" : unlink));
    });
    waysBox.replaceChildren(
      h("dl", {}, h("dt", { text: "Password" }), h("dd", { id: "has-password", text: password ? "Yes" : "No (signs in through a provider)" })),
      accounts.length
        ? h("table", { id: "identities-table" },
          h("caption", { text: `${accounts.length} linked identit${accounts.length === 1 ? "y" : "ies"}` }),
          h("thead", {}, h("tr", {}, ["Provider", "Account at the provider", "E-mail", "Linked", "Action"].map((c) => h("th", { scope: "col", text: c })))),
          h("tbody", {}, rows))
        : h("p", { id: "no-identities", text: "No identity of another provider is linked." }));
  }

  // Organizations: every membership, the primary one (the account's organization) marked.
  const membershipsBox = h("div", { id: "memberships" });
  async function loadMemberships() {
    const { memberships } = await api("GET", `${path}/memberships`);
    membershipsBox.replaceChildren(memberships.length
      ? h("table", { id: "memberships-table" },
        h("caption", { text: `Member of ${memberships.length} organization${memberships.length === 1 ? "" : "s"}` }),
        h("thead", {}, h("tr", {}, ["Organization", "Role", "Primary", "Since"].map((c) => h("th", { scope: "col", text: c })))),
        h("tbody", {}, memberships.map((m) => h("tr", {},
          h("td", {}, h("a", { href: `#/organizations/${encodeURIComponent(m.organization_id)}`, text: m.organization_name })),
          h("td", { text: m.role }), h("td", { text: m.primary ? "Primary" : "No" }), h("td", {}, at(m.created_at))))))
      : h("p", { id: "no-memberships", text: "Member of no organization." }));
  }

  const [consents] = await Promise.all([consentsSection(user), loadFactors(), loadWays(), loadMemberships()]);
  return {
    sections: [
      h("section", { "aria-labelledby": "factors-heading" }, h("h2", { id: "factors-heading", text: "Second factor" }), factorsBox, factorsLine),
      h("section", { "aria-labelledby": "ways-heading" }, h("h2", { id: "ways-heading", text: "Ways in" }), waysBox, waysLine),
      h("section", { "aria-labelledby": "memberships-heading" }, h("h2", { id: "memberships-heading", text: "Memberships" }), membershipsBox),
      consents,
    ],
    refreshMemberships: loadMemberships,
  };
}
