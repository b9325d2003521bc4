-- The open pull-request block asks the forge about every published pull request not yet known
-- to be merged or closed. A terminal operation never changes, so that knowledge sits in its own
-- table, and the published operations have their own index: the block reads them however many
-- operations came after.
CREATE TABLE schema_pull_request_settled (
    operation_id TEXT PRIMARY KEY REFERENCES schema_operation (id),
    settled_at BIGINT NOT NULL
);

CREATE INDEX schema_operation_published ON schema_operation (created_at)
    WHERE pull_request IS NOT NULL;
