//! The SQL workflow store: the run queue, claims, the step journal, hooks and retention.
//!
//! Claims go through the claim machinery of `claim.rs`, which the job store shares. Every write made under a claim begins with one conditional UPDATE
//! of the run row (`WHERE claim_generation = $2 AND state = 'running'`) that also takes the row's
//! lock, so a claim taken over since is refused before anything is written, and a takeover waits
//! for a write in flight. Step and hook rows change only through conditional statements, so a
//! terminal step or a delivered hook cannot be overwritten. Instants come from the database's
//! clock.

use std::time::Duration;

use async_trait::async_trait;
use fermata_store::claim::{millis, ttl_millis};
use fermata_store::workflow::check_step_update;
use fermata_store::{
    Claim, ClaimGeneration, ClaimedRun, Hook, HookDelivery, HookWait, JournaledError, NewRun, Run,
    RunClaim, RunId, RunState, StepRecord, StepState, StepUpdate, StoreError, StoreResult,
    StoreResultExt, UnixMillis, WorkflowStore,
};
use sqlx::any::{AnyArguments, AnyRow};
use sqlx::query::Query;
use sqlx::{Any, AnyConnection};

use crate::SqlStorage;
use crate::claim::{ClaimStatements, HELD};
use crate::dialect::Dialect;
use crate::error::StoreContext;
use crate::row::{column, instant, optional_instant};

/// The workflow statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    insert_run: String,
    run: String,
    claim: ClaimStatements,
    touch: String,
    heartbeat: String,
    heartbeat_steps: String,
    suspend: String,
    release: String,
    finish: String,
    cancel: String,
    purge: String,
    step: String,
    insert_step: String,
    next_attempt: String,
    attempt_failed: String,
    step_succeeded: String,
    step_failed: String,
    lock_run_state: String,
    wake_for_hook: String,
    hook_row: String,
    insert_wait: String,
    time_out_wait: String,
    deliver: String,
}

const RUN_COLUMNS: &str = "id, workflow, input, state, claim_generation, claim_worker, ready_at, \
                           created_at, updated_at, finished_at, output, error";
const STEP_COLUMNS: &str =
    "run_id, step_key, state, attempts, output, error, started_at, heartbeat_at, terminal_at";

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        let held_update = |set: &str| {
            dialect.render(&format!(
                "WITH clock AS (SELECT {{now}} AS now) \
                 UPDATE workflow_runs SET {set}, updated_at = clock.now \
                 FROM clock WHERE {HELD} RETURNING {RUN_COLUMNS}"
            ))
        };
        let step_update = |set: &str| {
            dialect.render(&format!(
                "UPDATE workflow_steps SET {set} \
                 WHERE run_id = $1 AND step_key = $2 AND state = 'running'"
            ))
        };
        Statements {
            insert_run: dialect.render(&format!(
                "WITH clock AS (SELECT {{now}} AS now) \
                 INSERT INTO workflow_runs (id, workflow, input, state, claim_generation, \
                     ready_at, created_at, updated_at) \
                 SELECT $1, $2, $3, 'pending', 0, clock.now, clock.now, clock.now FROM clock \
                 RETURNING {RUN_COLUMNS}"
            )),
            run: dialect.render(&format!(
                "SELECT {RUN_COLUMNS} FROM workflow_runs WHERE id = $1"
            )),
            claim: ClaimStatements::new(
                dialect,
                "workflow_runs",
                "workflow",
                "hook_arrived_at = NULL",
                RUN_COLUMNS,
            ),
            touch: dialect.render(&format!(
                "WITH clock AS (SELECT {{now}} AS now) \
                 UPDATE workflow_runs SET updated_at = clock.now \
                 FROM clock WHERE {HELD} RETURNING updated_at"
            )),
            heartbeat: held_update("ready_at = clock.now + $3"),
            heartbeat_steps: dialect.render(
                "UPDATE workflow_steps SET heartbeat_at = $2 \
                 WHERE run_id = $1 AND state = 'running'",
            ),
            // `$3` is the delay in milliseconds, NULL to wait for a hook only.
            suspend: held_update(
                "state = 'waiting', claim_worker = NULL, hook_arrived_at = NULL, \
                 ready_at = CASE WHEN hook_arrived_at IS NOT NULL THEN clock.now \
                                 ELSE clock.now + $3 END",
            ),
            release: held_update(
                "state = 'waiting', claim_worker = NULL, hook_arrived_at = NULL, \
                 ready_at = clock.now",
            ),
            finish: held_update(
                "state = $3, output = $4, error = $5, claim_worker = NULL, \
                 hook_arrived_at = NULL, ready_at = NULL, finished_at = clock.now",
            ),
            cancel: dialect.render(
                "WITH clock AS (SELECT {now} AS now) \
                 UPDATE workflow_runs SET state = 'cancelled', claim_worker = NULL, \
                     hook_arrived_at = NULL, ready_at = NULL, finished_at = clock.now, \
                     updated_at = clock.now \
                 FROM clock WHERE id = $1 AND state IN ('pending', 'running', 'waiting')",
            ),
            purge: dialect.render("DELETE FROM workflow_runs WHERE finished_at < {now} - $1"),
            step: dialect.render(&format!(
                "SELECT {STEP_COLUMNS} FROM workflow_steps WHERE run_id = $1 AND step_key = $2"
            )),
            insert_step: dialect.render(
                "INSERT INTO workflow_steps (run_id, step_key, state, attempts, started_at, \
                     heartbeat_at) \
                 VALUES ($1, $2, 'running', 1, $3, $3)",
            ),
            next_attempt: dialect.render(
                "UPDATE workflow_steps SET attempts = $3, heartbeat_at = $4 \
                 WHERE run_id = $1 AND step_key = $2 AND state = 'running' \
                     AND attempts = $3 - 1",
            ),
            attempt_failed: step_update("error = $3, heartbeat_at = $4"),
            step_succeeded: step_update(
                "state = 'succeeded', output = $3, error = NULL, heartbeat_at = $4, \
                 terminal_at = $4",
            ),
            step_failed: step_update(
                "state = 'failed', error = $3, heartbeat_at = $4, terminal_at = $4",
            ),
            lock_run_state: dialect
                .render("SELECT state FROM workflow_runs WHERE id = $1{for_no_key_update}"),
            wake_for_hook: dialect.render(
                "WITH clock AS (SELECT {now} AS now) \
                 UPDATE workflow_runs SET \
                     ready_at = CASE WHEN state = 'waiting' \
                                          AND (ready_at IS NULL OR ready_at > clock.now) \
                                     THEN clock.now ELSE ready_at END, \
                     hook_arrived_at = CASE WHEN state = 'running' THEN clock.now \
                                            ELSE hook_arrived_at END, \
                     updated_at = clock.now \
                 FROM clock WHERE id = $1 RETURNING updated_at",
            ),
            hook_row: dialect.render(
                "SELECT deadline_at, timed_out_at, idempotency_key, payload, delivered_at \
                 FROM workflow_hooks WHERE run_id = $1 AND hook_key = $2",
            ),
            insert_wait: dialect.render(
                "INSERT INTO workflow_hooks (run_id, hook_key, deadline_at) VALUES ($1, $2, $3)",
            ),
            time_out_wait: dialect.render(
                "UPDATE workflow_hooks SET timed_out_at = $3 \
                 WHERE run_id = $1 AND hook_key = $2 AND delivered_at IS NULL",
            ),
            deliver: dialect.render(
                "INSERT INTO workflow_hooks (run_id, hook_key, idempotency_key, payload, \
                     delivered_at) \
                 VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (run_id, hook_key) DO UPDATE SET \
                     idempotency_key = excluded.idempotency_key, payload = excluded.payload, \
                     delivered_at = excluded.delivered_at \
                 WHERE workflow_hooks.delivered_at IS NULL \
                     AND workflow_hooks.timed_out_at IS NULL",
            ),
        }
    }
}

fn fenced(claim: &Claim) -> StoreError {
    StoreError::fenced(format!(
        "run {} is no longer held under claim generation {}",
        claim.run, claim.generation
    ))
}

fn journaled_error(text: Option<String>) -> StoreResult<Option<JournaledError>> {
    text.map(|text| JournaledError::from_json(&text))
        .transpose()
}

fn run_from(row: &AnyRow, action: &str) -> StoreResult<Run> {
    let state = RunState::parse(&column::<String>(row, 3, action)?)
        .ok_or_else(|| StoreError::corrupt("a workflow run has an unknown state"))?;
    let generation = ClaimGeneration(column(row, 4, action)?);
    let worker: Option<String> = column(row, 5, action)?;
    let ready_at = optional_instant(row, 6, action)?;
    let claim = match (state, worker, ready_at) {
        (RunState::Running, Some(worker), Some(expires_at)) => Some(RunClaim {
            worker,
            generation,
            expires_at,
        }),
        (RunState::Running, _, _) => {
            return Err(StoreError::corrupt("a running workflow run has no claim"));
        }
        _ => None,
    };
    Ok(Run {
        id: RunId(column(row, 0, action)?),
        workflow: column(row, 1, action)?,
        input: column(row, 2, action)?,
        state,
        claim,
        wake_at: ready_at.filter(|_| state == RunState::Waiting),
        created_at: instant(row, 7, action)?,
        updated_at: instant(row, 8, action)?,
        finished_at: optional_instant(row, 9, action)?,
        output: column(row, 10, action)?,
        error: journaled_error(column(row, 11, action)?)?,
    })
}

/// The claim a freshly claimed or heartbeated run is under.
fn claim_of(run: &Run) -> StoreResult<Claim> {
    let held = run
        .claim
        .as_ref()
        .ok_or_else(|| StoreError::corrupt("a claimed workflow run has no claim"))?;
    Ok(Claim {
        run: run.id.clone(),
        worker: held.worker.clone(),
        generation: held.generation,
        expires_at: held.expires_at,
    })
}

fn step_from(row: &AnyRow, action: &str) -> StoreResult<StepRecord> {
    let state = StepState::parse(&column::<String>(row, 2, action)?)
        .ok_or_else(|| StoreError::corrupt("a workflow step has an unknown state"))?;
    let attempts = u32::try_from(column::<i64>(row, 3, action)?)
        .or_corrupt("a workflow step has an impossible attempt count")?;
    Ok(StepRecord {
        run: RunId(column(row, 0, action)?),
        key: column(row, 1, action)?,
        state,
        attempts,
        output: column(row, 4, action)?,
        error: journaled_error(column(row, 5, action)?)?,
        started_at: instant(row, 6, action)?,
        heartbeat_at: instant(row, 7, action)?,
        terminal_at: optional_instant(row, 8, action)?,
    })
}

/// A hook row: its wait and its delivery.
struct HookRow {
    deadline_at: Option<UnixMillis>,
    timed_out: bool,
    delivered: Option<Hook>,
}

fn hook_from(run: &RunId, key: &str, row: &AnyRow, action: &str) -> StoreResult<HookRow> {
    let delivered = match optional_instant(row, 4, action)? {
        None => None,
        Some(delivered_at) => Some(Hook {
            run: run.clone(),
            key: key.to_owned(),
            idempotency_key: column(row, 2, action)?,
            payload: column(row, 3, action)?,
            delivered_at,
        }),
    };
    Ok(HookRow {
        deadline_at: optional_instant(row, 0, action)?,
        timed_out: optional_instant(row, 1, action)?.is_some(),
        delivered,
    })
}

impl SqlStorage {
    /// The guard of every write under a claim: marks the run updated and holds its row lock, or
    /// fails with `Fenced`. Returns the database's clock.
    async fn touch(
        &self,
        conn: &mut AnyConnection,
        claim: &Claim,
        action: &str,
    ) -> StoreResult<UnixMillis> {
        let now: Option<i64> = sqlx::query_scalar(&self.inner.workflow_sql.touch)
            .bind(&claim.run.0)
            .bind(claim.generation.0)
            .fetch_optional(conn)
            .await
            .context(action)?;
        now.map(UnixMillis).ok_or_else(|| fenced(claim))
    }

    async fn step_on(
        &self,
        conn: &mut AnyConnection,
        run: &RunId,
        key: &str,
        action: &str,
    ) -> StoreResult<Option<StepRecord>> {
        let row = sqlx::query(&self.inner.workflow_sql.step)
            .bind(&run.0)
            .bind(key)
            .fetch_optional(conn)
            .await
            .context(action)?;
        row.map(|row| step_from(&row, action)).transpose()
    }

    async fn hook_on(
        &self,
        conn: &mut AnyConnection,
        run: &RunId,
        key: &str,
        action: &str,
    ) -> StoreResult<Option<HookRow>> {
        let row = sqlx::query(&self.inner.workflow_sql.hook_row)
            .bind(&run.0)
            .bind(key)
            .fetch_optional(conn)
            .await
            .context(action)?;
        row.map(|row| hook_from(run, key, &row, action)).transpose()
    }

    /// Runs one of the claim-ending updates (`suspend`, `release`, `finish`), already bound.
    async fn end_claim<'q>(
        &self,
        query: Query<'q, Any, AnyArguments<'q>>,
        claim: &Claim,
        action: &str,
    ) -> StoreResult<Run> {
        let mut tx = self.inner.begin_write(action).await?;
        let row = query.fetch_optional(&mut *tx).await.context(action)?;
        tx.commit().await.context(action)?;
        match row {
            Some(row) => run_from(&row, action),
            None => Err(fenced(claim)),
        }
    }
}

#[async_trait]
impl WorkflowStore for SqlStorage {
    async fn create_run(&self, new: &NewRun) -> StoreResult<Run> {
        let action = "creating a workflow run";
        let mut tx = self.inner.begin_write(action).await?;
        let row = sqlx::query(&self.inner.workflow_sql.insert_run)
            .bind(&new.id.0)
            .bind(&new.workflow)
            .bind(&new.input)
            .fetch_one(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        run_from(&row, action)
    }

    async fn run(&self, id: &RunId) -> StoreResult<Option<Run>> {
        let action = "reading a workflow run";
        let row = sqlx::query(&self.inner.workflow_sql.run)
            .bind(&id.0)
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?;
        row.map(|row| run_from(&row, action)).transpose()
    }

    async fn claim_run(
        &self,
        worker: &str,
        workflows: &[String],
        ttl: Duration,
    ) -> StoreResult<Option<ClaimedRun>> {
        let action = "claiming a workflow run";
        let ttl = ttl_millis(ttl)?;
        if workflows.is_empty() {
            return Ok(None);
        }
        let mut tx = self.inner.begin_write(action).await?;
        let claimed = self
            .inner
            .workflow_sql
            .claim
            .claim(&mut tx, workflows, worker, ttl, None, action)
            .await?;
        let Some(row) = claimed else {
            tx.rollback().await.context(action)?;
            return Ok(None);
        };
        let run = run_from(&row, action)?;
        tx.commit().await.context(action)?;
        Ok(Some(ClaimedRun {
            claim: claim_of(&run)?,
            run,
        }))
    }

    async fn heartbeat(&self, claim: &Claim, ttl: Duration) -> StoreResult<Claim> {
        let action = "heartbeating a workflow run";
        let ttl = ttl_millis(ttl)?;
        let sql = &self.inner.workflow_sql;
        let mut tx = self.inner.begin_write(action).await?;
        let row = sqlx::query(&sql.heartbeat)
            .bind(&claim.run.0)
            .bind(claim.generation.0)
            .bind(ttl)
            .fetch_optional(&mut *tx)
            .await
            .context(action)?;
        let run = match row {
            Some(row) => run_from(&row, action)?,
            None => return Err(fenced(claim)),
        };
        sqlx::query(&sql.heartbeat_steps)
            .bind(&claim.run.0)
            .bind(run.updated_at.0)
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        claim_of(&run)
    }

    async fn step(&self, run: &RunId, key: &str) -> StoreResult<Option<StepRecord>> {
        let mut conn = self
            .inner
            .pool
            .acquire()
            .await
            .context("reading a workflow step")?;
        self.step_on(&mut conn, run, key, "reading a workflow step")
            .await
    }

    async fn record_step(
        &self,
        claim: &Claim,
        key: &str,
        update: &StepUpdate,
    ) -> StoreResult<StepRecord> {
        let action = "recording a workflow step";
        let sql = &self.inner.workflow_sql;
        let run = &claim.run;
        let mut tx = self.inner.begin_write(action).await?;
        let now = self.touch(&mut tx, claim, action).await?;
        let existing = self.step_on(&mut tx, run, key, action).await?;
        check_step_update(run, key, existing.as_ref(), update)?;
        let query = match (&existing, update) {
            (None, _) => sqlx::query(&sql.insert_step)
                .bind(&run.0)
                .bind(key)
                .bind(now.0),
            (Some(_), StepUpdate::Started { attempt }) => sqlx::query(&sql.next_attempt)
                .bind(&run.0)
                .bind(key)
                .bind(i64::from(*attempt))
                .bind(now.0),
            (Some(_), StepUpdate::AttemptFailed { error }) => sqlx::query(&sql.attempt_failed)
                .bind(&run.0)
                .bind(key)
                .bind(error.to_json())
                .bind(now.0),
            (Some(_), StepUpdate::Succeeded { output }) => sqlx::query(&sql.step_succeeded)
                .bind(&run.0)
                .bind(key)
                .bind(output.as_str())
                .bind(now.0),
            (Some(_), StepUpdate::Failed { error }) => sqlx::query(&sql.step_failed)
                .bind(&run.0)
                .bind(key)
                .bind(error.to_json())
                .bind(now.0),
        };
        let done = query.execute(&mut *tx).await.context(action)?;
        if done.rows_affected() != 1 {
            let conflict = StoreError::conflict(format!(
                "step `{key}` of run {run} changed while it was written"
            ));
            return rolled_back(tx, Err(conflict), action).await;
        }
        let record = self
            .step_on(&mut tx, run, key, action)
            .await?
            .ok_or_else(|| StoreError::unavailable("the workflow step vanished"))?;
        tx.commit().await.context(action)?;
        Ok(record)
    }

    async fn await_hook(
        &self,
        claim: &Claim,
        key: &str,
        timeout: Option<Duration>,
    ) -> StoreResult<HookWait> {
        let action = "waiting for a workflow hook";
        let sql = &self.inner.workflow_sql;
        let run = &claim.run;
        let mut tx = self.inner.begin_write(action).await?;
        let now = self.touch(&mut tx, claim, action).await?;
        let wait = match self.hook_on(&mut tx, run, key, action).await? {
            None => {
                sqlx::query(&sql.insert_wait)
                    .bind(&run.0)
                    .bind(key)
                    .bind(timeout.map(|timeout| now.plus(timeout).0))
                    .execute(&mut *tx)
                    .await
                    .context(action)?;
                HookWait::Waiting {
                    wake_after: timeout,
                }
            }
            Some(HookRow {
                delivered: Some(hook),
                ..
            }) => HookWait::Delivered(hook),
            Some(HookRow {
                timed_out: true, ..
            }) => HookWait::TimedOut,
            Some(HookRow {
                deadline_at: Some(deadline),
                ..
            }) if deadline <= now => {
                sqlx::query(&sql.time_out_wait)
                    .bind(&run.0)
                    .bind(key)
                    .bind(now.0)
                    .execute(&mut *tx)
                    .await
                    .context(action)?;
                HookWait::TimedOut
            }
            Some(HookRow { deadline_at, .. }) => HookWait::Waiting {
                wake_after: deadline_at.map(|deadline| deadline.since(now)),
            },
        };
        tx.commit().await.context(action)?;
        Ok(wait)
    }

    async fn suspend(&self, claim: &Claim, wake_after: Option<Duration>) -> StoreResult<Run> {
        let delay = wake_after.map(millis).transpose()?;
        let query = sqlx::query(&self.inner.workflow_sql.suspend)
            .bind(&claim.run.0)
            .bind(claim.generation.0)
            .bind(delay);
        self.end_claim(query, claim, "suspending a workflow run")
            .await
    }

    async fn release(&self, claim: &Claim) -> StoreResult<Run> {
        let query = sqlx::query(&self.inner.workflow_sql.release)
            .bind(&claim.run.0)
            .bind(claim.generation.0);
        self.end_claim(query, claim, "releasing a workflow run")
            .await
    }

    async fn finish(
        &self,
        claim: &Claim,
        outcome: Result<String, JournaledError>,
    ) -> StoreResult<Run> {
        let (state, output, error) = match outcome {
            Ok(output) => (RunState::Succeeded, Some(output), None),
            Err(error) => (RunState::Failed, None, Some(error.to_json())),
        };
        let query = sqlx::query(&self.inner.workflow_sql.finish)
            .bind(&claim.run.0)
            .bind(claim.generation.0)
            .bind(state.as_str())
            .bind(output)
            .bind(error);
        self.end_claim(query, claim, "finishing a workflow run")
            .await
    }

    async fn deliver_hook(
        &self,
        run: &RunId,
        key: &str,
        idempotency_key: &str,
        payload: &str,
    ) -> StoreResult<HookDelivery> {
        let action = "delivering a workflow hook";
        let sql = &self.inner.workflow_sql;
        let unavailable = || StoreError::missing(format!("run {run} is unavailable"));
        let mut tx = self.inner.begin_write(action).await?;
        let state: Option<String> = sqlx::query_scalar(&sql.lock_run_state)
            .bind(&run.0)
            .fetch_optional(&mut *tx)
            .await
            .context(action)?;
        let Some(state) = state else {
            return rolled_back(tx, Err(unavailable()), action).await;
        };
        if let Some(existing) = self.hook_on(&mut tx, run, key, action).await? {
            if let Some(hook) = existing.delivered {
                if hook.idempotency_key == idempotency_key {
                    return rolled_back(tx, Ok(HookDelivery::AlreadyDelivered), action).await;
                }
                let conflict = StoreError::conflict(format!(
                    "hook `{key}` of run {run} was delivered under another idempotency key"
                ));
                return rolled_back(tx, Err(conflict), action).await;
            }
            if existing.timed_out {
                let conflict = StoreError::conflict(format!(
                    "the wait for hook `{key}` of run {run} timed out"
                ));
                return rolled_back(tx, Err(conflict), action).await;
            }
        }
        let state = RunState::parse(&state)
            .ok_or_else(|| StoreError::corrupt("a workflow run has an unknown state"))?;
        if state.is_terminal() {
            return rolled_back(tx, Err(unavailable()), action).await;
        }
        let now: i64 = sqlx::query_scalar(&sql.wake_for_hook)
            .bind(&run.0)
            .fetch_one(&mut *tx)
            .await
            .context(action)?;
        let done = sqlx::query(&sql.deliver)
            .bind(&run.0)
            .bind(key)
            .bind(idempotency_key)
            .bind(payload)
            .bind(now)
            .execute(&mut *tx)
            .await
            .context(action)?;
        if done.rows_affected() != 1 {
            let conflict = StoreError::conflict(format!(
                "hook `{key}` of run {run} changed while it was delivered"
            ));
            return rolled_back(tx, Err(conflict), action).await;
        }
        tx.commit().await.context(action)?;
        Ok(HookDelivery::Delivered)
    }

    async fn hook(&self, run: &RunId, key: &str) -> StoreResult<Option<Hook>> {
        let action = "reading a workflow hook";
        let mut conn = self.inner.pool.acquire().await.context(action)?;
        let row = self.hook_on(&mut conn, run, key, action).await?;
        Ok(row.and_then(|row| row.delivered))
    }

    async fn cancel_run(&self, id: &RunId) -> StoreResult<bool> {
        let action = "cancelling a workflow run";
        let mut tx = self.inner.begin_write(action).await?;
        let done = sqlx::query(&self.inner.workflow_sql.cancel)
            .bind(&id.0)
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        Ok(done.rows_affected() == 1)
    }

    async fn purge_runs(&self, age: Duration) -> StoreResult<u64> {
        let action = "purging workflow runs";
        let mut tx = self.inner.begin_write(action).await?;
        let done = sqlx::query(&self.inner.workflow_sql.purge)
            .bind(millis(age)?)
            .execute(&mut *tx)
            .await
            .context(action)?;
        tx.commit().await.context(action)?;
        Ok(done.rows_affected())
    }
}

/// Rolls `tx` back, then answers `outcome`. A transaction that is only dropped is rolled back
/// when its connection is next used and keeps its row locks until then, so a claim made in the
/// meantime would skip the run as locked.
async fn rolled_back<T>(
    tx: crate::write_transaction::WriteTransaction,
    outcome: StoreResult<T>,
    action: &str,
) -> StoreResult<T> {
    tx.rollback().await.context(action)?;
    outcome
}
