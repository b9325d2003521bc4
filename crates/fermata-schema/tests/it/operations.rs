//! Starting and clearing schema operations, on SQLite and PostgreSQL. The start protocol under
//! fault injection: `start()` succeeding, failing definitely, failing uncertainly, succeeding with
//! a lost response, and a repeated browser request, each checking the operation's state, the
//! lease and that `start()` ran at most once per operation. The clear action: a fresh session,
//! the exact operation ID, an expired lease and a run that is over, or nothing changes.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use fermata_schema::{
    Administrator, Notifier, NotifySettings, OperationRequest, Operations, StartFailure, Workflows,
    begin_run,
};
use fermata_store::schema::{
    DatabaseName, ErrorCode, InventoryId, NewInventory, Operation, OperationId, OperationKind,
    OperationState, Outcome, RequestKey, SafeError, Subject,
};
use fermata_store::{NewUser, Role, RunId, Storage, StoreOptions, UserId, UserName};
use fermata_store_sql::testing::ScratchDatabase;
use fermata_store_testkit::eventually;
use zeroize::Zeroizing;

/// What the fake workflow service does when `start()` is called.
#[derive(Debug, Clone, Copy)]
enum Behaviour {
    Start,
    Refuse,
    Silence,
    /// Creates the run, then the response is lost.
    LoseResponse,
}

struct FakeWorkflows {
    behaviour: Behaviour,
    calls: AtomicUsize,
    /// What `run_is_over` answers.
    runs_over: AtomicBool,
    /// Runs created, by operation.
    runs: Mutex<Vec<(OperationId, String)>>,
}

impl FakeWorkflows {
    fn new(behaviour: Behaviour) -> Arc<Self> {
        Arc::new(FakeWorkflows {
            behaviour,
            calls: AtomicUsize::new(0),
            runs_over: AtomicBool::new(false),
            runs: Mutex::default(),
        })
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn run_of(&self, id: OperationId) -> Option<String> {
        let runs = self.runs.lock().unwrap();
        runs.iter()
            .find(|(op, _)| *op == id)
            .map(|(_, run)| run.clone())
    }
}

#[async_trait]
impl Workflows for FakeWorkflows {
    async fn start(&self, operation: &Operation) -> Result<String, StartFailure> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        // Give a concurrent repeated request every chance to call start() as well.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let run = format!("run-{}", uuid::Uuid::new_v4());
        match self.behaviour {
            Behaviour::Refuse => Err(StartFailure::Definite),
            Behaviour::Silence => Err(StartFailure::Uncertain),
            Behaviour::Start | Behaviour::LoseResponse => {
                self.runs.lock().unwrap().push((operation.id, run.clone()));
                if matches!(self.behaviour, Behaviour::LoseResponse) {
                    Err(StartFailure::Uncertain)
                } else {
                    Ok(run)
                }
            }
        }
    }

    async fn run_is_over(&self, _run_id: &str) -> Result<bool, SafeError> {
        Ok(self.runs_over.load(Ordering::SeqCst))
    }

    async fn resume(
        &self,
        _run_id: &str,
        _hook: &str,
        _idempotency_key: &str,
        _payload: &serde_json::Value,
    ) -> Result<(), SafeError> {
        Ok(())
    }
}

struct Fixture {
    storage: Arc<dyn Storage>,
    admin: Administrator,
    inventory: InventoryId,
}

async fn fixture(scratch: ScratchDatabase) -> Fixture {
    let storage: Arc<dyn Storage> = Arc::new(scratch.open(StoreOptions::default()).await);
    let user = storage
        .users()
        .create_user(&NewUser {
            id: UserId("u-admin".to_owned()),
            name: UserName::new("ada").unwrap(),
            password_hash: "$argon2id$unused".to_owned(),
            roles: BTreeSet::from([Role::SystemAdmin]),
        })
        .await
        .unwrap();
    let admin = Administrator::from_user(&user, false).unwrap();
    // An inventory, as the inventory workflow records it.
    let discovery = Operations::new(Arc::clone(&storage), FakeWorkflows::new(Behaviour::Start))
        .request(&admin, &request(OperationKind::Inventory, "discover", &[]))
        .await
        .unwrap();
    let inventory = storage
        .schema()
        .record_inventory(&NewInventory {
            id: InventoryId::generate(),
            operation: discovery.id,
            actor: admin.user().clone(),
            server_version: "11.4.2-MariaDB".to_owned(),
            databases: ["app", "billing"]
                .into_iter()
                .map(|n| DatabaseName::new(n).unwrap())
                .collect(),
            ignored: Vec::new(),
            lifetime: Duration::from_secs(3600),
        })
        .await
        .unwrap();
    Fixture {
        storage,
        admin,
        inventory: inventory.id,
    }
}

fn request(kind: OperationKind, key: &str, databases: &[&str]) -> OperationRequest {
    OperationRequest {
        kind,
        request_key: RequestKey::new(key).unwrap(),
        inventory: None,
        databases: databases.iter().map(|n| (*n).to_owned()).collect(),
        remove_missing: false,
    }
}

impl Fixture {
    fn refresh(&self, key: &str) -> OperationRequest {
        OperationRequest {
            inventory: Some(self.inventory),
            ..request(OperationKind::Refresh, key, &["billing", "app"])
        }
    }

    fn operations(&self, workflows: &Arc<FakeWorkflows>) -> Operations {
        Operations::new(
            Arc::clone(&self.storage),
            Arc::clone(workflows) as Arc<dyn Workflows>,
        )
    }

    async fn lease_holder(&self) -> Option<OperationId> {
        self.storage
            .schema()
            .schema_lease()
            .await
            .unwrap()
            .map(|lease| lease.operation)
    }
}

async fn a_started_operation_is_bound_to_its_run(scratch: ScratchDatabase) {
    let fx = fixture(scratch).await;
    let workflows = FakeWorkflows::new(Behaviour::Start);
    let operation = fx
        .operations(&workflows)
        .request(&fx.admin, &fx.refresh("browser-1"))
        .await
        .unwrap();
    assert_eq!(operation.state, OperationState::Starting);
    assert_eq!(workflows.calls(), 1);
    assert_eq!(operation.run_id, workflows.run_of(operation.id));
    assert_eq!(fx.lease_holder().await, Some(operation.id));
    let selected: Vec<_> = fx
        .storage
        .schema()
        .database_results(operation.id)
        .await
        .unwrap()
        .into_iter()
        .map(|row| row.database.as_str().to_owned())
        .collect();
    assert_eq!(
        selected,
        ["app", "billing"],
        "inventory order, not request order"
    );

    // The workflow's first step finds its run already bound and moves on.
    let run = operation.run_id.clone().unwrap();
    let running = begin_run(&*fx.storage, operation.id, &run).await.unwrap();
    assert_eq!(running.state, OperationState::Running);
    assert!(
        begin_run(&*fx.storage, operation.id, "another-run")
            .await
            .is_err()
    );
}

async fn a_definite_refusal_fails_the_operation_and_releases_the_lease(scratch: ScratchDatabase) {
    let fx = fixture(scratch).await;
    let workflows = FakeWorkflows::new(Behaviour::Refuse);
    let webhooks = NotifySettings {
        urls: vec!["http://127.0.0.1:9/hook".to_owned()],
        secret: Arc::new(Zeroizing::new(b"a webhook secret".to_vec())),
    };
    let operation = fx
        .operations(&workflows)
        .with_notifier(Notifier::new(Some(&webhooks)))
        .request(&fx.admin, &fx.refresh("browser-1"))
        .await
        .unwrap();
    assert_eq!(operation.state, OperationState::Failed);
    assert_eq!(operation.error.unwrap().code(), ErrorCode::StartFailed);
    assert_eq!(fx.lease_holder().await, None);
    assert_eq!(workflows.calls(), 1);
    // The failure happened outside any run, and is notified all the same: its durable
    // `operation.failed` delivery run exists.
    let delivery = RunId(format!("schema-notify-operation.failed:{}", operation.id));
    assert!(
        fx.storage
            .workflows()
            .run(&delivery)
            .await
            .unwrap()
            .is_some(),
        "no delivery run for the refused start"
    );
    // Repeating the request returns the failed operation; start() is not called again.
    let again = fx
        .operations(&workflows)
        .request(&fx.admin, &fx.refresh("browser-1"))
        .await
        .unwrap();
    assert_eq!(again.id, operation.id);
    assert_eq!(workflows.calls(), 1);
}

async fn an_uncertain_start_keeps_the_lease_until_expiry(scratch: ScratchDatabase) {
    let fx = fixture(scratch).await;
    let workflows = FakeWorkflows::new(Behaviour::Silence);
    let operations = fx.operations(&workflows);
    let operation = operations
        .request(&fx.admin, &fx.refresh("browser-1"))
        .await
        .unwrap();
    assert_eq!(operation.state, OperationState::StartUnknown);
    assert_eq!(operation.error.unwrap().code(), ErrorCode::StartUnknown);
    assert!(operation.run_id.is_none());
    assert_eq!(fx.lease_holder().await, Some(operation.id));

    let again = operations
        .request(&fx.admin, &fx.refresh("browser-1"))
        .await
        .unwrap();
    assert_eq!(
        (again.id, again.state),
        (operation.id, OperationState::StartUnknown)
    );
    assert_eq!(workflows.calls(), 1, "start() ran twice for one operation");

    // Another refresh is refused with a lock error naming the holder; inventory still runs.
    let refused = operations
        .request(&fx.admin, &fx.refresh("browser-2"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), ErrorCode::LeaseHeld);
    assert_eq!(refused.subject(), Some(&Subject::Operation(operation.id.0)));
    let inventory = operations
        .request(
            &fx.admin,
            &request(OperationKind::Inventory, "browser-3", &[]),
        )
        .await
        .unwrap();
    assert_ne!(inventory.id, operation.id);
    assert_eq!(inventory.kind, OperationKind::Inventory);
    assert_eq!(fx.lease_holder().await, Some(operation.id));
}

async fn a_lost_response_is_bound_by_the_first_step(scratch: ScratchDatabase) {
    let fx = fixture(scratch).await;
    let workflows = FakeWorkflows::new(Behaviour::LoseResponse);
    let operation = fx
        .operations(&workflows)
        .request(&fx.admin, &fx.refresh("browser-1"))
        .await
        .unwrap();
    assert_eq!(operation.state, OperationState::StartUnknown);
    assert!(operation.run_id.is_none());
    // The run exists after all; its first step binds it and the operation runs.
    let run = workflows.run_of(operation.id).expect("the run was created");
    let running = begin_run(&*fx.storage, operation.id, &run).await.unwrap();
    assert_eq!(running.state, OperationState::Running);
    assert_eq!(
        running.error, None,
        "START_UNKNOWN outlived the uncertainty"
    );
    assert_eq!(running.run_id.as_deref(), Some(run.as_str()));
    let lease = fx.storage.schema().schema_lease().await.unwrap().unwrap();
    assert_eq!(lease.run_id.as_deref(), Some(run.as_str()));
    assert_eq!(workflows.calls(), 1);
}

async fn repeated_browser_requests_create_one_operation(scratch: ScratchDatabase) {
    let fx = fixture(scratch).await;
    let workflows = FakeWorkflows::new(Behaviour::Start);
    let operations = fx.operations(&workflows);
    let requests = (0..5).map(|_| {
        let operations = operations.clone();
        let admin = fx.admin.clone();
        let request = fx.refresh("browser-double-click");
        tokio::spawn(async move { operations.request(&admin, &request).await.unwrap() })
    });
    let answers: Vec<_> = futures::future::join_all(requests)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let ids: BTreeSet<_> = answers.iter().map(|op| op.id).collect();
    assert_eq!(ids.len(), 1, "{answers:?}");
    assert_eq!(workflows.calls(), 1, "start() ran more than once");
    let recent = operations.recent(10).await.unwrap();
    assert_eq!(
        recent
            .iter()
            .filter(|op| op.kind == OperationKind::Refresh)
            .count(),
        1
    );
}

async fn bad_selections_are_refused_before_anything_is_written(scratch: ScratchDatabase) {
    let fx = fixture(scratch).await;
    let workflows = FakeWorkflows::new(Behaviour::Start);
    let operations = fx.operations(&workflows);
    let with = |databases: &[&str]| OperationRequest {
        inventory: Some(fx.inventory),
        ..request(OperationKind::Verification, "browser", databases)
    };
    let code = |result: Result<Operation, SafeError>| result.unwrap_err().code();
    assert_eq!(
        code(operations.request(&fx.admin, &with(&[])).await),
        ErrorCode::EmptySelection
    );
    assert_eq!(
        code(operations.request(&fx.admin, &with(&["nope"])).await),
        ErrorCode::DatabaseNotInInventory
    );
    let unknown_inventory = OperationRequest {
        inventory: Some(InventoryId::generate()),
        ..with(&["app"])
    };
    assert_eq!(
        code(operations.request(&fx.admin, &unknown_inventory).await),
        ErrorCode::InventoryMissing
    );
    assert_eq!(workflows.calls(), 0);
    assert_eq!(fx.lease_holder().await, None);
}

async fn clearing_needs_a_fresh_session_the_exact_id_and_an_expired_lease_of_an_ended_run(
    scratch: ScratchDatabase,
) {
    let fx = fixture(scratch).await;
    let workflows = FakeWorkflows::new(Behaviour::Start);
    let brief = Duration::from_millis(1500);
    let operations = fx.operations(&workflows).with_lease_ttl(brief);
    let operation = operations
        .request(&fx.admin, &fx.refresh("browser-1"))
        .await
        .unwrap();
    let typed = operation.id.to_string();
    let user = fx
        .storage
        .users()
        .user_by_id(fx.admin.user())
        .await
        .unwrap()
        .unwrap();
    let fresh = Administrator::from_user(&user, true).unwrap();
    let code = |result: Result<Operation, SafeError>| result.unwrap_err().code();

    // A stale session, a non-admin, or anything but the exact ID is refused.
    assert_eq!(
        code(operations.clear_lease(&fx.admin, &typed).await),
        ErrorCode::AccessDenied
    );
    let mut plain_user = user.clone();
    plain_user.roles.clear();
    assert_eq!(
        Administrator::from_user(&plain_user, true)
            .unwrap_err()
            .code(),
        ErrorCode::AccessDenied
    );
    for wrong in [
        typed.to_uppercase(),
        format!(" {typed}"),
        format!("{{{typed}}}"),
        String::new(),
    ] {
        assert_eq!(
            code(operations.clear_lease(&fresh, &wrong).await),
            ErrorCode::OperationMissing,
            "{wrong:?}"
        );
    }
    assert_eq!(
        code(
            operations
                .clear_lease(&fresh, &OperationId::generate().to_string())
                .await
        ),
        ErrorCode::LeaseNotHeld
    );
    // A live lease is never cleared.
    assert_eq!(
        code(operations.clear_lease(&fresh, &typed).await),
        ErrorCode::LeaseNotExpired
    );

    // Expired, but the run is still active: refused.
    let schema = fx.storage.schema();
    let expired = || async {
        let now = schema.clock().await.unwrap();
        schema
            .schema_lease()
            .await
            .unwrap()
            .is_some_and(|lease| lease.is_expired(now))
    };
    eventually("the lease to expire", expired).await;
    // Until cleared, the expired lease still blocks a new refresh, which says to clear it.
    let blocked = operations
        .request(&fx.admin, &fx.refresh("browser-2"))
        .await
        .unwrap_err();
    assert_eq!(blocked.code(), ErrorCode::LeaseNeedsClearing);
    assert_eq!(
        code(operations.clear_lease(&fresh, &typed).await),
        ErrorCode::RunStillActive
    );
    assert_eq!(fx.lease_holder().await, Some(operation.id));

    // Once the run is over, the clear action fails the operation and removes the lease.
    workflows.runs_over.store(true, Ordering::SeqCst);
    let cleared = operations.clear_lease(&fresh, &typed).await.unwrap();
    assert_eq!(cleared.state, OperationState::Failed);
    assert_eq!(cleared.error.unwrap().code(), ErrorCode::LeaseCleared);
    assert_eq!(fx.lease_holder().await, None);
    // No database of the cleared operation is left pending: each failed with its reason.
    let report = operations.report(operation.id).await.unwrap();
    assert!(!report.databases.is_empty());
    for row in &report.databases {
        let result = row.report.as_ref().expect("every database has an outcome");
        assert_eq!(result.outcome, Outcome::Failed);
        assert_eq!(
            result.error.as_ref().map(SafeError::code),
            Some(ErrorCode::LeaseCleared)
        );
    }
    assert_eq!(
        code(operations.clear_lease(&fresh, &typed).await),
        ErrorCode::LeaseNotHeld
    );
    let next = operations
        .request(&fx.admin, &fx.refresh("browser-3"))
        .await
        .unwrap();
    assert_eq!(fx.lease_holder().await, Some(next.id));
}

async fn a_reused_request_key_is_answered_first_and_refused_for_another_request(
    scratch: ScratchDatabase,
) {
    let fx = fixture(scratch).await;
    let workflows = FakeWorkflows::new(Behaviour::Start);
    let operations = fx.operations(&workflows);
    let first = operations
        .request(&fx.admin, &fx.refresh("browser-1"))
        .await
        .unwrap();
    // The same request, its selection in another order and repeated: the same operation.
    let same = OperationRequest {
        databases: vec!["app".to_owned(), "billing".to_owned(), "app".to_owned()],
        ..fx.refresh("browser-1")
    };
    assert_eq!(
        operations.request(&fx.admin, &same).await.unwrap().id,
        first.id
    );
    // Another selection, or another kind, under the same key is refused, naming the operation.
    for other in [
        OperationRequest {
            databases: vec!["app".to_owned()],
            ..fx.refresh("browser-1")
        },
        OperationRequest {
            kind: OperationKind::Verification,
            ..fx.refresh("browser-1")
        },
    ] {
        let refused = operations.request(&fx.admin, &other).await.unwrap_err();
        assert_eq!(refused.code(), ErrorCode::RequestKeyReused);
        assert_eq!(refused.subject(), Some(&Subject::Operation(first.id.0)));
    }
    assert_eq!(workflows.calls(), 1);
}

async fn an_inventory_whose_run_is_gone_is_ended(scratch: ScratchDatabase) {
    let fx = fixture(scratch).await;
    let workflows = FakeWorkflows::new(Behaviour::Start);
    let operations = fx.operations(&workflows);
    let inventory = operations
        .request(
            &fx.admin,
            &request(OperationKind::Inventory, "discover-2", &[]),
        )
        .await
        .unwrap();
    let refresh = operations
        .request(&fx.admin, &fx.refresh("browser-1"))
        .await
        .unwrap();
    // While the runs live, nothing changes.
    assert_eq!(
        operations.settle(inventory.id).await.unwrap().state,
        OperationState::Starting
    );
    assert_eq!(operations.settle_abandoned().await.unwrap(), 0);
    // The runs end without ending their operations: the inventory fails with RUN_LOST; the
    // refresh keeps its lease for the clear action.
    workflows.runs_over.store(true, Ordering::SeqCst);
    // Two inventories: this one and the fixture's discovery, whose run ended as well.
    assert_eq!(operations.settle_abandoned().await.unwrap(), 2);
    let ended = operations.report(inventory.id).await.unwrap().operation;
    assert_eq!(ended.state, OperationState::Failed);
    assert_eq!(ended.error.unwrap().code(), ErrorCode::RunLost);
    let kept = operations.settle(refresh.id).await.unwrap();
    assert_eq!(kept.state, OperationState::Starting);
    assert_eq!(fx.lease_holder().await, Some(refresh.id));
}

on_both_engines!(
    a_started_operation_is_bound_to_its_run,
    a_definite_refusal_fails_the_operation_and_releases_the_lease,
    an_uncertain_start_keeps_the_lease_until_expiry,
    a_lost_response_is_bound_by_the_first_step,
    repeated_browser_requests_create_one_operation,
    bad_selections_are_refused_before_anything_is_written,
    clearing_needs_a_fresh_session_the_exact_id_and_an_expired_lease_of_an_ended_run,
    a_reused_request_key_is_answered_first_and_refused_for_another_request,
    an_inventory_whose_run_is_gone_is_ended,
);
