//! `/api/auth/api-key/*`: the calls of `@better-auth/api-key` 1.7, which its `apiKeyClient()` makes (create, get,
//! list, update, delete), and the plugin's server-side calls (`verify`, `delete-all-expired-api-keys`), which here
//! are an administrator's. An administrator is this service's "server": they may name another user (`userId`) and
//! set the server-only properties (permissions, the request window, the quota); anyone else gets the plugin's 401
//! or 400 `SERVER_ONLY_PROPERTY`.

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde::Serialize;
use serde_json::Value;

use super::AppState;
use super::extract::{self, Ctx, Fields, Refusal};
use super::response::{Body, Failure, ok};
use crate::accounts::{ApiKeyError, Current, KeyChange, KeyOwner, NewKey, check_expires_in};
use crate::domain::api_key::{KeyName, KeyPermissions, KeyPrefix, MAX_METADATA_BYTES};
use crate::domain::{ApiKey, ApiKeyId, Timestamp, UserId};

/// The fields a client may not set (the plugin's server-only properties).
const SERVER_ONLY: [&str; 7] = [
    "permissions",
    "rateLimitMax",
    "rateLimitTimeWindow",
    "rateLimitEnabled",
    "refillAmount",
    "refillInterval",
    "remaining",
];

/// A key as the plugin's answers carry it: its row without the hash, `key` only when it is made.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct KeyBody<'a> {
    id: ApiKeyId,
    config_id: &'a str,
    name: Option<&'a str>,
    start: Option<&'a str>,
    prefix: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<&'a str>,
    reference_id: UserId,
    enabled: bool,
    expires_at: Option<String>,
    rate_limit_enabled: bool,
    rate_limit_time_window: Option<i64>,
    rate_limit_max: Option<i64>,
    request_count: i64,
    remaining: Option<i64>,
    refill_amount: Option<i64>,
    refill_interval: Option<i64>,
    last_refill_at: Option<String>,
    last_request: Option<String>,
    permissions: Option<Value>,
    metadata: Option<Value>,
    created_at: String,
    updated_at: String,
}

impl<'a> KeyBody<'a> {
    fn of(k: &'a ApiKey, secret: Option<&'a str>) -> Self {
        let usage = k.usage();
        let json = |text: &Option<String>| text.as_deref().and_then(|t| serde_json::from_str(t).ok());
        Self {
            id: k.id,
            config_id: &k.config_id,
            name: k.name.as_deref(),
            start: k.start.as_deref(),
            prefix: k.prefix.as_deref(),
            key: secret,
            reference_id: k.user_id,
            enabled: k.enabled,
            expires_at: k.expires_at.map(Timestamp::to_rfc3339),
            rate_limit_enabled: k.rate_limit_enabled,
            rate_limit_time_window: k.rate_limit_time_window_ms,
            rate_limit_max: k.rate_limit_max,
            request_count: usage.request_count,
            remaining: usage.remaining,
            refill_amount: k.refill_amount,
            refill_interval: k.refill_interval_ms,
            last_refill_at: usage.last_refill_at.map(Timestamp::to_rfc3339),
            last_request: usage.last_request.map(Timestamp::to_rfc3339),
            permissions: json(&k.permissions),
            metadata: json(&k.metadata),
            created_at: k.created_at.to_rfc3339(),
            updated_at: k.updated_at.to_rfc3339(),
        }
    }
}

fn refused(status: StatusCode, code: &'static str, message: &str) -> Failure {
    Failure::new(status, code, message)
}

fn unauthorized_session() -> Failure {
    refused(StatusCode::UNAUTHORIZED, "UNAUTHORIZED_SESSION", "Unauthorized or invalid session")
}

fn server_only() -> Failure {
    refused(
        StatusCode::BAD_REQUEST,
        "SERVER_ONLY_PROPERTY",
        "The property you're trying to set can only be set from the server auth instance only.",
    )
}

/// The caller for create and update, which the plugin answers `UNAUTHORIZED_SESSION` without a session.
async fn caller(state: &AppState, req: &Request<Incoming>, own_session: bool) -> Result<Current, Failure> {
    let found = if own_session {
        extract::signed_in_self(state, req.headers()).await
    } else {
        extract::signed_in(state, req.headers()).await
    };
    match found {
        Ok((_, current)) => Ok(current),
        Err(f) if f.status == StatusCode::UNAUTHORIZED => Err(unauthorized_session()),
        Err(f) => Err(f),
    }
}

/// Whose keys: the caller's own, or, for an administrator on their own session, the user `userId` names (the
/// plugin's server-side call). Anyone else naming a user gets the plugin's 401.
fn owner(state: &AppState, current: &Current, named: Option<&str>) -> Result<KeyOwner, Failure> {
    let by = current.user.id;
    let Some(named) = named else { return Ok(KeyOwner { owner: by, by }) };
    if current.administrator().is_none() {
        return Err(unauthorized_session());
    }
    let owner =
        UserId::parse(named).filter(|id| state.accounts.user(*id).is_some()).ok_or_else(unauthorized_session)?;
    Ok(KeyOwner { owner, by })
}

/// A change to the caller's own keys needs a fresh session (`[session] fresh_age_secs`, 403 `SESSION_NOT_FRESH`),
/// as the other ways into the account do (ASVS 7.5.1): a key is a lasting way in, and a stolen or forgotten old
/// session must not mint one. An administrator acting on another user's keys is audited as such and is not asked.
fn fresh_for_own(state: &AppState, current: &Current, who: &KeyOwner) -> Result<(), Failure> {
    if who.owner == current.user.id { extract::fresh(state, current) } else { Ok(()) }
}

/// A key id: one that is no UUID names no key.
fn key_id(text: &str) -> Result<ApiKeyId, Failure> {
    ApiKeyId::parse(text).ok_or_else(|| ApiKeyError::NotFound.into())
}

fn name(text: &str) -> Result<KeyName, Failure> {
    KeyName::parse(text).map_err(|e| Failure::bad_request("INVALID_NAME_LENGTH", e.to_string()))
}

/// `metadata`: an object, stored as its JSON text (bounded: it is held in memory with the key).
fn metadata(value: &Value) -> Result<String, Failure> {
    if !value.is_object() {
        return Err(Failure::bad_request("INVALID_METADATA_TYPE", "metadata must be an object or undefined"));
    }
    let text = value.to_string();
    if text.len() > MAX_METADATA_BYTES {
        return Err(Failure::validation(format!("[body.metadata] is larger than {MAX_METADATA_BYTES} bytes")));
    }
    Ok(text)
}

/// `permissions`: `{resource: [action, …]}`.
fn permissions(value: &Value) -> Result<KeyPermissions, Failure> {
    serde_json::from_value(value.clone())
        .map(KeyPermissions)
        .map_err(|_| Failure::validation("[body.permissions] Invalid input: expected record of string arrays"))
}

/// A whole number (`expiresIn`, the window, the quota), as the plugin's `z.number()`.
fn number(body: &Fields, key: &str) -> Result<Option<i64>, Failure> {
    Ok(body.optional_u64(key)?.map(|n| i64::try_from(n).unwrap_or(i64::MAX)))
}

/// The server-only properties of `body` (only an administrator's call gets this far with any).
fn server_fields(body: &Fields) -> Result<ServerFields, Failure> {
    let refill = match (number(body, "refillAmount")?, number(body, "refillInterval")?) {
        (Some(amount), Some(interval)) => Some((amount, interval)),
        (None, None) => None,
        (Some(_), None) => {
            return Err(Failure::bad_request(
                "REFILL_AMOUNT_AND_INTERVAL_REQUIRED",
                "refillAmount is required when refillInterval is provided",
            ));
        }
        (None, Some(_)) => {
            return Err(Failure::bad_request(
                "REFILL_INTERVAL_AND_AMOUNT_REQUIRED",
                "refillInterval is required when refillAmount is provided",
            ));
        }
    };
    Ok(ServerFields {
        permissions: body.get("permissions").filter(|v| !v.is_null()).map(permissions).transpose()?,
        rate_limit_enabled: body.optional_bool("rateLimitEnabled")?,
        rate_limit_time_window_ms: number(body, "rateLimitTimeWindow")?,
        rate_limit_max: number(body, "rateLimitMax")?,
        remaining: number(body, "remaining")?,
        refill,
    })
}

struct ServerFields {
    permissions: Option<KeyPermissions>,
    rate_limit_enabled: Option<bool>,
    rate_limit_time_window_ms: Option<i64>,
    rate_limit_max: Option<i64>,
    remaining: Option<i64>,
    refill: Option<(i64, i64)>,
}

/// Refuses a client's server-only property (`remaining: null` is the plugin's default, not a property set).
fn refuse_server_only(current: &Current, body: &Fields) -> Result<(), Failure> {
    let is_server = current.administrator().is_some();
    let set = SERVER_ONLY.iter().any(|f| body.get(f).is_some_and(|v| !(v.is_null() && *f == "remaining")));
    if set && !is_server { Err(server_only()) } else { Ok(()) }
}

/// `POST create {name?, expiresIn?, prefix?, metadata?, userId? …}`: the key, with its secret (shown only now).
pub async fn create(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    // A key outlives the session that makes it: an administrator impersonating someone makes none for them.
    let current = caller(state, &req, true).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    let mut known = vec!["name", "expiresIn", "prefix", "metadata", "userId", "configId", "organizationId"];
    known.extend(SERVER_ONLY);
    body.only(&known)?;
    let who = owner(state, &current, body.optional_string("userId")?)?;
    fresh_for_own(state, &current, &who)?;
    refuse_server_only(&current, &body)?;
    if body.optional_string("organizationId")?.is_some() {
        return Err(Failure::bad_request(
            "ORGANIZATION_PLUGIN_REQUIRED",
            "Keys owned by an organization are not offered: a key belongs to a user",
        ));
    }
    let config = body.optional_string("configId")?;
    if config.is_some_and(|c| c != "default") {
        return Err(Failure::bad_request(
            "NO_DEFAULT_API_KEY_CONFIGURATION_FOUND",
            "Only the default configuration exists",
        ));
    }
    let expires_in =
        body.get("expiresIn").filter(|v| !v.is_null()).map(|_| body.optional_u64("expiresIn")).transpose()?.flatten();
    if expires_in == Some(0) {
        return Err(Failure::validation("[body.expiresIn] Too small: expected number to be >=1"));
    }
    let prefix = body
        .optional_string("prefix")?
        .map(|p| {
            KeyPrefix::parse(p).map_err(|e| match e {
                crate::domain::api_key::KeyFieldError::PrefixLength => {
                    Failure::bad_request("INVALID_PREFIX_LENGTH", e.to_string())
                }
                _ => Failure::validation(format!("[body.prefix] {e}")),
            })
        })
        .transpose()?;
    let metadata_value = body.get("metadata").filter(|v| !v.is_null());
    let metadata = match metadata_value {
        Some(_) if !state.accounts.api_key_metadata_enabled() => {
            return Err(Failure::bad_request("METADATA_DISABLED", "Metadata is disabled."));
        }
        Some(v) => Some(metadata(v)?),
        None => None,
    };
    let server = server_fields(&body)?;
    let new = NewKey {
        name: body.optional_string("name")?.filter(|n| !n.is_empty()).map(name).transpose()?,
        prefix,
        expires_in,
        metadata,
        permissions: server.permissions,
        rate_limit_enabled: server.rate_limit_enabled,
        rate_limit_time_window_ms: server.rate_limit_time_window_ms,
        rate_limit_max: server.rate_limit_max,
        remaining: server.remaining,
        refill: server.refill,
    };
    let (secret, key) = state.accounts.create_api_key(who, new, ctx.ip.to_string()).await?;
    Ok(ok(&KeyBody::of(&key, Some(secret.as_str()))))
}

/// `GET get?id=`: the caller's key (another's: 404).
pub async fn get(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    let query = req.uri().query();
    extract::query_only(query, &["id", "configId", "userId"])?;
    let id = extract::query_value(query, "id")
        .ok_or_else(|| Failure::validation("[query.id] Invalid input: expected string, received undefined"))?;
    let who = owner(state, &current, extract::query_value(query, "userId").as_deref())?;
    let key = state.accounts.api_key(who.owner, key_id(&id)?)?;
    Ok(ok(&KeyBody::of(&key, None)))
}

/// `GET list?limit&offset&sortBy&sortDirection`: `{apiKeys, total}` (with `limit` and `offset` when given).
pub async fn list(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    let query = req.uri().query();
    extract::query_only(query, &["limit", "offset", "sortBy", "sortDirection", "configId", "userId"])?;
    let whole = |name: &str| -> Result<Option<usize>, Failure> {
        extract::query_value(query, name)
            .map(|v| {
                v.parse::<usize>().map_err(|_| {
                    Failure::validation(format!("[query.{name}] Invalid input: expected a whole number from 0 up"))
                })
            })
            .transpose()
    };
    let (limit, offset) = (whole("limit")?, whole("offset")?);
    let descending = match extract::query_value(query, "sortDirection").as_deref() {
        None | Some("asc") => false,
        Some("desc") => true,
        Some(_) => {
            return Err(Failure::validation("[query.sortDirection] Invalid option: expected one of \"asc\"|\"desc\""));
        }
    };
    let who = owner(state, &current, extract::query_value(query, "userId").as_deref())?;
    let mut keys = state.accounts.api_keys_of(who.owner);
    if extract::query_value(query, "configId").is_some_and(|c| c != "default") {
        keys.clear();
    }
    if let Some(field) = extract::query_value(query, "sortBy") {
        let text = |k: &ApiKey| -> Option<String> {
            match field.as_str() {
                "createdAt" => Some(k.created_at.to_rfc3339()),
                "updatedAt" => Some(k.updated_at.to_rfc3339()),
                "expiresAt" => k.expires_at.map(Timestamp::to_rfc3339),
                "name" => k.name.clone(),
                "prefix" => k.prefix.clone(),
                "start" => k.start.clone(),
                _ => None,
            }
        };
        if !["createdAt", "updatedAt", "expiresAt", "name", "prefix", "start"].contains(&field.as_str()) {
            return Err(Failure::validation(format!("[query.sortBy] cannot sort by {field:?}")));
        }
        // As the plugin sorts in memory: nulls first going up.
        keys.sort_by_key(|k| text(k));
        if descending {
            keys.reverse();
        }
    }
    let total = keys.len();
    let page: Vec<KeyBody<'_>> =
        keys.iter().skip(offset.unwrap_or(0)).take(limit.unwrap_or(usize::MAX)).map(|k| KeyBody::of(k, None)).collect();
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Listed<'a> {
        api_keys: Vec<KeyBody<'a>>,
        total: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        limit: Option<usize>,
        #[serde(skip_serializing_if = "Option::is_none")]
        offset: Option<usize>,
    }
    Ok(ok(&Listed { api_keys: page, total, limit, offset }))
}

/// `POST update {keyId, name?, enabled?, expiresIn?, metadata?, userId? …}`: the key as changed.
pub async fn update(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let current = caller(state, &req, false).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    let mut known = vec!["keyId", "name", "enabled", "expiresIn", "metadata", "userId", "configId"];
    known.extend(SERVER_ONLY);
    body.only(&known)?;
    let who = owner(state, &current, body.optional_string("userId")?)?;
    fresh_for_own(state, &current, &who)?;
    refuse_server_only(&current, &body)?;
    let id = key_id(body.string("keyId")?)?;
    let expires_at = match body.get("expiresIn") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(_) => {
            let secs = body.optional_u64("expiresIn")?.unwrap_or(0);
            if secs == 0 {
                return Err(Failure::validation("[body.expiresIn] Too small: expected number to be >=1"));
            }
            check_expires_in(secs)?;
            Some(Some(Timestamp::now().plus(std::time::Duration::from_secs(secs))))
        }
    };
    let server = server_fields(&body)?;
    let change = KeyChange {
        name: body.optional_string("name")?.map(name).transpose()?,
        enabled: body.optional_bool("enabled")?,
        expires_at,
        // As the plugin: metadata is ignored, not refused, while it is disabled.
        metadata: match body.get("metadata").filter(|v| !v.is_null()) {
            Some(v) if state.accounts.api_key_metadata_enabled() => Some(metadata(v)?),
            _ => None,
        },
        rate_limit_enabled: server.rate_limit_enabled,
        rate_limit_time_window_ms: server.rate_limit_time_window_ms,
        rate_limit_max: server.rate_limit_max,
        remaining: server.remaining,
        refill: server.refill,
        permissions: body.has("permissions").then(|| server.permissions.map(|p| p.to_json())),
    };
    let key = state.accounts.update_api_key(who, id, change, ctx.ip.to_string()).await?;
    Ok(ok(&KeyBody::of(&key, None)))
}

/// `POST delete {keyId, userId?}`: `{success: true}`.
pub async fn delete(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (_, current) = extract::signed_in(state, req.headers()).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["keyId", "userId", "configId"])?;
    let who = owner(state, &current, body.optional_string("userId")?)?;
    fresh_for_own(state, &current, &who)?;
    let id = key_id(body.string("keyId")?)?;
    state.accounts.delete_api_key(who, id, ctx.ip.to_string()).await?;
    Ok(ok(&super::dto::SUCCESS))
}

/// `POST verify {key, permissions?}` (an administrator's; the plugin's server-side `verifyApiKey`): `{valid,
/// error, key}`. A use of the key, counted like one through the header.
pub async fn verify(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Coded("FORBIDDEN")).await?;
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["key", "permissions", "configId"])?;
    let presented = body.string("key")?;
    let asked = body.get("permissions").filter(|v| !v.is_null()).map(permissions).transpose()?;
    let verified = state.accounts.verify_api_key(presented, asked.as_ref()).await?;
    #[derive(Serialize)]
    struct Error {
        message: String,
        code: &'static str,
    }
    #[derive(Serialize)]
    struct Verified<'a> {
        valid: bool,
        error: Option<Error>,
        key: Option<KeyBody<'a>>,
    }
    let error = verified.error.map(|e| {
        let f = Failure::from(e);
        Error { message: f.message, code: f.code }
    });
    Ok(ok(&Verified {
        valid: verified.key.is_some(),
        error,
        key: verified.key.as_deref().map(|k| KeyBody::of(k, None)),
    }))
}

/// `POST delete-all-expired-api-keys` (an administrator's): `{success: true, error: null}`.
pub async fn delete_all_expired(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Coded("FORBIDDEN")).await?;
    extract::json_object(req, false, state.body_timeout()).await?;
    state.accounts.sweep_expired_api_keys().await?;
    #[derive(Serialize)]
    struct Swept {
        error: Option<()>,
        success: bool,
    }
    Ok(ok(&Swept { error: None, success: true }))
}
