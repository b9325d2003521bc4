//! Shared by the workflow tests that run schema operations end to end: the engine with the
//! injected retry clock, system administrators, requests, and running a worker until an
//! operation gets where a test waits for it.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use fermata_schema::{
    Administrator, InventoryWorkflow, OperationReport, OperationRequest, Operations, SourceSettings,
};
use fermata_store::schema::{
    InventoryId, OperationId, OperationKind, OperationState, RequestKey, StepKey, StepState,
};
use fermata_store::{NewUser, Role, Storage, UserId, UserName};
use fermata_workflow::{Engine, RetryPause, Worker, Workflow};

/// More executions than any operation needs to reach the state a test waits for.
pub const MAX_EXECUTIONS: usize = 40;

/// Records every retry delay and returns at once: the injected clock.
#[derive(Debug, Default)]
pub struct RecordedPauses(pub Mutex<Vec<Duration>>);

#[async_trait]
impl RetryPause for RecordedPauses {
    async fn pause(&self, delay: Duration) {
        self.0.lock().unwrap().push(delay);
    }
}

/// The engine with the inventory workflow on `source` and `workflow`, whose retries wait on
/// `pauses`.
pub fn engine(
    storage: &Arc<dyn Storage>,
    pauses: &Arc<RecordedPauses>,
    source: SourceSettings,
    workflow: impl Workflow + 'static,
) -> Engine {
    Engine::new(Arc::clone(storage))
        .with_retry_pause(Arc::clone(pauses) as Arc<dyn RetryPause>)
        .register(InventoryWorkflow::new(Arc::clone(storage), Some(source)))
        .register(workflow)
}

/// Creates a system administrator `name` and returns them with a fresh session.
pub async fn administrator(storage: &dyn Storage, id: &str, name: &str) -> Administrator {
    let user = storage
        .users()
        .create_user(&NewUser {
            id: UserId(id.to_owned()),
            name: UserName::new(name).unwrap(),
            password_hash: "$argon2id$unused".to_owned(),
            roles: BTreeSet::from([Role::SystemAdmin]),
        })
        .await
        .unwrap();
    Administrator::from_user(&user, true).unwrap()
}

pub fn request(
    kind: OperationKind,
    key: &str,
    inventory: Option<InventoryId>,
    databases: &[&str],
) -> OperationRequest {
    OperationRequest {
        kind,
        request_key: RequestKey::new(key).unwrap(),
        inventory,
        databases: databases.iter().map(|name| (*name).to_owned()).collect(),
        remove_missing: false,
    }
}

/// Requests an operation of `kind` over `databases` of `inventory` as `admin`, under a new
/// request key.
pub async fn start(
    operations: &Operations,
    admin: &Administrator,
    kind: OperationKind,
    inventory: InventoryId,
    databases: &[&str],
) -> OperationId {
    let key = format!("{}-{}", kind.as_str(), uuid::Uuid::new_v4());
    let request = request(kind, &key, Some(inventory), databases);
    operations.request(admin, &request).await.unwrap().id
}

/// Runs an inventory as `admin` to its end and returns its ID.
pub async fn inventory(
    operations: &Operations,
    worker: &Worker,
    admin: &Administrator,
) -> InventoryId {
    let key = format!("inventory-{}", uuid::Uuid::new_v4());
    let request = request(OperationKind::Inventory, &key, None, &[]);
    let operation = operations.request(admin, &request).await.unwrap();
    let report = run_until(
        operations,
        worker,
        operation.id,
        OperationState::is_terminal,
    )
    .await;
    assert_eq!(report.operation.state, OperationState::Succeeded);
    report.inventory.unwrap().id
}

/// Every object `objects` holds, by location, sorted.
pub async fn object_locations(objects: &dyn object_store::ObjectStore) -> Vec<String> {
    use futures::TryStreamExt;
    let mut all: Vec<String> = objects
        .list(None)
        .map_ok(|meta| meta.location.to_string())
        .try_collect()
        .await
        .unwrap();
    all.sort();
    all
}

/// Step `key` of operation `id`: its state and how many attempts it made.
pub async fn step_attempts(storage: &dyn Storage, id: OperationId, key: &str) -> (StepState, u32) {
    let step = storage
        .schema()
        .step(id, &StepKey::new(key).unwrap())
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no step {key}"));
    (step.state, step.attempts)
}

/// Executes runs with `worker` until operation `id` is in a state `done` accepts.
pub async fn run_until(
    operations: &Operations,
    worker: &Worker,
    id: OperationId,
    done: impl Fn(OperationState) -> bool,
) -> OperationReport {
    for _ in 0..MAX_EXECUTIONS {
        let report = operations.report(id).await.unwrap();
        if done(report.operation.state) {
            return report;
        }
        if worker.run_once().await.unwrap().is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    panic!(
        "operation {id} did not get there: {:?}",
        operations.report(id).await.unwrap().operation
    );
}
