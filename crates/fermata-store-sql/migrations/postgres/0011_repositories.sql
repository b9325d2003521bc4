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
    name TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL,
    -- Who created it; absent for a repository that existed before this migration.
    created_by TEXT REFERENCES users (id) ON DELETE SET NULL,
    -- The writer lease's fencing token it was written under; 0 for a migrated row.
    fencing_token BIGINT NOT NULL
);

CREATE TABLE repository_members (
    repository TEXT NOT NULL REFERENCES repositories (name) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('viewer', 'editor', 'admin')),
    added_at BIGINT NOT NULL,
    fencing_token BIGINT NOT NULL,
    PRIMARY KEY (repository, user_id)
);

CREATE INDEX repository_members_by_user ON repository_members (user_id, repository);

CREATE TABLE repository_overrides (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    repository TEXT NOT NULL REFERENCES repositories (name) ON DELETE CASCADE,
    -- Not foreign keys: the audit keeps what happened after the user or the document is gone.
    user_id TEXT NOT NULL,
    action TEXT NOT NULL,
    channel_id TEXT,
    at BIGINT NOT NULL,
    fencing_token BIGINT NOT NULL
);

CREATE INDEX repository_overrides_by_repository ON repository_overrides (repository, id);

CREATE TRIGGER repository_override_immutable BEFORE UPDATE ON repository_overrides
FOR EACH ROW
EXECUTE FUNCTION schema_refuse_change('an audited override never changes');

CREATE TABLE document_creation_keys (
    channel_id TEXT PRIMARY KEY REFERENCES channels (id) ON DELETE CASCADE,
    caller_id TEXT NOT NULL,
    -- SHA-256 of what the creation asked for (repository, title, parent, text).
    fingerprint BYTEA NOT NULL CHECK (octet_length(fingerprint) = 32)
);

-- Pages of documents, most recently updated first within a repository.
CREATE INDEX channels_page ON channels (repository, updated_at DESC, id);

INSERT INTO repositories (name, created_at, created_by, fencing_token)
SELECT repository, MIN(created_at), NULL, 0 FROM channels GROUP BY repository;

INSERT INTO repository_members (repository, user_id, role, added_at, fencing_token)
SELECT r.name, u.id, 'admin', r.created_at, 0
FROM repositories r
JOIN users u ON position('/' IN r.name) > 1 AND u.name = split_part(r.name, '/', 1);

INSERT INTO repository_members (repository, user_id, role, added_at, fencing_token)
SELECT c.repository, v.author_id, 'editor', MIN(v.started_at), 0
FROM document_versions v
JOIN channels c ON c.id = v.channel_id
JOIN users u ON u.id = v.author_id
GROUP BY c.repository, v.author_id
ON CONFLICT (repository, user_id) DO NOTHING;

CREATE TABLE access_generation (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    generation BIGINT NOT NULL
);

INSERT INTO access_generation (id, generation) VALUES (1, 0);

CREATE FUNCTION access_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE access_generation SET generation = generation + 1 WHERE id = 1;
    RETURN NULL;
END;
$$;

-- Deletions count once per statement that removed a row (the session sweep removes many).
CREATE FUNCTION access_changed_if_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM removed) THEN
        UPDATE access_generation SET generation = generation + 1 WHERE id = 1;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER access_session_ended AFTER DELETE ON web_sessions
REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
EXECUTE FUNCTION access_changed_if_removed();

CREATE TRIGGER access_password_changed AFTER UPDATE OF password_hash ON users
FOR EACH ROW WHEN (OLD.password_hash IS DISTINCT FROM NEW.password_hash)
EXECUTE FUNCTION access_changed();

CREATE TRIGGER access_user_removed AFTER DELETE ON users
REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
EXECUTE FUNCTION access_changed_if_removed();

CREATE TRIGGER access_role_removed AFTER DELETE ON user_roles
REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
EXECUTE FUNCTION access_changed_if_removed();

CREATE TRIGGER access_token_revoked AFTER UPDATE OF revoked_at ON api_tokens
FOR EACH ROW WHEN (OLD.revoked_at IS DISTINCT FROM NEW.revoked_at)
EXECUTE FUNCTION access_changed();

CREATE TRIGGER access_token_removed AFTER DELETE ON api_tokens
REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
EXECUTE FUNCTION access_changed_if_removed();

CREATE TRIGGER access_member_added AFTER INSERT ON repository_members
FOR EACH ROW EXECUTE FUNCTION access_changed();

CREATE TRIGGER access_member_changed AFTER UPDATE ON repository_members
FOR EACH ROW EXECUTE FUNCTION access_changed();

CREATE TRIGGER access_member_removed AFTER DELETE ON repository_members
REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
EXECUTE FUNCTION access_changed_if_removed();

CREATE TRIGGER access_document_archived AFTER UPDATE OF archived_at ON channels
FOR EACH ROW WHEN (OLD.archived_at IS DISTINCT FROM NEW.archived_at)
EXECUTE FUNCTION access_changed();

CREATE TRIGGER access_document_deleted AFTER DELETE ON channels
REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
EXECUTE FUNCTION access_changed_if_removed();
