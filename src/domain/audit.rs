use uuid::Uuid;

use super::{AuditId, Timestamp, UserId};

/// Actions recorded in the audit log.
pub mod action {
    pub const USER_CREATED: &str = "user.created";
    pub const ROLE_CHANGED: &str = "user.role_changed";
    pub const BANNED: &str = "user.banned";
    pub const UNBANNED: &str = "user.unbanned";
    pub const BAN_REASON_CHANGED: &str = "user.ban_reason_changed";
    pub const ORGANIZATION_CHANGED: &str = "user.organization_changed";
    pub const BAN_EXPIRED: &str = "user.ban_expired";
    pub const ORGANIZATION_CREATED: &str = "organization.created";
    pub const ORGANIZATION_UPDATED: &str = "organization.updated";
    pub const ORGANIZATION_DELETED: &str = "organization.deleted";
    pub const PROFILE_UPDATED: &str = "user.profile_updated";
    pub const IMPERSONATION_STARTED: &str = "user.impersonation_started";
    pub const IMPERSONATION_STOPPED: &str = "user.impersonation_stopped";
    pub const SIGN_IN_SUCCEEDED: &str = "sign_in.succeeded";
    pub const SIGN_IN_FAILED: &str = "sign_in.failed";
    pub const SIGN_IN_REFUSED: &str = "sign_in.refused";
    pub const PASSWORD_CHANGED: &str = "user.password_changed";
    pub const PASSWORD_SET: &str = "user.password_set";
    pub const USER_DELETED: &str = "user.deleted";
    /// A mailed link asked for (password reset, e-mail verification; the detail says which).
    pub const TOKEN_REQUESTED: &str = "user.link_requested";
    pub const EMAIL_VERIFIED: &str = "user.email_verified";
    pub const PASSWORD_RESET: &str = "user.password_reset";
    pub const SESSIONS_REVOKED: &str = "session.revoked";
    /// A message given up: the mail server refused it for good, or it could not be sent before its link expired.
    pub const MAIL_FAILED: &str = "mail.failed";
    /// An administrator's test message queued (`POST /api/admin/test-mail`; the detail names the recipient).
    pub const MAIL_TEST_QUEUED: &str = "mail.test_queued";
    /// Failures beyond the per-minute budget of itemised rows, counted into one row.
    pub const SIGN_IN_FAILURES_SUMMARISED: &str = "sign_in.failures_summarised";
    /// Organizations as teams use them (the better-auth organization plugin's calls).
    pub const MEMBER_ADDED: &str = "member.added";
    pub const MEMBER_ROLE_CHANGED: &str = "member.role_changed";
    pub const MEMBER_REMOVED: &str = "member.removed";
    pub const MEMBER_LEFT: &str = "member.left";
    pub const INVITATION_SENT: &str = "invitation.sent";
    pub const INVITATION_ACCEPTED: &str = "invitation.accepted";
    pub const INVITATION_REJECTED: &str = "invitation.rejected";
    pub const INVITATION_CANCELED: &str = "invitation.canceled";
    /// A second factor: enrolment started, confirmed (on), new backup codes, turned off by the user, reset by an
    /// administrator; a wrong code at sign-in (at most the account's failure limit a window); a challenge ended by
    /// too many wrong codes.
    pub const TWO_FACTOR_ENROLMENT: &str = "user.two_factor_enrolment";
    pub const TWO_FACTOR_ENABLED: &str = "user.two_factor_enabled";
    pub const TWO_FACTOR_BACKUP_CODES: &str = "user.two_factor_backup_codes";
    pub const TWO_FACTOR_DISABLED: &str = "user.two_factor_disabled";
    pub const TWO_FACTOR_RESET: &str = "user.two_factor_reset";
    pub const SECOND_FACTOR_FAILED: &str = "sign_in.second_factor_failed";
    pub const SECOND_FACTOR_PASSED: &str = "sign_in.second_factor_passed";
    /// A second-factor code mailed (`two-factor/send-otp`): whoever holds the password can ask at will, so it is
    /// in the anonymous stream, as a mailed link is.
    pub const TWO_FACTOR_CODE_MAILED: &str = "user.two_factor_code_mailed";
    /// Passkeys: added, renamed, removed by their owner (a sign-in with one is `sign_in.succeeded`, detail
    /// `passkey`).
    pub const PASSKEY_REGISTERED: &str = "passkey.registered";
    pub const PASSKEY_RENAMED: &str = "passkey.renamed";
    pub const PASSKEY_DELETED: &str = "passkey.deleted";
    /// A sign-in through another identity provider (the detail names it); the session's own entry follows.
    pub const SIGN_IN_PROVIDER: &str = "sign_in.provider";
    /// A sign-in through an organization's single sign-on provider (the detail names it); the session's own entry
    /// follows (or the second factor's challenge).
    pub const SIGN_IN_SSO: &str = "sign_in.sso";
    /// A sign-in by a mailed link (`magic-link/verify`); the session's own entry follows.
    pub const SIGN_IN_MAGIC_LINK: &str = "sign_in.magic_link";
    /// A sign-in by a mailed code (`sign-in/email-otp`); the session's own entry follows.
    pub const SIGN_IN_EMAIL_CODE: &str = "sign_in.email_code";
    /// An identity at another provider linked to an account, or removed from it (the detail names it).
    pub const ACCOUNT_LINKED: &str = "account.linked";
    pub const ACCOUNT_UNLINKED: &str = "account.unlinked";
    /// The identity provider's signing keys rotated (the detail names the algorithms and when the new keys sign).
    pub const SIGNING_KEYS_ROTATED: &str = "oidc.signing_keys_rotated";
    /// An API key created, changed (name, enabled, expiry, limits, …) or deleted, by its owner or an administrator
    /// (the actor says who; the target is the owner, the detail the key's id).
    pub const API_KEY_CREATED: &str = "api_key.created";
    pub const API_KEY_UPDATED: &str = "api_key.updated";
    pub const API_KEY_DELETED: &str = "api_key.deleted";
    /// A client of the identity provider registered, changed, given a new secret, removed (the detail names its
    /// `client_id`, and what changed).
    pub const OAUTH_CLIENT_CREATED: &str = "oauth_client.created";
    pub const OAUTH_CLIENT_UPDATED: &str = "oauth_client.updated";
    pub const OAUTH_CLIENT_SECRET_ROTATED: &str = "oauth_client.secret_rotated";
    pub const OAUTH_CLIENT_DELETED: &str = "oauth_client.deleted";
    /// `config.toml` read again (`service-auth reload` or SIGHUP) and its live settings put in effect (the detail
    /// names the sections that changed, and those that wait for a restart). No actor: the file is the author.
    pub const SETTINGS_RELOADED: &str = "config.reloaded";
    /// An organization's team created, renamed, removed, or a user put in or taken out of it (the target is the
    /// organization, the detail names the team, and the user).
    pub const TEAM_CREATED: &str = "team.created";
    pub const TEAM_UPDATED: &str = "team.updated";
    pub const TEAM_DELETED: &str = "team.deleted";
    pub const TEAM_MEMBER_ADDED: &str = "team.member_added";
    pub const TEAM_MEMBER_REMOVED: &str = "team.member_removed";
    /// A role an organization defines (`dynamicAccessControl`) created, changed (renamed or its permissions
    /// replaced) or deleted: the target is the organization, the detail names the role and what changed.
    pub const ROLE_CREATED: &str = "role.created";
    pub const ROLE_UPDATED: &str = "role.updated";
    pub const ROLE_DELETED: &str = "role.deleted";
    /// A user consented to a client's scopes on the consent page (the actor is the user, the target the client;
    /// the detail names the `client_id` and the scopes).
    pub const OAUTH_CONSENT_GRANTED: &str = "oauth_consent.granted";
    /// A user approved a device's request (RFC 8628) on the `/device` page: the device's next poll gets the tokens.
    /// Same actor, target and detail as [`OAUTH_CONSENT_GRANTED`], whose consent it remembers in the same commit.
    pub const OAUTH_DEVICE_APPROVED: &str = "oauth_device.approved";
    /// A user's consent to a client narrowed or widened by its owner (`/oauth2/update-consent`), or withdrawn by
    /// its owner or an administrator. The target is the user, not the client as for a grant: when an
    /// administrator withdraws it, the actor is not the user, and the user is whom the change is about. The detail
    /// names the `client_id` (and the scopes now held).
    pub const OAUTH_CONSENT_UPDATED: &str = "oauth_consent.updated";
    pub const OAUTH_CONSENT_REVOKED: &str = "oauth_consent.revoked";
    /// An authorization code presented again after its redemption: the grant that redemption made ended with its
    /// tokens (RFC 9700 §4.2.1). No actor (a client presented it, or whoever stole it); the target is the user, the
    /// detail names the `client_id`.
    pub const OAUTH_CODE_REUSED: &str = "oauth_code.reused";
    /// A refresh token presented again after it was replaced (or twice at once): its grant ended with every token
    /// it issued (RFC 9700 §4.14.2). Same actor, target and detail as [`OAUTH_CODE_REUSED`].
    pub const OAUTH_REFRESH_TOKEN_REUSED: &str = "oauth_refresh_token.reused";
    /// A grant of the identity provider made for a user: an authorization code or an approved device request
    /// redeemed at the token endpoint (its refreshes are not: they continue the grant). No actor (the client
    /// redeemed it; the user's part is their consent's entry); the target is the user; the detail names the
    /// `client_id`, the grant type, the grant's id and its scopes. A client's own grant (client credentials) is not
    /// audited: it concerns no user, and a service may ask for one at any rate, which would push administrators'
    /// changes out of the capped log (its client's registration and secrets are).
    pub const OAUTH_GRANT_ISSUED: &str = "oauth_grant.issued";
    /// A user's grant ended before its end: revoked by its client (RFC 7009; no actor), with the user's consent to
    /// the client withdrawn (the actor is whoever withdrew it), or with every session of its user (a ban, a
    /// password reset, "sign out everywhere": written by the store, which alone knows which grants those are; no
    /// actor, the change's own entry has it). Target and detail as [`OAUTH_GRANT_ISSUED`], the detail saying why.
    /// A reused code or refresh token is in [`OAUTH_CODE_REUSED`] and [`OAUTH_REFRESH_TOKEN_REUSED`].
    pub const OAUTH_GRANT_REVOKED: &str = "oauth_grant.revoked";
    /// An organization's single sign-on provider registered, changed, removed (the target is the organization, the
    /// detail names the `providerId` and what changed; never the client secret).
    pub const SSO_PROVIDER_CREATED: &str = "sso_provider.created";
    pub const SSO_PROVIDER_UPDATED: &str = "sso_provider.updated";
    pub const SSO_PROVIDER_DELETED: &str = "sso_provider.deleted";
    /// A domain verification token made for a provider (the detail names its domains), and its domains verified
    /// (the detail says how: a DNS TXT record, or a service administrator's confirmation).
    pub const SSO_DOMAIN_VERIFICATION_REQUESTED: &str = "sso_provider.domain_verification_requested";
    pub const SSO_DOMAIN_VERIFIED: &str = "sso_provider.domain_verified";
    /// An organization's single sign-on policy changed by its owner or a service administrator (the target is the
    /// organization, the detail says whether single sign-on is now required for its verified domains).
    pub const SSO_POLICY_UPDATED: &str = "sso_policy.updated";
    /// A SCIM token made for an organization, or revoked (the target is the organization, the detail the token's
    /// id, scopes and expiry; never the token).
    pub const SCIM_TOKEN_CREATED: &str = "scim_token.created";
    pub const SCIM_TOKEN_REVOKED: &str = "scim_token.revoked";
    /// An organization's directory changed what it says of an account it provisioned over SCIM (its `userName`,
    /// `externalId`, attributes). Creating, deactivating (a ban) and deprovisioning an account are audited with the
    /// actions they amount to (`user.created`, `member.added`, `user.banned`, `member.removed`, `user.deleted`), the
    /// detail saying SCIM, so the webhook events those raise are raised for them too.
    pub const SCIM_USER_UPDATED: &str = "scim.user_updated";
}

/// The actions a caller who proved nothing can cause at will (an unknown e-mail costs nothing to type): a
/// mailed link asked for, a sign-in failed or refused, and the summary of failures. Retention keeps them in a
/// stream of their own, capped apart (`[audit] max_anonymous_entries`), so that no amount of them can push an
/// administrator's change, an account's creation or an impersonation out of the log.
pub const ANONYMOUS_ACTIONS: &[&str] = &[
    action::TOKEN_REQUESTED,
    action::SIGN_IN_FAILED,
    action::SIGN_IN_REFUSED,
    action::SIGN_IN_FAILURES_SUMMARISED,
    action::SECOND_FACTOR_FAILED,
    action::TWO_FACTOR_CODE_MAILED,
];

/// Whether entries of `action` belong to the anonymous stream ([`ANONYMOUS_ACTIONS`]).
pub fn is_anonymous_action(action: &str) -> bool {
    ANONYMOUS_ACTIONS.contains(&action)
}

/// One entry of the audit log: an administrative change or a sign-in outcome. `detail` never carries a secret
/// (no password, token or hash): it is shown to every administrator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub id: AuditId,
    pub at: Timestamp,
    /// What happened, e.g. `user.role_changed`, `sign_in.failed`.
    pub action: String,
    /// Who did it: the administrator, or the account signing in.
    pub actor: Option<UserId>,
    /// What it was done to: a user or an organization.
    pub target: Option<Uuid>,
    /// The client address the request came from (empty for the command line).
    pub ip_address: String,
    /// Short human-readable detail, e.g. `qa_manager -> admin`.
    pub detail: String,
}

impl AuditEntry {
    /// An entry stamped now.
    pub fn new(action: &str, actor: Option<UserId>, target: Option<Uuid>, ip: &str, detail: String) -> Self {
        Self {
            id: AuditId::new(),
            at: Timestamp::now(),
            action: action.to_owned(),
            actor,
            target,
            ip_address: ip.to_owned(),
            detail,
        }
    }
}
