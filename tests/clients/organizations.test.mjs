// The real organizationClient() against a running service-auth server: create, invite (the mail read from the
// real SMTP server run.sh starts), accept, list, change roles, remove, leave, delete; and the invitations' calls on
// a second server without a mail transport. Run by ./run.sh.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createAuthClient } from "better-auth/client";
import { adminClient, organizationClient } from "better-auth/client/plugins";
import { jarFetch } from "./jar.mjs";

const BASE = process.env.SERVICE_AUTH_URL;
const PASSWORD = "correct horse battery staple";
const unique = (tag) => `${tag}-${Date.now()}-${Math.floor(Math.random() * 1e6)}@example.com`;

/** A client with its own cookie jar, as one browser profile (of the server at `base`). */
function browser(base = BASE) {
  const jar = new Map();
  const customFetchImpl = jarFetch(base, jar);
  return createAuthClient({ baseURL: base, fetchOptions: { customFetchImpl }, plugins: [organizationClient(), adminClient()] });
}

/** The id in the newest invitation mailed to `to` (waits up to 15 s). */
async function invitationFromMail(to) {
  const { readdir, readFile } = await import("node:fs/promises");
  for (let i = 0; i < 150; i++) {
    let files = [];
    try { files = await readdir(`${process.env.MAILDIR}/new`); } catch {}
    for (const f of files) {
      const text = (await readFile(`${process.env.MAILDIR}/new/${f}`, "utf8")).replace(/=\r?\n/g, "").replace(/=3D/g, "=");
      const id = text.includes(`To: ${to}`) && text.match(/accept-invitation\?id=([0-9a-f-]{36})/);
      if (id) return id[1];
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no invitation mailed to ${to}`);
}

async function signedUp(tag, base = BASE) {
  const client = browser(base);
  const email = unique(tag);
  const up = await client.signUp.email({ name: tag, email, password: PASSWORD });
  assert.equal(up.error, null);
  return { client, email, id: up.data.user.id };
}

test("organizationClient: create, invite by mail, accept, list, change roles, remove, leave, delete", async () => {
  const owner = await signedUp("owner");
  const slug = `team-${Date.now()}`;
  assert.equal((await owner.client.organization.checkSlug({ slug })).data.status, true);
  const created = await owner.client.organization.create({ name: "Team", slug, metadata: { plan: "free" } });
  assert.equal(created.error, null);
  const org = created.data;
  assert.equal(org.slug, slug);
  assert.deepEqual(org.metadata, { plan: "free" });
  assert.equal(org.members[0].role, "owner");
  assert.equal((await owner.client.getSession()).data.session.activeOrganizationId, org.id);
  const taken = await owner.client.organization.checkSlug({ slug });
  assert.equal(taken.error.code, "ORGANIZATION_SLUG_ALREADY_TAKEN");

  // Invitations, read from the real SMTP server's Maildir.
  const bob = await signedUp("bob");
  const carol = await signedUp("carol");
  const invited = await owner.client.organization.inviteMember({ email: bob.email, role: "admin" });
  assert.equal(invited.error, null);
  assert.equal(invited.data.status, "pending");
  const bobs = await invitationFromMail(bob.email);
  assert.equal(bobs, invited.data.id);
  const shown = await bob.client.organization.getInvitation({ query: { id: bobs } });
  assert.equal(shown.data.organizationSlug, slug);
  const accepted = await bob.client.organization.acceptInvitation({ invitationId: bobs });
  assert.equal(accepted.error, null);
  assert.equal(accepted.data.member.role, "admin");
  assert.equal((await bob.client.getSession()).data.session.activeOrganizationId, org.id);
  assert.equal((await bob.client.organization.getActiveMemberRole()).data.role, "admin");

  await bob.client.organization.inviteMember({ email: carol.email, role: "member", organizationId: org.id });
  const carols = await invitationFromMail(carol.email);
  assert.equal((await carol.client.organization.acceptInvitation({ invitationId: carols })).error, null);

  // Listing.
  const listed = await owner.client.organization.list();
  assert.deepEqual(listed.data.map((o) => o.id), [org.id]);
  const members = await owner.client.organization.listMembers({ query: { organizationId: org.id, limit: 2 } });
  assert.equal(members.data.total, 3);
  assert.equal(members.data.members.length, 2);
  const full = await owner.client.organization.getFullOrganization({ query: { organizationId: org.id } });
  assert.equal(full.data.members.length, 3);
  assert.equal(full.data.invitations.length, 2);
  const invitations = await owner.client.organization.listInvitations({ query: { organizationId: org.id } });
  assert.deepEqual(invitations.data.map((i) => i.status), ["accepted", "accepted"]);

  // Roles: the admin cannot make an owner; the owner can.
  const carolMember = full.data.members.find((m) => m.userId === carol.id);
  const refused = await bob.client.organization.updateMemberRole({ memberId: carolMember.id, role: "owner" });
  assert.equal(refused.error.status, 403);
  assert.equal(refused.error.code, "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_MEMBER");
  const promoted = await owner.client.organization.updateMemberRole({ memberId: carolMember.id, role: "admin" });
  assert.equal(promoted.data.role, "admin");
  const can = await carol.client.organization.hasPermission({ permissions: { member: ["delete"] } });
  assert.equal(can.data.success, true);

  // Remove, leave, and the last owner.
  const removed = await bob.client.organization.removeMember({ memberIdOrEmail: carol.email });
  assert.equal(removed.data.member.userId, carol.id);
  assert.deepEqual((await carol.client.organization.list()).data, []);
  const lastOwner = await owner.client.organization.leave({ organizationId: org.id });
  assert.equal(lastOwner.error.code, "YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER");
  assert.equal((await bob.client.organization.leave({ organizationId: org.id })).error, null);
  assert.equal((await bob.client.getSession()).data.session.activeOrganizationId, null);

  // Active organization and deletion.
  assert.equal((await owner.client.organization.setActive({ organizationId: null })).error, null);
  assert.equal((await owner.client.getSession()).data.session.activeOrganizationId, null);
  assert.equal((await owner.client.organization.setActive({ organizationSlug: slug })).data.id, org.id);
  const deleted = await owner.client.organization.delete({ organizationId: org.id });
  assert.equal(deleted.error, null);
  assert.deepEqual((await owner.client.organization.list()).data, []);
  assert.equal((await owner.client.getSession()).data.session.activeOrganizationId, null);
});

// Issue #44, item 8: better-auth without `sendInvitationEmail` makes the invitation and sends nothing; the
// application shows it in the app. The same calls on a server without a mail transport (they answered 400
// EMAIL_NOT_CONFIGURED, and every call after an invitation failed with them).
test("organizationClient without a mail transport: invite, resend, list, accept, reject, cancel", async () => {
  const BARE = process.env.SERVICE_AUTH_URL_WITHOUT_MAIL;
  assert.ok(BARE, "SERVICE_AUTH_URL_WITHOUT_MAIL is set by run.sh");
  const owner = await signedUp("bare-owner", BARE);
  const created = await owner.client.organization.create({ name: "No mail", slug: `no-mail-${Date.now()}` });
  assert.equal(created.error, null);
  const org = created.data;
  const bob = await signedUp("bare-bob", BARE);
  const carol = await signedUp("bare-carol", BARE);
  const dave = await signedUp("bare-dave", BARE);
  // No mail proves an address here: an administrator does (list-user-invitations wants a proven one).
  const admin = browser(BARE);
  assert.equal((await admin.signIn.email({ email: process.env.ADMIN_EMAIL, password: process.env.ADMIN_PASSWORD })).error, null);
  for (const u of [bob, carol]) {
    assert.equal((await admin.admin.updateUser({ userId: u.id, data: { emailVerified: true } })).error, null);
  }

  const invited = await owner.client.organization.inviteMember({ email: bob.email, role: "admin" });
  assert.equal(invited.error, null);
  assert.equal(invited.data.status, "pending");
  assert.equal(invited.data.email, bob.email);
  const resent = await owner.client.organization.inviteMember({ email: bob.email, role: "admin", resend: true });
  assert.equal(resent.error, null);
  assert.equal(resent.data.id, invited.data.id);
  const toCarol = await owner.client.organization.inviteMember({ email: carol.email, role: "member" });
  assert.equal(toCarol.error, null);
  const toDave = await owner.client.organization.inviteMember({ email: dave.email, role: "member" });
  assert.equal(toDave.error, null);

  const pending = await owner.client.organization.listInvitations({ query: { organizationId: org.id } });
  assert.deepEqual(pending.data.map((i) => i.status), ["pending", "pending", "pending"]);
  const bobs = await bob.client.organization.listUserInvitations();
  assert.equal(bobs.error, null);
  assert.deepEqual(bobs.data.map((i) => i.id), [invited.data.id]);
  const shown = await bob.client.organization.getInvitation({ query: { id: invited.data.id } });
  assert.equal(shown.data.organizationId, org.id);
  const accepted = await bob.client.organization.acceptInvitation({ invitationId: invited.data.id });
  assert.equal(accepted.error, null);
  assert.equal(accepted.data.member.role, "admin");
  const carols = await carol.client.organization.listUserInvitations();
  assert.deepEqual(carols.data.map((i) => i.id), [toCarol.data.id]);
  assert.equal((await carol.client.organization.rejectInvitation({ invitationId: toCarol.data.id })).error, null);
  assert.equal((await bob.client.organization.cancelInvitation({ invitationId: toDave.data.id })).error, null);

  const full = await owner.client.organization.getFullOrganization({ query: { organizationId: org.id } });
  assert.equal(full.data.members.length, 2);
  const statuses = full.data.invitations.map((i) => i.status).sort();
  assert.deepEqual(statuses, ["accepted", "canceled", "rejected"]);
});
