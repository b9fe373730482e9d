-- The console overview's counters (docs/reference.md, GET /api/admin/stats): per counter, the count in each hour
-- (period 0) and each day (period 1, UTC) that starts at start_ms. Each node adds its own counts to the same rows
-- (INSERT … ON CONFLICT … n = n + excluded.n), a few seconds' worth at a time, so the rows hold the cluster's sum.
CREATE TABLE counters (
    period smallint NOT NULL,
    kind smallint NOT NULL,
    start_ms bigint NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (period, kind, start_ms)
);
