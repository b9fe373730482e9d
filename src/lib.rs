//! service-auth: an authentication and administration service with its own durable store.
//!
//! # Layout
//!
//! - [`config`]: the configuration file, environment overrides and their validation.
//! - [`domain`]: validated value types (e-mail, password, role, slug, session token …). A value of one of these
//!   types is valid by construction, so nothing downstream re-checks it.
//! - [`store`]: the embedded redb database, the persisted record formats and the group-commit writer task.
//!   Nothing outside this module names the storage engine.
//! - [`actors`]: the users, organizations and sessions actors. Each is the only writer of its part of the state and
//!   of the read index it publishes; invariants that need one point of truth live there.
//! - [`hashing`]: argon2id on a bounded pool of blocking threads, never on the async runtime.
//! - [`http`]: the hyper front end: serve loop, router, extraction, responses and short handlers.
//! - [`app`]: wires everything together; [`app::run`] is what `main` and the integration tests both call.
//! - [`admin`]: the first administrator (`service-auth admin create`, and the bootstrap variables at `serve`).
//! - [`ops`]: seeding, backups, export and import of a data directory.

pub mod actors;
pub mod admin;
pub mod app;
pub mod config;
pub mod domain;
pub mod hashing;
pub mod http;
pub mod ops;
pub mod store;
