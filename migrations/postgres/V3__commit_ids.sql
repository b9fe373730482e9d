-- The id of each transaction a node's writer commits, written in that transaction (docs/cluster.md): a commit
-- retried after its reply was lost claims the same id first, and finding it taken knows that the first attempt
-- committed, instead of applying the same changes twice (or conflicting with itself). Rows older than an hour
-- are deleted by the followers.
CREATE TABLE commit_ids (
    id uuid PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT now()
);
