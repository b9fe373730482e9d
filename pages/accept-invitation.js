// The page the invitation mail links to (/accept-invitation?id=…): who invites whom into which organization, and
// accept or decline. Signed out: to /sign-in, which brings the browser back here. The answers of
// organization/get-invitation, accept-invitation and reject-invitation are better-auth's.
import { api, currentSession, say } from "./common.js";

const $ = (id) => document.getElementById(id);
const id = new URLSearchParams(location.search).get("id") ?? "";

function show(part) {
  for (const p of ["signed-out", "invitation", "answered"]) $(p).hidden = p !== part;
  $("loading").hidden = true;
}

function fail(message) {
  $("loading").hidden = true;
  say($("error"), message, true);
}

async function answer(path, outcome) {
  const buttons = [$("accept"), $("reject")];
  for (const b of buttons) b.disabled = true;
  say($("error"), "");
  try {
    await api("POST", path, { invitationId: id });
    show("answered");
    $("outcome").textContent = outcome;
    $("title").textContent = "Invitation answered";
    $("title").focus();
  } catch (e) {
    fail(e.message);
  } finally {
    for (const b of buttons) b.disabled = false;
  }
}

async function start() {
  if (id === "") return fail("This address names no invitation. Open the link from the invitation mail again.");
  let session;
  try {
    session = await currentSession();
  } catch (e) {
    return fail(e.message);
  }
  if (!session) {
    $("sign-in").href = `/sign-in?${new URLSearchParams({ returnTo: location.pathname + location.search })}`;
    return show("signed-out");
  }
  let invitation;
  try {
    invitation = await api("GET", `/api/auth/organization/get-invitation?${new URLSearchParams({ id })}`);
  } catch (e) {
    // The server answers the same for an unknown, spent or expired invitation and for one to another address.
    return fail(`${e.message}. The invitation may have been answered, withdrawn or expired, or it is for another `
      + `address than ${session.user.email}'s.`);
  }
  $("inviter").textContent = invitation.inviterEmail;
  $("organization").textContent = invitation.organizationName;
  $("role").textContent = invitation.role;
  $("invitee").textContent = invitation.email;
  const expires = new Date(invitation.expiresAt);
  $("expires").textContent = expires.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
  $("expires").title = `${expires.toISOString()} UTC`;
  $("title").textContent = `Join ${invitation.organizationName}?`;
  const org = invitation.organizationName;
  $("accept").onclick = () => answer("/api/auth/organization/accept-invitation", `You are now a member of ${org}.`);
  $("reject").onclick = () => answer("/api/auth/organization/reject-invitation", `You declined the invitation to ${org}.`);
  show("invitation");
}

start();
