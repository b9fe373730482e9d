-- Sign-in through another identity provider (src/oauth). Each row holds the record in the embedded store's format.

-- The identities at providers linked to accounts: one account per identity, across every node. An account's
-- deletion removes its identities in the same transaction (the server writes it; the cascade is a safety net).
CREATE TABLE accounts (
    id bytea PRIMARY KEY,
    user_id bytea NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    provider text NOT NULL,
    subject text NOT NULL,
    record bytea NOT NULL,
    UNIQUE (provider, subject)
);
CREATE INDEX accounts_by_user ON accounts (user_id);

-- Sign-ins in progress, by the SHA-256 of their `state`: taken (deleted) once by whichever node gets the callback.
CREATE TABLE oauth_flows (
    hash bytea PRIMARY KEY,
    expires_at_ms bigint NOT NULL,
    record bytea NOT NULL
);
