// An organization's single sign-on and provisioning, on its page in the console (#/organizations/<id>): its SSO
// providers with their domains (an administrator confirms a domain there), the require-SSO policy, and its SCIM
// tokens (made, shown once, revoked). A client of the same API as everyone else: the SSO plugin's provider list,
// /api/admin/sso/providers/{id}/verify-domain, /api/admin/organizations/{id}/sso-policy and
// /api/admin/organizations/{id}/scim-tokens; each change is audited by the server, not by this page.
//
// - A new SCIM token is in the page once, in the answer that made it, with a button that copies it; the script
//   keeps no copy, and the list (and a reload) never shows one: the server stores only its hash.
// - Turning require-SSO on is confirmed first: the members of the verified domains stop signing in by password.

import { h, field, messageLine, say, at, api, act, confirmAction } from "./app.js";

const SCOPES = [
  ["scim.users.read", "Read users"],
  ["scim.users.write", "Create, change and remove users"],
  ["scim.groups.read", "Read groups"],
  ["scim.groups.write", "Create, change and remove groups"],
];

const path = (id) => `/api/admin/organizations/${encodeURIComponent(id)}`;

function table(id, caption, columns, rows) {
  return h("table", { id },
    h("caption", { text: caption }),
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col", text: c })))),
    h("tbody", {}, rows));
}

/// The end of the day `date` (yyyy-mm-dd, the browser's zone) as an RFC 3339 instant, or undefined.
function endOfDay(date) {
  if (!date) return undefined;
  const [y, m, d] = date.split("-").map(Number);
  return new Date(y, m - 1, d, 23, 59, 59).toISOString();
}

/// The sections of `org`'s page: providers and domains, the policy, the SCIM tokens. `administrator`: a service
/// administrator (who alone confirms a domain without DNS); `owner`: may change the policy and manage SCIM tokens
/// (an owner of the organization, or a service administrator). The page only leaves out what the server would
/// refuse; the server decides.
export async function ssoSections(org, { administrator = true, owner = true } = {}) {
  const id = org.id;

  // --- the policy (first: the providers' section refreshes it when a domain is confirmed) ---------------------
  const policyLine = messageLine("sso-policy-msg");
  const covered = h("p", { id: "sso-policy-domains" });
  const toggle = h("input", { type: "checkbox", id: "require-sso", role: "switch", name: "requireSso", disabled: !owner,
    "aria-describedby": owner ? undefined : "sso-policy-owners" });
  let policy;
  function showPolicy(p) {
    policy = p;
    toggle.checked = p.requireSso;
    covered.textContent = p.domains.length
      ? `Covers the verified domains ${p.domains.join(", ")} and their subdomains.`
      : "No domain of this organization is verified yet, so the policy covers no address until one is.";
  }
  async function loadPolicy() {
    showPolicy(await api("GET", `${path(id)}/sso-policy`));
  }
  toggle.addEventListener("change", async () => {
    const wanted = toggle.checked;
    toggle.checked = policy.requireSso; // the page shows the server's state until it answers
    if (wanted) {
      const sure = await confirmAction({ title: `Require single sign-on for ${org.name}?`, confirmLabel: "Require SSO",
        text: "Addresses of its verified domains then sign in only through its providers: passwords, sign-up and the mailed ways stop working for them. Administrators of this service keep their password." });
      if (!sure) return say(policyLine, "Policy unchanged.");
    }
    await act(policyLine, toggle, async () => {
      showPolicy(await api("PUT", `${path(id)}/sso-policy`, { requireSso: wanted }));
      return wanted ? "Single sign-on is now required for the verified domains." : "Single sign-on is no longer required.";
    });
  });

  // --- providers and their domains ------------------------------------------------------------------------
  const providersBox = h("div", { id: "sso-providers" });
  const providersLine = messageLine("sso-providers-msg");
  async function loadProviders() {
    // The plugin's list: an administrator of the service gets every organization's providers.
    const { providers } = await api("GET", "/api/auth/sso/providers");
    const mine = providers.filter((p) => p.organizationId === id);
    if (!mine.length) {
      providersBox.replaceChildren(h("p", { id: "no-sso-providers",
        text: "No single sign-on provider. An owner or admin of the organization registers one with the SSO client (sso/register)." }));
      return;
    }
    providersBox.replaceChildren(table("sso-providers-table",
      `${mine.length} provider${mine.length === 1 ? "" : "s"}`,
      ["Provider", "Type", "Issuer", "Domains", "Verified", "Action"],
      mine.map((p) => {
        const confirm = h("button", { type: "button", text: "Confirm domain", "aria-label": `Confirm domain of ${p.providerId}` });
        confirm.addEventListener("click", async () => {
          const sure = await confirmAction({ title: `Confirm ${p.domain} for ${org.name}?`, confirmLabel: "Confirm domain",
            text: "Use this when the organization has shown you it holds the domain (no DNS record is checked). Its addresses may then sign in and link accounts through this provider. The confirmation is audited." });
          if (!sure) return say(providersLine, "Domain not confirmed.");
          if (await act(providersLine, confirm, async () => {
            await api("POST", `/api/admin/sso/providers/${encodeURIComponent(p.providerId)}/verify-domain`);
            return `${p.domain} verified for ${p.providerId}.`;
          })) {
            const said = providersLine.textContent;
            await Promise.all([loadProviders(), loadPolicy()]).catch((e) => say(providersLine, e.message, true));
            say(providersLine, said);
          }
        });
        return h("tr", { "data-provider": p.providerId },
          h("td", {}, h("code", { text: p.providerId })),
          h("td", { text: p.type === "saml" ? "SAML 2.0" : "OpenID Connect" }),
          h("td", { class: "detail" }, h("code", { text: p.issuer })),
          h("td", { class: "detail", text: p.domain.split(",").join(", ") }),
          h("td", { text: p.domainVerified ? "Verified" : "Not verified" }),
          h("td", {}, p.domainVerified || !administrator ? "—" : confirm));
      })),
      ...(!administrator && mine.some((p) => !p.domainVerified) ? [h("p", { class: "note", id: "sso-verify-hint",
        text: "A domain is verified by a DNS TXT record (sso/request-domain-verification, then sso/verify-domain), or confirmed by an administrator of this service." })] : []));
  }

  // --- SCIM tokens --------------------------------------------------------------------------------------------
  const tokensBox = h("div", { id: "scim-tokens" });
  const tokensLine = messageLine("scim-tokens-msg");
  const shownOnce = h("div", { id: "new-scim-token", class: "secret" });
  async function loadTokens() {
    if (!owner) return;
    const { tokens } = await api("GET", `${path(id)}/scim-tokens`);
    if (!tokens.length) {
      tokensBox.replaceChildren(h("p", { id: "no-scim-tokens", text: "No SCIM token." }));
      return;
    }
    tokensBox.replaceChildren(table("scim-tokens-table",
      `${tokens.length} token${tokens.length === 1 ? "" : "s"} (at most 5 at once)`,
      ["Id", "Scopes", "Created", "Expires", "Action"],
      tokens.map((t) => {
        const revoke = h("button", { type: "button", class: "danger", text: "Revoke", "aria-label": `Revoke the token ${t.id}` });
        revoke.addEventListener("click", async () => {
          const sure = await confirmAction({ title: "Revoke this SCIM token?", confirmLabel: "Revoke",
            text: "The directory that uses it is refused from now on, on every node." });
          if (!sure) return say(tokensLine, "Token kept.");
          if (await act(tokensLine, revoke, async () => {
            await api("DELETE", `${path(id)}/scim-tokens/${encodeURIComponent(t.id)}`);
            return "Token revoked.";
          })) {
            const said = tokensLine.textContent;
            await loadTokens().catch((e) => say(tokensLine, e.message, true));
            say(tokensLine, said);
          }
        });
        return h("tr", { "data-token": t.id },
          h("td", {}, h("code", { text: t.id })),
          h("td", { class: "detail", text: t.scopes.join(", ") }),
          h("td", {}, at(t.createdAt)),
          h("td", {}, t.expiresAt ? at(t.expiresAt) : "Never"),
          h("td", {}, revoke));
      })));
  }

  const expires = h("input", { type: "date", name: "expiresAt" });
  const scopeBoxes = SCOPES.map(([name, label]) => {
    const box = h("input", { type: "checkbox", name: "scopes", value: name, id: `scope-${name.replaceAll(".", "-")}`, checked: true });
    return h("div", { class: "field inline" }, box, h("label", { for: box.id, text: `${label} (${name})` }));
  });
  const createButton = h("button", { type: "submit", text: "Create token" });
  const createForm = h("form", { id: "scim-token-form", "aria-labelledby": "scim-heading" },
    h("fieldset", { class: "scopes" }, h("legend", { text: "Scopes" }), scopeBoxes),
    field("Expires", expires, "Optional: the end of that day, in your time zone; empty: never"),
    createButton);
  createForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    shownOnce.replaceChildren();
    const scopes = [...createForm.querySelectorAll("input[name=scopes]:checked")].map((b) => b.value);
    if (!scopes.length) return say(tokensLine, "Choose at least one scope.", true);
    let made;
    if (!(await act(tokensLine, createButton, async () => {
      made = await api("POST", `${path(id)}/scim-tokens`, { scopes, expiresAt: endOfDay(expires.value) });
      return "Token created. Copy it now: it is not shown again.";
    }))) return;
    const code = h("code", { id: "new-scim-token-value", text: made.token });
    const copyLine = messageLine("scim-copy-msg");
    const copy = h("button", { type: "button", id: "copy-scim-token", text: "Copy token" });
    copy.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(made.token);
        say(copyLine, "Copied to the clipboard.");
      } catch {
        // No clipboard (an address that is not https, a refused permission): select it for the keyboard instead.
        getSelection().selectAllChildren(code);
        say(copyLine, "The browser refused to copy: the token is selected, press Ctrl+C (⌘C).", true);
      }
    });
    shownOnce.replaceChildren(
      h("p", {}, "SCIM token (shown once; the directory sends it as its bearer token): ", code),
      h("div", { class: "buttons" }, copy), copyLine);
    expires.value = "";
    await loadTokens().catch((e) => say(tokensLine, e.message, true));
  });

  await Promise.all([loadProviders(), loadPolicy(), loadTokens()]);
  return [
    h("section", { "aria-labelledby": "sso-providers-heading" },
      h("h2", { id: "sso-providers-heading", text: "Single sign-on providers" }), providersBox, providersLine),
    h("section", { "aria-labelledby": "sso-policy-heading" },
      h("h2", { id: "sso-policy-heading", text: "Require single sign-on" }),
      h("div", { class: "field inline" }, toggle,
        h("label", { for: "require-sso", text: "Members of the verified domains sign in only through single sign-on" })),
      owner ? null : h("p", { class: "note", id: "sso-policy-owners", text: "Only an owner of the organization changes it." }),
      covered, policyLine),
    h("section", { "aria-labelledby": "scim-heading" },
      h("h2", { id: "scim-heading", text: "SCIM tokens" }),
      h("p", { class: "note", text: "A directory (Okta, Entra ID) provisions this organization's accounts at /api/auth/scim/v2 with one of these tokens. The server keeps only a hash of each, and does not record when one was last used." }),
      ...(owner ? [tokensBox, createForm, shownOnce, tokensLine]
        : [h("p", { id: "scim-owners", text: "Only an owner of the organization makes, lists and revokes its SCIM tokens." })])),
  ];
}
