//! Dispatch: the route (see [`super::routes`]), then the method, then the endpoint's handler. A known path with
//! another method is 405 with `Allow`, `OPTIONS` on a known path a CORS preflight; an unknown path 404. `HEAD` is
//! answered for every `GET` route: the same status and headers, no body. Also the cross-site rule, and the access
//! log and metrics of every request.

use std::net::IpAddr;
use std::time::Instant;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use tracing::Instrument;

use super::extract::Ctx;
use super::response::{Body, Failure, Family};
use super::routes::{Endpoint, ROUTES, allow_header, endpoint, find_route};
use super::{
    AppState, account, admin, admin_plugin, api_keys, audit_export, auth, consents, console, cors, export, extract,
    oauth, ops, org_plugin, org_roles, org_teams, organizations, overview, pages, passkeys, provider, recovery,
    request_id, saml, scim, setup, sso, sso_sign_in, two_factor, user_admin, way_in, webhooks,
};

/// The SCIM root: everything under it answers as SCIM does (`Family::Scim`), unknown paths included.
const SCIM_ROOT: &str = "/api/auth/scim/v2";
const SCIM_PREFIX: &str = "/api/auth/scim/v2/";

/// Cross-site request forgery: a state-changing request that carries cookies is refused when the browser says
/// it comes from another site, or when its `Origin` is neither ours nor trusted. Requests without cookies, and
/// clients that send no `Origin` (curl, servers), are not affected: they cannot be riding a victim's session.
fn is_cross_site(state: &AppState, req: &Request<Incoming>, host: Option<&str>) -> bool {
    let headers = req.headers();
    if !headers.contains_key(header::COOKIE) {
        return false;
    }
    let fetch_site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if fetch_site.is_some_and(|v| v.eq_ignore_ascii_case("cross-site")) {
        return true;
    }
    match headers.get(header::ORIGIN).map(|v| v.to_str()) {
        None => false,
        Some(Ok(origin)) => !state.origins.is_trusted(origin, host),
        Some(Err(_)) => true,
    }
}

/// Every answer, errors included, says that no browser may guess a type other than the one it declares, carries
/// the CORS headers when it answers a trusted origin, and carries the request's id, which every log line while it
/// runs has too (a span).
pub(super) async fn route(state: &AppState, peer: IpAddr, mut req: Request<Incoming>) -> Response<Body> {
    let id = state.request_ids.for_request(peer, req.headers(), &state.trusted_proxies);
    let span = tracing::info_span!("request", request_id = id.to_str().unwrap_or_default());
    let body = extract::BodyRead::track(&mut req);
    let mut response = answer(state, peer, req).instrument(span).await;
    response.headers_mut().insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response.headers_mut().insert(request_id::HEADER.clone(), id);
    // A body not read to its end (an answer given before it was needed, or one too large or too slow) leaves
    // the connection unusable: hyper closes it after this answer, unless the rest happened to have arrived
    // already, and decides so only once the head is written. Said here, the client knows not to send its next
    // request on it (without this, that request met a closed connection: a broken pipe).
    if body.is_some_and(|b| !b.finished()) {
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

async fn answer(state: &AppState, peer: IpAddr, req: Request<Incoming>) -> Response<Body> {
    let head = req.method() == Method::HEAD;
    let client = extract::client_ip(peer, req.headers(), &state.trusted_proxies);
    let origin = cors::trusted_origin(&state.origins, req.headers());
    // The identity provider's endpoints for applications' pages answer every origin: none is refused there.
    let open = cors::is_open(req.uri().path());
    if origin.is_none() && !open {
        state.refused_origins.note(&state.origins, req.headers());
    }
    // The clock is read, and the method kept, only when something records them.
    let started = (state.route_metrics.enabled() || state.access_log).then(Instant::now);
    let method = state.access_log.then(|| req.method().clone());
    let (route, mut response) = dispatch(state, client, req, origin.as_ref(), open).await;
    if let Some(started) = started {
        let elapsed = started.elapsed();
        state.route_metrics.observe(&state.accounts.metrics, route, response.status(), elapsed);
        if let Some(method) = method {
            // Method, route pattern, status, time, client: never a header value, a cookie, a token or a body.
            let route = route.map_or("unmatched", |i| ROUTES[i].0);
            tracing::info!(
                target: "access",
                %method,
                route,
                status = response.status().as_u16(),
                duration_ms = elapsed.as_secs_f64() * 1000.0,
                client = %client,
                "request"
            );
        }
    }
    match origin {
        None if open => cors::decorate_open(&mut response),
        origin => cors::decorate(&mut response, origin),
    }
    if head {
        strip_body(&mut response);
    }
    response
}

/// A `HEAD` answer: the `GET` answer's status and headers, with the length the body would have had.
fn strip_body(response: &mut Response<Body>) {
    if let Some(length) = hyper::body::Body::size_hint(response.body()).exact() {
        response.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    *response.body_mut() = Body::default();
}

/// The routes: path, then method. A known path with another method is 405 with `Allow`; `OPTIONS` on a known path
/// is a CORS preflight (or a question about the methods): see [`cors::preflight`]. Returns the index of the
/// matched route (for the metrics) with the answer.
async fn dispatch(
    state: &AppState,
    client: IpAddr,
    mut req: Request<Incoming>,
    origin: Option<&HeaderValue>,
    open: bool,
) -> (Option<usize>, Response<Body>) {
    let path = req.uri().path();
    let family = if path.starts_with("/api/admin/") {
        Family::Admin
    } else if path == SCIM_ROOT || path.starts_with(SCIM_PREFIX) {
        Family::Scim
    } else {
        Family::Auth
    };
    let Some(index) = find_route(path) else {
        return (None, Failure::new(StatusCode::NOT_FOUND, "NOT_FOUND", "Not found").into_response(family));
    };
    let allowed = ROUTES[index].1;
    if req.method() == Method::OPTIONS {
        let allow = allow_header(allowed);
        let preflight =
            if open { cors::preflight_open(allowed, &allow) } else { cors::preflight(allowed, &allow, origin) };
        return (Some(index), preflight);
    }
    // HEAD runs the GET handler; `route` drops the body. Nothing a GET handler does changes state.
    if req.method() == Method::HEAD && allowed.contains(&Method::GET) {
        *req.method_mut() = Method::GET;
    }
    let Some(endpoint) = endpoint(index, req.method()) else {
        let failure = Failure::new(StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED", "Method not allowed")
            .with_header(header::ALLOW, allow_header(allowed));
        return (Some(index), failure.into_response(family));
    };
    let host = req.headers().get(header::HOST).cloned();
    // The SAML ACS is posted by the IdP's page (the HTTP-POST binding), cross-site by design; it trusts no cookie
    // but the one binding the response to the browser's own request, and the response's signature.
    if *req.method() != Method::GET
        && endpoint != Endpoint::SsoSamlAcs
        && is_cross_site(state, &req, host.as_ref().and_then(|h| h.to_str().ok()))
    {
        let failure = Failure::new(StatusCode::FORBIDDEN, "INVALID_ORIGIN", "Invalid origin");
        return (Some(index), failure.into_response(family));
    }
    let ctx = Ctx { ip: client, host };
    let method = req.method().clone();
    // The session check's future is kept inline, every other handler's boxed: inline, the largest of them set the
    // size of every request's future, which hyper and the async layers above copy several times per request (3–4 %
    // of the event loops' time in memcpy under the random-session load).
    let result = match endpoint {
        Endpoint::GetSession => auth::get_session(state, ctx, req).await,
        other => Box::pin(handle(state, other, ctx, req)).await,
    };
    let response = result.unwrap_or_else(|failure| {
        if failure.status.is_server_error() {
            let route = ROUTES[index].0;
            tracing::warn!(%method, route, status = %failure.status, code = failure.code, "request failed");
        }
        failure.into_response(family)
    });
    (Some(index), response)
}

/// The endpoint's handler (the session check's too, though [`dispatch`] calls that one itself).
async fn handle(
    state: &AppState,
    endpoint: Endpoint,
    ctx: Ctx,
    req: Request<Incoming>,
) -> Result<Response<Body>, Failure> {
    match endpoint {
        Endpoint::SignUp => auth::sign_up(state, ctx, req).await,
        Endpoint::SignIn => {
            let result = auth::sign_in(state, ctx, req).await;
            if state.route_metrics.enabled() {
                let outcome = result.as_ref().map_or_else(|failure| failure.code, |_| "success");
                state.accounts.metrics.sign_in(outcome).increment(1);
            }
            result
        }
        Endpoint::GetSession => auth::get_session(state, ctx, req).await,
        Endpoint::SignOut => auth::sign_out(state, ctx, req).await,
        Endpoint::ChangePassword => account::change_password(state, ctx, req).await,
        Endpoint::UpdateOwnProfile => account::update_user(state, ctx, req).await,
        Endpoint::ListOwnSessions => account::list_sessions(state, ctx, req).await,
        Endpoint::RevokeOwnSession => account::revoke_session(state, ctx, req).await,
        Endpoint::RevokeOwnSessions => account::revoke_sessions(state, ctx, req).await,
        Endpoint::RevokeOtherOwnSessions => account::revoke_other_sessions(state, ctx, req).await,
        Endpoint::DeleteOwnAccount => account::delete_user(state, ctx, req).await,
        Endpoint::RequestPasswordReset => recovery::request_password_reset(state, ctx, req).await,
        Endpoint::FollowResetLink => recovery::follow_reset_link(state, ctx, req).await,
        Endpoint::ResetPassword => recovery::reset_password(state, ctx, req).await,
        Endpoint::SendVerificationEmail => recovery::send_verification_email(state, ctx, req).await,
        Endpoint::VerifyEmail => recovery::verify_email(state, ctx, req).await,
        Endpoint::SignInUsername => auth::sign_in_username(state, ctx, req).await,
        Endpoint::IsUsernameAvailable => auth::is_username_available(state, ctx, req).await,
        Endpoint::SignInMagicLink => way_in::sign_in_magic_link(state, ctx, req).await,
        Endpoint::VerifyMagicLink => way_in::verify_magic_link(state, ctx, req).await,
        Endpoint::SendVerificationOtp => way_in::send_verification_otp(state, ctx, req).await,
        Endpoint::CheckVerificationOtp => way_in::check_verification_otp(state, ctx, req).await,
        Endpoint::SignInEmailOtp => way_in::sign_in_email_otp(state, ctx, req).await,
        Endpoint::VerifyEmailOtp => way_in::verify_email_otp(state, ctx, req).await,
        Endpoint::RequestPasswordResetOtp | Endpoint::ForgetPasswordOtp => {
            way_in::request_password_reset_otp(state, ctx, req).await
        }
        Endpoint::ResetPasswordOtp => way_in::reset_password_otp(state, ctx, req).await,
        Endpoint::PasskeyRegistrationOptions => passkeys::registration_options(state, ctx, req).await,
        Endpoint::PasskeyVerifyRegistration => passkeys::verify_registration(state, ctx, req).await,
        Endpoint::PasskeyAuthenticationOptions => passkeys::authentication_options(state, ctx, req).await,
        Endpoint::PasskeyVerifyAuthentication => passkeys::verify_authentication(state, ctx, req).await,
        Endpoint::ListOwnPasskeys => passkeys::list(state, ctx, req).await,
        Endpoint::UpdateOwnPasskey => passkeys::update(state, ctx, req).await,
        Endpoint::DeleteOwnPasskey => passkeys::delete(state, ctx, req).await,
        Endpoint::UserPasskeys => passkeys::of_user(state, ctx, req).await,
        Endpoint::ApiKeyCreate => api_keys::create(state, ctx, req).await,
        Endpoint::SsoRegister => sso::register(state, ctx, req).await,
        Endpoint::SsoProviders => sso::providers(state, ctx, req).await,
        Endpoint::SsoGetProvider => sso::get_provider(state, ctx, req).await,
        Endpoint::SsoUpdateProvider => sso::update_provider(state, ctx, req).await,
        Endpoint::SsoDeleteProvider => sso::delete_provider(state, ctx, req).await,
        Endpoint::SsoRequestDomainVerification => sso::request_domain_verification(state, ctx, req).await,
        Endpoint::SsoVerifyDomain => sso::verify_domain(state, ctx, req).await,
        Endpoint::SsoConfirmDomain => sso::confirm_domain(state, ctx, req).await,
        Endpoint::SsoPolicy => sso::policy(state, ctx, req).await,
        Endpoint::SetSsoPolicy => sso::set_policy(state, ctx, req).await,
        Endpoint::SignInSso => sso_sign_in::sign_in(state, ctx, req).await,
        Endpoint::SsoCallback => sso_sign_in::callback(state, ctx, req).await,
        Endpoint::SsoSamlMetadata => saml::metadata(state, ctx, req).await,
        Endpoint::SsoSamlAcs => saml::acs(state, ctx, req).await,
        Endpoint::ApiKeyGet => api_keys::get(state, ctx, req).await,
        Endpoint::ApiKeyList => api_keys::list(state, ctx, req).await,
        Endpoint::ApiKeyUpdate => api_keys::update(state, ctx, req).await,
        Endpoint::ApiKeyDelete => api_keys::delete(state, ctx, req).await,
        Endpoint::ApiKeyVerify => api_keys::verify(state, ctx, req).await,
        Endpoint::ApiKeyDeleteExpired => api_keys::delete_all_expired(state, ctx, req).await,
        Endpoint::SignInSocial => oauth::sign_in(state, ctx, req, oauth::Via::Social).await,
        Endpoint::SignInOAuth2 => oauth::sign_in(state, ctx, req, oauth::Via::OAuth2).await,
        Endpoint::ProviderCallback
        | Endpoint::ProviderFormPost
        | Endpoint::OAuth2Callback
        | Endpoint::OAuth2FormPost => oauth::callback(state, ctx, req).await,
        Endpoint::LinkSocial => oauth::link_social(state, ctx, req).await,
        Endpoint::ListAccounts => oauth::list_accounts(state, ctx, req).await,
        Endpoint::UnlinkAccount => oauth::unlink_account(state, ctx, req).await,
        Endpoint::PluginListUsers => admin_plugin::list_users(state, ctx, req).await,
        Endpoint::PluginGetUser => admin_plugin::get_user(state, ctx, req).await,
        Endpoint::PluginCreateUser => admin_plugin::create_user(state, ctx, req).await,
        Endpoint::PluginSetRole => admin_plugin::set_role(state, ctx, req).await,
        Endpoint::PluginBanUser => admin_plugin::ban_user(state, ctx, req).await,
        Endpoint::PluginUnbanUser => admin_plugin::unban_user(state, ctx, req).await,
        Endpoint::PluginListUserSessions => admin_plugin::list_user_sessions(state, ctx, req).await,
        Endpoint::PluginRevokeUserSession => admin_plugin::revoke_user_session(state, ctx, req).await,
        Endpoint::PluginRevokeUserSessions => admin_plugin::revoke_user_sessions(state, ctx, req).await,
        Endpoint::PluginSetUserPassword => admin_plugin::set_user_password(state, ctx, req).await,
        Endpoint::PluginRemoveUser => admin_plugin::remove_user(state, ctx, req).await,
        Endpoint::PluginHasPermission => admin_plugin::has_permission(state, ctx, req).await,
        Endpoint::PluginUpdateUser => admin_plugin::update_user(state, ctx, req).await,
        Endpoint::PluginImpersonateUser => admin_plugin::impersonate_user(state, ctx, req).await,
        Endpoint::PluginStopImpersonating => admin_plugin::stop_impersonating(state, ctx, req).await,
        Endpoint::OrgCreate => org_plugin::create(state, ctx, req).await,
        Endpoint::OrgCheckSlug => org_plugin::check_slug(state, ctx, req).await,
        Endpoint::OrgUpdate => org_plugin::update(state, ctx, req).await,
        Endpoint::OrgDelete => org_plugin::delete(state, ctx, req).await,
        Endpoint::OrgList => org_plugin::list(state, ctx, req).await,
        Endpoint::OrgGetFull => org_plugin::get_full(state, ctx, req).await,
        Endpoint::OrgSetActive => org_plugin::set_active(state, ctx, req).await,
        Endpoint::OrgListMembers => org_plugin::list_members(state, ctx, req).await,
        Endpoint::OrgGetActiveMember => org_plugin::get_active_member(state, ctx, req).await,
        Endpoint::OrgGetActiveMemberRole => org_plugin::get_active_member_role(state, ctx, req).await,
        Endpoint::OrgUpdateMemberRole => org_plugin::update_member_role(state, ctx, req).await,
        Endpoint::OrgRemoveMember => org_plugin::remove_member(state, ctx, req).await,
        Endpoint::OrgLeave => org_plugin::leave(state, ctx, req).await,
        Endpoint::OrgHasPermission => org_plugin::has_permission(state, ctx, req).await,
        Endpoint::OrgInviteMember => org_plugin::invite_member(state, ctx, req).await,
        Endpoint::OrgAcceptInvitation => org_plugin::accept_invitation(state, ctx, req).await,
        Endpoint::OrgRejectInvitation => org_plugin::reject_invitation(state, ctx, req).await,
        Endpoint::OrgCancelInvitation => org_plugin::cancel_invitation(state, ctx, req).await,
        Endpoint::OrgGetInvitation => org_plugin::get_invitation(state, ctx, req).await,
        Endpoint::OrgListInvitations => org_plugin::list_invitations(state, ctx, req).await,
        Endpoint::OrgListUserInvitations => org_plugin::list_user_invitations(state, ctx, req).await,
        Endpoint::OrgCreateTeam => org_teams::create(state, ctx, req).await,
        Endpoint::OrgCreateRole => org_roles::create(state, ctx, req).await,
        Endpoint::OrgListRoles => org_roles::list(state, ctx, req).await,
        Endpoint::OrgGetRole => org_roles::get(state, ctx, req).await,
        Endpoint::OrgUpdateRole => org_roles::update(state, ctx, req).await,
        Endpoint::OrgDeleteRole => org_roles::delete(state, ctx, req).await,
        Endpoint::OrgListTeams => org_teams::list(state, ctx, req).await,
        Endpoint::OrgUpdateTeam => org_teams::update(state, ctx, req).await,
        Endpoint::OrgRemoveTeam => org_teams::remove(state, ctx, req).await,
        Endpoint::OrgAddTeamMember => org_teams::add_member(state, ctx, req).await,
        Endpoint::OrgRemoveTeamMember => org_teams::remove_member(state, ctx, req).await,
        Endpoint::OrgListTeamMembers => org_teams::list_members(state, ctx, req).await,
        Endpoint::OrgListUserTeams => org_teams::list_user_teams(state, ctx, req).await,
        Endpoint::OrgSetActiveTeam => org_teams::set_active(state, ctx, req).await,
        Endpoint::TwoFactorEnable => two_factor::enable(state, ctx, req).await,
        Endpoint::TwoFactorGetTotpUri => two_factor::get_totp_uri(state, ctx, req).await,
        Endpoint::TwoFactorVerifyTotp => two_factor::verify_totp(state, ctx, req).await,
        Endpoint::TwoFactorVerifyBackupCode => two_factor::verify_backup_code(state, ctx, req).await,
        Endpoint::TwoFactorGenerateBackupCodes => two_factor::generate_backup_codes(state, ctx, req).await,
        Endpoint::TwoFactorDisable => two_factor::disable(state, ctx, req).await,
        Endpoint::TwoFactorSendOtp => two_factor::send_otp(state, ctx, req).await,
        Endpoint::TwoFactorVerifyOtp => two_factor::verify_otp(state, ctx, req).await,
        Endpoint::TwoFactorReset => two_factor::admin_reset(state, ctx, req).await,
        Endpoint::ListUsers => admin::list_users(state, ctx, req).await,
        Endpoint::UpdateUser => admin::update_user(state, ctx, req).await,
        Endpoint::ListOrganizations => organizations::list(state, ctx, req).await,
        Endpoint::CreateOrganization => organizations::create(state, ctx, req).await,
        Endpoint::GetOrganization => organizations::get(state, ctx, req).await,
        Endpoint::UpdateOrganization => organizations::update(state, ctx, req).await,
        Endpoint::DeleteOrganization => organizations::delete(state, ctx, req).await,
        Endpoint::OrganizationMembers => organizations::members(state, ctx, req).await,
        Endpoint::ScimTokens => scim::tokens(state, ctx, req).await,
        Endpoint::CreateScimToken => scim::create_token(state, ctx, req).await,
        Endpoint::RevokeScimToken => scim::revoke_token(state, ctx, req).await,
        Endpoint::ScimServiceProviderConfig => scim::service_provider_config(state, ctx, req).await,
        Endpoint::ScimResourceTypes => scim::resource_types(state, ctx, req).await,
        Endpoint::ScimResourceType => scim::resource_type(state, ctx, req).await,
        Endpoint::ScimSchemas => scim::schemas(state, ctx, req).await,
        Endpoint::ScimSchema => scim::schema(state, ctx, req).await,
        Endpoint::ScimListUsers => scim::list_users(state, ctx, req).await,
        Endpoint::ScimCreateUser => scim::create_user(state, ctx, req).await,
        Endpoint::ScimSearchUsers => scim::search(state, ctx, req, scim::Searched::Users).await,
        Endpoint::ScimSearchGroups => scim::search(state, ctx, req, scim::Searched::Groups).await,
        Endpoint::ScimSearch => scim::search(state, ctx, req, scim::Searched::All).await,
        Endpoint::ScimGetUser => scim::get_user(state, ctx, req).await,
        Endpoint::ScimReplaceUser => scim::replace_user(state, ctx, req).await,
        Endpoint::ScimPatchUser => scim::patch_user(state, ctx, req).await,
        Endpoint::ScimDeleteUser => scim::delete_user(state, ctx, req).await,
        Endpoint::ScimListGroups => scim::list_groups(state, ctx, req).await,
        Endpoint::ScimCreateGroup => scim::create_group(state, ctx, req).await,
        Endpoint::ScimGetGroup => scim::get_group(state, ctx, req).await,
        Endpoint::ScimReplaceGroup => scim::replace_group(state, ctx, req).await,
        Endpoint::ScimPatchGroup => scim::patch_group(state, ctx, req).await,
        Endpoint::ScimDeleteGroup => scim::delete_group(state, ctx, req).await,
        Endpoint::Audit => admin::audit(state, ctx, req).await,
        Endpoint::Jwks => provider::jwks(state, ctx, req).await,
        Endpoint::OAuth2Authorize => provider::authorize(state, ctx, req).await,
        Endpoint::OAuth2AuthorizeForm => provider::authorize_form(state, ctx, req).await,
        Endpoint::OAuth2Consent => provider::consent(state, ctx, req).await,
        Endpoint::OAuth2PublicClient => provider::public_client(state, ctx, req).await,
        Endpoint::OAuth2Token => provider::token(state, ctx, req).await,
        Endpoint::OAuth2DeviceAuthorization => provider::device_authorization(state, ctx, req).await,
        Endpoint::OAuth2DeviceRequest => provider::device_request(state, ctx, req).await,
        Endpoint::OAuth2DeviceDecision => provider::device_decision(state, ctx, req).await,
        Endpoint::OAuth2Introspect => provider::introspect(state, ctx, req).await,
        Endpoint::OAuth2Revoke => provider::revoke(state, ctx, req).await,
        Endpoint::OAuth2EndSession => provider::end_session(state, ctx, req).await,
        Endpoint::OAuth2EndSessionForm => provider::end_session_form(state, ctx, req).await,
        Endpoint::OAuth2EndSessionConfirm => provider::end_session_confirm(state, ctx, req).await,
        Endpoint::OAuth2Register => provider::register(state, ctx, req).await,
        Endpoint::OAuth2UserInfo | Endpoint::OAuth2UserInfoForm => provider::userinfo(state, ctx, req).await,
        Endpoint::OpenIdConfiguration
        | Endpoint::AuthorizationServerMetadata
        | Endpoint::AuthorizationServerMetadataRfc8414 => provider::metadata(state, ctx, req).await,
        Endpoint::SigningKeys => provider::keys(state, ctx, req).await,
        Endpoint::RotateSigningKeys => provider::rotate(state, ctx, req).await,
        Endpoint::OAuthClients => provider::clients(state, ctx, req).await,
        Endpoint::CreateOAuthClient => provider::create_client(state, ctx, req).await,
        Endpoint::OAuthClient => provider::client(state, ctx, req).await,
        Endpoint::UpdateOAuthClient => provider::update_client(state, ctx, req).await,
        Endpoint::DeleteOAuthClient => provider::delete_client(state, ctx, req).await,
        Endpoint::ListWebhooks => webhooks::list(state, ctx, req).await,
        Endpoint::CreateWebhook => webhooks::create(state, ctx, req).await,
        Endpoint::GetWebhook => webhooks::get(state, ctx, req).await,
        Endpoint::UpdateWebhook => webhooks::update(state, ctx, req).await,
        Endpoint::DeleteWebhook => webhooks::delete(state, ctx, req).await,
        Endpoint::WebhookDeliveries => webhooks::deliveries(state, ctx, req).await,
        Endpoint::TestWebhook => webhooks::test(state, ctx, req).await,
        Endpoint::ResendWebhook => webhooks::resend(state, ctx, req).await,
        Endpoint::AuditExport => audit_export::export(state, ctx, req).await,
        Endpoint::ConsoleStatus => console::status(state, ctx, req).await,
        Endpoint::ConsoleConfig => console::config(state, ctx, req).await,
        Endpoint::TestMail => console::test_mail(state, ctx, req).await,
        Endpoint::Stats => overview::stats(state, ctx, req).await,
        Endpoint::ExportUsers => export::users(state, ctx, req).await,
        Endpoint::UsersSecondFactors => user_admin::second_factors(state, ctx, req).await,
        Endpoint::UserAccounts => user_admin::accounts(state, ctx, req).await,
        Endpoint::UnlinkUserAccount => user_admin::unlink(state, ctx, req).await,
        Endpoint::UserConsents => consents::admin_list(state, ctx, req).await,
        Endpoint::WithdrawUserConsent => consents::admin_withdraw(state, ctx, req).await,
        Endpoint::OAuth2GetConsents => consents::list(state, ctx, req).await,
        Endpoint::OAuth2GetConsent => consents::get(state, ctx, req).await,
        Endpoint::OAuth2UpdateConsent => consents::update(state, ctx, req).await,
        Endpoint::OAuth2DeleteConsent => consents::delete(state, ctx, req).await,
        Endpoint::UserMemberships => user_admin::memberships(state, ctx, req).await,
        Endpoint::OpenApi => Ok(ops::openapi(req.headers())),
        Endpoint::AuthOk => Ok(ops::auth_ok()),
        Endpoint::Alive => Ok(ops::alive()),
        Endpoint::Ready => Ok(ops::ready(state)),
        Endpoint::ConsoleIndex | Endpoint::ConsoleAsset => console::asset(&req),
        Endpoint::Root => Ok(pages::root()),
        Endpoint::SignInPage => Ok(pages::sign_in()),
        Endpoint::AccountPage => Ok(pages::account()),
        Endpoint::AccountFolder => Ok(pages::to_folder(pages::ACCOUNT_PATH)),
        Endpoint::ConsoleFolder => Ok(pages::to_folder(pages::CONSOLE_PATH)),
        Endpoint::AcceptInvitationPage => Ok(pages::accept_invitation()),
        Endpoint::ConsentPage => Ok(pages::consent()),
        Endpoint::SignOutPage => Ok(pages::sign_out()),
        Endpoint::DevicePage => Ok(pages::device()),
        Endpoint::AccountProviders => pages::providers(state, &req),
        Endpoint::AccountTotpQr => pages::totp_qr(state, ctx, req).await,
        Endpoint::ResetPasswordPage => pages::reset_password(&req),
        Endpoint::EmailVerifiedPage => pages::email_verified(&req),
        Endpoint::PageAsset => pages::asset(&req),
        Endpoint::SetupPage => setup::page(state),
        Endpoint::SetupFirstAdmin => setup::create(state, ctx, req).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output_size<A, B, C, F: Future>(_: impl FnOnce(A, B, C) -> F) -> usize {
        size_of::<F>()
    }

    fn output_size4<A, B, C, D, F: Future>(_: impl FnOnce(A, B, C, D) -> F) -> usize {
        size_of::<F>()
    }

    /// Every request's future holds the session check's inline and any other handler's behind a pointer: the
    /// handlers' own futures are several times the size, and were moved whole with every request.
    #[test]
    fn every_requests_future_stays_small() {
        let route = output_size::<&'static AppState, IpAddr, Request<Incoming>, _>(route);
        let handlers = output_size4::<&'static AppState, Endpoint, Ctx, Request<Incoming>, _>(handle);
        let session = output_size::<&'static AppState, Ctx, Request<Incoming>, _>(auth::get_session);
        println!("route {route} B, get-session {session} B, the other handlers {handlers} B");
        assert!(route < handlers, "the route's future ({route} B) holds the handlers' ({handlers} B)");
        assert!(
            route <= session + 2048,
            "the route's future ({route} B) is more than the session check's ({session} B)"
        );
    }
}
