//! The global schema lease (fixed key `schema-mutation`): at most one refresh or verification at
//! a time. Taken in the transaction that reserves the operation, heartbeated at step boundaries
//! (expiring 30 minutes after the latest heartbeat), extended to the review expiry before review,
//! released by a conditional delete naming its operation, and, once expired, cleared by an
//! administrator.

use std::str::FromStr;
use std::time::Duration;

use crate::error::{StoreError, StoreResult};
use crate::schema::operation::parse_stored;
use crate::schema::{OperationId, OperationKind};
use crate::time::UnixMillis;
use crate::user::UserId;

/// The one key the lease row has.
pub const SCHEMA_LEASE_KEY: &str = "schema-mutation";

/// How long the lease lives after its latest heartbeat.
pub const SCHEMA_LEASE_TTL: Duration = Duration::from_secs(30 * 60);

/// What keeps the lease alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaLeaseStatus {
    /// Heartbeats: it expires [`SCHEMA_LEASE_TTL`] after the latest one.
    Active,
    /// Held until the review expiry; the next heartbeat (after the decision) makes it active.
    AwaitingReview,
}

impl SchemaLeaseStatus {
    pub const ALL: [SchemaLeaseStatus; 2] =
        [SchemaLeaseStatus::Active, SchemaLeaseStatus::AwaitingReview];

    pub fn as_str(self) -> &'static str {
        match self {
            SchemaLeaseStatus::Active => "active",
            SchemaLeaseStatus::AwaitingReview => "awaiting_review",
        }
    }
}

impl FromStr for SchemaLeaseStatus {
    type Err = StoreError;

    fn from_str(text: &str) -> StoreResult<Self> {
        parse_stored(
            text,
            &SchemaLeaseStatus::ALL,
            SchemaLeaseStatus::as_str,
            "lease status",
        )
    }
}

/// The lease row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaLease {
    pub operation: OperationId,
    pub kind: OperationKind,
    pub run_id: Option<String>,
    pub acquired_at: UnixMillis,
    pub heartbeat_at: UnixMillis,
    pub expires_at: UnixMillis,
    pub status: SchemaLeaseStatus,
}

impl SchemaLease {
    pub fn is_expired(&self, now: UnixMillis) -> bool {
        self.expires_at <= now
    }
}

/// What the clear action asks for: the exact operation ID the administrator typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseClearing {
    pub operation: OperationId,
    pub actor: UserId,
}

/// What the clear action did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClearOutcome {
    /// The expired lease was removed, the audit event written, and the operation marked failed
    /// with `LEASE_CLEARED` unless it was already terminal.
    Cleared { operation_failed: bool },
    /// No lease names that operation (none at all, or another operation's).
    NotHeld,
    /// The lease is live: it cannot be cleared.
    Live(SchemaLease),
}
