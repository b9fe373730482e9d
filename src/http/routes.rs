//! The route table: every path the server answers, each named once with its methods and the endpoint each method
//! reaches, grouped by family. [`ROUTES`] (path and methods) is what the OpenAPI document, the CORS preflight,
//! `Allow` and the per-route metrics read; the router matches an [`Endpoint`] to its handler, so a path is never
//! compared as a string again after it was found.

use std::collections::HashMap;
use std::sync::LazyLock;

use hyper::Method;
use hyper::header::HeaderValue;

/// Declares [`ROUTES`], the endpoint of each of its methods (same order), and the [`Endpoint`] enum, from one
/// listing: `"path" => { METHOD => Endpoint, … }`.
macro_rules! routes {
    ($( $path:literal => { $( $method:ident => $endpoint:ident ),+ $(,)? } ),+ $(,)?) => {
        /// Every path and the methods it answers. The OpenAPI document is checked against this list so that the
        /// two cannot drift.
        pub const ROUTES: &[(&str, &[Method])] = &[ $( ($path, &[ $( Method::$method ),+ ]) ),+ ];

        /// The endpoint of each method of each route, index for index with [`ROUTES`].
        const ENDPOINTS: &[&[Endpoint]] = &[ $( &[ $( Endpoint::$endpoint ),+ ] ),+ ];

        /// What a request asks for, once its route and method are known: one handler each.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Endpoint { $( $( $endpoint, )+ )+ }
    };
}

routes! {
    // auth: signing up, in and out, and the session
    "/api/auth/sign-up/email" => { POST => SignUp },
    "/api/auth/sign-in/email" => { POST => SignIn },
    "/api/auth/get-session" => { GET => GetSession },
    "/api/auth/sign-out" => { POST => SignOut },
    // account: a signed-in user's own password, profile, sessions and deletion
    "/api/auth/change-password" => { POST => ChangePassword },
    "/api/auth/update-user" => { POST => UpdateOwnProfile },
    "/api/auth/list-sessions" => { GET => ListOwnSessions },
    "/api/auth/revoke-session" => { POST => RevokeOwnSession },
    "/api/auth/revoke-sessions" => { POST => RevokeOwnSessions },
    "/api/auth/revoke-other-sessions" => { POST => RevokeOtherOwnSessions },
    "/api/auth/delete-user" => { POST => DeleteOwnAccount },
    // recovery: the links sent by mail
    "/api/auth/request-password-reset" => { POST => RequestPasswordReset },
    "/api/auth/reset-password/{token}" => { GET => FollowResetLink },
    "/api/auth/reset-password" => { POST => ResetPassword },
    "/api/auth/send-verification-email" => { POST => SendVerificationEmail },
    "/api/auth/verify-email" => { GET => VerifyEmail },
    // auth: usernames (better-auth's username plugin)
    "/api/auth/sign-in/username" => { POST => SignInUsername },
    "/api/auth/is-username-available" => { POST => IsUsernameAvailable },
    // way_in: sign-in links and mailed codes (better-auth's magicLink and emailOTP)
    "/api/auth/sign-in/magic-link" => { POST => SignInMagicLink },
    "/api/auth/magic-link/verify" => { GET => VerifyMagicLink },
    "/api/auth/email-otp/send-verification-otp" => { POST => SendVerificationOtp },
    "/api/auth/email-otp/check-verification-otp" => { POST => CheckVerificationOtp },
    "/api/auth/sign-in/email-otp" => { POST => SignInEmailOtp },
    "/api/auth/email-otp/verify-email" => { POST => VerifyEmailOtp },
    "/api/auth/email-otp/request-password-reset" => { POST => RequestPasswordResetOtp },
    "/api/auth/forget-password/email-otp" => { POST => ForgetPasswordOtp },
    "/api/auth/email-otp/reset-password" => { POST => ResetPasswordOtp },
    // passkeys: @better-auth/passkey's calls (registration, sign-in with a passkey, the caller's passkeys)
    "/api/auth/passkey/generate-register-options" => { GET => PasskeyRegistrationOptions },
    "/api/auth/passkey/verify-registration" => { POST => PasskeyVerifyRegistration },
    "/api/auth/passkey/generate-authenticate-options" => { GET => PasskeyAuthenticationOptions },
    "/api/auth/passkey/verify-authentication" => { POST => PasskeyVerifyAuthentication },
    "/api/auth/passkey/list-user-passkeys" => { GET => ListOwnPasskeys },
    "/api/auth/passkey/update-passkey" => { POST => UpdateOwnPasskey },
    "/api/auth/passkey/delete-passkey" => { POST => DeleteOwnPasskey },
    "/api/admin/users/{id}/passkeys" => { GET => UserPasskeys },
    // api keys: @better-auth/api-key's calls (the caller's keys; verify and the sweep are an administrator's)
    "/api/auth/api-key/create" => { POST => ApiKeyCreate },
    "/api/auth/api-key/get" => { GET => ApiKeyGet },
    "/api/auth/api-key/list" => { GET => ApiKeyList },
    "/api/auth/api-key/update" => { POST => ApiKeyUpdate },
    "/api/auth/api-key/delete" => { POST => ApiKeyDelete },
    "/api/auth/api-key/verify" => { POST => ApiKeyVerify },
    "/api/auth/api-key/delete-all-expired-api-keys" => { POST => ApiKeyDeleteExpired },
    // sso: @better-auth/sso's calls (an organization's single sign-on providers, OpenID Connect)
    "/api/auth/sso/register" => { POST => SsoRegister },
    "/api/auth/sso/providers" => { GET => SsoProviders },
    "/api/auth/sso/get-provider" => { GET => SsoGetProvider },
    "/api/auth/sso/update-provider" => { POST => SsoUpdateProvider },
    "/api/auth/sso/delete-provider" => { POST => SsoDeleteProvider },
    "/api/auth/sso/request-domain-verification" => { POST => SsoRequestDomainVerification },
    "/api/auth/sso/verify-domain" => { POST => SsoVerifyDomain },
    "/api/auth/sign-in/sso" => { POST => SignInSso },
    "/api/auth/sso/callback/{provider_id}" => { GET => SsoCallback },
    "/api/auth/sso/saml2/sp/metadata" => { GET => SsoSamlMetadata },
    "/api/auth/sso/saml2/sp/acs/{provider_id}" => { POST => SsoSamlAcs },
    // oauth: sign-in through another identity provider, and the identities linked to an account
    "/api/auth/sign-in/social" => { POST => SignInSocial },
    "/api/auth/sign-in/oauth2" => { POST => SignInOAuth2 },
    "/api/auth/callback/{provider}" => { GET => ProviderCallback, POST => ProviderFormPost },
    "/api/auth/oauth2/callback/{provider}" => { GET => OAuth2Callback, POST => OAuth2FormPost },
    "/api/auth/link-social" => { POST => LinkSocial },
    "/api/auth/list-accounts" => { GET => ListAccounts },
    "/api/auth/unlink-account" => { POST => UnlinkAccount },
    // admin plugin: the better-auth admin plugin's calls
    "/api/auth/admin/list-users" => { GET => PluginListUsers },
    "/api/auth/admin/get-user" => { GET => PluginGetUser },
    "/api/auth/admin/create-user" => { POST => PluginCreateUser },
    "/api/auth/admin/set-role" => { POST => PluginSetRole },
    "/api/auth/admin/ban-user" => { POST => PluginBanUser },
    "/api/auth/admin/unban-user" => { POST => PluginUnbanUser },
    "/api/auth/admin/list-user-sessions" => { POST => PluginListUserSessions },
    "/api/auth/admin/revoke-user-session" => { POST => PluginRevokeUserSession },
    "/api/auth/admin/revoke-user-sessions" => { POST => PluginRevokeUserSessions },
    "/api/auth/admin/set-user-password" => { POST => PluginSetUserPassword },
    "/api/auth/admin/remove-user" => { POST => PluginRemoveUser },
    "/api/auth/admin/has-permission" => { POST => PluginHasPermission },
    "/api/auth/admin/update-user" => { POST => PluginUpdateUser },
    "/api/auth/admin/impersonate-user" => { POST => PluginImpersonateUser },
    "/api/auth/admin/stop-impersonating" => { POST => PluginStopImpersonating },
    // organization plugin: the better-auth organization plugin's calls (teams and custom roles: not served)
    "/api/auth/organization/create" => { POST => OrgCreate },
    "/api/auth/organization/check-slug" => { POST => OrgCheckSlug },
    "/api/auth/organization/update" => { POST => OrgUpdate },
    "/api/auth/organization/delete" => { POST => OrgDelete },
    "/api/auth/organization/list" => { GET => OrgList },
    "/api/auth/organization/get-full-organization" => { GET => OrgGetFull },
    "/api/auth/organization/set-active" => { POST => OrgSetActive },
    "/api/auth/organization/list-members" => { GET => OrgListMembers },
    "/api/auth/organization/get-active-member" => { GET => OrgGetActiveMember },
    "/api/auth/organization/get-active-member-role" => { GET => OrgGetActiveMemberRole },
    "/api/auth/organization/update-member-role" => { POST => OrgUpdateMemberRole },
    "/api/auth/organization/remove-member" => { POST => OrgRemoveMember },
    "/api/auth/organization/leave" => { POST => OrgLeave },
    "/api/auth/organization/has-permission" => { POST => OrgHasPermission },
    "/api/auth/organization/invite-member" => { POST => OrgInviteMember },
    "/api/auth/organization/accept-invitation" => { POST => OrgAcceptInvitation },
    "/api/auth/organization/reject-invitation" => { POST => OrgRejectInvitation },
    "/api/auth/organization/cancel-invitation" => { POST => OrgCancelInvitation },
    "/api/auth/organization/get-invitation" => { GET => OrgGetInvitation },
    "/api/auth/organization/list-invitations" => { GET => OrgListInvitations },
    "/api/auth/organization/list-user-invitations" => { GET => OrgListUserInvitations },
    "/api/auth/organization/create-team" => { POST => OrgCreateTeam },
    "/api/auth/organization/list-teams" => { GET => OrgListTeams },
    "/api/auth/organization/update-team" => { POST => OrgUpdateTeam },
    "/api/auth/organization/remove-team" => { POST => OrgRemoveTeam },
    "/api/auth/organization/add-team-member" => { POST => OrgAddTeamMember },
    "/api/auth/organization/remove-team-member" => { POST => OrgRemoveTeamMember },
    "/api/auth/organization/list-team-members" => { GET => OrgListTeamMembers },
    "/api/auth/organization/list-user-teams" => { GET => OrgListUserTeams },
    "/api/auth/organization/set-active-team" => { POST => OrgSetActiveTeam },
    "/api/auth/organization/create-role" => { POST => OrgCreateRole },
    "/api/auth/organization/list-roles" => { GET => OrgListRoles },
    "/api/auth/organization/get-role" => { GET => OrgGetRole },
    "/api/auth/organization/update-role" => { POST => OrgUpdateRole },
    "/api/auth/organization/delete-role" => { POST => OrgDeleteRole },
    // admin: the service's own administration calls
    "/api/auth/two-factor/enable" => { POST => TwoFactorEnable },
    "/api/auth/two-factor/get-totp-uri" => { POST => TwoFactorGetTotpUri },
    "/api/auth/two-factor/verify-totp" => { POST => TwoFactorVerifyTotp },
    "/api/auth/two-factor/verify-backup-code" => { POST => TwoFactorVerifyBackupCode },
    "/api/auth/two-factor/generate-backup-codes" => { POST => TwoFactorGenerateBackupCodes },
    "/api/auth/two-factor/disable" => { POST => TwoFactorDisable },
    "/api/auth/two-factor/send-otp" => { POST => TwoFactorSendOtp },
    "/api/auth/two-factor/verify-otp" => { POST => TwoFactorVerifyOtp },
    "/api/admin/users/{id}/two-factor/reset" => { POST => TwoFactorReset },
    "/api/admin/users" => { GET => ListUsers, PATCH => UpdateUser },
    "/api/admin/organizations" => { GET => ListOrganizations, POST => CreateOrganization },
    "/api/admin/organizations/{id}" => {
        GET => GetOrganization,
        PATCH => UpdateOrganization,
        DELETE => DeleteOrganization,
    },
    "/api/admin/organizations/{id}/members" => { GET => OrganizationMembers },
    "/api/admin/organizations/{id}/scim-tokens" => { GET => ScimTokens, POST => CreateScimToken },
    "/api/admin/organizations/{id}/scim-tokens/{token_id}" => { DELETE => RevokeScimToken },
    "/api/admin/audit" => { GET => Audit },
    // the identity provider (issue #46): its keys and its metadata at the issuer `<base>/api/auth`
    "/api/auth/jwks" => { GET => Jwks },
    "/api/auth/.well-known/openid-configuration" => { GET => OpenIdConfiguration },
    "/api/auth/.well-known/oauth-authorization-server" => { GET => AuthorizationServerMetadata },
    "/.well-known/oauth-authorization-server/api/auth" => { GET => AuthorizationServerMetadataRfc8414 },
    "/api/auth/oauth2/authorize" => { GET => OAuth2Authorize, POST => OAuth2AuthorizeForm },
    "/api/auth/oauth2/consent" => { POST => OAuth2Consent },
    "/api/auth/oauth2/public-client" => { GET => OAuth2PublicClient },
    "/api/auth/oauth2/token" => { POST => OAuth2Token },
    "/api/auth/oauth2/userinfo" => { GET => OAuth2UserInfo, POST => OAuth2UserInfoForm },
    "/api/auth/oauth2/get-consents" => { GET => OAuth2GetConsents },
    "/api/auth/oauth2/get-consent" => { GET => OAuth2GetConsent },
    "/api/auth/oauth2/update-consent" => { POST => OAuth2UpdateConsent },
    "/api/auth/oauth2/delete-consent" => { POST => OAuth2DeleteConsent },
    "/api/auth/oauth2/introspect" => { POST => OAuth2Introspect },
    "/api/auth/oauth2/revoke" => { POST => OAuth2Revoke },
    "/api/auth/oauth2/end-session" => { GET => OAuth2EndSession, POST => OAuth2EndSessionForm },
    "/api/auth/oauth2/end-session/confirm" => { POST => OAuth2EndSessionConfirm },
    "/api/auth/oauth2/register" => { POST => OAuth2Register },
    "/api/auth/oauth2/device_authorization" => { POST => OAuth2DeviceAuthorization },
    "/api/auth/oauth2/device" => { GET => OAuth2DeviceRequest, POST => OAuth2DeviceDecision },
    "/api/admin/oidc/keys" => { GET => SigningKeys },
    "/api/admin/oidc/keys/rotate" => { POST => RotateSigningKeys },
    "/api/admin/oidc/clients" => { GET => OAuthClients, POST => CreateOAuthClient },
    "/api/admin/sso/providers/{provider_id}/verify-domain" => { POST => SsoConfirmDomain },
    "/api/admin/organizations/{id}/sso-policy" => { GET => SsoPolicy, PUT => SetSsoPolicy },
    "/api/admin/oidc/clients/{client_id}" => { GET => OAuthClient, PATCH => UpdateOAuthClient, DELETE => DeleteOAuthClient },
    // webhooks and the audit export
    "/api/admin/webhooks" => { GET => ListWebhooks, POST => CreateWebhook },
    "/api/admin/webhooks/{id}" => { GET => GetWebhook, PATCH => UpdateWebhook, DELETE => DeleteWebhook },
    "/api/admin/webhooks/{id}/deliveries" => { GET => WebhookDeliveries },
    "/api/admin/webhooks/{id}/test" => { POST => TestWebhook },
    "/api/admin/webhooks/{id}/resend" => { POST => ResendWebhook },
    "/api/admin/audit/export" => { GET => AuditExport },
    // console: its status panel and its embedded files
    "/api/admin/status" => { GET => ConsoleStatus },
    "/api/admin/config" => { GET => ConsoleConfig },
    "/api/admin/test-mail" => { POST => TestMail },
    // console, round two: the overview's numbers, the user list as a file
    "/api/admin/stats" => { GET => Stats },
    "/api/admin/users/export" => { GET => ExportUsers },
    // console, a user's page: their linked identities, organizations and second factors
    "/api/admin/users/second-factors" => { GET => UsersSecondFactors },
    "/api/admin/users/{id}/accounts" => { GET => UserAccounts },
    "/api/admin/users/{id}/accounts/{account}" => { DELETE => UnlinkUserAccount },
    "/api/admin/users/{id}/memberships" => { GET => UserMemberships },
    "/api/admin/users/{id}/consents" => { GET => UserConsents },
    "/api/admin/users/{id}/consents/{consent}" => { DELETE => WithdrawUserConsent },
    // scim: SCIM 2.0 provisioning of an organization's accounts (@better-auth/scim's wire, RFC 7644)
    "/api/auth/scim/v2/ServiceProviderConfig" => { GET => ScimServiceProviderConfig },
    "/api/auth/scim/v2/ResourceTypes" => { GET => ScimResourceTypes },
    "/api/auth/scim/v2/ResourceTypes/{id}" => { GET => ScimResourceType },
    "/api/auth/scim/v2/Schemas" => { GET => ScimSchemas },
    "/api/auth/scim/v2/Schemas/{id}" => { GET => ScimSchema },
    "/api/auth/scim/v2/Users" => { GET => ScimListUsers, POST => ScimCreateUser },
    "/api/auth/scim/v2/Users/.search" => { POST => ScimSearchUsers },
    "/api/auth/scim/v2/Users/{id}" => {
        GET => ScimGetUser, PUT => ScimReplaceUser, PATCH => ScimPatchUser, DELETE => ScimDeleteUser
    },
    "/api/auth/scim/v2/Groups" => { GET => ScimListGroups, POST => ScimCreateGroup },
    "/api/auth/scim/v2/Groups/.search" => { POST => ScimSearchGroups },
    "/api/auth/scim/v2/Groups/{id}" => {
        GET => ScimGetGroup, PUT => ScimReplaceGroup, PATCH => ScimPatchGroup, DELETE => ScimDeleteGroup
    },
    "/api/auth/scim/v2/.search" => { POST => ScimSearch },
    // ops: the document, liveness and readiness
    "/api/openapi.json" => { GET => OpenApi },
    "/api/auth/ok" => { GET => AuthOk },
    "/healthz" => { GET => Alive },
    "/readyz" => { GET => Ready },
    // pages: the service's front door, sign-in, a user's own account, the invitation mail's page, and the pages
    // behind the mailed links when the application has none of its own
    "/" => { GET => Root },
    "/sign-in" => { GET => SignInPage },
    "/account/" => { GET => AccountPage },
    "/account" => { GET => AccountFolder },
    "/accept-invitation" => { GET => AcceptInvitationPage },
    "/consent" => { GET => ConsentPage },
    "/sign-out" => { GET => SignOutPage },
    "/device" => { GET => DevicePage },
    "/api/account/providers" => { GET => AccountProviders },
    "/api/account/totp-qr" => { POST => AccountTotpQr },
    "/auth/reset-password" => { GET => ResetPasswordPage },
    "/auth/email-verified" => { GET => EmailVerifiedPage },
    "/auth/{asset}" => { GET => PageAsset },
    // setup: the first administrator, through the one-time link logged while there is none
    "/admin/setup" => { GET => SetupPage },
    "/api/admin/setup" => { POST => SetupFirstAdmin },
    "/admin/" => { GET => ConsoleIndex },
    "/admin" => { GET => ConsoleFolder },
    "/admin/{asset}" => { GET => ConsoleAsset },
}

/// The endpoint `method` reaches on route `index` of [`ROUTES`], if the route answers it.
pub fn endpoint(index: usize, method: &Method) -> Option<Endpoint> {
    let position = ROUTES[index].1.iter().position(|m| m == method)?;
    Some(ENDPOINTS[index][position])
}

/// Whether `path` is `route`, where a `{name}` segment of the route stands for any one non-empty segment.
fn matches(route: &str, path: &str) -> bool {
    let (mut want, mut got) = (route.split('/'), path.split('/'));
    loop {
        match (want.next(), got.next()) {
            (None, None) => return true,
            (Some(w), Some(g)) if w.starts_with('{') && w.ends_with('}') => {
                if g.is_empty() {
                    return false;
                }
            }
            (Some(w), Some(g)) if w == g => {}
            _ => return false,
        }
    }
}

/// Index into [`ROUTES`] of the route `path` matches: a fixed path through a map built once, else the first
/// templated route that matches. Every request asks; scanning the table segment by segment showed in the profile.
pub fn find_route(path: &str) -> Option<usize> {
    static FIXED: LazyLock<HashMap<&str, usize, foldhash::fast::RandomState>> = LazyLock::new(|| {
        ROUTES.iter().enumerate().filter(|(_, (p, _))| !is_templated(p)).map(|(i, (p, _))| (*p, i)).collect()
    });
    if let Some(&index) = FIXED.get(path) {
        return Some(index);
    }
    ROUTES.iter().position(|(p, _)| is_templated(p) && matches(p, path))
}

fn is_templated(route: &str) -> bool {
    route.contains('{')
}

/// The `Allow` header of a route: its methods, and `HEAD` wherever `GET` is allowed.
pub fn allow_header(allowed: &[Method]) -> HeaderValue {
    let mut methods: Vec<&str> = allowed.iter().map(Method::as_str).collect();
    if allowed.contains(&Method::GET) {
        methods.push("HEAD");
    }
    HeaderValue::from_str(&methods.join(", ")).unwrap_or(HeaderValue::from_static("GET"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templated_routes_match_one_segment() {
        assert!(matches("/api/auth/reset-password/{token}", "/api/auth/reset-password/abc"));
        assert!(!matches("/api/auth/reset-password/{token}", "/api/auth/reset-password/"));
        assert!(!matches("/api/auth/reset-password/{token}", "/api/auth/reset-password/a/b"));
        assert!(!matches("/api/auth/reset-password/{token}", "/api/auth/reset-password"));
        assert!(matches("/api/auth/sign-out", "/api/auth/sign-out"));
    }

    /// The map finds what scanning the table in order finds: no fixed path is also matched by an earlier template.
    #[test]
    fn find_route_agrees_with_the_table_scan() {
        let scan = |path: &str| ROUTES.iter().position(|(p, _)| matches(p, path));
        let mut probes: Vec<String> =
            ROUTES.iter().map(|(p, _)| p.replace("{token}", "t").replace("{id}", "x")).collect();
        probes.extend(
            ["/", "", "/admin", "/admin/", "/admin/app.js", "/api/auth/get-session/", "/API/auth/ok"].map(String::from),
        );
        probes.extend(ROUTES.iter().map(|(p, _)| p.replace(['{', '}'], "")));
        for path in &probes {
            assert_eq!(find_route(path), scan(path), "{path}");
        }
    }

    /// Each route is named once (an endpoint named twice would not compile: the macro makes it an enum variant),
    /// and every listed method reaches its endpoint.
    #[test]
    fn every_path_appears_once_and_every_method_reaches_an_endpoint() {
        let mut paths: Vec<&str> = ROUTES.iter().map(|(p, _)| *p).collect();
        paths.sort_unstable();
        paths.dedup();
        assert_eq!(paths.len(), ROUTES.len(), "a path listed twice");
        for (i, (path, methods)) in ROUTES.iter().enumerate() {
            for m in *methods {
                assert!(endpoint(i, m).is_some(), "{m} {path} reaches no endpoint");
            }
        }
        assert_eq!(endpoint(find_route("/api/admin/users").unwrap(), &Method::PATCH), Some(Endpoint::UpdateUser));
        assert_eq!(endpoint(find_route("/api/admin/users").unwrap(), &Method::DELETE), None);
    }

    use crate::http::openapi_text;

    /// The OpenAPI document lists exactly the routes the router answers, so the two cannot drift apart.
    #[test]
    fn the_openapi_document_matches_the_routes() {
        let doc: serde_json::Value = serde_json::from_str(openapi_text()).expect("docs/openapi.json is JSON");
        let mut documented: Vec<(String, String)> = doc["paths"]
            .as_object()
            .expect("paths")
            .iter()
            .flat_map(|(path, ops)| ops.as_object().unwrap().keys().map(move |m| (path.clone(), m.to_uppercase())))
            .collect();
        let mut served: Vec<(String, String)> = ROUTES
            .iter()
            .flat_map(|(path, methods)| methods.iter().map(move |m| (path.to_string(), m.as_str().to_owned())))
            .collect();
        documented.sort();
        served.sort();
        assert_eq!(documented, served);
        for (path, ops) in doc["paths"].as_object().unwrap() {
            for (method, op) in ops.as_object().unwrap() {
                let codes: Vec<&String> = op["responses"].as_object().unwrap().keys().collect();
                // A provider's redirect back only ever redirects: its success is a 302 (the SAML ACS's too); so is a folder's
                // address without its slash (`/admin`, `/account`), to the folder; the posted authorization
                // request's and the posted logout's is a 303 to its GET.
                let redirects = path.contains("callback/")
                    || path.contains("/saml2/sp/acs/")
                    || path == "/admin"
                    || path == "/account";
                let posted_authorization = method == "post"
                    && (path == "/api/auth/oauth2/authorize" || path == "/api/auth/oauth2/end-session");
                let success = |c: &&String| {
                    c.starts_with('2') || (redirects && *c == "302") || (posted_authorization && *c == "303")
                };
                assert!(codes.iter().any(success), "{method} {path} documents no success");
                assert!(codes.iter().any(|c| *c == "405"), "{method} {path} does not document 405");
            }
        }
    }
}
