-- Background jobs per document, each document's background-job channel revision, and research
-- requests staged under a parent document with their job links and published child.
-- Instants are milliseconds since the Unix epoch on the database's clock. Rows go with their
-- document; a child a research request published cannot be deleted while the request links it.

CREATE TABLE background_jobs (
    id TEXT PRIMARY KEY,
    channel_id TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    -- JSON text.
    input TEXT NOT NULL,
    state TEXT NOT NULL
        CHECK (state IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
    -- This job's place among the enqueues of its document and kind, from 1.
    target_generation BIGINT NOT NULL CHECK (target_generation >= 1),
    -- Raised by one on every claim; never lowered. Every write a worker makes names it.
    claim_generation BIGINT NOT NULL CHECK (claim_generation >= 0),
    -- The worker holding the claim: present exactly while the job is running.
    claim_worker TEXT,
    -- From when a worker may claim the job: since it was queued or its retry time while
    -- queued, the claim's expiry while running, absent once terminal.
    ready_at BIGINT,
    attempts BIGINT NOT NULL CHECK (attempts >= 0),
    failures BIGINT NOT NULL CHECK (failures >= 0),
    -- The code of the latest failure (a fixed word, never free text).
    last_failure TEXT,
    -- The artifact, JSON text, of a completed job.
    output TEXT,
    -- 1 when it completed while it was still the newest target of its document and kind.
    won BIGINT NOT NULL CHECK (won IN (0, 1)),
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    settled_at BIGINT,
    -- The fencing token of the job's latest write.
    fencing_token BIGINT NOT NULL,
    UNIQUE (channel_id, id),
    UNIQUE (channel_id, kind, target_generation),
    CHECK ((state = 'running') = (claim_worker IS NOT NULL)),
    CHECK ((state IN ('queued', 'running')) = (ready_at IS NOT NULL)),
    CHECK ((state IN ('completed', 'failed', 'cancelled')) = (settled_at IS NOT NULL)),
    CHECK ((state = 'completed') = (output IS NOT NULL)),
    CHECK (state <> 'failed' OR last_failure IS NOT NULL),
    CHECK (won = 0 OR state = 'completed')
);

CREATE INDEX background_jobs_ready ON background_jobs (ready_at) WHERE ready_at IS NOT NULL;

CREATE TABLE background_job_channels (
    channel_id TEXT PRIMARY KEY REFERENCES channels (id) ON DELETE CASCADE,
    -- Raised by every job change of the document.
    revision BIGINT NOT NULL CHECK (revision >= 1)
);

CREATE TABLE research_workspaces (
    -- The parent document the request was staged under.
    channel_id TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    request_key TEXT NOT NULL,
    -- The request, JSON text.
    payload TEXT NOT NULL,
    -- Jobs of the same document only: the composite keys below refuse any other.
    evidence_job_id TEXT,
    answer_job_id TEXT,
    -- Raised by every new answer job.
    answer_generation BIGINT NOT NULL CHECK (answer_generation >= 0),
    published_channel_id TEXT UNIQUE REFERENCES channels (id) ON DELETE RESTRICT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    published_at BIGINT,
    -- The fencing token of the request's latest write.
    fencing_token BIGINT NOT NULL,
    PRIMARY KEY (channel_id, request_key),
    FOREIGN KEY (channel_id, evidence_job_id)
        REFERENCES background_jobs (channel_id, id) ON DELETE CASCADE,
    FOREIGN KEY (channel_id, answer_job_id)
        REFERENCES background_jobs (channel_id, id) ON DELETE CASCADE,
    CHECK ((published_channel_id IS NULL) = (published_at IS NULL)),
    CHECK (answer_job_id IS NOT NULL OR answer_generation = 0)
);
