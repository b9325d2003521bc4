-- Schema snapshots: inventories, operations, per-database results, steps, the global lease,
-- reviews, encrypted artifact metadata, cleanup grants and the audit trail.
-- Safe errors are stored as the JSON of the one safe error type (`{stage, code, retryable,
-- message}`), never as driver text. Rows the rules make immutable are guarded by triggers as
-- well as by the stores' conditional updates.

CREATE FUNCTION schema_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'integrity_constraint_violation', MESSAGE = TG_ARGV[0];
END;
$$;

CREATE TABLE schema_operation (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('inventory', 'refresh', 'verification')),
    state TEXT NOT NULL CHECK (state IN ('reserved', 'starting', 'start_unknown', 'running',
        'awaiting_review', 'publishing', 'succeeded', 'failed', 'rejected', 'expired')),
    actor TEXT NOT NULL,
    request_key TEXT NOT NULL,
    inventory_id TEXT,
    workflow_run_id TEXT,
    reviewed_base_commit TEXT,
    pull_request TEXT,
    error TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    finished_at BIGINT,
    UNIQUE (actor, request_key)
);

CREATE INDEX schema_operation_recent ON schema_operation (created_at);

CREATE TRIGGER schema_operation_terminal BEFORE UPDATE ON schema_operation
FOR EACH ROW
WHEN (OLD.state IN ('succeeded', 'failed', 'rejected', 'expired'))
EXECUTE FUNCTION schema_refuse_change('a terminal schema operation never changes');

CREATE TABLE schema_inventory (
    id TEXT PRIMARY KEY,
    operation_id TEXT NOT NULL UNIQUE REFERENCES schema_operation (id),
    actor TEXT NOT NULL,
    server_version TEXT NOT NULL,
    discovered_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);

CREATE INDEX schema_inventory_recent ON schema_inventory (discovered_at);

CREATE TRIGGER schema_inventory_immutable BEFORE UPDATE ON schema_inventory
FOR EACH ROW
EXECUTE FUNCTION schema_refuse_change('an inventory never changes');

ALTER TABLE schema_operation
    ADD CONSTRAINT schema_operation_inventory FOREIGN KEY (inventory_id) REFERENCES schema_inventory (id);

CREATE TABLE schema_inventory_database (
    inventory_id TEXT NOT NULL REFERENCES schema_inventory (id),
    database_name TEXT NOT NULL,
    position BIGINT NOT NULL CHECK (position >= 0),
    PRIMARY KEY (inventory_id, database_name),
    UNIQUE (inventory_id, position)
);

CREATE TRIGGER schema_inventory_database_immutable BEFORE UPDATE ON schema_inventory_database
FOR EACH ROW
EXECUTE FUNCTION schema_refuse_change('an inventory never changes');

CREATE TABLE schema_operation_database (
    operation_id TEXT NOT NULL REFERENCES schema_operation (id),
    database_name TEXT NOT NULL,
    position BIGINT NOT NULL CHECK (position >= 0),
    outcome TEXT CHECK (outcome IN ('changed', 'unchanged', 'failed')),
    freshness TEXT CHECK (freshness IN ('fresh', 'stale', 'unregistered')),
    object_counts TEXT,
    snapshot_hash TEXT,
    merged_hash TEXT,
    error TEXT,
    started_at BIGINT,
    finished_at BIGINT,
    PRIMARY KEY (operation_id, database_name),
    UNIQUE (operation_id, position),
    CHECK ((finished_at IS NULL) = (outcome IS NULL) AND (outcome IS NULL) = (freshness IS NULL))
);

CREATE TRIGGER schema_operation_database_terminal BEFORE UPDATE ON schema_operation_database
FOR EACH ROW
WHEN (OLD.finished_at IS NOT NULL)
EXECUTE FUNCTION schema_refuse_change('a terminal database result never changes');

CREATE TABLE schema_operation_step (
    operation_id TEXT NOT NULL REFERENCES schema_operation (id),
    step_key TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('running', 'succeeded', 'failed')),
    attempts BIGINT NOT NULL CHECK (attempts >= 0),
    started_at BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    error TEXT,
    terminal_at BIGINT,
    PRIMARY KEY (operation_id, step_key),
    CHECK ((state = 'running') = (terminal_at IS NULL))
);

CREATE TRIGGER schema_operation_step_terminal BEFORE UPDATE ON schema_operation_step
FOR EACH ROW
WHEN (OLD.terminal_at IS NOT NULL)
EXECUTE FUNCTION schema_refuse_change('a terminal step never changes');

CREATE TABLE schema_lease (
    lease_key TEXT PRIMARY KEY CHECK (lease_key = 'schema-mutation'),
    operation_id TEXT NOT NULL REFERENCES schema_operation (id),
    kind TEXT NOT NULL CHECK (kind IN ('refresh', 'verification')),
    workflow_run_id TEXT,
    acquired_at BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'awaiting_review'))
);

CREATE TABLE schema_review (
    operation_id TEXT PRIMARY KEY REFERENCES schema_operation (id),
    state TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'rejected', 'expired')),
    actor TEXT,
    decided_at BIGINT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    CHECK ((state = 'pending') = (decided_at IS NULL))
);

CREATE TRIGGER schema_review_decided BEFORE UPDATE ON schema_review
FOR EACH ROW
WHEN (OLD.state <> 'pending')
EXECUTE FUNCTION schema_refuse_change('a review decision never changes');

CREATE TABLE schema_artifact (
    operation_id TEXT PRIMARY KEY REFERENCES schema_operation (id),
    blob_locator TEXT NOT NULL,
    key_version BIGINT NOT NULL CHECK (key_version >= 0),
    iv BYTEA NOT NULL,
    auth_tag BYTEA NOT NULL,
    ciphertext_hash TEXT NOT NULL,
    manifest TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('stored', 'consumed', 'discarded', 'deleted')),
    created_at BIGINT NOT NULL,
    decision_expires_at BIGINT NOT NULL,
    cleanup_target TEXT NOT NULL,
    cleanup_result TEXT
);

CREATE TABLE schema_cleanup_grant (
    token_hash BYTEA PRIMARY KEY CHECK (octet_length(token_hash) = 32),
    operation_id TEXT NOT NULL REFERENCES schema_operation (id),
    actor TEXT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT,
    -- Comma-separated, from 'artifact', 'branch', 'workspace'.
    allowed TEXT NOT NULL
);

CREATE TABLE schema_audit_event (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    operation_id TEXT NOT NULL REFERENCES schema_operation (id),
    action TEXT NOT NULL CHECK (action IN ('operation_requested', 'lease_cleared')),
    actor TEXT NOT NULL,
    occurred_at BIGINT NOT NULL
);

CREATE INDEX schema_audit_event_operation ON schema_audit_event (operation_id);

CREATE TRIGGER schema_audit_event_immutable BEFORE UPDATE ON schema_audit_event
FOR EACH ROW
EXECUTE FUNCTION schema_refuse_change('an audit event never changes');
