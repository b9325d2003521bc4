-- Documents (channels): metadata and counters, repository-scoped slugs, the sidecar, the Yjs
-- journal, events, operation records, checkpoints, and saved navigation references.
-- Deleting a channel cascades to everything it owns; a parent with a child cannot be deleted.

CREATE TABLE channels (
    id TEXT PRIMARY KEY NOT NULL,
    repository TEXT NOT NULL,
    title TEXT NOT NULL,
    -- The canonical slug; every slug, former ones included, is a row of channel_slugs.
    slug TEXT NOT NULL,
    parent_id TEXT REFERENCES channels (id) ON DELETE RESTRICT,
    archived_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    -- Storage counters: revision per accepted commit, the last sequence assigned, the Yjs epoch.
    revision INTEGER NOT NULL,
    sequence INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    -- The last completed generated description: all absent or all present.
    description_text TEXT,
    description_revision INTEGER,
    description_source_plan_revision INTEGER,
    description_source_hash TEXT,
    description_generator_version TEXT,
    description_job_id TEXT,
    description_projected_at INTEGER,
    CHECK (
        (description_text IS NULL AND description_revision IS NULL
         AND description_source_plan_revision IS NULL AND description_source_hash IS NULL
         AND description_generator_version IS NULL AND description_job_id IS NULL
         AND description_projected_at IS NULL)
        OR
        (description_text IS NOT NULL AND description_revision IS NOT NULL
         AND description_source_plan_revision IS NOT NULL AND description_source_hash IS NOT NULL
         AND description_generator_version IS NOT NULL AND description_job_id IS NOT NULL
         AND description_projected_at IS NOT NULL)
    )
) STRICT;

CREATE INDEX channels_by_repository ON channels (repository, updated_at);
CREATE INDEX channels_by_parent ON channels (parent_id);

CREATE TABLE channel_slugs (
    repository TEXT NOT NULL,
    slug TEXT NOT NULL,
    channel_id TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    -- Raised each time the slug becomes canonical, so former slugs list newest first.
    promoted INTEGER NOT NULL,
    PRIMARY KEY (repository, slug)
) STRICT;

CREATE INDEX channel_slugs_by_channel ON channel_slugs (channel_id);

CREATE TABLE channel_state (
    channel_id TEXT PRIMARY KEY NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    version INTEGER NOT NULL,
    -- Text, not a JSON column: a sidecar may hold escapes a JSON column refuses.
    sidecar TEXT NOT NULL,
    -- Computed from the sidecar by the server and written in the same statement.
    unanswered_decisions INTEGER NOT NULL
) STRICT;

CREATE TABLE channel_updates (
    channel_id TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    sequence INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    bytes BLOB NOT NULL,
    PRIMARY KEY (channel_id, sequence)
) STRICT;

CREATE TABLE channel_events (
    channel_id TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    sequence INTEGER NOT NULL,
    ordinal INTEGER NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (channel_id, sequence, ordinal)
) STRICT;

CREATE TABLE channel_operations (
    channel_id TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    operation_id TEXT NOT NULL,
    fingerprint BLOB NOT NULL,
    revision INTEGER NOT NULL,
    sequence INTEGER NOT NULL,
    -- The sequence again when the commit carried a Yjs update, so recovery can find gaps.
    update_sequence INTEGER,
    PRIMARY KEY (channel_id, operation_id)
) STRICT;

CREATE TABLE channel_snapshots (
    channel_id TEXT PRIMARY KEY NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    epoch INTEGER NOT NULL,
    generation INTEGER NOT NULL,
    through_sequence INTEGER NOT NULL,
    revision INTEGER NOT NULL,
    canonical_text TEXT NOT NULL,
    source_hash TEXT NOT NULL,
    state BLOB NOT NULL,
    sidecar_version INTEGER,
    sidecar TEXT,
    sidecar_unanswered_decisions INTEGER,
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE user_navigation (
    user_id TEXT PRIMARY KEY NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    channel_id TEXT REFERENCES channels (id) ON DELETE SET NULL,
    updated_at INTEGER NOT NULL
) STRICT;
