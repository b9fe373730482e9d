-- Organizations as teams use them (docs/reference.md): memberships with roles, and invitations.
--
-- One membership per user and organization (the key). The foreign keys keep a membership from outliving its
-- account or organization, and refuse (rather than cascade) a deletion that another node's membership would
-- survive: every node deletes the memberships it holds itself, in the change log. `owner` mirrors the record's
-- owner role: the last-owner guard counts it under a lock of the organization's row (an op `ExpectOwner`), so
-- two nodes each removing one of the last two owners are serialised and the second is refused.
CREATE TABLE memberships (
    organization_id bytea NOT NULL REFERENCES organizations (id),
    user_id bytea NOT NULL REFERENCES users (id),
    owner boolean NOT NULL,
    record bytea NOT NULL,
    PRIMARY KEY (organization_id, user_id)
);
CREATE INDEX memberships_by_user ON memberships (user_id);

CREATE TABLE invitations (
    id bytea PRIMARY KEY,
    organization_id bytea NOT NULL REFERENCES organizations (id),
    record bytea NOT NULL
);
CREATE INDEX invitations_by_organization ON invitations (organization_id);
