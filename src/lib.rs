//! service-auth: an authentication and administration service with its own durable store.
//!
//! # Layout
//!
//! - [`config`]: the configuration file, environment overrides and their validation.
//! - [`domain`]: validated value types (e-mail, password, role, slug, session token …). A value of one of these
//!   types is valid by construction, so nothing downstream re-checks it.
//! - [`store`]: the embedded redb database, the persisted record formats, the one place that maps domain values
//!   to records (`store::convert`), the group-commit writer thread, backups and restores of the file. Nothing
//!   outside this module names the storage engine.
//! - [`actors`]: the users, organizations and sessions actors. Each is the only writer of its part of the state and
//!   of the read index it publishes; invariants that need one point of truth live there (the users' rules as
//!   pure functions in `actors::users::rules`). Also the audit log's reader and retention.
//! - [`hashing`]: argon2id on a bounded pool of blocking threads, never on the async runtime.
//! - [`accounts`]: the facade the front end calls: index reads, actor writes, the hasher, and the operations that
//!   span several of them.
//! - [`http`]: the hyper front end: serve loop, router, extraction, responses, and the route families.
//! - [`runtime`]: the running core (store, indexes, actors, facade); [`server`]: `run`, which `main` and the
//!   integration tests both call, and housekeeping.
//! - [`reload`]: `config.toml` read again while the server runs (`service-auth reload`, SIGHUP), its live settings
//!   put in effect.
//! - [`bootstrap`]: the first administrator (`service-auth admin create`, and the bootstrap variables at `serve`).
//! - [`data_key`]: the data directory's key, which seals the secrets the server reads back (a leaf).
//! - [`mail`]: messages rendered from `templates/`, and the sender that empties the durable outbox.
//! - [`saml`]: SAML 2.0 as a service provider, the part without state: the AuthnRequest (HTTP-Redirect), the SP
//!   metadata, and a Response's signature (Bergshamra's XML-DSig) and conditions.
//! - [`provider`]: the identity provider (OAuth 2.1 and OpenID Connect for other applications): its signing
//!   keys and JWKS, and what its discovery document says.
//! - [`scim`]: SCIM 2.0 provisioning per organization: its bearer tokens, filters, the User resource and the
//!   discovery documents.
//! - [`webhooks`]: endpoints administrators register and the deliverer of the messages the store queues with
//!   each change (Standard Webhooks signatures, retries, one delivering node per endpoint on PostgreSQL).
//! - [`metrics`]: the Prometheus recorder of a server and the handles the other parts record into (a leaf: it
//!   imports nothing of this crate).
//! - [`ops`]: seeding, backups, export and import of a data directory, and the import of a better-auth database.
//!
//! # Layers
//!
//! Each rung imports only from the rungs below it; modules on one rung do not import each other. A test
//! (`layers`) reads every `use crate::…`/`super::…` of `src/` and holds this map, and finds no circle of imports
//! between files (a module's own children aside); a module added to the crate is placed here, or the test fails.
//!
//! 1. `server`
//! 2. `bootstrap`, `reload`
//! 3. `runtime`, `http`
//! 4. `accounts`
//! 5. `ops`
//! 6. `provider`, `scim`, `webhooks`
//! 7. `actors`
//! 8. `mail`, `hashing`
//! 9. `store`
//! 10. `config`
//! 11. `oauth`, `data_key`, `saml`
//! 12. `domain`, `metrics`
//!
//! So the front end reaches the state only through the facade (`http` → `accounts` → `actors` → `store` →
//! `domain`); `runtime` builds the core the facade runs on, and `server` and `bootstrap` start it.

pub mod accounts;
pub mod actors;
#[cfg(test)]
mod alloc_count;
pub mod bootstrap;
pub mod config;
pub mod data_key;
pub mod domain;
pub mod hashing;
pub mod http;
#[cfg(test)]
mod layers;
pub mod mail;
pub mod metrics;
pub mod oauth;
pub mod ops;
pub mod provider;
pub mod reload;
pub mod runtime;
pub mod saml;
pub mod scim;
pub mod server;
pub mod store;
pub mod webhooks;
