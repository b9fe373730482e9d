//! The SCIM User resource (RFC 7643 §4.1, with the enterprise extension §4.3): a body read into what the account
//! needs and what the directory's record keeps, the record rendered back, and PATCH (RFC 7644 §3.5.2) applied to
//! the rendered resource, which is then read again as a replacement would be, so one set of rules checks both.

use serde_json::{Map, Value, json};

use super::Fault;
use super::filter::{self, ENTERPRISE_SCHEMA, Filter, USER_SCHEMA, member};
use crate::domain::{Email, Name, Password, Timestamp};
use crate::store::ScimUserRecordV1;

pub const PATCH_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
/// At most this many values of a multi-valued attribute (the plugin's limit for e-mails).
const MAX_VALUES: usize = 20;
const MAX_USER_NAME: usize = 256;

/// Attributes kept as the directory sent them, by their RFC 7643 names: the single-valued strings, the complex
/// `name`, and the multi-valued ones. Unknown attributes are ignored (RFC 7644 §3.3); `password` is never kept in
/// the record (it sets the account's password, see [`password`], and is never returned), nor `groups` (read-only).
const STRINGS: &[&str] =
    &["displayName", "nickName", "profileUrl", "title", "userType", "preferredLanguage", "locale", "timezone"];
const MULTI: &[&str] =
    &["emails", "phoneNumbers", "ims", "photos", "addresses", "entitlements", "roles", "x509Certificates"];
/// Never written by a client (RFC 7643 §3.1, §4.1.2).
const READ_ONLY: &[&str] = &["id", "meta", "groups"];

/// A User body, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct UserInput {
    pub user_name: String,
    pub external_id: Option<String>,
    pub active: bool,
    /// The account's address: the primary e-mail, else the first, else `userName` when it is an address.
    pub email: Email,
    /// The account's name: `displayName`, else `name.formatted`, else given and family names, else `userName`.
    pub name: Name,
    /// The rest, as stored.
    pub attributes: Map<String, Value>,
}

fn invalid(detail: impl Into<String>) -> Fault {
    Fault::bad("invalidValue", detail)
}

/// The canonical name of a known attribute, matched without case.
fn canonical(name: &str) -> Option<&'static str> {
    ["userName", "externalId", "active", "name", "schemas", "password"]
        .iter()
        .chain(STRINGS)
        .chain(MULTI)
        .chain(READ_ONLY)
        .find(|k| k.eq_ignore_ascii_case(name))
        .copied()
}

/// The `password` a body (or a resource after PATCH) sets, if any: a string of the length any password must have,
/// else `invalidValue`. The record and the rendered resource never hold one (`returned: never`), so a password in
/// a patched resource is one the operations set.
pub fn password(body: &Value) -> Result<Option<Password>, Fault> {
    match member(body, "password") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(raw)) => Password::new(raw).map(Some).map_err(|e| invalid(e.to_string())),
        Some(_) => Err(invalid("password must be a string")),
    }
}

/// Entra ID sends booleans as the strings `"True"`/`"False"`.
fn boolean(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) if s.eq_ignore_ascii_case("true") => Some(true),
        Value::String(s) if s.eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}

pub fn parse(body: &Value) -> Result<UserInput, Fault> {
    let Some(object) = body.as_object() else { return Err(invalid("the body must be a JSON object")) };
    let schemas = member(body, "schemas").and_then(Value::as_array);
    let has_user_schema =
        schemas.is_some_and(|s| s.iter().any(|v| v.as_str().is_some_and(|s| s.eq_ignore_ascii_case(USER_SCHEMA))));
    if !has_user_schema {
        return Err(invalid(format!("schemas must include {USER_SCHEMA}")));
    }
    let user_name = match member(body, "userName") {
        Some(Value::String(s)) if !s.trim().is_empty() && s.chars().count() <= MAX_USER_NAME => s.trim().to_owned(),
        Some(Value::String(_)) => return Err(invalid(format!("userName must be 1 to {MAX_USER_NAME} characters"))),
        _ => return Err(invalid("userName is required")),
    };
    let external_id = match member(body, "externalId") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 1024 => Some(s.clone()),
        Some(_) => return Err(invalid("externalId must be a non-empty string")),
    };
    let active = match member(body, "active") {
        None | Some(Value::Null) => true,
        Some(v) => boolean(v).ok_or_else(|| invalid("active must be a boolean"))?,
    };
    let mut attributes = Map::new();
    for (key, value) in object {
        if value.is_null() {
            continue;
        }
        if key.eq_ignore_ascii_case(ENTERPRISE_SCHEMA) {
            let Some(ext) = value.as_object() else {
                return Err(invalid(format!("{ENTERPRISE_SCHEMA} must be an object")));
            };
            if !ext.is_empty() {
                attributes.insert(ENTERPRISE_SCHEMA.to_owned(), value.clone());
            }
            continue;
        }
        let Some(name) = canonical(key) else { continue };
        if STRINGS.contains(&name) {
            if !value.is_string() {
                return Err(invalid(format!("{name} must be a string")));
            }
            attributes.insert(name.to_owned(), value.clone());
        } else if MULTI.contains(&name) {
            let Some(items) = value.as_array() else { return Err(invalid(format!("{name} must be an array"))) };
            if items.len() > MAX_VALUES {
                return Err(invalid(format!("{name} may hold at most {MAX_VALUES} values")));
            }
            let mut primaries = 0;
            for item in items {
                let Some(fields) = item.as_object() else {
                    return Err(invalid(format!("each of {name} must be an object")));
                };
                if fields.iter().any(|(k, v)| k.eq_ignore_ascii_case("primary") && boolean(v) == Some(true)) {
                    primaries += 1;
                }
            }
            if primaries > 1 {
                return Err(invalid(format!("at most one of {name} may be primary")));
            }
            if !items.is_empty() {
                attributes.insert(name.to_owned(), Value::Array(items.iter().map(normalise_value).collect()));
            }
        } else if name == "name" {
            let Some(parts) = value.as_object() else { return Err(invalid("name must be an object")) };
            if parts.values().any(|v| !v.is_string() && !v.is_null()) {
                return Err(invalid("the parts of name must be strings"));
            }
            attributes.insert("name".to_owned(), value.clone());
        }
    }
    let email = primary_email(&attributes, &user_name)?;
    // `emails` is required in our Schemas (an account is its address), but a `userName` that is an address stands
    // for it, as in @better-auth/scim, which then keeps that address as the one primary e-mail: so does this, and
    // every User read back has the `emails` its schema promises.
    attributes.entry("emails").or_insert_with(|| json!([{"value": email.as_str(), "primary": true}]));
    let name = account_name(&attributes, &user_name)?;
    Ok(UserInput { user_name, external_id, active, email, name, attributes })
}

/// One value of a multi-valued attribute, its `primary` a boolean (Entra sends `"True"`).
fn normalise_value(item: &Value) -> Value {
    let mut item = item.clone();
    if let Some(fields) = item.as_object_mut()
        && let Some((key, v)) = fields.iter_mut().find(|(k, _)| k.eq_ignore_ascii_case("primary"))
    {
        let key = key.clone();
        if let Some(b) = boolean(v) {
            fields.remove(&key);
            fields.insert("primary".into(), Value::Bool(b));
        }
    }
    item
}

fn primary_email(attributes: &Map<String, Value>, user_name: &str) -> Result<Email, Fault> {
    let emails: Vec<&Value> =
        attributes.get("emails").and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default();
    let is_primary = |e: &&&Value| member(e, "primary").and_then(boolean) == Some(true);
    let chosen = emails.iter().find(is_primary).or(emails.first());
    match chosen {
        Some(e) => {
            let value =
                member(e, "value").and_then(Value::as_str).ok_or_else(|| invalid("each email must have a value"))?;
            Email::parse(value).map_err(|_| invalid(format!("{value:?} is not a valid email address")))
        }
        None => Email::parse(user_name)
            .map_err(|_| invalid("emails must contain an email when userName is not an email address")),
    }
}

fn account_name(attributes: &Map<String, Value>, user_name: &str) -> Result<Name, Fault> {
    let text =
        |v: Option<&Value>| v.and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned);
    let name = attributes.get("name");
    let joined = || {
        let parts: Vec<String> =
            ["givenName", "familyName"].iter().filter_map(|p| text(name.and_then(|n| member(n, p)))).collect();
        (!parts.is_empty()).then(|| parts.join(" "))
    };
    let chosen = text(attributes.get("displayName"))
        .or_else(|| text(name.and_then(|n| member(n, "formatted"))))
        .or_else(joined)
        .unwrap_or_else(|| user_name.to_owned());
    Name::parse(&chosen).or_else(|_| Name::parse(user_name)).map_err(|e| invalid(format!("the name: {e}")))
}

/// The record the directory's body makes for organization `org`'s account `user`.
pub fn record(
    org: [u8; 16],
    user: [u8; 16],
    input: &UserInput,
    created: Timestamp,
    now: Timestamp,
) -> ScimUserRecordV1 {
    ScimUserRecordV1 {
        org,
        user,
        user_name: input.user_name.clone(),
        external_id: input.external_id.clone(),
        active: input.active,
        attributes: Value::Object(input.attributes.clone()).to_string(),
        created_at_ms: created.as_millis(),
        updated_at_ms: now.as_millis(),
    }
}

/// The resource as the directory reads it; `base` is the SCIM root's absolute URL.
pub fn render(record: &ScimUserRecordV1, base: &str) -> Value {
    let id = uuid::Uuid::from_bytes(record.user).to_string();
    let mut out = Map::new();
    let attributes: Map<String, Value> = serde_json::from_str(&record.attributes).unwrap_or_default();
    let mut schemas = vec![json!(USER_SCHEMA)];
    if attributes.contains_key(ENTERPRISE_SCHEMA) {
        schemas.push(json!(ENTERPRISE_SCHEMA));
    }
    out.insert("schemas".into(), Value::Array(schemas));
    out.insert("id".into(), json!(id));
    if let Some(external) = &record.external_id {
        out.insert("externalId".into(), json!(external));
    }
    out.insert("userName".into(), json!(record.user_name));
    out.insert("active".into(), json!(record.active));
    out.extend(attributes);
    let location = format!("{base}/Users/{id}");
    out.insert(
        "meta".into(),
        json!({
            "resourceType": "User",
            "created": Timestamp::from_millis(record.created_at_ms).to_rfc3339(),
            "lastModified": Timestamp::from_millis(record.updated_at_ms).to_rfc3339(),
            "location": location,
        }),
    );
    Value::Object(out)
}

/// One operation of a PATCH body: its `op` (lower case; `replace` when absent) and what it names.
pub struct Operation<'a> {
    pub op: String,
    pub target: Target<'a>,
}

/// A path and its value, or (without a path) the object whose members are each a path and its value.
pub enum Target<'a> {
    Path(&'a str, Option<&'a Value>),
    Fields(&'a Map<String, Value>),
}

/// The operations of a PATCH body (RFC 7644 §3.5.2), checked the same way for every resource: the PatchOp schema,
/// 1 to 100 operations, `op` add/replace/remove, a string path, and an object value where there is no path.
pub fn operations(body: &Value) -> Result<Vec<Operation<'_>>, Fault> {
    let schemas = member(body, "schemas").and_then(Value::as_array);
    if !schemas.is_some_and(|s| s.iter().any(|v| v.as_str().is_some_and(|s| s.eq_ignore_ascii_case(PATCH_SCHEMA)))) {
        return Err(invalid(format!("schemas must be [\"{PATCH_SCHEMA}\"]")));
    }
    let Some(operations) = member(body, "Operations").and_then(Value::as_array) else {
        return Err(invalid("Operations must be an array"));
    };
    if operations.is_empty() || operations.len() > 100 {
        return Err(invalid("Operations must hold 1 to 100 operations"));
    }
    let mut out = Vec::with_capacity(operations.len());
    for operation in operations {
        let op = match member(operation, "op") {
            None => "replace".to_owned(),
            Some(Value::String(op)) => op.to_ascii_lowercase(),
            Some(_) => return Err(invalid("op must be a string")),
        };
        if !["add", "replace", "remove"].contains(&op.as_str()) {
            return Err(invalid(format!("op must be add, replace or remove, not {op:?}")));
        }
        let value = member(operation, "value");
        let target = match member(operation, "path") {
            None | Some(Value::Null) => {
                if op == "remove" {
                    return Err(Fault::bad("noTarget", "remove needs a path"));
                }
                let Some(fields) = value.and_then(Value::as_object) else {
                    return Err(invalid("an operation without a path needs an object value"));
                };
                Target::Fields(fields)
            }
            Some(Value::String(path)) => Target::Path(path, value),
            Some(_) => return Err(Fault::bad("invalidPath", "path must be a string")),
        };
        out.push(Operation { op, target });
    }
    Ok(out)
}

/// Applies a PATCH body to the rendered resource `resource`; the caller reads the result with [`parse`].
pub fn patch(resource: &mut Value, body: &Value) -> Result<(), Fault> {
    for Operation { op, target } in operations(body)? {
        match target {
            Target::Path(path, value) => apply(resource, &op, path, value)?,
            Target::Fields(fields) => {
                for (key, v) in fields {
                    if restates_id(resource, key, v) {
                        continue;
                    }
                    if key.eq_ignore_ascii_case(ENTERPRISE_SCHEMA) && v.is_object() {
                        for (sub, sv) in v.as_object().into_iter().flatten() {
                            apply(resource, &op, &format!("{ENTERPRISE_SCHEMA}:{sub}"), Some(sv))?;
                        }
                    } else {
                        apply(resource, &op, key, Some(v))?;
                    }
                }
            }
        }
    }
    Ok(())
}

fn apply(resource: &mut Value, op: &str, path: &str, value: Option<&Value>) -> Result<(), Fault> {
    let path = filter::parse_path(path).map_err(|e| Fault::bad("invalidPath", e.0))?;
    if path.attr.attr == ENTERPRISE_SCHEMA {
        return extension(resource, op, &path, value);
    }
    let attr = match &path.attr.schema {
        Some(_) => path.attr.attr.clone(),
        None => match canonical(&path.attr.attr) {
            Some(name) if READ_ONLY.contains(&name) || name == "schemas" => {
                return Err(Fault::bad("mutability", format!("{name} cannot be changed")));
            }
            Some(name) => name.to_owned(),
            None => return Err(Fault::bad("invalidPath", format!("unknown attribute {:?}", path.attr.attr))),
        },
    };
    if op != "remove" && value.is_none() {
        return Err(invalid(format!("{op} needs a value")));
    }
    let root = resource.as_object_mut().expect("a rendered resource is an object");
    let container = match &path.attr.schema {
        Some(schema) => root.entry(schema.clone()).or_insert_with(|| json!({})).as_object_mut(),
        None => Some(root),
    };
    let Some(container) = container else { return Err(invalid(format!("{ENTERPRISE_SCHEMA} must be an object"))) };
    let existing_key = container.keys().find(|k| k.eq_ignore_ascii_case(&attr)).cloned().unwrap_or(attr.clone());
    let value = value.cloned().unwrap_or(Value::Null);
    match (&path.filter, &path.attr.sub) {
        (None, None) => match op {
            "remove" => {
                container.remove(&existing_key);
            }
            // `add` to a multi-valued attribute appends (RFC 7644 §3.5.2.1); elsewhere add and replace set.
            "add" if MULTI.contains(&attr.as_str()) => {
                let mut items = container.get(&existing_key).and_then(Value::as_array).cloned().unwrap_or_default();
                match value {
                    Value::Array(new) => {
                        items.extend(new.into_iter().filter(|v| !items_contains(&items, v)).collect::<Vec<_>>())
                    }
                    other => items.push(other),
                }
                container.insert(existing_key, Value::Array(items));
            }
            _ if attr == "active" => {
                // Entra ID sends a one-element array.
                let single = match value {
                    Value::Array(mut a) if a.len() == 1 => a.remove(0),
                    other => other,
                };
                container.insert(existing_key, single);
            }
            _ => {
                container.insert(existing_key, value);
            }
        },
        (None, Some(sub)) => {
            let target = container.entry(existing_key).or_insert_with(|| json!({}));
            match target {
                Value::Object(fields) => set_sub(fields, sub, op, value),
                Value::Array(items) => {
                    for item in items.iter_mut().filter_map(Value::as_object_mut) {
                        set_sub(item, sub, op, value.clone());
                    }
                }
                _ => return Err(Fault::bad("invalidPath", format!("{attr} has no sub-attribute {sub}"))),
            }
        }
        (Some(_), Some(_)) => return Err(Fault::bad("invalidPath", "invalid path")),
        (Some(which), None) => {
            let mut items = container.get(&existing_key).and_then(Value::as_array).cloned().unwrap_or_default();
            let matched: Vec<usize> = (0..items.len()).filter(|&i| which.matches(&items[i])).collect();
            match (op, path.sub.as_deref()) {
                ("remove", None) => {
                    // RFC 7644 §3.5.2.2: the values the filter matches are removed (`emails[type eq "home"]`).
                    if matched.is_empty() {
                        return Err(Fault::bad("noTarget", "no value matches the filter"));
                    }
                    let mut i = 0;
                    items.retain(|_| {
                        i += 1;
                        !matched.contains(&(i - 1))
                    });
                }
                ("remove", Some(sub)) => {
                    for &i in &matched {
                        if let Some(item) = items[i].as_object_mut() {
                            set_sub(item, sub, "remove", Value::Null);
                        }
                    }
                }
                (_, Some(sub)) if matched.is_empty() => {
                    // `emails[type eq "work"].value` with no work e-mail yet: Entra ID adds one this way.
                    let Some(mut item) = seed(which) else {
                        return Err(Fault::bad("noTarget", "no value matches the filter"));
                    };
                    set_sub(&mut item, sub, op, value);
                    items.push(Value::Object(item));
                }
                (_, Some(sub)) => {
                    for &i in &matched {
                        if let Some(item) = items[i].as_object_mut() {
                            set_sub(item, sub, op, value.clone());
                        }
                    }
                }
                (_, None) => {
                    let Some(fields) = value.as_object() else {
                        return Err(invalid("a filtered value is replaced by an object"));
                    };
                    if matched.is_empty() {
                        return Err(Fault::bad("noTarget", "no value matches the filter"));
                    }
                    for &i in &matched {
                        if let Some(item) = items[i].as_object_mut() {
                            item.extend(fields.clone());
                        }
                    }
                }
            }
            if items.is_empty() {
                container.remove(&existing_key);
            } else {
                container.insert(existing_key, Value::Array(items));
            }
        }
    }
    Ok(())
}

/// Whether a pathless operation's member `key: v` is the resource's own `id` again: Okta's Group rename sends
/// `{"id": …, "displayName": …}`, and an unchanged value changes nothing (another id is still refused).
pub(super) fn restates_id(resource: &Value, key: &str, v: &Value) -> bool {
    key.eq_ignore_ascii_case("id") && member(resource, "id").is_some_and(|id| id == v)
}

/// An operation on the enterprise extension as a whole (its URN as the path): `add` sets the sub-attributes given
/// (RFC 7644 §3.5.2.1: a complex attribute's value is merged), `replace` puts the object given in its place, and
/// `remove` takes the extension away.
fn extension(resource: &mut Value, op: &str, path: &filter::PatchPath, value: Option<&Value>) -> Result<(), Fault> {
    if path.filter.is_some() {
        return Err(Fault::bad("invalidPath", format!("{ENTERPRISE_SCHEMA} is not multi-valued")));
    }
    let root = resource.as_object_mut().expect("a rendered resource is an object");
    let key = root.keys().find(|k| k.eq_ignore_ascii_case(ENTERPRISE_SCHEMA)).cloned();
    let key = key.unwrap_or_else(|| ENTERPRISE_SCHEMA.to_owned());
    if op == "remove" {
        root.remove(&key);
        return Ok(());
    }
    let Some(Value::Object(given)) = value else {
        return Err(invalid(format!("{op} of {ENTERPRISE_SCHEMA} needs an object value")));
    };
    match root.get_mut(&key) {
        Some(Value::Object(current)) if op == "add" => current.extend(given.clone()),
        _ => {
            root.insert(key, Value::Object(given.clone()));
        }
    }
    Ok(())
}

fn items_contains(items: &[Value], v: &Value) -> bool {
    items.iter().any(|i| i == v)
}

fn set_sub(fields: &mut Map<String, Value>, sub: &str, op: &str, value: Value) {
    let key = fields.keys().find(|k| k.eq_ignore_ascii_case(sub)).cloned().unwrap_or_else(|| sub.to_owned());
    if op == "remove" || value.is_null() {
        fields.remove(&key);
    } else {
        fields.insert(key, value);
    }
}

/// The value a filter of plain `eq`s describes (`type eq "work"` → `{"type": "work"}`), to add one that matches.
fn seed(which: &Filter) -> Option<Map<String, Value>> {
    match which {
        Filter::Compare(path, filter::Op::Eq, v) if path.sub.is_none() && path.schema.is_none() => {
            Some(Map::from_iter([(path.attr.clone(), v.clone())]))
        }
        Filter::And(a, b) => {
            let mut out = seed(a)?;
            out.extend(seed(b)?);
            Some(out)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body() -> Value {
        json!({
            "schemas": [USER_SCHEMA],
            "userName": "alice@example.com",
            "name": {"givenName": "Alice", "familyName": "Liddell"},
            "emails": [{"value": "alice@example.com", "type": "work", "primary": true},
                       {"value": "alice@home.example", "type": "home"}],
            "password": "never kept",
            "unknownThing": 1
        })
    }

    fn rendered() -> Value {
        let input = parse(&body()).unwrap();
        render(&record([1; 16], [2; 16], &input, Timestamp::from_millis(0), Timestamp::from_millis(0)), "http://x")
    }

    fn patched(ops: Value) -> Result<UserInput, Fault> {
        let mut resource = rendered();
        patch(&mut resource, &json!({"schemas": [PATCH_SCHEMA], "Operations": ops}))?;
        parse(&resource)
    }

    #[test]
    fn a_body_gives_the_account_its_address_and_name_and_keeps_no_password() {
        let input = parse(&body()).unwrap();
        assert_eq!(input.email.as_str(), "alice@example.com");
        assert_eq!(input.name.as_str(), "Alice Liddell");
        assert!(input.active);
        assert!(!input.attributes.contains_key("password") && !input.attributes.contains_key("unknownThing"));
        let r = rendered();
        assert_eq!(r["meta"]["location"], "http://x/Users/02020202-0202-0202-0202-020202020202");
        assert!(r.get("password").is_none());
    }

    /// A password set by PATCH (with a path, or pathless) is in the patched resource for the facade to take; a
    /// malformed one is an `invalidValue`; the record never keeps it.
    #[test]
    fn a_password_is_read_from_a_body_or_a_patched_resource() {
        assert_eq!(password(&body()).unwrap().unwrap().as_str(), "never kept");
        assert!(password(&rendered()).unwrap().is_none(), "the resource never holds one");
        for ops in [
            json!([{"op": "replace", "path": "password", "value": "a long enough phrase"}]),
            json!([{"op": "Replace", "value": {"password": "a long enough phrase"}}]),
        ] {
            let mut resource = rendered();
            patch(&mut resource, &json!({"schemas": [PATCH_SCHEMA], "Operations": ops})).unwrap();
            assert_eq!(password(&resource).unwrap().unwrap().as_str(), "a long enough phrase");
            assert!(!parse(&resource).unwrap().attributes.contains_key("password"));
        }
        for bad in
            [json!({"password": 42}), json!({"password": "short"}), json!({"password": ["a long enough phrase"]})]
        {
            assert_eq!(password(&bad).unwrap_err().scim_type, Some("invalidValue"), "{bad}");
        }
    }

    #[test]
    fn malformed_bodies_are_invalid_values() {
        for bad in [
            json!([]),
            json!({"userName": "a@b.c"}),
            json!({"schemas": [USER_SCHEMA]}),
            json!({"schemas": [USER_SCHEMA], "userName": ""}),
            json!({"schemas": [USER_SCHEMA], "userName": "not-an-address"}),
            json!({"schemas": [USER_SCHEMA], "userName": "a@b.c", "active": "maybe"}),
            json!({"schemas": [USER_SCHEMA], "userName": "a@b.c", "emails": "x"}),
            json!({"schemas": [USER_SCHEMA], "userName": "a@b.c", "emails": [{"value": "nope"}]}),
            json!({"schemas": [USER_SCHEMA], "userName": "a@b.c", "name": "x"}),
            json!({"schemas": [USER_SCHEMA], "userName": "a@b.c", "emails": [
                {"value": "a@b.c", "primary": true}, {"value": "d@b.c", "primary": true}]}),
        ] {
            let fault = parse(&bad).expect_err(&bad.to_string());
            assert_eq!((fault.status, fault.scim_type), (400, Some("invalidValue")), "{bad}");
        }
    }

    #[test]
    fn patch_follows_rfc_7644_and_the_directories_shapes() {
        // Okta: a pathless replace of active.
        assert!(!patched(json!([{"op": "replace", "value": {"active": false}}])).unwrap().active);
        // Entra ID: "Replace" with a string boolean.
        assert!(!patched(json!([{"op": "Replace", "path": "active", "value": "False"}])).unwrap().active);
        // A value-filtered sub-attribute.
        let u =
            patched(json!([{"op": "replace", "path": "emails[type eq \"work\"].value", "value": "new@example.com"}]))
                .unwrap();
        assert_eq!(u.email.as_str(), "new@example.com");
        // Removing a value-filtered value (RFC 7644 §3.5.2.2), which the plugin refuses.
        let u = patched(json!([{"op": "remove", "path": "emails[type eq \"home\"]"}])).unwrap();
        assert_eq!(u.attributes["emails"].as_array().unwrap().len(), 1);
        // Adding one that is not there yet, Entra ID's way.
        let u =
            patched(json!([{"op": "add", "path": "phoneNumbers[type eq \"work\"].value", "value": "+1 555"}])).unwrap();
        assert_eq!(u.attributes["phoneNumbers"], json!([{"type": "work", "value": "+1 555"}]));
        let u = patched(json!([{"op": "replace", "path": "name.givenName", "value": "Alicia"}])).unwrap();
        assert_eq!(u.name.as_str(), "Alicia Liddell");
        let u = patched(json!([{"op": "add", "path": ENTERPRISE_SCHEMA.to_owned() + ":department", "value": "R&D"}]))
            .unwrap();
        assert_eq!(u.attributes[ENTERPRISE_SCHEMA]["department"], "R&D");
        // The extension as a whole: added (merged), replaced, removed.
        let u = patched(json!([
            {"op": "add", "path": ENTERPRISE_SCHEMA, "value": {"department": "R&D"}},
            {"op": "add", "path": ENTERPRISE_SCHEMA, "value": {"costCenter": "7"}},
        ]))
        .unwrap();
        assert_eq!(u.attributes[ENTERPRISE_SCHEMA], json!({"department": "R&D", "costCenter": "7"}));
        let u = patched(json!([
            {"op": "add", "path": ENTERPRISE_SCHEMA, "value": {"department": "R&D"}},
            {"op": "replace", "path": ENTERPRISE_SCHEMA, "value": {"division": "North"}},
        ]))
        .unwrap();
        assert_eq!(u.attributes[ENTERPRISE_SCHEMA], json!({"division": "North"}));
        let u = patched(json!([
            {"op": "add", "path": ENTERPRISE_SCHEMA, "value": {"department": "R&D"}},
            {"op": "remove", "path": ENTERPRISE_SCHEMA},
        ]))
        .unwrap();
        assert!(!u.attributes.contains_key(ENTERPRISE_SCHEMA));
        let id = rendered()["id"].clone();
        let u = patched(json!([{"op": "replace", "value": {"id": id, "displayName": "Al"}}])).unwrap();
        assert_eq!(u.name.as_str(), "Al");
        let u = patched(json!([{"op": "add", "value": {"displayName": "Al", "externalId": "e1"}}])).unwrap();
        assert_eq!((u.name.as_str(), u.external_id.as_deref()), ("Al", Some("e1")));
    }

    #[test]
    fn patch_refusals_carry_their_scim_type() {
        let kind = |ops: Value| patched(ops).expect_err("refused").scim_type;
        assert_eq!(kind(json!([{"op": "replace", "path": "id", "value": "x"}])), Some("mutability"));
        assert_eq!(kind(json!([{"op": "replace", "path": "meta.created", "value": "x"}])), Some("mutability"));
        assert_eq!(kind(json!([{"op": "replace", "value": {"id": "another"}}])), Some("mutability"));
        assert_eq!(kind(json!([{"op": "replace", "path": ENTERPRISE_SCHEMA, "value": "x"}])), Some("invalidValue"));
        assert_eq!(kind(json!([{"op": "replace", "path": "nope", "value": "x"}])), Some("invalidPath"));
        assert_eq!(kind(json!([{"op": "replace", "path": "emails[", "value": "x"}])), Some("invalidPath"));
        assert_eq!(kind(json!([{"op": "remove"}])), Some("noTarget"));
        assert_eq!(kind(json!([{"op": "remove", "path": "emails[type eq \"other\"]"}])), Some("noTarget"));
        assert_eq!(kind(json!([{"op": "move", "path": "title"}])), Some("invalidValue"));
        assert_eq!(kind(json!([{"op": "remove", "path": "userName"}])), Some("invalidValue"));
        assert_eq!(kind(json!([])), Some("invalidValue"));
    }
}
