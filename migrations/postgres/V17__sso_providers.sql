-- Organizations' single sign-on providers (src/accounts/sso.rs), by providerId: the record in the embedded store's
-- format (the client secret sealed with the data key). Read where needed, so every node sees a change at once.
CREATE TABLE sso_providers (
    provider_id text PRIMARY KEY,
    record bytea NOT NULL
);
