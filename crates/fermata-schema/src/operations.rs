//! Starting, reading and clearing schema operations: the start protocol and the clear action.
//!
//! The start protocol, for every kind: (1) the caller is a system administrator
//! ([`Administrator`]); (2) in one transaction the operation is inserted in `reserved` under the
//! browser's request key, taking the global lease for a refresh or verification, so a repeated
//! request returns the existing operation; (3) `reserved` becomes `starting` by a conditional
//! update, which only one request can win; (4) the winner calls the workflow's `start()` once
//! with the operation ID. A definite refusal marks the operation `failed` and releases its lease;
//! an uncertain result moves it to `start_unknown`, keeping the lease until it expires. The
//! workflow's first step binds its own run ID when the response was lost.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fermata_forge::{Forge, PullState};
use fermata_schema_core::{ErrorCode, SafeError, Subject};
use fermata_store::schema::{
    ClearOutcome, DatabaseResult, Inventory, InventoryId, LeaseClearing, NewOperation, Operation,
    OperationCount, OperationId, OperationKind, OperationState, OperationStep, PullRequest,
    RequestKey, Reservation, Review, SCHEMA_LEASE_TTL, SchemaLease, StepState, Transition,
};
use fermata_store::{ErrorChain, Storage, UnixMillis};

use crate::admin::Administrator;
use crate::notify::{EventKind, Notifier};
use crate::refresh_run::{REPUBLISH_HOOK, is_held_step};
use crate::safe_context::SafeContext;
use crate::selection;

/// How long an operation may wait for its workflow run to bind before it counts as never
/// started: as long as a lease would have kept it.
pub const START_GRACE: Duration = SCHEMA_LEASE_TTL;

/// How many of the latest operations [`Operations::settle_abandoned`] looks at.
const SETTLE_SCAN: u32 = 200;

/// What a failed `start()` call means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFailure {
    /// The workflow service refused the input: no run exists.
    Definite,
    /// No answer came (timeout, lost response): a run may or may not exist.
    Uncertain,
}

/// The workflow service as the start protocol and the clear action see it.
#[async_trait]
pub trait Workflows: Send + Sync {
    /// `start()`: creates a run of the operation's workflow with the operation ID as its input
    /// and returns the run's ID.
    async fn start(&self, operation: &Operation) -> Result<String, StartFailure>;

    /// Whether the run has ended or no longer exists (purged, or never created).
    async fn run_is_over(&self, run_id: &str) -> Result<bool, SafeError>;

    /// Delivers hook `hook` to the run, once per `idempotency_key`: delivering it again with the
    /// same key changes nothing.
    async fn resume(
        &self,
        run_id: &str,
        hook: &str,
        idempotency_key: &str,
        payload: &serde_json::Value,
    ) -> Result<(), SafeError>;
}

/// A request to start an operation.
#[derive(Debug, Clone)]
pub struct OperationRequest {
    pub kind: OperationKind,
    /// The browser's (or script's) key for this request.
    pub request_key: RequestKey,
    /// The inventory a refresh or verification selects from.
    pub inventory: Option<InventoryId>,
    /// The selected database names, exactly as shown in the inventory.
    pub databases: Vec<String>,
    /// A refresh that also proposes removing from the package, in the same reviewed pull
    /// request, the registered databases its inventory no longer lists; other kinds ignore it.
    pub remove_missing: bool,
}

/// Everything known about one operation, for the no-store status route and the CLI.
#[derive(Debug, Clone)]
pub struct OperationReport {
    pub operation: Operation,
    pub databases: Vec<DatabaseResult>,
    /// The inventory the operation discovered (inventory) or selected from (others).
    pub inventory: Option<Inventory>,
    /// The lease, when this operation holds it.
    pub lease: Option<SchemaLease>,
    /// The operation's steps, in the order they began: attempts, retried errors, outcomes.
    pub steps: Vec<OperationStep>,
    /// The actor's login name, when the user still exists.
    pub actor_name: Option<String>,
    /// The review of a refresh that reached one: its decision, who made it and when.
    pub review: Option<Review>,
}

impl OperationReport {
    /// How many rounds of the refresh's publication failed and were held (see
    /// [`Operations::republish`]).
    pub fn held_publications(&self) -> usize {
        self.steps
            .iter()
            .filter(|step| is_held_step(step.key.as_str()) && step.state == StepState::Succeeded)
            .count()
    }

    /// Whether the operation is an approved refresh whose publication failed and waits to be
    /// published again.
    pub fn awaits_republication(&self) -> bool {
        self.operation.state == OperationState::Publishing && self.operation.error.is_some()
    }
}

/// The schema operations service.
#[derive(Clone)]
pub struct Operations {
    storage: Arc<dyn Storage>,
    workflows: Arc<dyn Workflows>,
    lease_ttl: Duration,
    /// Where refreshes publish: asked whether a published pull request is still open.
    forge: Option<Arc<dyn Forge>>,
    /// Emits `operation.failed` for the operations that fail outside their run: a refused
    /// start, a run found gone, a cleared lease.
    notifier: Notifier,
}

impl std::fmt::Debug for Operations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operations").finish_non_exhaustive()
    }
}

impl Operations {
    pub fn new(storage: Arc<dyn Storage>, workflows: Arc<dyn Workflows>) -> Self {
        Operations {
            storage,
            workflows,
            lease_ttl: SCHEMA_LEASE_TTL,
            forge: None,
            notifier: Notifier::default(),
        }
    }

    /// Emits `operation.failed` through `notifier` when an operation fails outside its run (the
    /// runs emit their own).
    #[must_use]
    pub fn with_notifier(mut self, notifier: Notifier) -> Self {
        self.notifier = notifier;
        self
    }

    /// Refuses a refresh while the pull request of the latest published refresh is open on
    /// `forge` (asked at every request, never cached).
    #[must_use]
    pub fn with_forge(mut self, forge: Arc<dyn Forge>) -> Self {
        self.forge = Some(forge);
        self
    }

    /// How long the global lease lives after its latest heartbeat ([`SCHEMA_LEASE_TTL`] unless
    /// changed here; tests shorten it to see it expire).
    #[must_use]
    pub fn with_lease_ttl(mut self, lease_ttl: Duration) -> Self {
        self.lease_ttl = lease_ttl;
        self
    }

    /// Runs the start protocol and returns the operation as it stands afterwards.
    pub async fn request(
        &self,
        admin: &Administrator,
        request: &OperationRequest,
    ) -> Result<Operation, SafeError> {
        let schema = self.storage.schema();
        // A repeated request is answered before anything else is checked: the inventory it
        // selected from may have expired since, and the answer is still its operation.
        if let Some(existing) = schema
            .operation_by_request(admin.user(), &request.request_key)
            .await
            .context("load the user")?
        {
            return self.repeated(existing, request).await;
        }
        if request.kind == OperationKind::Refresh {
            self.refuse_while_a_pull_request_is_open().await?;
        }
        let databases = match (request.kind, request.inventory) {
            (OperationKind::Inventory, _) => Vec::new(),
            (_, None) => return Err(SafeError::new(ErrorCode::InventoryMissing)),
            (_, Some(id)) => {
                let inventory = schema
                    .inventory(id)
                    .await
                    .context("load the inventory")?
                    .ok_or_else(|| SafeError::new(ErrorCode::InventoryMissing))?;
                let now = schema.clock().await.context("read the database's clock")?;
                selection::resolve(&inventory, now, &request.databases)?
            }
        };
        let new = NewOperation {
            id: OperationId::generate(),
            kind: request.kind,
            actor: admin.user().clone(),
            request_key: request.request_key.clone(),
            inventory: request.inventory.filter(|_| request.kind.takes_lease()),
            databases,
            remove_missing: request.remove_missing && request.kind == OperationKind::Refresh,
        };
        let reserved = match schema
            .reserve_operation(&new, self.lease_ttl)
            .await
            .context("reserve the operation")?
        {
            Reservation::Created(operation) => operation,
            // A repeated request: the existing operation, moved on only if the first request
            // never got past its reservation (the conditional update lets one request win).
            Reservation::Existing(operation) if operation.state == OperationState::Reserved => {
                operation
            }
            Reservation::Existing(operation) => return Ok(operation),
            Reservation::LeaseHeld(lease) => return Err(lease_refusal(&lease, schema).await?),
        };
        self.start(reserved).await
    }

    /// `PULL_REQUEST_OPEN` (naming the operation) while a published refresh's pull request is
    /// open on the forge: a refresh is refused until it is merged or closed.
    async fn refuse_while_a_pull_request_is_open(&self) -> Result<(), SafeError> {
        match self.settle_pull_requests().await? {
            Some((published, _)) => Err(SafeError::about(
                ErrorCode::PullRequestOpen,
                Subject::Operation(published.0),
            )),
            None => Ok(()),
        }
    }

    /// The newest published refresh whose pull request the forge says is open (asked now, never
    /// cached), with that pull request; `None` without a forge. Every published pull request not
    /// yet recorded as merged or closed is asked about, newest first. Nothing is written: this
    /// is what a page shows (a `GET` changes nothing, on the forge or here).
    pub async fn open_pull_request(&self) -> Result<Option<(OperationId, PullRequest)>, SafeError> {
        self.ask_about_pull_requests(Learned::Shown).await
    }

    /// As [`Operations::open_pull_request`], and each pull request found merged or closed is
    /// recorded as settled, never asked about again; one closed without merging (on the forge, by
    /// hand) also loses its branch, as [`Operations::close_pull_request`] does. Run before a
    /// refresh starts, so however many operations came after a pull request, the block holds.
    pub async fn settle_pull_requests(
        &self,
    ) -> Result<Option<(OperationId, PullRequest)>, SafeError> {
        self.ask_about_pull_requests(Learned::Settled).await
    }

    async fn ask_about_pull_requests(
        &self,
        learned: Learned,
    ) -> Result<Option<(OperationId, PullRequest)>, SafeError> {
        let Some(forge) = &self.forge else {
            return Ok(None);
        };
        let schema = self.storage.schema();
        let published = schema
            .unsettled_pull_requests()
            .await
            .context("list the published pull requests")?;
        for operation in published {
            let Some(pull) = operation.pull_request else {
                continue;
            };
            let current = forge.pull_request(pull.number).await;
            let state = current
                .context("read a published pull request")?
                .map(|current| current.state);
            if state == Some(PullState::Open) {
                return Ok(Some((operation.id, pull)));
            }
            if learned == Learned::Shown {
                continue;
            }
            // Closed without merging, or unknown to the forge: nothing will merge the branch.
            if state != Some(PullState::Merged) {
                forge
                    .delete_branch(&pull.head)
                    .await
                    .context("delete a closed pull request's branch")?;
            }
            schema
                .settle_pull_request(operation.id)
                .await
                .context("record a settled pull request")?;
        }
        Ok(None)
    }

    /// The application database's clock, which every expiry is measured on.
    pub async fn now(&self) -> Result<UnixMillis, SafeError> {
        self.storage
            .schema()
            .clock()
            .await
            .context("read the database's clock")
    }

    /// Closes, without merging, the pull request operation `typed` (its exact ID) published, and
    /// deletes its branch, as a fresh administrator: the way to lift the open pull-request block
    /// when the change is not wanted. Returns the operation.
    pub async fn close_pull_request(
        &self,
        admin: &Administrator,
        typed: &str,
    ) -> Result<Operation, SafeError> {
        admin.require_fresh()?;
        let id = exact_operation_id(typed)?;
        let operation = self.current(id).await?;
        let about = Subject::Operation(id.0);
        let (Some(forge), Some(pull)) = (&self.forge, &operation.pull_request) else {
            return Err(SafeError::about(ErrorCode::PullRequestMissing, about));
        };
        let closed = forge.close_pull_request(pull.number).await;
        if !closed.context("close the pull request")? {
            return Err(SafeError::about(ErrorCode::PullRequestMissing, about));
        }
        // Nothing will merge the branch now; one already gone is fine.
        forge
            .delete_branch(&pull.head)
            .await
            .context("delete the pull request's branch")?;
        self.storage
            .schema()
            .settle_pull_request(id)
            .await
            .context("record a settled pull request")?;
        tracing::info!(operation = %id, actor = %admin.user(), pull_request = pull.number, "an administrator closed a pull request");
        Ok(operation)
    }

    /// Publishes again an approved refresh whose publication failed (its run holds it in
    /// `publishing` with the failure, the lease released and the artifact kept): delivers the
    /// hook of its next round, once per round, to the run, which publishes under the same
    /// branch, commit and pull-request keys. Anything else is refused with `NOTHING_TO_PUBLISH`.
    /// Needs a fresh administrator, as closing a pull request does.
    pub async fn republish(
        &self,
        admin: &Administrator,
        typed: &str,
    ) -> Result<Operation, SafeError> {
        admin.require_fresh()?;
        let id = exact_operation_id(typed)?;
        let report = self.report(id).await?;
        let nothing = || SafeError::about(ErrorCode::NothingToPublish, Subject::Operation(id.0));
        let held = report.held_publications();
        let operation = report.operation;
        let run_id = match &operation.run_id {
            Some(run_id)
                if operation.kind == OperationKind::Refresh
                    && operation.state == OperationState::Publishing
                    && operation.error.is_some()
                    && held > 0 =>
            {
                run_id.clone()
            }
            _ => return Err(nothing()),
        };
        let round = held.saturating_add(1);
        self.workflows
            .resume(
                &run_id,
                &format!("{REPUBLISH_HOOK}:{round}"),
                &format!("republish:{id}:{round}"),
                &serde_json::json!({ "actor": admin.user().0 }),
            )
            .await?;
        tracing::info!(operation = %id, actor = %admin.user(), round, "an administrator published a refresh again");
        Ok(operation)
    }

    /// The answer to a request whose key made `existing`: that operation, moved on if the first
    /// request never got past its reservation, or a refusal when the key came with a different
    /// request.
    async fn repeated(
        &self,
        existing: Operation,
        request: &OperationRequest,
    ) -> Result<Operation, SafeError> {
        let selected: BTreeSet<&str> = request.databases.iter().map(String::as_str).collect();
        let results = self
            .storage
            .schema()
            .database_results(existing.id)
            .await
            .context("load the database results")?;
        let recorded: BTreeSet<&str> = results.iter().map(|row| row.database.as_str()).collect();
        let inventory = request.inventory.filter(|_| request.kind.takes_lease());
        let remove_missing = request.remove_missing && request.kind == OperationKind::Refresh;
        if existing.kind != request.kind
            || existing.inventory != inventory
            || selected != recorded
            || existing.remove_missing != remove_missing
        {
            return Err(SafeError::about(
                ErrorCode::RequestKeyReused,
                Subject::Operation(existing.id.0),
            ));
        }
        if existing.state == OperationState::Reserved {
            self.start(existing).await
        } else {
            Ok(existing)
        }
    }

    /// Steps 3 and 4 of the protocol for a reserved operation.
    async fn start(&self, operation: Operation) -> Result<Operation, SafeError> {
        let schema = self.storage.schema();
        let id = operation.id;
        let Some(starting) = schema
            .transition(
                id,
                &Transition::new(OperationState::Reserved, OperationState::Starting),
            )
            .await
            .context("move the operation to its next state")?
        else {
            // Another request won the move and calls start() itself.
            return self.current(id).await;
        };
        match self.workflows.start(&starting).await {
            Ok(run_id) => {
                // False only when the first step bound the same run already, or the run ended
                // the operation: either way the operation row says what happened.
                schema
                    .bind_run(id, &run_id)
                    .await
                    .context("bind the workflow run to the operation")?;
                tracing::info!(operation = %id, run = %run_id, kind = starting.kind.as_str(), "schema operation started");
            }
            Err(StartFailure::Definite) => {
                let failed = Transition::fail(
                    OperationState::Starting,
                    SafeError::new(ErrorCode::StartFailed),
                )
                .releasing_lease();
                let ended = schema
                    .transition(id, &failed)
                    .await
                    .context("move the operation to its next state")?;
                tracing::warn!(operation = %id, "the workflow refused to start a schema operation");
                if ended.is_some() {
                    self.notify_failed(id).await;
                }
            }
            Err(StartFailure::Uncertain) => {
                let unknown = Transition {
                    error: Some(SafeError::new(ErrorCode::StartUnknown)),
                    ..Transition::new(OperationState::Starting, OperationState::StartUnknown)
                };
                schema
                    .transition(id, &unknown)
                    .await
                    .context("move the operation to its next state")?;
                tracing::warn!(operation = %id, "whether a schema operation started is unknown; its lease is kept until it expires");
            }
        }
        self.current(id).await
    }

    async fn current(&self, id: OperationId) -> Result<Operation, SafeError> {
        self.storage
            .schema()
            .operation(id)
            .await
            .context("load the operation")?
            .ok_or_else(|| SafeError::about(ErrorCode::OperationMissing, Subject::Operation(id.0)))
    }

    /// One operation with its per-database results, its inventory and its lease.
    pub async fn report(&self, id: OperationId) -> Result<OperationReport, SafeError> {
        let schema = self.storage.schema();
        let operation = self.current(id).await?;
        let databases = schema
            .database_results(id)
            .await
            .context("load the database results")?;
        let inventory = match operation.inventory {
            Some(selected) => schema.inventory(selected).await,
            None => schema.inventory_of_operation(id).await,
        }
        .context("load the operation's inventory")?;
        let lease = schema
            .schema_lease()
            .await
            .context("read the schema lease")?
            .filter(|lease| lease.operation == id);
        let steps = schema
            .steps(id)
            .await
            .context("load the operation's steps")?;
        let review = schema.review(id).await.context("load the review")?;
        let actor_name = self
            .storage
            .users()
            .user_by_id(&operation.actor)
            .await
            .context("load the user")?
            .map(|user| user.name.to_string());
        Ok(OperationReport {
            actor_name,
            operation,
            databases,
            inventory,
            lease,
            steps,
            review,
        })
    }

    /// Ends an inventory whose workflow run is gone, and returns the operation as it stands: one
    /// bound to a run that ended or no longer exists fails with `RUN_LOST`, and one whose run
    /// never bound within [`START_GRACE`] fails (or, from `start_unknown`, expires) the same
    /// way. Refresh and verification hold the lease instead, which expires and is cleared by an
    /// administrator, as docs/schema-operations.md says.
    pub async fn settle(&self, id: OperationId) -> Result<Operation, SafeError> {
        let operation = self.current(id).await?;
        if operation.state.is_terminal() || operation.kind.takes_lease() {
            return Ok(operation);
        }
        let abandoned = match &operation.run_id {
            Some(run) => self.workflows.run_is_over(run).await?,
            None => self.now().await?.since(operation.created_at) > START_GRACE,
        };
        if !abandoned {
            return Ok(operation);
        }
        let to = if operation.state == OperationState::StartUnknown {
            OperationState::Expired
        } else {
            OperationState::Failed
        };
        let ended = Transition {
            error: Some(SafeError::new(ErrorCode::RunLost)),
            ..Transition::new(operation.state, to)
        };
        if self
            .storage
            .schema()
            .transition(id, &ended)
            .await
            .context("move the operation to its next state")?
            .is_some()
        {
            tracing::warn!(operation = %id, state = %to, "an inventory whose run is gone was ended");
            self.notify_failed(id).await;
        }
        self.current(id).await
    }

    /// [`Operations::settle`] for every live operation among the latest ones; returns how many
    /// it ended.
    pub async fn settle_abandoned(&self) -> Result<usize, SafeError> {
        let mut ended = 0;
        for operation in self.recent(SETTLE_SCAN).await? {
            if !operation.state.is_terminal()
                && !operation.kind.takes_lease()
                && self.settle(operation.id).await?.state.is_terminal()
            {
                ended += 1;
            }
        }
        Ok(ended)
    }

    /// The latest `limit` operations, newest first.
    pub async fn recent(&self, limit: u32) -> Result<Vec<Operation>, SafeError> {
        self.storage
            .schema()
            .recent_operations(limit)
            .await
            .context("list the recent operations")
    }

    /// How many operations of each kind are in each state (the pairs that have any).
    pub async fn counts(&self) -> Result<Vec<OperationCount>, SafeError> {
        self.storage
            .schema()
            .operation_counts()
            .await
            .context("count the operations")
    }

    /// The latest webhook deliveries of the events of `operations`, the latest first, at most
    /// `limit` (see [`crate::notify`]).
    pub async fn deliveries(
        &self,
        operations: &[Operation],
        limit: usize,
    ) -> Result<Vec<crate::notify::Delivery>, SafeError> {
        crate::notify::deliveries(&*self.storage, operations, limit).await
    }

    /// The global lease, if any operation holds it.
    pub async fn lease(&self) -> Result<Option<SchemaLease>, SafeError> {
        self.storage
            .schema()
            .schema_lease()
            .await
            .context("read the schema lease")
    }

    /// Inventory `id`, if it exists.
    pub async fn inventory(&self, id: InventoryId) -> Result<Option<Inventory>, SafeError> {
        self.storage
            .schema()
            .inventory(id)
            .await
            .context("load the inventory")
    }

    /// The latest inventory, if any.
    pub async fn latest_inventory(&self) -> Result<Option<Inventory>, SafeError> {
        self.storage
            .schema()
            .latest_inventory()
            .await
            .context("load the latest inventory")
    }

    /// The clear action: `typed` must be the exact ID of the operation whose lease expired, and
    /// the administrator's session must be fresh. Verifies that the lease expired and that the
    /// operation's workflow run is terminal or unavailable; then, in one transaction, writes the
    /// audit event, marks the operation failed with `LEASE_CLEARED` and removes the lease.
    pub async fn clear_lease(
        &self,
        admin: &Administrator,
        typed: &str,
    ) -> Result<Operation, SafeError> {
        admin.require_fresh()?;
        let id = exact_operation_id(typed)?;
        let schema = self.storage.schema();
        let about = Subject::Operation(id.0);
        let lease = schema
            .schema_lease()
            .await
            .context("read the schema lease")?
            .filter(|lease| lease.operation == id)
            .ok_or_else(|| SafeError::about(ErrorCode::LeaseNotHeld, about.clone()))?;
        let now = schema.clock().await.context("read the database's clock")?;
        if !lease.is_expired(now) {
            return Err(SafeError::about(ErrorCode::LeaseNotExpired, about));
        }
        let operation = self.current(id).await?;
        if let Some(run) = operation.run_id.as_ref().or(lease.run_id.as_ref())
            && !self.workflows.run_is_over(run).await?
        {
            return Err(SafeError::about(ErrorCode::RunStillActive, about));
        }
        let clearing = LeaseClearing {
            operation: id,
            actor: admin.user().clone(),
        };
        match schema
            .clear_lease(&clearing)
            .await
            .context("clear the schema lease")?
        {
            ClearOutcome::Cleared { operation_failed } => {
                tracing::warn!(operation = %id, actor = %admin.user(), operation_failed, "an administrator cleared an expired schema lease");
                if operation_failed {
                    let cleared = SafeError::new(ErrorCode::LeaseCleared);
                    crate::inventory_run::end_unfinished(&*self.storage, id, &cleared)
                        .await
                        .context("end the operation's databases")?;
                    self.notify_failed(id).await;
                }
                self.current(id).await
            }
            ClearOutcome::NotHeld => Err(SafeError::about(ErrorCode::LeaseNotHeld, about)),
            ClearOutcome::Live(_) => Err(SafeError::about(ErrorCode::LeaseNotExpired, about)),
        }
    }
}

impl Operations {
    /// Emits `operation.failed` for operation `id`, which failed outside its run (an operation
    /// that expired instead emits nothing). The failure is recorded already; a notification
    /// that cannot be queued is logged, never turned into the caller's error.
    async fn notify_failed(&self, id: OperationId) {
        if let Err(error) = self
            .notifier
            .emit(&*self.storage, EventKind::OperationFailed, id, None)
            .await
        {
            tracing::warn!(operation = %id, error = %ErrorChain(&error), "the failure of a schema operation could not be queued for notification");
        }
    }
}

/// The refusal for a reservation that met another operation's lease.
async fn lease_refusal(
    lease: &SchemaLease,
    schema: &dyn fermata_store::schema::SchemaStore,
) -> Result<SafeError, SafeError> {
    let now = schema.clock().await.context("read the database's clock")?;
    let holder = Subject::Operation(lease.operation.0);
    Ok(if lease.is_expired(now) {
        SafeError::about(ErrorCode::LeaseNeedsClearing, holder)
    } else {
        SafeError::about(ErrorCode::LeaseHeld, holder)
    })
}

/// What asking the forge about published pull requests does with what it learns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Learned {
    /// Nothing: the answer is only shown.
    Shown,
    /// Merged and closed pull requests are recorded as settled, closed ones' branches deleted.
    Settled,
}

/// The operation ID exactly as Fermata prints it (lowercase, hyphenated); anything else is not
/// a confirmation.
fn exact_operation_id(typed: &str) -> Result<OperationId, SafeError> {
    typed
        .parse::<OperationId>()
        .ok()
        .filter(|id| id.to_string() == typed)
        .ok_or_else(|| SafeError::new(ErrorCode::OperationMissing))
}

/// The first step of every schema workflow: binds the run to its operation (the caller of
/// `start()` may have lost the response) and moves the operation from `starting` or
/// `start_unknown` to `running`. Repeating it is harmless. Fails when the operation is bound to
/// another run or has already ended.
pub async fn begin_run(
    storage: &dyn Storage,
    id: OperationId,
    run_id: &str,
) -> Result<Operation, SafeError> {
    let schema = storage.schema();
    let missing = || SafeError::about(ErrorCode::OperationMissing, Subject::Operation(id.0));
    if !schema
        .bind_run(id, run_id)
        .await
        .context("bind the workflow run to the operation")?
    {
        // Ended before this run could bind (cleared, say), or bound to another run.
        let operation = schema
            .operation(id)
            .await
            .context("load the operation")?
            .ok_or_else(missing)?;
        return Err(match operation.error {
            Some(error) if operation.state.is_terminal() => error,
            _ => SafeError::new(ErrorCode::RunLost),
        });
    }
    for from in [OperationState::Starting, OperationState::StartUnknown] {
        if let Some(running) = schema
            .transition(id, &Transition::new(from, OperationState::Running))
            .await
            .context("move the operation to its next state")?
        {
            return Ok(running);
        }
    }
    let operation = schema
        .operation(id)
        .await
        .context("load the operation")?
        .ok_or_else(missing)?;
    match operation.state {
        OperationState::Running => Ok(operation),
        _ => Err(operation.error.unwrap_or_else(missing)),
    }
}
