//! Scheduled drift checks end to end, on SQLite and on PostgreSQL, with the MariaDB server the
//! test command provisions and a local git package: a check whose run one process started and
//! left waiting runs at its time in the process that replaced it, exactly once, as ordinary
//! inventory and verification operations of the schedule's actor that cover the registered
//! databases still visible and no other.

use crate::git_support;
use crate::support;
use crate::workflow_support;

use std::sync::Arc;
use std::time::Duration;

use fermata_accounts::KeyringHandle;
use fermata_crypto::Keyring;
use fermata_forge::local::LocalGit;
use fermata_schema::artifact::ArtifactStore;
use fermata_schema::package::{Package, PackageSettings};
use fermata_schema::refresh_run::DEFAULT_CONNECTIONS;
use fermata_schema::schedule::{SCHEDULE_ACTOR, schedule_run_id};
use fermata_schema::{
    EngineWorkflows, Operations, Schedule, ScheduleWorkflow, SourceSettings, VerificationSettings,
    VerificationWorkflow,
};
use fermata_store::schema::{OperationKind, OperationState, Outcome};
use fermata_store::{RunState, Storage, StoreOptions};
use fermata_store_sql::testing::ScratchDatabase;
use fermata_workflow::{Engine, ExecutionEnd, Worker, WorkerSettings};
use git_support::TestRepository;
use support::{admin, settings, snapshot_account, unique};
use workflow_support::RecordedPauses;

/// The test's schedule: short enough to wait for, long enough for one process to stop before
/// the due time and the next to start.
const PERIOD: Duration = Duration::from_secs(6);

/// One serving process's schema parts over the shared database.
struct Process {
    engine: Engine,
    schedule: ScheduleWorkflow,
    operations: Operations,
    worker: Worker,
}

fn process(
    storage: &Arc<dyn Storage>,
    source: &SourceSettings,
    package: &Package,
    name: &str,
) -> Process {
    let verification = VerificationWorkflow::new(
        Arc::clone(storage),
        VerificationSettings {
            source: Some(source.clone()),
            package: Some(package.clone()),
            connections: DEFAULT_CONNECTIONS,
            filter: fermata_schema::Filter::default(),
            artifacts: ArtifactStore::new(
                Arc::new(object_store::memory::InMemory::new()),
                Arc::new(KeyringHandle::new(Keyring::generate(), None)),
            ),
            workspace: None,
        },
    );
    let pauses = Arc::new(RecordedPauses::default());
    let engine = workflow_support::engine(storage, &pauses, source.clone(), verification);
    let workflows = Arc::new(EngineWorkflows::new(engine.clone()));
    let operations = Operations::new(Arc::clone(storage), workflows);
    let schedule = ScheduleWorkflow::new(
        Arc::clone(storage),
        operations.clone(),
        Some(Schedule::Every { period: PERIOD }),
        Some(package.clone()),
    );
    let engine = engine.register(schedule.clone());
    Process {
        worker: engine.worker(name, WorkerSettings::default()),
        engine,
        schedule,
        operations,
    }
}

/// Waits until the database's clock is early in a period, so the next due time is most of a
/// period away.
async fn early_in_a_period(operations: &Operations) {
    let period = i64::try_from(PERIOD.as_millis()).unwrap();
    while operations.now().await.unwrap().0.rem_euclid(period) > 1_000 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn a_scheduled_check_runs_at_its_time_through_a_restart_exactly_once(
    database: ScratchDatabase,
) {
    let storage: Arc<dyn Storage> = Arc::new(database.open(StoreOptions::default()).await);
    let mut server = admin().await;
    let registered = unique("sched");
    let unregistered = unique("sched_new");
    for name in [&registered, &unregistered] {
        support::create_database(&mut server, name, &["CREATE TABLE t (id int PRIMARY KEY)"]).await;
    }
    let (user, password) =
        snapshot_account(&mut server, &[registered.clone(), unregistered.clone()]).await;
    let source = settings(&user, &password);
    let repository = TestRepository::new(true);
    repository.commit_package("main", &[support::take(&registered, 1).await.unwrap()]);
    let package = Package::on(
        &PackageSettings::new(repository.path(), "main"),
        Arc::new(LocalGit::new(repository.path())),
    );

    // The first process starts the chain; its one execution of the run waits for the due time.
    let first = process(&storage, &source, &package, "first");
    early_in_a_period(&first.operations).await;
    let due = first.schedule.ensure(&first.engine).await.unwrap().unwrap();
    assert_eq!(
        first.schedule.ensure(&first.engine).await.unwrap(),
        Some(due)
    );
    let execution = first.worker.run_once().await.unwrap().unwrap();
    assert_eq!(execution.run, schedule_run_id(due));
    assert_eq!(execution.end, ExecutionEnd::Suspended);
    assert!(first.operations.now().await.unwrap() < due);
    drop(first);

    // No process serves when the check comes due.
    let replacement = process(&storage, &source, &package, "replacement");
    while replacement.operations.now().await.unwrap() <= due {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(replacement.operations.recent(10).await.unwrap().is_empty());

    // The replacement starts the next due time's run, not this one's again, and runs this one.
    let next = replacement
        .schedule
        .ensure(&replacement.engine)
        .await
        .unwrap()
        .unwrap();
    assert!(next > due);
    let run = schedule_run_id(due);
    for _ in 0..workflow_support::MAX_EXECUTIONS {
        let state = storage.workflows().run(&run).await.unwrap().unwrap().state;
        if state.is_terminal() {
            break;
        }
        if replacement.worker.run_once().await.unwrap().is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let ended = storage.workflows().run(&run).await.unwrap().unwrap();
    assert_eq!(ended.state, RunState::Succeeded, "{ended:?}");
    let output: serde_json::Value = serde_json::from_str(ended.output.as_deref().unwrap()).unwrap();
    let verification = output["verification"].as_str().unwrap().parse().unwrap();
    let report = workflow_support::run_until(
        &replacement.operations,
        &replacement.worker,
        verification,
        OperationState::is_terminal,
    )
    .await;

    // An ordinary verification of the schedule's actor, at its time, of the registered database.
    assert_eq!(report.operation.state, OperationState::Succeeded);
    assert_eq!(report.operation.actor.0, SCHEDULE_ACTOR);
    assert!(report.operation.created_at >= due);
    let checked: Vec<_> = report
        .databases
        .iter()
        .map(|row| (row.database.as_str(), row.report.as_ref().unwrap().outcome))
        .collect();
    assert_eq!(checked, [(registered.as_str(), Outcome::Unchanged)]);

    // Exactly once: one inventory and one verification for the due time, whatever ran since.
    let prefix = format!("schema-schedule-{}-", due.0);
    let mut for_due: Vec<_> = replacement
        .operations
        .recent(50)
        .await
        .unwrap()
        .into_iter()
        .filter(|operation| operation.request_key.as_str().starts_with(&prefix))
        .map(|operation| operation.kind)
        .collect();
    for_due.sort_by_key(|kind| kind.as_str());
    assert_eq!(
        for_due,
        [OperationKind::Inventory, OperationKind::Verification]
    );
    assert!(
        storage
            .workflows()
            .run(&schedule_run_id(next))
            .await
            .unwrap()
            .is_some()
    );
}

on_both_engines!(a_scheduled_check_runs_at_its_time_through_a_restart_exactly_once);
