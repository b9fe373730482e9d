-- One node owns each message while it sends it (docs/cluster.md): a node claims a message before each attempt,
-- for a while; the others leave it alone until the lease ends (the owner died mid-send) or the row is gone (sent).
ALTER TABLE outbox ADD COLUMN leased_by uuid, ADD COLUMN leased_until timestamptz;
