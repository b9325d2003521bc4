//! Schema snapshots: the values and the store of schema operations (the nine schema tables and
//! the audit trail), and the one safe error every part of them shares.

mod error;
mod inventory;
mod lease;
mod operation;
mod results;
mod review;
mod store;

pub use error::{DatabaseName, ErrorCode, ErrorStage, SafeError, Subject};
pub use inventory::{INVENTORY_LIFETIME, Inventory, InventoryId, NewInventory};
pub use lease::{
    ClearOutcome, LeaseClearing, SCHEMA_LEASE_KEY, SCHEMA_LEASE_TTL, SchemaLease, SchemaLeaseStatus,
};
pub use operation::{
    NewOperation, Operation, OperationId, OperationKind, OperationState, PullRequest, RequestKey,
    Transition,
};
pub use results::{
    DatabaseCheck, DatabaseReport, DatabaseResult, FileChange, FileDifference, Freshness,
    OperationStep, Outcome, StepKey, StepProgress, StepState,
};
pub use review::{
    Artifact, ArtifactState, AuditAction, AuditEvent, CleanupGrant, CleanupKind, CleanupResult,
    Decided, Decision, NewArtifact, NewCleanupGrant, Review, ReviewState,
};
pub use store::{Reservation, SchemaStore};
