-- SCIM Groups (src/scim): the teams an organization's directory made, with what only the directory says of them
-- (externalId). The team itself is in the organization's record. Read where needed, as scim_users is.
CREATE TABLE scim_groups (
    org_id bytea NOT NULL,
    team_id bytea NOT NULL,
    record bytea NOT NULL,
    PRIMARY KEY (org_id, team_id)
);
