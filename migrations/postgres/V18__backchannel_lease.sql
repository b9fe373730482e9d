-- The identity provider's back-channel logout messages wait in webhook_queue under a queue id of their own
-- (src/store/hooks.rs), which has no row in `webhooks` to hold its lease: one node sends that queue at a time, while
-- it holds this lease and renews it; another takes over once it has run out.
CREATE TABLE queue_leases (
    queue bytea PRIMARY KEY,
    leased_by uuid NOT NULL,
    leased_until timestamptz NOT NULL
);
