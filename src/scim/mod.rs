//! SCIM 2.0 provisioning (RFC 7643, RFC 7644) per organization, on `@better-auth/scim`'s wire under
//! `/api/auth/scim/v2`, and following the RFCs where the plugin falls short of them (filters beyond `eq`/`and`,
//! value-filtered `remove`, 405 on the discovery documents' write methods, a SCIM Error on every 4xx, `/.search`).
//!
//! - [`tokens`]: an organization's bearer tokens.
//! - [`filter`]: filters and PATCH paths.
//! - [`user`]: the User resource: bodies checked, records rendered, PATCH applied.
//! - [`group`]: the Group resource (a team of the organization): the same for Groups.
//! - [`projection`]: `attributes` and `excludedAttributes`, what an answer carries of each resource.
//! - here: the discovery documents, the list answer, and [`Fault`], a SCIM Error.
//!
//! What the directory says of an account is kept in its own record ([`crate::store::ScimUserRecordV1`]), read from
//! the store where needed as the tokens are; the account, its membership and its ban are the users actor's.

pub mod filter;
pub mod group;
pub mod projection;
pub mod tokens;
pub mod user;

use serde_json::{Value, json};

pub use tokens::{BearerError, Caller, Scopes, TokenError, TokenView, Tokens};

pub const ERROR_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:Error";
pub const LIST_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:ListResponse";
pub const SEARCH_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:SearchRequest";
const SPC_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig";
const RESOURCE_TYPE_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:ResourceType";
const SCHEMA_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:Schema";
/// A list's longest page (`count` is clamped to it), the plugin's `filter.maxResults`.
pub const MAX_RESULTS: usize = 100;

/// A SCIM Error (RFC 7644 §3.12): the status, the `scimType` where the RFC names one, and a detail for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub status: u16,
    pub scim_type: Option<&'static str>,
    pub detail: String,
}

impl Fault {
    pub fn bad(scim_type: &'static str, detail: impl Into<String>) -> Self {
        Self { status: 400, scim_type: Some(scim_type), detail: detail.into() }
    }

    pub fn status(status: u16, detail: impl Into<String>) -> Self {
        Self { status, scim_type: None, detail: detail.into() }
    }

    pub fn body(&self) -> Value {
        let mut body = json!({"schemas": [ERROR_SCHEMA], "status": self.status.to_string(), "detail": self.detail});
        if let Some(kind) = self.scim_type {
            body["scimType"] = json!(kind);
        }
        body
    }
}

/// A page of a list (RFC 7644 §3.4.2.4): `startIndex` is 1-based, `count` at most [`MAX_RESULTS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paging {
    pub start_index: usize,
    pub count: usize,
}

impl Paging {
    /// The items of `all` on this page.
    pub fn page<T>(self, all: impl IntoIterator<Item = T>) -> impl Iterator<Item = T> {
        all.into_iter().skip(self.start_index - 1).take(self.count)
    }

    /// From the query's texts: a number that is not one is an `invalidValue`; below 1 (start) or 0 (count) is
    /// taken as the least (RFC 7644 §3.4.2.4).
    pub fn parse(start_index: Option<&str>, count: Option<&str>) -> Result<Paging, Fault> {
        let number = |name: &str, text: Option<&str>, default: i64| -> Result<i64, Fault> {
            match text {
                None => Ok(default),
                Some(t) => t
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| Fault::bad("invalidValue", format!("{name} must be an integer"))),
            }
        };
        let start = number("startIndex", start_index, 1)?.max(1);
        let count = number("count", count, MAX_RESULTS as i64)?.clamp(0, MAX_RESULTS as i64);
        Ok(Paging { start_index: start as usize, count: count as usize })
    }
}

/// The ListResponse of the resources a filter matched (all of them, in a stable order), for `paging`.
pub fn list_response(matched: Vec<Value>, paging: Paging) -> Value {
    let total = matched.len();
    page_response(total, paging.page(matched).collect(), paging)
}

/// The ListResponse of `page`, the page `paging` asks for of `total` resources.
pub fn page_response(total: usize, page: Vec<Value>, paging: Paging) -> Value {
    json!({
        "schemas": [LIST_SCHEMA],
        "totalResults": total,
        "startIndex": paging.start_index,
        "itemsPerPage": page.len(),
        "Resources": page,
    })
}

/// `ServiceProviderConfig` (RFC 7643 §5): what this server supports. `base` is the SCIM root's absolute URL.
pub fn service_provider_config(base: &str) -> Value {
    json!({
        "schemas": [SPC_SCHEMA],
        "documentationUri": "https://datatracker.ietf.org/doc/html/rfc7644",
        "patch": {"supported": true},
        "bulk": {"supported": false, "maxOperations": 0, "maxPayloadSize": 0},
        "filter": {"supported": true, "maxResults": MAX_RESULTS},
        // `password` on PUT and PATCH sets the account's password (accounts::scim, `scim_new_password`).
        "changePassword": {"supported": true},
        "sort": {"supported": false},
        "etag": {"supported": false},
        "authenticationSchemes": [{
            "type": "oauthbearertoken",
            "name": "OAuth Bearer Token",
            "description": "A SCIM token of the organization, made by its owner or an administrator",
            "specUri": "https://datatracker.ietf.org/doc/html/rfc6750",
            "primary": true,
        }],
        "meta": {"resourceType": "ServiceProviderConfig", "location": format!("{base}/ServiceProviderConfig")},
    })
}

/// Every `ResourceType` (RFC 7643 §6): Group only where `groups` (Groups are teams: a server without teams has none).
pub fn resource_types(base: &str, groups: bool) -> Vec<Value> {
    let mut all = vec![
        json!({
            "schemas": [RESOURCE_TYPE_SCHEMA],
            "id": "User",
            "name": "User",
            "endpoint": "/Users",
            "description": "User Account",
            "schema": filter::USER_SCHEMA,
            "schemaExtensions": [{"schema": filter::ENTERPRISE_SCHEMA, "required": false}],
            "meta": {"resourceType": "ResourceType", "location": format!("{base}/ResourceTypes/User")},
        }),
        json!({
            "schemas": [RESOURCE_TYPE_SCHEMA],
            "id": "Group",
            "name": "Group",
            "endpoint": "/Groups",
            "description": "Group: a team of the organization",
            "schema": filter::GROUP_SCHEMA,
            "meta": {"resourceType": "ResourceType", "location": format!("{base}/ResourceTypes/Group")},
        }),
    ];
    if !groups {
        all.retain(|t| t["id"] != "Group");
    }
    all
}

/// Every `Schema` (RFC 7643 §7): the core User, the enterprise extension and the core Group.
pub fn schemas(base: &str) -> Vec<Value> {
    let defined: Vec<Value> = serde_json::from_str(include_str!("schemas.json")).expect("schemas.json is JSON");
    defined
        .into_iter()
        .map(|mut s| {
            let id = s["id"].as_str().unwrap_or_default().to_owned();
            s["schemas"] = json!([SCHEMA_SCHEMA]);
            s["meta"] = json!({"resourceType": "Schema", "location": format!("{base}/Schemas/{id}")});
            s
        })
        .collect()
}

/// One discovery resource by id, or a 404.
pub fn find(all: Vec<Value>, id: &str, what: &str) -> Result<Value, Fault> {
    all.into_iter().find(|v| v["id"] == id).ok_or_else(|| Fault::status(404, format!("{what} {id:?} not found")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_clamps_and_refuses_what_is_no_number() {
        assert_eq!(Paging::parse(None, None).unwrap(), Paging { start_index: 1, count: MAX_RESULTS });
        assert_eq!(Paging::parse(Some("0"), Some("-3")).unwrap(), Paging { start_index: 1, count: 0 });
        assert_eq!(Paging::parse(Some("5"), Some("1000")).unwrap(), Paging { start_index: 5, count: MAX_RESULTS });
        assert_eq!(Paging::parse(Some("x"), None).unwrap_err().scim_type, Some("invalidValue"));
        let page = list_response((0..5).map(|i| json!(i)).collect(), Paging { start_index: 2, count: 2 });
        assert_eq!(page["Resources"], json!([1, 2]));
        assert_eq!((page["totalResults"].as_u64(), page["itemsPerPage"].as_u64()), (Some(5), Some(2)));
    }

    #[test]
    fn the_schemas_document_the_user_its_extension_and_the_group() {
        let all = schemas("http://x");
        assert_eq!(all.len(), 3);
        assert!(find(schemas("http://x"), filter::GROUP_SCHEMA, "Schema").is_ok());
        assert!(find(resource_types("http://x", true), "Group", "ResourceType").is_ok());
        assert!(find(resource_types("http://x", false), "Group", "ResourceType").is_err());
        assert!(find(all, filter::ENTERPRISE_SCHEMA, "Schema").is_ok());
        assert_eq!(find(schemas("http://x"), "nope", "Schema").unwrap_err().status, 404);
    }
}
