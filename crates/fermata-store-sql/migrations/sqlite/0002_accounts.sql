-- Local accounts, roles, login sessions, API tokens and paired machines.
-- Secrets are never stored: only their SHA-256 hashes (32 bytes). Credentials are opaque
-- AES-256-GCM envelopes sealed by the keyring, which lives outside the database.

CREATE TABLE users (
    id TEXT PRIMARY KEY NOT NULL,
    name TEXT NOT NULL UNIQUE,
    -- An argon2id PHC string.
    password_hash TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE user_roles (
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('system_admin')),
    PRIMARY KEY (user_id, role)
) STRICT;

CREATE TABLE web_sessions (
    id TEXT PRIMARY KEY NOT NULL,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- SHA-256 of the browser's secret; absent for a metadata-only session.
    secret_hash BLOB UNIQUE CHECK (secret_hash IS NULL OR length(secret_hash) = 32),
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    authenticated_at INTEGER NOT NULL,
    revision INTEGER NOT NULL,
    credentials BLOB
) STRICT;

CREATE INDEX web_sessions_user ON web_sessions (user_id);
CREATE INDEX web_sessions_expiry ON web_sessions (expires_at);

CREATE TABLE api_tokens (
    id TEXT PRIMARY KEY NOT NULL,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    label TEXT NOT NULL,
    secret_hash BLOB NOT NULL UNIQUE CHECK (length(secret_hash) = 32),
    created_at INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at INTEGER
) STRICT;

CREATE INDEX api_tokens_user ON api_tokens (user_id);

CREATE TABLE machines (
    id TEXT PRIMARY KEY NOT NULL,
    owner_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    secret_hash BLOB NOT NULL UNIQUE CHECK (length(secret_hash) = 32),
    created_at INTEGER NOT NULL,
    authorized_at INTEGER NOT NULL,
    revision INTEGER NOT NULL,
    credentials BLOB
) STRICT;

CREATE INDEX machines_owner ON machines (owner_id);
