-- SCIM users found by userName (lowercased, as RFC 7643 compares it) and externalId without reading the
-- organization's every record: the lookup identity providers send before each create. Written with the record by
-- this release; rows written before it (or by a node of the previous release) have NULL here, and a lookup reads
-- those too and checks them against the record, so none is missed while a cluster upgrades.
ALTER TABLE scim_users ADD COLUMN user_name_lower text;
ALTER TABLE scim_users ADD COLUMN external_id text;
CREATE INDEX scim_users_by_user_name ON scim_users (org_id, user_name_lower);
CREATE INDEX scim_users_by_external_id ON scim_users (org_id, external_id);
CREATE INDEX scim_users_unindexed ON scim_users (org_id) WHERE user_name_lower IS NULL;
