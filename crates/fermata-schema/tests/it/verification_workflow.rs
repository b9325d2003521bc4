//! The verification operation end to end on the real parts: a SQLite application database, the
//! MariaDB server the test command provisions (`FERMATA_TEST_MYSQL_URL`), a local git package
//! and the durable workflow engine. Drift (an added column, a dropped index, a changed view, a
//! new table, a dropped view) is reported as `changed`/`stale` with the files that differ, an
//! untouched database as `unchanged`/`fresh`; an unregistered database fails as `unregistered`
//! while the next one still runs; the lease is held while the steps run (a transient failure is
//! retried on the injected clock meanwhile) and released at the end; the registry view reads
//! each database's freshness from its latest check; a drifted database's unified diffs are
//! sealed in the object store, read on request and deleted once past their retention; and a
//! database merged with another table filter than the configured one is verified with the
//! merged one.

use crate::git_support;
use crate::support;
use crate::webhook_support::Receiver;
use crate::workflow_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use fermata_accounts::KeyringHandle;
use fermata_crypto::Keyring;
use fermata_forge::local::LocalGit;
use fermata_schema::artifact::{ArtifactStore, drift_location};
use fermata_schema::drift::DEFAULT_DRIFT_RETENTION;
use fermata_schema::package::{Package, PackageSettings};
use fermata_schema::refresh_run::DEFAULT_CONNECTIONS;
use fermata_schema::registry_view::RegistryFreshness;
use fermata_schema::verification_run::SnapshotProbe;
use fermata_schema::{
    Administrator, DriftDiffs, EngineWorkflows, Notifier, NotifySettings, NotifyWorkflow,
    OperationReport, Operations, RegistryReports, SourceSettings, VerificationSettings,
    VerificationWorkflow,
};
use fermata_store::schema::{
    DatabaseName, ErrorCode, FileChange, FileDifference, Freshness, InventoryId, OperationId,
    OperationKind, OperationState, Outcome, SafeError, SchemaLease, SchemaLeaseStatus, StepState,
};
use fermata_store::{Storage, StoreOptions};
use fermata_store_sql::testing::ScratchDatabase;
use fermata_workflow::{Attempt, Worker, WorkerSettings};
use git_support::TestRepository;
use object_store::ObjectStore;
use sqlx::Executor;
use sqlx::mysql::MySqlConnection;
use support::{admin, quoted, settings, snapshot_account, unique};
use workflow_support::{RecordedPauses, administrator, request, run_until};

/// The schema every test database starts with.
const SCHEMA: &[&str] = &[
    "CREATE TABLE customer (id int NOT NULL PRIMARY KEY, name varchar(50) NOT NULL, \
     KEY k_name (name))",
    "CREATE TABLE orders (id int NOT NULL PRIMARY KEY, customer int NOT NULL, \
     KEY k_customer (customer))",
    "CREATE VIEW recent AS SELECT id FROM orders WHERE id > 100",
    "CREATE VIEW named AS SELECT id, name FROM customer",
];

/// What the probe does in the first database step's first attempt, once the live snapshot is
/// taken; every call also records the lease as the step saw it.
#[derive(Debug)]
enum Fault {
    None,
    /// Fail the first attempt with this (transient) error.
    FailFirst(ErrorCode),
}

#[derive(Debug)]
struct Probe {
    storage: Arc<dyn Storage>,
    fault: Fault,
    /// The lease each call saw, with the attempt's number.
    seen: Mutex<Vec<(u32, Option<SchemaLease>)>>,
}

#[async_trait]
impl SnapshotProbe for Probe {
    async fn snapshot_taken(
        &self,
        _database: &DatabaseName,
        attempt: Attempt,
    ) -> Result<(), SafeError> {
        let lease = self.storage.schema().schema_lease().await.unwrap();
        let first = self.seen.lock().unwrap().is_empty();
        self.seen.lock().unwrap().push((attempt.number(), lease));
        match &self.fault {
            Fault::FailFirst(code) if first => Err(SafeError::new(*code)),
            _ => Ok(()),
        }
    }
}

struct Harness {
    storage: Arc<dyn Storage>,
    /// Where drift diffs are sealed.
    artifacts: ArtifactStore,
    objects: Arc<dyn ObjectStore>,
    admin: Administrator,
    operations: Operations,
    registry: RegistryReports,
    worker: Worker,
    pauses: Arc<RecordedPauses>,
    probe: Arc<Probe>,
    repository: TestRepository,
}

async fn harness(source: SourceSettings, fault: Fault) -> Harness {
    build(source, fault, None).await
}

/// A harness whose verifications post their events to the webhooks of `notify`.
async fn harness_notifying(source: SourceSettings, notify: NotifySettings) -> Harness {
    build(source, Fault::None, Some(notify)).await
}

async fn build(source: SourceSettings, fault: Fault, notify: Option<NotifySettings>) -> Harness {
    let storage: Arc<dyn Storage> = Arc::new(
        ScratchDatabase::sqlite()
            .open(StoreOptions::default())
            .await,
    );
    let admin = administrator(&*storage, "u-admin", "ada").await;
    let repository = TestRepository::new(true);
    let package = Package::on(
        &PackageSettings::new(repository.path(), "main"),
        Arc::new(LocalGit::new(repository.path())),
    );
    let probe = Arc::new(Probe {
        storage: Arc::clone(&storage),
        fault,
        seen: Mutex::default(),
    });
    let pauses = Arc::new(RecordedPauses::default());
    let objects: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let artifacts = ArtifactStore::new(
        Arc::clone(&objects),
        Arc::new(KeyringHandle::new(Keyring::generate(), None)),
    );
    let verification = VerificationWorkflow::new(
        Arc::clone(&storage),
        VerificationSettings {
            source: Some(source.clone()),
            package: Some(package.clone()),
            connections: DEFAULT_CONNECTIONS,
            filter: fermata_schema::Filter::default(),
            artifacts: artifacts.clone(),
            workspace: None,
        },
    )
    .with_probe(Arc::clone(&probe) as Arc<dyn SnapshotProbe>)
    .with_notifier(Notifier::new(notify.as_ref()));
    let engine = workflow_support::engine(&storage, &pauses, source, verification)
        .register(NotifyWorkflow::new(Arc::clone(&storage), notify).unwrap());
    let workflows = Arc::new(EngineWorkflows::new(engine.clone()));
    Harness {
        operations: Operations::new(Arc::clone(&storage), workflows),
        registry: RegistryReports::new(Arc::clone(&storage), Some(package)),
        worker: engine.worker("verification-test-worker", WorkerSettings::default()),
        storage,
        artifacts,
        objects,
        admin,
        pauses,
        probe,
        repository,
    }
}

impl Harness {
    async fn run_to_end(&self, id: OperationId) -> OperationReport {
        run_until(
            &self.operations,
            &self.worker,
            id,
            OperationState::is_terminal,
        )
        .await
    }

    async fn inventory(&self) -> InventoryId {
        workflow_support::inventory(&self.operations, &self.worker, &self.admin).await
    }

    async fn verify(&self, inventory: InventoryId, databases: &[&str]) -> OperationId {
        let kind = OperationKind::Verification;
        workflow_support::start(&self.operations, &self.admin, kind, inventory, databases).await
    }

    /// Registers `databases` in the package with their current snapshots, as a merge would.
    async fn register(&self, databases: &[&str]) {
        let mut snapshots = Vec::new();
        for database in databases {
            snapshots.push(support::take(database, 1).await.unwrap());
        }
        self.repository.commit_package("main", &snapshots);
    }

    /// The drift diffs, kept for `retention`.
    fn drift(&self, retention: Duration) -> DriftDiffs {
        DriftDiffs::new(Arc::clone(&self.storage), self.artifacts.clone(), retention)
    }

    /// Every object the store holds, by location.
    async fn objects(&self) -> Vec<String> {
        workflow_support::object_locations(&*self.objects).await
    }

    async fn lease(&self) -> Option<SchemaLease> {
        self.storage.schema().schema_lease().await.unwrap()
    }

    async fn step(&self, id: OperationId, key: &str) -> (StepState, u32) {
        workflow_support::step_attempts(&*self.storage, id, key).await
    }
}

/// `count` databases with [`SCHEMA`] and an account that sees them all.
async fn databases(count: usize) -> (MySqlConnection, Vec<String>, SourceSettings) {
    let mut admin = admin().await;
    let names: Vec<String> = (0..count).map(|n| unique(&format!("v{n}"))).collect();
    for name in &names {
        support::create_database(&mut admin, name, SCHEMA).await;
    }
    let (user, password) = snapshot_account(&mut admin, &names).await;
    (admin, names, settings(&user, &password))
}

async fn drop_databases(admin: &mut MySqlConnection, names: &[String]) {
    for name in names {
        admin
            .execute(format!("DROP DATABASE IF EXISTS {}", quoted(name)).as_str())
            .await
            .unwrap();
    }
}

fn outcome(report: &OperationReport, position: usize) -> (Outcome, Freshness) {
    let result = report.databases[position].report.as_ref().unwrap();
    (result.outcome, result.freshness)
}

fn difference(path: &str, change: FileChange) -> FileDifference {
    FileDifference {
        path: path.to_owned(),
        change,
    }
}

#[tokio::test]
async fn drift_is_reported_with_the_files_that_differ_and_an_untouched_database_is_fresh() {
    let (mut admin, names, source) = databases(2).await;
    let [drifted, untouched] = [names[0].as_str(), names[1].as_str()];
    let harness = harness(source, Fault::None).await;
    harness.register(&[drifted, untouched]).await;
    let inventory = harness.inventory().await;

    // Nothing changed yet: both are fresh.
    let first = harness.verify(inventory, &[drifted, untouched]).await;
    let report = harness.run_to_end(first).await;
    assert_eq!(report.operation.state, OperationState::Succeeded);
    for position in 0..2 {
        assert_eq!(
            outcome(&report, position),
            (Outcome::Unchanged, Freshness::Fresh)
        );
        let result = report.databases[position].report.as_ref().unwrap();
        assert_eq!(result.snapshot_hash, result.merged_hash);
        assert!(result.differences.is_empty());
        assert_eq!(result.object_counts["tables"], 2);
        assert_eq!(result.object_counts["views"], 2);
    }

    // An added column, a dropped index, a changed view, a new table and a dropped view.
    admin
        .execute(format!("USE {}", quoted(drifted)).as_str())
        .await
        .unwrap();
    for statement in [
        "ALTER TABLE customer ADD COLUMN email varchar(100) NULL",
        "ALTER TABLE orders DROP INDEX k_customer",
        "CREATE OR REPLACE VIEW recent AS SELECT id, customer FROM orders WHERE id > 100",
        "CREATE TABLE audit (id int NOT NULL PRIMARY KEY)",
        "DROP VIEW named",
    ] {
        admin.execute(statement).await.unwrap();
    }
    let second = harness.verify(inventory, &[drifted, untouched]).await;
    let report = harness.run_to_end(second).await;
    assert_eq!(report.operation.state, OperationState::Succeeded);
    assert!(report.operation.error.is_none());
    assert_eq!(outcome(&report, 0), (Outcome::Changed, Freshness::Stale));
    assert_eq!(outcome(&report, 1), (Outcome::Unchanged, Freshness::Fresh));
    let result = report.databases[0].report.as_ref().unwrap();
    assert_ne!(result.snapshot_hash, result.merged_hash);
    assert_eq!(result.object_counts["tables"], 3);
    assert_eq!(result.object_counts["views"], 1);
    assert_eq!(
        result.differences,
        [
            difference("schema.json", FileChange::Modified),
            difference("tables/audit.sql", FileChange::Added),
            difference("tables/customer.sql", FileChange::Modified),
            difference("tables/orders.sql", FileChange::Modified),
            difference("views/named.sql", FileChange::Removed),
            difference("views/recent.sql", FileChange::Modified),
        ]
    );
    assert!(
        report.databases[1]
            .report
            .as_ref()
            .unwrap()
            .differences
            .is_empty()
    );
    // The drift is readable on request: one sealed diff, for the drifted database alone, whose
    // unified diffs show what changed; no text of it is in the application database.
    assert_eq!(harness.objects().await, [drift_location(second, 0)]);
    let drift = harness
        .drift(DEFAULT_DRIFT_RETENTION)
        .diff(&harness.admin, second)
        .await
        .unwrap();
    assert_eq!(drift.databases.len(), 1);
    assert_eq!(drift.databases[0].database.as_str(), drifted);
    let paths: Vec<&str> = drift.databases[0]
        .files
        .iter()
        .map(|file| file.path.as_str())
        .collect();
    let listed: Vec<&str> = result.differences.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(paths, listed);
    let customer = &drift.databases[0].files[2];
    assert!(
        customer
            .diff
            .starts_with("--- a/tables/customer.sql\n+++ b/tables/customer.sql\n")
    );
    assert!(
        customer.diff.contains("\n+  `email` varchar(100)"),
        "{}",
        customer.diff
    );
    let ended = report.operation.finished_at.unwrap();
    assert_eq!(
        drift.kept_until.unwrap().0,
        ended.0 + i64::try_from(DEFAULT_DRIFT_RETENTION.as_millis()).unwrap()
    );
    let untouched_drift = harness
        .drift(DEFAULT_DRIFT_RETENTION)
        .diff(&harness.admin, first)
        .await
        .unwrap();
    assert!(untouched_drift.databases.is_empty());
    // The sweep keeps what is within its retention; past it, the diff is refused and deleted.
    assert_eq!(
        harness
            .drift(DEFAULT_DRIFT_RETENTION)
            .sweep()
            .await
            .unwrap(),
        0
    );
    let expired = harness.drift(Duration::ZERO);
    let refused = expired.diff(&harness.admin, second).await.unwrap_err();
    assert_eq!(refused.code(), ErrorCode::DiffExpired);
    assert_eq!(expired.sweep().await.unwrap(), 1);
    assert!(harness.objects().await.is_empty());

    // It published nothing and ended the lease.
    assert!(harness.lease().await.is_none());
    assert!(
        harness
            .storage
            .schema()
            .review(second)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        harness
            .storage
            .schema()
            .artifact(second)
            .await
            .unwrap()
            .is_none()
    );

    // The registry reads each database's freshness from its latest check.
    let registry = harness.registry.registry_view().await.unwrap();
    let head = harness.repository.head("main");
    assert_eq!(registry.base_commit, head);
    let listed: Vec<_> = registry
        .databases
        .iter()
        .map(|entry| {
            (
                entry.database.as_str(),
                entry.freshness,
                entry
                    .last_verification
                    .as_ref()
                    .map(|check| check.result.operation),
            )
        })
        .collect();
    let mut expected = vec![
        (drifted, RegistryFreshness::Stale, Some(second)),
        (untouched, RegistryFreshness::Fresh, Some(second)),
    ];
    expected.sort_by_key(|entry| entry.0);
    assert_eq!(listed, expected);
    let drifted_entry = registry
        .databases
        .iter()
        .find(|entry| entry.database.as_str() == drifted)
        .unwrap();
    let checked = drifted_entry.checked.as_ref().unwrap();
    assert_eq!(checked.kind, OperationKind::Verification);
    assert_eq!(checked.result.operation, second);
    assert_eq!(
        drifted_entry.snapshot.snapshot_hash,
        result.merged_hash.clone().unwrap()
    );

    // Once the drifted schema is merged, the same check reads fresh: it saw what is registered.
    harness.register(&[drifted, untouched]).await;
    let registry = harness.registry.registry_view().await.unwrap();
    assert!(
        registry
            .databases
            .iter()
            .all(|entry| entry.freshness == RegistryFreshness::Fresh),
        "{registry:?}"
    );
    drop_databases(&mut admin, &names).await;
}

/// A database merged with another table filter than the configured one is verified with the
/// merged one, so like is compared with like: its ignored scratch table does not make it drift,
/// and changing the configuration does not either.
#[tokio::test]
async fn a_verification_uses_the_filter_the_merged_manifest_records() {
    let (mut admin, names, source) = databases(1).await;
    let database = names[0].as_str();
    admin
        .execute(format!("USE {}", quoted(database)).as_str())
        .await
        .unwrap();
    admin
        .execute("CREATE TABLE tmp_scratch (id int)")
        .await
        .unwrap();
    let merged_with = fermata_schema::Filter {
        ignore_databases: Vec::new(),
        ignore_tables: vec![fermata_schema::filter::Pattern::new("tmp_*").unwrap()],
    };
    let mut connections = support::connections(1).await;
    let merged = fermata_schema::snapshot::snapshot_filtered(
        &mut connections,
        &DatabaseName::new(database).unwrap(),
        "test",
        &merged_with,
    )
    .await
    .unwrap();
    assert!(!merged.files.keys().any(|path| path.contains("tmp_scratch")));
    // The harness is configured with the default filter, which keeps `tmp_scratch`.
    let harness = harness(source, Fault::None).await;
    harness
        .repository
        .commit_package("main", std::slice::from_ref(&merged));
    let inventory = harness.inventory().await;
    let id = harness.verify(inventory, &[database]).await;
    let report = harness.run_to_end(id).await;
    assert_eq!(report.operation.state, OperationState::Succeeded);
    assert_eq!(outcome(&report, 0), (Outcome::Unchanged, Freshness::Fresh));
    let result = report.databases[0].report.as_ref().unwrap();
    assert_eq!(
        result.snapshot_hash.as_deref(),
        Some(merged.snapshot_hash.as_str())
    );
    assert_eq!(result.object_counts["tables"], 2);

    // A real change is still found, with the same filter.
    admin
        .execute("ALTER TABLE customer ADD COLUMN email varchar(100) NULL")
        .await
        .unwrap();
    let id = harness.verify(inventory, &[database]).await;
    let report = harness.run_to_end(id).await;
    assert_eq!(outcome(&report, 0), (Outcome::Changed, Freshness::Stale));
    let result = report.databases[0].report.as_ref().unwrap();
    assert!(
        result
            .differences
            .iter()
            .all(|difference| !difference.path.contains("tmp_scratch")),
        "{:?}",
        result.differences
    );
    drop_databases(&mut admin, &names).await;
}

#[tokio::test]
async fn an_unregistered_database_fails_and_the_next_one_still_runs() {
    let (mut admin, names, source) = databases(2).await;
    let [unregistered, registered] = [names[0].as_str(), names[1].as_str()];
    let harness = harness(source, Fault::None).await;
    harness.register(&[registered]).await;
    let inventory = harness.inventory().await;

    let id = harness.verify(inventory, &[unregistered, registered]).await;
    let report = harness.run_to_end(id).await;
    assert_eq!(report.operation.state, OperationState::Succeeded);
    assert_eq!(
        outcome(&report, 0),
        (Outcome::Failed, Freshness::Unregistered)
    );
    let error = report.databases[0]
        .report
        .as_ref()
        .unwrap()
        .error
        .clone()
        .unwrap();
    assert_eq!(error.code(), ErrorCode::DatabaseNotRegistered);
    assert_eq!(error.stage().name(), "configuration");
    assert!(!error.retryable());
    assert!(
        error.message().contains(unregistered),
        "{}",
        error.message()
    );
    // Permanent: tried once.
    assert_eq!(harness.step(id, "database:0").await, (StepState::Failed, 1));
    assert_eq!(outcome(&report, 1), (Outcome::Unchanged, Freshness::Fresh));
    assert_eq!(
        harness.step(id, "database:1").await,
        (StepState::Succeeded, 1)
    );

    // An unregistered database is not in the registry view either.
    let registry = harness.registry.registry_view().await.unwrap();
    let listed: Vec<_> = registry
        .databases
        .iter()
        .map(|entry| entry.database.as_str())
        .collect();
    assert_eq!(listed, [registered]);

    // When every database fails, so does the operation, with the first one's error.
    let only = harness.verify(inventory, &[unregistered]).await;
    let report = harness.run_to_end(only).await;
    assert_eq!(report.operation.state, OperationState::Failed);
    assert_eq!(
        report.operation.error.as_ref().map(SafeError::code),
        Some(ErrorCode::DatabaseNotRegistered)
    );
    assert!(harness.lease().await.is_none());
    drop_databases(&mut admin, &names).await;
}

#[tokio::test]
async fn the_lease_is_held_while_the_steps_run_and_released_at_the_end() {
    let (mut admin, names, source) = databases(1).await;
    let database = names[0].as_str();
    let harness = harness(source, Fault::FailFirst(ErrorCode::ConnectionLost)).await;
    harness.register(&[database]).await;
    let inventory = harness.inventory().await;

    let id = harness.verify(inventory, &[database]).await;
    let lease = harness
        .lease()
        .await
        .expect("the verification takes the lease when it is requested");
    assert_eq!(
        (lease.operation, lease.kind),
        (id, OperationKind::Verification)
    );
    // Another refresh or verification is refused meanwhile; an inventory is not.
    for kind in [OperationKind::Refresh, OperationKind::Verification] {
        let refused = harness
            .operations
            .request(
                &harness.admin,
                &request(kind, &unique("other"), Some(inventory), &[database]),
            )
            .await
            .unwrap_err();
        assert_eq!(refused.code(), ErrorCode::LeaseHeld);
    }

    let report = harness.run_to_end(id).await;
    assert_eq!(report.operation.state, OperationState::Succeeded);
    assert_eq!(outcome(&report, 0), (Outcome::Unchanged, Freshness::Fresh));
    // The transient failure was retried once, a second later, on the injected clock.
    assert_eq!(
        harness.step(id, "database:0").await,
        (StepState::Succeeded, 2)
    );
    assert_eq!(*harness.pauses.0.lock().unwrap(), [Duration::from_secs(1)]);
    // Both attempts ran under the operation's live, active lease.
    let seen = harness.probe.seen.lock().unwrap().clone();
    assert_eq!(
        seen.iter().map(|(attempt, _)| *attempt).collect::<Vec<_>>(),
        [1, 2]
    );
    for (_, lease) in &seen {
        let lease = lease.as_ref().expect("the lease is held during the step");
        assert_eq!(lease.operation, id);
        assert_eq!(lease.status, SchemaLeaseStatus::Active);
    }
    // Released at the end: the next verification may start.
    assert!(report.lease.is_none());
    assert!(harness.lease().await.is_none());
    let next = harness.verify(inventory, &[database]).await;
    assert_eq!(
        harness.run_to_end(next).await.operation.state,
        OperationState::Succeeded
    );
    drop_databases(&mut admin, &names).await;
}

#[tokio::test]
async fn webhooks_get_signed_events_when_a_verification_finds_drift_and_when_one_fails() {
    let receiver = Receiver::start(0).await;
    let (mut admin, names, source) = databases(2).await;
    let [drifted, unregistered] = [names[0].as_str(), names[1].as_str()];
    let harness = harness_notifying(source, receiver.settings()).await;
    harness.register(&[drifted]).await;
    let inventory = harness.inventory().await;
    admin
        .execute(
            format!(
                "ALTER TABLE {}.customer ADD COLUMN email varchar(100) NULL",
                quoted(drifted)
            )
            .as_str(),
        )
        .await
        .unwrap();

    let verified = harness.verify(inventory, &[drifted]).await;
    assert_eq!(
        harness.run_to_end(verified).await.operation.state,
        OperationState::Succeeded
    );
    let failing = harness.verify(inventory, &[unregistered]).await;
    let report = harness.run_to_end(failing).await;
    assert_eq!(report.operation.state, OperationState::Failed);
    for _ in 0..workflow_support::MAX_EXECUTIONS {
        if harness.worker.run_once().await.unwrap().is_none() {
            break;
        }
    }

    let drift = receiver.wait_for("verification.drift").await;
    assert_eq!(drift.len(), 1);
    assert!(drift[0].verified);
    let body = &drift[0].body;
    assert_eq!(body["id"], format!("verification.drift:{verified}"));
    assert_eq!(body["operation_kind"], "verification");
    assert_eq!(body["state"], "succeeded");
    assert_eq!(
        body["databases"],
        serde_json::json!([{
            "name": drifted,
            "outcome": "changed",
            "freshness": "stale",
            "ddl": format!("/api/v1/schema/operations/{verified}/drift/ddl?database={drifted}&direction=undo"),
        }])
    );
    let failed = receiver.wait_for("operation.failed").await;
    assert_eq!(failed.len(), 1);
    assert!(failed[0].verified);
    let body = &failed[0].body;
    assert_eq!(body["operation"], failing.to_string());
    assert_eq!(body["code"], "DATABASE_NOT_REGISTERED");
    assert_eq!(
        body["databases"],
        serde_json::json!([{
            "name": unregistered,
            "outcome": "failed",
            "freshness": "unregistered",
            "code": "DATABASE_NOT_REGISTERED",
        }])
    );
    // The drift-free verification of the same run told nothing; no event holds DDL.
    assert_eq!(receiver.posts().len(), 2);
    assert!(
        receiver
            .posts()
            .iter()
            .all(|post| !post.body.to_string().contains("email"))
    );
    assert_eq!(
        harness.step(verified, "notify:verification.drift:0").await,
        (StepState::Succeeded, 1)
    );
    drop_databases(&mut admin, &names).await;
}

#[tokio::test]
async fn a_failed_verification_leaves_no_database_pending() {
    let (mut admin, names, source) = databases(2).await;
    // Nothing registered: the package's base branch does not exist, and the `base` step fails
    // before any database step runs.
    let harness = harness(source, Fault::None).await;
    let inventory = harness.inventory().await;
    let id = harness
        .verify(inventory, &[names[0].as_str(), names[1].as_str()])
        .await;
    let report = harness.run_to_end(id).await;
    assert_eq!(report.operation.state, OperationState::Failed);
    let error = report.operation.error.clone().unwrap();
    assert_eq!(error.code(), ErrorCode::GithubFailed);
    for row in &report.databases {
        let result = row.report.as_ref().expect("every database has an outcome");
        assert_eq!(
            (result.outcome, result.freshness),
            (Outcome::Failed, Freshness::Stale)
        );
        assert_eq!(
            result.error.as_ref(),
            Some(&error),
            "and the operation's reason"
        );
        assert!(row.finished_at.is_some());
    }
    drop_databases(&mut admin, &names).await;
}
