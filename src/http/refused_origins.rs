//! Browser pages on origins outside `trusted_origins`: logged once per origin, so an operator who forgot to trust
//! their application's origin sees which one is knocking ("the login page says network error"), without a line per
//! request. Only well-formed `scheme://host[:port]` origins are logged (nothing else of the header), and at most
//! [`MAX_LOGGED`] distinct ones per process: a client inventing origins cannot fill the memory or the log.

use std::collections::HashSet;
use std::sync::Mutex;

use hyper::header::{self, HeaderMap};

use super::origins::{Origins, origin_of};

/// Distinct refused origins remembered (and logged) per process.
const MAX_LOGGED: usize = 256;

#[derive(Default)]
pub struct RefusedOrigins {
    seen: Mutex<HashSet<String>>,
}

impl RefusedOrigins {
    /// Notes the request's `Origin` if it is neither trusted for CORS nor the service's own; logs it the first time.
    pub fn note(&self, origins: &Origins, headers: &HeaderMap) {
        let Some(given) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else { return };
        if origins.allows_cors(given) {
            return;
        }
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        if origins.is_trusted(given, host) {
            return; // our own origin: a same-origin request needs no CORS
        }
        // `Origin: null` (a sandboxed frame, a file) and anything that is not an origin are not worth a line.
        let Some(origin) = origin_of(given).filter(|o| o == given) else { return };
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if seen.len() >= MAX_LOGGED || seen.contains(&origin) {
            return;
        }
        tracing::warn!(
            %origin,
            "refused a browser page on another origin (not in trusted_origins): its calls get no CORS headers and \
             its state-changing calls with cookies are refused; add it to trusted_origins if it is your application \
             (logged once per origin)"
        );
        seen.insert(origin);
        if seen.len() == MAX_LOGGED {
            tracing::warn!("{MAX_LOGGED} refused origins logged; further ones are not");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn headers(origin: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        h.insert(header::HOST, HeaderValue::from_static("auth.example.com"));
        h
    }

    #[test]
    fn each_refused_origin_is_remembered_once_and_trusted_or_own_ones_never() {
        let origins = Origins::new(None, &["https://app.example.com".to_owned()]);
        let refused = RefusedOrigins::default();
        for origin in [
            "https://evil.example",
            "https://evil.example",
            "https://app.example.com",
            "http://auth.example.com",
            "null",
        ] {
            refused.note(&origins, &headers(origin));
        }
        let seen = refused.seen.lock().unwrap();
        assert_eq!(seen.iter().collect::<Vec<_>>(), ["https://evil.example"]);
    }

    #[test]
    fn the_memory_is_bounded() {
        let origins = Origins::new(None, &[]);
        let refused = RefusedOrigins::default();
        for n in 0..MAX_LOGGED + 50 {
            refused.note(&origins, &headers(&format!("https://o{n}.example")));
        }
        assert_eq!(refused.seen.lock().unwrap().len(), MAX_LOGGED);
    }
}
