-- Schema snapshots: inventories, operations, per-database results, steps, the global lease,
-- reviews, encrypted artifact metadata, cleanup grants and the audit trail.
-- Safe errors are stored as the JSON of the one safe error type (`{stage, code, retryable,
-- message}`), never as driver text. Rows the rules make immutable are guarded by triggers as
-- well as by the stores' conditional updates.

CREATE TABLE schema_operation (
    id TEXT PRIMARY KEY NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('inventory', 'refresh', 'verification')),
    state TEXT NOT NULL CHECK (state IN ('reserved', 'starting', 'start_unknown', 'running',
        'awaiting_review', 'publishing', 'succeeded', 'failed', 'rejected', 'expired')),
    actor TEXT NOT NULL,
    request_key TEXT NOT NULL,
    inventory_id TEXT REFERENCES schema_inventory (id),
    workflow_run_id TEXT,
    reviewed_base_commit TEXT,
    pull_request TEXT,
    error TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    finished_at INTEGER,
    UNIQUE (actor, request_key)
) STRICT;

CREATE INDEX schema_operation_recent ON schema_operation (created_at);

CREATE TRIGGER schema_operation_terminal BEFORE UPDATE ON schema_operation
WHEN OLD.state IN ('succeeded', 'failed', 'rejected', 'expired')
BEGIN
    SELECT RAISE(ABORT, 'a terminal schema operation never changes');
END;

CREATE TABLE schema_inventory (
    id TEXT PRIMARY KEY NOT NULL,
    operation_id TEXT NOT NULL UNIQUE REFERENCES schema_operation (id),
    actor TEXT NOT NULL,
    server_version TEXT NOT NULL,
    discovered_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT;

CREATE INDEX schema_inventory_recent ON schema_inventory (discovered_at);

CREATE TRIGGER schema_inventory_immutable BEFORE UPDATE ON schema_inventory
BEGIN
    SELECT RAISE(ABORT, 'an inventory never changes');
END;

CREATE TABLE schema_inventory_database (
    inventory_id TEXT NOT NULL REFERENCES schema_inventory (id),
    database_name TEXT NOT NULL,
    position INTEGER NOT NULL CHECK (position >= 0),
    PRIMARY KEY (inventory_id, database_name),
    UNIQUE (inventory_id, position)
) STRICT;

CREATE TRIGGER schema_inventory_database_immutable BEFORE UPDATE ON schema_inventory_database
BEGIN
    SELECT RAISE(ABORT, 'an inventory never changes');
END;

CREATE TABLE schema_operation_database (
    operation_id TEXT NOT NULL REFERENCES schema_operation (id),
    database_name TEXT NOT NULL,
    position INTEGER NOT NULL CHECK (position >= 0),
    outcome TEXT CHECK (outcome IN ('changed', 'unchanged', 'failed')),
    freshness TEXT CHECK (freshness IN ('fresh', 'stale', 'unregistered')),
    object_counts TEXT,
    snapshot_hash TEXT,
    merged_hash TEXT,
    error TEXT,
    started_at INTEGER,
    finished_at INTEGER,
    PRIMARY KEY (operation_id, database_name),
    UNIQUE (operation_id, position),
    CHECK ((finished_at IS NULL) = (outcome IS NULL) AND (outcome IS NULL) = (freshness IS NULL))
) STRICT;

CREATE TRIGGER schema_operation_database_terminal BEFORE UPDATE ON schema_operation_database
WHEN OLD.finished_at IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'a terminal database result never changes');
END;

CREATE TABLE schema_operation_step (
    operation_id TEXT NOT NULL REFERENCES schema_operation (id),
    step_key TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('running', 'succeeded', 'failed')),
    attempts INTEGER NOT NULL CHECK (attempts >= 0),
    started_at INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    error TEXT,
    terminal_at INTEGER,
    PRIMARY KEY (operation_id, step_key),
    CHECK ((state = 'running') = (terminal_at IS NULL))
) STRICT;

CREATE TRIGGER schema_operation_step_terminal BEFORE UPDATE ON schema_operation_step
WHEN OLD.terminal_at IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'a terminal step never changes');
END;

CREATE TABLE schema_lease (
    lease_key TEXT PRIMARY KEY NOT NULL CHECK (lease_key = 'schema-mutation'),
    operation_id TEXT NOT NULL REFERENCES schema_operation (id),
    kind TEXT NOT NULL CHECK (kind IN ('refresh', 'verification')),
    workflow_run_id TEXT,
    acquired_at INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'awaiting_review'))
) STRICT;

CREATE TABLE schema_review (
    operation_id TEXT PRIMARY KEY NOT NULL REFERENCES schema_operation (id),
    state TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'rejected', 'expired')),
    actor TEXT,
    decided_at INTEGER,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    CHECK ((state = 'pending') = (decided_at IS NULL))
) STRICT;

CREATE TRIGGER schema_review_decided BEFORE UPDATE ON schema_review
WHEN OLD.state <> 'pending'
BEGIN
    SELECT RAISE(ABORT, 'a review decision never changes');
END;

CREATE TABLE schema_artifact (
    operation_id TEXT PRIMARY KEY NOT NULL REFERENCES schema_operation (id),
    blob_locator TEXT NOT NULL,
    key_version INTEGER NOT NULL CHECK (key_version >= 0),
    iv BLOB NOT NULL,
    auth_tag BLOB NOT NULL,
    ciphertext_hash TEXT NOT NULL,
    manifest TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('stored', 'consumed', 'discarded', 'deleted')),
    created_at INTEGER NOT NULL,
    decision_expires_at INTEGER NOT NULL,
    cleanup_target TEXT NOT NULL,
    cleanup_result TEXT
) STRICT;

CREATE TABLE schema_cleanup_grant (
    token_hash BLOB PRIMARY KEY NOT NULL CHECK (length(token_hash) = 32),
    operation_id TEXT NOT NULL REFERENCES schema_operation (id),
    actor TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at INTEGER,
    -- Comma-separated, from 'artifact', 'branch', 'workspace'.
    allowed TEXT NOT NULL
) STRICT;

CREATE TABLE schema_audit_event (
    id INTEGER PRIMARY KEY,
    operation_id TEXT NOT NULL REFERENCES schema_operation (id),
    action TEXT NOT NULL CHECK (action IN ('operation_requested', 'lease_cleared')),
    actor TEXT NOT NULL,
    occurred_at INTEGER NOT NULL
) STRICT;

CREATE INDEX schema_audit_event_operation ON schema_audit_event (operation_id);

CREATE TRIGGER schema_audit_event_immutable BEFORE UPDATE ON schema_audit_event
BEGIN
    SELECT RAISE(ABORT, 'an audit event never changes');
END;
