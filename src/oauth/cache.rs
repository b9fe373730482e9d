//! A provider's discovery document and signing keys, fetched once and kept for as long as the provider's
//! `Cache-Control` says (`max-age`; `no-store`/`no-cache`: fetched every time), within bounds: a provider that says
//! nothing is asked again after [`DEFAULT_AGE`], and none is trusted for more than [`MAX_AGE`]. A key the cached set
//! lacks is fetched again, at most once per [`REFETCH_GAP`], so that a rotation is followed without letting a flood
//! of bad tokens turn into a flood of requests to the provider.

use std::time::{Duration, Instant};

use tokio::sync::Mutex;

pub const DEFAULT_AGE: Duration = Duration::from_secs(300);
pub const MAX_AGE: Duration = Duration::from_secs(86_400);
pub const REFETCH_GAP: Duration = Duration::from_secs(60);

/// How long an answer with these `Cache-Control` values may be used.
pub fn freshness(cache_control: Option<&str>) -> Duration {
    let Some(value) = cache_control else { return DEFAULT_AGE };
    let mut age = None;
    for directive in value.split(',').map(str::trim) {
        let lower = directive.to_ascii_lowercase();
        if lower == "no-store" || lower == "no-cache" {
            return Duration::ZERO;
        }
        if let Some(secs) = lower.strip_prefix("max-age=") {
            age = secs.trim_matches('"').parse::<u64>().ok().map(Duration::from_secs);
        }
    }
    age.unwrap_or(DEFAULT_AGE).min(MAX_AGE)
}

/// One cached document.
pub struct Cached<T> {
    slot: Mutex<Option<Entry<T>>>,
}

struct Entry<T> {
    value: T,
    fetched: Instant,
    fresh_for: Duration,
}

impl<T: Clone> Default for Cached<T> {
    fn default() -> Self {
        Self { slot: Mutex::new(None) }
    }
}

impl<T: Clone> Cached<T> {
    /// A cache holding `(value, freshness)` already, fetched just now.
    pub fn with((value, fresh_for): (T, Duration)) -> Self {
        Self { slot: Mutex::new(Some(Entry { value, fetched: Instant::now(), fresh_for })) }
    }

    /// The cached value while fresh, else `fetch`'s (value, freshness), cached. With `stale_ok_after`, a fresh
    /// value fetched longer ago than that is fetched again too (a key it lacks).
    pub async fn get<F, Fut, E>(&self, refetch: bool, fetch: F) -> Result<T, E>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<(T, Duration), E>>,
    {
        // Held across the fetch: concurrent callers wait for one request instead of each making their own.
        let mut slot = self.slot.lock().await;
        if let Some(entry) = slot.as_ref() {
            let age = entry.fetched.elapsed();
            let fresh = age < entry.fresh_for;
            if fresh && !(refetch && age >= REFETCH_GAP) {
                return Ok(entry.value.clone());
            }
        }
        let (value, fresh_for) = fetch().await?;
        *slot = Some(Entry { value: value.clone(), fetched: Instant::now(), fresh_for });
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freshness_follows_cache_control_within_bounds() {
        assert_eq!(freshness(None), DEFAULT_AGE);
        assert_eq!(freshness(Some("public, max-age=3600")), Duration::from_secs(3600));
        assert_eq!(freshness(Some("max-age=99999999")), MAX_AGE);
        assert_eq!(freshness(Some("no-store")), Duration::ZERO);
        assert_eq!(freshness(Some("max-age=60, no-cache")), Duration::ZERO);
        assert_eq!(freshness(Some("private")), DEFAULT_AGE);
    }

    #[tokio::test]
    async fn a_fresh_value_is_not_fetched_again_and_an_uncacheable_one_always_is() {
        let cached: Cached<u32> = Cached::default();
        let mut fetches = 0;
        for _ in 0..3 {
            let v = cached
                .get(false, || {
                    fetches += 1;
                    async { Ok::<_, ()>((7, Duration::from_secs(60))) }
                })
                .await;
            assert_eq!(v, Ok(7));
        }
        assert_eq!(fetches, 1);
        let uncached: Cached<u32> = Cached::default();
        let mut fetches = 0;
        for _ in 0..3 {
            uncached
                .get(false, || {
                    fetches += 1;
                    async { Ok::<_, ()>((7, Duration::ZERO)) }
                })
                .await
                .unwrap();
        }
        assert_eq!(fetches, 3);
    }
}
