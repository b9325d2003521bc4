//! Shared by the workflow tests that run schema operations end to end: the injected retry clock,
//! system administrators, requests, and running a worker until an operation gets where a test
//! waits for it.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use fermata_schema::{Administrator, OperationReport, OperationRequest, Operations};
use fermata_store::schema::{InventoryId, OperationId, OperationKind, OperationState, RequestKey};
use fermata_store::{NewUser, Role, Storage, UserId, UserName};
use fermata_workflow::{RetryPause, Worker};

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
    }
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
