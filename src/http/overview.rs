//! `GET /api/admin/stats`: what the console's overview draws. The counters' last 24 hours and 30 days (every node's
//! counts, see `actors::counters`), the accounts created in the last seven days, and the outbox's health.

use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::{Map, Value, json};

use super::AppState;
use super::extract::Ctx;
use super::extract::{self, Refusal};
use super::response::{Body, Failure, ok};
use crate::accounts::Counter;
use crate::domain::Timestamp;

const WEEK_MS: i64 = 7 * 86_400_000;

pub async fn stats(state: &AppState, _: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    extract::administrator(state, req.headers(), Refusal::Plain).await?;
    extract::query_only(req.uri().query(), &[])?;
    let series = state.accounts.activity().await?;
    let buckets = |buckets: &[(Timestamp, [u64; Counter::ALL.len()])]| -> Vec<Value> {
        buckets
            .iter()
            .map(|(start, counts)| {
                let mut bucket = Map::new();
                bucket.insert("start".into(), json!(start));
                for (counter, n) in Counter::ALL.iter().zip(counts) {
                    bucket.insert(counter.name().into(), json!(n));
                }
                Value::Object(bucket)
            })
            .collect()
    };
    let week_ago = Timestamp::from_millis(Timestamp::now().as_millis() - WEEK_MS);
    let outbox = state.accounts.outbox().map(|o| json!({"waiting": o.waiting, "max": o.max}));
    Ok(ok(&json!({
        "counters": Counter::ALL.iter().map(|c| c.name()).collect::<Vec<_>>(),
        "hourly": buckets(&series.hours),
        "daily": buckets(&series.days),
        "flush_interval_secs": crate::accounts::COUNTERS_FLUSH_INTERVAL.as_secs(),
        "accounts_created_7d": state.accounts.created_since(week_ago),
        "outbox": outbox,
    })))
}
