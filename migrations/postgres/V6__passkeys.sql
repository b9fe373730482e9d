-- Passkeys (WebAuthn credentials) and the ceremonies waiting for their verification (docs/cluster.md). No node
-- holds these in memory: each reads them here when asked, so they need no change log entry.

-- A deleted account's passkeys go with it (the commit that deletes the user deletes them by user_id).
CREATE TABLE passkeys (
    id bytea PRIMARY KEY,
    user_id bytea NOT NULL,
    -- What a sign-in with a passkey alone names; a credential registered once is refused a second time.
    credential_id bytea NOT NULL,
    record bytea NOT NULL
);
CREATE INDEX passkeys_by_user ON passkeys (user_id);
CREATE INDEX passkeys_by_credential ON passkeys (credential_id);

-- Keyed by SHA-256 of the browser's challenge cookie; deleted by the verification that takes it (single use
-- across nodes: DELETE … RETURNING), or once expired.
CREATE TABLE passkey_challenges (
    hash bytea PRIMARY KEY,
    expires_at_ms bigint NOT NULL,
    record bytea NOT NULL
);
