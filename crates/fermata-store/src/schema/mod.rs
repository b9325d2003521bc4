//! Schema snapshots: the values and the store of schema operations (the nine schema tables and
//! the audit trail). The one safe error every part of them shares, and the database names it may
//! name, are `fermata-schema-core`'s; they are named here too because the rows hold them.

mod inventory;
mod lease;
mod operation;
mod results;
mod review;
mod store;

pub use fermata_schema_core::{DatabaseName, ErrorCode, ErrorStage, SafeError, Subject};
pub use inventory::{INVENTORY_LIFETIME, Inventory, InventoryId, NewInventory};
pub use lease::{
    ClearOutcome, LeaseClearing, SCHEMA_LEASE_KEY, SCHEMA_LEASE_TTL, SchemaLease, SchemaLeaseStatus,
};
pub use operation::{
    NewOperation, Operation, OperationCount, OperationId, OperationKind, OperationState,
    PullRequest, RequestKey, Transition,
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

impl From<fermata_schema_core::InvalidDatabaseName> for crate::StoreError {
    fn from(error: fermata_schema_core::InvalidDatabaseName) -> Self {
        crate::StoreError::invalid(error.to_string())
    }
}

impl From<fermata_schema_core::UnreadableSafeError> for crate::StoreError {
    fn from(error: fermata_schema_core::UnreadableSafeError) -> Self {
        crate::StoreError::corrupt(error.to_string()).with_source(error.0)
    }
}
