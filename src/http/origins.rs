//! Which origins are our own or trusted, and which redirect targets are safe.

use std::borrow::Cow;

/// The server's own origin (from `base_url`, else from the request's `Host`) and the configured trusted ones.
#[derive(Debug, Clone, Default)]
pub struct Origins {
    base: Option<String>,
    /// The identity provider's issuer under `base` ([`ISSUER_PATH`]), made once: every token, introspection and
    /// userinfo request names it.
    base_issuer: Option<String>,
    trusted: Vec<String>,
}

/// Where the identity provider's issuer is under our origin (better-auth's `basePath`).
pub const ISSUER_PATH: &str = "/api/auth";

impl Origins {
    pub fn new(base_url: Option<&str>, trusted: &[String]) -> Self {
        let base = base_url.and_then(origin_of);
        let base_issuer = base.as_ref().map(|base| format!("{base}{ISSUER_PATH}"));
        Self { base, base_issuer, trusted: trusted.iter().filter_map(|o| origin_of(o)).collect() }
    }

    /// The identity provider's issuer: `<base_url>/api/auth` as made once, else `http://<Host>/api/auth`.
    pub fn issuer(&self, host: Option<&str>) -> Option<Cow<'_, str>> {
        match (&self.base_issuer, host) {
            (Some(issuer), _) => Some(Cow::Borrowed(issuer)),
            (None, Some(host)) => Some(Cow::Owned(format!("http://{host}{ISSUER_PATH}"))),
            (None, None) => None,
        }
    }

    /// Whether `origin` (an `Origin` header value) is ours or trusted. Without a configured `base_url`, our own
    /// origin is whatever host the request was sent to, over http or https.
    pub fn is_trusted(&self, origin: &str, host: Option<&str>) -> bool {
        let Some(origin) = origin_of(origin) else { return false };
        let own = match (&self.base, host) {
            (Some(base), _) => *base == origin,
            (None, Some(host)) => {
                let host = host.to_ascii_lowercase();
                origin == format!("http://{host}") || origin == format!("https://{host}")
            }
            (None, None) => false,
        };
        own || self.trusted.contains(&origin)
    }

    /// Whether `origin` (an `Origin` header value) is one of the configured trusted origins, byte for byte as a
    /// browser serialises it (lower case, no path, no default port). Our own origin is not in the list: a
    /// same-origin request needs no CORS.
    /// The server's own origin: `base_url`'s, else `http://<Host>` (what a provider's callback URL starts with).
    pub fn own(&self, host: Option<&str>) -> Option<String> {
        self.base.clone().or_else(|| host.map(|h| format!("http://{h}")))
    }

    pub fn allows_cors(&self, origin: &str) -> bool {
        self.trusted.iter().any(|trusted| trusted == origin)
    }

    /// Whether an absolute URL points at a trusted origin.
    pub fn is_trusted_url(&self, url: &str, host: Option<&str>) -> bool {
        origin_of(url).is_some_and(|origin| self.is_trusted(&origin, host))
    }
}

/// `scheme://host[:port]`, lower-cased, of an absolute http(s) URL; `None` for anything else, including URLs
/// with user info (`https://trusted@evil.example`), which exist mainly to fool this kind of check.
pub fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next()?;
    let valid = !authority.is_empty() && authority.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b));
    if !valid {
        return None;
    }
    // A browser never writes the scheme's default port in an `Origin`, so a configured `https://a.example:443`
    // must mean `https://a.example` to match it.
    let authority = authority.to_ascii_lowercase();
    let default_port = if scheme == "https" { ":443" } else { ":80" };
    let authority = authority.strip_suffix(default_port).unwrap_or(&authority);
    Some(format!("{scheme}://{authority}"))
}

/// A path on this site: one leading `/`, no `//` (protocol-relative), no backslash, no control characters, no
/// encoded slash or backslash (which some servers decode before redirecting).
pub fn safe_relative_path(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    path.starts_with('/')
        && !path.contains("//")
        && !path.contains('\\')
        && !path.chars().any(char::is_control)
        && !lower.contains("%2f")
        && !lower.contains("%5c")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins() {
        assert_eq!(origin_of("https://App.Example.com:8443/x?y").as_deref(), Some("https://app.example.com:8443"));
        assert_eq!(origin_of("https://trusted.example@evil.example/"), None);
        assert_eq!(origin_of("javascript://alert(1)"), None);
        assert_eq!(origin_of("https://app.example.com:443").as_deref(), Some("https://app.example.com"));
        assert_eq!(origin_of("http://app.example.com:80/").as_deref(), Some("http://app.example.com"));
        assert_eq!(origin_of("http://app.example.com:443").as_deref(), Some("http://app.example.com:443"));
        assert_eq!(origin_of("http://[::1]:80").as_deref(), Some("http://[::1]"));
        let o = Origins::new(Some("https://auth.example.com"), &["http://localhost:5173".into()]);
        assert!(o.is_trusted("https://auth.example.com", None));
        assert!(o.is_trusted("http://localhost:5173", None));
        assert!(!o.is_trusted("https://evil.example", Some("evil.example")));
        let by_host = Origins::new(None, &[]);
        assert!(by_host.is_trusted("http://localhost:3000", Some("localhost:3000")));
        assert!(!by_host.is_trusted("http://localhost:3001", Some("localhost:3000")));
    }

    #[test]
    fn relative_paths() {
        assert!(safe_relative_path("/dashboard?tab=1"));
        for bad in ["//evil.example", "/\\evil", "https://x", "dashboard", "/a%2f%2fb", "/a\nb"] {
            assert!(!safe_relative_path(bad), "{bad}");
        }
    }
}
