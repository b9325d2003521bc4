//! What a workflow sees while a worker executes its run: memoized steps with retries, hooks,
//! and the ways an execution ends early.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use fermata_store::{
    Claim, ErrorChain, HookWait, RunId, StepRecord, StepState, StepUpdate, Storage, StoreError,
    StoreResultExt,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::retry::{RetryPause, retry_delay};
use crate::step_error::StepError;

/// Why a workflow's execution ended without an output.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The run failed for good; the run ends `failed` with this error.
    #[error("the run failed")]
    Failed(#[source] StepError),
    /// The run waits (for a hook, or until a hook's timeout); this execution ends and the run is
    /// resumed later. Pass it on as [`RunContext::hook`] returned it.
    #[error("the run waits")]
    Suspended,
    /// This worker's claim was taken over, or the store failed: stop working on the run and
    /// leave it as it is; it is resumed from its journal once the claim expires.
    #[error("the run was lost to this worker")]
    Lost(#[source] StoreError),
}

/// One try of a step's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    number: u32,
}

impl Attempt {
    /// 1 for the first try, counting the tries of every execution of the run.
    pub fn number(self) -> u32 {
        self.number
    }

    /// Whether an earlier attempt of this step was recorded. That attempt may have done its
    /// work (an external write, say) and died before its outcome was recorded, so a body with an
    /// external effect reads the external state before doing it again.
    pub fn earlier_attempt_recorded(self) -> bool {
        self.number > 1
    }
}

/// The context of one execution of a run: its ID, its step journal and its hooks, under the
/// claim the worker holds.
#[derive(Debug)]
pub struct RunContext {
    storage: Arc<dyn Storage>,
    claim: Claim,
    /// What the run waits on between a step's tries.
    pause: Arc<dyn RetryPause>,
    /// Set when the run must wait for a hook with a timeout: how long until it may run again.
    /// The worker suspends the run with it; without it, only a hook wakes the run.
    wake_after: Option<Duration>,
}

impl RunContext {
    pub(crate) fn new(storage: Arc<dyn Storage>, claim: Claim, pause: Arc<dyn RetryPause>) -> Self {
        RunContext {
            storage,
            claim,
            pause,
            wake_after: None,
        }
    }

    pub fn run_id(&self) -> &RunId {
        &self.claim.run
    }

    /// How long the run waits once this execution ends with [`RunError::Suspended`]; `None`
    /// when only a hook wakes it.
    pub(crate) fn wake_after(&self) -> Option<Duration> {
        self.wake_after
    }

    /// Runs step `key` once for the run, whatever number of times the run is executed.
    ///
    /// A step that succeeded before returns its recorded output without running, and one that
    /// failed returns its recorded error. Otherwise `body` runs, each attempt recorded as begun
    /// before it runs and its outcome after: a transient error is retried on the schedule of
    /// [`retry_delay`] (continuing the attempts of earlier executions), a permanent one fails the
    /// step at once. `key` must be stable across executions and unique within the run.
    pub async fn step<T, F, Fut>(&mut self, key: &str, mut body: F) -> Result<T, RunError>
    where
        T: Serialize + DeserializeOwned + Send,
        F: FnMut(Attempt) -> Fut + Send,
        Fut: Future<Output = Result<T, StepError>> + Send,
    {
        let run = self.claim.run.clone();
        let store = self.storage.workflows();
        let recorded = store.step(&run, key).await.map_err(RunError::Lost)?;
        let (mut failed_attempts, mut last_error) = match recorded {
            None => (0, None),
            Some(StepRecord {
                state: StepState::Succeeded,
                output,
                ..
            }) => {
                tracing::debug!(run = %run, step = key, "step replayed from the journal");
                return decode(output.as_deref());
            }
            Some(StepRecord {
                state: StepState::Failed,
                error,
                ..
            }) => {
                let error = error.ok_or_else(|| {
                    RunError::Lost(StoreError::corrupt("a failed step has no error"))
                })?;
                return Err(RunError::Failed(error.into()));
            }
            Some(StepRecord {
                state: StepState::Running,
                attempts,
                error,
                ..
            }) => (attempts, error),
        };
        loop {
            if failed_attempts > 0 {
                let Some(delay) = retry_delay(failed_attempts) else {
                    // Every try began and none recorded an outcome that ends the step: their
                    // workers died or lost the run.
                    let error = last_error.map_or_else(
                        || StepError::new(StepError::TIMED_OUT, true),
                        StepError::from,
                    );
                    return self.fail_step(key, error).await;
                };
                tracing::info!(
                    run = %run,
                    step = key,
                    attempt = failed_attempts + 1,
                    delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    "step will be tried again"
                );
                self.pause.pause(delay).await;
            }
            let attempt = Attempt {
                number: failed_attempts + 1,
            };
            self.record(
                key,
                &StepUpdate::Started {
                    attempt: attempt.number,
                },
            )
            .await?;
            tracing::debug!(run = %run, step = key, attempt = attempt.number, "step attempt begins");
            match body(attempt).await {
                Ok(value) => {
                    let output = serde_json::to_string(&value)
                        .or_invalid("a step output does not serialize")
                        .map_err(RunError::Lost)?;
                    self.record(key, &StepUpdate::Succeeded { output }).await?;
                    tracing::info!(run = %run, step = key, attempt = attempt.number, "step succeeded");
                    return Ok(value);
                }
                Err(error) if error.retryable() && retry_delay(attempt.number).is_some() => {
                    tracing::warn!(
                        run = %run,
                        step = key,
                        attempt = attempt.number,
                        error = %ErrorChain(&error),
                        "step attempt failed"
                    );
                    let error = error.journaled().clone();
                    self.record(
                        key,
                        &StepUpdate::AttemptFailed {
                            error: error.clone(),
                        },
                    )
                    .await?;
                    failed_attempts = attempt.number;
                    last_error = Some(error);
                }
                Err(error) => return self.fail_step(key, error).await,
            }
        }
    }

    /// The payload of hook `key`, once delivered. Until then the run waits: this returns
    /// [`RunError::Suspended`], and the run is executed again once the hook arrives.
    pub async fn hook(&mut self, key: &str) -> Result<Value, RunError> {
        match self.wait_for_hook(key, None).await? {
            Some(payload) => Ok(payload),
            // Only a wait that began with a timeout ends without the hook.
            None => Err(RunError::Failed(StepError::new(StepError::TIMED_OUT, true))),
        }
    }

    /// As [`RunContext::hook`], but the wait ends after `timeout` (counted from the first
    /// execution that waited, on the database's clock) with `None`. Once timed out, the hook can
    /// no longer be delivered, so every later execution sees the same.
    pub async fn hook_within(
        &mut self,
        key: &str,
        timeout: Duration,
    ) -> Result<Option<Value>, RunError> {
        self.wait_for_hook(key, Some(timeout)).await
    }

    /// Waits `duration` durably: the run is suspended and executed again once it has passed
    /// (on the database's clock, counted from the first execution that reached this sleep), so
    /// a restart neither shortens nor repeats it. `key` must be stable across executions and
    /// unique within the run; the sleep is a hook wait (`sleep:<key>`) that nothing delivers.
    pub async fn sleep(&mut self, key: &str, duration: Duration) -> Result<(), RunError> {
        // A delivered hook (none is ever sent) would end the sleep as its timeout does.
        self.wait_for_hook(&format!("sleep:{key}"), Some(duration))
            .await?;
        Ok(())
    }

    async fn wait_for_hook(
        &mut self,
        key: &str,
        timeout: Option<Duration>,
    ) -> Result<Option<Value>, RunError> {
        let wait = self
            .storage
            .workflows()
            .await_hook(&self.claim, key, timeout)
            .await
            .map_err(RunError::Lost)?;
        match wait {
            HookWait::Delivered(hook) => decode(Some(&hook.payload)).map(Some),
            HookWait::TimedOut => {
                tracing::info!(run = %self.claim.run, hook = key, "hook wait timed out");
                Ok(None)
            }
            HookWait::Waiting { wake_after } => {
                tracing::info!(run = %self.claim.run, hook = key, "run waits for a hook");
                self.wake_after = wake_after;
                Err(RunError::Suspended)
            }
        }
    }

    async fn record(&self, key: &str, update: &StepUpdate) -> Result<StepRecord, RunError> {
        self.storage
            .workflows()
            .record_step(&self.claim, key, update)
            .await
            .map_err(RunError::Lost)
    }

    async fn fail_step<T>(&self, key: &str, error: StepError) -> Result<T, RunError> {
        tracing::warn!(run = %self.claim.run, step = key, error = %ErrorChain(&error), "step failed");
        self.record(
            key,
            &StepUpdate::Failed {
                error: error.journaled().clone(),
            },
        )
        .await?;
        Err(RunError::Failed(error))
    }
}

/// Reads back JSON the engine wrote.
fn decode<T: DeserializeOwned>(text: Option<&str>) -> Result<T, RunError> {
    text.and_then(|text| serde_json::from_str(text).ok())
        .ok_or_else(|| {
            RunError::Lost(StoreError::corrupt(
                "a journaled value does not decode as the workflow expects",
            ))
        })
}
