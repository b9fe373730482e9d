//! `attributes` and `excludedAttributes` (RFC 7644 §3.4.2.5, §3.9): which attributes of a resource an answer
//! carries. `attributes` replaces the default set with the ones listed; `excludedAttributes` takes the ones listed
//! out of it. `id` and `schemas` are always returned (RFC 7643 §3.1 `returned: always`). Names are matched without
//! case, may carry their schema's URN, may name a sub-attribute (`name.givenName`, `emails.value`) or the
//! enterprise extension as a whole.

use serde_json::{Map, Value};

use super::Fault;
use super::filter::{self, AttrPath};

/// Never projected away.
const ALWAYS: &[&str] = &["id", "schemas"];
/// The most attribute names one parameter may list, so the work an answer costs stays bounded.
const MAX_NAMES: usize = 64;

/// What an answer carries of each resource.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Projection {
    only: Option<Vec<AttrPath>>,
    excluded: Vec<AttrPath>,
}

fn names(text: &str, parameter: &str) -> Result<Vec<AttrPath>, Fault> {
    let listed: Vec<&str> = text.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
    if listed.len() > MAX_NAMES {
        return Err(Fault::bad("invalidValue", format!("{parameter} lists more than {MAX_NAMES} attributes")));
    }
    listed
        .into_iter()
        .map(|name| filter::attr_path(name).map_err(|e| Fault::bad("invalidValue", format!("{parameter}: {}", e.0))))
        .collect()
}

impl Projection {
    /// From the two parameters' texts (comma-separated attribute names); an empty text lists nothing.
    pub fn parse(attributes: Option<&str>, excluded: Option<&str>) -> Result<Projection, Fault> {
        let only = attributes.map(|a| names(a, "attributes")).transpose()?.filter(|a| !a.is_empty());
        let excluded = excluded.map(|e| names(e, "excludedAttributes")).transpose()?.unwrap_or_default();
        Ok(Projection { only, excluded })
    }

    pub fn is_everything(&self) -> bool {
        self.only.is_none() && self.excluded.is_empty()
    }

    /// Narrows one rendered resource.
    pub fn apply(&self, resource: &mut Value) {
        if self.is_everything() {
            return;
        }
        let Some(fields) = resource.as_object_mut() else { return };
        if let Some(only) = &self.only {
            let mut kept = Map::new();
            for (key, value) in fields.iter() {
                if ALWAYS.iter().any(|a| a.eq_ignore_ascii_case(key)) {
                    kept.insert(key.clone(), value.clone());
                }
            }
            for path in only {
                copy(fields, &mut kept, path);
            }
            *fields = kept;
        }
        for path in &self.excluded {
            remove(fields, path);
        }
    }

    /// Narrows every resource of a ListResponse.
    pub fn apply_to_list(&self, list: &mut Value) {
        if let Some(Value::Array(resources)) = list.get_mut("Resources") {
            resources.iter_mut().for_each(|r| self.apply(r));
        }
    }
}

fn key_of(fields: &Map<String, Value>, name: &str) -> Option<String> {
    fields.keys().find(|k| k.eq_ignore_ascii_case(name)).cloned()
}

/// The object `path` is an attribute of: the resource, or its extension's object.
fn container<'a>(fields: &'a Map<String, Value>, path: &AttrPath) -> Option<&'a Map<String, Value>> {
    match &path.schema {
        None => Some(fields),
        Some(schema) => fields.get(&key_of(fields, schema)?)?.as_object(),
    }
}

/// Copies what `path` names from `from` into `into`, merging with what an earlier path copied there.
fn copy(from: &Map<String, Value>, into: &mut Map<String, Value>, path: &AttrPath) {
    let Some(source) = container(from, path) else { return };
    let Some(key) = key_of(source, &path.attr) else { return };
    let value = &source[&key];
    let picked = match &path.sub {
        None => value.clone(),
        Some(sub) => match value {
            Value::Object(parts) => Value::Object(pick(parts, sub)),
            Value::Array(items) => Value::Array(
                items.iter().map(|i| Value::Object(i.as_object().map(|p| pick(p, sub)).unwrap_or_default())).collect(),
            ),
            _ => return,
        },
    };
    let target = match &path.schema {
        None => into,
        Some(schema) => {
            let schema_key = key_of(from, schema).unwrap_or_else(|| schema.clone());
            match into.entry(schema_key).or_insert_with(|| Value::Object(Map::new())) {
                Value::Object(ext) => ext,
                _ => return,
            }
        }
    };
    match (target.get_mut(&key), picked) {
        (Some(Value::Object(had)), Value::Object(more)) => had.extend(more),
        (Some(Value::Array(had)), Value::Array(more)) if had.len() == more.len() => {
            for (h, m) in had.iter_mut().zip(more) {
                if let (Value::Object(h), Value::Object(m)) = (h, m) {
                    h.extend(m);
                }
            }
        }
        (_, picked) => {
            target.insert(key, picked);
        }
    }
}

fn pick(parts: &Map<String, Value>, sub: &str) -> Map<String, Value> {
    parts.iter().filter(|(k, _)| k.eq_ignore_ascii_case(sub)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn remove(fields: &mut Map<String, Value>, path: &AttrPath) {
    if path.schema.is_none() && path.sub.is_none() && ALWAYS.iter().any(|a| a.eq_ignore_ascii_case(&path.attr)) {
        return;
    }
    let source = match &path.schema {
        None => Some(fields),
        Some(schema) => key_of(fields, schema).and_then(|k| fields.get_mut(&k)).and_then(Value::as_object_mut),
    };
    let Some(source) = source else { return };
    let Some(key) = key_of(source, &path.attr) else { return };
    match &path.sub {
        None => {
            source.remove(&key);
        }
        Some(sub) => match source.get_mut(&key) {
            Some(Value::Object(parts)) => parts.retain(|k, _| !k.eq_ignore_ascii_case(sub)),
            Some(Value::Array(items)) => {
                for item in items.iter_mut().filter_map(Value::as_object_mut) {
                    item.retain(|k, _| !k.eq_ignore_ascii_case(sub));
                }
            }
            _ => {}
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user() -> Value {
        json!({
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "id": "1", "userName": "a@b.c",
            "name": {"givenName": "Ada", "familyName": "Lovelace"},
            "emails": [{"value": "a@b.c", "type": "work", "primary": true}, {"value": "a@home.c", "type": "home"}],
            "meta": {"resourceType": "User"},
            "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": {"department": "R&D", "costCenter": "7"}
        })
    }

    fn projected(attributes: Option<&str>, excluded: Option<&str>) -> Value {
        let mut u = user();
        Projection::parse(attributes, excluded).unwrap().apply(&mut u);
        u
    }

    #[test]
    fn attributes_keeps_what_is_listed_and_what_is_always_returned() {
        assert_eq!(
            projected(Some("USERNAME"), None),
            json!({"schemas": user()["schemas"], "id": "1", "userName": "a@b.c"})
        );
        let u = projected(Some("name.givenName, emails.value,urn:ietf:params:scim:schemas:core:2.0:User:meta"), None);
        assert_eq!(u["name"], json!({"givenName": "Ada"}));
        assert_eq!(u["emails"], json!([{"value": "a@b.c"}, {"value": "a@home.c"}]));
        assert_eq!(u["meta"], json!({"resourceType": "User"}));
        let u = projected(Some("name.givenName,name.familyName,emails.value,emails.type"), None);
        assert_eq!(u["name"], user()["name"]);
        assert_eq!(u["emails"][1], json!({"value": "a@home.c", "type": "home"}));
        let u = projected(Some("urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department"), None);
        assert_eq!(u["urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"], json!({"department": "R&D"}));
        let u = projected(Some("urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"), None);
        assert_eq!(u["urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"]["costCenter"], "7");
        assert_eq!(projected(Some("nothingSuch"), None).as_object().unwrap().len(), 2);
    }

    #[test]
    fn excluded_attributes_takes_out_what_is_listed_but_never_the_id() {
        let u = projected(None, Some("name,emails.type,id,schemas"));
        assert!(u.get("name").is_none() && u.get("id").is_some() && u.get("schemas").is_some());
        assert_eq!(u["emails"][0], json!({"value": "a@b.c", "primary": true}));
        let u = projected(None, Some("urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department"));
        assert_eq!(u["urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"], json!({"costCenter": "7"}));
        assert_eq!(projected(None, Some("")), user());
    }

    #[test]
    fn malformed_names_are_invalid_values() {
        for bad in ["a b", "urn:x:y:z", "name..x", "emails[type eq \"work\"]"] {
            assert_eq!(Projection::parse(Some(bad), None).unwrap_err().scim_type, Some("invalidValue"), "{bad}");
            assert_eq!(Projection::parse(None, Some(bad)).unwrap_err().scim_type, Some("invalidValue"), "{bad}");
        }
        let many = vec!["title"; MAX_NAMES + 1].join(",");
        assert!(Projection::parse(Some(&many), None).is_err());
    }
}
