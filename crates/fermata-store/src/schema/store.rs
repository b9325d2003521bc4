//! The schema store: the nine schema tables and the audit trail behind one trait.

use std::time::Duration;

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::schema::{
    Artifact, ArtifactState, AuditEvent, CleanupGrant, CleanupKind, CleanupResult, ClearOutcome,
    DatabaseCheck, DatabaseName, DatabaseReport, DatabaseResult, Decided, Decision, Inventory,
    InventoryId, LeaseClearing, NewArtifact, NewCleanupGrant, NewInventory, NewOperation,
    Operation, OperationCount, OperationId, OperationStep, PullRequest, RequestKey, Review,
    SchemaLease, StepKey, StepProgress, Transition,
};
use crate::session::SecretHash;
use crate::time::UnixMillis;
use crate::user::UserId;

/// What reserving an operation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reservation {
    /// The operation is inserted in `reserved` state (holding the lease when its kind takes it),
    /// with its audit event.
    Created(Operation),
    /// The same actor sent the same request key before: here is that operation, unchanged.
    Existing(Operation),
    /// Another operation holds the lease, live or expired but not yet cleared. Nothing was
    /// written.
    LeaseHeld(SchemaLease),
}

/// The schema store.
#[async_trait]
pub trait SchemaStore: Send + Sync {
    /// The database's clock, which every expiry in this store is measured on.
    async fn clock(&self) -> StoreResult<UnixMillis>;

    // Operations.

    /// In one transaction: returns the actor's operation for the same request key if there is
    /// one; otherwise takes the lease for `lease_ttl` (refresh, verification) unless another
    /// operation holds it, inserts the operation in `reserved` with one pending result row per
    /// selected database, and writes the `operation_requested` audit event.
    async fn reserve_operation(
        &self,
        operation: &NewOperation,
        lease_ttl: Duration,
    ) -> StoreResult<Reservation>;

    async fn operation(&self, id: OperationId) -> StoreResult<Option<Operation>>;

    /// The operation `actor` created with request key `key`, if any.
    async fn operation_by_request(
        &self,
        actor: &UserId,
        key: &RequestKey,
    ) -> StoreResult<Option<Operation>>;

    /// The latest `limit` operations, newest first.
    async fn recent_operations(&self, limit: u32) -> StoreResult<Vec<Operation>>;

    /// How many operations there are of each kind in each state, for the pairs that have any,
    /// ordered by kind and state: a grouped count small and cheap enough for every metrics scrape.
    async fn operation_counts(&self) -> StoreResult<Vec<OperationCount>>;

    /// Moves the operation from `transition.from` to `transition.to` if it is still in `from`
    /// (releasing its lease in the same transaction when asked). `None` when it was not in
    /// `from`: nothing changed. An impossible transition is `Invalid`. The operation's error
    /// becomes the transition's; a failure without one keeps the error it had.
    async fn transition(
        &self,
        id: OperationId,
        transition: &Transition,
    ) -> StoreResult<Option<Operation>>;

    /// Binds the workflow run to a live operation and to its lease. True when the operation is
    /// bound to `run_id` afterwards; false when it is bound to another run, or terminal.
    async fn bind_run(&self, id: OperationId, run_id: &str) -> StoreResult<bool>;

    /// Records the base commit a live refresh compares with and publishes onto, once. True when
    /// the operation records `commit` afterwards (recording the same commit again changes
    /// nothing); false when it recorded another commit before, or has ended.
    async fn record_reviewed_base(&self, id: OperationId, commit: &str) -> StoreResult<bool>;

    /// Records the pull request a `publishing` operation published, once. True when the
    /// operation records `pull` afterwards (the same pull request again changes nothing); false
    /// when it recorded another one before, or is not publishing.
    async fn record_pull_request(&self, id: OperationId, pull: &PullRequest) -> StoreResult<bool>;

    /// Every operation whose published pull request is not yet known to be merged or closed,
    /// newest first, from an index over published operations alone: the open pull-request block
    /// asks the forge about each, however many operations came after it.
    async fn unsettled_pull_requests(&self) -> StoreResult<Vec<Operation>>;

    /// Records, once, that the pull request operation `id` published is merged or closed, so
    /// [`SchemaStore::unsettled_pull_requests`] no longer lists it (a terminal operation never
    /// changes; the record sits beside it). True when the operation published a pull request
    /// (recording it again changes nothing); false otherwise.
    async fn settle_pull_request(&self, id: OperationId) -> StoreResult<bool>;

    // Inventories.

    /// Records an inventory and its ordered names in one transaction. Recording again for the
    /// same operation returns the inventory already recorded and changes nothing.
    async fn record_inventory(&self, inventory: &NewInventory) -> StoreResult<Inventory>;

    async fn inventory(&self, id: InventoryId) -> StoreResult<Option<Inventory>>;

    /// The inventory an inventory operation recorded.
    async fn inventory_of_operation(&self, id: OperationId) -> StoreResult<Option<Inventory>>;

    /// The most recently discovered inventory.
    async fn latest_inventory(&self) -> StoreResult<Option<Inventory>>;

    // Per-database results and steps.

    /// The selection's result rows, in selection order.
    async fn database_results(&self, id: OperationId) -> StoreResult<Vec<DatabaseResult>>;

    /// Marks a database's work as started. False when its result is already terminal.
    async fn begin_database(&self, id: OperationId, database: &DatabaseName) -> StoreResult<bool>;

    /// Records a database's terminal result. False when it already has one: the first stays.
    async fn finish_database(
        &self,
        id: OperationId,
        database: &DatabaseName,
        report: &DatabaseReport,
    ) -> StoreResult<bool>;

    /// `database`'s terminal results in every operation, the latest to finish first, at most
    /// `limit`, each with its operation's kind.
    async fn database_history(
        &self,
        database: &DatabaseName,
        limit: u32,
    ) -> StoreResult<Vec<DatabaseCheck>>;

    async fn step(&self, id: OperationId, key: &StepKey) -> StoreResult<Option<OperationStep>>;

    /// The operation's step rows, in the order they began.
    async fn steps(&self, id: OperationId) -> StoreResult<Vec<OperationStep>>;

    /// Records a step boundary and, with `lease_ttl`, heartbeats the operation's lease in the
    /// same transaction (as [`SchemaStore::heartbeat_lease`]). A lease the operation no longer
    /// holds live is `Fenced`, checked first; a terminal step is a `Conflict`; either way nothing
    /// is written.
    async fn record_step(
        &self,
        id: OperationId,
        key: &StepKey,
        progress: &StepProgress,
        lease_ttl: Option<Duration>,
    ) -> StoreResult<OperationStep>;

    // The lease.

    async fn schema_lease(&self) -> StoreResult<Option<SchemaLease>>;

    /// Extends a live lease held by `id` to `ttl` from now (never shortening it) and makes it
    /// active again after a review. False when `id` holds no live lease.
    async fn heartbeat_lease(&self, id: OperationId, ttl: Duration) -> StoreResult<bool>;

    /// Holds a live lease of `id` until `until` (the review expiry). False when `id` holds no
    /// live lease.
    async fn extend_lease_to(&self, id: OperationId, until: UnixMillis) -> StoreResult<bool>;

    /// Removes the lease if `id` holds it. False when it does not.
    async fn release_lease(&self, id: OperationId) -> StoreResult<bool>;

    /// The clear action, in one transaction: if the lease names `clearing.operation` and has
    /// expired, writes the `lease_cleared` audit event, marks the operation failed with
    /// `LEASE_CLEARED` (unless it is already terminal) and removes the lease.
    async fn clear_lease(&self, clearing: &LeaseClearing) -> StoreResult<ClearOutcome>;

    // Reviews, artifacts, cleanup grants, audit.

    /// Opens the operation's review, pending for `lifetime`. Opening again returns the row.
    async fn open_review(&self, id: OperationId, lifetime: Duration) -> StoreResult<Review>;

    async fn review(&self, id: OperationId) -> StoreResult<Option<Review>>;

    /// Selects the review's one terminal decision with a conditional update.
    async fn decide_review(&self, id: OperationId, decision: &Decision) -> StoreResult<Decided>;

    /// Records the artifact metadata. The same metadata again returns the row; different
    /// metadata for the same operation is a `Conflict`.
    async fn record_artifact(&self, artifact: &NewArtifact) -> StoreResult<Artifact>;

    async fn artifact(&self, id: OperationId) -> StoreResult<Option<Artifact>>;

    /// Moves the artifact from `from` to `to` if it is still in `from`.
    async fn move_artifact(
        &self,
        id: OperationId,
        from: ArtifactState,
        to: ArtifactState,
    ) -> StoreResult<bool>;

    /// Records the cleanup result once. False when one is recorded already.
    async fn record_artifact_cleanup(
        &self,
        id: OperationId,
        result: CleanupResult,
    ) -> StoreResult<bool>;

    async fn create_cleanup_grant(&self, grant: &NewCleanupGrant) -> StoreResult<CleanupGrant>;

    /// Consumes the grant whose token hashes to `token_hash` for `kind`, once: `None` when there
    /// is no such grant, it expired, it was used, or it does not allow `kind`.
    async fn consume_cleanup_grant(
        &self,
        token_hash: &SecretHash,
        kind: CleanupKind,
    ) -> StoreResult<Option<CleanupGrant>>;

    /// The operation's audit events, oldest first.
    async fn audit_events(&self, id: OperationId) -> StoreResult<Vec<AuditEvent>>;
}
