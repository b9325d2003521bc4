//! The engine: the registered workflows over one store, and what callers do with runs (start,
//! status, hooks, cancellation, retention).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fermata_metrics::Metrics;
use fermata_store::{
    ErrorKind, HookDelivery, NewRun, Run, RunId, Storage, StoreError, StoreResult,
};
use serde_json::Value;

use crate::context::{RunContext, RunError};
use crate::retry::{RetryPause, TimerPause};
use crate::worker::{Worker, WorkerSettings};

/// A durable workflow: code that a run executes, by replay, until it returns.
///
/// `run` may be executed many times for one run (after a wait, a crash or a lost claim); every
/// effect that must happen once goes through [`RunContext::step`], and everything else it does
/// must lead to the same steps, in the same order, with the same keys, on every execution.
#[async_trait]
pub trait Workflow: Send + Sync + 'static {
    /// The name runs are started under; stable across releases.
    fn name(&self) -> &'static str;

    async fn run(&self, ctx: &mut RunContext, input: Value) -> Result<Value, RunError>;
}

/// The registered workflows over one store. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    storage: Arc<dyn Storage>,
    /// By name; shared with every worker made from this engine.
    workflows: Arc<BTreeMap<&'static str, Arc<dyn Workflow>>>,
    /// What runs wait on between a step's tries.
    pause: Arc<dyn RetryPause>,
    /// Where step attempts are counted: the serving process's metrics, or metrics nobody reads.
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("storage", &self.storage.driver())
            .field("workflows", &self.workflows.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Engine {
    pub fn new(storage: Arc<dyn Storage>) -> Self {
        Engine {
            storage,
            workflows: Arc::default(),
            pause: Arc::new(TimerPause),
            metrics: Arc::default(),
        }
    }

    /// Counts the step attempts of the runs this engine's workers execute in `metrics`.
    #[must_use]
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Waits out retry delays with `pause` instead of tokio's timer (tests inject a clock that
    /// records the delays and returns at once).
    #[must_use]
    pub fn with_retry_pause(mut self, pause: Arc<dyn RetryPause>) -> Self {
        self.pause = pause;
        self
    }

    /// Registers `workflow` under its name.
    ///
    /// # Panics
    ///
    /// When a workflow of that name is registered already: two workflows cannot share the runs
    /// started under one name.
    #[must_use]
    pub fn register(mut self, workflow: impl Workflow) -> Self {
        let name = workflow.name();
        let previous = Arc::make_mut(&mut self.workflows).insert(name, Arc::new(workflow));
        assert!(previous.is_none(), "workflow `{name}` is registered twice");
        self
    }

    /// Starts a run of the registered workflow `workflow` with `input`, under a new ID.
    pub async fn start(&self, workflow: &str, input: &Value) -> Result<RunId, StoreError> {
        self.registered(workflow)?;
        let run = NewRun {
            id: RunId::random(),
            workflow: workflow.to_owned(),
            input: input.to_string(),
        };
        self.storage.workflows().create_run(&run).await?;
        tracing::info!(run = %run.id, workflow, "run started");
        Ok(run.id)
    }

    /// Starts a run of `workflow` with `input` under `id`, a key the caller derives from what the
    /// run stands for (a due time, an event), so that starting it again, from this process or
    /// another, starts nothing. True when this call created the run; false when a run of that
    /// workflow had that ID already. A run of another workflow under the ID is a `Conflict`.
    pub async fn start_once(
        &self,
        workflow: &str,
        id: &RunId,
        input: &Value,
    ) -> Result<bool, StoreError> {
        self.registered(workflow)?;
        start_once(&*self.storage, workflow, id, input).await
    }

    /// `Invalid` unless a workflow is registered under `workflow`.
    fn registered(&self, workflow: &str) -> Result<(), StoreError> {
        if self.workflows.contains_key(workflow) {
            Ok(())
        } else {
            Err(StoreError::invalid(
                "no workflow is registered under that name",
            ))
        }
    }

    /// The run as stored; `None` when it does not exist (never started, or purged).
    pub async fn run_status(&self, id: &RunId) -> StoreResult<Option<Run>> {
        self.storage.workflows().run(id).await
    }

    /// Delivers hook `key` to run `id`; see
    /// [`WorkflowStore::deliver_hook`](fermata_store::WorkflowStore::deliver_hook).
    pub async fn deliver_hook(
        &self,
        id: &RunId,
        key: &str,
        idempotency_key: &str,
        payload: &Value,
    ) -> StoreResult<HookDelivery> {
        let delivery = self
            .storage
            .workflows()
            .deliver_hook(id, key, idempotency_key, &payload.to_string())
            .await?;
        tracing::info!(run = %id, hook = key, ?delivery, "hook delivered");
        Ok(delivery)
    }

    /// Cancels a run that has not ended; false when it had.
    pub async fn cancel(&self, id: &RunId) -> StoreResult<bool> {
        self.storage.workflows().cancel_run(id).await
    }

    /// Deletes the runs that ended more than `retention` ago, with their steps and hooks.
    pub async fn purge(&self, retention: Duration) -> StoreResult<u64> {
        let purged = self.storage.workflows().purge_runs(retention).await?;
        tracing::info!(purged, "ended runs purged");
        Ok(purged)
    }

    /// A worker named `name` (unique among live workers) that executes this engine's runs.
    pub fn worker(&self, name: impl Into<String>, settings: WorkerSettings) -> Worker {
        Worker::new(self.clone(), name.into(), settings)
    }

    pub(crate) fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    pub(crate) fn retry_pause(&self) -> &Arc<dyn RetryPause> {
        &self.pause
    }

    pub(crate) fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    pub(crate) fn workflow(&self, name: &str) -> Option<&Arc<dyn Workflow>> {
        self.workflows.get(name)
    }

    pub(crate) fn workflow_names(&self) -> Vec<String> {
        self.workflows
            .keys()
            .map(|name| (*name).to_owned())
            .collect()
    }
}

/// Starts a run of `workflow` with `input` under `id`, unless a run of that workflow has that
/// ID: how a run hands work to another (`workflow` must be registered with the engine whose
/// workers are to execute it), once whatever number of times it is executed. True when this call
/// created the run. A run of another workflow under the ID is a `Conflict`.
pub async fn start_once(
    storage: &dyn Storage,
    workflow: &str,
    id: &RunId,
    input: &Value,
) -> Result<bool, StoreError> {
    let run = NewRun {
        id: id.clone(),
        workflow: workflow.to_owned(),
        input: input.to_string(),
    };
    match storage.workflows().create_run(&run).await {
        Ok(_) => {
            tracing::info!(run = %id, workflow, "run started");
            Ok(true)
        }
        Err(error) if error.kind() == ErrorKind::Conflict => {
            match storage.workflows().run(id).await? {
                Some(existing) if existing.workflow == workflow => Ok(false),
                _ => Err(error),
            }
        }
        Err(error) => Err(error),
    }
}
