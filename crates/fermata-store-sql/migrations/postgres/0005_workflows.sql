-- Durable workflow runs, their step journal and the hooks delivered to them.
-- Instants are milliseconds since the Unix epoch on the database's clock. Deleting a run
-- cascades to its steps and hooks.

CREATE TABLE workflow_runs (
    id TEXT PRIMARY KEY,
    -- The registered name of the workflow that executes the run.
    workflow TEXT NOT NULL,
    -- JSON text.
    input TEXT NOT NULL,
    state TEXT NOT NULL
        CHECK (state IN ('pending', 'running', 'waiting', 'succeeded', 'failed', 'cancelled')),
    -- Raised by one on every claim; never lowered. Every write a worker makes names it.
    claim_generation BIGINT NOT NULL CHECK (claim_generation >= 0),
    -- The worker holding the claim: present exactly while the run is running.
    claim_worker TEXT,
    -- From when a worker may claim the run: since creation while pending, the claim's expiry
    -- while running, the wake time while waiting (absent while only a hook can wake it), absent
    -- once terminal. The claim query reads only this column.
    ready_at BIGINT,
    -- Set when a hook arrives while the run is running, so a suspension does not sleep through
    -- it; cleared when the claim ends.
    hook_arrived_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    finished_at BIGINT,
    -- JSON text, for a run that succeeded.
    output TEXT,
    -- A safe error's JSON form, for a run that failed.
    error TEXT,
    CHECK ((state = 'running') = (claim_worker IS NOT NULL)),
    CHECK (state = 'running' OR hook_arrived_at IS NULL),
    CHECK (
        (state IN ('pending', 'running') AND ready_at IS NOT NULL)
        OR state = 'waiting'
        OR (state IN ('succeeded', 'failed', 'cancelled') AND ready_at IS NULL)
    ),
    CHECK ((state IN ('succeeded', 'failed', 'cancelled')) = (finished_at IS NOT NULL)),
    CHECK ((state = 'succeeded') = (output IS NOT NULL)),
    CHECK ((state = 'failed') = (error IS NOT NULL))
);

CREATE INDEX workflow_runs_ready ON workflow_runs (ready_at) WHERE ready_at IS NOT NULL;
CREATE INDEX workflow_runs_finished ON workflow_runs (finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE workflow_steps (
    run_id TEXT NOT NULL REFERENCES workflow_runs (id) ON DELETE CASCADE,
    step_key TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('running', 'succeeded', 'failed')),
    -- Attempts begun, the one in progress included.
    attempts BIGINT NOT NULL CHECK (attempts >= 1),
    -- JSON text, for a step that succeeded.
    output TEXT,
    -- A safe error's JSON form: why the step failed, or why its latest attempt did.
    error TEXT,
    started_at BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    terminal_at BIGINT,
    PRIMARY KEY (run_id, step_key),
    CHECK ((state = 'running') = (terminal_at IS NULL)),
    CHECK ((state = 'succeeded') = (output IS NOT NULL)),
    CHECK (state <> 'succeeded' OR error IS NULL),
    CHECK (state <> 'failed' OR error IS NOT NULL)
);

CREATE TABLE workflow_hooks (
    run_id TEXT NOT NULL REFERENCES workflow_runs (id) ON DELETE CASCADE,
    hook_key TEXT NOT NULL,
    -- The wait, when the run waited before the hook arrived: its deadline, if it has a timeout,
    -- and when that deadline was found passed (the hook can no longer be delivered then).
    deadline_at BIGINT,
    timed_out_at BIGINT,
    -- The delivery: all three present or all absent.
    idempotency_key TEXT,
    payload TEXT,
    delivered_at BIGINT,
    PRIMARY KEY (run_id, hook_key),
    CHECK (
        (idempotency_key IS NULL AND payload IS NULL AND delivered_at IS NULL)
        OR (idempotency_key IS NOT NULL AND payload IS NOT NULL AND delivered_at IS NOT NULL)
    ),
    CHECK (timed_out_at IS NULL OR (deadline_at IS NOT NULL AND delivered_at IS NULL))
);
