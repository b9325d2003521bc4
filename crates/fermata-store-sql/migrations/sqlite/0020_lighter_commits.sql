-- Fewer pages per document commit. Every commit writes one operation record; as a rowid table
-- with its primary key beside it, that was two b-trees to write. Without a rowid the table is
-- its primary key's b-tree, clustered by document, one page written where there were two (its
-- rows are short: an operation ID is at most 128 characters). channel_operations_by_update
-- stays as it was.
--
-- A commit also moves its document's updated_at only once a second (UPDATED_AT_RESOLUTION_MS in
-- the store), in a statement of its own, so the entry of channels_page is not rewritten at
-- every commit; that needs no change here.

CREATE TABLE channel_operations_clustered (
    channel_id TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    operation_id TEXT NOT NULL,
    fingerprint BLOB NOT NULL,
    revision INTEGER NOT NULL,
    sequence INTEGER NOT NULL,
    -- The sequence again when the commit carried a Yjs update, so recovery can find gaps.
    update_sequence INTEGER,
    PRIMARY KEY (channel_id, operation_id)
) STRICT, WITHOUT ROWID;

INSERT INTO channel_operations_clustered
    (channel_id, operation_id, fingerprint, revision, sequence, update_sequence)
SELECT channel_id, operation_id, fingerprint, revision, sequence, update_sequence
FROM channel_operations;

DROP TABLE channel_operations;

ALTER TABLE channel_operations_clustered RENAME TO channel_operations;

CREATE INDEX channel_operations_by_update ON channel_operations (channel_id, update_sequence)
    WHERE update_sequence IS NOT NULL;
