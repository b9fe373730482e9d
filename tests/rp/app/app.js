// A single-page application on another origin using service-auth as its OpenID provider with nothing but fetch and
// WebCrypto: discovery, the authorization code flow with PKCE (S256), state and RFC 9207's iss checked on the way
// back, the code redeemed as a public client, then userinfo with the access token. /config.json names the issuer
// and the client (the test registers it first).
const $ = (id) => document.getElementById(id);
const b64url = (bytes) => btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
const random = () => b64url(crypto.getRandomValues(new Uint8Array(32)));
const redirectUri = `${location.origin}/callback`;

function fail(message) {
  $("status").textContent = `Error: ${message}`;
  $("status").dataset.state = "error";
}

async function json(response) {
  const body = await response.json();
  if (!response.ok) throw new Error(`${response.status} ${body.error ?? ""} ${body.error_description ?? ""}`);
  return body;
}

async function main() {
  const config = await json(await fetch("/config.json"));
  const meta = await json(await fetch(`${config.issuer}/.well-known/openid-configuration`));
  if (meta.issuer !== config.issuer) throw new Error("the discovery document names another issuer");
  const params = new URLSearchParams(location.search);

  if (location.pathname !== "/callback") {
    $("sign-in").hidden = false;
    $("status").textContent = "Signed out";
    $("sign-in").addEventListener("click", async () => {
      const verifier = random();
      const state = random();
      const challenge = b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
      sessionStorage.setItem("pkce", JSON.stringify({ verifier, state }));
      const request = {
        response_type: "code", client_id: config.client_id, redirect_uri: redirectUri, scope: "openid profile",
        state, code_challenge: challenge, code_challenge_method: "S256",
        // The page's own ?prompt= (prompt=login: the application wants a new sign-in).
        ...(params.get("prompt") ? { prompt: params.get("prompt") } : {}),
      };
      if (params.get("method") === "post") {
        // The request as a posted form (?method=post), as some relying parties send it.
        const form = document.createElement("form");
        form.method = "post";
        form.action = meta.authorization_endpoint;
        for (const [name, value] of Object.entries(request)) {
          const input = document.createElement("input");
          input.type = "hidden";
          input.name = name;
          input.value = value;
          form.append(input);
        }
        document.body.append(form);
        form.submit();
        return;
      }
      const url = new URL(meta.authorization_endpoint);
      url.search = new URLSearchParams(request).toString();
      location.assign(url);
    });
    return;
  }

  const { verifier, state } = JSON.parse(sessionStorage.getItem("pkce") ?? "{}");
  sessionStorage.removeItem("pkce");
  if (params.get("error")) throw new Error(params.get("error"));
  if (!state || params.get("state") !== state) throw new Error("state does not match");
  if (params.get("iss") !== meta.issuer) throw new Error("iss does not match (RFC 9207)");
  const tokens = await json(await fetch(meta.token_endpoint, {
    method: "POST",
    body: new URLSearchParams({
      grant_type: "authorization_code", code: params.get("code"), redirect_uri: redirectUri,
      client_id: config.client_id, code_verifier: verifier,
    }),
  }));
  const info = await json(await fetch(meta.userinfo_endpoint, {
    headers: { authorization: `Bearer ${tokens.access_token}` },
  }));
  $("name").textContent = info.name;
  $("status").textContent = "Signed in";
  $("status").dataset.state = "signed-in";
}

main().catch((e) => fail(e.message));
