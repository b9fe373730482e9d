//! The identity provider's public documents: the JWKS at the jwt plugin's path and the discovery document at the
//! issuer (`<base>/api/auth`), as `@better-auth/oauth-provider` serves them; and, for administrators, its signing
//! keys (the list, and a rotation) and its clients; and the flows: the authorization request, the consent page's
//! answer, the token endpoint and userinfo.

use std::borrow::Cow;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde_json::Value;

use super::AppState;
use super::dto::{
    Jwks, OAuthClient, OAuthClientAndSecret, OAuthClientList, OAuthError, ProviderMetadata, PublicClient, Redirect,
    RegisteredClient, SUCCESS, SigningKey, SigningKeyList,
};
use super::extract::{self, Ctx, Fields, Refusal};
use super::response::{Body, Failure, json, ok};
use crate::accounts::{
    Alg, AuthorizeRequest, Authorized, ClientChange, ClientError, ConsentError, Current, DeviceError, EndSession,
    EndSessionError, EndSessionRequest, NewClient, Registrant, RegistrationError, TokenError, TokenRequest,
    UserInfoError,
};
use crate::domain::Timestamp;

/// The plugin's caching of its metadata: relying parties may keep it briefly, and use a stale copy while the
/// server is down. The JWKS gets the same: a new key is published an hour before it signs, far longer.
const PUBLIC_CACHE: &str = "public, max-age=15, stale-while-revalidate=15, stale-if-error=86400";
/// The rotation's default lead, and its longest.
const DEFAULT_LEAD_SECS: u64 = 3_600;
const MAX_LEAD_SECS: u64 = 30 * 86_400;

/// The issuer: the server's own origin (`base_url`, else the request's `Host`) and better-auth's base path, as
/// the plugin's `baseURL` is `<base>/api/auth`.
fn issuer<'s>(state: &'s AppState, ctx: &Ctx) -> Result<Cow<'s, str>, Failure> {
    state.origins.issuer(ctx.host()).ok_or_else(|| Failure::bad_request("BAD_REQUEST", "No Host header"))
}

fn public(mut response: Response<Body>) -> Response<Body> {
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static(PUBLIC_CACHE));
    response
}

/// `GET /api/auth/jwks` → `{keys: [JWK…]}`: every key that signs, will sign, or signed a token still valid. The
/// first keys are made by the first request that needs them.
pub async fn jwks(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    drop(req);
    let keys = state.accounts.jwks().await?;
    Ok(public(ok(&Jwks { keys: &keys })))
}

/// `GET /api/auth/.well-known/openid-configuration`, `/api/auth/.well-known/oauth-authorization-server` and
/// RFC 8414's `/.well-known/oauth-authorization-server/api/auth`: the provider's metadata.
pub async fn metadata(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    drop(req);
    let issuer = issuer(state, &ctx)?;
    let registration = state.accounts.registration_open();
    Ok(public(ok(&ProviderMetadata::new(&issuer, state.accounts.signing_algs(), registration))))
}

/// `GET /api/admin/oidc/keys` → `{keys}`: every key held, newest first within each algorithm.
pub async fn keys(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    extract::query_only(req.uri().query(), &[])?;
    let keys = state.accounts.signing_keys().await?;
    let now = Timestamp::now();
    Ok(ok(&SigningKeyList { keys: keys.iter().map(|k| SigningKey::new(k, now)).collect() }))
}

/// `POST /api/admin/oidc/keys/rotate` `{algs?, lead_secs?}` → `{keys}`: a new key for each algorithm named
/// (all three unless told), published now and signing `lead_secs` from now (an hour unless told); the keys they
/// replace sign until then. Audited.
pub async fn rotate(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let body = extract::json_object(req, false, state.body_timeout()).await?;
    body.only(&["algs", "lead_secs"])?;
    let algs = match body.get("algs") {
        None | Some(Value::Null) => Alg::ALL.to_vec(),
        Some(Value::Array(items)) if !items.is_empty() => {
            let mut algs = Vec::new();
            for item in items {
                let alg = item.as_str().and_then(Alg::parse).ok_or_else(|| {
                    Failure::validation("algs must name one or more of \"EdDSA\", \"ES256\" and \"RS256\"")
                })?;
                if !algs.contains(&alg) {
                    algs.push(alg);
                }
            }
            algs
        }
        Some(_) => return Err(Failure::validation("algs must name one or more of \"EdDSA\", \"ES256\" and \"RS256\"")),
    };
    let lead = body.optional_u64("lead_secs")?.unwrap_or(DEFAULT_LEAD_SECS);
    if lead > MAX_LEAD_SECS {
        return Err(Failure::validation(format!("lead_secs must be 0 to {MAX_LEAD_SECS}")));
    }
    let ip = ctx.ip.to_string();
    let keys = state.accounts.rotate_signing_keys(&algs, Duration::from_secs(lead), admin.id, &ip).await?;
    let now = Timestamp::now();
    Ok(ok(&SigningKeyList { keys: keys.iter().map(|k| SigningKey::new(k, now)).collect() }))
}

/// The `{client_id}` segment of `/api/admin/oidc/clients/{client_id}`: the plugin's 32 letters, or an imported
/// client's id (letters, digits, `-`, `_`, `.`; at most 128).
fn client_id(req: &Request<Incoming>) -> Result<String, Failure> {
    let id = req.uri().path().trim_start_matches("/api/admin/oidc/clients/");
    let valid = !id.is_empty()
        && id.len() <= 128
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if valid { Ok(id.to_owned()) } else { Err(Failure::validation("the client_id in the path is malformed")) }
}

fn strings(body: &Fields, key: &str) -> Result<Option<Vec<String>>, Failure> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| Failure::validation(format!("{key} must be an array of strings"))),
        Some(_) => Err(Failure::validation(format!("{key} must be an array of strings"))),
    }
}

/// `scope`: space-separated, as RFC 7591.
fn scope(body: &Fields) -> Result<Option<Vec<String>>, Failure> {
    Ok(body.optional_string("scope")?.map(|s| s.split(' ').filter(|s| !s.is_empty()).map(str::to_owned).collect()))
}

/// `GET /api/admin/oidc/clients` → `{clients}`, oldest first.
pub async fn clients(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    extract::query_only(req.uri().query(), &[])?;
    let clients = state.accounts.oauth_clients().await?;
    Ok(ok(&OAuthClientList { clients: clients.iter().map(OAuthClient::from).collect() }))
}

/// `POST /api/admin/oidc/clients` (RFC 7591's fields) → 201 `{client, client_secret}`: the secret of a
/// confidential client, shown this once (`null` for a public one).
pub async fn create_client(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&[
        "client_name",
        "redirect_uris",
        "post_logout_redirect_uris",
        "scope",
        "grant_types",
        "token_endpoint_auth_method",
        "application_type",
        "skip_consent",
        "enable_end_session",
        "backchannel_logout_uri",
        "backchannel_logout_session_required",
        "id_token_signed_response_alg",
    ])?;
    let new = NewClient {
        name: body.string("client_name")?.to_owned(),
        redirect_uris: strings(&body, "redirect_uris")?.unwrap_or_default(),
        post_logout_redirect_uris: strings(&body, "post_logout_redirect_uris")?.unwrap_or_default(),
        scopes: scope(&body)?,
        grant_types: strings(&body, "grant_types")?,
        auth_method: body.optional_string("token_endpoint_auth_method")?.map(str::to_owned),
        application_type: body.optional_string("application_type")?.map(str::to_owned),
        skip_consent: body.optional_bool("skip_consent")?.unwrap_or(false),
        enable_end_session: body.optional_bool("enable_end_session")?.unwrap_or(false),
        backchannel_logout_uri: body.optional_string("backchannel_logout_uri")?.map(str::to_owned),
        backchannel_logout_session_required: body
            .optional_bool("backchannel_logout_session_required")?
            .unwrap_or(false),
        id_token_signed_response_alg: body.optional_string("id_token_signed_response_alg")?.map(str::to_owned),
    };
    let (client, secret) = state.accounts.create_oauth_client(new, admin.id, &ctx.ip.to_string()).await?;
    let answer = OAuthClientAndSecret { client: OAuthClient::from(&client), client_secret: secret.as_deref() };
    Ok(json(StatusCode::CREATED, &answer))
}

/// `GET /api/admin/oidc/clients/{client_id}` → `{client, client_secret: null}`.
pub async fn client(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let id = client_id(&req)?;
    extract::query_only(req.uri().query(), &[])?;
    let client = state.accounts.oauth_client(&id).await?;
    Ok(ok(&OAuthClientAndSecret { client: OAuthClient::from(&client), client_secret: None }))
}

/// `PATCH /api/admin/oidc/clients/{client_id}` `{client_name?, redirect_uris?, post_logout_redirect_uris?, scope?,
/// grant_types?, skip_consent?, enable_end_session?, backchannel_logout_uri? (`null` removes it),
/// backchannel_logout_session_required?, disabled?, id_token_signed_response_alg?, rotate_secret?}` →
/// `{client, client_secret}` (the new secret when rotated, else `null`).
pub async fn update_client(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let id = client_id(&req)?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&[
        "client_name",
        "redirect_uris",
        "post_logout_redirect_uris",
        "scope",
        "grant_types",
        "skip_consent",
        "enable_end_session",
        "backchannel_logout_uri",
        "backchannel_logout_session_required",
        "disabled",
        "id_token_signed_response_alg",
        "rotate_secret",
    ])?;
    let change = ClientChange {
        name: body.optional_string("client_name")?.map(str::to_owned),
        redirect_uris: strings(&body, "redirect_uris")?,
        post_logout_redirect_uris: strings(&body, "post_logout_redirect_uris")?,
        scopes: scope(&body)?,
        grant_types: strings(&body, "grant_types")?,
        skip_consent: body.optional_bool("skip_consent")?,
        enable_end_session: body.optional_bool("enable_end_session")?,
        // `null` ends back-channel logout for the client.
        backchannel_logout_uri: body.nullable_string("backchannel_logout_uri")?.map(|u| u.map(str::to_owned)),
        backchannel_logout_session_required: body.optional_bool("backchannel_logout_session_required")?,
        disabled: body.optional_bool("disabled")?,
        id_token_signed_response_alg: body.optional_string("id_token_signed_response_alg")?.map(str::to_owned),
        rotate_secret: body.optional_bool("rotate_secret")?.unwrap_or(false),
    };
    if change.is_empty() {
        return Err(Failure::validation("nothing to change"));
    }
    let (client, secret) = state.accounts.update_oauth_client(&id, change, admin.id, &ctx.ip.to_string()).await?;
    Ok(ok(&OAuthClientAndSecret { client: OAuthClient::from(&client), client_secret: secret.as_deref() }))
}

/// `DELETE /api/admin/oidc/clients/{client_id}` → `{success: true}`. Audited.
pub async fn delete_client(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let admin = extract::administrator(state, req.headers(), Refusal::Plain).await?;
    let id = client_id(&req)?;
    extract::query_only(req.uri().query(), &[])?;
    state.accounts.delete_oauth_client(&id, admin.id, &ctx.ip.to_string()).await?;
    Ok(ok(&SUCCESS))
}

/// `POST /api/auth/oauth2/register` (RFC 7591; the plugin's fields) → 201 the client with its secret (shown once).
/// Who may call it is `[provider] registration`'s: off, 403 `access_denied`; without a session or the initial
/// access token, 401 with `WWW-Authenticate: Bearer` and the plugin's body (no `error`); a session that is not an
/// administrator's, 403. Fields it does not know are ignored (RFC 7591 §2); `skip_consent` is refused, as by the
/// plugin; each other refusal is 400 `invalid_redirect_uri`, `invalid_client_metadata` or `invalid_scope`.
pub async fn register(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    if !state.accounts.registration_open() {
        // Before the body is read: nothing about a request changes this answer.
        extract::discard_body(req, state.body_timeout()).await;
        return registration_refusal(RegistrationError::Disabled);
    }
    let session = extract::signed_in_or_none(state, req.headers()).await?;
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| t.trim().to_owned());
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    let who = match (&session, bearer.as_deref()) {
        (Some((_, current)), _) => {
            current.administrator().map_or(Registrant::SignedIn, |u| Registrant::Administrator(u.id))
        }
        (None, Some(token)) => Registrant::Token(token),
        (None, None) => Registrant::Nobody,
    };
    let metadata = |message: String| oauth_error(StatusCode::BAD_REQUEST, "invalid_client_metadata", &message);
    if body.get("skip_consent").is_some() {
        return Ok(metadata("skip_consent cannot be set by dynamic registration".into()));
    }
    let parsed = (|| {
        Ok::<_, Failure>(NewClient {
            name: body.optional_string("client_name")?.unwrap_or("").to_owned(),
            redirect_uris: strings(&body, "redirect_uris")?.unwrap_or_default(),
            post_logout_redirect_uris: strings(&body, "post_logout_redirect_uris")?.unwrap_or_default(),
            scopes: scope(&body)?,
            grant_types: strings(&body, "grant_types")?,
            auth_method: body.optional_string("token_endpoint_auth_method")?.map(str::to_owned),
            application_type: body.optional_string("application_type")?.map(str::to_owned),
            skip_consent: false,
            enable_end_session: false,
            backchannel_logout_uri: body.optional_string("backchannel_logout_uri")?.map(str::to_owned),
            backchannel_logout_session_required: body
                .optional_bool("backchannel_logout_session_required")?
                .unwrap_or(false),
            id_token_signed_response_alg: body.optional_string("id_token_signed_response_alg")?.map(str::to_owned),
        })
    })();
    let new = match parsed {
        Ok(new) => new,
        Err(failure) => return Ok(metadata(failure.message)),
    };
    if let Some(types) = strings(&body, "response_types").ok().flatten()
        && types.iter().any(|t| t != "code")
    {
        return Ok(metadata("response_types may only be [\"code\"]".into()));
    }
    match state.accounts.register_client(who, new, &ctx.ip.to_string()).await {
        Ok((client, secret)) => Ok(json(StatusCode::CREATED, &RegisteredClient::new(&client, secret.as_deref()))),
        Err(e) => registration_refusal(e),
    }
}

fn registration_refusal(e: RegistrationError) -> Result<Response<Body>, Failure> {
    let message = e.to_string();
    Ok(match e {
        RegistrationError::Disabled => oauth_error(StatusCode::FORBIDDEN, "access_denied", &message),
        RegistrationError::Forbidden => oauth_error(StatusCode::FORBIDDEN, "access_denied", &message),
        RegistrationError::Unauthenticated => {
            #[derive(serde::Serialize)]
            struct Unauthenticated<'a> {
                error_description: &'a str,
            }
            let mut response = json(StatusCode::UNAUTHORIZED, &Unauthenticated { error_description: &message });
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
        RegistrationError::InvalidRedirectUri(m) => oauth_error(StatusCode::BAD_REQUEST, "invalid_redirect_uri", &m),
        RegistrationError::InvalidMetadata(m) => oauth_error(StatusCode::BAD_REQUEST, "invalid_client_metadata", &m),
        RegistrationError::InvalidScope(m) => oauth_error(StatusCode::BAD_REQUEST, "invalid_scope", &m),
        RegistrationError::Unavailable => return Err(Failure::unavailable()),
    })
}

// --- the flows: authorization, consent, token, userinfo (src/accounts/idp.rs) ---------------------------------

/// An OAuth error answer (RFC 6749 §5.2): `{error_description, error}`, as the plugin orders them; never cached.
fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response<Body> {
    json(status, &OAuthError { error_description: description, error })
}

/// The request's parameters by name; the first name given twice is noted (RFC 6749 §3.1 refuses repeats).
fn pairs(raw: &[u8]) -> (Vec<(String, String)>, Option<String>) {
    pairs_noting(raw, |_| true)
}

/// [`pairs`], noting only a repeat of a name `noted` says is the endpoint's (others may come twice, ignored).
fn pairs_noting(raw: &[u8], noted: impl Fn(&str) -> bool) -> (Vec<(String, String)>, Option<String>) {
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut repeated = None;
    each_pair(raw, |k, v| {
        if seen.iter().any(|(name, _)| *name == k) {
            if repeated.is_none() && noted(&k) {
                repeated = Some(k.into_owned());
            }
            return;
        }
        seen.push((k.into_owned(), v.into_owned()));
    });
    (seen, repeated)
}

/// Each `name=value` of a form or a query, as `url::form_urlencoded::parse` decodes it. A text with nothing to
/// decode (valid UTF-8 without `%` or `+`, as every token the service makes) is only cut at `&` and `=`: the
/// decoder's byte-by-byte passes over a 500-byte access token cost more than the rest of an introspection's
/// parsing (BENCHMARKS.md, "The identity provider (#46)").
fn each_pair<'a>(raw: &'a [u8], mut f: impl FnMut(Cow<'a, str>, Cow<'a, str>)) {
    match std::str::from_utf8(raw) {
        Ok(text) if !raw.iter().any(|&b| b == b'%' || b == b'+') => {
            for pair in text.split('&').filter(|pair| !pair.is_empty()) {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                f(Cow::Borrowed(k), Cow::Borrowed(v));
            }
        }
        _ => url::form_urlencoded::parse(raw).for_each(|(k, v)| f(k, v)),
    }
}

fn take(pairs: &mut Vec<(String, String)>, name: &str) -> Option<String> {
    let at = pairs.iter().position(|(k, _)| k == name)?;
    Some(pairs.swap_remove(at).1).filter(|v| !v.is_empty())
}

fn authorize_request(query: &str) -> AuthorizeRequest {
    let (mut p, repeated) = pairs(query.as_bytes());
    let request_object = if p.iter().any(|(k, _)| k == "request") {
        Some("request")
    } else if p.iter().any(|(k, _)| k == "request_uri") {
        Some("request_uri")
    } else {
        None
    };
    AuthorizeRequest {
        client_id: take(&mut p, "client_id"),
        redirect_uri: take(&mut p, "redirect_uri"),
        response_type: take(&mut p, "response_type"),
        scope: take(&mut p, "scope"),
        state: take(&mut p, "state"),
        nonce: take(&mut p, "nonce"),
        code_challenge: take(&mut p, "code_challenge"),
        code_challenge_method: take(&mut p, "code_challenge_method"),
        prompt: take(&mut p, "prompt"),
        max_age: take(&mut p, "max_age"),
        login_after: take(&mut p, "login_after"),
        request_object,
        repeated,
    }
}

/// Whether the caller is a script (`fetch`) rather than a navigation: the plugin then answers the redirect as
/// `{redirect: true, url}` (its `handleRedirect`: `Sec-Fetch-Mode: cors`, or an `Accept` naming JSON).
fn wants_json(headers: &hyper::HeaderMap) -> bool {
    let text = |name| headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok()).unwrap_or("");
    text(header::HeaderName::from_static("sec-fetch-mode")) == "cors"
        || text(header::ACCEPT).contains("application/json")
}

fn redirect(to: &str, as_json: bool) -> Result<Response<Body>, Failure> {
    if as_json {
        return Ok(ok(&Redirect { redirect: true, url: to }));
    }
    let location = HeaderValue::from_str(to).map_err(|_| Failure::validation("the redirect is not a valid header"))?;
    let mut response = Response::new(Body::default());
    *response.status_mut() = StatusCode::FOUND;
    response.headers_mut().insert(header::LOCATION, location);
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// The query for the way back from the sign-in page: without `prompt`'s `login` and `create` (the sign-in they
/// ask for is the one about to happen) and without an earlier way back's `login_after`; with this one's, when the
/// sign-in must be new ([`Authorized::SignIn`]).
fn way_back(query: &str, login_after: Option<Timestamp>) -> String {
    let mut out = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        if k == "login_after" {
            continue;
        }
        if k == "prompt" {
            let kept: Vec<&str> = v.split(' ').filter(|p| !p.is_empty() && *p != "login" && *p != "create").collect();
            if !kept.is_empty() {
                out.append_pair("prompt", &kept.join(" "));
            }
            continue;
        }
        out.append_pair(&k, &v);
    }
    if let Some(at) = login_after {
        out.append_pair("login_after", &at.as_millis().to_string());
    }
    out.finish()
}

fn answer_authorized(answer: Authorized, query: &str, as_json: bool) -> Result<Response<Body>, Failure> {
    match answer {
        Authorized::Refused { error, description } => Ok(oauth_error(StatusCode::BAD_REQUEST, error, &description)),
        Authorized::Redirect(url) => redirect(&url, as_json),
        Authorized::SignIn { after } => {
            let back = format!("/api/auth/oauth2/authorize?{}", way_back(query, after));
            let mut to = url::form_urlencoded::Serializer::new(String::from("/sign-in?"));
            to.append_pair("returnTo", &back);
            redirect(&to.finish(), as_json)
        }
        Authorized::Consent => redirect(&format!("/consent?{query}"), as_json),
    }
}

/// The caller's session from the cookie alone (an API key is no browser's session and authorizes no client).
fn cookie_session(state: &AppState, headers: &hyper::HeaderMap) -> Result<Option<Current>, Failure> {
    let Some(token) = extract::session_token(state, headers) else { return Ok(None) };
    Ok(state.accounts.current(&token)?)
}

/// `GET /api/auth/oauth2/authorize` (RFC 6749 §4.1.1): 302 to the client with a code or an error, to the sign-in
/// page, or to the consent page; 400 `{error, error_description}` when the client or its redirect URI is not
/// known good. A script's request (`Sec-Fetch-Mode: cors`, or JSON accepted) gets `{redirect: true, url}`.
pub async fn authorize(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let query = req.uri().query().unwrap_or("").to_owned();
    let request = authorize_request(&query);
    let caller = cookie_session(state, req.headers())?;
    let issuer = issuer(state, &ctx)?;
    let answer = state.accounts.authorize(&request, caller.as_ref(), &issuer).await?;
    answer_authorized(answer, &query, wants_json(req.headers()))
}

/// `POST /api/auth/oauth2/authorize` (a form: OpenID Connect Core §3.1.2.1 has an authorization server take POST
/// as it takes GET) → 303 to the same request as a `GET`, where everything is decided. Nothing is decided on the
/// POST itself: a relying party on another site posts a form, which brings no `SameSite=Lax` session cookie,
/// while the top-level GET it is sent on does, so a signed-in person goes on as with a link (the plugin decides on
/// the POST, and sends such a person to sign in).
pub async fn authorize_form(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    if !is_form(req.headers()) {
        return Ok(oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "the body must be application/x-www-form-urlencoded",
        ));
    }
    let body = extract::form_body(req, state.body_timeout()).await?;
    let query = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(&body).finish();
    let mut response = redirect(&format!("/api/auth/oauth2/authorize?{query}"), false)?;
    *response.status_mut() = StatusCode::SEE_OTHER;
    Ok(response)
}

/// `POST /api/auth/oauth2/consent` `{accept, scope?, oauth_query}` (the consent page's answer, with the session
/// cookie) → `{redirect: true, url}`: to the client with a code (accepted; the consent is remembered) or with
/// `access_denied`.
pub async fn consent(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["accept", "scope", "oauth_query"])?;
    let accept = body.optional_bool("accept")?.ok_or_else(|| Failure::validation("accept is required"))?;
    let scope = body.optional_string("scope")?;
    let Some(query) = body.optional_string("oauth_query")? else {
        return Ok(oauth_error(StatusCode::BAD_REQUEST, "invalid_request", "missing oauth query"));
    };
    let query = query.trim_start_matches('?');
    let request = authorize_request(query);
    let issuer = issuer(state, &ctx)?;
    match state.accounts.answer_consent(&request, &current, accept, scope, &issuer).await {
        Ok(answer) => answer_authorized(answer, query, true),
        Err(ConsentError::Invalid(why)) => Ok(oauth_error(StatusCode::BAD_REQUEST, "invalid_request", &why)),
        Err(ConsentError::Unavailable(u)) => Err(u.into()),
    }
}

/// `GET /api/auth/oauth2/public-client?client_id=` → `{client_id, client_name}`: what the consent page shows of
/// an enabled client. Nothing secret: a client's id travels in every authorization request.
pub async fn public_client(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::query_only(req.uri().query(), &["client_id"])?;
    let id = extract::query_value(req.uri().query(), "client_id")
        .filter(|id| !id.is_empty() && id.chars().count() <= 128)
        .ok_or_else(|| Failure::validation("client_id is required"))?;
    match state.accounts.oauth_client(&id).await {
        Ok(client) if !client.disabled => {
            Ok(ok(&PublicClient { client_id: &client.client_id, client_name: &client.name }))
        }
        Ok(_) | Err(ClientError::NotFound) => Err(Failure::new(StatusCode::NOT_FOUND, "NOT_FOUND", "client not found")),
        Err(e) => Err(e.into()),
    }
}

/// Whether the body is declared a form (`application/x-www-form-urlencoded`, any parameters).
fn is_form(headers: &hyper::HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| {
        v.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("application/x-www-form-urlencoded"))
    })
}

/// Credentials that are not `Basic base64(id:secret)`.
struct Malformed;

/// `Authorization: Basic` as RFC 6749 §2.3.1 has it: the id and the secret form-encoded, then joined by `:`.
fn basic_credentials(headers: &hyper::HeaderMap) -> Result<Option<(String, String)>, Malformed> {
    let Some(value) = headers.get(header::AUTHORIZATION) else { return Ok(None) };
    let text = value.to_str().map_err(|_| Malformed)?;
    let encoded = text.strip_prefix("Basic ").or_else(|| text.strip_prefix("basic ")).ok_or(Malformed)?;
    use base64::Engine;
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).map_err(|_| Malformed)?;
    let decoded = String::from_utf8(decoded).map_err(|_| Malformed)?;
    let (id, secret) = decoded.split_once(':').ok_or(Malformed)?;
    // What form decoding would change (`%`, `+`) or cut (`&`); the ids and secrets we make have none of them, and
    // are then taken as they are, without a decoder's copies (every introspection decodes them).
    let unescape = |s: &str| match s.contains(['%', '+', '&']) {
        false => s.to_owned(),
        true => url::form_urlencoded::parse(format!("x={s}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default(),
    };
    Ok(Some((unescape(id), unescape(secret))))
}

/// A client-authenticated form request (token, introspection, revocation): the form's parameters and the client's
/// credentials, or the answer that refuses it (not a form; malformed Basic credentials).
/// `known`: the endpoint's parameters, which may not be given twice (RFC 6749 §3.2); others are ignored.
async fn client_form(
    state: &AppState,
    req: Request<Incoming>,
    known: &[&str],
) -> Result<Result<(Vec<(String, String)>, TokenRequest), Response<Body>>, Failure> {
    if !is_form(req.headers()) {
        return Ok(Err(oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "the body must be application/x-www-form-urlencoded",
        )));
    }
    let basic = match basic_credentials(req.headers()) {
        Ok(basic) => basic,
        Err(Malformed) => {
            return Ok(Err(oauth_error(StatusCode::UNAUTHORIZED, "invalid_client", "malformed Basic credentials")));
        }
    };
    // Parsed once, as it came: the first of each name kept, a repeat of one of the endpoint's noted.
    let raw = extract::form_bytes(req, state.body_timeout()).await?;
    let (mut p, repeated) =
        pairs_noting(&raw, |name| known.contains(&name) || name == "client_id" || name == "client_secret");
    let client = TokenRequest {
        client_id: take(&mut p, "client_id"),
        client_secret: take(&mut p, "client_secret"),
        basic,
        repeated,
        ..TokenRequest::default()
    };
    Ok(Ok((p, client)))
}

/// A refusal of the token, introspection or revocation endpoint: `{error_description, error}`, 401 for the client's
/// authentication (with `WWW-Authenticate: Basic` when Basic was tried).
fn token_refusal(e: TokenError) -> Result<Response<Body>, Failure> {
    if let TokenError::Unavailable(u) = e {
        return Err(u.into());
    }
    let status = match &e {
        TokenError::InvalidClient { .. } => StatusCode::UNAUTHORIZED,
        _ => StatusCode::BAD_REQUEST,
    };
    let mut response = oauth_error(status, e.code(), &e.to_string());
    if let TokenError::InvalidClient { basic: true, .. } = e {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic"));
    }
    Ok(response)
}

/// What introspection and revocation both read: the calling client's credentials, `token` and `token_type_hint`,
/// each at most once; `Err` is the OAuth refusal to answer.
async fn token_form(
    state: &AppState,
    req: Request<Incoming>,
) -> Result<Result<(TokenRequest, String, Option<String>), Response<Body>>, Failure> {
    let (mut p, client) = match client_form(state, req, &["token", "token_type_hint"]).await? {
        Ok(parsed) => parsed,
        Err(refused) => return Ok(Err(refused)),
    };
    if let Some(name) = &client.repeated {
        let message = format!("{name} is given more than once");
        return Ok(Err(oauth_error(StatusCode::BAD_REQUEST, "invalid_request", &message)));
    }
    let Some(token) = take(&mut p, "token") else {
        return Ok(Err(oauth_error(StatusCode::BAD_REQUEST, "invalid_request", "token is required")));
    };
    let hint = take(&mut p, "token_type_hint");
    Ok(Ok((client, token, hint)))
}

/// `POST /api/auth/oauth2/introspect` (RFC 7662; form `token`, `token_type_hint`; a confidential client's
/// credentials) → `{active: false}` or `{active: true, iss, client_id, azp?, sub, sid?, exp, iat, scope,
/// token_type?, org_id?, org_slug?, org_roles?}` for a live token of the calling client's, answered from memory.
pub async fn introspect(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let issuer = issuer(state, &ctx)?;
    let (client, token, hint) = match token_form(state, req).await? {
        Ok(parsed) => parsed,
        Err(refused) => return Ok(refused),
    };
    let mut payload = Vec::new();
    match state.accounts.introspect(&client, &token, hint.as_deref(), &issuer, &mut payload).await {
        Ok(answer) => Ok(ok(&answer)),
        Err(e) => token_refusal(e),
    }
}

/// `POST /api/auth/oauth2/revoke` (RFC 7009; form `token`, `token_type_hint`; the client's credentials as at the
/// token endpoint) → 200 with an empty body: the token's grant ended (every token it issued) if it is the calling
/// client's; the same answer for any other token (§2.2).
pub async fn revoke(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let issuer = issuer(state, &ctx)?;
    let (client, token, _) = match token_form(state, req).await? {
        Ok(parsed) => parsed,
        Err(refused) => return Ok(refused),
    };
    match state.accounts.revoke(&client, &token, &issuer).await {
        Ok(()) => {
            let mut response = Response::new(Body::default());
            response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            Ok(response)
        }
        Err(e) => token_refusal(e),
    }
}

/// The logout confirmation page, where `end-session` sends a browser whose session the request does not name.
const SIGN_OUT_PAGE: &str = "/sign-out";

/// An `end-session` request's parameters, from the query or the confirmation page's `logout_query`.
fn end_session_request(query: &str) -> EndSessionRequest {
    let (mut p, repeated) = pairs(query.as_bytes());
    EndSessionRequest {
        id_token_hint: take(&mut p, "id_token_hint"),
        client_id: take(&mut p, "client_id"),
        post_logout_redirect_uri: take(&mut p, "post_logout_redirect_uri"),
        state: take(&mut p, "state"),
        repeated,
    }
}

/// A refused logout: 400 `invalid_request` or 401 `invalid_client`; nothing ended.
fn end_session_refusal(e: EndSessionError) -> Result<Response<Body>, Failure> {
    match e {
        EndSessionError::InvalidRequest(why) => Ok(oauth_error(StatusCode::BAD_REQUEST, "invalid_request", &why)),
        EndSessionError::InvalidClient(why) => Ok(oauth_error(StatusCode::UNAUTHORIZED, "invalid_client", &why)),
        EndSessionError::Unavailable(u) => Err(u.into()),
    }
}

/// `GET /api/auth/oauth2/end-session?id_token_hint=…&post_logout_redirect_uri=…&state=…&client_id=…`
/// (RP-initiated logout), every parameter optional. Checked in full first: 400 `invalid_request` (a bad hint, an
/// unregistered redirect, a redirect without the client it is registered for), 401 `invalid_client`: nothing
/// ended. Then: the hint's session, when it is the browser's or the browser has none, ended, and 302 to the
/// registered `post_logout_redirect_uri` with `state`, else 200 with an empty body, the cookie cleared when it was
/// that session's. Without a hint, or with one whose session is not the browser's: 302 to the confirmation page
/// (`/sign-out?<this query>`), which asks the person. Without a hint and without a session: nothing to end, 302 to
/// the registered redirect or to the signed-out page.
pub async fn end_session(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let query = req.uri().query().unwrap_or("").to_owned();
    let request = end_session_request(&query);
    let cookie = extract::session_token(state, req.headers()).map(|t| t.hash());
    extract::discard_body(req, state.body_timeout()).await;
    let issuer = issuer(state, &ctx)?;
    let ended = match state.accounts.end_session(&request, &issuer, cookie).await {
        Ok(EndSession::Ended(ended)) => ended,
        Ok(EndSession::Confirm) => return redirect(&format!("{SIGN_OUT_PAGE}?{query}"), false),
        Ok(EndSession::NothingToEnd { redirect: to }) => {
            return redirect(to.as_deref().unwrap_or(SIGN_OUT_PAGE), false);
        }
        Err(e) => return end_session_refusal(e),
    };
    let mut response = match &ended.redirect {
        Some(to) => redirect(to, false)?,
        None => {
            let mut response = Response::new(Body::default());
            response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
    };
    if cookie.is_some() && cookie == ended.ended {
        response = super::response::with_cookie(response, state.cookies.clear());
    }
    Ok(response)
}

/// `POST /api/auth/oauth2/end-session` with the same parameters as a form (RP-Initiated Logout 1.0 §2 has the
/// provider take both) → 303 to the same request as a GET, where everything is decided: as for the authorization
/// request, a form posted from the relying party's site brings no `SameSite=Lax` cookie, the GET it is sent on
/// does.
pub async fn end_session_form(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    if !is_form(req.headers()) {
        return Ok(oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "the body must be application/x-www-form-urlencoded",
        ));
    }
    let body = extract::form_body(req, state.body_timeout()).await?;
    let query = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(&body).finish();
    let mut response = redirect(&format!("/api/auth/oauth2/end-session?{query}"), false)?;
    *response.status_mut() = StatusCode::SEE_OTHER;
    Ok(response)
}

/// `POST /api/auth/oauth2/end-session/confirm` `{logout_query}` (the confirmation page's answer, with the session
/// cookie: the person chose to sign out) → `{redirect: true, url}`: the browser's session ended, its cookie
/// cleared, and `url` the registered `post_logout_redirect_uri` with `state`, else the signed-out page. The query
/// is checked again as at `end-session` (400, 401: nothing ended). No session: 401. Cancelling asks nothing of
/// the server.
pub async fn end_session_confirm(
    state: &AppState,
    ctx: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    // Any live session may end itself: one whose account must first enrol a second factor included.
    let Some((token, _)) = extract::signed_in_or_none(state, req.headers()).await? else {
        extract::discard_body(req, state.body_timeout()).await;
        return Err(Failure::new(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", "Unauthorized"));
    };
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["logout_query"])?;
    let query = body.optional_string("logout_query")?.unwrap_or("").trim_start_matches('?').to_owned();
    let request = end_session_request(&query);
    let issuer = issuer(state, &ctx)?;
    match state.accounts.confirm_end_session(&request, &issuer, token.hash()).await {
        Ok(ended) => {
            let url = ended.redirect.as_deref().unwrap_or(SIGN_OUT_PAGE);
            Ok(super::response::with_cookie(redirect(url, true)?, state.cookies.clear()))
        }
        Err(e) => end_session_refusal(e),
    }
}

/// `POST /api/auth/oauth2/token` (form): the authorization code and refresh token grants → `{access_token,
/// expires_in, expires_at, token_type, refresh_token?, scope, id_token?}`; errors `{error_description, error}` (401 `invalid_client`, with
/// `WWW-Authenticate: Basic` when Basic was tried). Never cached.
pub async fn token(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let issuer = issuer(state, &ctx)?;
    let known = ["grant_type", "code", "redirect_uri", "code_verifier", "refresh_token", "scope", "device_code"];
    let (mut p, client) = match client_form(state, req, &known).await? {
        Ok(parsed) => parsed,
        Err(refused) => return Ok(refused),
    };
    let request = TokenRequest {
        grant_type: take(&mut p, "grant_type"),
        code: take(&mut p, "code"),
        redirect_uri: take(&mut p, "redirect_uri"),
        code_verifier: take(&mut p, "code_verifier"),
        refresh_token: take(&mut p, "refresh_token"),
        scope: take(&mut p, "scope"),
        device_code: take(&mut p, "device_code"),
        ip: ctx.ip.to_string(),
        ..client
    };
    match state.accounts.token(&request, &issuer).await {
        Ok(tokens) => Ok(ok(&tokens)),
        Err(e) => token_refusal(e),
    }
}

/// `GET|POST /api/auth/oauth2/userinfo`: the token from `Authorization: Bearer`, or `access_token` in a POST
/// form (not both) → the claims of its scopes. 401 with `WWW-Authenticate: Bearer` (RFC 6750 §3) otherwise.
pub async fn userinfo(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(|t| t.trim().to_owned());
    let issuer = issuer(state, &ctx)?;
    let from_form = if req.method() == hyper::Method::POST {
        let body = extract::form_body(req, state.body_timeout()).await?;
        body.into_iter().find(|(k, _)| k == "access_token").map(|(_, v)| v)
    } else {
        extract::discard_body(req, state.body_timeout()).await;
        None
    };
    let challenge = |error: &str, description: &str, status: StatusCode| {
        let mut response = oauth_error(status, error, description);
        let value = format!("Bearer error=\"{error}\"");
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
        }
        response
    };
    let token = match (bearer, from_form) {
        (Some(_), Some(_)) => {
            return Ok(oauth_error(StatusCode::BAD_REQUEST, "invalid_request", "the token is given twice"));
        }
        (Some(t), None) | (None, Some(t)) => t,
        (None, None) => {
            let mut response =
                oauth_error(StatusCode::UNAUTHORIZED, "invalid_request", "authorization header not found");
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return Ok(response);
        }
    };
    match state.accounts.userinfo(&token, &issuer).await {
        Ok(info) => Ok(ok(&info)),
        Err(UserInfoError::InvalidToken(why)) => Ok(challenge("invalid_token", &why, StatusCode::UNAUTHORIZED)),
        Err(UserInfoError::InsufficientScope) => {
            Ok(challenge("insufficient_scope", "the token was not granted the openid scope", StatusCode::FORBIDDEN))
        }
        Err(UserInfoError::Unavailable(u)) => Err(u.into()),
    }
}

/// `POST /api/auth/oauth2/device_authorization` (RFC 8628 §3.1; form `scope`; the client's credentials as at the
/// token endpoint, a public client's `client_id` alone) → `{device_code, user_code, verification_uri,
/// verification_uri_complete, expires_in, interval}`; refusals as the token endpoint's; 429 past the address's
/// sign-up limit. Never cached.
pub async fn device_authorization(
    state: &AppState,
    ctx: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    let issuer = issuer(state, &ctx)?;
    let site = issuer.trim_end_matches("/api/auth").to_owned();
    let (mut p, client) = match client_form(state, req, &["scope"]).await? {
        Ok(parsed) => parsed,
        Err(refused) => return Ok(refused),
    };
    let request = TokenRequest { scope: take(&mut p, "scope"), ip: ctx.ip.to_string(), ..client };
    // Anyone holding a public client's id (it ships inside the tool) may ask, and each request is a record kept for
    // an hour and a half: as a sign-up stores an account, each counts against the address's sign-up limit, so one
    // address cannot fill the store (or, with a confidential client, try secrets) at the speed of the disk.
    state.rate_limits.load().check(super::rate_limits::Limited::SignUp, ctx.ip).map_err(Failure::too_many_requests)?;
    match state.accounts.device_authorization(&request, &site).await {
        Ok(started) => {
            let mut response = ok(&started);
            response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            Ok(response)
        }
        Err(e) => token_refusal(e),
    }
}

/// The `/device` page's calls are a step of a sign-in a person makes by hand: each counts against the address's
/// sign-in limit, so user codes (40 bits) cannot be tried in bulk.
fn device_limit(state: &AppState, ctx: &Ctx) -> Result<(), Failure> {
    state.rate_limits.load().check(super::rate_limits::Limited::SignIn, ctx.ip).map_err(Failure::too_many_requests)
}

fn device_refusal(e: DeviceError) -> Failure {
    match e {
        DeviceError::InvalidCode => Failure::bad_request("INVALID_USER_CODE", e.to_string()),
        DeviceError::MustEnrol => Failure::new(StatusCode::FORBIDDEN, "TWO_FACTOR_REQUIRED", e.to_string()),
        DeviceError::Impersonation => Failure::new(StatusCode::FORBIDDEN, "IMPERSONATION", e.to_string()),
        DeviceError::Unavailable(u) => u.into(),
    }
}

/// `GET /api/auth/oauth2/device?user_code=` (the `/device` page, with the session cookie) → `{user_code,
/// client_id, client_name, scope}` of the pending request the code names; 400 `INVALID_USER_CODE` for any code it
/// cannot use (malformed, unknown, expired, decided); 429 past the address's sign-in limit.
pub async fn device_request(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    extract::query_only(req.uri().query(), &["user_code"])?;
    let typed = extract::query_value(req.uri().query(), "user_code")
        .ok_or_else(|| Failure::validation("user_code is required"))?;
    device_limit(state, &ctx)?;
    match state.accounts.device_request(&current, &typed).await {
        Ok(found) => Ok(ok(&super::dto::DevicePending {
            client_id: &found.client_id,
            client_name: &found.client_name,
            scope: found.scopes.join(" "),
            user_code: &found.user_code,
        })),
        Err(e) => Err(device_refusal(e)),
    }
}

/// `POST /api/auth/oauth2/device` `{user_code, accept}` (the page's answer, with the session cookie) → `{success:
/// true}`: the request approved (remembered as a consent, audited) or denied; the device's next poll hears it.
pub async fn device_decision(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["user_code", "accept"])?;
    let typed = body.string("user_code")?.to_owned();
    let accept = body.optional_bool("accept")?.ok_or_else(|| Failure::validation("accept is required"))?;
    device_limit(state, &ctx)?;
    match state.accounts.decide_device(&current, &typed, accept).await {
        Ok(()) => Ok(ok(&SUCCESS)),
        Err(e) => Err(device_refusal(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cut without a decoder gives what the decoder gives, for every shape of pair, and the decoder is still
    /// used where there is something to decode.
    #[test]
    fn each_pair_reads_a_form_as_the_form_decoder_does() {
        let forms = [
            "",
            "&&",
            "a",
            "a=",
            "=b",
            "a=b=c",
            "a=1&a=2&",
            "&token=eyJ.eyJ.sig-_&token_type_hint=access_token",
            "a=%41%zz&b=x+y",
            "é=ü",
            "a=b%26c",
        ];
        for form in forms {
            let mut ours = Vec::new();
            each_pair(form.as_bytes(), |k, v| ours.push((k.into_owned(), v.into_owned())));
            let theirs: Vec<(String, String)> =
                url::form_urlencoded::parse(form.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
            assert_eq!(ours, theirs, "{form:?}");
        }
        let invalid = b"a=\xff";
        let mut ours = Vec::new();
        each_pair(invalid, |k, v| ours.push((k.into_owned(), v.into_owned())));
        assert_eq!(ours, vec![("a".to_owned(), "\u{fffd}".to_owned())], "invalid UTF-8 goes to the decoder");
    }
}
