//! The retry rule on tokio's paused clock, against the memory adapter: a transient error is
//! retried 1 s, 3 s and 9 s after each failure (four tries in all), a permanent error is tried
//! once, and a resumed run continues the attempts its step row records. Each try is counted in
//! the metrics by its outcome. Time is virtual, so the waits are measured exactly and nothing
//! sleeps for real.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use fermata_metrics::Metrics;
use fermata_store::{
    JournaledError, RunId, RunState, StepState, StepUpdate, Storage, StoreOptions,
};
use fermata_store_testkit::memory::MemoryStorage;
use fermata_workflow::{
    Engine, Execution, ExecutionEnd, RunContext, RunError, StepError, Worker, WorkerSettings,
    Workflow,
};
use serde_json::{Value, json};
use tokio::time::Instant;

/// One try of the step: its attempt number, whether an earlier one was recorded, and when.
type Try = (u32, bool, Instant);

/// A workflow of one step whose first `failures` tries fail with `error`.
struct Flaky {
    failures: u32,
    error: JournaledError,
    tries: Arc<Mutex<Vec<Try>>>,
}

#[async_trait]
impl Workflow for Flaky {
    fn name(&self) -> &'static str {
        "flaky"
    }

    async fn run(&self, ctx: &mut RunContext, _input: Value) -> Result<Value, RunError> {
        let value: u32 = ctx
            .step("call", |attempt| {
                let tries = Arc::clone(&self.tries);
                let failures = self.failures;
                let error = self.error.clone();
                async move {
                    tries.lock().unwrap().push((
                        attempt.number(),
                        attempt.earlier_attempt_recorded(),
                        Instant::now(),
                    ));
                    if attempt.number() <= failures {
                        Err(StepError::from(error))
                    } else {
                        Ok(attempt.number())
                    }
                }
            })
            .await?;
        Ok(json!(value))
    }
}

fn transient() -> JournaledError {
    JournaledError::new("CONNECTION_LOST", true)
}

fn permanent() -> JournaledError {
    JournaledError::new("PERMISSION_DENIED", false)
}

struct Setup {
    storage: Arc<dyn Storage>,
    engine: Engine,
    worker: Worker,
    tries: Arc<Mutex<Vec<Try>>>,
    metrics: Arc<Metrics>,
}

fn setup(failures: u32, error: JournaledError) -> Setup {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new(StoreOptions::default()));
    let tries = Arc::default();
    let metrics = Arc::new(Metrics::new("test"));
    let engine = Engine::new(Arc::clone(&storage))
        .with_metrics(Arc::clone(&metrics))
        .register(Flaky {
            failures,
            error,
            tries: Arc::clone(&tries),
        });
    let worker = engine.worker("worker", WorkerSettings::default());
    Setup {
        storage,
        engine,
        worker,
        tries,
        metrics,
    }
}

impl Setup {
    async fn start(&self) -> RunId {
        self.engine.start("flaky", &json!({})).await.unwrap()
    }

    async fn execute(&self) -> Execution {
        self.worker
            .run_once()
            .await
            .unwrap()
            .expect("a runnable run")
    }

    fn tries(&self) -> Vec<Try> {
        self.tries.lock().unwrap().clone()
    }

    /// How many tries the metrics count as `succeeded`, `retried` and `failed`.
    fn counted(&self) -> [u32; 3] {
        let text = self.metrics.render();
        ["succeeded", "retried", "failed"].map(|outcome| {
            let series = format!(
                "fermata_workflow_step_attempts_total{{workflow=\"flaky\",outcome=\"{outcome}\"}} "
            );
            text.lines()
                .find_map(|line| line.strip_prefix(&series))
                .map_or(0, |value| value.parse().expect("a count"))
        })
    }
}

/// The waits between consecutive tries.
fn gaps(tries: &[Try]) -> Vec<Duration> {
    tries
        .windows(2)
        .map(|pair| pair[1].2.duration_since(pair[0].2))
        .collect()
}

#[track_caller]
fn assert_waits(actual: &[Duration], expected: &[u64]) {
    assert_eq!(actual.len(), expected.len(), "{actual:?}");
    for (wait, seconds) in actual.iter().zip(expected) {
        let expected = Duration::from_secs(*seconds);
        assert!(
            *wait >= expected && *wait < expected + Duration::from_millis(50),
            "waited {wait:?} where {expected:?} was due: {actual:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_transient_error_is_retried_after_1_3_and_9_seconds_then_fails_after_4_tries() {
    let setup = setup(u32::MAX, transient());
    let run = setup.start().await;
    let execution = setup.execute().await;
    assert_eq!(execution.end, ExecutionEnd::Failed);

    let tries = setup.tries();
    let numbers: Vec<_> = tries.iter().map(|(n, earlier, _)| (*n, *earlier)).collect();
    assert_eq!(numbers, [(1, false), (2, true), (3, true), (4, true)]);
    assert_waits(&gaps(&tries), &[1, 3, 9]);

    let status = setup.engine.run_status(&run).await.unwrap().unwrap();
    assert_eq!(status.state, RunState::Failed);
    assert_eq!(status.error, Some(transient()));
    let step = setup
        .storage
        .workflows()
        .step(&run, "call")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((step.state, step.attempts), (StepState::Failed, 4));
    assert_eq!(setup.worker.run_once().await.unwrap(), None);
    assert_eq!(setup.tries().len(), 4, "a failed step ran again");
    assert_eq!(setup.counted(), [0, 3, 1]);
}

#[tokio::test(start_paused = true)]
async fn a_step_that_succeeds_on_its_third_try_succeeds() {
    let setup = setup(2, transient());
    let run = setup.start().await;
    assert_eq!(setup.execute().await.end, ExecutionEnd::Succeeded);
    let tries = setup.tries();
    assert_eq!(tries.len(), 3);
    assert_waits(&gaps(&tries), &[1, 3]);
    let status = setup.engine.run_status(&run).await.unwrap().unwrap();
    assert_eq!(status.state, RunState::Succeeded);
    assert_eq!(status.output.as_deref(), Some("3"));
    let step = setup
        .storage
        .workflows()
        .step(&run, "call")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((step.state, step.attempts), (StepState::Succeeded, 3));
    assert_eq!(step.output.as_deref(), Some("3"));
    assert_eq!(setup.counted(), [1, 2, 0]);
}

#[tokio::test(start_paused = true)]
async fn a_permanent_error_is_tried_exactly_once() {
    let setup = setup(u32::MAX, permanent());
    let run = setup.start().await;
    assert_eq!(setup.execute().await.end, ExecutionEnd::Failed);
    assert_eq!(setup.tries().len(), 1);
    let status = setup.engine.run_status(&run).await.unwrap().unwrap();
    assert_eq!(status.error, Some(permanent()));
    assert_eq!(setup.counted(), [0, 0, 1]);
}

#[tokio::test(start_paused = true)]
async fn a_resumed_run_continues_the_retry_count_of_its_step_row() {
    let setup = setup(u32::MAX, transient());
    let run = setup.start().await;
    // A worker tried the step twice: the first try failed, and the worker went away during the
    // second, leaving the run to the next worker.
    let store = setup.storage.workflows();
    let dead = store
        .claim_run("dead", &["flaky".to_owned()], Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap()
        .claim;
    for update in [
        StepUpdate::Started { attempt: 1 },
        StepUpdate::AttemptFailed { error: transient() },
        StepUpdate::Started { attempt: 2 },
    ] {
        store.record_step(&dead, "call", &update).await.unwrap();
    }
    store.release(&dead).await.unwrap();

    let resumed_at = Instant::now();
    assert_eq!(setup.execute().await.end, ExecutionEnd::Failed);
    let tries = setup.tries();
    let numbers: Vec<_> = tries.iter().map(|(n, earlier, _)| (*n, *earlier)).collect();
    assert_eq!(
        numbers,
        [(3, true), (4, true)],
        "the schedule started again"
    );
    assert_waits(&[tries[0].2.duration_since(resumed_at)], &[3]);
    assert_waits(&gaps(&tries), &[9]);
    let step = store.step(&run, "call").await.unwrap().unwrap();
    assert_eq!((step.state, step.attempts), (StepState::Failed, 4));
}
