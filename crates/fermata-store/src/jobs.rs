//! Durable background jobs: work a document asked for (a generated description, research
//! evidence or an answer), queued per document and kind, claimed by one worker at a time, and
//! settled once with an artifact or a failure.
//!
//! Every job write is fenced by the writer lease and records the fencing token it was written
//! under. Claims use the claim machinery the workflow runs use (`claim.rs`): a claim raises the
//! job's claim generation, expires on the database's clock, and an expired claim can be taken
//! over, after which the old claim is `Fenced`. Each enqueue for a document and kind gets the
//! next *target generation* of that pair; a job settled while a newer target exists is recorded
//! but does not *win*, so only the newest target's result is ever current. Every job change of a
//! document raises that document's background-job channel revision.
//!
//! Settlement is idempotent: the same settlement again under the same claim returns the recorded
//! job; a different settlement under that claim is a `Conflict`; a claim generation the job is
//! no longer at, or a job cancelled since, is `Fenced`.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use crate::channel::ChannelId;
use crate::claim::ClaimGeneration;
use crate::error::{StoreError, StoreResult};
use crate::lease::{Fence, FencingToken};
use crate::time::UnixMillis;

/// A job's ID: a UUID, chosen by whoever enqueues it (so a repeated enqueue can be recognised).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub String);

impl JobId {
    pub fn random() -> Self {
        JobId(uuid::Uuid::new_v4().to_string())
    }

    /// The deterministic ID of a job named by `parts` (for example a research request's answer
    /// job), so enqueueing it again after an interruption finds the same job.
    pub fn derived(parts: &[&str]) -> Self {
        JobId(uuid::Uuid::new_v5(&JOB_NAMESPACE, parts.join("\u{0}").as_bytes()).to_string())
    }
}

const JOB_NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x0b5c_2f2e_77d1_4f0a_9c39_5e8a_41d6_b1c3);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a job does: 1 to 100 characters of lowercase letters, digits, `-`, `_`, `.` and `@`
/// (`document-summary@1`, `research-evidence@1`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobKind(String);

impl JobKind {
    pub fn new(text: impl Into<String>) -> StoreResult<Self> {
        let text = text.into();
        let allowed = |c: char| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.' | '@')
        };
        if text.is_empty() || text.len() > 100 || !text.chars().all(allowed) {
            return Err(StoreError::invalid(
                "a job kind is 1 to 100 lowercase letters, digits, '-', '_', '.' and '@'",
            ));
        }
        Ok(JobKind(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Waiting for a worker: never claimed, or failed and waiting for its retry.
    Queued,
    /// A worker holds a claim on it.
    Running,
    /// Settled with an artifact.
    Completed,
    /// Settled with a failure for good.
    Failed,
    Cancelled,
}

impl JobState {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Failed | JobState::Cancelled
        )
    }

    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "queued" => JobState::Queued,
            "running" => JobState::Running,
            "completed" => JobState::Completed,
            "failed" => JobState::Failed,
            "cancelled" => JobState::Cancelled,
            _ => return None,
        })
    }
}

/// Why a job's attempt failed: a fixed code, so no driver text, model output or secret can be
/// stored as a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobFailure {
    /// The generator (a model or another service) failed or refused.
    GeneratorFailed,
    /// The attempt ran out of time.
    TimedOut,
    /// The attempt produced an artifact that does not have the shape its kind needs.
    InvalidArtifact,
    /// The job's input could not be used.
    InvalidInput,
    /// Storage was unavailable to the worker.
    StorageUnavailable,
}

impl JobFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            JobFailure::GeneratorFailed => "generator_failed",
            JobFailure::TimedOut => "timed_out",
            JobFailure::InvalidArtifact => "invalid_artifact",
            JobFailure::InvalidInput => "invalid_input",
            JobFailure::StorageUnavailable => "storage_unavailable",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "generator_failed" => JobFailure::GeneratorFailed,
            "timed_out" => JobFailure::TimedOut,
            "invalid_artifact" => JobFailure::InvalidArtifact,
            "invalid_input" => JobFailure::InvalidInput,
            "storage_unavailable" => JobFailure::StorageUnavailable,
            _ => return None,
        })
    }
}

/// A job to enqueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    pub id: JobId,
    pub channel: ChannelId,
    pub kind: JobKind,
    /// JSON text.
    pub input: String,
}

/// The claim a running job is under, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobHolder {
    pub worker: String,
    /// When another worker may take the job over.
    pub expires_at: UnixMillis,
}

/// A job as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub id: JobId,
    pub channel: ChannelId,
    pub kind: JobKind,
    pub input: String,
    pub state: JobState,
    /// This job's place among the enqueues of its document and kind, from 1.
    pub target_generation: i64,
    /// Raised by every claim; the generation of the latest claim (0 when never claimed).
    pub claim_generation: ClaimGeneration,
    /// Present exactly while the job is `running`.
    pub holder: Option<JobHolder>,
    /// Claims taken, takeovers included.
    pub attempts: u32,
    pub failures: u32,
    pub last_failure: Option<JobFailure>,
    /// The artifact (JSON text) of a completed job.
    pub output: Option<String>,
    /// Settled `completed` while it was still the newest target of its document and kind.
    pub won: bool,
    /// For a queued job: when it may be claimed.
    pub ready_at: Option<UnixMillis>,
    pub created_at: UnixMillis,
    pub updated_at: UnixMillis,
    /// When it reached a terminal state.
    pub settled_at: Option<UnixMillis>,
    /// The fencing token of the job's latest write.
    pub fencing_token: FencingToken,
}

/// What a worker holds while it runs a job; every write it makes for the job presents it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobClaim {
    pub job: JobId,
    pub worker: String,
    pub generation: ClaimGeneration,
    pub expires_at: UnixMillis,
}

/// The answer of [`JobStore::claim`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedJob {
    pub claim: JobClaim,
    pub job: Job,
}

/// How a worker settles a job it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    /// Completed with an artifact (JSON text).
    Complete { artifact: String },
    /// The attempt failed; the job is queued again `retry_after` from now, or fails for good
    /// when it is `None`.
    Fail {
        failure: JobFailure,
        retry_after: Option<Duration>,
    },
}

/// Whether `settlement` is what `job` already records for the claim generation it was settled
/// under: the rule every adapter applies to a settlement that finds the job no longer running.
/// Whether enqueueing `new` again under an ID already used by `existing` repeats it (the same
/// document, kind and input: the existing job is the answer) or is a `Conflict`.
pub fn check_repeated_enqueue(existing: &Job, new: &NewJob) -> StoreResult<()> {
    if existing.channel == new.channel && existing.kind == new.kind && existing.input == new.input {
        Ok(())
    } else {
        Err(StoreError::conflict(format!(
            "job {} was enqueued with another document, kind or input",
            new.id
        )))
    }
}

/// Answers the recorded job for the same settlement, `Fenced` for another claim generation, a
/// job claimed again since or a cancelled job, and `Conflict` for a different settlement under
/// the same claim.
pub fn repeated_settlement(
    job: &Job,
    claim: &JobClaim,
    settlement: &Settlement,
) -> StoreResult<Job> {
    if job.claim_generation != claim.generation
        || matches!(job.state, JobState::Running | JobState::Cancelled)
    {
        return Err(fenced(claim));
    }
    let same = match settlement {
        Settlement::Complete { artifact } => {
            job.state == JobState::Completed && job.output.as_deref() == Some(artifact.as_str())
        }
        Settlement::Fail {
            failure,
            retry_after,
        } => {
            let state = if retry_after.is_some() {
                JobState::Queued
            } else {
                JobState::Failed
            };
            job.state == state && job.last_failure == Some(*failure)
        }
    };
    if same {
        Ok(job.clone())
    } else {
        Err(StoreError::conflict(format!(
            "job {} was already settled differently under claim generation {}",
            claim.job, claim.generation
        )))
    }
}

/// The error of a write under a claim the job is no longer held under.
pub fn fenced(claim: &JobClaim) -> StoreError {
    StoreError::fenced(format!(
        "job {} is no longer held under claim generation {}",
        claim.job, claim.generation
    ))
}

/// Checks a job before it is enqueued.
pub fn check_new_job(job: &NewJob) -> StoreResult<()> {
    if serde_json::from_str::<serde_json::Value>(&job.input).is_err() {
        return Err(StoreError::invalid("a job's input is JSON text"));
    }
    Ok(())
}

/// Checks a settlement before it is written.
pub fn check_settlement(settlement: &Settlement) -> StoreResult<()> {
    match settlement {
        Settlement::Complete { artifact }
            if serde_json::from_str::<serde_json::Value>(artifact).is_err() =>
        {
            Err(StoreError::invalid("a job's artifact is JSON text"))
        }
        Settlement::Fail {
            retry_after: Some(delay),
            ..
        } => crate::claim::millis(*delay).map(|_| ()),
        _ => Ok(()),
    }
}

/// The job store. Every write is fenced by the writer lease.
#[async_trait]
pub trait JobStore: Send + Sync {
    /// Queues a job for its document under the next target generation of its document and kind.
    /// The same ID again with the same document, kind and input returns the job as it is; with
    /// anything else it is a `Conflict`. An unknown document is `Missing`.
    async fn enqueue(&self, fence: &Fence, job: &NewJob) -> StoreResult<Job>;

    async fn job(&self, id: &JobId) -> StoreResult<Option<Job>>;

    /// A document's jobs, oldest first.
    async fn jobs_of(&self, channel: &ChannelId) -> StoreResult<Vec<Job>>;

    /// The newest job of a document and kind that won (settled `completed` while it was the
    /// newest target).
    async fn latest_won(&self, channel: &ChannelId, kind: &JobKind) -> StoreResult<Option<Job>>;

    /// The document's background-job channel revision: raised by every job change of the
    /// document; 0 before its first job.
    async fn channel_revision(&self, channel: &ChannelId) -> StoreResult<i64>;

    /// Claims one ready job of one of `kinds` for `worker` for `ttl`: a queued job whose time
    /// has come or a running job whose claim expired. Several workers calling at once never get
    /// the same job. `None` when nothing is ready.
    async fn claim(
        &self,
        fence: &Fence,
        worker: &str,
        kinds: &[JobKind],
        ttl: Duration,
    ) -> StoreResult<Option<ClaimedJob>>;

    /// Extends the claim to `ttl` from now.
    async fn heartbeat(
        &self,
        fence: &Fence,
        claim: &JobClaim,
        ttl: Duration,
    ) -> StoreResult<JobClaim>;

    /// Settles the job held under `claim`; see the module documentation for repeats.
    async fn settle(
        &self,
        fence: &Fence,
        claim: &JobClaim,
        settlement: &Settlement,
    ) -> StoreResult<Job>;

    /// Cancels a job that is not terminal; a worker holding it is fenced out from then on.
    /// Returns false, changing nothing, when it is terminal.
    async fn cancel(&self, fence: &Fence, id: &JobId) -> StoreResult<bool>;
}

/// The answer for a job that does not exist.
pub fn no_such_job(id: &JobId) -> StoreError {
    StoreError::missing(format!("job {id} does not exist"))
}
