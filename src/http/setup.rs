//! The first-run setup: `GET /admin/setup` (the page the logged setup link opens) and `POST /api/admin/setup`
//! (what it sends). See `accounts::setup` for the link itself. Refused once an administrator exists.

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};

use super::AppState;
use super::dto::{SetUp, SetUpUser};
use super::extract::{self, Ctx};
use super::fields::{invalid_email, validated_name};
use super::pages;
use super::response::{Body, Failure, ok};
use crate::accounts::SetupError;
use crate::domain::{Email, Password};

/// `GET /admin/setup`: the form while nobody administers the service, else a page saying it is set up. The
/// token in the address is checked when the form is sent, not here: the page is the same for everyone.
pub fn page(state: &AppState) -> Result<Response<Body>, Failure> {
    Ok(pages::setup(state.accounts.any_admin()))
}

/// `POST /api/admin/setup` `{token, name, email, password}`: creates the first administrator (audited, durable
/// before the answer) and spends the link. `{success, user: {id, email, name}}`.
pub async fn create(state: &AppState, ctx: Ctx, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let body = extract::json_object(req, true, state.body_timeout()).await?;
    body.only(&["token", "name", "email", "password"])?;
    let token = body.string("token")?.to_owned();
    let name = validated_name(body.string("name")?)?;
    let email = Email::parse(body.string("email")?).map_err(|_| invalid_email())?;
    let password = Password::new(body.string("password")?)?;
    let (shown_email, shown_name) = (email.as_str().to_owned(), name.as_str().to_owned());
    let ip = ctx.ip.to_string();
    let created = state.accounts.set_up_first_admin(&state.setup, &token, name, email, password, ip).await;
    let id = created.map_err(refusal)?;
    tracing::info!(user = %id, "first administrator created through the setup link");
    Ok(ok(&SetUp { success: true, user: SetUpUser { email: &shown_email, id, name: &shown_name } }))
}

fn refusal(e: SetupError) -> Failure {
    let (status, code) = match e {
        SetupError::InvalidLink => (StatusCode::FORBIDDEN, "INVALID_SETUP_LINK"),
        SetupError::AdminExists => (StatusCode::CONFLICT, "ADMIN_EXISTS"),
        SetupError::EmailTaken => (StatusCode::CONFLICT, "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL"),
        SetupError::Busy => return super::errors::busy(),
        SetupError::Hashing(_) => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL_SERVER_ERROR"),
        SetupError::Password(p) => return p.into(),
        SetupError::Unavailable(u) => return u.into(),
    };
    Failure::new(status, code, e.to_string())
}
