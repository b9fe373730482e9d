// The identity provider's device page (/device, RFC 8628 §3.3): the person enters the code a command-line tool or
// a TV shows (or arrives with it in `user_code`), signs in if needed (to /sign-in and back here), sees which
// application asks for what, and approves or denies: GET and POST /api/auth/oauth2/device. The device hears the
// answer at its next poll of the token endpoint.
import { api, currentSession, say } from "./common.js";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);

// What each standard scope means to the person asked; an application's own scopes are shown by name.
const MEANINGS = {
  openid: "know who you are (your account's identifier)",
  profile: "see your name and picture",
  email: "see your e-mail address and whether it is confirmed",
  offline_access: "stay signed in while you are away",
};

let userCode = "";

function show(id) {
  for (const part of ["loading", "enter", "ask", "done"]) $(part).hidden = part !== id;
}

function error(message) {
  say($("error"), message, true);
}

async function lookUp(code) {
  say($("error"), "");
  $("next").disabled = true;
  try {
    const found = await api("GET", `/api/auth/oauth2/device?${new URLSearchParams({ user_code: code })}`);
    userCode = found.user_code;
    $("shown").textContent = found.user_code;
    $("client").textContent = found.client_name;
    $("scopes").replaceChildren();
    for (const scope of found.scope.split(" ").filter((s) => s !== "")) {
      const item = document.createElement("li");
      item.textContent = MEANINGS[scope] ?? `use “${scope}”`;
      $("scopes").append(item);
    }
    show("ask");
    $("allow").focus();
  } catch (e) {
    if (e.status === 403 && e.code === "TWO_FACTOR_REQUIRED") {
      location.assign(`/sign-in?${new URLSearchParams({ returnTo: `/device?${new URLSearchParams({ user_code: code })}` })}`);
      return;
    }
    show("enter");
    error(e.status === 429 ? "Too many attempts from here: wait a minute, then try again." : e.message);
    $("code").focus();
  } finally {
    $("next").disabled = false;
  }
}

async function answer(accept) {
  const buttons = [$("allow"), $("deny")];
  for (const b of buttons) b.disabled = true;
  say($("error"), "");
  try {
    await api("POST", "/api/auth/oauth2/device", { user_code: userCode, accept });
    $("done").textContent = accept
      ? "Done: the device is signed in. You can close this page and return to it."
      : "Denied: the device was refused. You can close this page.";
    show("done");
    $("done").focus?.();
  } catch (e) {
    error(e.message);
  } finally {
    for (const b of buttons) b.disabled = false;
  }
}

async function start() {
  let session;
  try {
    session = await currentSession();
  } catch (e) {
    show("");
    return error(e.message);
  }
  if (!session) {
    location.assign(`/sign-in?${new URLSearchParams({ returnTo: `/device${location.search}` })}`);
    return;
  }
  $("user").textContent = session.user.email;
  $("enter").addEventListener("submit", (event) => {
    event.preventDefault();
    lookUp($("code").value.trim());
  });
  $("allow").addEventListener("click", () => answer(true));
  $("deny").addEventListener("click", () => answer(false));
  const given = params.get("user_code");
  if (given) {
    $("code").value = given;
    await lookUp(given);
  } else {
    show("enter");
    $("code").focus();
  }
}

start();
