//! Durable workflow runs: the run queue with worker claims, the step journal, hooks and
//! retention.
//!
//! A run is one row. A worker *claims* a runnable run for a time-to-live on the database's clock;
//! every claim raises the run's claim generation by one. Every write a worker makes for a run
//! names its [`Claim`] and commits only while the run is `running` under that generation, so a
//! worker whose claim expired and was taken over by another worker is fenced out (`Fenced`) from
//! then on. A claim that expired but was not taken over yet stays usable: expiry only makes the
//! run claimable.
//!
//! Steps are journaled per run under stable keys; a step row that reached `succeeded` or
//! `failed` never changes again, and neither does a run that reached a terminal state. Hooks are
//! payloads delivered to a run from outside, once per key, idempotently.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use crate::claim::ClaimGeneration;
use crate::error::{StoreError, StoreResult};
use crate::time::UnixMillis;

/// A run's ID: a UUID, chosen by whoever starts the run.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId(pub String);

impl RunId {
    /// A new random ID.
    pub fn random() -> Self {
        RunId(uuid::Uuid::new_v4().to_string())
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a step attempt or a run failed, as the journal keeps it: a stable code, whether trying
/// again may help, and whatever members the workflow keeps with them (a schema operation keeps its
/// safe error's stage, message and subject, so a replayed failure is the same failure). Stored as
/// one JSON object, `{"code", "retryable", ...}`; the store reads nothing in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournaledError {
    pub code: String,
    pub retryable: bool,
    /// The workflow's own members, kept as written.
    #[serde(flatten)]
    pub details: serde_json::Map<String, serde_json::Value>,
}

impl JournaledError {
    /// An error with a code and no members of the workflow's own.
    pub fn new(code: impl Into<String>, retryable: bool) -> Self {
        JournaledError {
            code: code.into(),
            retryable,
            details: serde_json::Map::new(),
        }
    }

    /// The JSON form the journal stores.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a JSON object serializes")
    }

    /// Reads the stored JSON form back; text that is not one is `Corrupt`.
    pub fn from_json(text: &str) -> StoreResult<Self> {
        serde_json::from_str(text).map_err(|error| {
            StoreError::corrupt("a journaled error does not parse").with_source(error)
        })
    }
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunState {
    /// Created and never claimed.
    Pending,
    /// A worker holds a claim on it.
    Running,
    /// Suspended or released: waits for its wake time, for a hook, or (when released) for the
    /// next worker.
    Waiting,
    Succeeded,
    Failed,
    Cancelled,
}

impl RunState {
    /// Whether the run is over; a terminal run never changes again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunState::Succeeded | RunState::Failed | RunState::Cancelled
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Pending => "pending",
            RunState::Running => "running",
            RunState::Waiting => "waiting",
            RunState::Succeeded => "succeeded",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "pending" => RunState::Pending,
            "running" => RunState::Running,
            "waiting" => RunState::Waiting,
            "succeeded" => RunState::Succeeded,
            "failed" => RunState::Failed,
            "cancelled" => RunState::Cancelled,
            _ => return None,
        })
    }
}

/// A run to create.
#[derive(Debug, Clone)]
pub struct NewRun {
    pub id: RunId,
    /// The registered name of the workflow that executes it.
    pub workflow: String,
    /// The input, as JSON text.
    pub input: String,
}

/// The claim a running run is under, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunClaim {
    pub worker: String,
    pub generation: ClaimGeneration,
    /// When another worker may take the run over unless the claim is heartbeated.
    pub expires_at: UnixMillis,
}

/// A run as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub id: RunId,
    pub workflow: String,
    pub input: String,
    pub state: RunState,
    /// Present exactly while the run is `running`.
    pub claim: Option<RunClaim>,
    /// For a `waiting` run: when it may be claimed again; absent while only a hook can wake it.
    pub wake_at: Option<UnixMillis>,
    pub created_at: UnixMillis,
    /// The last write to the run, its steps or its hooks.
    pub updated_at: UnixMillis,
    /// Present exactly when the run is terminal.
    pub finished_at: Option<UnixMillis>,
    /// The output, as JSON text, of a run that succeeded.
    pub output: Option<String>,
    /// Why a run failed.
    pub error: Option<JournaledError>,
}

/// What a worker holds while it executes a run; every write it makes for the run presents it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub run: RunId,
    pub worker: String,
    pub generation: ClaimGeneration,
    /// As of the claim or its latest heartbeat, on the database's clock.
    pub expires_at: UnixMillis,
}

/// The answer of [`WorkflowStore::claim_run`]: the claim and the run as it was claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedRun {
    pub claim: Claim,
    pub run: Run,
}

/// Where a step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepState {
    /// An attempt began and no final outcome was recorded (it may be in progress, waiting for
    /// its retry, or its worker may have died).
    Running,
    Succeeded,
    Failed,
}

impl StepState {
    pub fn is_terminal(self) -> bool {
        !matches!(self, StepState::Running)
    }

    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "running" => StepState::Running,
            "succeeded" => StepState::Succeeded,
            "failed" => StepState::Failed,
            _ => return None,
        })
    }
}

/// One step of a run's journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRecord {
    pub run: RunId,
    pub key: String,
    pub state: StepState,
    /// How many attempts began, the one in progress included.
    pub attempts: u32,
    /// The output, as JSON text, of a step that succeeded.
    pub output: Option<String>,
    /// Why the step failed, or why its latest failed attempt did while it is still `running`.
    pub error: Option<JournaledError>,
    /// When the first attempt began.
    pub started_at: UnixMillis,
    /// The latest report on the step: an attempt, an outcome, or a heartbeat of the run's claim
    /// while the step was `running`.
    pub heartbeat_at: UnixMillis,
    /// When it succeeded or failed.
    pub terminal_at: Option<UnixMillis>,
}

/// A write to a step row. Every variant but `Started` needs the row to exist; none applies to a
/// terminal row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepUpdate {
    /// Attempt `attempt` begins: it is 1 for a step without a row, and one more than the
    /// recorded attempts of a `running` row. Anything else is a `Conflict`.
    Started { attempt: u32 },
    /// The attempt in progress failed and the step will be tried again; the step stays
    /// `running`.
    AttemptFailed { error: JournaledError },
    /// The step succeeded with `output` (JSON text).
    Succeeded { output: String },
    /// The step failed for good.
    Failed { error: JournaledError },
}

/// A payload delivered to a run from outside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    pub run: RunId,
    pub key: String,
    /// The key the deliverer chose; delivering again under it changes nothing.
    pub idempotency_key: String,
    /// JSON text.
    pub payload: String,
    pub delivered_at: UnixMillis,
}

/// The answer of [`WorkflowStore::deliver_hook`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookDelivery {
    /// Stored now; a waiting run became runnable.
    Delivered,
    /// Delivered before under the same idempotency key; nothing changed.
    AlreadyDelivered,
}

/// The answer of [`WorkflowStore::await_hook`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookWait {
    Delivered(Hook),
    /// Not delivered yet. `wake_after` is what is left of the wait's timeout, if it has one.
    Waiting {
        wake_after: Option<Duration>,
    },
    /// The wait's timeout passed first; the hook can no longer be delivered.
    TimedOut,
}

/// Whether `update` may be written to step `key` of `run`, whose row is `existing`: the check
/// every adapter makes, under its locks, before it writes a step.
pub fn check_step_update(
    run: &RunId,
    key: &str,
    existing: Option<&StepRecord>,
    update: &StepUpdate,
) -> StoreResult<()> {
    match (existing, update) {
        (None, StepUpdate::Started { attempt: 1 }) => Ok(()),
        (None, StepUpdate::Started { .. }) => Err(StoreError::conflict(format!(
            "step `{key}` of run {run} has no earlier attempt"
        ))),
        (None, _) => Err(StoreError::missing(format!(
            "step `{key}` of run {run} was never started"
        ))),
        (Some(record), _) if record.state.is_terminal() => Err(StoreError::conflict(format!(
            "step `{key}` of run {run} is finished"
        ))),
        (Some(record), StepUpdate::Started { attempt })
            if record.attempts.checked_add(1) != Some(*attempt) =>
        {
            Err(StoreError::conflict(format!(
                "step `{key}` of run {run} is at attempt {}, not {}",
                record.attempts,
                attempt.saturating_sub(1)
            )))
        }
        (Some(_), _) => Ok(()),
    }
}

/// The workflow store.
#[async_trait]
pub trait WorkflowStore: Send + Sync {
    /// Creates a `pending` run. An existing ID is a `Conflict`.
    async fn create_run(&self, run: &NewRun) -> StoreResult<Run>;

    /// The run, or `None` when it does not exist (never created, or purged).
    async fn run(&self, id: &RunId) -> StoreResult<Option<Run>>;

    /// Claims one runnable run of one of `workflows` for `worker` for `ttl`: a `pending` run, a
    /// `waiting` run whose wake time has come, or a `running` run whose claim expired. The run
    /// becomes `running` under the next claim generation. Several workers calling at once never
    /// get the same run. `None` when nothing is runnable.
    async fn claim_run(
        &self,
        worker: &str,
        workflows: &[String],
        ttl: Duration,
    ) -> StoreResult<Option<ClaimedRun>>;

    /// Extends the claim to `ttl` from now, and marks the run's `running` steps as heard from.
    async fn heartbeat(&self, claim: &Claim, ttl: Duration) -> StoreResult<Claim>;

    /// The step `key` of `run`, if any attempt of it was recorded.
    async fn step(&self, run: &RunId, key: &str) -> StoreResult<Option<StepRecord>>;

    /// Writes step `key` of the claimed run. A terminal step is a `Conflict` and stays unchanged.
    async fn record_step(
        &self,
        claim: &Claim,
        key: &str,
        update: &StepUpdate,
    ) -> StoreResult<StepRecord>;

    /// Reads hook `key` for the claimed run. The first call for a hook that has not arrived
    /// starts its wait, with `timeout` if given (later calls do not change it); once the timeout
    /// passed on the database's clock the wait is over for good and the hook can no longer be
    /// delivered, so every later reading agrees.
    async fn await_hook(
        &self,
        claim: &Claim,
        key: &str,
        timeout: Option<Duration>,
    ) -> StoreResult<HookWait>;

    /// Ends the claim and leaves the run `waiting`, to be claimed again `wake_after` from now, or
    /// only once a hook is delivered when `None`. A hook delivered while the run was `running`
    /// makes it runnable at once instead, so the suspension never sleeps through it.
    async fn suspend(&self, claim: &Claim, wake_after: Option<Duration>) -> StoreResult<Run>;

    /// Ends the claim without finishing the run, which any worker may claim again at once.
    async fn release(&self, claim: &Claim) -> StoreResult<Run>;

    /// Ends the run: `succeeded` with the output (JSON text) or `failed` with the error.
    async fn finish(
        &self,
        claim: &Claim,
        outcome: Result<String, JournaledError>,
    ) -> StoreResult<Run>;

    /// Delivers hook `key` to `run` with `payload` (JSON text), and makes a `waiting` run
    /// runnable at once. The same idempotency key again is `AlreadyDelivered` and changes
    /// nothing (even once the run ended); another idempotency key for a delivered hook, or a
    /// hook whose wait timed out, is a `Conflict`; an unknown or terminal run is `Missing`.
    async fn deliver_hook(
        &self,
        run: &RunId,
        key: &str,
        idempotency_key: &str,
        payload: &str,
    ) -> StoreResult<HookDelivery>;

    /// Hook `key` of `run`, if it was delivered.
    async fn hook(&self, run: &RunId, key: &str) -> StoreResult<Option<Hook>>;

    /// Cancels a run that is not terminal; a worker holding it is fenced out from then on.
    /// Returns false, changing nothing, when the run is terminal or does not exist.
    async fn cancel_run(&self, id: &RunId) -> StoreResult<bool>;

    /// Deletes every terminal run that finished more than `age` ago, with its steps and hooks.
    /// Returns how many runs went.
    async fn purge_runs(&self, age: Duration) -> StoreResult<u64>;
}
