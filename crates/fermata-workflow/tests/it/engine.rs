//! The engine against every adapter (memory, SQLite, PostgreSQL): runs waiting for hooks and
//! resuming when they arrive, idempotent deliveries, hook timeouts, durable sleeps, cancellation fencing out the
//! worker, a stopping worker releasing its run, retention, and a run whose journal cannot be read
//! failing for good.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use fermata_store::{ErrorKind, HookDelivery, RunId, RunState, StepState, Storage};
use fermata_store_testkit::eventually;
use fermata_workflow::{
    Engine, Execution, ExecutionEnd, RunContext, RunError, Worker, WorkerSettings, Workflow,
};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// Prepares, waits for approval, then applies what was approved; counts the step bodies run.
#[derive(Default)]
struct Approval {
    prepared: Arc<AtomicU32>,
    applied: Arc<AtomicU32>,
}

#[async_trait]
impl Workflow for Approval {
    fn name(&self) -> &'static str {
        "approval"
    }

    async fn run(&self, ctx: &mut RunContext, _input: Value) -> Result<Value, RunError> {
        ctx.step("prepare", |_| {
            let prepared = Arc::clone(&self.prepared);
            async move { Ok(prepared.fetch_add(1, Ordering::SeqCst)) }
        })
        .await?;
        let decision = ctx.hook("approve").await?;
        let applied: Value = ctx
            .step("apply", |_| {
                let applied = Arc::clone(&self.applied);
                let decision = decision.clone();
                async move {
                    applied.fetch_add(1, Ordering::SeqCst);
                    Ok(decision)
                }
            })
            .await?;
        Ok(json!({ "applied": applied }))
    }
}

/// Waits for approval for a short time only.
struct Deadline;

#[async_trait]
impl Workflow for Deadline {
    fn name(&self) -> &'static str {
        "deadline"
    }

    async fn run(&self, ctx: &mut RunContext, _input: Value) -> Result<Value, RunError> {
        match ctx
            .hook_within("approve", Duration::from_millis(300))
            .await?
        {
            Some(decision) => Ok(json!({ "decision": decision })),
            None => Ok(json!("expired")),
        }
    }
}

/// Counts, sleeps durably, then counts again; counts the step bodies run.
#[derive(Default)]
struct Nap {
    before: Arc<AtomicU32>,
    after: Arc<AtomicU32>,
}

#[async_trait]
impl Workflow for Nap {
    fn name(&self) -> &'static str {
        "nap"
    }

    async fn run(&self, ctx: &mut RunContext, _input: Value) -> Result<Value, RunError> {
        let counter = |count: &Arc<AtomicU32>| {
            let count = Arc::clone(count);
            move |_| {
                let count = Arc::clone(&count);
                async move { Ok(count.fetch_add(1, Ordering::SeqCst)) }
            }
        };
        ctx.step("before", counter(&self.before)).await?;
        ctx.sleep("nap", Duration::from_millis(300)).await?;
        ctx.step("after", counter(&self.after)).await?;
        Ok(json!("awake"))
    }
}

/// One step whose first attempt tells when it began and waits to be let go; later attempts
/// finish at once.
#[derive(Default)]
struct Held {
    began: Arc<Notify>,
    go: Arc<Notify>,
}

#[async_trait]
impl Workflow for Held {
    fn name(&self) -> &'static str {
        "held"
    }

    async fn run(&self, ctx: &mut RunContext, _input: Value) -> Result<Value, RunError> {
        ctx.step("wait", |attempt| {
            let began = Arc::clone(&self.began);
            let go = Arc::clone(&self.go);
            async move {
                if attempt.number() == 1 {
                    began.notify_one();
                    go.notified().await;
                }
                Ok(attempt.number())
            }
        })
        .await
        .map(Value::from)
    }
}

/// Reads a journaled step back as a type it was not written as: a run whose stored state cannot
/// be read.
struct Misread;

#[async_trait]
impl Workflow for Misread {
    fn name(&self) -> &'static str {
        "misread"
    }

    async fn run(&self, ctx: &mut RunContext, _input: Value) -> Result<Value, RunError> {
        ctx.step("value", |_| async { Ok("text".to_owned()) })
            .await?;
        let number: u32 = ctx.step("value", |_| async { Ok(7) }).await?;
        Ok(Value::from(number))
    }
}

/// Returns its input.
struct Echo;

#[async_trait]
impl Workflow for Echo {
    fn name(&self) -> &'static str {
        "echo"
    }

    async fn run(&self, _ctx: &mut RunContext, input: Value) -> Result<Value, RunError> {
        Ok(input)
    }
}

fn worker(engine: &Engine) -> Worker {
    engine.worker(
        "worker",
        WorkerSettings {
            claim_ttl: Duration::from_secs(30),
            poll_interval: Duration::from_millis(20),
        },
    )
}

async fn execute(worker: &Worker) -> Execution {
    worker.run_once().await.unwrap().expect("a runnable run")
}

async fn a_run_waiting_on_a_hook_resumes_once_when_it_is_delivered(storage: Arc<dyn Storage>) {
    let approval = Approval::default();
    let (prepared, applied) = (
        Arc::clone(&approval.prepared),
        Arc::clone(&approval.applied),
    );
    let engine = Engine::new(storage).register(approval);
    let worker = worker(&engine);
    let run = engine.start("approval", &json!({})).await.unwrap();

    assert_eq!(
        execute(&worker).await,
        Execution {
            run: run.clone(),
            end: ExecutionEnd::Suspended
        }
    );
    let waiting = engine.run_status(&run).await.unwrap().unwrap();
    assert_eq!((waiting.state, waiting.wake_at), (RunState::Waiting, None));
    assert_eq!(
        worker.run_once().await.unwrap(),
        None,
        "ran before the hook"
    );

    let payload = json!({ "by": "ada" });
    for expected in [HookDelivery::Delivered, HookDelivery::AlreadyDelivered] {
        let delivery = engine
            .deliver_hook(&run, "approve", "delivery-1", &payload)
            .await
            .unwrap();
        assert_eq!(delivery, expected);
    }
    assert_eq!(execute(&worker).await.end, ExecutionEnd::Succeeded);
    assert_eq!(worker.run_once().await.unwrap(), None, "the run ran twice");
    let delivery = engine
        .deliver_hook(&run, "approve", "delivery-1", &payload)
        .await
        .unwrap();
    assert_eq!(delivery, HookDelivery::AlreadyDelivered);
    assert_eq!(
        worker.run_once().await.unwrap(),
        None,
        "a repeated delivery ran it"
    );

    assert_eq!(prepared.load(Ordering::SeqCst), 1, "prepare ran twice");
    assert_eq!(applied.load(Ordering::SeqCst), 1, "apply ran twice");
    let done = engine.run_status(&run).await.unwrap().unwrap();
    assert_eq!(done.state, RunState::Succeeded);
    let output: Value = serde_json::from_str(done.output.as_deref().unwrap()).unwrap();
    assert_eq!(output, json!({ "applied": { "by": "ada" } }));
}

async fn a_hook_wait_with_a_timeout_ends_without_the_hook(storage: Arc<dyn Storage>) {
    let engine = Engine::new(storage).register(Deadline);
    let worker = worker(&engine);
    let run = engine.start("deadline", &json!({})).await.unwrap();
    assert_eq!(execute(&worker).await.end, ExecutionEnd::Suspended);
    let waiting = engine.run_status(&run).await.unwrap().unwrap();
    assert!(
        waiting.wake_at.is_some(),
        "a wait with a timeout has a wake time"
    );

    eventually("the timed-out run to finish", || async {
        match worker.run_once().await.unwrap() {
            Some(execution) => execution.end == ExecutionEnd::Succeeded,
            None => false,
        }
    })
    .await;
    let done = engine.run_status(&run).await.unwrap().unwrap();
    assert_eq!(done.output.as_deref(), Some("\"expired\""));
    let late = engine
        .deliver_hook(&run, "approve", "late", &json!(true))
        .await
        .unwrap_err();
    assert_eq!(late.kind(), ErrorKind::Conflict, "{late}");
}

async fn a_durable_sleep_suspends_the_run_and_resumes_it_once_after_its_time(
    storage: Arc<dyn Storage>,
) {
    let nap = Nap::default();
    let (before, after) = (Arc::clone(&nap.before), Arc::clone(&nap.after));
    let engine = Engine::new(storage).register(nap);
    let worker = worker(&engine);
    let run = engine.start("nap", &json!({})).await.unwrap();
    assert_eq!(execute(&worker).await.end, ExecutionEnd::Suspended);
    let sleeping = engine.run_status(&run).await.unwrap().unwrap();
    assert!(sleeping.wake_at.is_some(), "a sleep has a wake time");

    eventually("the sleeping run to finish", || async {
        match worker.run_once().await.unwrap() {
            Some(execution) => execution.end == ExecutionEnd::Succeeded,
            None => false,
        }
    })
    .await;
    let done = engine.run_status(&run).await.unwrap().unwrap();
    assert_eq!(done.output.as_deref(), Some("\"awake\""));
    assert_eq!(
        before.load(Ordering::SeqCst),
        1,
        "the step before ran twice"
    );
    assert_eq!(after.load(Ordering::SeqCst), 1, "the step after ran twice");
}

async fn a_cancelled_run_fences_out_its_worker(storage: Arc<dyn Storage>) {
    let held = Held::default();
    let (began, go) = (Arc::clone(&held.began), Arc::clone(&held.go));
    let engine = Engine::new(Arc::clone(&storage)).register(held);
    let worker = worker(&engine);
    let run = engine.start("held", &json!({})).await.unwrap();
    let execution = tokio::spawn(async move { worker.run_once().await });
    began.notified().await;
    assert!(engine.cancel(&run).await.unwrap());
    go.notify_one();
    let execution = execution.await.unwrap().unwrap().unwrap();
    assert_eq!(execution.end, ExecutionEnd::Lost);

    let status = engine.run_status(&run).await.unwrap().unwrap();
    assert_eq!(status.state, RunState::Cancelled);
    let step = storage
        .workflows()
        .step(&run, "wait")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        step.state,
        StepState::Running,
        "the fenced worker recorded the step's outcome"
    );
}

async fn a_worker_stopped_mid_run_releases_it_to_the_next(storage: Arc<dyn Storage>) {
    let held = Held::default();
    let began = Arc::clone(&held.began);
    let engine = Engine::new(Arc::clone(&storage)).register(held);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let first = worker(&engine);
    let background = tokio::spawn(async move {
        first
            .run(async {
                stopped.await.ok();
            })
            .await;
    });
    let run = engine.start("held", &json!({})).await.unwrap();
    began.notified().await;
    stop.send(()).unwrap();
    background.await.unwrap();

    let released = engine.run_status(&run).await.unwrap().unwrap();
    assert_eq!(released.state, RunState::Waiting);
    assert!(
        released.wake_at.is_some(),
        "a released run is runnable at once"
    );
    assert_eq!(execute(&worker(&engine)).await.end, ExecutionEnd::Succeeded);
    let step = storage
        .workflows()
        .step(&run, "wait")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((step.state, step.attempts), (StepState::Succeeded, 2));
    assert_eq!(step.output.as_deref(), Some("2"));
}

async fn a_purged_run_is_unavailable(storage: Arc<dyn Storage>) {
    let engine = Engine::new(storage).register(Echo);
    let worker = worker(&engine);
    let finished = engine.start("echo", &json!({ "n": 1 })).await.unwrap();
    assert_eq!(execute(&worker).await.end, ExecutionEnd::Succeeded);
    let waiting: RunId = engine.start("echo", &json!({ "n": 2 })).await.unwrap();

    assert_eq!(engine.purge(Duration::from_secs(3600)).await.unwrap(), 0);
    eventually("the finished run to be purged", || async {
        engine.purge(Duration::ZERO).await.unwrap() == 1
    })
    .await;
    assert_eq!(engine.run_status(&finished).await.unwrap(), None);
    let kept = engine.run_status(&waiting).await.unwrap().unwrap();
    assert_eq!(kept.state, RunState::Pending);
}

async fn a_run_whose_journal_cannot_be_read_fails_instead_of_coming_back(
    storage: Arc<dyn Storage>,
) {
    let engine = Engine::new(storage).register(Misread);
    let worker = worker(&engine);
    let run = engine.start("misread", &json!({})).await.unwrap();
    assert_eq!(execute(&worker).await.end, ExecutionEnd::Failed);
    let ended = engine.run_status(&run).await.unwrap().unwrap();
    assert_eq!(ended.state, RunState::Failed);
    assert_eq!(
        ended.error.map(|error| error.code),
        Some(fermata_workflow::StepError::RUN_UNREADABLE.to_owned())
    );
    assert!(
        worker.run_once().await.unwrap().is_none(),
        "it was claimed again"
    );
}

/// Expands each scenario into one test per adapter.
macro_rules! on_every_adapter {
    ($($scenario:ident),* $(,)?) => {
        mod memory {
            use fermata_store::StoreOptions;
            use fermata_store_testkit::memory::MemoryStorage;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let storage = MemoryStorage::new(StoreOptions::default());
                    super::$scenario(std::sync::Arc::new(storage)).await;
                }
            )*
        }
        mod sqlite {
            use fermata_store::StoreOptions;
            use fermata_store_sql::testing::ScratchDatabase;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let storage = ScratchDatabase::sqlite().open(StoreOptions::default()).await;
                    super::$scenario(std::sync::Arc::new(storage)).await;
                }
            )*
        }
        mod postgres {
            use fermata_store::StoreOptions;
            use fermata_store_sql::testing::ScratchDatabase;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let scratch = ScratchDatabase::postgres().await;
                    let storage = scratch.open(StoreOptions::default()).await;
                    super::$scenario(std::sync::Arc::new(storage)).await;
                }
            )*
        }
    };
}

on_every_adapter!(
    a_run_waiting_on_a_hook_resumes_once_when_it_is_delivered,
    a_hook_wait_with_a_timeout_ends_without_the_hook,
    a_durable_sleep_suspends_the_run_and_resumes_it_once_after_its_time,
    a_cancelled_run_fences_out_its_worker,
    a_worker_stopped_mid_run_releases_it_to_the_next,
    a_purged_run_is_unavailable,
    a_run_whose_journal_cannot_be_read_fails_instead_of_coming_back,
);
