// The identity provider's logout confirmation page (/sign-out?<the end-session request>), where end-session sends
// a browser whose session the request does not name: a link anyone can forge must not sign a person out unasked.
// "Sign out" answers POST /api/auth/oauth2/end-session/confirm with the page's query (`logout_query`, checked again
// by the server) and follows the answer's `url` (the application's registered address, or this page again);
// "Stay signed in" ends nothing and asks nothing of the server. Signed out already: the signed-out page.
import { api, currentSession, say } from "./common.js";

const $ = (id) => document.getElementById(id);
const query = location.search.replace(/^\?/, "");

function show(id) {
  for (const part of ["loading", "ask", "kept", "done"]) $(part).hidden = part !== id;
}

function fail(message) {
  $("loading").hidden = true;
  say($("error"), message, true);
}

async function confirm() {
  const buttons = [$("confirm"), $("cancel")];
  for (const b of buttons) b.disabled = true;
  say($("error"), "");
  try {
    const result = await api("POST", "/api/auth/oauth2/end-session/confirm", { logout_query: query });
    if (result?.url) {
      location.assign(result.url);
      return;
    }
    fail("The server gave no address to go to.");
  } catch (e) {
    fail(e.message);
  } finally {
    for (const b of buttons) b.disabled = false;
  }
}

function cancel() {
  say($("error"), "");
  $("title").textContent = "Still signed in";
  show("kept");
  $("title").focus();
}

async function start() {
  let session;
  try {
    session = await currentSession();
  } catch (e) {
    return fail(e.message);
  }
  if (!session) {
    $("title").textContent = "Signed out";
    document.title = "Signed out";
    show("done");
    return;
  }
  $("user").textContent = session.user.email;
  $("confirm").addEventListener("click", confirm);
  $("cancel").addEventListener("click", cancel);
  show("ask");
  $("confirm").focus();
}

start();
