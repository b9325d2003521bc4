-- Shards, for several serving processes on one database (docs/storage.md, "Several processes").
--
-- The shard count is fixed here, when the database is created or upgraded to this release, and
-- never changes: a document's shard is stored on its channel and never moves. A top-level
-- document's shard is the last four hex digits of its ID, as a number, modulo the count (as
-- `Shard::of` computes for a new one); a child takes its parent's.
--
-- cluster_members holds what each member of a cluster announced (its address and release),
-- keyed by its member lease; whether a member is live is its lease's business.

CREATE TABLE cluster (
    id SMALLINT PRIMARY KEY CHECK (id = 1),
    shards INTEGER NOT NULL CHECK (shards BETWEEN 1 AND 4096)
);

INSERT INTO cluster (id, shards) VALUES (1, 256);

ALTER TABLE channels ADD COLUMN shard INTEGER NOT NULL DEFAULT 0 CHECK (shard >= 0);

UPDATE channels SET shard = ('x' || right(id, 4))::bit(16)::integer % 256
    WHERE parent_id IS NULL AND right(id, 4) ~ '^[0-9a-f]{4}$';

UPDATE channels AS child SET shard = parent.shard
    FROM channels AS parent
    WHERE child.parent_id = parent.id;

ALTER TABLE channels ALTER COLUMN shard DROP DEFAULT;

CREATE TABLE cluster_members (
    lease_name TEXT PRIMARY KEY,
    address TEXT NOT NULL,
    version TEXT NOT NULL,
    announced_at BIGINT NOT NULL
);
