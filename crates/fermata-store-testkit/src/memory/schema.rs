//! The memory adapter's schema store. Every method works in one critical section, which stands
//! in for the SQL adapters' transactions.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use async_trait::async_trait;

use super::MemoryStorage;
use fermata_store::error::{StoreError, StoreResult};
use fermata_store::schema::{
    Artifact, ArtifactState, AuditAction, AuditEvent, CleanupGrant, CleanupKind, CleanupResult,
    ClearOutcome, DatabaseCheck, DatabaseName, DatabaseReport, DatabaseResult, Decided, Decision,
    ErrorCode, Inventory, InventoryId, LeaseClearing, NewArtifact, NewCleanupGrant, NewInventory,
    NewOperation, Operation, OperationCount, OperationId, OperationState, OperationStep,
    PullRequest, RequestKey, Reservation, Review, ReviewState, SafeError, SchemaLease,
    SchemaLeaseStatus, SchemaStore, StepKey, StepProgress, StepState, Transition,
};
use fermata_store::session::SecretHash;
use fermata_store::time::UnixMillis;
use fermata_store::user::UserId;

/// The schema tables.
#[derive(Debug, Default)]
pub(super) struct SchemaTables {
    /// In creation order.
    operations: Vec<Operation>,
    request_keys: HashMap<(UserId, RequestKey), OperationId>,
    results: BTreeMap<(OperationId, u32), DatabaseResult>,
    steps: BTreeMap<(OperationId, StepKey), OperationStep>,
    /// In discovery order.
    inventories: Vec<Inventory>,
    lease: Option<SchemaLease>,
    reviews: HashMap<OperationId, Review>,
    /// Operations whose published pull request is known to be merged or closed.
    settled_pulls: HashSet<OperationId>,
    artifacts: HashMap<OperationId, Artifact>,
    grants: HashMap<SecretHash, CleanupGrant>,
    audit: Vec<AuditEvent>,
}

/// A heartbeat: the lease is active again and lives `ttl` from now, never less than it had.
fn beat(lease: &mut SchemaLease, now: UnixMillis, ttl: Duration) {
    lease.heartbeat_at = now;
    lease.status = SchemaLeaseStatus::Active;
    lease.expires_at = lease.expires_at.max(now.plus(ttl));
}

impl SchemaTables {
    fn operation_mut(&mut self, id: OperationId) -> Option<&mut Operation> {
        self.operations.iter_mut().find(|op| op.id == id)
    }

    fn result_mut(
        &mut self,
        id: OperationId,
        database: &DatabaseName,
    ) -> StoreResult<&mut DatabaseResult> {
        self.results
            .values_mut()
            .find(|row| row.operation == id && &row.database == database)
            .ok_or_else(|| StoreError::missing("the database is not in the operation's selection"))
    }

    /// The lease, when `id` holds it and it is live at `now`.
    fn live_lease_of(&mut self, id: OperationId, now: UnixMillis) -> Option<&mut SchemaLease> {
        self.lease
            .as_mut()
            .filter(|lease| lease.operation == id && !lease.is_expired(now))
    }

    fn release_lease_of(&mut self, id: OperationId) -> bool {
        if self
            .lease
            .as_ref()
            .is_some_and(|lease| lease.operation == id)
        {
            self.lease = None;
            true
        } else {
            false
        }
    }
}

#[async_trait]
impl SchemaStore for MemoryStorage {
    async fn clock(&self) -> StoreResult<UnixMillis> {
        Ok(UnixMillis::now())
    }

    async fn reserve_operation(
        &self,
        new: &NewOperation,
        lease_ttl: Duration,
    ) -> StoreResult<Reservation> {
        self.inner.gate("reserve operation")?;
        new.check()?;
        let mut state = self.inner.state();
        let tables = &mut state.schema;
        let now = UnixMillis::now();
        let key = (new.actor.clone(), new.request_key.clone());
        if let Some(existing) = tables.request_keys.get(&key) {
            let existing = tables.operations.iter().find(|op| op.id == *existing);
            return Ok(Reservation::Existing(existing.cloned().ok_or_else(
                || StoreError::corrupt("a request key names a missing operation"),
            )?));
        }
        if tables.operations.iter().any(|op| op.id == new.id) {
            return Err(StoreError::conflict("the operation ID is taken"));
        }
        if let Some(inventory) = new.inventory
            && !tables.inventories.iter().any(|inv| inv.id == inventory)
        {
            return Err(StoreError::invalid("the inventory does not exist"));
        }
        if new.kind.takes_lease() {
            if let Some(lease) = &tables.lease {
                return Ok(Reservation::LeaseHeld(lease.clone()));
            }
            tables.lease = Some(SchemaLease {
                operation: new.id,
                kind: new.kind,
                run_id: None,
                acquired_at: now,
                heartbeat_at: now,
                expires_at: now.plus(lease_ttl),
                status: SchemaLeaseStatus::Active,
            });
        }
        let operation = Operation {
            id: new.id,
            kind: new.kind,
            state: OperationState::Reserved,
            actor: new.actor.clone(),
            request_key: new.request_key.clone(),
            inventory: new.inventory,
            remove_missing: new.remove_missing,
            run_id: None,
            reviewed_base_commit: None,
            pull_request: None,
            error: None,
            created_at: now,
            updated_at: now,
            finished_at: None,
        };
        for (position, database) in (0u32..).zip(&new.databases) {
            tables.results.insert(
                (new.id, position),
                DatabaseResult {
                    operation: new.id,
                    database: database.clone(),
                    position,
                    started_at: None,
                    finished_at: None,
                    report: None,
                },
            );
        }
        tables.operations.push(operation.clone());
        tables.request_keys.insert(key, new.id);
        tables.audit.push(AuditEvent {
            operation: new.id,
            action: AuditAction::OperationRequested,
            actor: new.actor.clone(),
            at: now,
        });
        Ok(Reservation::Created(operation))
    }

    async fn operation_by_request(
        &self,
        actor: &UserId,
        key: &RequestKey,
    ) -> StoreResult<Option<Operation>> {
        let state = self.inner.state();
        let tables = &state.schema;
        Ok(tables
            .request_keys
            .get(&(actor.clone(), key.clone()))
            .and_then(|id| tables.operations.iter().find(|op| op.id == *id))
            .cloned())
    }

    async fn operation(&self, id: OperationId) -> StoreResult<Option<Operation>> {
        let state = self.inner.state();
        Ok(state
            .schema
            .operations
            .iter()
            .find(|op| op.id == id)
            .cloned())
    }

    async fn recent_operations(&self, limit: u32) -> StoreResult<Vec<Operation>> {
        let state = self.inner.state();
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        Ok(state
            .schema
            .operations
            .iter()
            .rev()
            .take(limit)
            .cloned()
            .collect())
    }

    async fn operation_counts(&self) -> StoreResult<Vec<OperationCount>> {
        let state = self.inner.state();
        // Keyed by the stored text, so the order is the SQL adapters' `ORDER BY kind, state`.
        let mut counts = BTreeMap::new();
        for op in &state.schema.operations {
            counts
                .entry((op.kind.as_str(), op.state.as_str()))
                .or_insert(OperationCount {
                    kind: op.kind,
                    state: op.state,
                    count: 0,
                })
                .count += 1;
        }
        Ok(counts.into_values().collect())
    }

    async fn transition(
        &self,
        id: OperationId,
        transition: &Transition,
    ) -> StoreResult<Option<Operation>> {
        self.inner.gate("transition")?;
        transition.check()?;
        let mut state = self.inner.state();
        let tables = &mut state.schema;
        let now = UnixMillis::now();
        let Some(operation) = tables
            .operation_mut(id)
            .filter(|op| op.state == transition.from)
        else {
            return Ok(None);
        };
        operation.state = transition.to;
        operation.updated_at = now;
        // A failure keeps an earlier error when it brings none; any other state carries only
        // its own (so a `start_unknown` that turns out to run loses `START_UNKNOWN`).
        if !transition.to.is_failure() || transition.error.is_some() {
            operation.error.clone_from(&transition.error);
        }
        if transition.to.is_terminal() {
            operation.finished_at = Some(now);
        }
        let operation = operation.clone();
        if transition.release_lease {
            tables.release_lease_of(id);
        }
        Ok(Some(operation))
    }

    async fn bind_run(&self, id: OperationId, run_id: &str) -> StoreResult<bool> {
        self.inner.gate("bind run")?;
        let mut state = self.inner.state();
        let tables = &mut state.schema;
        let Some(operation) = tables.operation_mut(id) else {
            return Ok(false);
        };
        match &operation.run_id {
            Some(bound) => return Ok(bound == run_id),
            None if operation.state.is_terminal() => return Ok(false),
            None => {
                operation.run_id = Some(run_id.to_owned());
                operation.updated_at = UnixMillis::now();
            }
        }
        if let Some(lease) = tables.lease.as_mut().filter(|lease| lease.operation == id) {
            lease.run_id = Some(run_id.to_owned());
        }
        Ok(true)
    }

    async fn record_reviewed_base(&self, id: OperationId, commit: &str) -> StoreResult<bool> {
        self.inner.gate("record reviewed base")?;
        let mut state = self.inner.state();
        let Some(operation) = state.schema.operation_mut(id) else {
            return Ok(false);
        };
        match &operation.reviewed_base_commit {
            Some(recorded) => Ok(recorded == commit),
            None if operation.state.is_terminal() => Ok(false),
            None => {
                operation.reviewed_base_commit = Some(commit.to_owned());
                operation.updated_at = UnixMillis::now();
                Ok(true)
            }
        }
    }

    async fn record_pull_request(&self, id: OperationId, pull: &PullRequest) -> StoreResult<bool> {
        self.inner.gate("record pull request")?;
        let mut state = self.inner.state();
        let Some(operation) = state.schema.operation_mut(id) else {
            return Ok(false);
        };
        match &operation.pull_request {
            Some(recorded) => Ok(recorded == pull),
            None if operation.state != OperationState::Publishing => Ok(false),
            None => {
                operation.pull_request = Some(pull.clone());
                operation.updated_at = UnixMillis::now();
                Ok(true)
            }
        }
    }

    async fn unsettled_pull_requests(&self) -> StoreResult<Vec<Operation>> {
        let state = self.inner.state();
        let tables = &state.schema;
        Ok(tables
            .operations
            .iter()
            .rev()
            .filter(|op| op.pull_request.is_some() && !tables.settled_pulls.contains(&op.id))
            .cloned()
            .collect())
    }

    async fn settle_pull_request(&self, id: OperationId) -> StoreResult<bool> {
        self.inner.gate("settle pull request")?;
        let mut state = self.inner.state();
        let tables = &mut state.schema;
        let published = tables
            .operations
            .iter()
            .any(|op| op.id == id && op.pull_request.is_some());
        if published {
            tables.settled_pulls.insert(id);
        }
        Ok(published)
    }

    async fn record_inventory(&self, new: &NewInventory) -> StoreResult<Inventory> {
        self.inner.gate("record inventory")?;
        new.check()?;
        let mut state = self.inner.state();
        let tables = &mut state.schema;
        if let Some(existing) = tables
            .inventories
            .iter()
            .find(|inv| inv.operation == new.operation)
        {
            return Ok(existing.clone());
        }
        if tables.inventories.iter().any(|inv| inv.id == new.id) {
            return Err(StoreError::conflict("the inventory ID is taken"));
        }
        if !tables.operations.iter().any(|op| op.id == new.operation) {
            return Err(StoreError::invalid(
                "the inventory's operation does not exist",
            ));
        }
        let now = UnixMillis::now();
        let inventory = Inventory {
            id: new.id,
            operation: new.operation,
            actor: new.actor.clone(),
            server_version: new.server_version.clone(),
            discovered_at: now,
            expires_at: now.plus(new.lifetime),
            databases: new.databases.clone(),
            ignored: new.ignored.clone(),
        };
        tables.inventories.push(inventory.clone());
        Ok(inventory)
    }

    async fn inventory(&self, id: InventoryId) -> StoreResult<Option<Inventory>> {
        let state = self.inner.state();
        Ok(state
            .schema
            .inventories
            .iter()
            .find(|inv| inv.id == id)
            .cloned())
    }

    async fn inventory_of_operation(&self, id: OperationId) -> StoreResult<Option<Inventory>> {
        let state = self.inner.state();
        Ok(state
            .schema
            .inventories
            .iter()
            .find(|inv| inv.operation == id)
            .cloned())
    }

    async fn latest_inventory(&self) -> StoreResult<Option<Inventory>> {
        let state = self.inner.state();
        Ok(state.schema.inventories.last().cloned())
    }

    async fn database_results(&self, id: OperationId) -> StoreResult<Vec<DatabaseResult>> {
        let state = self.inner.state();
        Ok(state
            .schema
            .results
            .range((id, 0)..=(id, u32::MAX))
            .map(|(_, row)| row.clone())
            .collect())
    }

    async fn begin_database(&self, id: OperationId, database: &DatabaseName) -> StoreResult<bool> {
        self.inner.gate("begin database")?;
        let mut state = self.inner.state();
        let row = state.schema.result_mut(id, database)?;
        if row.finished_at.is_some() {
            return Ok(false);
        }
        row.started_at.get_or_insert_with(UnixMillis::now);
        Ok(true)
    }

    async fn finish_database(
        &self,
        id: OperationId,
        database: &DatabaseName,
        report: &DatabaseReport,
    ) -> StoreResult<bool> {
        self.inner.gate("finish database")?;
        report.check()?;
        let mut state = self.inner.state();
        let row = state.schema.result_mut(id, database)?;
        if row.finished_at.is_some() {
            return Ok(false);
        }
        let now = UnixMillis::now();
        row.started_at.get_or_insert(now);
        row.finished_at = Some(now);
        row.report = Some(report.clone());
        Ok(true)
    }

    async fn database_history(
        &self,
        database: &DatabaseName,
        limit: u32,
    ) -> StoreResult<Vec<DatabaseCheck>> {
        let state = self.inner.state();
        let tables = &state.schema;
        let mut history = tables
            .results
            .values()
            .filter(|row| &row.database == database && row.finished_at.is_some())
            .map(|row| {
                let operation = tables
                    .operations
                    .iter()
                    .find(|op| op.id == row.operation)
                    .ok_or_else(|| StoreError::corrupt("a database result names no operation"))?;
                Ok(DatabaseCheck {
                    kind: operation.kind,
                    result: row.clone(),
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        history.sort_by(|a, b| {
            (b.result.finished_at, b.result.operation)
                .cmp(&(a.result.finished_at, a.result.operation))
        });
        history.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        Ok(history)
    }

    async fn step(&self, id: OperationId, key: &StepKey) -> StoreResult<Option<OperationStep>> {
        let state = self.inner.state();
        Ok(state.schema.steps.get(&(id, key.clone())).cloned())
    }

    async fn steps(&self, id: OperationId) -> StoreResult<Vec<OperationStep>> {
        let state = self.inner.state();
        let mut steps: Vec<_> = state
            .schema
            .steps
            .values()
            .filter(|step| step.operation == id)
            .cloned()
            .collect();
        steps.sort_by(|a, b| (a.started_at, &a.key).cmp(&(b.started_at, &b.key)));
        Ok(steps)
    }

    async fn record_step(
        &self,
        id: OperationId,
        key: &StepKey,
        progress: &StepProgress,
        lease_ttl: Option<Duration>,
    ) -> StoreResult<OperationStep> {
        self.inner.gate("record step")?;
        let mut state = self.inner.state();
        let tables = &mut state.schema;
        let now = UnixMillis::now();
        if !tables.operations.iter().any(|op| op.id == id) {
            return Err(StoreError::invalid("the step's operation does not exist"));
        }
        // The same order as the SQL adapters: the lease first, then the step.
        if lease_ttl.is_some() && tables.live_lease_of(id, now).is_none() {
            return Err(StoreError::fenced(
                "the operation no longer holds the schema lease",
            ));
        }
        let existing = tables.steps.get(&(id, key.clone()));
        if existing.is_some_and(|step| step.state.is_terminal()) {
            return Err(StoreError::conflict("the step is already terminal"));
        }
        if let (Some(ttl), Some(lease)) = (lease_ttl, tables.live_lease_of(id, now)) {
            beat(lease, now, ttl);
        }
        let mut step = tables
            .steps
            .get(&(id, key.clone()))
            .cloned()
            .unwrap_or(OperationStep {
                operation: id,
                key: key.clone(),
                state: StepState::Running,
                attempts: 0,
                started_at: now,
                heartbeat_at: now,
                error: None,
                terminal_at: None,
            });
        step.heartbeat_at = now;
        match progress {
            StepProgress::Attempt => step.attempts += 1,
            StepProgress::Retrying(error) => step.error = Some(error.clone()),
            StepProgress::Succeeded => {
                step.state = StepState::Succeeded;
                step.terminal_at = Some(now);
            }
            StepProgress::Failed(error) => {
                step.state = StepState::Failed;
                step.error = Some(error.clone());
                step.terminal_at = Some(now);
            }
        }
        tables.steps.insert((id, key.clone()), step.clone());
        Ok(step)
    }

    async fn schema_lease(&self) -> StoreResult<Option<SchemaLease>> {
        Ok(self.inner.state().schema.lease.clone())
    }

    async fn heartbeat_lease(&self, id: OperationId, ttl: Duration) -> StoreResult<bool> {
        self.inner.gate("heartbeat lease")?;
        let mut state = self.inner.state();
        let now = UnixMillis::now();
        Ok(match state.schema.live_lease_of(id, now) {
            Some(lease) => {
                beat(lease, now, ttl);
                true
            }
            None => false,
        })
    }

    async fn extend_lease_to(&self, id: OperationId, until: UnixMillis) -> StoreResult<bool> {
        self.inner.gate("extend lease to")?;
        let mut state = self.inner.state();
        let now = UnixMillis::now();
        Ok(match state.schema.live_lease_of(id, now) {
            Some(lease) => {
                lease.heartbeat_at = now;
                lease.expires_at = until.max(lease.expires_at);
                lease.status = SchemaLeaseStatus::AwaitingReview;
                true
            }
            None => false,
        })
    }

    async fn release_lease(&self, id: OperationId) -> StoreResult<bool> {
        self.inner.gate("release lease")?;
        Ok(self.inner.state().schema.release_lease_of(id))
    }

    async fn clear_lease(&self, clearing: &LeaseClearing) -> StoreResult<ClearOutcome> {
        self.inner.gate("clear lease")?;
        let mut state = self.inner.state();
        let tables = &mut state.schema;
        let now = UnixMillis::now();
        let id = clearing.operation;
        match &tables.lease {
            Some(lease) if lease.operation != id => return Ok(ClearOutcome::NotHeld),
            None => return Ok(ClearOutcome::NotHeld),
            Some(lease) if !lease.is_expired(now) => return Ok(ClearOutcome::Live(lease.clone())),
            Some(_) => {}
        }
        tables.audit.push(AuditEvent {
            operation: id,
            action: AuditAction::LeaseCleared,
            actor: clearing.actor.clone(),
            at: now,
        });
        let mut operation_failed = false;
        if let Some(operation) = tables
            .operation_mut(id)
            .filter(|op| !op.state.is_terminal())
        {
            operation.state = OperationState::Failed;
            operation.error = Some(SafeError::new(ErrorCode::LeaseCleared));
            operation.updated_at = now;
            operation.finished_at = Some(now);
            operation_failed = true;
        }
        tables.lease = None;
        Ok(ClearOutcome::Cleared { operation_failed })
    }

    async fn open_review(&self, id: OperationId, lifetime: Duration) -> StoreResult<Review> {
        self.inner.gate("open review")?;
        let mut state = self.inner.state();
        let tables = &mut state.schema;
        if !tables.operations.iter().any(|op| op.id == id) {
            return Err(StoreError::invalid("the review's operation does not exist"));
        }
        let now = UnixMillis::now();
        Ok(tables
            .reviews
            .entry(id)
            .or_insert_with(|| Review {
                operation: id,
                state: ReviewState::Pending,
                actor: None,
                decided_at: None,
                created_at: now,
                expires_at: now.plus(lifetime),
            })
            .clone())
    }

    async fn review(&self, id: OperationId) -> StoreResult<Option<Review>> {
        Ok(self.inner.state().schema.reviews.get(&id).cloned())
    }

    async fn decide_review(&self, id: OperationId, decision: &Decision) -> StoreResult<Decided> {
        self.inner.gate("decide review")?;
        let mut state = self.inner.state();
        let now = UnixMillis::now();
        let review = state
            .schema
            .reviews
            .get_mut(&id)
            .ok_or_else(|| StoreError::missing("the operation has no review"))?;
        let window_open = review.expires_at > now;
        let (to, actor) = match decision {
            Decision::Approve(actor) => (ReviewState::Approved, Some(actor.clone())),
            Decision::Reject(actor) => (ReviewState::Rejected, Some(actor.clone())),
            Decision::Expire => (ReviewState::Expired, None),
        };
        let allowed =
            review.state == ReviewState::Pending && (window_open != (to == ReviewState::Expired));
        if !allowed {
            return Ok(Decided::Refused(review.clone()));
        }
        review.state = to;
        review.actor = actor;
        review.decided_at = Some(now);
        Ok(Decided::Recorded(review.clone()))
    }

    async fn record_artifact(&self, new: &NewArtifact) -> StoreResult<Artifact> {
        self.inner.gate("record artifact")?;
        let mut state = self.inner.state();
        let tables = &mut state.schema;
        if let Some(existing) = tables.artifacts.get(&new.operation) {
            return if &existing.meta == new {
                Ok(existing.clone())
            } else {
                Err(StoreError::conflict(
                    "the operation already has a different artifact",
                ))
            };
        }
        if !tables.operations.iter().any(|op| op.id == new.operation) {
            return Err(StoreError::invalid(
                "the artifact's operation does not exist",
            ));
        }
        let artifact = Artifact {
            meta: new.clone(),
            state: ArtifactState::Stored,
            created_at: UnixMillis::now(),
            cleanup_result: None,
        };
        tables.artifacts.insert(new.operation, artifact.clone());
        Ok(artifact)
    }

    async fn artifact(&self, id: OperationId) -> StoreResult<Option<Artifact>> {
        Ok(self.inner.state().schema.artifacts.get(&id).cloned())
    }

    async fn move_artifact(
        &self,
        id: OperationId,
        from: ArtifactState,
        to: ArtifactState,
    ) -> StoreResult<bool> {
        self.inner.gate("move artifact")?;
        if !from.may_become(to) {
            return Err(StoreError::invalid("an artifact cannot make that move"));
        }
        let mut state = self.inner.state();
        Ok(match state.schema.artifacts.get_mut(&id) {
            Some(artifact) if artifact.state == from => {
                artifact.state = to;
                true
            }
            _ => false,
        })
    }

    async fn record_artifact_cleanup(
        &self,
        id: OperationId,
        result: CleanupResult,
    ) -> StoreResult<bool> {
        self.inner.gate("record artifact cleanup")?;
        let mut state = self.inner.state();
        Ok(match state.schema.artifacts.get_mut(&id) {
            Some(artifact) if artifact.cleanup_result.is_none() => {
                artifact.cleanup_result = Some(result);
                true
            }
            _ => false,
        })
    }

    async fn create_cleanup_grant(&self, new: &NewCleanupGrant) -> StoreResult<CleanupGrant> {
        self.inner.gate("create cleanup grant")?;
        new.check()?;
        let mut state = self.inner.state();
        let tables = &mut state.schema;
        if tables.grants.contains_key(&new.token_hash) {
            return Err(StoreError::conflict("the cleanup token is taken"));
        }
        if !tables.operations.iter().any(|op| op.id == new.operation) {
            return Err(StoreError::invalid("the grant's operation does not exist"));
        }
        let grant = CleanupGrant {
            operation: new.operation,
            actor: new.actor.clone(),
            expires_at: UnixMillis::now().plus(new.lifetime),
            used_at: None,
            allowed: new.allowed.clone(),
        };
        tables.grants.insert(new.token_hash, grant.clone());
        Ok(grant)
    }

    async fn consume_cleanup_grant(
        &self,
        token_hash: &SecretHash,
        kind: CleanupKind,
    ) -> StoreResult<Option<CleanupGrant>> {
        self.inner.gate("consume cleanup grant")?;
        let mut state = self.inner.state();
        let now = UnixMillis::now();
        Ok(match state.schema.grants.get_mut(token_hash) {
            Some(grant)
                if grant.used_at.is_none()
                    && grant.expires_at > now
                    && grant.allowed.contains(&kind) =>
            {
                grant.used_at = Some(now);
                Some(grant.clone())
            }
            _ => None,
        })
    }

    async fn audit_events(&self, id: OperationId) -> StoreResult<Vec<AuditEvent>> {
        let state = self.inner.state();
        Ok(state
            .schema
            .audit
            .iter()
            .filter(|event| event.operation == id)
            .cloned()
            .collect())
    }
}
