//! Integration tests: the whole service over real HTTP, against the real server.
//!
//! One test binary (each `tests/*.rs` file is a separate, slow link); the modules live in `tests/api/`.
//! Every test starts its own server on a fresh temporary data directory, so tests run in parallel safely.

mod api {
    pub mod harness;

    mod account;

    mod admin;
    mod admin_plugin;
    mod api_keys;
    mod audit_export;
    mod audit_search;
    mod auth;
    mod cluster;
    mod consents;
    mod console;
    mod cors;
    mod crash;
    mod disk;
    mod docs;
    mod export;
    mod faults;
    mod first_run;
    mod free_text;
    mod hardening;
    mod health;
    mod impersonation;
    mod input;
    mod lifecycle;
    mod logs;
    mod mail;
    mod metrics;
    mod migration;
    mod oauth;
    mod oauth_id_token;
    mod ops;
    mod org_plugin;
    mod org_roles;
    mod organizations;
    mod overload;
    mod pages;
    mod passkeys;
    mod passwords;
    mod provider;
    mod provider_device;
    mod provider_end_session;
    mod provider_grants;
    mod provider_logout;
    mod refused_origins;
    mod reload;
    mod saml;
    mod scim;
    mod security;
    mod session_limits;
    mod setup;
    mod sso;
    mod sso_policy;
    mod stats;
    mod team_invitations;
    mod teams;
    mod test_command;
    mod two_factor;
    mod upgrade;
    mod user_admin;
    mod usernames;
    mod way_in;
    mod webhooks;
}
