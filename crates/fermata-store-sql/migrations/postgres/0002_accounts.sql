-- Local accounts, roles, login sessions, API tokens and paired machines.
-- Secrets are never stored: only their SHA-256 hashes (32 bytes). Credentials are opaque
-- AES-256-GCM envelopes sealed by the keyring, which lives outside the database.

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    -- An argon2id PHC string.
    password_hash TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE user_roles (
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('system_admin')),
    PRIMARY KEY (user_id, role)
);

CREATE TABLE web_sessions (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- SHA-256 of the browser's secret; absent for a metadata-only session.
    secret_hash BYTEA UNIQUE CHECK (secret_hash IS NULL OR length(secret_hash) = 32),
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    authenticated_at BIGINT NOT NULL,
    revision BIGINT NOT NULL,
    credentials BYTEA
);

CREATE INDEX web_sessions_user ON web_sessions (user_id);
CREATE INDEX web_sessions_expiry ON web_sessions (expires_at);

CREATE TABLE api_tokens (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    label TEXT NOT NULL,
    secret_hash BYTEA NOT NULL UNIQUE CHECK (length(secret_hash) = 32),
    created_at BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at BIGINT
);

CREATE INDEX api_tokens_user ON api_tokens (user_id);

CREATE TABLE machines (
    id TEXT PRIMARY KEY,
    owner_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    secret_hash BYTEA NOT NULL UNIQUE CHECK (length(secret_hash) = 32),
    created_at BIGINT NOT NULL,
    authorized_at BIGINT NOT NULL,
    revision BIGINT NOT NULL,
    credentials BYTEA
);

CREATE INDEX machines_owner ON machines (owner_id);
