// Console, round two, on the users pages: create a user (with role and organization), the filtered list as a
// file (CSV or JSON, streamed by the server: a plain link, so the browser saves it as it arrives), and on a
// user's page their name and verified flag, the mailed links (reset, verification) and their audit history.

import { act, api, field, h, messageLine, orgName, orgs, say, status } from "./app.js";
import { entriesTable } from "./audit.js";

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
