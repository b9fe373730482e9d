// The console's applications page (#/clients, #/clients/<client_id>): the identity provider's clients (register,
// change redirect URIs, scopes and name, disable, rotate the secret, delete) and, on a user's page, the apps the
// user allowed (their consents) with a withdrawal. A client of /api/admin/oidc/clients and
// /api/admin/users/{id}/consents like the rest of the console; a secret is shown once, in the page, and never kept
// by the script.

import { h, field, messageLine, say, show, at, api, act, confirmAction } from "./app.js";

const DEFAULT_SCOPE = "openid profile email offline_access";

/// One URI a line, blank lines dropped.
function lines(text) {
  return text.split("\n").map((l) => l.trim()).filter(Boolean);
}

function kind(c) {
  return c.token_endpoint_auth_method === "none" ? "Public (no secret, PKCE)" : "Confidential (with a secret)";
}

/// The clients, and a form to register one.
export async function clientsPage() {
  const { clients } = await api("GET", "/api/admin/oidc/clients");
  const line = messageLine("client-create-msg");
  const name = h("input", { type: "text", name: "client_name", required: true, maxlength: "100", placeholder: "Grafana" });
  const uris = h("textarea", { name: "redirect_uris", rows: "3", cols: "50",
    placeholder: "https://grafana.example.com/login/generic_oauth" });
  const scope = h("input", { type: "text", name: "scope", value: DEFAULT_SCOPE });
  const type = h("select", { name: "type" },
    h("option", { value: "confidential", text: "Confidential: a server-side web app (gets a secret)" }),
    h("option", { value: "native", text: "Public: a native app or command-line tool (PKCE, loopback redirects)" }),
    h("option", { value: "spa", text: "Public: a single-page web app (PKCE)" }));
  const skip = h("input", { type: "checkbox", name: "skip_consent", id: "client-skip-consent" });
  const secret = h("p", { id: "client-secret", class: "secret" });
  const create = h("button", { type: "submit", text: "Register" });
  const form = h("form", { id: "client-create", "aria-label": "Register an application" },
    field("Name", name),
    field("Redirect URIs", uris, "one a line, matched byte for byte; https (a native app's may be http://127.0.0.1)"),
    field("Scopes", scope, "space-separated"),
    field("Kind", type),
    h("div", { class: "field inline" }, skip,
      h("label", { for: "client-skip-consent", text: "First-party: never ask its users for consent" })),
    create);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    secret.textContent = "";
    const body = { client_name: name.value, redirect_uris: lines(uris.value), scope: scope.value,
      skip_consent: skip.checked };
    if (type.value !== "confidential") body.token_endpoint_auth_method = "none";
    if (type.value === "native") body.application_type = "native";
    let made;
    const ok = await act(line, create, async () => {
      made = await api("POST", "/api/admin/oidc/clients", body);
      return `Registered ${made.client.client_name}.`;
    });
    if (!ok) return;
    const rows = [h("p", {}, "Client ID: ", h("code", { id: "new-client-id", text: made.client.client_id }))];
    if (made.client_secret) {
      rows.push(h("p", {}, "Client secret (shown once, copy it now): ", h("code", { id: "new-client-secret", text: made.client_secret })));
    }
    rows.push(h("p", {}, h("a", { href: `#/clients/${encodeURIComponent(made.client.client_id)}`, text: "Open it" })));
    secret.replaceChildren(...rows);
    tbody.prepend(row(made.client));
    caption.textContent = counted(tbody.rows.length);
  });
  const row = (c) => h("tr", { "data-client": c.client_id },
    h("td", {}, h("a", { href: `#/clients/${encodeURIComponent(c.client_id)}`, text: c.client_name })),
    h("td", {}, h("code", { text: c.client_id })),
    h("td", { text: kind(c) }),
    h("td", { text: c.disabled ? "Disabled" : "Enabled" }),
    h("td", {}, at(c.created_at)));
  const tbody = h("tbody", {}, [...clients].reverse().map(row));
  const counted = (n) => `${n} application${n === 1 ? "" : "s"}, newest first`;
  const caption = h("caption", { text: counted(clients.length) });
  show("Applications",
    h("p", { class: "note", text: "Applications that sign their users in through this service (OpenID Connect). Guide: docs/oidc-provider.md." }),
    h("table", { id: "clients-table" },
      caption,
      h("thead", {}, h("tr", {}, ["Name", "Client ID", "Kind", "State", "Registered"].map((c) => h("th", { scope: "col", text: c })))),
      tbody),
    h("h2", { text: "Register an application" }), form, line, secret);
}

/// One client: its settings, changed in place; the secret rotated; disabled or enabled; deleted.
export async function clientPage(id) {
  const path = `/api/admin/oidc/clients/${encodeURIComponent(id)}`;
  const { client: c } = await api("GET", path);
  const line = messageLine("client-msg");
  const secret = h("p", { id: "client-secret", class: "secret" });
  const details = h("dl", { id: "client" });
  function showDetails(client) {
    const rows = [
      ["Client ID", client.client_id], ["Kind", kind(client)], ["Application type", client.application_type],
      ["Grant types", client.grant_types.join(", ")], ["State", client.disabled ? "Disabled: its users cannot sign in through it" : "Enabled"],
      ["Asks for consent", client.skip_consent ? "No (first-party)" : "Yes"], ["ID tokens signed with", client.id_token_signed_response_alg],
      ["Back-channel logout", client.backchannel_logout_uri || "None"],
      ["Registered", at(client.created_at)], ["Changed", at(client.updated_at)],
    ];
    details.replaceChildren(...rows.flatMap(([k, v]) => [h("dt", { text: k }), h("dd", {}, v)]));
  }
  showDetails(c);

  const name = h("input", { type: "text", name: "client_name", value: c.client_name, required: true, maxlength: "100" });
  const uris = h("textarea", { name: "redirect_uris", rows: String(Math.max(2, c.redirect_uris.length + 1)), cols: "50" });
  uris.value = c.redirect_uris.join("\n");
  const scope = h("input", { type: "text", name: "scope", value: c.scope });
  const backchannel = h("input", { type: "url", name: "backchannel_logout_uri", value: c.backchannel_logout_uri || "",
    maxlength: "2048", placeholder: "https://app.example.com/oidc/backchannel-logout" });
  const save = h("button", { type: "submit", text: "Save" });
  const form = h("form", { id: "client-edit", "aria-label": "Change the application" },
    field("Name", name), field("Redirect URIs", uris, "one a line, matched byte for byte"),
    field("Scopes", scope, "space-separated"),
    field("Back-channel logout URI", backchannel, "told of its users' sign-outs with a signed logout token; empty: none"),
    save);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const change = {};
    if (name.value !== c.client_name) change.client_name = name.value;
    const wanted = lines(uris.value);
    if (wanted.join("\n") !== c.redirect_uris.join("\n")) change.redirect_uris = wanted;
    if (scope.value.trim() !== c.scope) change.scope = scope.value.trim();
    const logoutUri = backchannel.value.trim() || null;
    if (logoutUri !== (c.backchannel_logout_uri || null)) change.backchannel_logout_uri = logoutUri;
    if (!Object.keys(change).length) return say(line, "Nothing changed.");
    await act(line, save, async () => {
      const { client } = await api("PATCH", path, change);
      Object.assign(c, client);
      showDetails(client);
      document.querySelector("h1").textContent = client.client_name;
      return "Saved.";
    });
  });

  const buttons = [];
  if (c.token_endpoint_auth_method !== "none") {
    const rotate = h("button", { type: "button", id: "rotate-client-secret", text: "New secret" });
    rotate.addEventListener("click", async () => {
      const ok = await confirmAction({ title: `A new secret for ${c.client_name}?`, confirmLabel: "New secret",
        text: "The current secret stops working at once: the application needs the new one in its settings." });
      if (!ok) return say(line, "Secret kept.");
      await act(line, rotate, async () => {
        const done = await api("PATCH", path, { rotate_secret: true });
        secret.replaceChildren("New client secret (shown once, copy it now): ", h("code", { id: "new-client-secret", text: done.client_secret }));
        return "Secret replaced.";
      });
    });
    buttons.push(rotate);
  }
  const toggle = h("button", { type: "button", id: "toggle-client", text: c.disabled ? "Enable" : "Disable" });
  toggle.addEventListener("click", () => act(line, toggle, async () => {
    const { client } = await api("PATCH", path, { disabled: !c.disabled });
    Object.assign(c, client);
    showDetails(client);
    toggle.textContent = client.disabled ? "Enable" : "Disable";
    return client.disabled ? "Disabled." : "Enabled.";
  }));
  buttons.push(toggle);
  const remove = h("button", { type: "button", id: "delete-client", class: "danger", text: "Delete" });
  remove.addEventListener("click", async () => {
    const ok = await confirmAction({ title: `Delete ${c.client_name}?`, confirmLabel: "Delete",
      text: "Its users can no longer sign in through it; its client ID and secret stop working." });
    if (!ok) return say(line, "Not deleted.");
    if (await act(line, remove, async () => {
      await api("DELETE", path);
      return "Deleted.";
    })) location.hash = "#/clients";
  });
  buttons.push(remove);

  show(c.client_name,
    h("p", {}, h("a", { href: "#/clients", text: "All applications" })),
    details,
    h("section", { "aria-labelledby": "client-edit-heading" }, h("h2", { id: "client-edit-heading", text: "Settings" }), form),
    h("section", { "aria-labelledby": "client-actions-heading" }, h("h2", { id: "client-actions-heading", text: "Secret, state, deletion" }),
      h("div", { class: "buttons" }, buttons), line, secret));
}

/// A user's page: the applications the user allowed, each with a withdrawal (the next sign-in asks again).
export async function consentsSection(user) {
  const path = `/api/admin/users/${encodeURIComponent(user.id)}/consents`;
  const box = h("div", { id: "consents" });
  const line = messageLine("consents-msg");
  async function load() {
    const { consents } = await api("GET", path);
    box.replaceChildren(consents.length
      ? h("table", { id: "consents-table" },
        h("caption", { text: `${consents.length} application${consents.length === 1 ? "" : "s"} allowed` }),
        h("thead", {}, h("tr", {}, ["Application", "Scopes", "Allowed", "Action"].map((c) => h("th", { scope: "col", text: c })))),
        h("tbody", {}, consents.map((c) => {
          const name = c.clientName ?? `${c.clientId} (removed)`;
          const withdraw = h("button", { type: "button", class: "danger", text: "Withdraw", "aria-label": `Withdraw ${name}'s access` });
          withdraw.addEventListener("click", async () => {
            const sure = await confirmAction({ title: `Withdraw ${name}'s access for ${user.email}?`, confirmLabel: "Withdraw",
              text: "The application's tokens for this user stop working, and it asks for consent again at the next sign-in." });
            if (!sure) return say(line, "Not withdrawn.");
            if (await act(line, withdraw, async () => {
              await api("DELETE", `${path}/${encodeURIComponent(c.id)}`);
              return `Withdrawn: ${name} asks again.`;
            })) load().catch((e) => say(line, e.message, true));
          });
          return h("tr", { "data-consent": c.id },
            h("td", {}, c.clientName ? h("a", { href: `#/clients/${encodeURIComponent(c.clientId)}`, text: name }) : name),
            h("td", { text: c.scopes.join(" ") }), h("td", {}, at(c.createdAt)), h("td", {}, withdraw));
        })))
      : h("p", { id: "no-consents", text: "No application allowed." }));
  }
  await load();
  return h("section", { "aria-labelledby": "consents-heading" }, h("h2", { id: "consents-heading", text: "Apps allowed" }), box, line);
}
