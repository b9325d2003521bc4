-- Recovery reads the sequences whose commits carried a Yjs update after the checkpoint; without
-- this index it scanned every operation row of the document.
CREATE INDEX channel_operations_by_update ON channel_operations (channel_id, update_sequence)
    WHERE update_sequence IS NOT NULL;
