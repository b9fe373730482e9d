// The identity provider's consent page (/consent?<the authorization request>): which application asks for which
// scopes, for whom; Allow or Deny answer POST /api/auth/oauth2/consent with the page's query (`oauth_query`), and
// the browser follows the answer's `url` back to the application. Signed out: to /sign-in, and back here after.
import { api, currentSession, say } from "./common.js";

const $ = (id) => document.getElementById(id);
const query = location.search.replace(/^\?/, "");
const params = new URLSearchParams(query);

// What each standard scope means to the person asked; an application's own scopes are shown by name.
const MEANINGS = {
  openid: "know who you are (your account's identifier)",
  profile: "see your name and picture",
  email: "see your e-mail address and whether it is confirmed",
  offline_access: "stay signed in while you are away",
};

function fail(message) {
  $("loading").hidden = true;
  say($("error"), message, true);
}

async function answer(accept) {
  const buttons = [$("allow"), $("deny")];
  for (const b of buttons) b.disabled = true;
  say($("error"), "");
  try {
    const result = await api("POST", "/api/auth/oauth2/consent", { accept, oauth_query: query });
    if (result?.url) {
      location.assign(result.url);
      return;
    }
    fail("The server gave no address to return to.");
  } catch (e) {
    fail(e.message);
  } finally {
    for (const b of buttons) b.disabled = false;
  }
}

async function start() {
  const clientId = params.get("client_id") ?? "";
  if (clientId === "") return fail("This page was opened without an application's request.");
  let session;
  try {
    session = await currentSession();
  } catch (e) {
    return fail(e.message);
  }
  if (!session) {
    const back = `/consent?${query}`;
    location.assign(`/sign-in?${new URLSearchParams({ returnTo: back })}`);
    return;
  }
  let client;
  try {
    client = await api("GET", `/api/auth/oauth2/public-client?${new URLSearchParams({ client_id: clientId })}`);
  } catch (e) {
    return fail(e.status === 404 ? "This application is not registered, or is disabled." : e.message);
  }
  $("client").textContent = client.client_name;
  $("user").textContent = session.user.email;
  const scopes = (params.get("scope") ?? "openid").split(" ").filter((s) => s !== "");
  for (const scope of scopes) {
    const item = document.createElement("li");
    item.textContent = MEANINGS[scope] ?? `use “${scope}”`;
    $("scopes").append(item);
  }
  $("allow").addEventListener("click", () => answer(true));
  $("deny").addEventListener("click", () => answer(false));
  $("loading").hidden = true;
  $("ask").hidden = false;
  $("allow").focus();
}

start();
