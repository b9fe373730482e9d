-- The identity provider's clients (src/provider/clients.rs), by client_id: the record in the embedded store's
-- format (a confidential client's secret only as its SHA-256). Read where needed, so every node sees a change at once.
CREATE TABLE oauth_clients (
    client_id text PRIMARY KEY,
    record bytea NOT NULL
);
