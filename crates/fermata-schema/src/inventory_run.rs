//! The inventory workflow: binds its run to the operation, discovers the databases the snapshot
//! account can see, records the immutable inventory (header and ordered names) and ends the
//! operation. It never takes the global lease. A failure that is not retried, or that outlived
//! its retries, ends the operation `failed` with its safe error, and every database still without
//! a result `failed` with the same reason; [`run_operation`] does that for every schema workflow.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fermata_schema_core::{DatabaseName, ErrorCode, SafeError};
use fermata_store::schema::{
    DatabaseReport, INVENTORY_LIFETIME, InventoryId, NewInventory, OperationId, OperationState,
    Transition,
};
use fermata_store::{ErrorChain, Storage};
use fermata_workflow::{RunContext, RunError, Workflow};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::engine::{RunInput, workflow_name};
use crate::inventory::discover;
use crate::notify::{EventKind, Notifier};
use crate::operations::begin_run;
use crate::safe_context::{SafeCode, SafeContext};
use crate::source::SourceSettings;
use crate::step_failure::{run_failed, safe_error};
use crate::tracked::Progress;

/// What discovery found, as the run's journal keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Found {
    server_version: String,
    databases: Vec<DatabaseName>,
    /// Visible databases `[schema] ignore_databases` left out.
    #[serde(default)]
    ignored: Vec<DatabaseName>,
}

/// The inventory workflow.
#[derive(Clone)]
pub struct InventoryWorkflow {
    storage: Arc<dyn Storage>,
    source: Option<SourceSettings>,
    lifetime: Duration,
    /// Which databases the inventory leaves out.
    filter: crate::Filter,
    /// Where a failure is told.
    notifier: Notifier,
}

impl std::fmt::Debug for InventoryWorkflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InventoryWorkflow")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl InventoryWorkflow {
    /// Discovers on `source`; with no source configured every inventory fails with
    /// `SOURCE_NOT_CONFIGURED`.
    pub fn new(storage: Arc<dyn Storage>, source: Option<SourceSettings>) -> Self {
        InventoryWorkflow {
            storage,
            source,
            lifetime: INVENTORY_LIFETIME,
            filter: crate::Filter::default(),
            notifier: Notifier::default(),
        }
    }

    /// Tells `notifier` when an inventory fails.
    #[must_use]
    pub fn with_notifier(mut self, notifier: Notifier) -> Self {
        self.notifier = notifier;
        self
    }

    /// Leaves out the databases `filter` ignores.
    #[must_use]
    pub fn with_filter(mut self, filter: crate::Filter) -> Self {
        self.filter = filter;
        self
    }

    async fn execute(&self, ctx: &mut RunContext, id: OperationId) -> Result<Value, RunError> {
        let storage = &*self.storage;
        let progress = Progress {
            storage,
            operation: id,
            lease_ttl: None,
        };
        let run_id = ctx.run_id().0.clone();
        let actor: String = progress
            .step(ctx, "bind", |_| {
                let run_id = run_id.clone();
                async move { Ok(begin_run(storage, id, &run_id).await?.actor.0) }
            })
            .await?;
        let found: Found = progress
            .step(ctx, "discover", |_| async {
                let source = self
                    .source
                    .as_ref()
                    .ok_or_else(|| SafeError::new(ErrorCode::SourceNotConfigured))?;
                let mut connection = source.connect().await?;
                let discovery = discover(&mut connection).await;
                drop(connection);
                let discovery = discovery?;
                let (ignored, databases): (Vec<_>, Vec<_>) = discovery
                    .databases
                    .into_iter()
                    .partition(|name| self.filter.ignores_database(name.as_str()));
                if !ignored.is_empty() {
                    tracing::info!(operation = %id, ignored = ignored.len(), "the inventory leaves out databases `ignore_databases` names");
                }
                Ok(Found {
                    server_version: discovery.server_version,
                    databases,
                    ignored,
                })
            })
            .await?;
        let inventory = progress
            .step(ctx, "record", |_| {
                let inventory = NewInventory {
                    // Recording again for the operation returns the first inventory, so a
                    // fresh ID on a repeated attempt is harmless.
                    id: InventoryId::generate(),
                    operation: id,
                    actor: fermata_store::UserId(actor.clone()),
                    server_version: found.server_version.clone(),
                    databases: found.databases.clone(),
                    ignored: found.ignored.clone(),
                    lifetime: self.lifetime,
                };
                async move {
                    storage
                        .schema()
                        .record_inventory(&inventory)
                        .await
                        .map(|recorded| recorded.id)
                        .context("record the inventory")
                }
            })
            .await?;
        progress
            .step(ctx, "finish", |_| async {
                let done = Transition::new(OperationState::Running, OperationState::Succeeded);
                let schema = storage.schema();
                if schema
                    .transition(id, &done)
                    .await
                    .context("move the operation to its next state")?
                    .is_some()
                {
                    return Ok(());
                }
                // Not running: succeeded by an earlier attempt of this step, or ended meanwhile
                // (an administrator's clear, say), which this run reports as its own end.
                let operation = schema
                    .operation(id)
                    .await
                    .context("load the operation")?
                    .ok_or_else(|| SafeError::new(ErrorCode::RunLost))?;
                match operation.state {
                    OperationState::Succeeded => Ok(()),
                    _ => Err(operation
                        .error
                        .unwrap_or_else(|| SafeError::new(ErrorCode::RunLost))),
                }
            })
            .await?;
        tracing::info!(operation = %id, inventory = %inventory, databases = found.databases.len(), "inventory recorded");
        Ok(serde_json::json!({ "inventory": inventory }))
    }
}

#[async_trait]
impl Workflow for InventoryWorkflow {
    fn name(&self) -> &'static str {
        workflow_name(fermata_store::schema::OperationKind::Inventory)
    }

    async fn run(&self, ctx: &mut RunContext, input: Value) -> Result<Value, RunError> {
        run_operation(&*self.storage, &self.notifier, ctx, input, |ctx, id| {
            self.execute(ctx, id)
        })
        .await
    }
}

/// A schema workflow's `run`: reads the operation ID from the run's input and runs `execute`
/// for it; a failure that ends the run ends the operation `failed` with its safe error, and
/// `notifier` emits `operation.failed`.
pub(crate) async fn run_operation<'c, F, Fut>(
    storage: &dyn Storage,
    notifier: &Notifier,
    ctx: &'c mut RunContext,
    input: Value,
    execute: F,
) -> Result<Value, RunError>
where
    F: FnOnce(&'c mut RunContext, OperationId) -> Fut,
    Fut: Future<Output = Result<Value, RunError>>,
{
    let input: RunInput = serde_json::from_value(input)
        .or_code(ErrorCode::StartFailed, "read the run's input")
        .map_err(run_failed)?;
    let run_id = ctx.run_id().0.clone();
    match execute(ctx, input.operation).await {
        Err(RunError::Failed(error)) => {
            fail_operation(storage, input.operation, &run_id, &safe_error(&error)).await;
            notifier
                .emit(storage, EventKind::OperationFailed, input.operation, None)
                .await?;
            Err(RunError::Failed(error))
        }
        other => other,
    }
}

/// Ends operation `id` `failed` with `error` on behalf of run `run_id`, releasing the lease when
/// its kind holds one: only while it is live and not bound to another run. An operation that
/// ended keeps its state.
async fn fail_operation(storage: &dyn Storage, id: OperationId, run_id: &str, error: &SafeError) {
    let schema = storage.schema();
    let operation = match schema.operation(id).await {
        Ok(Some(operation)) => operation,
        Ok(None) => return,
        Err(store_error) => {
            tracing::warn!(operation = %id, error = %ErrorChain(&store_error), "a failed schema operation could not be read to mark it failed");
            return;
        }
    };
    let ours = operation
        .run_id
        .as_deref()
        .is_none_or(|bound| bound == run_id);
    if operation.state.is_terminal() || !ours {
        return;
    }
    let mut failed = Transition::fail(operation.state, error.clone());
    failed.release_lease = operation.kind.takes_lease();
    match schema.transition(id, &failed).await {
        Ok(Some(_)) => {
            tracing::warn!(operation = %id, code = %error.code().name(), error = %ErrorChain(error), "schema operation failed");
            if let Err(store_error) = end_unfinished(storage, id, error).await {
                tracing::warn!(operation = %id, error = %ErrorChain(&store_error), "the databases of a failed schema operation could not all be ended");
            }
        }
        Ok(None) => {}
        Err(store_error) => {
            tracing::warn!(operation = %id, error = %ErrorChain(&store_error), "a failed schema operation could not be marked failed");
        }
    }
}

/// Ends every database of the ended operation `id` that has no result yet `failed`, with the
/// operation's `error` as its reason (and `stale`, as a database that could not be checked), so
/// a terminal operation never shows a database pending or running.
pub(crate) async fn end_unfinished(
    storage: &dyn Storage,
    id: OperationId,
    error: &SafeError,
) -> fermata_store::StoreResult<()> {
    let schema = storage.schema();
    for row in schema.database_results(id).await? {
        if row.report.is_none() {
            let report = DatabaseReport::failed(error.clone(), true);
            schema.finish_database(id, &row.database, &report).await?;
        }
    }
    Ok(())
}
