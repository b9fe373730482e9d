-- SCIM provisioning (src/scim): an organization's bearer tokens (the secret only as its SHA-256), and what its
-- directory said of each account it provisioned. Read where needed, so every node sees a change at once.
CREATE TABLE scim_tokens (
    id bytea PRIMARY KEY,
    record bytea NOT NULL
);
CREATE TABLE scim_users (
    org_id bytea NOT NULL,
    user_id bytea NOT NULL,
    record bytea NOT NULL,
    PRIMARY KEY (org_id, user_id)
);
