//! Review decisions, encrypted artifact metadata, cleanup grants and the audit trail of schema
//! operations.
//!
//! A review row starts `pending` and one conditional update selects its single terminal decision.
//! An artifact row holds only the metadata of the encrypted review artifact (never its contents
//! or key). A cleanup grant is stored by the hash of its token, never the token, and a
//! conditional update consumes it once.

use std::collections::BTreeSet;
use std::str::FromStr;
use std::time::Duration;

use crate::error::{StoreError, StoreResult};
use crate::schema::OperationId;
use crate::schema::operation::parse_stored;
use crate::session::SecretHash;
use crate::time::UnixMillis;
use crate::user::UserId;

/// A review's state: pending, then exactly one decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewState {
    Pending,
    Approved,
    Rejected,
    Expired,
}

impl ReviewState {
    pub const ALL: [ReviewState; 4] = [
        ReviewState::Pending,
        ReviewState::Approved,
        ReviewState::Rejected,
        ReviewState::Expired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ReviewState::Pending => "pending",
            ReviewState::Approved => "approved",
            ReviewState::Rejected => "rejected",
            ReviewState::Expired => "expired",
        }
    }
}

impl FromStr for ReviewState {
    type Err = StoreError;

    fn from_str(text: &str) -> StoreResult<Self> {
        parse_stored(text, &ReviewState::ALL, ReviewState::as_str, "review state")
    }
}

/// A review row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    pub operation: OperationId,
    pub state: ReviewState,
    /// Who decided (none for a pending or expired review).
    pub actor: Option<UserId>,
    pub decided_at: Option<UnixMillis>,
    pub created_at: UnixMillis,
    /// After this a pending review can only expire.
    pub expires_at: UnixMillis,
}

/// A decision to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Approve(UserId),
    Reject(UserId),
    /// The decision window passed; refused while it is still open.
    Expire,
}

/// What deciding did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// This decision is the review's one decision.
    Recorded(Review),
    /// The review was already decided (or, for approve and reject, its window closed): here
    /// is the row as it stands.
    Refused(Review),
}

/// Where an encrypted artifact is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArtifactState {
    /// Written and waiting for the review decision.
    Stored,
    /// Approved and published from.
    Consumed,
    /// Rejected or expired; its blob is to be deleted.
    Discarded,
    /// Its blob was deleted.
    Deleted,
}

impl ArtifactState {
    pub const ALL: [ArtifactState; 4] = [
        ArtifactState::Stored,
        ArtifactState::Consumed,
        ArtifactState::Discarded,
        ArtifactState::Deleted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ArtifactState::Stored => "stored",
            ArtifactState::Consumed => "consumed",
            ArtifactState::Discarded => "discarded",
            ArtifactState::Deleted => "deleted",
        }
    }

    /// The moves an artifact may make.
    pub fn may_become(self, to: ArtifactState) -> bool {
        use ArtifactState::*;
        matches!(
            (self, to),
            (Stored, Consumed | Discarded) | (Consumed | Discarded, Deleted)
        )
    }
}

impl FromStr for ArtifactState {
    type Err = StoreError;

    fn from_str(text: &str) -> StoreResult<Self> {
        parse_stored(
            text,
            &ArtifactState::ALL,
            ArtifactState::as_str,
            "artifact state",
        )
    }
}

/// The metadata of one operation's encrypted review artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewArtifact {
    pub operation: OperationId,
    /// Where the ciphertext is in the object store.
    pub blob_locator: String,
    pub key_version: u32,
    pub iv: Vec<u8>,
    pub auth_tag: Vec<u8>,
    /// SHA-256 of the ciphertext, hex.
    pub ciphertext_hash: String,
    /// The canonical manifest of the candidate files (JSON).
    pub manifest: String,
    pub decision_expires_at: UnixMillis,
    /// What cleanup removes once the artifact is no longer needed.
    pub cleanup_target: String,
}

/// An artifact row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    pub meta: NewArtifact,
    pub state: ArtifactState,
    pub created_at: UnixMillis,
    pub cleanup_result: Option<CleanupResult>,
}

/// What cleaning up an artifact's blob found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CleanupResult {
    Deleted,
    /// It was gone already.
    AlreadyGone,
    /// Deleting it failed; an operator removes it.
    Failed,
}

impl CleanupResult {
    pub const ALL: [CleanupResult; 3] = [
        CleanupResult::Deleted,
        CleanupResult::AlreadyGone,
        CleanupResult::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CleanupResult::Deleted => "deleted",
            CleanupResult::AlreadyGone => "already_gone",
            CleanupResult::Failed => "failed",
        }
    }
}

impl FromStr for CleanupResult {
    type Err = StoreError;

    fn from_str(text: &str) -> StoreResult<Self> {
        parse_stored(
            text,
            &CleanupResult::ALL,
            CleanupResult::as_str,
            "cleanup result",
        )
    }
}

/// What a cleanup grant allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CleanupKind {
    /// Delete the artifact's blob.
    Artifact,
    /// Delete the operation's published branch.
    Branch,
    /// Remove the operation's step folders.
    Workspace,
}

impl CleanupKind {
    pub const ALL: [CleanupKind; 3] = [
        CleanupKind::Artifact,
        CleanupKind::Branch,
        CleanupKind::Workspace,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CleanupKind::Artifact => "artifact",
            CleanupKind::Branch => "branch",
            CleanupKind::Workspace => "workspace",
        }
    }
}

impl FromStr for CleanupKind {
    type Err = StoreError;

    fn from_str(text: &str) -> StoreResult<Self> {
        parse_stored(text, &CleanupKind::ALL, CleanupKind::as_str, "cleanup kind")
    }
}

/// A short-lived cleanup authorization to store (by the hash of its token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCleanupGrant {
    pub token_hash: SecretHash,
    pub operation: OperationId,
    pub actor: UserId,
    pub lifetime: Duration,
    pub allowed: BTreeSet<CleanupKind>,
}

/// A cleanup grant row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanupGrant {
    pub operation: OperationId,
    pub actor: UserId,
    pub expires_at: UnixMillis,
    pub used_at: Option<UnixMillis>,
    pub allowed: BTreeSet<CleanupKind>,
}

/// What the audit trail records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuditAction {
    /// An administrator requested an operation.
    OperationRequested,
    /// An administrator cleared an operation's expired lease.
    LeaseCleared,
}

impl AuditAction {
    pub const ALL: [AuditAction; 2] = [AuditAction::OperationRequested, AuditAction::LeaseCleared];

    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::OperationRequested => "operation_requested",
            AuditAction::LeaseCleared => "lease_cleared",
        }
    }
}

impl FromStr for AuditAction {
    type Err = StoreError;

    fn from_str(text: &str) -> StoreResult<Self> {
        parse_stored(text, &AuditAction::ALL, AuditAction::as_str, "audit action")
    }
}

/// One audit event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    pub operation: OperationId,
    pub action: AuditAction,
    pub actor: UserId,
    pub at: UnixMillis,
}

impl NewCleanupGrant {
    /// A grant allows something and lives for at most an hour.
    pub fn check(&self) -> StoreResult<()> {
        if self.allowed.is_empty() {
            return Err(StoreError::invalid(
                "a cleanup grant allows at least one cleanup",
            ));
        }
        if self.lifetime.is_zero() || self.lifetime > Duration::from_secs(3600) {
            return Err(StoreError::invalid(
                "a cleanup grant lives for at most an hour",
            ));
        }
        Ok(())
    }
}
