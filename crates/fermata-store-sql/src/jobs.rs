//! The SQL job store: background jobs per document and each document's background-job channel
//! revision (migration 0008).
//!
//! Every write is one fenced transaction (`begin_fenced`), so a process that lost the writer
//! lease cannot claim or settle a job. Claims go through the claim machinery of `claim.rs`, which
//! the workflow store shares; every write under a claim is one conditional UPDATE guarded by the
//! claim generation (`claim::HELD`), and a settlement that finds the job no longer held is
//! answered by the port's `repeated_settlement` from the row as locked. Every change of a job
//! raises its document's revision in `background_job_channels` in the same transaction.

use std::time::Duration;

use async_trait::async_trait;
use fermata_store::claim::{ClaimGeneration, millis, ttl_millis};
use fermata_store::jobs::{
    check_new_job, check_repeated_enqueue, check_settlement, fenced, repeated_settlement,
};
use fermata_store::{
    ChannelId, ClaimedJob, Fence, FencingToken, Job, JobClaim, JobFailure, JobHolder, JobId,
    JobKind, JobState, JobStore, NewJob, Settlement, StoreError, StoreResult, StoreResultExt,
    UnixMillis,
};
use sqlx::AnyConnection;
use sqlx::any::AnyRow;

use crate::SqlStorage;
use crate::claim::{ClaimStatements, HELD};
use crate::dialect::Dialect;
use crate::error::StoreContext;
use crate::row::{column, flag, instant, optional_instant};

/// The job statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    next_target: String,
    insert: String,
    by_id: String,
    lock: String,
    of_channel: String,
    latest_won: String,
    revision: String,
    bump: String,
    claim: ClaimStatements,
    heartbeat: String,
    complete: String,
    retry: String,
    fail: String,
    cancel: String,
}

const JOB_COLUMNS: &str = "id, channel_id, kind, input, state, target_generation, \
                           claim_generation, claim_worker, ready_at, attempts, failures, \
                           last_failure, output, won, created_at, updated_at, settled_at, \
                           fencing_token";

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        let held = |set: &str| {
            dialect.render(&format!(
                "UPDATE background_jobs SET {set} WHERE {HELD} RETURNING {JOB_COLUMNS}"
            ))
        };
        Statements {
            next_target: dialect.render(
                "SELECT COALESCE(MAX(target_generation), 0) + 1 FROM background_jobs \
                 WHERE channel_id = $1 AND kind = $2",
            ),
            insert: dialect.render(&format!(
                "INSERT INTO background_jobs (id, channel_id, kind, input, state, \
                     target_generation, claim_generation, ready_at, attempts, failures, won, \
                     created_at, updated_at, fencing_token) \
                 VALUES ($1, $2, $3, $4, 'queued', $5, 0, $6, 0, 0, 0, $6, $6, $7) \
                 RETURNING {JOB_COLUMNS}"
            )),
            by_id: dialect.render(&format!(
                "SELECT {JOB_COLUMNS} FROM background_jobs WHERE id = $1"
            )),
            lock: dialect.render(&format!(
                "SELECT {JOB_COLUMNS} FROM background_jobs WHERE id = $1{{for_update}}"
            )),
            of_channel: dialect.render(&format!(
                "SELECT {JOB_COLUMNS} FROM background_jobs WHERE channel_id = $1 \
                 ORDER BY created_at, kind, target_generation, id"
            )),
            latest_won: dialect.render(&format!(
                "SELECT {JOB_COLUMNS} FROM background_jobs \
                 WHERE channel_id = $1 AND kind = $2 AND won = 1 \
                 ORDER BY target_generation DESC LIMIT 1"
            )),
            revision: dialect
                .render("SELECT revision FROM background_job_channels WHERE channel_id = $1"),
            bump: dialect.render(
                "INSERT INTO background_job_channels (channel_id, revision) VALUES ($1, 1) \
                 ON CONFLICT (channel_id) DO UPDATE \
                 SET revision = background_job_channels.revision + 1",
            ),
            claim: ClaimStatements::new(
                dialect,
                "background_jobs",
                "kind",
                "attempts = attempts + 1, fencing_token = $4",
                JOB_COLUMNS,
            ),
            heartbeat: held("ready_at = $3, updated_at = $4, fencing_token = $5"),
            complete: held(
                "state = 'completed', output = $3, won = $4, claim_worker = NULL, \
                 ready_at = NULL, settled_at = $5, updated_at = $5, fencing_token = $6",
            ),
            retry: held(
                "state = 'queued', failures = failures + 1, last_failure = $3, \
                 claim_worker = NULL, ready_at = $4, updated_at = $5, fencing_token = $6",
            ),
            fail: held(
                "state = 'failed', failures = failures + 1, last_failure = $3, \
                 claim_worker = NULL, ready_at = NULL, settled_at = $4, updated_at = $4, \
                 fencing_token = $5",
            ),
            cancel: dialect.render(
                "UPDATE background_jobs SET state = 'cancelled', claim_worker = NULL, \
                     ready_at = NULL, settled_at = $2, updated_at = $2, fencing_token = $3 \
                 WHERE id = $1 AND state IN ('queued', 'running')",
            ),
        }
    }
}

fn count(row: &AnyRow, index: usize, action: &str) -> StoreResult<u32> {
    u32::try_from(column::<i64>(row, index, action)?)
        .or_corrupt("a background job has an impossible count")
}

fn job_from(row: &AnyRow, action: &str) -> StoreResult<Job> {
    let state = JobState::parse(&column::<String>(row, 4, action)?)
        .ok_or_else(|| StoreError::corrupt("a background job has an unknown state"))?;
    let worker: Option<String> = column(row, 7, action)?;
    let ready_at = optional_instant(row, 8, action)?;
    let holder = match (state, worker, ready_at) {
        (JobState::Running, Some(worker), Some(expires_at)) => {
            Some(JobHolder { worker, expires_at })
        }
        (JobState::Running, _, _) => {
            return Err(StoreError::corrupt("a running background job has no claim"));
        }
        _ => None,
    };
    let last_failure = column::<Option<String>>(row, 11, action)?
        .map(|code| {
            JobFailure::parse(&code)
                .ok_or_else(|| StoreError::corrupt("a background job has an unknown failure"))
        })
        .transpose()?;
    Ok(Job {
        id: JobId(column(row, 0, action)?),
        channel: ChannelId(column(row, 1, action)?),
        kind: JobKind::new(column::<String>(row, 2, action)?)
            .or_corrupt("a background job has an unusable kind")?,
        input: column(row, 3, action)?,
        state,
        target_generation: column(row, 5, action)?,
        claim_generation: ClaimGeneration(column(row, 6, action)?),
        holder,
        attempts: count(row, 9, action)?,
        failures: count(row, 10, action)?,
        last_failure,
        output: column(row, 12, action)?,
        won: flag(row, 13, action)?,
        ready_at: ready_at.filter(|_| state == JobState::Queued),
        created_at: instant(row, 14, action)?,
        updated_at: instant(row, 15, action)?,
        settled_at: optional_instant(row, 16, action)?,
        fencing_token: FencingToken(column(row, 17, action)?),
    })
}

impl SqlStorage {
    /// The job, read on `conn` (locked when `lock`).
    pub(crate) async fn job_on(
        &self,
        conn: &mut AnyConnection,
        id: &JobId,
        lock: bool,
        action: &str,
    ) -> StoreResult<Option<Job>> {
        let sql = &self.inner.jobs_sql;
        let row = sqlx::query(if lock { &sql.lock } else { &sql.by_id })
            .bind(&id.0)
            .fetch_optional(conn)
            .await
            .context(action)?;
        row.map(|row| job_from(&row, action)).transpose()
    }

    /// Raises the document's background-job channel revision.
    async fn bump(
        &self,
        conn: &mut AnyConnection,
        channel: &ChannelId,
        action: &str,
    ) -> StoreResult<()> {
        sqlx::query(&self.inner.jobs_sql.bump)
            .bind(&channel.0)
            .execute(conn)
            .await
            .context(action)?;
        Ok(())
    }

    /// Enqueues `new` on `conn`, inside a fenced transaction begun at `now` under `token`:
    /// shared with the research store's reconciliation.
    pub(crate) async fn enqueue_on(
        &self,
        conn: &mut AnyConnection,
        new: &NewJob,
        now: UnixMillis,
        token: FencingToken,
        action: &str,
    ) -> StoreResult<Job> {
        check_new_job(new)?;
        let sql = &self.inner.jobs_sql;
        self.require_document(&mut *conn, &new.channel, action)
            .await?;
        if let Some(existing) = self.job_on(conn, &new.id, true, action).await? {
            check_repeated_enqueue(&existing, new)?;
            return Ok(existing);
        }
        let target: i64 = sqlx::query_scalar(&sql.next_target)
            .bind(&new.channel.0)
            .bind(new.kind.as_str())
            .fetch_one(&mut *conn)
            .await
            .context(action)?;
        let row = sqlx::query(&sql.insert)
            .bind(&new.id.0)
            .bind(&new.channel.0)
            .bind(new.kind.as_str())
            .bind(&new.input)
            .bind(target)
            .bind(now.0)
            .bind(token.0)
            .fetch_one(&mut *conn)
            .await
            .context(action)?;
        let job = job_from(&row, action)?;
        self.bump(conn, &job.channel, action).await?;
        Ok(job)
    }

    /// Runs one of the held updates, already bound, and raises the document's revision; `Fenced`
    /// when the claim no longer holds.
    async fn held_write<'q>(
        &self,
        conn: &mut AnyConnection,
        query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
        claim: &JobClaim,
        action: &str,
    ) -> StoreResult<Job> {
        let row = query.fetch_optional(&mut *conn).await.context(action)?;
        let job = match row {
            Some(row) => job_from(&row, action)?,
            None => return Err(fenced(claim)),
        };
        self.bump(conn, &job.channel, action).await?;
        Ok(job)
    }
}

#[async_trait]
impl JobStore for SqlStorage {
    async fn enqueue(&self, fence: &Fence, job: &NewJob) -> StoreResult<Job> {
        let action = "enqueueing a background job";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        let job = self
            .enqueue_on(tx.conn(), job, now, fence.token, action)
            .await?;
        tx.commit(action).await?;
        Ok(job)
    }

    async fn job(&self, id: &JobId) -> StoreResult<Option<Job>> {
        let action = "reading a background job";
        let mut conn = self.inner.pool.acquire().await.context(action)?;
        self.job_on(&mut conn, id, false, action).await
    }

    async fn jobs_of(&self, channel: &ChannelId) -> StoreResult<Vec<Job>> {
        let action = "listing background jobs";
        let rows = sqlx::query(&self.inner.jobs_sql.of_channel)
            .bind(&channel.0)
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        rows.iter().map(|row| job_from(row, action)).collect()
    }

    async fn latest_won(&self, channel: &ChannelId, kind: &JobKind) -> StoreResult<Option<Job>> {
        let action = "reading a document's current job";
        let row = sqlx::query(&self.inner.jobs_sql.latest_won)
            .bind(&channel.0)
            .bind(kind.as_str())
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?;
        row.map(|row| job_from(&row, action)).transpose()
    }

    async fn channel_revision(&self, channel: &ChannelId) -> StoreResult<i64> {
        let revision: Option<i64> = sqlx::query_scalar(&self.inner.jobs_sql.revision)
            .bind(&channel.0)
            .fetch_optional(&self.inner.pool)
            .await
            .context("reading a document's job revision")?;
        Ok(revision.unwrap_or(0))
    }

    async fn claim(
        &self,
        fence: &Fence,
        worker: &str,
        kinds: &[JobKind],
        ttl: Duration,
    ) -> StoreResult<Option<ClaimedJob>> {
        let action = "claiming a background job";
        let ttl = ttl_millis(ttl)?;
        if kinds.is_empty() {
            return Ok(None);
        }
        let names: Vec<String> = kinds.iter().map(|k| k.as_str().to_owned()).collect();
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let claimed = self
            .inner
            .jobs_sql
            .claim
            .claim(tx.conn(), &names, worker, ttl, Some(fence.token.0), action)
            .await?;
        let Some(row) = claimed else {
            return Ok(None);
        };
        let job = job_from(&row, action)?;
        self.bump(tx.conn(), &job.channel, action).await?;
        tx.commit(action).await?;
        let holder = job
            .holder
            .as_ref()
            .ok_or_else(|| StoreError::corrupt("a claimed background job has no claim"))?;
        Ok(Some(ClaimedJob {
            claim: JobClaim {
                job: job.id.clone(),
                worker: holder.worker.clone(),
                generation: job.claim_generation,
                expires_at: holder.expires_at,
            },
            job,
        }))
    }

    async fn heartbeat(
        &self,
        fence: &Fence,
        claim: &JobClaim,
        ttl: Duration,
    ) -> StoreResult<JobClaim> {
        let action = "heartbeating a background job";
        let ttl = ttl_millis(ttl)?;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        let expires_at = UnixMillis(now.0.saturating_add(ttl));
        let query = sqlx::query(&self.inner.jobs_sql.heartbeat)
            .bind(&claim.job.0)
            .bind(claim.generation.0)
            .bind(expires_at.0)
            .bind(now.0)
            .bind(fence.token.0);
        self.held_write(tx.conn(), query, claim, action).await?;
        tx.commit(action).await?;
        Ok(JobClaim {
            expires_at,
            ..claim.clone()
        })
    }

    async fn settle(
        &self,
        fence: &Fence,
        claim: &JobClaim,
        settlement: &Settlement,
    ) -> StoreResult<Job> {
        let action = "settling a background job";
        check_settlement(settlement)?;
        let sql = &self.inner.jobs_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        let Some(job) = self.job_on(tx.conn(), &claim.job, true, action).await? else {
            return Err(fenced(claim));
        };
        if job.state != JobState::Running || job.claim_generation != claim.generation {
            return repeated_settlement(&job, claim, settlement);
        }
        let query = match settlement {
            Settlement::Complete { artifact } => {
                let next: i64 = sqlx::query_scalar(&sql.next_target)
                    .bind(&job.channel.0)
                    .bind(job.kind.as_str())
                    .fetch_one(tx.conn())
                    .await
                    .context(action)?;
                let won = next == job.target_generation + 1;
                sqlx::query(&sql.complete)
                    .bind(&claim.job.0)
                    .bind(claim.generation.0)
                    .bind(artifact.as_str())
                    .bind(i64::from(won))
                    .bind(now.0)
                    .bind(fence.token.0)
            }
            Settlement::Fail {
                failure,
                retry_after: Some(delay),
            } => sqlx::query(&sql.retry)
                .bind(&claim.job.0)
                .bind(claim.generation.0)
                .bind(failure.as_str())
                .bind(now.0.saturating_add(millis(*delay)?))
                .bind(now.0)
                .bind(fence.token.0),
            Settlement::Fail {
                failure,
                retry_after: None,
            } => sqlx::query(&sql.fail)
                .bind(&claim.job.0)
                .bind(claim.generation.0)
                .bind(failure.as_str())
                .bind(now.0)
                .bind(fence.token.0),
        };
        let settled = self.held_write(tx.conn(), query, claim, action).await?;
        tx.commit(action).await?;
        Ok(settled)
    }

    async fn cancel(&self, fence: &Fence, id: &JobId) -> StoreResult<bool> {
        let action = "cancelling a background job";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        let Some(job) = self.job_on(tx.conn(), id, true, action).await? else {
            return Err(fermata_store::jobs::no_such_job(id));
        };
        let done = tx
            .execute(
                sqlx::query(&self.inner.jobs_sql.cancel)
                    .bind(&id.0)
                    .bind(now.0)
                    .bind(fence.token.0),
                action,
            )
            .await?;
        if done != 1 {
            return Ok(false);
        }
        self.bump(tx.conn(), &job.channel, action).await?;
        tx.commit(action).await?;
        Ok(true)
    }
}
