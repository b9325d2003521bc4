-- Document repositories as records: their members with a role each (repository_members), the
-- audit of every system_admin use of a repository they are not a member of
-- (repository_overrides), the caller who owns each program creation key
-- (document_creation_keys), and the access generation: one counter that triggers raise on every
-- change of who may do what, whichever process or command made it, so a serving process re-checks
-- its open connections by polling one row.
--
-- Existing databases: every repository a document names becomes a row. The user whose name is
-- the part before the first '/' becomes its admin; every other user who appears as an author in
-- the activity history of its documents becomes an editor. Anyone else, and a repository whose
-- owner is no user, is reached by a system_admin through the audited override, who can add
-- members.

CREATE TABLE repositories (
    name TEXT PRIMARY KEY NOT NULL,
    created_at INTEGER NOT NULL,
    -- Who created it; absent for a repository that existed before this migration.
    created_by TEXT REFERENCES users (id) ON DELETE SET NULL,
    -- The writer lease's fencing token it was written under; 0 for a migrated row.
    fencing_token INTEGER NOT NULL
) STRICT;

CREATE TABLE repository_members (
    repository TEXT NOT NULL REFERENCES repositories (name) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('viewer', 'editor', 'admin')),
    added_at INTEGER NOT NULL,
    fencing_token INTEGER NOT NULL,
    PRIMARY KEY (repository, user_id)
) STRICT;

CREATE INDEX repository_members_by_user ON repository_members (user_id, repository);

CREATE TABLE repository_overrides (
    id INTEGER PRIMARY KEY,
    repository TEXT NOT NULL REFERENCES repositories (name) ON DELETE CASCADE,
    -- Not foreign keys: the audit keeps what happened after the user or the document is gone.
    user_id TEXT NOT NULL,
    action TEXT NOT NULL,
    channel_id TEXT,
    at INTEGER NOT NULL,
    fencing_token INTEGER NOT NULL
) STRICT;

CREATE INDEX repository_overrides_by_repository ON repository_overrides (repository, id);

CREATE TRIGGER repository_override_immutable BEFORE UPDATE ON repository_overrides
BEGIN
    SELECT RAISE(ABORT, 'an audited override never changes');
END;

CREATE TABLE document_creation_keys (
    channel_id TEXT PRIMARY KEY NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    caller_id TEXT NOT NULL,
    -- SHA-256 of what the creation asked for (repository, title, parent, text).
    fingerprint BLOB NOT NULL CHECK (length(fingerprint) = 32)
) STRICT;

-- Pages of documents, most recently updated first within a repository.
CREATE INDEX channels_page ON channels (repository, updated_at DESC, id);

INSERT INTO repositories (name, created_at, created_by, fencing_token)
SELECT repository, MIN(created_at), NULL, 0 FROM channels GROUP BY repository;

INSERT INTO repository_members (repository, user_id, role, added_at, fencing_token)
SELECT r.name, u.id, 'admin', r.created_at, 0
FROM repositories r
JOIN users u ON instr(r.name, '/') > 1 AND u.name = substr(r.name, 1, instr(r.name, '/') - 1);

INSERT INTO repository_members (repository, user_id, role, added_at, fencing_token)
SELECT c.repository, v.author_id, 'editor', MIN(v.started_at), 0
FROM document_versions v
JOIN channels c ON c.id = v.channel_id
JOIN users u ON u.id = v.author_id
WHERE true
GROUP BY c.repository, v.author_id
ON CONFLICT (repository, user_id) DO NOTHING;

CREATE TABLE access_generation (
    id INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
    generation INTEGER NOT NULL
) STRICT;

INSERT INTO access_generation (id, generation) VALUES (1, 0);

CREATE TRIGGER access_session_ended AFTER DELETE ON web_sessions
BEGIN
    UPDATE access_generation SET generation = generation + 1 WHERE id = 1;
END;

CREATE TRIGGER access_password_changed AFTER UPDATE OF password_hash ON users
WHEN OLD.password_hash IS NOT NEW.password_hash
BEGIN
    UPDATE access_generation SET generation = generation + 1 WHERE id = 1;
END;

CREATE TRIGGER access_user_removed AFTER DELETE ON users
BEGIN
    UPDATE access_generation SET generation = generation + 1 WHERE id = 1;
END;

CREATE TRIGGER access_role_removed AFTER DELETE ON user_roles
BEGIN
    UPDATE access_generation SET generation = generation + 1 WHERE id = 1;
END;

CREATE TRIGGER access_token_revoked AFTER UPDATE OF revoked_at ON api_tokens
WHEN OLD.revoked_at IS NOT NEW.revoked_at
BEGIN
    UPDATE access_generation SET generation = generation + 1 WHERE id = 1;
END;

CREATE TRIGGER access_token_removed AFTER DELETE ON api_tokens
BEGIN
    UPDATE access_generation SET generation = generation + 1 WHERE id = 1;
END;

CREATE TRIGGER access_member_added AFTER INSERT ON repository_members
BEGIN
    UPDATE access_generation SET generation = generation + 1 WHERE id = 1;
END;

CREATE TRIGGER access_member_changed AFTER UPDATE ON repository_members
BEGIN
    UPDATE access_generation SET generation = generation + 1 WHERE id = 1;
END;

CREATE TRIGGER access_member_removed AFTER DELETE ON repository_members
BEGIN
    UPDATE access_generation SET generation = generation + 1 WHERE id = 1;
END;

CREATE TRIGGER access_document_archived AFTER UPDATE OF archived_at ON channels
WHEN OLD.archived_at IS NOT NEW.archived_at
BEGIN
    UPDATE access_generation SET generation = generation + 1 WHERE id = 1;
END;

CREATE TRIGGER access_document_deleted AFTER DELETE ON channels
BEGIN
    UPDATE access_generation SET generation = generation + 1 WHERE id = 1;
END;
