-- The identity provider's device authorization requests (RFC 8628, src/provider/devices.rs), by the SHA-256 of the
-- device code, found on the `/device` page by the SHA-256 of the user code: records in the embedded store's format.
-- Read where needed, so a request started on one node is approved on another and polled on any; its decision and
-- its redemption lock the row (SELECT … FOR UPDATE) so each happens once.
CREATE TABLE oauth_devices (
    hash bytea PRIMARY KEY,
    user_code_hash bytea NOT NULL UNIQUE,
    expires_at_ms bigint NOT NULL,
    record bytea NOT NULL
);
