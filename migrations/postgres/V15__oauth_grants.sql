-- The identity provider's authorization codes waiting to be redeemed (by the SHA-256 of the code) and users'
-- consents to clients (src/provider/grants.rs): records in the embedded store's format. Read where needed, so any
-- node redeems a code another issued; a code is taken once (SELECT … FOR UPDATE, then DELETE).
CREATE TABLE oauth_codes (
    hash bytea PRIMARY KEY,
    expires_at_ms bigint NOT NULL,
    record bytea NOT NULL
);
CREATE TABLE oauth_consents (
    user_id bytea NOT NULL,
    client_id text NOT NULL,
    record bytea NOT NULL,
    PRIMARY KEY (user_id, client_id)
);
