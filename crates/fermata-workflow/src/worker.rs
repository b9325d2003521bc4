//! Workers: claim a run, execute its workflow while heartbeating the claim, and record how the
//! execution ended.
//!
//! On SQLite run one worker per process (and one process per database file, the serving one):
//! its claims are serialized by the database's write lock anyway, and a second worker would only
//! wait for it. On PostgreSQL several workers, in one process or many, share the queue; their
//! claims skip each other's locked runs.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use fermata_store::{
    Claim, ClaimedRun, ErrorChain, ErrorKind, FailureStreak, JournaledError, RunId, Storage,
    StoreError, StoreResult,
};
use serde_json::Value;

use crate::context::{RunContext, RunError};
use crate::engine::Engine;
use crate::step_error::StepError;

/// How a worker claims and keeps runs.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// How long a claim lasts unless heartbeated; a run whose worker died is resumed by another
    /// worker this long after the last heartbeat. Heartbeats come every third of it.
    pub claim_ttl: Duration,
    /// How long an idle worker waits before it looks for work again.
    pub poll_interval: Duration,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        WorkerSettings {
            claim_ttl: Duration::from_secs(30),
            poll_interval: Duration::from_millis(500),
        }
    }
}

impl WorkerSettings {
    fn heartbeat_every(&self) -> Duration {
        self.claim_ttl / 3
    }
}

/// One execution of a run by a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execution {
    pub run: RunId,
    pub end: ExecutionEnd,
}

/// How an execution ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutionEnd {
    /// The run succeeded.
    Succeeded,
    /// The run failed for good.
    Failed,
    /// The run waits for a hook or a time; it will be executed again.
    Suspended,
    /// The worker stopped working on the run without ending it: its claim was taken over or the
    /// store failed. The run is resumed once the claim expires.
    Lost,
}

/// Executes the runs of one engine's workflows.
#[derive(Debug, Clone)]
pub struct Worker {
    engine: Engine,
    /// Names this worker in claims and logs.
    name: String,
    settings: WorkerSettings,
    /// What the worker claims: every workflow its engine knows.
    workflows: Arc<Vec<String>>,
}

impl Worker {
    pub(crate) fn new(engine: Engine, name: String, settings: WorkerSettings) -> Self {
        let workflows = Arc::new(engine.workflow_names());
        Worker {
            engine,
            name,
            settings,
            workflows,
        }
    }

    /// Claims one runnable run and executes it; `None` when nothing was runnable.
    pub async fn run_once(&self) -> StoreResult<Option<Execution>> {
        let Some(claimed) = self.claim().await? else {
            return Ok(None);
        };
        Ok(Some(self.execute(claimed).await))
    }

    /// Executes runs until `shutdown` completes, looking for work every poll interval while
    /// idle. A run in progress at shutdown is stopped where it is and its claim released, so
    /// another worker resumes it at once.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        tracing::info!(worker = %self.name, "workflow worker started");
        let mut failures = FailureStreak::default();
        loop {
            let claimed = self.claim().await;
            if claimed.is_ok()
                && let Some(failed) = failures.succeeded()
            {
                tracing::info!(worker = %self.name, failed, "runs can be claimed again");
            }
            match claimed {
                Ok(Some(claimed)) => {
                    let claim = claimed.claim.clone();
                    tokio::select! {
                        biased;
                        () = &mut shutdown => {
                            self.release(&claim).await;
                            break;
                        }
                        _ = self.execute(claimed) => continue,
                    }
                }
                Ok(None) => {}
                Err(error) if failures.failed() => {
                    tracing::warn!(worker = %self.name, error = %ErrorChain(&error), "could not claim a run; trying again");
                }
                Err(error) => {
                    tracing::debug!(worker = %self.name, error = %ErrorChain(&error), "could not claim a run");
                }
            }
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                () = tokio::time::sleep(self.settings.poll_interval) => {}
            }
        }
        tracing::info!(worker = %self.name, "workflow worker stopped");
    }

    async fn claim(&self) -> StoreResult<Option<ClaimedRun>> {
        self.storage()
            .workflows()
            .claim_run(&self.name, &self.workflows, self.settings.claim_ttl)
            .await
    }

    fn storage(&self) -> &Arc<dyn Storage> {
        self.engine.storage()
    }

    async fn release(&self, claim: &Claim) {
        match self.storage().workflows().release(claim).await {
            Ok(_) => tracing::info!(run = %claim.run, "run released at shutdown"),
            Err(error) => {
                tracing::warn!(run = %claim.run, error = %ErrorChain(&error), "could not release the run");
            }
        }
    }

    /// Executes the claimed run once, heartbeating the claim throughout.
    async fn execute(&self, claimed: ClaimedRun) -> Execution {
        let ClaimedRun { claim, run } = claimed;
        let id = claim.run.clone();
        tracing::info!(
            run = %id,
            workflow = %run.workflow,
            generation = %claim.generation,
            worker = %self.name,
            "run claimed"
        );
        let mut ctx = RunContext::new(
            Arc::clone(self.storage()),
            claim.clone(),
            Arc::clone(self.engine.retry_pause()),
            Arc::clone(self.engine.metrics()),
            run.workflow.clone(),
        );
        let result = match (
            self.engine.workflow(&run.workflow),
            serde_json::from_str::<Value>(&run.input),
        ) {
            (Some(workflow), Ok(input)) => {
                tokio::select! {
                    biased;
                    lost = self.keep(&claim) => Err(RunError::Lost(lost)),
                    result = workflow.run(&mut ctx, input) => result,
                }
            }
            (None, _) => Err(RunError::Lost(StoreError::invalid(
                "the run's workflow is not registered",
            ))),
            (_, Err(_)) => Err(RunError::Lost(StoreError::corrupt(
                "the run's input is not JSON",
            ))),
        };
        let store = self.storage().workflows();
        let end = match result {
            Ok(output) => store
                .finish(&claim, Ok(output.to_string()))
                .await
                .map(|_| ExecutionEnd::Succeeded),
            Err(RunError::Failed(error)) => store
                .finish(&claim, Err(error.journaled().clone()))
                .await
                .map(|_| ExecutionEnd::Failed),
            Err(RunError::Suspended) => store
                .suspend(&claim, ctx.wake_after())
                .await
                .map(|_| ExecutionEnd::Suspended),
            // A run whose stored state cannot be read never will be: end it rather than have it
            // claimed again after every claim expiry.
            Err(RunError::Lost(error))
                if matches!(error.kind(), ErrorKind::Corrupt | ErrorKind::Invalid) =>
            {
                tracing::warn!(run = %id, error = %ErrorChain(&error), "the run's stored state cannot be read; it fails");
                let unreadable = JournaledError::new(StepError::RUN_UNREADABLE, false);
                store
                    .finish(&claim, Err(unreadable))
                    .await
                    .map(|_| ExecutionEnd::Failed)
            }
            Err(RunError::Lost(error)) => Err(error),
        };
        let end = end.unwrap_or_else(|error| {
            tracing::warn!(run = %id, error = %ErrorChain(&error), "run lost; it resumes once its claim expires");
            ExecutionEnd::Lost
        });
        tracing::info!(run = %id, end = ?end, "execution ended");
        Execution { run: id, end }
    }

    /// Heartbeats `claim` every third of its time-to-live; returns only when the claim is lost.
    async fn keep(&self, claim: &Claim) -> StoreError {
        let mut claim = claim.clone();
        loop {
            tokio::time::sleep(self.settings.heartbeat_every()).await;
            match self
                .storage()
                .workflows()
                .heartbeat(&claim, self.settings.claim_ttl)
                .await
            {
                Ok(renewed) => claim = renewed,
                Err(error) if error.is_retryable() => {
                    tracing::warn!(run = %claim.run, error = %ErrorChain(&error), "heartbeat failed; trying again");
                }
                Err(error) => return error,
            }
        }
    }
}
