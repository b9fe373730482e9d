//! Request ids: the one a trusted proxy sent in `X-Request-Id`, or one made here. Every log line of the request
//! carries it (a tracing span), and the answer echoes it, so a client's report, the proxy's log and ours meet.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use hyper::HeaderMap;
use hyper::header::{HeaderName, HeaderValue};

/// `x-request-id`. A static name: one built from a `&str` on every answer would be allocated every time.
pub static HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// Longest id taken from a proxy; a longer one is replaced, not cut.
const MAX_LEN: usize = 128;

/// Makes ids unique within the process: a random prefix drawn at start (so two runs do not repeat each other's
/// ids), then a counter. Cheaper per request than a random UUID, and unpredictability buys nothing here.
pub struct RequestIds {
    prefix: u64,
    next: AtomicU64,
}

impl RequestIds {
    pub fn new() -> Self {
        let mut bytes = [0u8; 8];
        // Without the OS's randomness the ids are still unique within this run.
        let _ = getrandom::fill(&mut bytes);
        Self { prefix: u64::from_le_bytes(bytes), next: AtomicU64::new(0) }
    }

    /// The id of a request from direct peer `peer`: the proxy's when `peer` is trusted and its id is a sane token,
    /// else a new one.
    pub fn for_request(&self, peer: IpAddr, headers: &HeaderMap, trusted_proxies: &[IpAddr]) -> HeaderValue {
        if trusted_proxies.contains(&peer)
            && let Some(given) = headers.get(&HEADER)
            && is_sane(given.as_bytes())
        {
            return given.clone();
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        // Written on the stack, not through `format!`: this runs for every request.
        let mut id = [0u8; 32];
        hex(self.prefix, &mut id[..16]);
        hex(n, &mut id[16..]);
        HeaderValue::from_bytes(&id).expect("hex digits are a valid header value")
    }
}

impl Default for RequestIds {
    fn default() -> Self {
        Self::new()
    }
}

/// `n` as 16 lower-case hex digits into `out`.
fn hex(n: u64, out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (i, digit) in out.iter_mut().enumerate() {
        *digit = DIGITS[((n >> (60 - 4 * i)) & 0xf) as usize];
    }
}

/// 1 to 128 characters of letters, digits and `-_.:/+=@`: what proxies and tracers send, and nothing that could
/// forge a log line or a field in one.
fn is_sane(id: &[u8]) -> bool {
    (1..=MAX_LEN).contains(&id.len()) && id.iter().all(|b| b.is_ascii_alphanumeric() || b"-_.:/+=@".contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(id: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(HEADER.clone(), HeaderValue::from_str(id).unwrap());
        h
    }

    #[test]
    fn a_trusted_proxy_id_is_kept_and_any_other_replaced() {
        let ids = RequestIds::new();
        let proxy: IpAddr = "10.0.0.1".parse().unwrap();
        let client: IpAddr = "192.0.2.7".parse().unwrap();
        let trusted = [proxy];
        assert_eq!(ids.for_request(proxy, &headers("abc-123"), &trusted), "abc-123");
        assert_ne!(ids.for_request(client, &headers("abc-123"), &trusted), "abc-123", "not from a trusted proxy");
        for bad in ["a b", "x\"y", &"a".repeat(129), "id\tnext"] {
            assert_ne!(ids.for_request(proxy, &headers(bad), &trusted).as_bytes(), bad.as_bytes());
        }
        let (a, b) = (ids.for_request(client, &HeaderMap::new(), &[]), ids.for_request(client, &HeaderMap::new(), &[]));
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        let (a, b) = (
            u128::from_str_radix(a.to_str().unwrap(), 16).unwrap(),
            u128::from_str_radix(b.to_str().unwrap(), 16).unwrap(),
        );
        assert_eq!(b, a + 1, "the prefix, then the counter: {a:032x} {b:032x}");
    }
}
