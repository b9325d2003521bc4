//! The SQL schema store: the nine schema tables and the audit trail. Every rule the port states
//! (terminal states, immutable rows, one decision, a grant used once, the lease taken with the
//! reservation) is a conditional statement here, and the migration's triggers refuse the same
//! changes from anywhere else.

mod fetch;
mod rows;
mod statements;

use std::time::Duration;

use async_trait::async_trait;
use fermata_store::schema::{
    Artifact, ArtifactState, AuditAction, AuditEvent, CleanupGrant, CleanupKind, CleanupResult,
    ClearOutcome, DatabaseCheck, DatabaseName, DatabaseReport, DatabaseResult, Decided, Decision,
    ErrorCode, Inventory, InventoryId, LeaseClearing, NewArtifact, NewCleanupGrant, NewInventory,
    NewOperation, Operation, OperationCount, OperationId, OperationStep, PullRequest, RequestKey,
    Reservation, Review, ReviewState, SafeError, SchemaLease, SchemaStore, StepKey, StepProgress,
    StepState, Transition,
};
use fermata_store::{SecretHash, StoreError, StoreResult, StoreResultExt, UnixMillis, UserId};

use crate::SqlStorage;
use crate::error::StoreContext;
use crate::row::{column, instant};
use crate::write_transaction::WriteTransaction;

use fetch::{AnyQuery, fetch_all, fetch_one, fetch_optional};
pub(crate) use statements::Statements;

/// A duration as the milliseconds added to a stored instant.
fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// How many times a reservation is tried when the lease it found vanished before it could read
/// it (released between the two statements).
const RESERVATION_TRIES: usize = 3;

impl SqlStorage {
    fn schema_sql(&self) -> &Statements {
        &self.inner.schema_sql
    }

    async fn commit(&self, tx: WriteTransaction, action: &str) -> StoreResult<()> {
        tx.commit().await.context(action)
    }

    /// The inventory whose header row `header` selects, if it selects one, with the databases a
    /// second query reads.
    async fn fetch_inventory(
        &self,
        header: AnyQuery<'_>,
        action: &str,
    ) -> StoreResult<Option<Inventory>> {
        let Some(header) = header
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?
        else {
            return Ok(None);
        };
        let id: String = column(&header, 0, action)?;
        let names = sqlx::query(&self.schema_sql().inventory_names)
            .bind(id)
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        rows::inventory(&header, &names, action).map(Some)
    }

    /// One try at a reservation: `None` when the lease was held but gone before it was read.
    async fn try_reserve(
        &self,
        new: &NewOperation,
        lease_ttl: Duration,
    ) -> StoreResult<Option<Reservation>> {
        let action = "reserving a schema operation";
        let sql = self.schema_sql();
        let mut tx = self.inner.begin_write(action).await?;
        let id = new.id.to_string();
        let inserted = sqlx::query(&sql.insert_operation)
            .bind(&id)
            .bind(new.kind.as_str())
            .bind(&new.actor.0)
            .bind(new.request_key.as_str())
            .bind(new.inventory.map(|inventory| inventory.to_string()))
            .bind(i64::from(new.remove_missing))
            .execute(&mut *tx)
            .await
            .context(action)?;
        if inserted.rows_affected() == 0 {
            let query = sqlx::query(&sql.operation_by_request)
                .bind(&new.actor.0)
                .bind(new.request_key.as_str());
            let existing = fetch_one(&mut *tx, query, action, rows::operation).await?;
            self.commit(tx, action).await?;
            return Ok(Some(Reservation::Existing(existing)));
        }
        for (position, database) in (0i64..).zip(&new.databases) {
            sqlx::query(&sql.insert_result)
                .bind(&id)
                .bind(database.as_str())
                .bind(position)
                .execute(&mut *tx)
                .await
                .context(action)?;
        }
        if new.kind.takes_lease() {
            let taken = sqlx::query(&sql.insert_lease)
                .bind(&id)
                .bind(new.kind.as_str())
                .bind(millis(lease_ttl))
                .execute(&mut *tx)
                .await
                .context(action)?;
            if taken.rows_affected() == 0 {
                tx.rollback().await.context(action)?;
                return Ok(self.schema_lease().await?.map(Reservation::LeaseHeld));
            }
        }
        sqlx::query(&sql.insert_audit)
            .bind(&id)
            .bind(AuditAction::OperationRequested.as_str())
            .bind(&new.actor.0)
            .execute(&mut *tx)
            .await
            .context(action)?;
        let query = sqlx::query(&sql.operation).bind(&id);
        let operation = fetch_one(&mut *tx, query, action, rows::operation).await?;
        self.commit(tx, action).await?;
        Ok(Some(Reservation::Created(operation)))
    }
}

#[async_trait]
impl SchemaStore for SqlStorage {
    async fn clock(&self) -> StoreResult<UnixMillis> {
        let action = "reading the database clock";
        let query = sqlx::query(&self.schema_sql().clock);
        fetch_one(&self.inner.pool, query, action, |row, action| {
            instant(row, 0, action)
        })
        .await
    }

    async fn reserve_operation(
        &self,
        new: &NewOperation,
        lease_ttl: Duration,
    ) -> StoreResult<Reservation> {
        new.check()?;
        for _ in 0..RESERVATION_TRIES {
            if let Some(reservation) = self.try_reserve(new, lease_ttl).await? {
                return Ok(reservation);
            }
        }
        Err(StoreError::unavailable(
            "the schema lease kept changing hands while reserving an operation",
        ))
    }

    async fn operation_by_request(
        &self,
        actor: &UserId,
        key: &RequestKey,
    ) -> StoreResult<Option<Operation>> {
        let action = "reading a schema operation by request key";
        let query = sqlx::query(&self.schema_sql().operation_by_request)
            .bind(&actor.0)
            .bind(key.as_str());
        fetch_optional(&self.inner.pool, query, action, rows::operation).await
    }

    async fn operation(&self, id: OperationId) -> StoreResult<Option<Operation>> {
        let action = "reading a schema operation";
        let query = sqlx::query(&self.schema_sql().operation).bind(id.to_string());
        fetch_optional(&self.inner.pool, query, action, rows::operation).await
    }

    async fn recent_operations(&self, limit: u32) -> StoreResult<Vec<Operation>> {
        let action = "listing schema operations";
        let query = sqlx::query(&self.schema_sql().recent_operations).bind(i64::from(limit));
        fetch_all(&self.inner.pool, query, action, rows::operation).await
    }

    async fn operation_counts(&self) -> StoreResult<Vec<OperationCount>> {
        let action = "counting schema operations";
        let query = sqlx::query(&self.schema_sql().operation_counts);
        fetch_all(&self.inner.pool, query, action, rows::operation_count).await
    }

    async fn transition(
        &self,
        id: OperationId,
        transition: &Transition,
    ) -> StoreResult<Option<Operation>> {
        transition.check()?;
        let action = "moving a schema operation to its next state";
        let sql = self.schema_sql();
        let mut tx = self.inner.begin_write(action).await?;
        let query = sqlx::query(&sql.transition)
            .bind(id.to_string())
            .bind(transition.from.as_str())
            .bind(transition.to.as_str())
            .bind(rows::error_text(transition.error.as_ref()));
        let Some(operation) = fetch_optional(&mut *tx, query, action, rows::operation).await?
        else {
            tx.rollback().await.context(action)?;
            return Ok(None);
        };
        if transition.release_lease {
            sqlx::query(&sql.release_lease)
                .bind(id.to_string())
                .execute(&mut *tx)
                .await
                .context(action)?;
        }
        self.commit(tx, action).await?;
        Ok(Some(operation))
    }

    async fn bind_run(&self, id: OperationId, run_id: &str) -> StoreResult<bool> {
        let action = "binding a workflow run to a schema operation";
        let sql = self.schema_sql();
        let mut tx = self.inner.begin_write(action).await?;
        let bound = sqlx::query(&sql.bind_run)
            .bind(id.to_string())
            .bind(run_id)
            .execute(&mut *tx)
            .await
            .context(action)?;
        if bound.rows_affected() == 1 {
            sqlx::query(&sql.bind_lease_run)
                .bind(id.to_string())
                .bind(run_id)
                .execute(&mut *tx)
                .await
                .context(action)?;
            self.commit(tx, action).await?;
            return Ok(true);
        }
        let current: Option<Option<String>> = sqlx::query_scalar(&sql.bound_run)
            .bind(id.to_string())
            .fetch_optional(&mut *tx)
            .await
            .context(action)?;
        self.commit(tx, action).await?;
        Ok(current.flatten().as_deref() == Some(run_id))
    }

    async fn record_reviewed_base(&self, id: OperationId, commit: &str) -> StoreResult<bool> {
        let action = "recording a refresh's reviewed base commit";
        let sql = self.schema_sql();
        let mut tx = self.inner.begin_write(action).await?;
        let recorded = sqlx::query(&sql.record_reviewed_base)
            .bind(id.to_string())
            .bind(commit)
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        if recorded.rows_affected() == 1 {
            return Ok(true);
        }
        let current: Option<Option<String>> = sqlx::query_scalar(&sql.reviewed_base)
            .bind(id.to_string())
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?;
        Ok(current.flatten().as_deref() == Some(commit))
    }

    async fn record_pull_request(&self, id: OperationId, pull: &PullRequest) -> StoreResult<bool> {
        let action = "recording a published pull request";
        let sql = self.schema_sql();
        let json =
            serde_json::to_string(pull).or_invalid("pull-request data does not serialize")?;
        let mut tx = self.inner.begin_write(action).await?;
        let recorded = sqlx::query(&sql.record_pull_request)
            .bind(id.to_string())
            .bind(&json)
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        if recorded.rows_affected() == 1 {
            return Ok(true);
        }
        let current: Option<Option<String>> = sqlx::query_scalar(&sql.pull_request)
            .bind(id.to_string())
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?;
        let current = current
            .flatten()
            .map(|text| serde_json::from_str::<PullRequest>(&text))
            .transpose()
            .or_corrupt("stored pull-request data does not parse")?;
        Ok(current.as_ref() == Some(pull))
    }

    async fn unsettled_pull_requests(&self) -> StoreResult<Vec<Operation>> {
        let query = sqlx::query(&self.schema_sql().unsettled_pull_requests);
        let action = "listing published pull requests not known to be settled";
        fetch_all(&self.inner.pool, query, action, rows::operation).await
    }

    async fn settle_pull_request(&self, id: OperationId) -> StoreResult<bool> {
        let action = "recording a settled pull request";
        let sql = self.schema_sql();
        let mut tx = self.inner.begin_write(action).await?;
        sqlx::query(&sql.settle_pull_request)
            .bind(id.to_string())
            .execute(&mut *tx)
            .await
            .context(action)?;
        let published: i64 = sqlx::query_scalar(&sql.published)
            .bind(id.to_string())
            .fetch_one(&mut *tx)
            .await
            .context(action)?;
        self.commit(tx, action).await?;
        Ok(published == 1)
    }

    async fn record_inventory(&self, new: &NewInventory) -> StoreResult<Inventory> {
        new.check()?;
        let action = "recording an inventory";
        let sql = self.schema_sql();
        let mut tx = self.inner.begin_write(action).await?;
        let id = new.id.to_string();
        let inserted = sqlx::query(&sql.insert_inventory)
            .bind(&id)
            .bind(new.operation.to_string())
            .bind(&new.actor.0)
            .bind(&new.server_version)
            .bind(millis(new.lifetime))
            .bind(rows::ignored_json(&new.ignored)?)
            .execute(&mut *tx)
            .await
            .context(action)?;
        if inserted.rows_affected() == 1 {
            for (position, database) in (0i64..).zip(&new.databases) {
                sqlx::query(&sql.insert_inventory_database)
                    .bind(&id)
                    .bind(database.as_str())
                    .bind(position)
                    .execute(&mut *tx)
                    .await
                    .context(action)?;
            }
        }
        self.commit(tx, action).await?;
        self.inventory_of_operation(new.operation)
            .await?
            .ok_or_else(|| StoreError::unavailable("the recorded inventory vanished"))
    }

    async fn inventory(&self, id: InventoryId) -> StoreResult<Option<Inventory>> {
        let header = sqlx::query(&self.schema_sql().inventory).bind(id.to_string());
        self.fetch_inventory(header, "reading an inventory").await
    }

    async fn inventory_of_operation(&self, id: OperationId) -> StoreResult<Option<Inventory>> {
        let header = sqlx::query(&self.schema_sql().inventory_of_operation).bind(id.to_string());
        self.fetch_inventory(header, "reading an operation's inventory")
            .await
    }

    async fn latest_inventory(&self) -> StoreResult<Option<Inventory>> {
        let header = sqlx::query(&self.schema_sql().latest_inventory);
        self.fetch_inventory(header, "reading the latest inventory")
            .await
    }

    async fn database_results(&self, id: OperationId) -> StoreResult<Vec<DatabaseResult>> {
        let action = "reading database results";
        let query = sqlx::query(&self.schema_sql().results).bind(id.to_string());
        fetch_all(&self.inner.pool, query, action, rows::database_result).await
    }

    async fn begin_database(&self, id: OperationId, database: &DatabaseName) -> StoreResult<bool> {
        let action = "starting a database's work";
        let mut tx = self.inner.begin_write(action).await?;
        let done = sqlx::query(&self.schema_sql().begin_database)
            .bind(id.to_string())
            .bind(database.as_str())
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        if done.rows_affected() == 1 {
            return Ok(true);
        }
        self.require_result(id, database, action).await?;
        Ok(false)
    }

    async fn finish_database(
        &self,
        id: OperationId,
        database: &DatabaseName,
        report: &DatabaseReport,
    ) -> StoreResult<bool> {
        report.check()?;
        let action = "recording a database result";
        let mut tx = self.inner.begin_write(action).await?;
        let done = sqlx::query(&self.schema_sql().finish_database)
            .bind(id.to_string())
            .bind(database.as_str())
            .bind(report.outcome.as_str())
            .bind(report.freshness.as_str())
            .bind(rows::counts_text(report))
            .bind(report.snapshot_hash.clone())
            .bind(report.merged_hash.clone())
            .bind(rows::error_text(report.error.as_ref()))
            .bind(rows::differences_text(report))
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        if done.rows_affected() == 1 {
            return Ok(true);
        }
        self.require_result(id, database, action).await?;
        Ok(false)
    }

    async fn database_history(
        &self,
        database: &DatabaseName,
        limit: u32,
    ) -> StoreResult<Vec<DatabaseCheck>> {
        let action = "reading a database's history";
        let query = sqlx::query(&self.schema_sql().database_history)
            .bind(database.as_str())
            .bind(i64::from(limit));
        fetch_all(&self.inner.pool, query, action, rows::database_check).await
    }

    async fn step(&self, id: OperationId, key: &StepKey) -> StoreResult<Option<OperationStep>> {
        let action = "reading a step";
        let query = sqlx::query(&self.schema_sql().step)
            .bind(id.to_string())
            .bind(key.as_str());
        fetch_optional(&self.inner.pool, query, action, rows::step).await
    }

    async fn steps(&self, id: OperationId) -> StoreResult<Vec<OperationStep>> {
        let query = sqlx::query(&self.schema_sql().steps).bind(id.to_string());
        fetch_all(&self.inner.pool, query, "reading steps", rows::step).await
    }

    async fn record_step(
        &self,
        id: OperationId,
        key: &StepKey,
        progress: &StepProgress,
        lease_ttl: Option<Duration>,
    ) -> StoreResult<OperationStep> {
        let action = "recording a step";
        let sql = self.schema_sql();
        let mut tx = self.inner.begin_write(action).await?;
        if let Some(ttl) = lease_ttl {
            let beat = sqlx::query(&sql.heartbeat_lease)
                .bind(id.to_string())
                .bind(millis(ttl))
                .execute(&mut *tx)
                .await
                .context(action)?;
            if beat.rows_affected() == 0 {
                tx.rollback().await.context(action)?;
                return Err(StoreError::fenced(
                    "the operation no longer holds the schema lease",
                ));
            }
        }
        let (state, attempts, error) = match progress {
            StepProgress::Attempt => (StepState::Running, 1i64, None),
            StepProgress::Retrying(error) => (StepState::Running, 0, Some(error)),
            StepProgress::Succeeded => (StepState::Succeeded, 0, None),
            StepProgress::Failed(error) => (StepState::Failed, 0, Some(error)),
        };
        let query = sqlx::query(&sql.upsert_step)
            .bind(id.to_string())
            .bind(key.as_str())
            .bind(state.as_str())
            .bind(attempts)
            .bind(rows::error_text(error));
        let Some(step) = fetch_optional(&mut *tx, query, action, rows::step).await? else {
            tx.rollback().await.context(action)?;
            return Err(StoreError::conflict("the step is already terminal"));
        };
        self.commit(tx, action).await?;
        Ok(step)
    }

    async fn schema_lease(&self) -> StoreResult<Option<SchemaLease>> {
        let action = "reading the schema lease";
        let query = sqlx::query(&self.schema_sql().lease);
        fetch_optional(&self.inner.pool, query, action, rows::lease).await
    }

    async fn heartbeat_lease(&self, id: OperationId, ttl: Duration) -> StoreResult<bool> {
        let action = "heartbeating the schema lease";
        let mut tx = self.inner.begin_write(action).await?;
        let done = sqlx::query(&self.schema_sql().heartbeat_lease)
            .bind(id.to_string())
            .bind(millis(ttl))
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        Ok(done.rows_affected() == 1)
    }

    async fn extend_lease_to(&self, id: OperationId, until: UnixMillis) -> StoreResult<bool> {
        let action = "extending the schema lease";
        let mut tx = self.inner.begin_write(action).await?;
        let done = sqlx::query(&self.schema_sql().extend_lease)
            .bind(id.to_string())
            .bind(until.0)
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        Ok(done.rows_affected() == 1)
    }

    async fn release_lease(&self, id: OperationId) -> StoreResult<bool> {
        let action = "releasing the schema lease";
        let mut tx = self.inner.begin_write(action).await?;
        let done = sqlx::query(&self.schema_sql().release_lease)
            .bind(id.to_string())
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        Ok(done.rows_affected() == 1)
    }

    async fn clear_lease(&self, clearing: &LeaseClearing) -> StoreResult<ClearOutcome> {
        let action = "clearing the schema lease";
        let sql = self.schema_sql();
        let id = clearing.operation.to_string();
        let mut tx = self.inner.begin_write(action).await?;
        // The operation row before the lease row, in the order every other writer takes them.
        sqlx::query(&sql.lock_operation)
            .bind(&id)
            .fetch_optional(&mut *tx)
            .await
            .context(action)?;
        let query = sqlx::query(&sql.lease_for_clearing);
        let lease = fetch_optional(&mut *tx, query, action, |row, action| {
            Ok((rows::lease(row, action)?, instant(row, 7, action)?))
        })
        .await?;
        let outcome = match lease {
            Some((lease, _)) if lease.operation != clearing.operation => ClearOutcome::NotHeld,
            None => ClearOutcome::NotHeld,
            Some((lease, now)) if !lease.is_expired(now) => ClearOutcome::Live(lease),
            Some(_) => {
                sqlx::query(&sql.insert_audit)
                    .bind(&id)
                    .bind(AuditAction::LeaseCleared.as_str())
                    .bind(&clearing.actor.0)
                    .execute(&mut *tx)
                    .await
                    .context(action)?;
                let failed = sqlx::query(&sql.fail_cleared)
                    .bind(&id)
                    .bind(SafeError::new(ErrorCode::LeaseCleared).to_json())
                    .execute(&mut *tx)
                    .await
                    .context(action)?;
                let removed = sqlx::query(&sql.clear_lease)
                    .bind(&id)
                    .execute(&mut *tx)
                    .await
                    .context(action)?;
                if removed.rows_affected() != 1 {
                    tx.rollback().await.context(action)?;
                    return Err(StoreError::conflict(
                        "the schema lease changed while clearing it",
                    ));
                }
                ClearOutcome::Cleared {
                    operation_failed: failed.rows_affected() == 1,
                }
            }
        };
        self.commit(tx, action).await?;
        Ok(outcome)
    }

    async fn open_review(&self, id: OperationId, lifetime: Duration) -> StoreResult<Review> {
        let action = "opening a review";
        let mut tx = self.inner.begin_write(action).await?;
        sqlx::query(&self.schema_sql().open_review)
            .bind(id.to_string())
            .bind(millis(lifetime))
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        self.review(id)
            .await?
            .ok_or_else(|| StoreError::unavailable("the opened review vanished"))
    }

    async fn review(&self, id: OperationId) -> StoreResult<Option<Review>> {
        let query = sqlx::query(&self.schema_sql().review).bind(id.to_string());
        fetch_optional(&self.inner.pool, query, "reading a review", rows::review).await
    }

    async fn decide_review(&self, id: OperationId, decision: &Decision) -> StoreResult<Decided> {
        let action = "deciding a review";
        let (state, actor) = match decision {
            Decision::Approve(actor) => (ReviewState::Approved, Some(actor.0.clone())),
            Decision::Reject(actor) => (ReviewState::Rejected, Some(actor.0.clone())),
            Decision::Expire => (ReviewState::Expired, None),
        };
        let mut tx = self.inner.begin_write(action).await?;
        let query = sqlx::query(&self.schema_sql().decide_review)
            .bind(id.to_string())
            .bind(state.as_str())
            .bind(actor);
        let decided = fetch_optional(&mut *tx, query, action, rows::review).await?;
        tx.commit().await.context(action)?;
        if let Some(review) = decided {
            return Ok(Decided::Recorded(review));
        }
        self.review(id)
            .await?
            .map(Decided::Refused)
            .ok_or_else(|| StoreError::missing("the operation has no review"))
    }

    async fn record_artifact(&self, new: &NewArtifact) -> StoreResult<Artifact> {
        let action = "recording an artifact";
        let mut tx = self.inner.begin_write(action).await?;
        sqlx::query(&self.schema_sql().insert_artifact)
            .bind(new.operation.to_string())
            .bind(&new.blob_locator)
            .bind(i64::from(new.key_version))
            .bind(new.iv.clone())
            .bind(new.auth_tag.clone())
            .bind(&new.ciphertext_hash)
            .bind(&new.manifest)
            .bind(new.decision_expires_at.0)
            .bind(&new.cleanup_target)
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        let artifact = self
            .artifact(new.operation)
            .await?
            .ok_or_else(|| StoreError::unavailable("the recorded artifact vanished"))?;
        if &artifact.meta != new {
            return Err(StoreError::conflict(
                "the operation already has a different artifact",
            ));
        }
        Ok(artifact)
    }

    async fn artifact(&self, id: OperationId) -> StoreResult<Option<Artifact>> {
        let action = "reading an artifact";
        let query = sqlx::query(&self.schema_sql().artifact).bind(id.to_string());
        fetch_optional(&self.inner.pool, query, action, rows::artifact).await
    }

    async fn move_artifact(
        &self,
        id: OperationId,
        from: ArtifactState,
        to: ArtifactState,
    ) -> StoreResult<bool> {
        if !from.may_become(to) {
            return Err(StoreError::invalid("an artifact cannot make that move"));
        }
        let action = "moving an artifact";
        let mut tx = self.inner.begin_write(action).await?;
        let done = sqlx::query(&self.schema_sql().move_artifact)
            .bind(id.to_string())
            .bind(from.as_str())
            .bind(to.as_str())
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        Ok(done.rows_affected() == 1)
    }

    async fn record_artifact_cleanup(
        &self,
        id: OperationId,
        result: CleanupResult,
    ) -> StoreResult<bool> {
        let action = "recording an artifact cleanup";
        let mut tx = self.inner.begin_write(action).await?;
        let done = sqlx::query(&self.schema_sql().artifact_cleanup)
            .bind(id.to_string())
            .bind(result.as_str())
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        Ok(done.rows_affected() == 1)
    }

    async fn create_cleanup_grant(&self, new: &NewCleanupGrant) -> StoreResult<CleanupGrant> {
        new.check()?;
        let action = "creating a cleanup grant";
        let mut tx = self.inner.begin_write(action).await?;
        let query = sqlx::query(&self.schema_sql().insert_grant)
            .bind(new.token_hash.0.to_vec())
            .bind(new.operation.to_string())
            .bind(&new.actor.0)
            .bind(millis(new.lifetime))
            .bind(rows::allowed_text(&new.allowed));
        let grant = fetch_one(&mut *tx, query, action, rows::grant).await?;
        tx.commit().await.context(action)?;
        Ok(grant)
    }

    async fn consume_cleanup_grant(
        &self,
        token_hash: &SecretHash,
        kind: CleanupKind,
    ) -> StoreResult<Option<CleanupGrant>> {
        let action = "consuming a cleanup grant";
        let mut tx = self.inner.begin_write(action).await?;
        let query = sqlx::query(&self.schema_sql().consume_grant)
            .bind(token_hash.0.to_vec())
            .bind(format!("%,{},%", kind.as_str()));
        let grant = fetch_optional(&mut *tx, query, action, rows::grant).await?;
        tx.commit().await.context(action)?;
        Ok(grant)
    }

    async fn audit_events(&self, id: OperationId) -> StoreResult<Vec<AuditEvent>> {
        let action = "reading audit events";
        let query = sqlx::query(&self.schema_sql().audit_events).bind(id.to_string());
        fetch_all(&self.inner.pool, query, action, rows::audit_event).await
    }
}

impl SqlStorage {
    /// Fails with `Missing` when the database is not in the operation's selection.
    async fn require_result(
        &self,
        id: OperationId,
        database: &DatabaseName,
        action: &str,
    ) -> StoreResult<()> {
        let count: i64 = sqlx::query_scalar(&self.schema_sql().result_exists)
            .bind(id.to_string())
            .bind(database.as_str())
            .fetch_one(&self.inner.pool)
            .await
            .context(action)?;
        if count == 0 {
            return Err(StoreError::missing(
                "the database is not in the operation's selection",
            ));
        }
        Ok(())
    }
}
