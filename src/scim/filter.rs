//! SCIM filters (RFC 7644 §3.4.2.2) and PATCH paths (§3.5.2): parsed into a tree, evaluated against a resource's
//! JSON. No maintained Rust crate for SCIM filters was at hand; the grammar is small, so it is written here, with
//! the tests below. Operators: `eq ne co sw ew gt ge lt le pr`, `and` `or` `not`, grouping with parentheses, and
//! value filters (`emails[type eq "work"]`); `not` binds tighter than `and`, `and` than `or`.

use serde_json::Value;

/// The core User schema's URN: an attribute path may carry it as a prefix.
pub const USER_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:User";
pub const GROUP_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:Group";
/// The enterprise User extension: its attributes live under this key of the resource.
pub const ENTERPRISE_SCHEMA: &str = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User";

/// Filters longer than this are refused: the server's work stays bounded.
const MAX_LEN: usize = 4096;
/// And nested deeper than this (parentheses, `not`).
const MAX_DEPTH: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Co,
    Sw,
    Ew,
    Gt,
    Ge,
    Lt,
    Le,
}

/// An attribute path: the extension it is in (`None`: the core schema), the attribute, a sub-attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttrPath {
    pub schema: Option<String>,
    pub attr: String,
    pub sub: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    Compare(AttrPath, Op, Value),
    Present(AttrPath),
    And(Box<Filter>, Box<Filter>),
    Or(Box<Filter>, Box<Filter>),
    Not(Box<Filter>),
    /// `emails[type eq "work"]`: some value of the multi-valued attribute matches the inner filter (whose paths are
    /// the value's sub-attributes).
    Value(AttrPath, Box<Filter>),
}

/// A PATCH operation's path: an attribute, optionally narrowed to the values a filter matches, optionally to one
/// sub-attribute of them (`emails[type eq "work"].value`).
#[derive(Debug, Clone, PartialEq)]
pub struct PatchPath {
    pub attr: AttrPath,
    pub filter: Option<Filter>,
    /// After a value filter: the sub-attribute of the matched values.
    pub sub: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FilterError(pub String);

fn err<T>(message: impl Into<String>) -> Result<T, FilterError> {
    Err(FilterError(message.into()))
}

pub fn parse(text: &str) -> Result<Filter, FilterError> {
    if text.len() > MAX_LEN {
        return err(format!("the filter is longer than {MAX_LEN} characters"));
    }
    let mut p = Parser { tokens: tokenize(text)?, at: 0, depth: 0 };
    let filter = p.or()?;
    match p.peek() {
        None => Ok(filter),
        Some(t) => err(format!("unexpected {} in the filter", t.describe())),
    }
}

pub fn parse_path(text: &str) -> Result<PatchPath, FilterError> {
    if text.len() > MAX_LEN {
        return err(format!("the path is longer than {MAX_LEN} characters"));
    }
    let mut p = Parser { tokens: tokenize(text)?, at: 0, depth: 0 };
    let Some(Token::Word(word)) = p.next() else { return err(format!("invalid path {text:?}")) };
    let attr = attr_path(&word)?;
    let mut path = PatchPath { attr, filter: None, sub: None };
    if p.peek() == Some(&Token::Open('[')) {
        if path.attr.sub.is_some() {
            return err(format!("invalid path {text:?}"));
        }
        p.next();
        path.filter = Some(p.or()?);
        if p.next() != Some(Token::Close(']')) {
            return err(format!("invalid path {text:?}: ] expected"));
        }
        if let Some(Token::SubAttr(sub)) = p.peek().cloned() {
            p.next();
            path.sub = Some(sub);
        }
    }
    if p.peek().is_some() {
        return err(format!("invalid path {text:?}"));
    }
    Ok(path)
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    /// `.name` right after a `]`.
    SubAttr(String),
    Str(String),
    Literal(Value),
    Open(char),
    Close(char),
}

impl Token {
    fn describe(&self) -> String {
        match self {
            Token::Word(w) => format!("{w:?}"),
            Token::SubAttr(s) => format!(".{s}"),
            Token::Str(s) => format!("string {s:?}"),
            Token::Literal(v) => format!("{v}"),
            Token::Open(c) | Token::Close(c) => format!("{c:?}"),
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>, FilterError> {
    let mut tokens = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'(' | b'[' => {
                tokens.push(Token::Open(c as char));
                i += 1;
            }
            b')' | b']' => {
                tokens.push(Token::Close(c as char));
                i += 1;
                if c == b']' && bytes.get(i) == Some(&b'.') {
                    let start = i + 1;
                    let mut end = start;
                    while end < bytes.len() && is_name_byte(bytes[end]) {
                        end += 1;
                    }
                    if end == start {
                        return err("a sub-attribute name is expected after ].");
                    }
                    tokens.push(Token::SubAttr(text[start..end].to_owned()));
                    i = end;
                }
            }
            b'"' => {
                // A JSON string: escapes as JSON has them.
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                if i >= bytes.len() {
                    return err("a string in the filter is not closed");
                }
                i += 1;
                match serde_json::from_str::<String>(&text[start..i]) {
                    Ok(s) => tokens.push(Token::Str(s)),
                    Err(_) => return err("a string in the filter is not valid JSON"),
                }
            }
            _ if is_word_byte(c) => {
                let start = i;
                while i < bytes.len() && is_word_byte(bytes[i]) {
                    i += 1;
                }
                let word = &text[start..i];
                let literal = match word {
                    "true" => Some(Value::Bool(true)),
                    "false" => Some(Value::Bool(false)),
                    "null" => Some(Value::Null),
                    _ if c.is_ascii_digit() || c == b'-' => match serde_json::from_str::<Value>(word) {
                        Ok(v @ Value::Number(_)) => Some(v),
                        _ => return err(format!("invalid number {word:?} in the filter")),
                    },
                    _ => None,
                };
                tokens.push(literal.map_or_else(|| Token::Word(word.to_owned()), Token::Literal));
            }
            _ => {
                return err(format!(
                    "unexpected character {:?} in the filter",
                    text[i..].chars().next().unwrap_or(' ')
                ));
            }
        }
    }
    Ok(tokens)
}

fn is_name_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == b'$'
}

/// An attribute path with its URN (`urn:…:User:name.givenName`), an operator, a number or a keyword.
fn is_word_byte(c: u8) -> bool {
    is_name_byte(c) || c == b':' || c == b'.' || c == b'+'
}

pub(super) fn attr_path(word: &str) -> Result<AttrPath, FilterError> {
    // The extension's URN alone names the extension as a whole (RFC 7644 §3.5.2, §3.4.2.5: a PATCH of the whole
    // `urn:…:enterprise:2.0:User` object, `attributes=urn:…:enterprise:2.0:User`): it is the resource's key.
    if word.eq_ignore_ascii_case(ENTERPRISE_SCHEMA) {
        return Ok(AttrPath { schema: None, attr: ENTERPRISE_SCHEMA.to_owned(), sub: None });
    }
    let (schema, rest) = match word.rfind(':') {
        Some(at) if word[..at].to_ascii_lowercase().starts_with("urn:") => (Some(&word[..at]), &word[at + 1..]),
        Some(_) => return err(format!("invalid attribute path {word:?}")),
        None => (None, word),
    };
    let schema = match schema {
        None => None,
        Some(s) if s.eq_ignore_ascii_case(USER_SCHEMA) || s.eq_ignore_ascii_case(GROUP_SCHEMA) => None,
        Some(s) if s.eq_ignore_ascii_case(ENTERPRISE_SCHEMA) => Some(ENTERPRISE_SCHEMA.to_owned()),
        Some(s) => return err(format!("unknown schema {s:?} in attribute path")),
    };
    let mut parts = rest.split('.');
    let attr = parts.next().unwrap_or_default();
    let sub = parts.next();
    let valid = |s: &str| !s.is_empty() && s.bytes().all(is_name_byte) && !s.as_bytes()[0].is_ascii_digit();
    if !valid(attr) || sub.is_some_and(|s| !valid(s)) || parts.next().is_some() {
        return err(format!("invalid attribute path {word:?}"));
    }
    Ok(AttrPath { schema, attr: attr.to_owned(), sub: sub.map(str::to_owned) })
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn keyword(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(w)) if w.eq_ignore_ascii_case(word))
    }

    fn or(&mut self) -> Result<Filter, FilterError> {
        let mut left = self.and()?;
        while self.keyword("or") {
            self.next();
            left = Filter::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Filter, FilterError> {
        let mut left = self.unary()?;
        while self.keyword("and") {
            self.next();
            left = Filter::And(Box::new(left), Box::new(self.unary()?));
        }
        Ok(left)
    }

    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, FilterError>) -> Result<T, FilterError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return err("the filter is nested too deeply");
        }
        let r = f(self);
        self.depth -= 1;
        r
    }

    fn unary(&mut self) -> Result<Filter, FilterError> {
        if self.keyword("not") {
            self.next();
            if self.peek() != Some(&Token::Open('(')) {
                return err("not must be followed by (");
            }
            return self.nested(|p| Ok(Filter::Not(Box::new(p.unary()?))));
        }
        match self.next() {
            Some(Token::Open('(')) => {
                let inner = self.nested(|p| p.or())?;
                match self.next() {
                    Some(Token::Close(')')) => Ok(inner),
                    _ => err(") expected in the filter"),
                }
            }
            Some(Token::Word(word)) => {
                let path = attr_path(&word)?;
                if self.peek() == Some(&Token::Open('[')) {
                    self.next();
                    let inner = self.nested(|p| p.or())?;
                    if self.next() != Some(Token::Close(']')) {
                        return err("] expected in the filter");
                    }
                    if let Some(Token::SubAttr(_)) = self.peek() {
                        return err("a value filter's sub-attribute is not allowed in a filter");
                    }
                    return Ok(Filter::Value(path, Box::new(inner)));
                }
                let op = match self.next() {
                    Some(Token::Word(op)) => op.to_ascii_lowercase(),
                    Some(t) => return err(format!("an operator is expected after {word:?}, not {}", t.describe())),
                    None => return err(format!("an operator is expected after {word:?}")),
                };
                let op = match op.as_str() {
                    "pr" => return Ok(Filter::Present(path)),
                    "eq" => Op::Eq,
                    "ne" => Op::Ne,
                    "co" => Op::Co,
                    "sw" => Op::Sw,
                    "ew" => Op::Ew,
                    "gt" => Op::Gt,
                    "ge" => Op::Ge,
                    "lt" => Op::Lt,
                    "le" => Op::Le,
                    other => return err(format!("unknown operator {other:?}")),
                };
                let value = match self.next() {
                    Some(Token::Str(s)) => Value::String(s),
                    Some(Token::Literal(v)) => v,
                    Some(t) => return err(format!("a value is expected, not {}", t.describe())),
                    None => return err("a value is expected at the end of the filter"),
                };
                if matches!(value, Value::Bool(_) | Value::Null) && !matches!(op, Op::Eq | Op::Ne) {
                    return err("true, false and null compare only with eq and ne");
                }
                Ok(Filter::Compare(path, op, value))
            }
            Some(t) => err(format!("unexpected {} in the filter", t.describe())),
            None => err("the filter ends too early"),
        }
    }
}

/// The attributes compared with case (RFC 7643: `caseExact` true); every other string compares without.
fn case_exact(attr: &str) -> bool {
    ["id", "externalId", "value", "$ref"].iter().any(|a| a.eq_ignore_ascii_case(attr))
}

/// A member of `object` by name, without case (RFC 7643 §2.1: attribute names are case-insensitive).
pub fn member<'a>(object: &'a Value, name: &str) -> Option<&'a Value> {
    object.as_object()?.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v)
}

/// The values `path` names in `resource`: several for a multi-valued attribute (its values' sub-attribute).
fn values<'a>(resource: &'a Value, path: &AttrPath) -> Vec<&'a Value> {
    let base = match &path.schema {
        Some(schema) => member(resource, schema),
        None => Some(resource),
    };
    let Some(found) = base.and_then(|b| member(b, &path.attr)) else { return Vec::new() };
    let items: Vec<&Value> = match found {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    match &path.sub {
        None => items,
        Some(sub) => items.into_iter().filter_map(|item| member(item, sub)).collect(),
    }
}

impl Filter {
    /// The string a match's core attribute `attr` must equal when the filter requires it (`userName eq "…"`, alone
    /// or as a term of an `and`): a test on the stored record that rules out, before anything is rendered, what
    /// the whole filter could not match. `None` when the filter does not require it.
    pub fn required_eq(&self, attr: &str) -> Option<&str> {
        match self {
            Filter::Compare(path, Op::Eq, Value::String(v))
                if path.schema.is_none() && path.sub.is_none() && path.attr.eq_ignore_ascii_case(attr) =>
            {
                Some(v)
            }
            Filter::And(a, b) => a.required_eq(attr).or_else(|| b.required_eq(attr)),
            _ => None,
        }
    }

    /// Whether `resource` (a rendered resource, or one value of a multi-valued attribute) matches.
    pub fn matches(&self, resource: &Value) -> bool {
        match self {
            Filter::And(a, b) => a.matches(resource) && b.matches(resource),
            Filter::Or(a, b) => a.matches(resource) || b.matches(resource),
            Filter::Not(f) => !f.matches(resource),
            Filter::Present(path) => values(resource, path).iter().any(|v| match v {
                Value::Null => false,
                Value::String(s) => !s.is_empty(),
                Value::Array(a) => !a.is_empty(),
                Value::Object(o) => !o.is_empty(),
                _ => true,
            }),
            Filter::Value(path, inner) => values(resource, path).iter().any(|v| inner.matches(v)),
            Filter::Compare(path, op, want) => {
                // A complex value compared as a whole compares its `value` (RFC 7643 §2.4: the attribute's
                // significant value): Entra ID asks `members eq "<user id>"`.
                let found: Vec<&Value> = values(resource, path)
                    .into_iter()
                    .filter_map(|v| if v.is_object() { member(v, "value") } else { Some(v) })
                    .collect();
                let exact = case_exact(path.sub.as_deref().unwrap_or(&path.attr));
                match op {
                    // `ne` holds when no value equals (an absent attribute included).
                    Op::Ne => !found.iter().any(|v| compare(v, Op::Eq, want, exact)),
                    _ => found.iter().any(|v| compare(v, *op, want, exact)),
                }
            }
        }
    }
}

fn compare(have: &Value, op: Op, want: &Value, exact: bool) -> bool {
    match (have, want) {
        (Value::String(h), Value::String(w)) => {
            let (h, w) = if exact { (h.clone(), w.clone()) } else { (h.to_lowercase(), w.to_lowercase()) };
            match op {
                Op::Eq => h == w,
                Op::Ne => h != w,
                Op::Co => h.contains(&w),
                Op::Sw => h.starts_with(&w),
                Op::Ew => h.ends_with(&w),
                // Date-times are RFC 3339 in UTC here, so their text orders as they do.
                Op::Gt => h > w,
                Op::Ge => h >= w,
                Op::Lt => h < w,
                Op::Le => h <= w,
            }
        }
        (Value::Number(h), Value::Number(w)) => {
            let (Some(h), Some(w)) = (h.as_f64(), w.as_f64()) else { return false };
            match op {
                Op::Eq => h == w,
                Op::Ne => h != w,
                Op::Gt => h > w,
                Op::Ge => h >= w,
                Op::Lt => h < w,
                Op::Le => h <= w,
                Op::Co | Op::Sw | Op::Ew => false,
            }
        }
        (Value::Bool(h), Value::Bool(w)) => match op {
            Op::Eq => h == w,
            Op::Ne => h != w,
            _ => false,
        },
        (_, Value::Null) => matches!(op, Op::Ne),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user() -> Value {
        json!({
            "id": "AbC", "userName": "Alice@Example.com", "active": true, "externalId": "X1",
            "name": {"givenName": "Alice", "familyName": "Liddell"},
            "emails": [{"value": "alice@work.example", "type": "work", "primary": true},
                       {"value": "alice@home.example", "type": "home"}],
            "meta": {"lastModified": "2026-01-02T00:00:00Z"},
            "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": {"employeeNumber": "42"}
        })
    }

    fn holds(filter: &str) -> bool {
        parse(filter).unwrap_or_else(|e| panic!("{filter}: {e}")).matches(&user())
    }

    #[test]
    fn each_operator_matches_as_the_rfc_says() {
        assert!(holds(r#"userName eq "alice@example.com""#), "userName is not case-exact");
        assert!(!holds(r#"externalId eq "x1""#), "externalId is case-exact");
        assert!(holds(r#"userName co "example""#));
        assert!(holds(r#"userName sw "ALICE""#));
        assert!(holds(r#"userName ew ".com""#));
        assert!(holds(r#"userName ne "bob""#));
        assert!(holds("title ne \"x\""), "ne holds for an absent attribute");
        assert!(holds("name.givenName pr"));
        assert!(!holds("title pr"));
        assert!(holds("active eq true"));
        assert!(holds(r#"meta.lastModified gt "2025-12-31T00:00:00Z""#));
        assert!(holds(r#"emails.value eq "alice@home.example""#));
        assert!(holds(r#"emails eq "alice@home.example""#), "a complex value compares its value");
        assert!(!holds(r#"emails eq "work""#));
        assert!(holds(r#"emails[type eq "work" and value co "work"]"#));
        assert!(!holds(r#"emails[type eq "work" and value co "home"]"#));
        assert!(holds(r#"urn:ietf:params:scim:schemas:core:2.0:User:userName sw "a""#));
        assert!(holds(r#"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:employeeNumber eq "42""#));
    }

    #[test]
    fn required_equalities_are_found_only_where_every_match_has_them() {
        let eq = |f: &str, attr: &str| parse(f).unwrap().required_eq(attr).map(str::to_owned);
        assert_eq!(eq(r#"USERNAME eq "a@b.c""#, "userName").as_deref(), Some("a@b.c"));
        assert_eq!(eq(r#"active eq true and externalId eq "x""#, "externalId").as_deref(), Some("x"));
        assert_eq!(eq(r#"userName eq "a" or userName eq "b""#, "userName"), None);
        assert_eq!(eq(r#"not (userName eq "a")"#, "userName"), None);
        assert_eq!(eq(r#"userName co "a""#, "userName"), None);
        assert_eq!(eq(r#"name.userName eq "a""#, "userName"), None);
        assert_eq!(
            eq(r#"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:userName eq "a""#, "userName"),
            None
        );
    }

    #[test]
    fn logic_binds_not_then_and_then_or() {
        assert!(holds(r#"userName eq "bob" or userName sw "a" and active eq true"#));
        assert!(!holds(r#"(userName eq "bob" or userName sw "a") and active eq false"#));
        assert!(holds(r#"not (userName eq "bob")"#));
        assert!(!holds(r#"not (userName eq "bob") and not (active eq true)"#));
        assert!(holds(r#"userName EQ "alice@example.com" AND active Eq true"#), "operators are case-insensitive");
    }

    #[test]
    fn malformed_filters_are_refused_with_a_reason() {
        for bad in [
            "",
            "userName",
            "userName eq",
            r#"userName xx "a""#,
            r#"userName eq "a" and"#,
            r#"(userName eq "a""#,
            r#"userName eq "a")"#,
            r#"userName eq "a"#,
            "active gt true",
            "not userName pr",
            r#"emails[type eq "work""#,
            r#"urn:x:y:userName eq "a""#,
            r#"user..name eq "a""#,
            "userName eq 1x",
            r#"userName eq "a" ;"#,
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(parse(&"(".repeat(100)).is_err());
        assert!(parse(&format!("userName eq \"{}\"", "a".repeat(5000))).is_err());
    }

    #[test]
    fn patch_paths_parse_with_value_filters_and_sub_attributes() {
        let p = parse_path(r#"emails[type eq "work"].value"#).unwrap();
        assert_eq!(p.attr.attr, "emails");
        assert_eq!(p.sub.as_deref(), Some("value"));
        assert!(p.filter.unwrap().matches(&json!({"type": "work"})));
        let p = parse_path("name.givenName").unwrap();
        assert_eq!(
            (p.attr.attr.as_str(), p.attr.sub.as_deref(), p.filter.is_none()),
            ("name", Some("givenName"), true)
        );
        let p = parse_path(r#"members[value eq "2819c223"]"#).unwrap();
        assert!(p.sub.is_none() && p.filter.is_some());
        let p = parse_path("urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department").unwrap();
        assert_eq!((p.attr.schema.as_deref(), p.attr.attr.as_str()), (Some(ENTERPRISE_SCHEMA), "department"));
        // The extension's URN alone: the extension as a whole, found under its key.
        let p = parse_path("urn:ietf:params:scim:schemas:extension:enterprise:2.0:user").unwrap();
        assert_eq!((p.attr.schema, p.attr.attr.as_str(), p.attr.sub), (None, ENTERPRISE_SCHEMA, None));
        assert!(holds("urn:ietf:params:scim:schemas:extension:enterprise:2.0:User pr"));
        for bad in ["", "emails[", r#"emails[type eq "work"]x"#, "a b", "name.givenName[type eq \"x\"]"] {
            assert!(parse_path(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
