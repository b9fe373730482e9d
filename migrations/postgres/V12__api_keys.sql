-- API keys (`@better-auth/api-key`'s `apikey`). Each row holds the record in the embedded store's format; the
-- secret is never stored, only its SHA-256 (in the record), which every node indexes in memory at start.
-- An account's ban or removal deletes its keys in the same transaction (the server writes it; the cascade is a
-- safety net).
CREATE TABLE api_keys (
    id bytea PRIMARY KEY,
    user_id bytea NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    record bytea NOT NULL
);
CREATE INDEX api_keys_by_user ON api_keys (user_id);
