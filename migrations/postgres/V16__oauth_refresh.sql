-- The identity provider's grants (src/provider/grants.rs): what one redeemed code or client credentials request
-- gave a client, with the SHA-256 of its refresh token in force. Records in the embedded store's format, held in
-- every node's memory and carried by the change log. A refresh is guarded (UPDATE … WHERE refresh_hash = the one
-- presented), so a refresh token is used once across the nodes; a user's grants end with all their sessions.
CREATE TABLE oauth_grants (
    id bytea PRIMARY KEY,
    user_id bytea,
    refresh_hash bytea,
    expires_at_ms bigint NOT NULL,
    record bytea NOT NULL
);
CREATE INDEX oauth_grants_user ON oauth_grants (user_id);
