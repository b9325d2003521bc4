//! A worker killed with SIGKILL in the middle of a step is resumed by another worker, from the
//! journal, without repeating the external write of a step that completed: on SQLite and on
//! PostgreSQL, with a real process.
//!
//! The test binary is its own worker process: started again with the test's name as the filter
//! and `FERMATA_WORKFLOW_CRASH_ENGINE` set, the same test runs a worker instead of the scenario.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fermata_store::{RunState, StepState, Storage, StoreOptions};
use fermata_store_sql::testing::ScratchDatabase;
use fermata_store_sql::{Database, SqlStorage};
use fermata_store_testkit::eventually_within;
use fermata_workflow::{Engine, ExecutionEnd, RunContext, RunError, WorkerSettings, Workflow};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

/// Set in the worker process: the engine (`sqlite` or `postgres`).
const CHILD_ENGINE: &str = "FERMATA_WORKFLOW_CRASH_ENGINE";
/// Set in the worker process: the SQLite file or the PostgreSQL URL.
const CHILD_DATABASE: &str = "FERMATA_WORKFLOW_CRASH_DATABASE";
/// Set in the worker process: the folder of the external files.
const CHILD_FOLDER: &str = "FERMATA_WORKFLOW_CRASH_FOLDER";

/// The longest the scenario waits for the worker process or for the resumed run.
const PATIENCE: Duration = Duration::from_secs(60);

/// Appends a line to a file (the external write), then begins a step that the first worker
/// never finishes.
struct Crashing {
    folder: PathBuf,
}

fn external_log(folder: &Path) -> PathBuf {
    folder.join("external.log")
}

fn marker(folder: &Path) -> PathBuf {
    folder.join("second-step-began")
}

#[async_trait]
impl Workflow for Crashing {
    fn name(&self) -> &'static str {
        "crashing"
    }

    async fn run(&self, ctx: &mut RunContext, _input: Value) -> Result<Value, RunError> {
        ctx.step("append", |_| {
            let log = external_log(&self.folder);
            async move {
                let mut file = tokio::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log)
                    .await
                    .expect("open the external log");
                file.write_all(b"appended\n").await.expect("append");
                file.sync_all().await.expect("sync the external log");
                Ok(())
            }
        })
        .await?;
        ctx.step("finish", |attempt| {
            let marker = marker(&self.folder);
            async move {
                if !attempt.earlier_attempt_recorded() {
                    tokio::fs::write(&marker, b"")
                        .await
                        .expect("write the marker");
                    // The first worker is killed while it waits here.
                    std::future::pending::<()>().await;
                }
                Ok("finished".to_owned())
            }
        })
        .await?;
        Ok(json!("done"))
    }
}

/// The worker process: executes runs until it is killed.
async fn worker_process(engine: &str) {
    let place = std::env::var(CHILD_DATABASE).expect("the database");
    let folder = PathBuf::from(std::env::var(CHILD_FOLDER).expect("the folder"));
    let database = match engine {
        "sqlite" => Database::Sqlite { path: place.into() },
        _ => Database::Postgres { url: place },
    };
    let storage = SqlStorage::connect(&database, StoreOptions::default())
        .await
        .expect("connect to the scratch database");
    let engine = Engine::new(Arc::new(storage)).register(Crashing { folder });
    let settings = WorkerSettings {
        claim_ttl: Duration::from_secs(1),
        poll_interval: Duration::from_millis(20),
    };
    engine
        .worker("doomed", settings)
        .run(std::future::pending())
        .await;
}

async fn killed_worker_is_resumed(scratch: ScratchDatabase, test_name: &str) {
    let folder = tempfile::tempdir().unwrap();
    let engine_name = scratch.database.dialect().name();
    let place = match &scratch.database {
        Database::Sqlite { path } => path.display().to_string(),
        Database::Postgres { url } => url.clone(),
    };
    let storage: Arc<dyn Storage> = Arc::new(scratch.open(StoreOptions::default()).await);
    let engine = Engine::new(Arc::clone(&storage)).register(Crashing {
        folder: folder.path().to_owned(),
    });
    let run = engine.start("crashing", &json!({})).await.unwrap();

    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([test_name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENGINE, engine_name)
        .env(CHILD_DATABASE, &place)
        .env(CHILD_FOLDER, folder.path())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let began = marker(folder.path());
    eventually_within(
        PATIENCE,
        "the worker process to begin the second step",
        || async { tokio::fs::try_exists(&began).await.unwrap_or_default() },
    )
    .await;
    // Without warning: SIGKILL.
    child.kill().await.unwrap();

    let journal = storage.workflows();
    let append = journal.step(&run, "append").await.unwrap().unwrap();
    assert_eq!((append.state, append.attempts), (StepState::Succeeded, 1));
    let finish = journal.step(&run, "finish").await.unwrap().unwrap();
    assert_eq!((finish.state, finish.attempts), (StepState::Running, 1));

    let survivor = engine.worker(
        "survivor",
        WorkerSettings {
            claim_ttl: Duration::from_secs(5),
            poll_interval: Duration::from_millis(20),
        },
    );
    eventually_within(PATIENCE, "the survivor to finish the run", || async {
        match survivor.run_once().await.unwrap() {
            Some(execution) => {
                assert_eq!(execution.end, ExecutionEnd::Succeeded, "{execution:?}");
                true
            }
            None => false,
        }
    })
    .await;

    let log = tokio::fs::read_to_string(external_log(folder.path()))
        .await
        .unwrap();
    assert_eq!(
        log, "appended\n",
        "the completed step's external write was repeated"
    );
    let finish = journal.step(&run, "finish").await.unwrap().unwrap();
    assert_eq!((finish.state, finish.attempts), (StepState::Succeeded, 2));
    let status = engine.run_status(&run).await.unwrap().unwrap();
    assert_eq!(status.state, RunState::Succeeded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_is_resumed_without_repeating_a_completed_step_on_sqlite() {
    if let Ok(engine) = std::env::var(CHILD_ENGINE) {
        return worker_process(&engine).await;
    }
    killed_worker_is_resumed(
        ScratchDatabase::sqlite(),
        "crash::a_killed_worker_is_resumed_without_repeating_a_completed_step_on_sqlite",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_is_resumed_without_repeating_a_completed_step_on_postgres() {
    if let Ok(engine) = std::env::var(CHILD_ENGINE) {
        return worker_process(&engine).await;
    }
    killed_worker_is_resumed(
        ScratchDatabase::postgres().await,
        "crash::a_killed_worker_is_resumed_without_repeating_a_completed_step_on_postgres",
    )
    .await;
}
