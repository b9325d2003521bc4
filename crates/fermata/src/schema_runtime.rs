//! Schema operations at run time: the workflow engine with the schema workflows registered, the
//! operations service over it, and the background work of a serving process (a workflow worker
//! and the retention of ended runs).

use std::sync::Arc;
use std::time::Duration;

use fermata_schema::{EngineWorkflows, InventoryWorkflow, Operations, SourceSettings};
use fermata_store::Storage;
use fermata_workflow::{Engine, WorkerSettings};
use tokio_util::sync::CancellationToken;

/// How long an ended run is kept before it is purged. Operations, their results and their step
/// rows are kept: a report stays readable after its run is gone.
pub(crate) const RUN_RETENTION: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// How often ended runs are purged.
const PURGE_EVERY: Duration = Duration::from_secs(60 * 60);
/// How often inventories whose run is gone are ended.
const SETTLE_EVERY: Duration = Duration::from_secs(60);

/// The engine and the operations service of one process.
#[derive(Debug, Clone)]
pub(crate) struct SchemaRuntime {
    pub(crate) engine: Engine,
    pub(crate) operations: Operations,
}

impl SchemaRuntime {
    pub(crate) fn new(storage: Arc<dyn Storage>, source: Option<SourceSettings>) -> Self {
        let engine = Engine::new(Arc::clone(&storage))
            .register(InventoryWorkflow::new(Arc::clone(&storage), source));
        let operations = Operations::new(storage, Arc::new(EngineWorkflows::new(engine.clone())));
        SchemaRuntime { engine, operations }
    }

    /// Executes runs, ends inventories whose run is gone and purges old runs until `stop` is
    /// cancelled.
    pub(crate) async fn work(&self, worker_name: String, stop: CancellationToken) {
        let worker = self.engine.worker(worker_name, WorkerSettings::default());
        let purge = async {
            loop {
                if let Err(error) = self.engine.purge(RUN_RETENTION).await {
                    tracing::warn!(%error, "could not purge ended workflow runs");
                }
                tokio::time::sleep(PURGE_EVERY).await;
            }
        };
        let settle = async {
            loop {
                if let Err(error) = self.operations.settle_abandoned().await {
                    tracing::warn!(code = %error.code().name(), "could not end abandoned inventories");
                }
                tokio::time::sleep(SETTLE_EVERY).await;
            }
        };
        tokio::select! {
            () = worker.run(stop.cancelled()) => {}
            () = purge => {}
            () = settle => {}
        }
    }
}
