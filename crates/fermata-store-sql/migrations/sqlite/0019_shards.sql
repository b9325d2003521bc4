-- Shards, for several serving processes on one database (docs/storage.md, "Several processes").
-- A SQLite database is served by one process, which holds the whole-database lease and so
-- covers every shard; its documents still record their shard, as on PostgreSQL, so the two
-- engines' rows are the same.
--
-- The shard count is fixed here, when the database is created or upgraded to this release, and
-- never changes: a document's shard is stored on its channel and never moves. A top-level
-- document's shard is the last four hex digits of its ID, as a number, modulo the count (as
-- `Shard::of` computes for a new one); a child takes its parent's.
--
-- cluster_members holds what each member of a cluster announced (its address and release),
-- keyed by its member lease; whether a member is live is its lease's business.

CREATE TABLE cluster (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    shards INTEGER NOT NULL CHECK (shards BETWEEN 1 AND 4096)
);

INSERT INTO cluster (id, shards) VALUES (1, 256);

-- SQLite adds a NOT NULL column only with a default; every insert names the shard.
ALTER TABLE channels ADD COLUMN shard INTEGER NOT NULL DEFAULT 0 CHECK (shard >= 0);

UPDATE channels SET shard = (
        (instr('0123456789abcdef', substr(id, -4, 1)) - 1) * 4096
        + (instr('0123456789abcdef', substr(id, -3, 1)) - 1) * 256
        + (instr('0123456789abcdef', substr(id, -2, 1)) - 1) * 16
        + (instr('0123456789abcdef', substr(id, -1, 1)) - 1)
    ) % 256
    WHERE parent_id IS NULL AND length(id) >= 4
        AND instr('0123456789abcdef', substr(id, -4, 1)) > 0
        AND instr('0123456789abcdef', substr(id, -3, 1)) > 0
        AND instr('0123456789abcdef', substr(id, -2, 1)) > 0
        AND instr('0123456789abcdef', substr(id, -1, 1)) > 0;

UPDATE channels SET shard = (SELECT parent.shard FROM channels AS parent WHERE parent.id = channels.parent_id)
    WHERE parent_id IS NOT NULL;

CREATE TABLE cluster_members (
    lease_name TEXT PRIMARY KEY,
    address TEXT NOT NULL,
    version TEXT NOT NULL,
    announced_at BIGINT NOT NULL
);
