//! Steps of schema workflows: each is a step of the durable run (journaled, retried by the
//! runner's schedule) and also leaves its progress in the operation's own step rows, which
//! outlive the run: every attempt, every retried failure with its safe error, and the outcome.
//! Operations that hold the global lease heartbeat it at every step boundary, in the same
//! transaction as the step row; a lease that is gone stops the run.

use std::future::Future;
use std::time::Duration;

use fermata_schema_core::{ErrorCode, SafeError};
use fermata_store::schema::{OperationId, StepKey, StepProgress, StepState};
use fermata_store::{ErrorChain, ErrorKind, Storage, StoreError};
use fermata_workflow::{Attempt, RunContext, RunError, retry_delay};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::safe_context::SafeContext;
use crate::step_failure::{run_failed, safe_error, step_error};

/// Where a schema workflow's steps record their progress.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Progress<'a> {
    pub(crate) storage: &'a dyn Storage,
    pub(crate) operation: OperationId,
    /// The lease's lifetime after a heartbeat, for operations that hold it.
    pub(crate) lease_ttl: Option<Duration>,
}

impl Progress<'_> {
    async fn record(&self, key: &StepKey, progress: StepProgress) -> Result<(), SafeError> {
        match self
            .storage
            .schema()
            .record_step(self.operation, key, &progress, self.lease_ttl)
            .await
        {
            Ok(_) => Ok(()),
            Err(error) if error.kind() == ErrorKind::Fenced => {
                Err(SafeError::new(ErrorCode::LeaseExpired))
            }
            // The step row says the step ended: a repeated outcome of a step whose run died
            // between recording it here and in the run's journal.
            Err(error) if error.kind() == ErrorKind::Conflict => Ok(()),
            Err(error) => Err(error).context("record the step's progress"),
        }
    }

    /// Runs step `key` of the run, recording it in the operation's step rows.
    pub(crate) async fn step<T, F, Fut>(
        &self,
        ctx: &mut RunContext,
        key: &str,
        mut body: F,
    ) -> Result<T, RunError>
    where
        T: Serialize + DeserializeOwned + Send,
        F: FnMut(Attempt) -> Fut + Send,
        Fut: Future<Output = Result<T, SafeError>> + Send,
    {
        let step_key = StepKey::new(key).map_err(|e: StoreError| RunError::Lost(e))?;
        let step_key = &step_key;
        // The operation's row can be ahead of the run's journal when a worker died between
        // writing the two: a step that failed for good there is not tried again.
        let recorded = self
            .storage
            .schema()
            .step(self.operation, step_key)
            .await
            .map_err(RunError::Lost)?;
        if let Some(failed) = recorded.filter(|step| step.state == StepState::Failed) {
            let error = failed
                .error
                .unwrap_or_else(|| SafeError::new(ErrorCode::RunUnreadable));
            return Err(run_failed(error));
        }
        let outcome = ctx
            .step(key, |attempt| {
                let outcome = body(attempt);
                async move {
                    let result = async {
                        self.record(step_key, StepProgress::Attempt).await?;
                        match outcome.await {
                            Ok(value) => {
                                self.record(step_key, StepProgress::Succeeded).await?;
                                Ok(value)
                            }
                            Err(error) => {
                                let retried =
                                    error.retryable() && retry_delay(attempt.number()).is_some();
                                let progress = if retried {
                                    StepProgress::Retrying(error.clone())
                                } else {
                                    StepProgress::Failed(error.clone())
                                };
                                self.record(step_key, progress).await?;
                                Err(error)
                            }
                        }
                    };
                    result.await.map_err(step_error)
                }
            })
            .await;
        // A step the run's journal ended (its tries ran out while the worker was away, say) ends
        // in the operation's row too; a row that ended already stays as it is.
        if let Err(RunError::Failed(error)) = &outcome
            && let Err(unrecorded) = self
                .record(step_key, StepProgress::Failed(safe_error(error)))
                .await
        {
            tracing::warn!(operation = %self.operation, step = key, error = %ErrorChain(&unrecorded), "a failed step could not be recorded in the operation's step rows");
        }
        outcome
    }
}
