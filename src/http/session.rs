//! Who is calling: the session behind the cookie, checked against the user's current state on every request.

use std::sync::Arc;

use hyper::Response;
use hyper::header::HeaderMap;

use super::State;
use super::request;
use super::response::{Body, ok, with_cookie};
use crate::domain::{Session, SessionToken, Timestamp, User};

/// A valid session and its user, as they are right now.
pub struct Current {
    pub token: SessionToken,
    pub session: Arc<Session>,
    pub user: Arc<User>,
}

/// The caller's session, if the cookie names one that is live and whose user exists and is not banned. Two map
/// reads, no actor hop: this is the hot path of every application behind us. Reading the user's *current*
/// state here is what makes a ban or a demotion count from the very next request.
pub fn current(state: &State, headers: &HeaderMap) -> Option<Current> {
    let token = SessionToken::parse(request::cookie(headers, &state.cookies.name)?)?;
    let session = state.indexes.sessions.get(&token.hash())?;
    if session.is_expired(Timestamp::now()) {
        return None;
    }
    let user = state.indexes.users.get(session.user_id).filter(|u| !u.banned)?;
    Some(Current { token, session, user })
}

/// `get-session` without a valid session: `null`, and a clearing cookie if the client sent a stale one, so a
/// browser stops presenting it.
pub fn no_session(state: &State, headers: &HeaderMap) -> Response<Body> {
    let answer = ok(&serde_json::Value::Null);
    match request::cookie(headers, &state.cookies.name) {
        Some(_) => with_cookie(answer, state.cookies.clear()),
        None => answer,
    }
}
