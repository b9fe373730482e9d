-- The audit entries anonymous callers cause (mailed links asked for, failed sign-ins) are counted and pruned apart
-- from the rest, so a flood of them never pushes administrative history out (docs/reference.md, [audit]).
-- Entries written before this column existed count as administrative: they age out under the old rules.
ALTER TABLE audit ADD COLUMN anonymous boolean NOT NULL DEFAULT false;
CREATE INDEX audit_by_stream ON audit (anonymous, id);
