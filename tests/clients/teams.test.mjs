// The real organizationClient({teams: {enabled: true}}) against a running service-auth server with
// `[organizations] teams = true` (run.sh): the default team, create, list, update, members in and out, the user's
// teams, the session's active team, remove, and the plugin's codes as the client hands them over. Run by ./run.sh.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createAuthClient } from "better-auth/client";
import { organizationClient } from "better-auth/client/plugins";
import { jarFetch } from "./jar.mjs";

const BASE = process.env.SERVICE_AUTH_URL;
const PASSWORD = "correct horse battery staple";
const unique = (tag) => `${tag}-${Date.now()}-${Math.floor(Math.random() * 1e6)}@example.com`;

function browser() {
  const customFetchImpl = jarFetch(BASE, new Map());
  return createAuthClient({
    baseURL: BASE,
    fetchOptions: { customFetchImpl },
    plugins: [organizationClient({ teams: { enabled: true } })],
  });
}

async function signedUp(tag) {
  const client = browser();
  const up = await client.signUp.email({ name: tag, email: unique(tag), password: PASSWORD });
  assert.equal(up.error, null);
  return { client, id: up.data.user.id };
}

test("organizationClient with teams: default team, create, list, update, members, user's teams, remove", async () => {
  const owner = await signedUp("team-owner");
  const created = await owner.client.organization.create({ name: "Ward Org", slug: `ward-${Date.now()}` });
  assert.equal(created.error, null);
  const org = created.data.id;

  const listed = await owner.client.organization.listTeams({ query: { organizationId: org } });
  assert.equal(listed.error, null);
  assert.deepEqual(listed.data.map((t) => t.name), ["Ward Org"], "the default team");
  assert.equal(listed.data[0].updatedAt, null);
  const full = await owner.client.organization.getFullOrganization({ query: { organizationId: org } });
  assert.equal(full.data.teams[0].id, listed.data[0].id);

  const team = await owner.client.organization.createTeam({ name: "Nights", organizationId: org });
  assert.equal(team.error, null);
  assert.deepEqual(Object.keys(team.data).sort(), ["createdAt", "id", "name", "organizationId", "updatedAt"]);
  const updated = await owner.client.organization.updateTeam({ teamId: team.data.id, data: { name: "Night shift", organizationId: org } });
  assert.equal(updated.error, null);
  assert.equal(updated.data.name, "Night shift");

  const added = await owner.client.organization.addTeamMember({ teamId: team.data.id, userId: owner.id, organizationId: org });
  assert.equal(added.error, null);
  assert.deepEqual(Object.keys(added.data).sort(), ["createdAt", "id", "teamId", "userId"]);
  const members = await owner.client.organization.listTeamMembers({ query: { teamId: team.data.id } });
  assert.deepEqual(members.data.map((m) => m.userId), [owner.id]);
  const mine = await owner.client.organization.listUserTeams({ query: { organizationId: org } });
  assert.equal(mine.error, null);
  assert.deepEqual(mine.data.map((t) => t.name).sort(), ["Night shift", "Ward Org"]);

  const out = await owner.client.organization.removeTeamMember({ teamId: team.data.id, userId: owner.id, organizationId: org });
  assert.deepEqual(out.data, { message: "Team member removed successfully." });
  const again = await owner.client.organization.removeTeamMember({ teamId: team.data.id, userId: owner.id, organizationId: org });
  assert.equal(again.error.status, 400);
  assert.equal(again.error.code, "USER_IS_NOT_A_MEMBER_OF_THE_TEAM");

  // The active team: create made the default team the session's; setActiveTeam moves it and clears it.
  const defaultTeam = listed.data[0].id;
  let session = await owner.client.getSession();
  assert.equal(session.data.session.activeTeamId, defaultTeam);
  const active = await owner.client.organization.setActiveTeam({ teamId: team.data.id });
  assert.equal(active.error.status, 403, "not in the team any more");
  assert.equal(active.error.code, "USER_IS_NOT_A_MEMBER_OF_THE_TEAM");
  await owner.client.organization.addTeamMember({ teamId: team.data.id, userId: owner.id, organizationId: org });
  const moved = await owner.client.organization.setActiveTeam({ teamId: team.data.id });
  assert.equal(moved.error, null);
  assert.equal(moved.data.id, team.data.id);
  session = await owner.client.getSession();
  assert.equal(session.data.session.activeTeamId, team.data.id);
  const activeMembers = await owner.client.organization.listTeamMembers();
  assert.deepEqual(activeMembers.data.map((m) => m.userId), [owner.id], "the active team's members by default");
  const own = await owner.client.organization.removeTeam({ teamId: team.data.id, organizationId: org });
  assert.equal(own.error.code, "YOU_ARE_NOT_ALLOWED_TO_DELETE_THIS_TEAM", "not the session's own active team");
  const cleared = await owner.client.organization.setActiveTeam({ teamId: null });
  assert.equal(cleared.error, null);
  assert.equal(cleared.data, null);
  session = await owner.client.getSession();
  assert.equal(session.data.session.activeTeamId ?? null, null);

  const removed = await owner.client.organization.removeTeam({ teamId: team.data.id, organizationId: org });
  assert.deepEqual(removed.data, { message: "Team removed successfully." });
  const last = await owner.client.organization.removeTeam({ teamId: defaultTeam, organizationId: org });
  assert.equal(last.error.code, "UNABLE_TO_REMOVE_LAST_TEAM");

  // A stranger: the plugin's codes reach the client as they are.
  const stranger = await signedUp("team-stranger");
  const refused = await stranger.client.organization.createTeam({ name: "X", organizationId: org });
  assert.equal(refused.error.status, 403);
  assert.equal(refused.error.code, "YOU_ARE_NOT_ALLOWED_TO_INVITE_USERS_TO_THIS_ORGANIZATION");
  const hidden = await stranger.client.organization.listTeams({ query: { organizationId: org } });
  assert.equal(hidden.error.code, "YOU_ARE_NOT_ALLOWED_TO_ACCESS_THIS_ORGANIZATION");
});

test("organizationClient with teams: inviteMember with teamId, acceptInvitation, listTeamMembers shows the invitee", async () => {
  const owner = await signedUp("teaminv-owner");
  const created = await owner.client.organization.create({ name: "Invite Org", slug: `teaminv-${Date.now()}` });
  assert.equal(created.error, null);
  const org = created.data.id;
  const team = await owner.client.organization.createTeam({ name: "Days", organizationId: org });
  const other = await owner.client.organization.createTeam({ name: "Nights", organizationId: org });
  await owner.client.organization.addTeamMember({ teamId: team.data.id, userId: owner.id, organizationId: org });

  // One team: the invitation carries it, accepting puts the invitee in it and makes it the session's team.
  const invitee = await signedUp("teaminv-invitee");
  const email = (await invitee.client.getSession()).data.user.email;
  const invited = await owner.client.organization.inviteMember({ email, role: "member", organizationId: org, teamId: team.data.id });
  assert.equal(invited.error, null);
  assert.equal(invited.data.teamId, team.data.id);
  const accepted = await invitee.client.organization.acceptInvitation({ invitationId: invited.data.id });
  assert.equal(accepted.error, null);
  assert.equal(accepted.data.invitation.teamId, team.data.id);
  const members = await owner.client.organization.listTeamMembers({ query: { teamId: team.data.id } });
  assert.deepEqual(members.data.map((m) => m.userId).sort(), [owner.id, invitee.id].sort());
  const session = await invitee.client.getSession();
  assert.equal(session.data.session.activeOrganizationId, org);
  assert.equal(session.data.session.activeTeamId, team.data.id);
  const own = await invitee.client.organization.listTeamMembers();
  assert.ok(own.data.some((m) => m.userId === invitee.id), "the active team's members, the invitee among them");

  // Several teams (the client sends the array as it is): stored joined by commas; the plugin's codes as they are.
  const second = await signedUp("teaminv-second");
  const secondEmail = (await second.client.getSession()).data.user.email;
  const both = await owner.client.organization.inviteMember({
    email: secondEmail, role: "member", organizationId: org, teamId: [team.data.id, other.data.id],
  });
  assert.equal(both.error, null);
  assert.equal(both.data.teamId, `${team.data.id},${other.data.id}`);
  const bad = await owner.client.organization.inviteMember({ email: unique("teaminv-bad"), role: "member", organizationId: org, teamId: "a,b" });
  assert.equal(bad.error.status, 400);
  assert.equal(bad.error.code, "INVALID_TEAM_ID");
  const missing = await owner.client.organization.inviteMember({
    email: unique("teaminv-missing"), role: "member", organizationId: org, teamId: "00000000-0000-7000-8000-000000000000",
  });
  assert.equal(missing.error.code, "TEAM_NOT_FOUND");
  const joined = await second.client.organization.acceptInvitation({ invitationId: both.data.id });
  assert.equal(joined.error, null);
  const teams = await second.client.organization.listUserTeams({ query: { organizationId: org } });
  assert.deepEqual(teams.data.map((t) => t.name).sort(), ["Days", "Nights"]);
  assert.equal((await second.client.getSession()).data.session.activeTeamId ?? null, null, "two teams: none active");
});
