//! The inventory operation end to end: requested through the operations service, run by a
//! worker of the durable workflow engine, and read back through the operation's report and the
//! store, on a SQLite application database and the MariaDB server the test command provisions
//! (`FERMATA_TEST_MYSQL_URL`). What the snapshot account sees is recorded exactly; a refused
//! login fails at once and shows nothing of the account; a refused connection is retried on the
//! engine's schedule; a missing source fails as a configuration error; a repeated request starts
//! one run.

use crate::support;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use fermata_schema::{
    Administrator, EngineWorkflows, InventoryWorkflow, OperationReport, OperationRequest,
    Operations, SourceSettings,
};
use fermata_store::schema::{
    ErrorCode, ErrorStage, OperationId, OperationKind, OperationState, OperationStep, RequestKey,
    SafeError, StepKey, StepState,
};
use fermata_store::{NewUser, Role, RunId, RunState, Storage, StoreOptions, UserId, UserName};
use fermata_store_sql::Database;
use fermata_store_sql::testing::ScratchDatabase;
use fermata_workflow::{Engine, ExecutionEnd, Worker, WorkerSettings};
use sqlx::mysql::MySqlConnection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{ConnectOptions, Executor};
use support::{admin, quoted, settings, snapshot_account, unique};

/// The steps of the inventory workflow, in order.
const STEPS: [&str; 4] = ["bind", "discover", "record", "finish"];

/// More executions than any inventory run needs: one executes it to its end.
const MAX_EXECUTIONS: usize = 10;

/// An application database with the inventory workflow registered, its operations service, one
/// worker and a system administrator.
struct Harness {
    storage: Arc<dyn Storage>,
    admin: Administrator,
    operations: Operations,
    worker: Worker,
    /// The SQLite file, for reading rows exactly as stored.
    path: PathBuf,
}

async fn harness(source: Option<SourceSettings>) -> Harness {
    let scratch = ScratchDatabase::sqlite();
    let Database::Sqlite { path } = &scratch.database else {
        unreachable!("a SQLite scratch database")
    };
    let path = path.clone();
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
    let engine = Engine::new(Arc::clone(&storage))
        .register(InventoryWorkflow::new(Arc::clone(&storage), source));
    let operations = Operations::new(
        Arc::clone(&storage),
        Arc::new(EngineWorkflows::new(engine.clone())),
    );
    let worker = engine.worker("inventory-test-worker", WorkerSettings::default());
    Harness {
        storage,
        admin,
        operations,
        worker,
        path,
    }
}

fn inventory_request(key: &str) -> OperationRequest {
    OperationRequest {
        kind: OperationKind::Inventory,
        request_key: RequestKey::new(key).unwrap(),
        inventory: None,
        databases: Vec::new(),
        remove_missing: false,
    }
}

impl Harness {
    /// Requests an inventory and executes its run until the operation ends.
    async fn inventory(&self, key: &str) -> OperationReport {
        let operation = self
            .operations
            .request(&self.admin, &inventory_request(key))
            .await
            .unwrap();
        assert_eq!(operation.kind, OperationKind::Inventory);
        assert_eq!(operation.state, OperationState::Starting, "{operation:?}");
        assert!(operation.run_id.is_some(), "the run is bound at start");
        self.run_to_end(operation.id).await
    }

    /// Executes runs, one at a time, until operation `id` is terminal.
    async fn run_to_end(&self, id: OperationId) -> OperationReport {
        for _ in 0..MAX_EXECUTIONS {
            let report = self.operations.report(id).await.unwrap();
            if report.operation.state.is_terminal() {
                return report;
            }
            match self.worker.run_once().await.unwrap() {
                Some(execution) => assert!(
                    matches!(
                        execution.end,
                        ExecutionEnd::Succeeded | ExecutionEnd::Failed
                    ),
                    "{execution:?}"
                ),
                None => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
        let report = self.operations.report(id).await.unwrap();
        assert!(
            report.operation.state.is_terminal(),
            "the operation did not end after {MAX_EXECUTIONS} executions: {:?}",
            report.operation
        );
        report
    }

    async fn step(&self, id: OperationId, key: &str) -> Option<OperationStep> {
        self.storage
            .schema()
            .step(id, &StepKey::new(key).unwrap())
            .await
            .unwrap()
    }

    /// A raw connection to the application database, to read rows exactly as stored.
    async fn raw(&self) -> SqliteConnection {
        SqliteConnectOptions::new()
            .filename(&self.path)
            .connect()
            .await
            .unwrap()
    }

    /// The stored error text of the operation and of its step `key`.
    async fn stored_errors(&self, id: OperationId, key: &str) -> (String, String) {
        let mut raw = self.raw().await;
        let operation: Option<String> =
            sqlx::query_scalar("SELECT error FROM schema_operation WHERE id = ?")
                .bind(id.to_string())
                .fetch_one(&mut raw)
                .await
                .unwrap();
        let step: Option<String> = sqlx::query_scalar(
            "SELECT error FROM schema_operation_step WHERE operation_id = ? AND step_key = ?",
        )
        .bind(id.to_string())
        .bind(key)
        .fetch_one(&mut raw)
        .await
        .unwrap();
        (
            operation.expect("the operation's error is stored"),
            step.expect("the step's error is stored"),
        )
    }

    async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sql)
            .fetch_one(&mut self.raw().await)
            .await
            .unwrap()
    }
}

/// The operation failed with `code` in `stage`, retryable or not, and holds no inventory.
fn assert_failed(report: &OperationReport, code: ErrorCode, stage: ErrorStage, retryable: bool) {
    let operation = &report.operation;
    assert_eq!(operation.state, OperationState::Failed, "{operation:?}");
    assert!(operation.finished_at.is_some());
    let error = operation
        .error
        .as_ref()
        .expect("a failed operation's error");
    assert_eq!(
        (error.code(), error.stage(), error.retryable()),
        (code, stage, retryable),
        "{error}"
    );
    assert!(report.inventory.is_none(), "{:?}", report.inventory);
    assert!(report.lease.is_none());
}

/// Step `key` failed with `code` after `attempts` attempts, in the operation's step rows and in
/// the run's journal.
async fn assert_step_failed(
    hx: &Harness,
    report: &OperationReport,
    key: &str,
    code: ErrorCode,
    attempts: u32,
) {
    let id = report.operation.id;
    let step = hx.step(id, key).await.expect("the step row");
    assert_eq!(
        (step.state, step.attempts),
        (StepState::Failed, attempts),
        "{step:?}"
    );
    assert_eq!(step.error.as_ref().map(SafeError::code), Some(code));
    assert!(step.terminal_at.is_some());
    let run = RunId(report.operation.run_id.clone().expect("a bound run"));
    let journal = hx
        .storage
        .workflows()
        .step(&run, key)
        .await
        .unwrap()
        .expect("the journaled step");
    assert_eq!(journal.attempts, attempts, "{journal:?}");
    let run = hx.storage.workflows().run(&run).await.unwrap().unwrap();
    assert_eq!(run.state, RunState::Failed);
    assert_eq!(run.error.map(|error| error.code), Some(code.name()));
    // Nothing after the failed step ran.
    let after = STEPS.iter().skip_while(|step| **step != key).skip(1);
    for later in after {
        assert!(hx.step(id, later).await.is_none(), "step {later} ran");
    }
    assert!(
        hx.storage
            .schema()
            .inventory_of_operation(id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        hx.storage
            .schema()
            .latest_inventory()
            .await
            .unwrap()
            .is_none()
    );
}

async fn run_sql(admin: &mut MySqlConnection, sql: &str) {
    admin.execute(sql).await.unwrap();
}

#[tokio::test]
async fn an_inventory_records_exactly_what_the_snapshot_account_sees() {
    let mut admin = admin().await;
    let prefix = unique("inv");
    let visible: Vec<String> = [
        "Zeta",
        "alpha",
        "with space",
        "back`tick",
        "ünïcödé_名前",
        "note ♪ bmp",
        "under_score",
        "per%cent",
    ]
    .iter()
    .map(|name| format!("{prefix}{name}"))
    .collect();
    // `underXscore` and `perXYZcent` would match a grant if `_` or `%` were left wildcards.
    let hidden = [
        format!("{prefix}hidden"),
        format!("{prefix}underXscore"),
        format!("{prefix}perXYZcent"),
    ];
    for database in visible.iter().chain(&hidden) {
        run_sql(&mut admin, &format!("CREATE DATABASE {}", quoted(database))).await;
    }
    let (user, password) = snapshot_account(&mut admin, &visible).await;

    let hx = harness(Some(settings(&user, &password))).await;
    let report = hx.inventory("discover-1").await;
    let operation = &report.operation;
    assert_eq!(operation.state, OperationState::Succeeded, "{operation:?}");
    assert!(operation.error.is_none());
    assert!(operation.finished_at.is_some());
    assert!(
        operation.inventory.is_none(),
        "an inventory selects nothing"
    );

    let inventory = report.inventory.clone().expect("the recorded inventory");
    assert_eq!(inventory.operation, operation.id);
    assert_eq!(&inventory.actor, hx.admin.user());
    assert_eq!(operation.actor, inventory.actor);
    assert!(!inventory.server_version.is_empty());
    // Exactly 24 hours, in milliseconds on the database's clock.
    assert_eq!(
        inventory.expires_at.0 - inventory.discovered_at.0,
        24 * 60 * 60 * 1000
    );
    let names: Vec<&str> = inventory.databases.iter().map(|n| n.as_str()).collect();
    let seen: Vec<&str> = names
        .iter()
        .copied()
        .filter(|name| name.starts_with(&prefix))
        .collect();
    let mut expected: Vec<&str> = visible.iter().map(String::as_str).collect();
    expected.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    assert_eq!(seen, expected);
    assert!(
        names.is_sorted_by(|a, b| a.as_bytes() < b.as_bytes()),
        "not in byte order: {names:?}"
    );
    for system in ["information_schema", "mysql", "performance_schema", "sys"] {
        assert!(!names.contains(&system), "{system} listed");
    }

    // The same inventory through the store.
    let schema = hx.storage.schema();
    assert_eq!(
        schema.inventory_of_operation(operation.id).await.unwrap(),
        Some(inventory.clone())
    );
    assert_eq!(
        schema.inventory(inventory.id).await.unwrap(),
        Some(inventory.clone())
    );
    assert_eq!(
        schema.latest_inventory().await.unwrap(),
        Some(inventory.clone())
    );

    for key in STEPS {
        let step = hx.step(operation.id, key).await.expect("a step row");
        assert_eq!(
            (step.state, step.attempts, step.error.as_ref()),
            (StepState::Succeeded, 1, None),
            "{step:?}"
        );
        assert!(step.terminal_at.is_some());
    }
    let run = RunId(operation.run_id.clone().unwrap());
    let run = hx.storage.workflows().run(&run).await.unwrap().unwrap();
    assert_eq!(run.state, RunState::Succeeded);
    assert!(
        run.output
            .as_deref()
            .is_some_and(|output| output.contains(&inventory.id.to_string())),
        "{:?}",
        run.output
    );

    // An inventory never takes the global schema lease.
    assert!(report.lease.is_none());
    assert!(schema.schema_lease().await.unwrap().is_none());
    assert_eq!(
        hx.count("SELECT COUNT(*) FROM schema_lease").await,
        0,
        "the lease table was written"
    );

    for database in visible.iter().chain(&hidden) {
        run_sql(&mut admin, &format!("DROP DATABASE {}", quoted(database))).await;
    }
    run_sql(&mut admin, &format!("DROP USER '{user}'@'127.0.0.1'")).await;
}

#[tokio::test]
async fn a_wrong_password_fails_at_once_and_shows_nothing_of_the_account() {
    let mut admin = admin().await;
    let (user, password) = snapshot_account(&mut admin, &[]).await;
    let wrong = format!("{password}-but-wrong");
    let hx = harness(Some(settings(&user, &wrong))).await;

    let report = hx.inventory("discover-1").await;
    assert_failed(
        &report,
        ErrorCode::AuthenticationFailed,
        ErrorStage::Permission,
        false,
    );
    let id = report.operation.id;
    let bind = hx.step(id, "bind").await.unwrap();
    assert_eq!((bind.state, bind.attempts), (StepState::Succeeded, 1));
    assert_step_failed(&hx, &report, "discover", ErrorCode::AuthenticationFailed, 1).await;

    let (operation_error, step_error) = hx.stored_errors(id, "discover").await;
    for stored in [&operation_error, &step_error] {
        let error = SafeError::from_json(stored).unwrap();
        assert_eq!(error.code(), ErrorCode::AuthenticationFailed);
        for secret in [
            wrong.as_str(),
            password.as_str(),
            user.as_str(),
            "Access denied",
            "127.0.0.1",
        ] {
            assert!(!stored.contains(secret), "{stored} shows {secret}");
        }
    }

    run_sql(&mut admin, &format!("DROP USER '{user}'@'127.0.0.1'")).await;
}

#[tokio::test]
async fn a_missing_privilege_fails_at_once_as_a_permission_error() {
    // A server started with --skip-show-database lists databases only to accounts with the
    // SHOW DATABASES privilege; this account has a grant on one database and not that.
    let mut admin = support::restricted_admin().await;
    let database = unique("granted");
    run_sql(
        &mut admin,
        &format!("CREATE DATABASE {}", support::quoted(&database)),
    )
    .await;
    let (user, password) = snapshot_account(&mut admin, std::slice::from_ref(&database)).await;
    let source = support::settings_on(
        &support::admin_options_of(support::RESTRICTED_MYSQL_URL_VAR),
        &user,
        &password,
    );
    let hx = harness(Some(source)).await;

    let report = hx.inventory("discover-1").await;
    assert_failed(
        &report,
        ErrorCode::PermissionDenied,
        ErrorStage::Permission,
        false,
    );
    assert_step_failed(&hx, &report, "discover", ErrorCode::PermissionDenied, 1).await;

    run_sql(
        &mut admin,
        &format!("DROP DATABASE {}", support::quoted(&database)),
    )
    .await;
    run_sql(&mut admin, &format!("DROP USER '{user}'@'127.0.0.1'")).await;
}

#[tokio::test]
async fn a_refused_connection_is_tried_four_times_then_fails_the_operation() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let mut source = settings("snap", "pw");
    source.port = port;
    let hx = harness(Some(source)).await;

    let report = hx.inventory("discover-1").await;
    assert_failed(
        &report,
        ErrorCode::ConnectionRefused,
        ErrorStage::Connection,
        true,
    );
    assert_step_failed(&hx, &report, "discover", ErrorCode::ConnectionRefused, 4).await;
    let step = hx.step(report.operation.id, "discover").await.unwrap();
    let error = step.error.unwrap();
    assert_eq!(
        (error.stage(), error.retryable()),
        (ErrorStage::Connection, true)
    );
    assert_eq!(report.operation.error, Some(error));
    let (operation_error, step_error) = hx.stored_errors(report.operation.id, "discover").await;
    for stored in [&operation_error, &step_error] {
        assert!(
            !stored.contains(&port.to_string()),
            "{stored} shows the port"
        );
    }
}

#[tokio::test]
async fn without_a_source_the_operation_fails_as_a_configuration_error() {
    let hx = harness(None).await;
    let report = hx.inventory("discover-1").await;
    assert_failed(
        &report,
        ErrorCode::SourceNotConfigured,
        ErrorStage::Configuration,
        false,
    );
    assert_step_failed(&hx, &report, "discover", ErrorCode::SourceNotConfigured, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_repeated_request_returns_the_same_operation_and_starts_one_run() {
    let mut admin = admin().await;
    let (user, password) = snapshot_account(&mut admin, &[]).await;
    let hx = harness(Some(settings(&user, &password))).await;

    // A double click: the same request key, several times at once.
    let requests = (0..5).map(|_| {
        let operations = hx.operations.clone();
        let admin = hx.admin.clone();
        tokio::spawn(async move {
            operations
                .request(&admin, &inventory_request("browser-double-click"))
                .await
                .unwrap()
        })
    });
    let answers: Vec<_> = futures::future::join_all(requests)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let ids: BTreeSet<_> = answers.iter().map(|operation| operation.id).collect();
    assert_eq!(ids.len(), 1, "{answers:?}");
    let id = answers[0].id;
    assert_eq!(hx.count("SELECT COUNT(*) FROM workflow_runs").await, 1);

    let report = hx.run_to_end(id).await;
    assert_eq!(report.operation.state, OperationState::Succeeded);
    let run = report.operation.run_id.clone().expect("a bound run");
    assert!(
        answers
            .iter()
            .all(|answer| answer.run_id.as_ref().is_none_or(|bound| *bound == run)),
        "{answers:?}"
    );

    // Once it has ended, the same request still returns it, unchanged, and starts nothing.
    let again = hx
        .operations
        .request(&hx.admin, &inventory_request("browser-double-click"))
        .await
        .unwrap();
    assert_eq!(again, report.operation);
    assert!(hx.worker.run_once().await.unwrap().is_none());
    assert_eq!(hx.count("SELECT COUNT(*) FROM workflow_runs").await, 1);
    assert_eq!(hx.count("SELECT COUNT(*) FROM schema_operation").await, 1);
    assert_eq!(hx.count("SELECT COUNT(*) FROM schema_inventory").await, 1);

    // Another key is another operation with its own run.
    let other = hx.inventory("browser-next").await;
    assert_ne!(other.operation.id, id);
    assert_eq!(other.operation.state, OperationState::Succeeded);
    assert_eq!(hx.count("SELECT COUNT(*) FROM workflow_runs").await, 2);

    run_sql(&mut admin, &format!("DROP USER '{user}'@'127.0.0.1'")).await;
}
