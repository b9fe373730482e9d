//! Each operation's error enum as an answer: status, code and the enum's own message, written once (in the enum).

use hyper::StatusCode;
use hyper::header::{self, HeaderValue};

use super::response::Failure;
use crate::accounts::{
    AccountError, AdminError, BearerError, ClientError, CodeUseError, CreateOrgError, DeleteOrgError, Fault,
    IdTokenError, KeyError, LinkSignInError, MailError, MemberError, OrgError, PasskeyError, ResetPasswordError,
    RolesError, ScimTokenError, SignInError, SignUpError, TeamsError, Unavailable, UpdateOrgError, UpdateUserError,
    WayInError, WebhookError,
};
use crate::domain::{PasswordError, PasswordRefused};

impl From<crate::accounts::ApiKeyError> for Failure {
    fn from(e: crate::accounts::ApiKeyError) -> Self {
        use crate::accounts::ApiKeyError as E;
        let message = e.to_string();
        match e {
            E::NotFound => Self::new(StatusCode::NOT_FOUND, "KEY_NOT_FOUND", message),
            E::ExpiresInTooSmall => Self::bad_request("EXPIRES_IN_IS_TOO_SMALL", message),
            E::ExpiresInTooLarge => Self::bad_request("EXPIRES_IN_IS_TOO_LARGE", message),
            E::MetadataDisabled => Self::bad_request("METADATA_DISABLED", message),
            E::NothingToUpdate => Self::bad_request("NO_VALUES_TO_UPDATE", message),
            E::Banned => Self::new(StatusCode::UNAUTHORIZED, "USER_BANNED", message),
            E::UnknownUser => Self::new(StatusCode::UNAUTHORIZED, "UNAUTHORIZED_SESSION", message),
            E::Unavailable(u) => u.into(),
        }
    }
}

/// A key in the header that opens no session: the plugin's statuses and codes (403 for a key too short to be one,
/// 429 with `details.tryAgainIn` and no `Retry-After` for a spent window, as the plugin answers it).
impl From<crate::accounts::KeyAuthError> for Failure {
    fn from(e: crate::accounts::KeyAuthError) -> Self {
        use crate::accounts::KeyAuthError as E;
        let message = e.to_string();
        match e {
            E::Malformed => Self::new(StatusCode::FORBIDDEN, "INVALID_API_KEY", message),
            E::Unknown => Self::new(StatusCode::UNAUTHORIZED, "INVALID_API_KEY", message),
            E::Disabled => Self::new(StatusCode::UNAUTHORIZED, "KEY_DISABLED", message),
            E::Expired => Self::new(StatusCode::UNAUTHORIZED, "KEY_EXPIRED", message),
            E::UsageExceeded => Self::new(StatusCode::TOO_MANY_REQUESTS, "USAGE_EXCEEDED", message),
            E::OwnerBanned => Self::new(StatusCode::UNAUTHORIZED, "USER_BANNED", message),
            E::RateLimited(ms) => {
                let mut f = Self::new(StatusCode::TOO_MANY_REQUESTS, "RATE_LIMITED", message);
                f.details = Some(Box::new(serde_json::json!({ "tryAgainIn": ms })));
                f
            }
            E::Unavailable(u) => u.into(),
        }
    }
}

impl From<Unavailable> for Failure {
    fn from(_: Unavailable) -> Self {
        Self::unavailable()
    }
}

/// A way in the organization's single sign-on policy refuses: 403 `SSO_REQUIRED`, the same for every address of
/// the domain (the client goes to `sign-in/sso` with the address instead).
pub(super) fn sso_required() -> Failure {
    Failure::new(StatusCode::FORBIDDEN, "SSO_REQUIRED", crate::accounts::SSO_REQUIRED)
}

impl From<crate::accounts::SsoPolicyError> for Failure {
    fn from(e: crate::accounts::SsoPolicyError) -> Self {
        use crate::accounts::SsoPolicyError as E;
        match e {
            E::OrgNotFound => Self::new(StatusCode::NOT_FOUND, "ORGANIZATION_NOT_FOUND", e.to_string()),
            E::Forbidden => Self::new(StatusCode::FORBIDDEN, "FORBIDDEN", e.to_string()),
            E::Unavailable(u) => u.into(),
        }
    }
}

/// A full hashing pool is a short overload: 503, retry in a second.
pub(super) fn busy() -> Failure {
    Failure::unavailable().with_header(header::RETRY_AFTER, HeaderValue::from_static("1"))
}

impl From<SignUpError> for Failure {
    fn from(e: SignUpError) -> Self {
        match e {
            SignUpError::EmailTaken => {
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL", e.to_string())
            }
            SignUpError::UsernameTaken => Self::bad_request("USERNAME_IS_ALREADY_TAKEN", e.to_string()),
            SignUpError::SsoRequired => sso_required(),
            SignUpError::Busy => busy(),
            SignUpError::Password(p) => p.into(),
            SignUpError::Unavailable(u) => u.into(),
        }
    }
}

impl From<SignInError> for Failure {
    fn from(e: SignInError) -> Self {
        match e {
            SignInError::InvalidCredentials => {
                Self::new(StatusCode::UNAUTHORIZED, "INVALID_EMAIL_OR_PASSWORD", e.to_string())
            }
            SignInError::Locked(wait) => Self::too_many_requests(wait),
            SignInError::Banned => Self::new(StatusCode::FORBIDDEN, "BANNED_USER", e.to_string()),
            SignInError::EmailNotVerified => Self::new(StatusCode::FORBIDDEN, "EMAIL_NOT_VERIFIED", e.to_string()),
            SignInError::PasskeyRequired => Self::new(StatusCode::FORBIDDEN, "PASSKEY_REQUIRED", e.to_string()),
            SignInError::SsoRequired => sso_required(),
            SignInError::Busy => busy(),
            SignInError::Unavailable(u) => u.into(),
        }
    }
}

impl From<PasswordError> for Failure {
    fn from(e: PasswordError) -> Self {
        match e {
            PasswordError::TooShort => Self::bad_request("PASSWORD_TOO_SHORT", e.to_string()),
            PasswordError::TooLong => Self::bad_request("PASSWORD_TOO_LONG", e.to_string()),
        }
    }
}

/// A new password the policy refuses: 400 with a code naming why (docs/guides/first-steps.md "Passwords").
impl From<PasswordRefused> for Failure {
    fn from(e: PasswordRefused) -> Self {
        let code = match e {
            PasswordRefused::TooShort { .. } => "PASSWORD_TOO_SHORT",
            PasswordRefused::Compromised => "PASSWORD_COMPROMISED",
            PasswordRefused::ContextWord => "PASSWORD_CONTAINS_CONTEXT_WORD",
        };
        Self::bad_request(code, e.to_string())
    }
}

impl From<UpdateUserError> for Failure {
    fn from(e: UpdateUserError) -> Self {
        let status = match e {
            UpdateUserError::NotAdmin => StatusCode::FORBIDDEN,
            UpdateUserError::UserNotFound | UpdateUserError::OrganizationNotFound => StatusCode::NOT_FOUND,
            UpdateUserError::SelfBan => StatusCode::BAD_REQUEST,
            UpdateUserError::LastAdmin | UpdateUserError::LastOwner | UpdateUserError::UsernameTaken => {
                StatusCode::CONFLICT
            }
            UpdateUserError::Unavailable(u) => return u.into(),
        };
        Self::with_status(status, e.to_string())
    }
}

impl From<CreateOrgError> for Failure {
    fn from(e: CreateOrgError) -> Self {
        match e {
            CreateOrgError::SlugTaken => Self::with_status(StatusCode::CONFLICT, e.to_string()),
            CreateOrgError::Unavailable(u) => u.into(),
        }
    }
}

impl From<UpdateOrgError> for Failure {
    fn from(e: UpdateOrgError) -> Self {
        match e {
            UpdateOrgError::NotFound => Self::with_status(StatusCode::NOT_FOUND, e.to_string()),
            UpdateOrgError::SlugTaken => Self::with_status(StatusCode::CONFLICT, e.to_string()),
            UpdateOrgError::Unavailable(u) => u.into(),
        }
    }
}

impl From<DeleteOrgError> for Failure {
    fn from(e: DeleteOrgError) -> Self {
        match e {
            DeleteOrgError::NotFound => Self::with_status(StatusCode::NOT_FOUND, e.to_string()),
            DeleteOrgError::NotAdmin => Self::with_status(StatusCode::FORBIDDEN, e.to_string()),
            DeleteOrgError::NotEmpty(_) => Self::with_status(StatusCode::CONFLICT, e.to_string()),
            DeleteOrgError::Unavailable(u) => u.into(),
        }
    }
}

impl From<AccountError> for Failure {
    fn from(e: AccountError) -> Self {
        match e {
            AccountError::InvalidPassword => Self::bad_request("INVALID_PASSWORD", e.to_string()),
            AccountError::Locked(wait) => Self::too_many_requests(wait),
            AccountError::UserNotFound => Self::bad_request("USER_NOT_FOUND", e.to_string()),
            AccountError::LastAdmin => Self::bad_request("LAST_ADMINISTRATOR", e.to_string()),
            AccountError::UsernameTaken => Self::bad_request("USERNAME_IS_ALREADY_TAKEN", e.to_string()),
            AccountError::Busy => busy(),
            AccountError::Password(p) => p.into(),
            AccountError::Unavailable(u) => u.into(),
        }
    }
}

impl From<crate::accounts::TwoFactorError> for Failure {
    fn from(e: crate::accounts::TwoFactorError) -> Self {
        use crate::accounts::TwoFactorError as E;
        let message = e.to_string();
        match e {
            E::InvalidPassword => Self::bad_request("INVALID_PASSWORD", message),
            E::AlreadyEnabled => Self::bad_request("TOTP_ALREADY_ENABLED", message),
            E::TotpNotEnabled => Self::bad_request("TOTP_NOT_ENABLED", message),
            E::NotEnabled => Self::bad_request("TWO_FACTOR_NOT_ENABLED", message),
            E::InvalidCode => Self::new(StatusCode::UNAUTHORIZED, "INVALID_CODE", message),
            E::InvalidBackupCode => Self::new(StatusCode::UNAUTHORIZED, "INVALID_BACKUP_CODE", message),
            E::InvalidCookie => Self::new(StatusCode::UNAUTHORIZED, "INVALID_TWO_FACTOR_COOKIE", message),
            E::TooManyAttempts | E::CodeUsedUp => Self::bad_request("TOO_MANY_ATTEMPTS_REQUEST_NEW_CODE", message),
            E::OtpNotConfigured => Self::bad_request("OTP_NOT_CONFIGURED", message),
            E::OtpNotEnabled => Self::bad_request("OTP_NOT_ENABLED", message),
            E::OtpExpired => Self::bad_request("OTP_HAS_EXPIRED", message),
            E::OutboxFull => Self::new(StatusCode::SERVICE_UNAVAILABLE, "MAIL_OUTBOX_FULL", message)
                .with_header(header::RETRY_AFTER, HeaderValue::from_static("30")),
            E::AccountLocked(wait) => {
                let secs = HeaderValue::from(super::rate_limits::retry_after_secs(wait));
                Self::new(StatusCode::TOO_MANY_REQUESTS, "ACCOUNT_TEMPORARILY_LOCKED", message)
                    .with_header(header::RETRY_AFTER, secs.clone())
                    .with_header(header::HeaderName::from_static("x-retry-after"), secs)
            }
            E::Locked(wait) => Self::too_many_requests(wait),
            E::UserNotFound => Self::new(StatusCode::NOT_FOUND, "USER_NOT_FOUND", message),
            E::Busy => busy(),
            E::Unavailable(u) => u.into(),
        }
    }
}

impl From<MailError> for Failure {
    fn from(e: MailError) -> Self {
        match e {
            MailError::NotConfigured => Self::bad_request("EMAIL_NOT_CONFIGURED", e.to_string()),
            MailError::SsoRequired => sso_required(),
            MailError::OutboxFull => Self::new(StatusCode::SERVICE_UNAVAILABLE, "MAIL_OUTBOX_FULL", e.to_string())
                .with_header(header::RETRY_AFTER, HeaderValue::from_static("30")),
            MailError::Unavailable(u) => u.into(),
        }
    }
}

impl From<WayInError> for Failure {
    fn from(e: WayInError) -> Self {
        match e {
            WayInError::Disabled => Self::new(StatusCode::NOT_FOUND, "NOT_FOUND", e.to_string()),
            WayInError::SsoRequired => sso_required(),
            WayInError::OutboxFull => Self::new(StatusCode::SERVICE_UNAVAILABLE, "MAIL_OUTBOX_FULL", e.to_string())
                .with_header(header::RETRY_AFTER, HeaderValue::from_static("30")),
            WayInError::Unavailable(u) => u.into(),
        }
    }
}

impl From<LinkSignInError> for Failure {
    fn from(e: LinkSignInError) -> Self {
        match e {
            LinkSignInError::Disabled => Self::new(StatusCode::NOT_FOUND, "NOT_FOUND", e.to_string()),
            LinkSignInError::InvalidToken => Self::bad_request("INVALID_TOKEN", e.to_string()),
            LinkSignInError::SignUpDisabled => Self::bad_request("NEW_USER_SIGNUP_DISABLED", e.to_string()),
            LinkSignInError::Banned => Self::new(StatusCode::FORBIDDEN, "BANNED_USER", e.to_string()),
            LinkSignInError::SsoRequired => sso_required(),
            LinkSignInError::Unavailable(u) => u.into(),
        }
    }
}

/// better-auth's `emailOTP` codes, and this server's failure limit and overload answers.
impl From<CodeUseError> for Failure {
    fn from(e: CodeUseError) -> Self {
        match e {
            CodeUseError::Disabled => Self::new(StatusCode::NOT_FOUND, "NOT_FOUND", e.to_string()),
            CodeUseError::Expired => Self::bad_request("OTP_EXPIRED", e.to_string()),
            CodeUseError::Invalid => Self::bad_request("INVALID_OTP", e.to_string()),
            CodeUseError::TooManyAttempts => Self::new(StatusCode::FORBIDDEN, "TOO_MANY_ATTEMPTS", e.to_string()),
            CodeUseError::UserNotFound => Self::bad_request("USER_NOT_FOUND", e.to_string()),
            CodeUseError::SsoRequired => sso_required(),
            CodeUseError::Locked(wait) => Self::too_many_requests(wait),
            CodeUseError::Banned => Self::new(StatusCode::FORBIDDEN, "BANNED_USER", e.to_string()),
            CodeUseError::Busy => busy(),
            CodeUseError::Password(refused) => refused.into(),
            CodeUseError::Unavailable(u) => u.into(),
        }
    }
}

impl From<ResetPasswordError> for Failure {
    fn from(e: ResetPasswordError) -> Self {
        match e {
            ResetPasswordError::InvalidToken => Self::bad_request("INVALID_TOKEN", e.to_string()),
            ResetPasswordError::SsoRequired => sso_required(),
            ResetPasswordError::Busy => busy(),
            ResetPasswordError::Password(p) => p.into(),
            ResetPasswordError::Unavailable(u) => u.into(),
        }
    }
}

impl From<AdminError> for Failure {
    fn from(e: AdminError) -> Self {
        let (status, code) = match e {
            AdminError::EmailTaken => (StatusCode::BAD_REQUEST, "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL"),
            AdminError::UsernameTaken => (StatusCode::BAD_REQUEST, "USERNAME_IS_ALREADY_TAKEN"),
            AdminError::UserNotFound => (StatusCode::NOT_FOUND, "USER_NOT_FOUND"),
            AdminError::NotAdmin => (StatusCode::FORBIDDEN, "FORBIDDEN"),
            AdminError::SelfRemoval => (StatusCode::BAD_REQUEST, "YOU_CANNOT_REMOVE_YOURSELF"),
            AdminError::SelfBan => (StatusCode::BAD_REQUEST, "YOU_CANNOT_BAN_YOURSELF"),
            AdminError::LastAdmin => (StatusCode::BAD_REQUEST, "LAST_ADMINISTRATOR"),
            AdminError::OrganizationNotFound => (StatusCode::NOT_FOUND, "ORGANIZATION_NOT_FOUND"),
            AdminError::LastOwner => (StatusCode::BAD_REQUEST, "YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER"),
            AdminError::CannotImpersonateAdmin => (StatusCode::FORBIDDEN, "YOU_CANNOT_IMPERSONATE_ADMINS"),
            AdminError::TargetBanned => (StatusCode::FORBIDDEN, "BANNED_USER"),
            AdminError::Busy => return busy(),
            AdminError::Password(p) => return p.into(),
            AdminError::Unavailable(u) => return u.into(),
        };
        Self::new(status, code, e.to_string())
    }
}

impl From<PasskeyError> for Failure {
    fn from(e: PasskeyError) -> Self {
        let message = e.to_string();
        match e {
            PasskeyError::ChallengeNotFound => Self::bad_request("CHALLENGE_NOT_FOUND", message),
            PasskeyError::NotAllowed => {
                Self::new(StatusCode::UNAUTHORIZED, "YOU_ARE_NOT_ALLOWED_TO_REGISTER_THIS_PASSKEY", message)
            }
            PasskeyError::RegistrationFailed => Self::bad_request("FAILED_TO_VERIFY_REGISTRATION", message),
            PasskeyError::PreviouslyRegistered => Self::bad_request("PREVIOUSLY_REGISTERED", message),
            PasskeyError::NotFound => Self::new(StatusCode::NOT_FOUND, "PASSKEY_NOT_FOUND", message),
            PasskeyError::AuthenticationFailed => Self::bad_request("AUTHENTICATION_FAILED", message),
            PasskeyError::Banned => Self::new(StatusCode::FORBIDDEN, "BANNED_USER", message),
            PasskeyError::EmailNotVerified => Self::new(StatusCode::FORBIDDEN, "EMAIL_NOT_VERIFIED", message),
            PasskeyError::SsoRequired => sso_required(),
            PasskeyError::Locked(wait) => Self::too_many_requests(wait),
            PasskeyError::Unavailable(u) => u.into(),
        }
    }
}

impl From<IdTokenError> for Failure {
    fn from(e: IdTokenError) -> Self {
        let (status, code) = match e {
            IdTokenError::ProviderNotFound => (StatusCode::NOT_FOUND, "PROVIDER_NOT_FOUND"),
            IdTokenError::NotSupported => (StatusCode::NOT_FOUND, "ID_TOKEN_NOT_SUPPORTED"),
            IdTokenError::InvalidToken => (StatusCode::UNAUTHORIZED, "INVALID_TOKEN"),
            IdTokenError::ProviderUnavailable => (StatusCode::BAD_GATEWAY, "PROVIDER_UNAVAILABLE"),
            IdTokenError::UserInfo => (StatusCode::UNAUTHORIZED, "FAILED_TO_GET_USER_INFO"),
            IdTokenError::EmailNotFound => (StatusCode::UNAUTHORIZED, "USER_EMAIL_NOT_FOUND"),
            IdTokenError::NotLinked | IdTokenError::UnableToLink => (StatusCode::UNAUTHORIZED, "OAUTH_LINK_ERROR"),
            IdTokenError::AlreadyLinked => (StatusCode::CONFLICT, "SOCIAL_ACCOUNT_ALREADY_LINKED"),
            IdTokenError::LinkingNotAllowed => (StatusCode::UNAUTHORIZED, "LINKING_NOT_ALLOWED"),
            IdTokenError::DifferentEmails => (StatusCode::UNAUTHORIZED, "LINKING_DIFFERENT_EMAILS_NOT_ALLOWED"),
            IdTokenError::EmailNotVerified => (StatusCode::FORBIDDEN, "EMAIL_NOT_VERIFIED"),
            IdTokenError::Banned => (StatusCode::FORBIDDEN, "BANNED_USER"),
            IdTokenError::PasskeyRequired => (StatusCode::FORBIDDEN, "PASSKEY_REQUIRED"),
            IdTokenError::SsoRequired => return sso_required(),
            IdTokenError::Unavailable(u) => return u.into(),
        };
        Self::new(status, code, e.to_string())
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Invalid(message) | ClientError::InvalidRedirectUri(message) => Self::validation(message),
            ClientError::NotFound => Self::with_status(StatusCode::NOT_FOUND, e.to_string()),
            ClientError::Store(_) => Self::unavailable(),
        }
    }
}

impl From<ScimTokenError> for Failure {
    fn from(e: ScimTokenError) -> Self {
        match e {
            ScimTokenError::OrganizationNotFound | ScimTokenError::Token(crate::scim::TokenError::NotFound) => {
                Self::with_status(StatusCode::NOT_FOUND, e.to_string())
            }
            ScimTokenError::Forbidden => Self::with_status(StatusCode::FORBIDDEN, e.to_string()),
            ScimTokenError::Token(crate::scim::TokenError::Invalid(message)) => Self::validation(message),
            ScimTokenError::Token(crate::scim::TokenError::TooMany) => {
                Self::with_status(StatusCode::CONFLICT, e.to_string())
            }
            ScimTokenError::Token(crate::scim::TokenError::Store(_)) => Self::unavailable(),
        }
    }
}

/// A SCIM refusal: its status and `scimType` (the code the SCIM family's answers show as `scimType`).
impl From<Fault> for Failure {
    fn from(f: Fault) -> Self {
        let status = StatusCode::from_u16(f.status).unwrap_or(StatusCode::BAD_REQUEST);
        if status == StatusCode::SERVICE_UNAVAILABLE {
            return Self::unavailable();
        }
        Self::new(status, f.scim_type.unwrap_or("ERROR"), f.detail)
    }
}

/// A SCIM call's bearer token refused: 401 with the challenge (RFC 6750 §3).
impl From<BearerError> for Failure {
    fn from(e: BearerError) -> Self {
        match e {
            BearerError::Store(_) => Self::unavailable(),
            _ => Self::with_status(StatusCode::UNAUTHORIZED, e.to_string())
                .with_header(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"SCIM\"")),
        }
    }
}

impl From<KeyError> for Failure {
    fn from(e: KeyError) -> Self {
        // Nothing a client sent: the store is unreachable, or a stored key does not open with this node's data
        // key (a node started with another key file). Said in the log, where an operator can act on it.
        tracing::error!(error = %e, "the identity provider's signing keys are unavailable");
        Self::unavailable()
    }
}

impl From<WebhookError> for Failure {
    fn from(e: WebhookError) -> Self {
        match e {
            WebhookError::Invalid(message) => Self::validation(message),
            WebhookError::Internal(_) => Self::bad_request("WEBHOOK_TARGET_INTERNAL", e.to_string()),
            WebhookError::NotFound | WebhookError::DeliveryNotFound => {
                Self::with_status(StatusCode::NOT_FOUND, e.to_string())
            }
            WebhookError::Unavailable(u) => u.into(),
        }
    }
}

impl From<MemberError> for Failure {
    fn from(e: MemberError) -> Self {
        use StatusCode as S;
        let (status, code) = match e {
            MemberError::MemberNotFound => (S::BAD_REQUEST, "MEMBER_NOT_FOUND"),
            MemberError::OrganizationNotFound => (S::BAD_REQUEST, "ORGANIZATION_NOT_FOUND"),
            MemberError::NotAllowedToUpdateMember => (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_MEMBER"),
            // The plugin answers 401 here.
            MemberError::NotAllowedToDeleteMember => (S::UNAUTHORIZED, "YOU_ARE_NOT_ALLOWED_TO_DELETE_THIS_MEMBER"),
            MemberError::WithoutAnOwner => (S::BAD_REQUEST, "YOU_CANNOT_LEAVE_THE_ORGANIZATION_WITHOUT_AN_OWNER"),
            MemberError::OnlyOwner => (S::BAD_REQUEST, "YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER"),
            MemberError::NotAllowedToInvite => {
                (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_INVITE_USERS_TO_THIS_ORGANIZATION")
            }
            MemberError::NotAllowedToInviteWithRole => {
                (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_INVITE_USER_WITH_THIS_ROLE")
            }
            MemberError::AlreadyMember => (S::BAD_REQUEST, "USER_IS_ALREADY_A_MEMBER_OF_THIS_ORGANIZATION"),
            MemberError::AlreadyInvited => (S::BAD_REQUEST, "USER_IS_ALREADY_INVITED_TO_THIS_ORGANIZATION"),
            MemberError::InvitationLimitReached => (S::FORBIDDEN, "INVITATION_LIMIT_REACHED"),
            MemberError::InvitationNotFound => (S::BAD_REQUEST, "INVITATION_NOT_FOUND"),
            MemberError::NotRecipient => (S::FORBIDDEN, "YOU_ARE_NOT_THE_RECIPIENT_OF_THE_INVITATION"),
            MemberError::MembershipLimitReached => (S::FORBIDDEN, "ORGANIZATION_MEMBERSHIP_LIMIT_REACHED"),
            MemberError::NotAllowedToCancel => (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_CANCEL_THIS_INVITATION"),
            MemberError::OutboxFull => (S::SERVICE_UNAVAILABLE, "MAIL_OUTBOX_FULL"),
            MemberError::TeamNotFound => (S::BAD_REQUEST, "TEAM_NOT_FOUND"),
            MemberError::TeamFull => (S::FORBIDDEN, "TEAM_MEMBER_LIMIT_REACHED"),
            MemberError::Unavailable(u) => return u.into(),
        };
        Self::new(status, code, e.to_string())
    }
}

impl From<TeamsError> for Failure {
    fn from(e: TeamsError) -> Self {
        use StatusCode as S;
        let (status, code) = match &e {
            TeamsError::NotEnabled => (S::BAD_REQUEST, "BAD_REQUEST"),
            TeamsError::NoActiveOrganization => (S::BAD_REQUEST, "NO_ACTIVE_ORGANIZATION"),
            TeamsError::OrgNotFound => (S::BAD_REQUEST, "ORGANIZATION_NOT_FOUND"),
            TeamsError::TeamNotFound => (S::BAD_REQUEST, "TEAM_NOT_FOUND"),
            TeamsError::NotAllowedToInvite => {
                (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_INVITE_USERS_TO_THIS_ORGANIZATION")
            }
            TeamsError::NotAllowedToCreate => {
                (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_CREATE_TEAMS_IN_THIS_ORGANIZATION")
            }
            TeamsError::TooManyTeams => (S::BAD_REQUEST, "YOU_HAVE_REACHED_THE_MAXIMUM_NUMBER_OF_TEAMS"),
            TeamsError::NotAllowedToAccess => (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_ACCESS_THIS_ORGANIZATION"),
            TeamsError::NotAllowedToUpdate => (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_TEAM"),
            TeamsError::NotAllowedToDeleteThis => (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_DELETE_THIS_TEAM"),
            TeamsError::NotAllowedToDelete => {
                (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_DELETE_TEAMS_IN_THIS_ORGANIZATION")
            }
            TeamsError::LastTeam => (S::BAD_REQUEST, "UNABLE_TO_REMOVE_LAST_TEAM"),
            TeamsError::NotAMember => (S::BAD_REQUEST, "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION"),
            TeamsError::NotAllowedToAddMember => (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_CREATE_A_NEW_TEAM_MEMBER"),
            TeamsError::NotAllowedToRemoveMember => (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_REMOVE_A_TEAM_MEMBER"),
            TeamsError::NotInTeam => (S::BAD_REQUEST, "USER_IS_NOT_A_MEMBER_OF_THE_TEAM"),
            TeamsError::NotInThisTeam => (S::FORBIDDEN, "USER_IS_NOT_A_MEMBER_OF_THE_TEAM"),
            TeamsError::TeamFull => (S::FORBIDDEN, "TEAM_MEMBER_LIMIT_REACHED"),
            TeamsError::NoActiveTeam => (S::BAD_REQUEST, "YOU_DO_NOT_HAVE_AN_ACTIVE_TEAM"),
            TeamsError::YouAreNotAMember => (S::FORBIDDEN, "YOU_ARE_NOT_A_MEMBER_OF_THIS_ORGANIZATION"),
            TeamsError::NotAllowedToUpdateMember => (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_MEMBER"),
            TeamsError::Unavailable(u) => return (*u).into(),
        };
        Self::new(status, code, e.to_string())
    }
}

impl From<RolesError> for Failure {
    fn from(e: RolesError) -> Self {
        use StatusCode as S;
        let (status, code) = match &e {
            RolesError::NotEnabled => (S::NOT_FOUND, "NOT_FOUND"),
            RolesError::NoOrganizationToCreate => (S::BAD_REQUEST, "YOU_MUST_BE_IN_AN_ORGANIZATION_TO_CREATE_A_ROLE"),
            RolesError::NoActiveOrganization => (S::BAD_REQUEST, "NO_ACTIVE_ORGANIZATION"),
            RolesError::OrgNotFound => (S::BAD_REQUEST, "ORGANIZATION_NOT_FOUND"),
            RolesError::NotAMember => (S::FORBIDDEN, "YOU_ARE_NOT_A_MEMBER_OF_THIS_ORGANIZATION"),
            RolesError::NotAllowedToCreate { missing } | RolesError::NotAllowedToUpdate { missing }
                if !missing.is_empty() =>
            {
                let code = match &e {
                    RolesError::NotAllowedToCreate { .. } => "YOU_ARE_NOT_ALLOWED_TO_CREATE_A_ROLE",
                    _ => "YOU_ARE_NOT_ALLOWED_TO_UPDATE_A_ROLE",
                };
                // The plugin names what the caller lacks, so a client can say which permission to drop.
                return Self::new(S::FORBIDDEN, code, e.to_string()).with("missingPermissions", missing.clone());
            }
            RolesError::NotAllowedToCreate { .. } => (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_CREATE_A_ROLE"),
            RolesError::NotAllowedToUpdate { .. } => (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_UPDATE_A_ROLE"),
            RolesError::NotAllowedToList => (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_LIST_A_ROLE"),
            RolesError::NotAllowedToRead => (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_READ_A_ROLE"),
            RolesError::NotAllowedToDelete => (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_DELETE_A_ROLE"),
            RolesError::NameTaken => (S::BAD_REQUEST, "ROLE_NAME_IS_ALREADY_TAKEN"),
            RolesError::PreDefined => (S::BAD_REQUEST, "CANNOT_DELETE_A_PRE_DEFINED_ROLE"),
            RolesError::RoleNotFound => (S::BAD_REQUEST, "ROLE_NOT_FOUND"),
            RolesError::TooManyRoles => (S::BAD_REQUEST, "TOO_MANY_ROLES"),
            RolesError::InUse => (S::BAD_REQUEST, "ROLE_IS_ASSIGNED_TO_MEMBERS"),
            RolesError::Unavailable(u) => return (*u).into(),
        };
        Self::new(status, code, e.to_string())
    }
}

impl From<OrgError> for Failure {
    fn from(e: OrgError) -> Self {
        use StatusCode as S;
        let (status, code) = match &e {
            OrgError::NotAllowedToCreate => (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_CREATE_A_NEW_ORGANIZATION"),
            OrgError::AlreadyExists => (S::BAD_REQUEST, "ORGANIZATION_ALREADY_EXISTS"),
            OrgError::SlugTaken => (S::BAD_REQUEST, "ORGANIZATION_SLUG_ALREADY_TAKEN"),
            OrgError::NotFound => (S::BAD_REQUEST, "ORGANIZATION_NOT_FOUND"),
            OrgError::NotAMember => (S::BAD_REQUEST, "USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION"),
            OrgError::YouAreNotAMember => (S::FORBIDDEN, "YOU_ARE_NOT_A_MEMBER_OF_THIS_ORGANIZATION"),
            OrgError::NotAllowedToUpdate => (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_ORGANIZATION"),
            OrgError::NotAllowedToDelete => (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_DELETE_THIS_ORGANIZATION"),
            OrgError::NoActiveOrganization => (S::BAD_REQUEST, "NO_ACTIVE_ORGANIZATION"),
            OrgError::NotAllowedToListInvitations => (S::FORBIDDEN, "YOU_ARE_NOT_ALLOWED_TO_LIST_INVITATIONS"),
            OrgError::EmailVerificationRequired => (S::FORBIDDEN, "EMAIL_VERIFICATION_REQUIRED_FOR_INVITATION"),
            OrgError::InviterGone => (S::BAD_REQUEST, "INVITER_IS_NO_LONGER_A_MEMBER_OF_THE_ORGANIZATION"),
            OrgError::TeamsNotEnabled => (S::BAD_REQUEST, "BAD_REQUEST"),
            OrgError::Member(m) => return (*m).into(),
            OrgError::Unavailable(u) => return (*u).into(),
        };
        Self::new(status, code, e.to_string())
    }
}

impl From<crate::accounts::SsoError> for Failure {
    fn from(e: crate::accounts::SsoError) -> Self {
        use crate::accounts::SsoError as E;
        use StatusCode as S;
        let (status, code) = match &e {
            E::OrgNotFound => (S::BAD_REQUEST, "ORGANIZATION_NOT_FOUND"),
            E::NotMember => (S::BAD_REQUEST, "YOU_ARE_NOT_A_MEMBER_OF_THE_ORGANIZATION"),
            E::NotOrgAdmin => (S::FORBIDDEN, "YOU_MUST_BE_AN_ORGANIZATION_OWNER_OR_ADMIN_TO_REGISTER_SSO_PROVIDERS"),
            E::NotFound => (S::NOT_FOUND, "PROVIDER_NOT_FOUND"),
            E::NoAccess => (S::FORBIDDEN, "YOU_DONT_HAVE_ACCESS_TO_THIS_PROVIDER"),
            E::Reserved => {
                (S::UNPROCESSABLE_ENTITY, "THIS_PROVIDERID_IS_RESERVED_AND_CANNOT_BE_USED_FOR_AN_SSO_PROVIDER")
            }
            E::Exists => (S::UNPROCESSABLE_ENTITY, "SSO_PROVIDER_WITH_THIS_PROVIDERID_ALREADY_EXISTS"),
            E::Invalid(_) => (S::BAD_REQUEST, "VALIDATION_ERROR"),
            // The plugin's discovery codes are lower case (its `DiscoveryError`); clients match them as they are.
            E::UntrustedOrigin(_) => (S::BAD_REQUEST, "discovery_untrusted_origin"),
            E::NotADiscoveryDocument(_) => (S::BAD_REQUEST, "discovery_invalid_json"),
            E::IssuerMismatch(_) => (S::BAD_REQUEST, "issuer_mismatch"),
            // The provider did not answer: nothing the caller sent was malformed.
            E::Discovery(_) => (S::BAD_GATEWAY, "discovery_unexpected_error"),
            E::DomainVerified => (S::CONFLICT, "DOMAIN_VERIFIED"),
            E::NoPendingVerification => (S::NOT_FOUND, "NO_PENDING_VERIFICATION"),
            // The record may just not have reached the resolvers yet: the plugin's 502, try again later.
            E::VerificationFailed(_) | E::Dns(_) => (S::BAD_GATEWAY, "DOMAIN_VERIFICATION_FAILED"),
            E::Changed => (S::CONFLICT, "SSO_PROVIDER_CHANGED"),
            E::DomainTaken(_) => (S::CONFLICT, "DOMAIN_VERIFIED_FOR_ANOTHER_PROVIDER"),
            E::NotAdministrator => (S::FORBIDDEN, "FORBIDDEN"),
            E::OwnerMapping => (S::FORBIDDEN, "ONLY_AN_OWNER_MAY_MAP_A_GROUP_TO_OWNER"),
            E::Store(_) => return Self::unavailable(),
        };
        Self::new(status, code, e.to_string())
    }
}
