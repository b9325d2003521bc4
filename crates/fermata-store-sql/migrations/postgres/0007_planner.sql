-- Planner state and the rows around it: each document's Planner owner and generation, the holds
-- a remote Planner link leaves for the next process, Planner credential digests, model choices,
-- saved decision answers, MCP sessions, machine choices and favorites (with machines' sharing),
-- and the deferred turns an earlier release kept, which this release only closes at start.
-- No secret is stored: sessions and machines are named by ID, credentials only by digest.

CREATE TABLE agent_state (
    channel_id TEXT PRIMARY KEY REFERENCES channels (id) ON DELETE CASCADE,
    -- A process session, not a credential; cleared when the session goes.
    owner_session_id TEXT REFERENCES web_sessions (id) ON DELETE SET NULL,
    status TEXT NOT NULL CHECK (status IN ('unavailable', 'starting', 'ready', 'working')),
    -- Reserved: kept, never advanced by this release.
    summary TEXT,
    transcript_cursor BIGINT,
    generation BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE INDEX agent_state_owner ON agent_state (owner_session_id);

CREATE TABLE planner_link_holds (
    channel_id TEXT PRIMARY KEY REFERENCES channels (id) ON DELETE CASCADE,
    -- Exactly one owner: a login session (the hold goes with it) or a paired machine.
    session_id TEXT REFERENCES web_sessions (id) ON DELETE CASCADE,
    machine_id TEXT REFERENCES machines (id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    generation BIGINT NOT NULL,
    -- JSON text: a list of held sessions (waiting requests, unacknowledged answers, held stops).
    held_sessions TEXT NOT NULL,
    suspended_at BIGINT NOT NULL,
    -- The length, in milliseconds, of the hand-over window after the write; the next process
    -- counts it again from its own start and rewrites the row without it.
    handover_until BIGINT CHECK (handover_until IS NULL OR handover_until >= 0),
    fencing_token BIGINT NOT NULL,
    CHECK ((session_id IS NULL) <> (machine_id IS NULL))
);

CREATE INDEX planner_link_holds_session ON planner_link_holds (session_id);
CREATE INDEX planner_link_holds_machine ON planner_link_holds (machine_id);

CREATE TABLE planner_credentials (
    -- SHA-256 of the credential; the credential itself is never stored.
    digest BYTEA PRIMARY KEY CHECK (length(digest) = 32),
    machine_id TEXT NOT NULL REFERENCES machines (id) ON DELETE CASCADE,
    channel_id TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);

CREATE INDEX planner_credentials_machine ON planner_credentials (machine_id);
CREATE INDEX planner_credentials_channel ON planner_credentials (channel_id);
CREATE INDEX planner_credentials_expiry ON planner_credentials (expires_at);

CREATE TABLE planner_model_choices (
    channel_id TEXT PRIMARY KEY REFERENCES channels (id) ON DELETE CASCADE,
    model TEXT,
    thinking_level TEXT,
    chosen_by TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    chosen_at BIGINT NOT NULL,
    fencing_token BIGINT NOT NULL,
    CHECK (model IS NOT NULL OR thinking_level IS NOT NULL)
);

CREATE TABLE decision_answers (
    channel_id TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    decision_id TEXT NOT NULL,
    generation BIGINT NOT NULL,
    saved_at BIGINT NOT NULL,
    claimed_turn TEXT,
    delivered_at BIGINT,
    PRIMARY KEY (channel_id, decision_id)
);

CREATE TABLE mcp_sessions (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    client_name TEXT NOT NULL,
    client_version TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL
);

CREATE INDEX mcp_sessions_last_seen ON mcp_sessions (last_seen_at);

-- When the owner shared the machine with teammates; absent while it is not shared.
ALTER TABLE machines ADD COLUMN shared_at BIGINT;

CREATE TABLE machine_choices (
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    channel_id TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    machine_id TEXT NOT NULL REFERENCES machines (id) ON DELETE CASCADE,
    chosen_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, channel_id)
);

CREATE INDEX machine_choices_machine ON machine_choices (machine_id);

CREATE TABLE machine_favorites (
    user_id TEXT PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    machine_id TEXT NOT NULL REFERENCES machines (id) ON DELETE CASCADE,
    chosen_at BIGINT NOT NULL
);

CREATE INDEX machine_favorites_machine ON machine_favorites (machine_id);

-- Kept from an earlier release and never written again, except that the writer lease's holder
-- closes the open rows at start.
CREATE TABLE planner_deferred_turns (
    id TEXT PRIMARY KEY,
    channel_id TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    kind TEXT NOT NULL
        CHECK (kind IN ('composer', 'invoke_planner', 'invoke_system', 'comment', 'draft')),
    state TEXT NOT NULL
        CHECK (state IN ('waiting', 'started', 'ended', 'interrupted', 'cancelled')),
    -- The fencing token of the latest transition.
    fencing_token BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    resolved_at BIGINT
);

CREATE INDEX planner_deferred_turns_channel ON planner_deferred_turns (channel_id);
