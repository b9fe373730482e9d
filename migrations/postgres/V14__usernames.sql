-- Usernames (better-auth's username plugin): the normalised name, unique across every node, so a name taken on
-- another node a moment ago is refused here as the users actor refuses it on one node. NULL for accounts without
-- one (PostgreSQL's UNIQUE lets any number of NULLs through).
ALTER TABLE users ADD COLUMN username text UNIQUE;
