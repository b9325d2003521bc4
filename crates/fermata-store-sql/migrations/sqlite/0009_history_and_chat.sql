-- Activity history and the Chat rows a document keeps outside its sidecar: editing sessions
-- (document_versions), Chat threads (chat_threads), the top-level Chat session
-- (chat_session_state) and the stages of the workflow runs Chat shows (workflow_run_stages).
-- Every row goes with its document. Instants are milliseconds since the Unix epoch; JSON is
-- kept as text (a JSON column may refuse escapes the Chat keeps), checked by the server.

CREATE TABLE document_versions (
    channel_id TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    -- The session's number within its document, from 1.
    number INTEGER NOT NULL CHECK (number >= 1),
    -- The member credited; absent for server and Planner edits. Not a foreign key: history
    -- keeps its credit as it was written.
    author_id TEXT,
    -- The complete canonical MDX the session left.
    canonical_text TEXT NOT NULL,
    revision INTEGER NOT NULL,
    source_hash TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at INTEGER NOT NULL CHECK (ended_at >= started_at),
    -- A one-line summary and the source hash it describes; nothing writes them yet.
    summary_text TEXT,
    summary_source_hash TEXT,
    CHECK ((summary_text IS NULL) = (summary_source_hash IS NULL)),
    PRIMARY KEY (channel_id, number)
) STRICT;

CREATE TABLE chat_threads (
    channel_id TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    root_id TEXT NOT NULL,
    root_message TEXT NOT NULL,
    forked_at INTEGER NOT NULL,
    creator_id TEXT,
    replies TEXT NOT NULL,
    compactions TEXT NOT NULL,
    context_usage TEXT,
    -- bootstrapEntries, branched session entries and leaf, or the remote it came from.
    fork_provenance TEXT,
    updated_at INTEGER NOT NULL,
    -- The writer lease's token the row was last written under.
    fencing_token INTEGER NOT NULL,
    PRIMARY KEY (channel_id, root_id)
) STRICT;

CREATE TABLE chat_session_state (
    channel_id TEXT PRIMARY KEY NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    compactions TEXT NOT NULL,
    context_usage TEXT,
    entries TEXT NOT NULL,
    leaf_id TEXT,
    entry_forks_json TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    fencing_token INTEGER NOT NULL
) STRICT;

-- Bounded per stage (each field, and at most 64 parents), never per run.
CREATE TABLE workflow_run_stages (
    channel_id TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    run_id TEXT NOT NULL,
    stage_id TEXT NOT NULL,
    stage_order INTEGER NOT NULL CHECK (stage_order >= 0),
    status TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    -- A JSON array of stage IDs.
    parent_stage_ids TEXT NOT NULL,
    -- Seconds since the Unix epoch.
    started_at INTEGER,
    ended_at INTEGER,
    CHECK (ended_at IS NULL OR started_at IS NULL OR ended_at >= started_at),
    PRIMARY KEY (channel_id, run_id, stage_id)
) STRICT;
