// Delegated administration: an organization's owners and admins manage its members and invitations here, without
// being administrators of the service. A global administrator gets the same sections on each organization's page.
//
// - Every call is one of the organization plugin's (/api/auth/organization/*), so the server's permission checks,
//   the ones its HTTP tests prove, decide what this page may do: the page only leaves out what would be refused.
// - Which organizations an account administers is asked each time (list, then the account's role in each), never
//   remembered: a role taken away a minute ago is gone on the next page.
// - Addresses: #/my-organizations (those the account owns or administers) and #/my-organizations/<id>.

import { h, field, messageLine, say, show, at, api, act, ApiError, confirmAction } from "./app.js";
import { ssoSections } from "./sso.js";

/// Members shown a page (list-members' limit; the server pages with offset and says the total).
const PAGE = 25;

const ROLES = ["member", "admin", "owner"];

/// How many teams an invitation puts its invitee in (the plugin's `teamId`: ids joined by commas, or null).
function teamCount(invitation) {
  const n = invitation.teamId ? invitation.teamId.split(",").length : 0;
  return n ? `${n} team${n === 1 ? "" : "s"}` : "none";
}

/// Whether a role string of the plugin ("admin", "owner", "admin,member") may manage members and invitations.
function manages(role) {
  return role.split(",").some((r) => r === "owner" || r === "admin");
}

function isOwner(role) {
  return role.split(",").includes("owner");
}

const base = "/api/auth/organization";
const q = (params) => new URLSearchParams(params).toString();

/// The organizations this account owns or administers, each with its role: the plugin's list, then the role in
/// each (better-auth has no call that gives both).
async function administered() {
  const all = await api("GET", `${base}/list`);
  const roles = await Promise.all(all.map((o) =>
    api("GET", `${base}/get-active-member-role?${q({ organizationId: o.id })}`).then((r) => r.role, () => "")));
  return all.map((o, i) => ({ ...o, role: roles[i] })).filter((o) => manages(o.role));
}

/// Called by the console's start when /api/admin/status answered 403. Renders the page the address names and
/// returns true when the account owns or administers an organization; false (nothing rendered) otherwise.
export async function orgAdminStart(email) {
  let mine;
  try {
    mine = await administered();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return false;
    show("Something went wrong", h("p", { class: "msg error", role: "alert", text: e.message }));
    return true;
  }
  if (!mine.length) return false;
  document.getElementById("who").textContent = email ? `Signed in as ${email}` : "";
  const parts = location.hash.slice(1).split("?")[0].split("/").filter(Boolean);
  if (parts[0] !== "my-organizations") {
    location.hash = "#/my-organizations"; // the hashchange renders it
    return true;
  }
  // Busy while rendering, as the console's routing marks it, also when the start renders directly (a reload).
  const main = document.getElementById("main");
  const routed = main.hasAttribute("aria-busy");
  main.setAttribute("aria-busy", "true");
  try {
    if (parts[1]) await organizationPage(parts[1], mine);
    else listPage(mine);
  } catch (e) {
    show("Something went wrong", h("p", { class: "msg error", role: "alert", text: e.message }));
  } finally {
    if (!routed) {
      main.removeAttribute("aria-busy");
      main.dataset.shown = location.hash;
    }
  }
  return true;
}

function listPage(mine) {
  show("Your organizations",
    h("p", { text: "The organizations you own or administer. You manage their members and invitations here." }),
    h("table", { id: "my-orgs-table" },
      h("caption", { text: `${mine.length} organization${mine.length === 1 ? "" : "s"}` }),
      h("thead", {}, h("tr", {}, ["Name", "Slug", "Your role"].map((c) => h("th", { scope: "col", text: c })))),
      h("tbody", {}, mine.map((o) => h("tr", {},
        h("td", {}, h("a", { href: `#/my-organizations/${encodeURIComponent(o.id)}`, text: o.name })),
        h("td", { text: o.slug }), h("td", { text: o.role }))))));
}

async function organizationPage(id, mine) {
  const org = mine.find((o) => o.id === id);
  const back = h("p", {}, h("a", { href: "#/my-organizations", text: "Your organizations" }));
  if (!org) {
    // Not one of this account's: the server is asked anyway, and its refusal is what the page shows.
    let refusal = "This organization is not one you own or administer.";
    try {
      await api("GET", `${base}/list-members?${q({ organizationId: id, limit: 1 })}`);
    } catch (e) {
      refusal = `${refusal} The server says: ${e.message}`;
    }
    show("Organization not available", h("p", { id: "org-refused", class: "msg error", role: "alert", text: refusal }), back);
    return;
  }
  show(org.name, back, h("p", { text: `Slug ${org.slug}; your role: ${org.role}.` }));
  // Who is signed in, for the own row's "(you)": this page is reached without the administrators' status call.
  const me = await api("GET", "/api/auth/get-session").then((s) => s?.user?.id, () => undefined);
  // Its single sign-on too (sso.js): an owner changes the policy and manages SCIM tokens; an admin sees them.
  const [members, sso] = await Promise.all([memberSections(org, org.role, me),
    ssoSections(org, { administrator: false, owner: isOwner(org.role) })]);
  document.getElementById("main").append(...members, ...sso);
}

/// The members (paged, with roles to change and a remove button), an invitation form and the pending
/// invitations of `org`, for a caller whose role there is `role` (a global administrator acts as an owner) and
/// whose user id is `me` (their own row says so).
export async function memberSections(org, role, me) {
  const id = org.id;
  const owner = isOwner(role);
  // Only an owner grants or takes `owner` (the server refuses the rest; the page does not offer it).
  const grantable = owner ? ROLES : ROLES.filter((r) => r !== "owner");

  // --- members ----------------------------------------------------------------------------------------------
  const membersBox = h("div", { id: "org-members" });
  const membersLine = messageLine("org-members-msg");
  let offset = 0;
  async function loadMembers() {
    const { members, total } = await api("GET", `${base}/list-members?${q({ organizationId: id, limit: PAGE, offset })}`);
    if (!members.length && offset > 0) {
      offset = Math.max(0, offset - PAGE);
      return loadMembers();
    }
    const rows = members.map((m) => {
      const email = m.user?.email ?? m.userId;
      const select = h("select", { name: "role", "aria-label": `Role of ${email}` },
        (grantable.includes(m.role) ? grantable : [m.role, ...grantable]).map((r) => h("option", { value: r, text: r, selected: r === m.role })));
      // An owner's row is for owners to change; others see the role only.
      const locked = isOwner(m.role) && !owner;
      const save = h("button", { type: "button", text: "Change role", "aria-label": `Change role of ${email}` });
      save.addEventListener("click", async () => {
        if (select.value === m.role) return say(membersLine, "Role unchanged.");
        if (await act(membersLine, save, async () => {
          await api("POST", `${base}/update-member-role`, { memberId: m.id, role: select.value, organizationId: id });
          return `${email} is now ${select.value}.`;
        })) {
          const said = membersLine.textContent;
          await loadMembers().catch((e) => say(membersLine, e.message, true));
          say(membersLine, said);
        }
      });
      const remove = h("button", { type: "button", class: "danger", text: "Remove", "aria-label": `Remove ${email}` });
      remove.addEventListener("click", async () => {
        const sure = await confirmAction({ title: `Remove ${email} from ${org.name}?`, confirmLabel: "Remove",
          text: "Their membership ends now; their account stays. They can be invited again." });
        if (!sure) return say(membersLine, "Not removed.");
        if (await act(membersLine, remove, async () => {
          await api("POST", `${base}/remove-member`, { memberIdOrEmail: m.id, organizationId: id });
          return `${email} removed.`;
        })) {
          const said = membersLine.textContent;
          await loadMembers().catch((e) => say(membersLine, e.message, true));
          say(membersLine, said);
        }
      });
      return h("tr", { "data-member": m.id },
        h("td", { text: email }), h("td", { text: `${m.user?.name ?? ""}${m.userId === me ? " (you)" : ""}` }),
        h("td", {}, locked ? m.role : select), h("td", {}, at(m.createdAt)),
        h("td", {}, locked ? "—" : h("div", { class: "buttons" }, save, remove)));
    });
    const shown = members.length ? `${offset + 1}–${offset + members.length} of ${total}` : "none";
    const previous = h("button", { type: "button", id: "members-previous", text: "Previous", disabled: offset === 0 });
    const next = h("button", { type: "button", id: "members-next", text: "Next", disabled: offset + members.length >= total });
    previous.addEventListener("click", () => { offset = Math.max(0, offset - PAGE); loadMembers().catch((e) => say(membersLine, e.message, true)); });
    next.addEventListener("click", () => { offset += PAGE; loadMembers().catch((e) => say(membersLine, e.message, true)); });
    membersBox.replaceChildren(...[
      h("table", { id: "org-members-table" },
        h("caption", { text: `${total} member${total === 1 ? "" : "s"} (${shown})` }),
        h("thead", {}, h("tr", {}, ["E-mail", "Name", "Role", "Joined", "Action"].map((c) => h("th", { scope: "col", text: c })))),
        h("tbody", {}, rows)),
      total > PAGE ? h("div", { class: "pager" }, previous, next) : null].filter(Boolean));
  }

  // --- invitations ------------------------------------------------------------------------------------------
  const invitationsBox = h("div", { id: "org-invitations" });
  const invitationsLine = messageLine("org-invitations-msg");
  async function loadInvitations() {
    const all = await api("GET", `${base}/list-invitations?${q({ organizationId: id })}`);
    const now = Date.now();
    const pending = all.filter((i) => i.status === "pending" && new Date(i.expiresAt).getTime() > now);
    if (!pending.length) {
      invitationsBox.replaceChildren(h("p", { id: "no-invitations", text: "No pending invitation." }));
      return;
    }
    invitationsBox.replaceChildren(h("table", { id: "invitations-table" },
      h("caption", { text: `${pending.length} pending invitation${pending.length === 1 ? "" : "s"}` }),
      h("thead", {}, h("tr", {}, ["E-mail", "Role", "Teams", "Expires", "Action"].map((c) => h("th", { scope: "col", text: c })))),
      h("tbody", {}, pending.map((i) => {
        const cancel = h("button", { type: "button", class: "danger", text: "Cancel", "aria-label": `Cancel the invitation of ${i.email}` });
        cancel.addEventListener("click", async () => {
          const sure = await confirmAction({ title: `Cancel the invitation of ${i.email}?`, confirmLabel: "Cancel invitation",
            text: "The mailed link stops working." });
          if (!sure) return say(invitationsLine, "Invitation kept.");
          if (await act(invitationsLine, cancel, async () => {
            await api("POST", `${base}/cancel-invitation`, { invitationId: i.id });
            return `Invitation of ${i.email} canceled.`;
          })) await loadInvitations().catch((e) => say(invitationsLine, e.message, true));
        });
        return h("tr", { "data-invitation": i.id },
          h("td", { text: i.email }), h("td", { text: i.role }), h("td", { text: teamCount(i) }), h("td", {}, at(i.expiresAt)),
          h("td", {}, cancel));
      }))));
  }

  const email = h("input", { type: "email", name: "email", autocomplete: "off", required: true });
  const inviteRole = h("select", { name: "role" }, grantable.map((r) => h("option", { value: r, text: r })));
  const inviteButton = h("button", { type: "submit", text: "Send invitation" });
  const inviteLine = messageLine("invite-msg");
  const inviteForm = h("form", { id: "invite-form", "aria-labelledby": "invite-heading" },
    field("E-mail", email, "They receive a link by mail, valid 48 hours"), field("Role", inviteRole), inviteButton, inviteLine);
  inviteForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (await act(inviteLine, inviteButton, async () => {
      const sent = await api("POST", `${base}/invite-member`, { email: email.value, role: inviteRole.value, organizationId: id });
      email.value = "";
      return `Invitation sent to ${sent.email} as ${sent.role}.`;
    })) await loadInvitations().catch((e) => say(invitationsLine, e.message, true));
  });

  await loadMembers();
  await loadInvitations();
  const sections = [
    h("section", { "aria-labelledby": "org-members-heading" },
      h("h2", { id: "org-members-heading", text: "Members and roles" }), membersBox, membersLine),
    h("section", { "aria-labelledby": "invite-heading" }, h("h2", { id: "invite-heading", text: "Invite someone" }), inviteForm),
    h("section", { "aria-labelledby": "invitations-heading" },
      h("h2", { id: "invitations-heading", text: "Pending invitations" }), invitationsBox, invitationsLine),
  ];
  // --- teams ------------------------------------------------------------------------------------------------
  // Listed only where the server serves them ([organizations] teams): get-full-organization then carries `teams`
  // (one call that answers 200 either way, rather than list-teams' 400 when they are off).
  const full = await api("GET", `${base}/get-full-organization?${q({ organizationId: id, membersLimit: 1 })}`).catch(() => null);
  if (Array.isArray(full?.teams)) {
    const teams = full.teams;
    const list = teams.length
      ? h("table", { id: "teams-table" },
        h("caption", { text: `${teams.length} team${teams.length === 1 ? "" : "s"}` }),
        h("thead", {}, h("tr", {}, ["Name", "Created"].map((c) => h("th", { scope: "col", text: c })))),
        h("tbody", {}, teams.map((t) => h("tr", {},
          h("td", { text: t.name }), h("td", { text: String(t.createdAt).slice(0, 10) })))))
      : h("p", { id: "no-teams", text: "No team." });
    sections.push(h("section", { "aria-labelledby": "teams-heading" }, h("h2", { id: "teams-heading", text: "Teams" }), list));
  }
  return sections;
}
