//! Login sessions: the browser holds a random secret, the database only its SHA-256 hash, the
//! user, timestamps, a revision and optional opaque encrypted credentials.
//!
//! A session without a secret hash is *metadata-only*: it can only be used by the process that
//! created it (which holds its verifier in memory), so a restart cannot keep it and the startup
//! sweep removes it along with expired sessions.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::lease::Fence;
use crate::time::UnixMillis;
use crate::user::UserId;

/// The SHA-256 of a secret (a cookie, an API token, a machine token). Only hashes are stored.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SecretHash(pub [u8; 32]);

impl fmt::Debug for SecretHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretHash(..)")
    }
}

/// A session's stable ID (a UUID), which encrypted credentials are bound to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub String);

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A session to create.
#[derive(Debug, Clone)]
pub struct NewSession {
    pub id: SessionId,
    pub user: UserId,
    /// `None` for a metadata-only session.
    pub secret_hash: Option<SecretHash>,
    /// How long the session lives, from its creation on the database's clock.
    pub ttl: Duration,
    pub credentials: Option<Vec<u8>>,
    /// The password hash a login verified: the session is created only while the user still
    /// has it, so a password change racing the login wins (`Conflict`). `None` for sessions
    /// that are not a login.
    pub verified_password_hash: Option<String>,
}

/// A session as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id: SessionId,
    pub user: UserId,
    pub metadata_only: bool,
    pub created_at: UnixMillis,
    pub expires_at: UnixMillis,
    /// When the user last entered their password for this session.
    pub authenticated_at: UnixMillis,
    /// Raised by every credential rotation.
    pub revision: i64,
    /// Opaque ciphertext; the store never sees plaintext.
    pub credentials: Option<Vec<u8>>,
}

/// A live session and the database's clock when it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionLookup {
    pub session: Session,
    pub now: UnixMillis,
}

/// What the startup sweep removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionSweep {
    pub expired: u64,
    pub metadata_only: u64,
}

/// The session store.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Creates a session, authenticated now; a reused ID or secret hash is `Conflict`.
    async fn create_session(&self, session: &NewSession) -> StoreResult<Session>;

    /// The unexpired session whose secret hashes to `hash`.
    async fn session_by_secret(&self, hash: &SecretHash) -> StoreResult<Option<SessionLookup>>;

    /// The unexpired session with this ID.
    async fn session(&self, id: &SessionId) -> StoreResult<Option<SessionLookup>>;

    /// Records that the user entered their password again now, and replaces the session's secret
    /// with the one hashing to `secret_hash` (the ID, and what is bound to it, stay). `Missing`
    /// when the session is gone or expired.
    async fn reauthenticate(
        &self,
        id: &SessionId,
        secret_hash: &SecretHash,
    ) -> StoreResult<Session>;

    /// Replaces the credentials if the session is still at `expected_revision`, raising it.
    /// `Conflict` when another rotation came first; `Missing` when the session is gone: a
    /// rotation never recreates a deleted session.
    async fn rotate_session_credentials(
        &self,
        id: &SessionId,
        expected_revision: i64,
        credentials: Option<&[u8]>,
    ) -> StoreResult<Session>;

    /// Deletes a session (logout). Returns false when it was already gone.
    async fn delete_session(&self, id: &SessionId) -> StoreResult<bool>;

    /// Every session holding credentials, for re-encryption under a new key.
    async fn sessions_with_credentials(&self) -> StoreResult<Vec<Session>>;

    /// Removes expired and metadata-only sessions, under the writer lease. Idempotent.
    async fn sweep_sessions(&self, fence: &Fence) -> StoreResult<SessionSweep>;
}
