-- The identity provider's signing keys (src/provider/keys.rs): each row holds the record in the embedded store's
-- format, its private key sealed with the data directory's key. Every node reads them at start and once a minute.
CREATE TABLE signing_keys (
    id bytea PRIMARY KEY,
    record bytea NOT NULL
);
