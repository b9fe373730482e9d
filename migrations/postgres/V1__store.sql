-- service-auth's store on PostgreSQL (docs/cluster.md). Each row holds the record in the embedded store's format
-- (a version byte, then postcard), plus the columns PostgreSQL must see to enforce what one node's actors cannot
-- enforce alone across nodes.

CREATE TABLE organizations (
    id bytea PRIMARY KEY,
    -- Unique across every node: a slug taken on another node a moment ago is refused here.
    slug text NOT NULL UNIQUE,
    record bytea NOT NULL
);

CREATE TABLE users (
    id bytea PRIMARY KEY,
    -- Normalised (trimmed, lower-case), unique across every node.
    email text NOT NULL UNIQUE,
    -- role = admin and not banned: the last-administrator guard counts these under a lock.
    active_admin boolean NOT NULL,
    -- Membership: no account joins an organization another node is deleting, and no organization is deleted
    -- while an account another node just moved into it is a member.
    organization_id bytea REFERENCES organizations (id),
    record bytea NOT NULL
);

-- By user, then token hash, as the embedded store keeps them: ending every session of one account is one range.
CREATE TABLE sessions (
    user_id bytea NOT NULL,
    hash bytea NOT NULL,
    record bytea NOT NULL,
    PRIMARY KEY (user_id, hash)
);

-- Ids are UUID v7: key order is time order.
CREATE TABLE audit (
    id bytea PRIMARY KEY,
    record bytea NOT NULL
);

CREATE TABLE tokens (
    hash bytea PRIMARY KEY,
    record bytea NOT NULL
);

CREATE TABLE outbox (
    id bytea PRIMARY KEY,
    record bytea NOT NULL
);

-- The failed-sign-in limit every node shares: per e-mail (normalised, known or not), the end of the current
-- window and the checks counted in it (reservations in flight and failures).
CREATE TABLE attempts (
    email text PRIMARY KEY,
    window_end_ms bigint NOT NULL,
    used integer NOT NULL
);

-- Each running node's progress through the change log (written by its follower after each catch-up and about
-- once a second): `SELECT * FROM nodes` shows which nodes follow and how far behind any is.
CREATE TABLE nodes (
    node uuid PRIMARY KEY,
    applied_seq bigint NOT NULL,
    seen_at timestamptz NOT NULL DEFAULT now()
);

-- Every commit's changes, in commit order (appends are serialised by an advisory lock held to the commit), so a
-- node that follows by `seq > last` never skips one committed late.
CREATE TABLE changes (
    seq bigserial PRIMARY KEY,
    node uuid NOT NULL,
    ops bytea NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);
