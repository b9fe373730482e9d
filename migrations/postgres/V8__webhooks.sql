-- Webhooks (docs/reference.md, docs/cluster.md): the endpoints administrators register, each endpoint's queue of
-- messages in commit order, and the delivery log. Rows hold records in the embedded store's format.

CREATE TABLE webhooks (
    id bytea PRIMARY KEY,
    record bytea NOT NULL,
    -- Since when deliveries to it have failed for good (milliseconds); NULL while healthy. Written by the
    -- deliverer apart from the record, so it never overwrites an administrator's change.
    failing_since_ms bigint,
    -- One node delivers each endpoint's queue at a time (so messages about one account leave in order): it holds
    -- this lease and renews it while it runs; another node takes over once it has run out.
    leased_by uuid,
    leased_until timestamptz
);

-- Written in the same transaction as the change each message reports. `seq` is taken after the change log's lock
-- (held to the commit), so its order is commit order across nodes.
CREATE TABLE webhook_queue (
    seq bigserial PRIMARY KEY,
    endpoint bytea NOT NULL,
    record bytea NOT NULL
);
CREATE INDEX webhook_queue_by_endpoint ON webhook_queue (endpoint, seq);

CREATE TABLE webhook_deliveries (
    endpoint bytea NOT NULL,
    id bytea NOT NULL,
    at_ms bigint NOT NULL,
    record bytea NOT NULL,
    PRIMARY KEY (endpoint, id)
);
CREATE INDEX webhook_deliveries_by_time ON webhook_deliveries (at_ms);
