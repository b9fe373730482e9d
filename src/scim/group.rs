//! The SCIM Group resource (RFC 7643 §4.2) on `@better-auth/scim`'s wire: a body read into what the team needs
//! (its name, the members) and what the directory's record keeps (`externalId`), the team rendered back, and
//! PATCH (RFC 7644 §3.5.2) applied to the rendered resource, which is then read again as a replacement would be,
//! so one set of rules checks both (as for Users).

use serde_json::{Map, Value, json};

use super::Fault;
use super::filter::{self, GROUP_SCHEMA, member};
use super::user::{Operation, Target, operations, restates_id};
use crate::domain::{Name, Timestamp, UserId};

/// At most this many direct members (the plugin's limit).
pub const MAX_MEMBERS: usize = 1000;

/// A Group body, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupInput {
    /// The team's name.
    pub display_name: Name,
    pub external_id: Option<String>,
    /// Each once, in the order given; each must be a User of the organization's directory (the facade's check).
    pub members: Vec<UserId>,
}

fn invalid(detail: impl Into<String>) -> Fault {
    Fault::bad("invalidValue", detail)
}

pub fn parse(body: &Value) -> Result<GroupInput, Fault> {
    if !body.is_object() {
        return Err(invalid("the body must be a JSON object"));
    }
    let schemas = member(body, "schemas").and_then(Value::as_array);
    let has_schema =
        schemas.is_some_and(|s| s.iter().any(|v| v.as_str().is_some_and(|s| s.eq_ignore_ascii_case(GROUP_SCHEMA))));
    if !has_schema {
        return Err(invalid(format!("schemas must include {GROUP_SCHEMA}")));
    }
    let display_name = match member(body, "displayName") {
        Some(Value::String(s)) => Name::parse(s.trim()).map_err(|e| invalid(format!("displayName: {e}")))?,
        _ => return Err(invalid("displayName is required")),
    };
    let external_id = match member(body, "externalId") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 1024 => Some(s.clone()),
        Some(_) => return Err(invalid("externalId must be a non-empty string")),
    };
    let items = match member(body, "members") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(_) => return Err(invalid("members must be an array")),
    };
    if items.len() > MAX_MEMBERS {
        return Err(invalid(format!("a Group has at most {MAX_MEMBERS} members")));
    }
    let mut members = Vec::with_capacity(items.len());
    for item in &items {
        let value = member(item, "value").and_then(Value::as_str);
        let kind = member(item, "type").and_then(Value::as_str);
        if kind.is_some_and(|k| !k.eq_ignore_ascii_case("user")) {
            return Err(invalid("Group members must reference a SCIM User"));
        }
        let Some(value) = value.filter(|v| !v.trim().is_empty()) else {
            return Err(invalid("Group members must reference a SCIM User"));
        };
        // A value that is no id of any User is as unknown as one of another organization's.
        let user = UserId::parse(value.trim())
            .ok_or_else(|| invalid(format!("Group member {value:?} is not a SCIM User of this organization")))?;
        if !members.contains(&user) {
            members.push(user);
        }
    }
    Ok(GroupInput { display_name, external_id, members })
}

/// A member as rendered.
pub struct MemberShown {
    pub user: UserId,
}

/// The Group as the directory reads it; `base` is the SCIM root's absolute URL.
#[allow(clippy::too_many_arguments)]
pub fn render(
    id: &str,
    display_name: &str,
    external_id: Option<&str>,
    members: &[MemberShown],
    created: Timestamp,
    modified: Timestamp,
    base: &str,
) -> Value {
    let mut out = Map::new();
    out.insert("schemas".into(), json!([GROUP_SCHEMA]));
    out.insert("id".into(), json!(id));
    if let Some(external) = external_id {
        out.insert("externalId".into(), json!(external));
    }
    out.insert("displayName".into(), json!(display_name));
    // `value`, `$ref` and `type`, the sub-attributes RFC 7643 §8.7.1 gives members (the plugin adds a read-only
    // `display`; a directory that patches `members` reads back exactly what it sent, so none is added here).
    let members: Vec<Value> = members
        .iter()
        .map(|m| json!({"value": m.user.to_string(), "$ref": format!("{base}/Users/{}", m.user), "type": "User"}))
        .collect();
    out.insert("members".into(), Value::Array(members));
    out.insert(
        "meta".into(),
        json!({
            "resourceType": "Group",
            "created": created.to_rfc3339(),
            "lastModified": modified.to_rfc3339(),
            "location": format!("{base}/Groups/{id}"),
        }),
    );
    Value::Object(out)
}

/// Applies a PATCH body to the rendered Group `resource`; the caller reads the result with [`parse`]. Paths:
/// `displayName`, `externalId`, `members` (add, replace, remove all or the values listed) and
/// `members[value eq "…"]` (remove).
pub fn patch(resource: &mut Value, body: &Value) -> Result<(), Fault> {
    for Operation { op, target } in operations(body)? {
        match target {
            Target::Path(path, value) => apply(resource, &op, path, value)?,
            Target::Fields(fields) => {
                for (key, v) in fields {
                    if !restates_id(resource, key, v) {
                        apply(resource, &op, key, Some(v))?;
                    }
                }
            }
        }
    }
    Ok(())
}

fn fields(resource: &mut Value) -> &mut Map<String, Value> {
    resource.as_object_mut().expect("a rendered Group is an object")
}

fn apply(resource: &mut Value, op: &str, path: &str, value: Option<&Value>) -> Result<(), Fault> {
    let path = filter::parse_path(path).map_err(|e| Fault::bad("invalidPath", e.0))?;
    if path.attr.schema.as_deref().is_some_and(|s| !s.eq_ignore_ascii_case(GROUP_SCHEMA)) {
        return Err(Fault::bad("invalidPath", format!("no attribute {} in a Group", path.attr.attr)));
    }
    let attr = path.attr.attr.as_str();
    if ["id", "meta", "schemas"].iter().any(|a| a.eq_ignore_ascii_case(attr)) {
        return Err(Fault::bad("mutability", format!("{attr} cannot be changed")));
    }
    if attr.eq_ignore_ascii_case("members") {
        return members(resource, op, &path, value);
    }
    if path.filter.is_some() || path.attr.sub.is_some() {
        return Err(Fault::bad("invalidPath", format!("{attr} has no sub-attributes")));
    }
    let name = if attr.eq_ignore_ascii_case("displayName") {
        "displayName"
    } else if attr.eq_ignore_ascii_case("externalId") {
        "externalId"
    } else {
        return Err(Fault::bad("invalidPath", format!("no attribute {attr} in a Group")));
    };
    match (op, value) {
        ("remove", _) if name == "displayName" => Err(Fault::bad("mutability", "displayName is required")),
        ("remove", _) => {
            fields(resource).remove(name);
            Ok(())
        }
        // Entra sends a single value as a one-element array of `{value}`.
        (_, Some(Value::Array(items))) if items.len() == 1 => {
            let v = member(&items[0], "value").unwrap_or(&items[0]).clone();
            fields(resource).insert(name.into(), v);
            Ok(())
        }
        (_, Some(v)) => {
            fields(resource).insert(name.into(), v.clone());
            Ok(())
        }
        (_, None) => Err(invalid(format!("{op} of {name} needs a value"))),
    }
}

/// The `value` of each member object in `value` (an array of them, or one).
fn listed(value: Option<&Value>) -> Result<Vec<Value>, Fault> {
    match value {
        Some(Value::Array(items)) => Ok(items.clone()),
        Some(v @ Value::Object(_)) => Ok(vec![v.clone()]),
        _ => Err(invalid("members needs an array of members")),
    }
}

fn value_of(item: &Value) -> Option<&str> {
    member(item, "value").and_then(Value::as_str)
}

fn members(resource: &mut Value, op: &str, path: &filter::PatchPath, value: Option<&Value>) -> Result<(), Fault> {
    if path.attr.sub.is_some() || path.sub.is_some() {
        return Err(Fault::bad("invalidPath", "members' sub-attributes cannot be changed on their own"));
    }
    let current: Vec<Value> = member(resource, "members").and_then(Value::as_array).cloned().unwrap_or_default();
    let next: Vec<Value> = match (op, &path.filter) {
        ("remove", Some(which)) => current.into_iter().filter(|m| !which.matches(m)).collect(),
        (_, Some(_)) => return Err(Fault::bad("invalidPath", "a members filter is for remove only")),
        // Without a value, every member; with one, those listed (Entra and Okta's way).
        ("remove", None) => match value {
            None | Some(Value::Null) => Vec::new(),
            Some(_) => {
                let gone: Vec<Value> = listed(value)?;
                let gone: Vec<&str> = gone.iter().filter_map(value_of).collect();
                current.into_iter().filter(|m| !value_of(m).is_some_and(|v| gone.contains(&v))).collect()
            }
        },
        ("add", None) => {
            let mut all = current;
            for item in listed(value)? {
                if !all.iter().any(|m| value_of(m).is_some() && value_of(m) == value_of(&item)) {
                    all.push(item);
                }
            }
            all
        }
        _ => listed(value)?,
    };
    fields(resource).insert("members".into(), Value::Array(next));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scim::user::PATCH_SCHEMA;

    fn group() -> Value {
        let a = UserId::new();
        render("t", "Eng", None, &[MemberShown { user: a }], Timestamp::now(), Timestamp::now(), "http://x")
    }

    fn ops(operations: Value) -> Value {
        json!({"schemas": [PATCH_SCHEMA], "Operations": operations})
    }

    #[test]
    fn a_body_needs_the_schema_a_name_and_users_as_members() {
        let ok = json!({"schemas": [GROUP_SCHEMA], "displayName": " Eng ", "members": [{"value": UserId::new().to_string()}]});
        let parsed = parse(&ok).unwrap();
        assert_eq!((parsed.display_name.as_str(), parsed.members.len()), ("Eng", 1));
        assert!(parse(&json!({"displayName": "x"})).is_err());
        assert!(parse(&json!({"schemas": [GROUP_SCHEMA]})).is_err());
        let group_member =
            json!({"schemas": [GROUP_SCHEMA], "displayName": "x", "members": [{"value": "a", "type": "Group"}]});
        assert_eq!(parse(&group_member).unwrap_err().scim_type, Some("invalidValue"));
        let unknown = json!({"schemas": [GROUP_SCHEMA], "displayName": "x", "members": [{"value": "nope"}]});
        assert_eq!(parse(&unknown).unwrap_err().status, 400);
        let many: Vec<Value> = (0..=MAX_MEMBERS).map(|_| json!({"value": UserId::new().to_string()})).collect();
        assert!(parse(&json!({"schemas": [GROUP_SCHEMA], "displayName": "x", "members": many})).is_err());
    }

    #[test]
    fn patch_adds_removes_and_replaces_members_and_the_name() {
        let mut g = group();
        let first = g["members"][0]["value"].as_str().unwrap().to_owned();
        let (b, c) = (UserId::new().to_string(), UserId::new().to_string());
        let add =
            ops(json!([{"op": "add", "path": "members", "value": [{"value": b}, {"value": c}, {"value": first}]}]));
        patch(&mut g, &add).unwrap();
        assert_eq!(parse(&g).unwrap().members.len(), 3);
        let filtered = format!("members[value eq \"{b}\"]");
        patch(&mut g, &ops(json!([{"op": "Remove", "path": filtered}]))).unwrap();
        assert_eq!(parse(&g).unwrap().members.len(), 2);
        patch(&mut g, &ops(json!([{"op": "remove", "path": "members", "value": [{"value": c}]}]))).unwrap();
        assert_eq!(parse(&g).unwrap().members, vec![UserId::parse(&first).unwrap()]);
        // Okta renames with the Group's own id beside the name.
        patch(&mut g, &ops(json!([{"op": "replace", "value": {"id": "t", "displayName": "Ops", "members": []}}])))
            .unwrap();
        let parsed = parse(&g).unwrap();
        assert_eq!((parsed.display_name.as_str(), parsed.members.len()), ("Ops", 0));
        assert_eq!(
            patch(&mut g, &ops(json!([{"op": "remove", "path": "displayName"}]))).unwrap_err().scim_type,
            Some("mutability")
        );
        assert_eq!(
            patch(&mut g, &ops(json!([{"op": "add", "path": "nope", "value": 1}]))).unwrap_err().scim_type,
            Some("invalidPath")
        );
        assert_eq!(patch(&mut g, &ops(json!([{"op": "remove"}]))).unwrap_err().scim_type, Some("noTarget"));
    }
}
