//! The start protocol's workflow service, over Fermata's durable workflow engine: `start()`
//! creates a run of the operation kind's workflow with the operation ID as its only input, and a
//! run counts as over when it ended or no longer exists.

use async_trait::async_trait;
use fermata_schema_core::SafeError;
use fermata_store::schema::{Operation, OperationKind};
use fermata_store::{ErrorChain, ErrorKind, RunId};
use fermata_workflow::Engine;
use serde::{Deserialize, Serialize};

use crate::operations::{StartFailure, Workflows};
use crate::safe_context::SafeContext;

/// The workflow that runs each kind of operation.
pub fn workflow_name(kind: OperationKind) -> &'static str {
    match kind {
        OperationKind::Inventory => "schema-inventory",
        OperationKind::Refresh => "schema-refresh",
        OperationKind::Verification => "schema-verification",
    }
}

/// What a schema workflow is started with: the operation ID, nothing else.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunInput {
    pub operation: fermata_store::schema::OperationId,
}

/// [`Workflows`] over the engine.
#[derive(Debug, Clone)]
pub struct EngineWorkflows {
    engine: Engine,
}

impl EngineWorkflows {
    pub fn new(engine: Engine) -> Self {
        EngineWorkflows { engine }
    }
}

#[async_trait]
impl Workflows for EngineWorkflows {
    async fn start(&self, operation: &Operation) -> Result<String, StartFailure> {
        let input = serde_json::to_value(RunInput {
            operation: operation.id,
        })
        // A struct of one ID always serializes; were it ever to fail, nothing was started.
        .map_err(|_| StartFailure::Definite)?;
        match self
            .engine
            .start(workflow_name(operation.kind), &input)
            .await
        {
            Ok(run) => Ok(run.0),
            // Refused before anything was written: no workflow of that name, or a taken ID.
            Err(error) if matches!(error.kind(), ErrorKind::Invalid | ErrorKind::Conflict) => {
                tracing::warn!(error = %ErrorChain(&error), operation = %operation.id, "the workflow engine refused a start");
                Err(StartFailure::Definite)
            }
            // The insert may or may not have committed.
            Err(error) => {
                tracing::warn!(error = %ErrorChain(&error), operation = %operation.id, "a workflow start has no certain outcome");
                Err(StartFailure::Uncertain)
            }
        }
    }

    async fn run_is_over(&self, run_id: &str) -> Result<bool, SafeError> {
        let run = self
            .engine
            .run_status(&RunId(run_id.to_owned()))
            .await
            .context("read the workflow run")?;
        Ok(run.is_none_or(|run| run.state.is_terminal()))
    }

    async fn resume(
        &self,
        run_id: &str,
        hook: &str,
        idempotency_key: &str,
        payload: &serde_json::Value,
    ) -> Result<(), SafeError> {
        match self
            .engine
            .deliver_hook(&RunId(run_id.to_owned()), hook, idempotency_key, payload)
            .await
        {
            Ok(_) => Ok(()),
            // The run ended, or its wait timed out: it reads the decision from the review row.
            Err(error) if matches!(error.kind(), ErrorKind::Missing | ErrorKind::Conflict) => {
                tracing::info!(run = run_id, hook, "a hook found its run no longer waiting");
                Ok(())
            }
            Err(error) => Err(error).context("deliver the review hook"),
        }
    }
}
