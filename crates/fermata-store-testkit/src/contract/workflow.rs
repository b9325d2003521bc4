//! Contract cases for the workflow store: claims and fencing, the step journal, hooks,
//! suspension and retention.

use std::sync::Arc;
use std::time::Duration;

use super::lease::{name, plain};
use super::{Harness, PATIENCE, eventually};
use fermata_store::Storage;
use fermata_store::error::ErrorKind;
use fermata_store::time::UnixMillis;
use fermata_store::workflow::{
    Claim, ClaimedRun, HookDelivery, HookWait, JournaledError, NewRun, Run, RunId, RunState,
    StepState, StepUpdate,
};

/// Long enough never to expire during a case.
const LONG: Duration = Duration::from_secs(300);
/// Short enough to expire within a case.
const SHORT: Duration = Duration::from_millis(400);
const WORKFLOW: &str = "contract-flow";

fn flows() -> Vec<String> {
    vec![WORKFLOW.to_owned()]
}

fn transient() -> JournaledError {
    JournaledError::new("CONNECTION_LOST", true)
}

fn permanent() -> JournaledError {
    JournaledError::new("AUTHENTICATION_FAILED", false)
}

async fn create(store: &dyn Storage, workflow: &str) -> Run {
    store
        .workflows()
        .create_run(&NewRun {
            id: RunId::random(),
            workflow: workflow.to_owned(),
            input: r#"{"n":1}"#.to_owned(),
        })
        .await
        .unwrap()
}

/// Claims the next runnable run, which must exist.
async fn claim(store: &dyn Storage, worker: &str, ttl: Duration) -> ClaimedRun {
    store
        .workflows()
        .claim_run(worker, &flows(), ttl)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{worker} found no runnable run"))
}

/// Polls for a runnable run until one comes, failing the case after [`PATIENCE`].
async fn claim_eventually(store: &dyn Storage, worker: &str, ttl: Duration) -> ClaimedRun {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(claimed) = store
            .workflows()
            .claim_run(worker, &flows(), ttl)
            .await
            .unwrap()
        {
            return claimed;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up waiting for a runnable run"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn nothing_runnable(store: &dyn Storage) {
    let claimed = store
        .workflows()
        .claim_run("idle", &flows(), LONG)
        .await
        .unwrap();
    assert_eq!(claimed, None, "a run was runnable");
}

async fn read(store: &dyn Storage, id: &RunId) -> Run {
    store
        .workflows()
        .run(id)
        .await
        .unwrap()
        .expect("the run exists")
}

fn assert_fenced<T: std::fmt::Debug>(result: fermata_store::StoreResult<T>, what: &str) {
    match result {
        Err(error) => assert_eq!(error.kind(), ErrorKind::Fenced, "{what}: {error}"),
        Ok(value) => panic!("{what} was not fenced: {value:?}"),
    }
}

fn assert_kind<T: std::fmt::Debug>(
    result: fermata_store::StoreResult<T>,
    kind: ErrorKind,
    what: &str,
) {
    match result {
        Err(error) => assert_eq!(error.kind(), kind, "{what}: {error}"),
        Ok(value) => panic!("{what} succeeded: {value:?}"),
    }
}

/// Every write a worker can make under `claim`, each of which must be fenced.
async fn assert_all_writes_fenced(store: &dyn Storage, claim: &Claim) {
    let workflows = store.workflows();
    assert_fenced(workflows.heartbeat(claim, LONG).await, "heartbeat");
    assert_fenced(
        workflows
            .record_step(claim, "late", &StepUpdate::Started { attempt: 1 })
            .await,
        "step record",
    );
    assert_fenced(workflows.await_hook(claim, "late", None).await, "hook wait");
    assert_fenced(workflows.suspend(claim, None).await, "suspension");
    assert_fenced(workflows.release(claim).await, "release");
    assert_fenced(
        workflows.finish(claim, Ok("\"late\"".to_owned())).await,
        "finish",
    );
    assert_eq!(
        workflows.step(&claim.run, "late").await.unwrap(),
        None,
        "a fenced step record was written"
    );
}

pub async fn workflow_runs_are_created_once_and_read_back(harness: &dyn Harness) {
    let store = plain(harness).await;
    let created = create(&*store, WORKFLOW).await;
    assert_eq!(created.state, RunState::Pending);
    assert_eq!(created.workflow, WORKFLOW);
    assert_eq!(created.input, r#"{"n":1}"#);
    assert_eq!(
        (created.claim.clone(), created.wake_at, created.finished_at),
        (None, None, None)
    );
    assert_eq!(
        (created.output.clone(), created.error.clone()),
        (None, None)
    );
    assert_eq!(created.created_at, created.updated_at);
    assert_eq!(read(&*store, &created.id).await, created);

    let again = store
        .workflows()
        .create_run(&NewRun {
            id: created.id.clone(),
            workflow: WORKFLOW.to_owned(),
            input: "{}".to_owned(),
        })
        .await;
    assert_kind(again, ErrorKind::Conflict, "creating a run twice");
    assert_eq!(read(&*store, &created.id).await, created);
    assert_eq!(store.workflows().run(&RunId::random()).await.unwrap(), None);
}

pub async fn only_one_of_racing_workers_claims_a_run(harness: &dyn Harness) {
    let store = plain(harness).await;
    let run = create(&*store, WORKFLOW).await;
    let claims = race_for_runs(&store, 8).await;
    assert_eq!(claims.len(), 1, "{claims:?}");
    let claimed = &claims[0];
    assert_eq!(claimed.claim.run, run.id);
    assert_eq!(claimed.claim.generation.0, 1);
    assert_eq!(claimed.run.state, RunState::Running);
    let held = claimed
        .run
        .claim
        .as_ref()
        .expect("a running run has a claim");
    assert_eq!(held.worker, claimed.claim.worker);
    assert_eq!(held.expires_at, claimed.claim.expires_at);
    assert_eq!(read(&*store, &run.id).await, claimed.run);
}

pub async fn racing_workers_claim_distinct_runs(harness: &dyn Harness) {
    let store = plain(harness).await;
    let mut runs = Vec::new();
    for _ in 0..6 {
        runs.push(create(&*store, WORKFLOW).await.id);
    }
    let claims = race_for_runs(&store, 16).await;
    let mut claimed: Vec<RunId> = claims.iter().map(|c| c.claim.run.clone()).collect();
    claimed.sort();
    runs.sort();
    assert_eq!(claimed, runs, "each run is claimed exactly once");
    for claim in &claims {
        assert_eq!(claim.claim.generation.0, 1);
    }
    nothing_runnable(&*store).await;
}

/// `workers` workers claim at once, each at most one run; returns what they got.
async fn race_for_runs(store: &Arc<dyn Storage>, workers: usize) -> Vec<ClaimedRun> {
    let start = Arc::new(tokio::sync::Barrier::new(workers));
    let mut tasks = Vec::new();
    for worker in 0..workers {
        let store = Arc::clone(store);
        let start = Arc::clone(&start);
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            store
                .workflows()
                .claim_run(&format!("worker-{worker}"), &flows(), LONG)
                .await
        }));
    }
    let mut claims = Vec::new();
    for task in tasks {
        if let Some(claimed) = task.await.unwrap().unwrap() {
            claims.push(claimed);
        }
    }
    claims
}

pub async fn claims_take_only_runs_of_the_named_workflows(harness: &dyn Harness) {
    let store = plain(harness).await;
    let other = create(&*store, "contract-other").await;
    nothing_runnable(&*store).await;
    let none: Vec<String> = Vec::new();
    assert_eq!(
        store.workflows().claim_run("w", &none, LONG).await.unwrap(),
        None
    );
    let both = vec![WORKFLOW.to_owned(), "contract-other".to_owned()];
    let claimed = store
        .workflows()
        .claim_run("w", &both, LONG)
        .await
        .unwrap()
        .expect("the run is claimable by a worker that knows its workflow");
    assert_eq!(claimed.claim.run, other.id);
    assert_kind(
        store
            .workflows()
            .claim_run("w", &both, Duration::ZERO)
            .await,
        ErrorKind::Invalid,
        "a zero time-to-live",
    );
}

pub async fn a_heartbeat_extends_the_claim_and_marks_running_steps(harness: &dyn Harness) {
    let store = plain(harness).await;
    create(&*store, WORKFLOW).await;
    let claimed = claim(&*store, "alpha", Duration::from_secs(10)).await;
    let step = store
        .workflows()
        .record_step(&claimed.claim, "slow", &StepUpdate::Started { attempt: 1 })
        .await
        .unwrap();
    let renewed = store
        .workflows()
        .heartbeat(&claimed.claim, LONG)
        .await
        .unwrap();
    assert_eq!(renewed.generation, claimed.claim.generation);
    assert!(renewed.expires_at > claimed.claim.expires_at);
    let run = read(&*store, &claimed.claim.run).await;
    assert_eq!(run.claim.unwrap().expires_at, renewed.expires_at);

    eventually("a heartbeat to mark the running step", || async {
        store
            .workflows()
            .heartbeat(&claimed.claim, LONG)
            .await
            .unwrap();
        let now = store
            .workflows()
            .step(&claimed.claim.run, "slow")
            .await
            .unwrap()
            .unwrap();
        now.heartbeat_at > step.heartbeat_at
    })
    .await;
}

pub async fn an_expired_claim_is_reclaimed_and_the_old_claim_is_fenced(harness: &dyn Harness) {
    let store = plain(harness).await;
    let run = create(&*store, WORKFLOW).await;
    let alpha = claim(&*store, "alpha", SHORT).await;
    let alpha = store
        .workflows()
        .heartbeat(&alpha.claim, SHORT)
        .await
        .expect("a live claim heartbeats");
    let beta = claim_eventually(&*store, "beta", LONG).await;
    assert_eq!(beta.claim.run, run.id);
    assert!(beta.claim.generation > alpha.generation);
    assert_eq!(beta.claim.worker, "beta");

    assert_all_writes_fenced(&*store, &alpha).await;
    assert_eq!(
        read(&*store, &run.id).await,
        beta.run,
        "the fenced writes changed the run"
    );
    store
        .workflows()
        .record_step(&beta.claim, "first", &StepUpdate::Started { attempt: 1 })
        .await
        .expect("the new claim writes");
    store
        .workflows()
        .heartbeat(&beta.claim, LONG)
        .await
        .expect("the new claim heartbeats");
}

pub async fn terminal_runs_never_change(harness: &dyn Harness) {
    let store = plain(harness).await;
    let workflows = store.workflows();

    create(&*store, WORKFLOW).await;
    let succeeding = claim(&*store, "alpha", LONG).await;
    let succeeded = workflows
        .finish(&succeeding.claim, Ok(r#"{"done":true}"#.to_owned()))
        .await
        .unwrap();
    assert_eq!(succeeded.state, RunState::Succeeded);
    assert_eq!(succeeded.output.as_deref(), Some(r#"{"done":true}"#));
    assert_eq!((succeeded.claim.clone(), succeeded.wake_at), (None, None));
    assert!(succeeded.finished_at.is_some());

    create(&*store, WORKFLOW).await;
    let failing = claim(&*store, "alpha", LONG).await;
    // The workflow's own members come back as written.
    let mut error = JournaledError::new("VERIFICATION_FAILED", false);
    error.details.insert(
        "subject".to_owned(),
        serde_json::json!({"kind": "database", "value": "shop`eu"}),
    );
    let failed = workflows
        .finish(&failing.claim, Err(error.clone()))
        .await
        .unwrap();
    assert_eq!(failed.state, RunState::Failed);
    assert_eq!(failed.error.as_ref(), Some(&error));
    assert_eq!(failed.output, None);

    let pending = create(&*store, WORKFLOW).await;
    assert!(workflows.cancel_run(&pending.id).await.unwrap());
    create(&*store, WORKFLOW).await;
    let running = claim(&*store, "alpha", LONG).await;
    assert!(workflows.cancel_run(&running.claim.run).await.unwrap());
    let cancelled = read(&*store, &running.claim.run).await;
    assert_eq!(cancelled.state, RunState::Cancelled);
    assert_eq!(cancelled.claim, None);
    assert!(cancelled.finished_at.is_some());

    for ended in [&succeeding.claim, &failing.claim, &running.claim] {
        let before = read(&*store, &ended.run).await;
        assert_all_writes_fenced(&*store, ended).await;
        assert!(!workflows.cancel_run(&ended.run).await.unwrap());
        assert_kind(
            workflows.deliver_hook(&ended.run, "late", "k", "{}").await,
            ErrorKind::Missing,
            "a hook for a terminal run",
        );
        assert_eq!(read(&*store, &ended.run).await, before);
    }
    assert!(!workflows.cancel_run(&pending.id).await.unwrap());
    assert!(!workflows.cancel_run(&RunId::random()).await.unwrap());
    nothing_runnable(&*store).await;
}

pub async fn terminal_steps_never_change(harness: &dyn Harness) {
    let store = plain(harness).await;
    let workflows = store.workflows();
    create(&*store, WORKFLOW).await;
    let claim = claim(&*store, "alpha", LONG).await.claim;
    let record = |key: &'static str, update: StepUpdate| {
        let claim = claim.clone();
        let store = Arc::clone(&store);
        async move { store.workflows().record_step(&claim, key, &update).await }
    };

    assert_kind(
        record("fetch", StepUpdate::Started { attempt: 2 }).await,
        ErrorKind::Conflict,
        "a second attempt without a first",
    );
    assert_kind(
        record("fetch", StepUpdate::AttemptFailed { error: transient() }).await,
        ErrorKind::Missing,
        "a failure of a step never started",
    );
    let first = record("fetch", StepUpdate::Started { attempt: 1 })
        .await
        .unwrap();
    assert_eq!((first.state, first.attempts), (StepState::Running, 1));
    assert_eq!((first.output.clone(), first.error.clone()), (None, None));
    assert_eq!(first.terminal_at, None);
    let retrying = record("fetch", StepUpdate::AttemptFailed { error: transient() })
        .await
        .unwrap();
    assert_eq!(retrying.state, StepState::Running);
    assert_eq!(retrying.error, Some(transient()));
    for wrong in [1, 3] {
        assert_kind(
            record("fetch", StepUpdate::Started { attempt: wrong }).await,
            ErrorKind::Conflict,
            "an attempt out of order",
        );
    }
    let second = record("fetch", StepUpdate::Started { attempt: 2 })
        .await
        .unwrap();
    assert_eq!(second.attempts, 2);
    assert_eq!(second.started_at, first.started_at);
    let succeeded = record(
        "fetch",
        StepUpdate::Succeeded {
            output: "[1,2]".to_owned(),
        },
    )
    .await
    .unwrap();
    assert_eq!(succeeded.state, StepState::Succeeded);
    assert_eq!(succeeded.output.as_deref(), Some("[1,2]"));
    assert_eq!(succeeded.error, None);
    assert_eq!(succeeded.attempts, 2);
    assert!(succeeded.terminal_at.is_some());

    record("apply", StepUpdate::Started { attempt: 1 })
        .await
        .unwrap();
    let failed = record("apply", StepUpdate::Failed { error: permanent() })
        .await
        .unwrap();
    assert_eq!(failed.state, StepState::Failed);
    assert_eq!(failed.error, Some(permanent()));

    for (key, terminal) in [("fetch", &succeeded), ("apply", &failed)] {
        for update in [
            StepUpdate::Started { attempt: 3 },
            StepUpdate::Started { attempt: 2 },
            StepUpdate::AttemptFailed { error: transient() },
            StepUpdate::Succeeded {
                output: "\"other\"".to_owned(),
            },
            StepUpdate::Failed { error: transient() },
        ] {
            assert_kind(
                record(key, update).await,
                ErrorKind::Conflict,
                "a write to a terminal step",
            );
        }
        let stored = workflows.step(&claim.run, key).await.unwrap();
        assert_eq!(
            stored.as_ref(),
            Some(terminal),
            "terminal step {key} changed"
        );
    }
    assert_eq!(
        workflows.step(&RunId::random(), "fetch").await.unwrap(),
        None
    );
}

pub async fn a_suspended_run_wakes_at_its_time(harness: &dyn Harness) {
    let store = plain(harness).await;
    let workflows = store.workflows();
    let sleeper = create(&*store, WORKFLOW).await;
    let first = claim(&*store, "alpha", LONG).await;
    let suspended = workflows.suspend(&first.claim, Some(LONG)).await.unwrap();
    assert_eq!(suspended.state, RunState::Waiting);
    assert_eq!(suspended.claim, None);
    assert!(suspended.wake_at.unwrap() > suspended.updated_at);
    assert_all_writes_fenced(&*store, &first.claim).await;

    let napper = create(&*store, WORKFLOW).await;
    let second = claim(&*store, "alpha", LONG).await;
    assert_eq!(second.claim.run, napper.id);
    workflows.suspend(&second.claim, Some(SHORT)).await.unwrap();
    let woken = claim_eventually(&*store, "beta", LONG).await;
    assert_eq!(woken.claim.run, napper.id);
    assert_eq!(woken.claim.generation.0, 2);
    assert_eq!(woken.run.wake_at, None);
    nothing_runnable(&*store).await;
    assert_eq!(read(&*store, &sleeper.id).await.state, RunState::Waiting);
}

pub async fn a_released_run_is_claimable_at_once(harness: &dyn Harness) {
    let store = plain(harness).await;
    let run = create(&*store, WORKFLOW).await;
    let alpha = claim(&*store, "alpha", LONG).await;
    let released = store.workflows().release(&alpha.claim).await.unwrap();
    assert_eq!(released.state, RunState::Waiting);
    assert_eq!(released.claim, None);
    let beta = claim(&*store, "beta", LONG).await;
    assert_eq!(beta.claim.run, run.id);
    assert_eq!(beta.claim.generation.0, 2);
    assert_all_writes_fenced(&*store, &alpha.claim).await;
}

pub async fn a_hook_delivery_is_idempotent_and_wakes_the_run(harness: &dyn Harness) {
    let store = plain(harness).await;
    let workflows = store.workflows();
    let run = create(&*store, WORKFLOW).await;
    let first = claim(&*store, "alpha", LONG).await;
    assert_eq!(
        workflows
            .await_hook(&first.claim, "approve", None)
            .await
            .unwrap(),
        HookWait::Waiting { wake_after: None }
    );
    let waiting = workflows.suspend(&first.claim, None).await.unwrap();
    assert_eq!((waiting.state, waiting.wake_at), (RunState::Waiting, None));
    nothing_runnable(&*store).await;
    assert_eq!(workflows.hook(&run.id, "approve").await.unwrap(), None);

    let delivered = workflows
        .deliver_hook(&run.id, "approve", "delivery-1", r#"{"ok":true}"#)
        .await
        .unwrap();
    assert_eq!(delivered, HookDelivery::Delivered);
    let hook = workflows
        .hook(&run.id, "approve")
        .await
        .unwrap()
        .expect("the hook is stored");
    assert_eq!(
        (
            hook.key.as_str(),
            hook.idempotency_key.as_str(),
            hook.payload.as_str()
        ),
        ("approve", "delivery-1", r#"{"ok":true}"#)
    );
    assert!(read(&*store, &run.id).await.wake_at.is_some());

    let again = workflows
        .deliver_hook(&run.id, "approve", "delivery-1", r#"{"ok":false}"#)
        .await
        .unwrap();
    assert_eq!(again, HookDelivery::AlreadyDelivered);
    assert_kind(
        workflows
            .deliver_hook(&run.id, "approve", "delivery-2", r#"{"ok":false}"#)
            .await,
        ErrorKind::Conflict,
        "another delivery of a delivered hook",
    );
    assert_eq!(
        workflows.hook(&run.id, "approve").await.unwrap(),
        Some(hook.clone())
    );

    let second = claim(&*store, "beta", LONG).await;
    assert_eq!(second.claim.run, run.id);
    assert_eq!(
        workflows
            .await_hook(&second.claim, "approve", None)
            .await
            .unwrap(),
        HookWait::Delivered(hook.clone())
    );
    workflows
        .finish(&second.claim, Ok("true".to_owned()))
        .await
        .unwrap();
    assert_eq!(
        workflows
            .deliver_hook(&run.id, "approve", "delivery-1", "{}")
            .await
            .unwrap(),
        HookDelivery::AlreadyDelivered,
        "a repeated delivery gets the same answer after the run ended"
    );
    assert_kind(
        workflows
            .deliver_hook(&RunId::random(), "approve", "delivery-1", "{}")
            .await,
        ErrorKind::Missing,
        "a hook for an unknown run",
    );

    // A hook may arrive before the run ever waits for it.
    let early = create(&*store, WORKFLOW).await;
    workflows
        .deliver_hook(&early.id, "approve", "early", "1")
        .await
        .unwrap();
    assert_eq!(read(&*store, &early.id).await.state, RunState::Pending);
    let third = claim(&*store, "gamma", LONG).await;
    assert_eq!(third.claim.run, early.id);
    match workflows
        .await_hook(&third.claim, "approve", None)
        .await
        .unwrap()
    {
        HookWait::Delivered(hook) => assert_eq!(hook.payload, "1"),
        other => panic!("the early hook was not found: {other:?}"),
    }
}

pub async fn a_hook_delivered_while_running_is_not_slept_through(harness: &dyn Harness) {
    let store = plain(harness).await;
    let workflows = store.workflows();
    let run = create(&*store, WORKFLOW).await;
    let first = claim(&*store, "alpha", LONG).await;
    assert_eq!(
        workflows
            .await_hook(&first.claim, "approve", None)
            .await
            .unwrap(),
        HookWait::Waiting { wake_after: None }
    );
    workflows
        .deliver_hook(&run.id, "approve", "delivery-1", "true")
        .await
        .unwrap();
    assert_eq!(read(&*store, &run.id).await.state, RunState::Running);
    let suspended = workflows.suspend(&first.claim, None).await.unwrap();
    assert!(
        suspended.wake_at.is_some(),
        "the run sleeps through a hook that arrived while it ran"
    );
    let second = claim(&*store, "beta", LONG).await;
    assert_eq!(second.claim.run, run.id);
}

pub async fn a_hook_wait_times_out_for_good(harness: &dyn Harness) {
    let store = plain(harness).await;
    let workflows = store.workflows();
    let run = create(&*store, WORKFLOW).await;
    let claimed = claim(&*store, "alpha", LONG).await;
    match workflows
        .await_hook(&claimed.claim, "approve", Some(SHORT))
        .await
        .unwrap()
    {
        HookWait::Waiting {
            wake_after: Some(left),
        } => assert!(left <= SHORT),
        other => panic!("expected a wait with a timeout, got {other:?}"),
    }
    eventually("the hook's wait to time out", || async {
        // A later timeout does not move the deadline of a wait that began.
        match workflows
            .await_hook(&claimed.claim, "approve", Some(LONG))
            .await
            .unwrap()
        {
            HookWait::TimedOut => true,
            HookWait::Waiting {
                wake_after: Some(left),
            } => {
                assert!(left <= SHORT);
                false
            }
            other => panic!("unexpected hook state {other:?}"),
        }
    })
    .await;
    assert_kind(
        workflows
            .deliver_hook(&run.id, "approve", "late", "true")
            .await,
        ErrorKind::Conflict,
        "a delivery after the timeout",
    );
    assert_eq!(
        workflows
            .await_hook(&claimed.claim, "approve", None)
            .await
            .unwrap(),
        HookWait::TimedOut
    );
    assert_eq!(workflows.hook(&run.id, "approve").await.unwrap(), None);
}

/// The database's clock, read through the lease store.
async fn database_now(store: &dyn Storage) -> UnixMillis {
    store.leases().peek(&name()).await.unwrap().now
}

pub async fn purge_removes_old_terminal_runs_with_their_steps_and_hooks(harness: &dyn Harness) {
    let store = plain(harness).await;
    let workflows = store.workflows();

    create(&*store, WORKFLOW).await;
    let old = claim(&*store, "alpha", LONG).await.claim;
    workflows
        .record_step(&old, "fetch", &StepUpdate::Started { attempt: 1 })
        .await
        .unwrap();
    workflows
        .deliver_hook(&old.run, "approve", "k", "true")
        .await
        .unwrap();
    let finished = workflows.finish(&old, Ok("1".to_owned())).await.unwrap();

    let waiting = create(&*store, WORKFLOW).await;
    let suspended = claim(&*store, "alpha", LONG).await.claim;
    workflows.suspend(&suspended, None).await.unwrap();
    let running = create(&*store, WORKFLOW).await;
    claim(&*store, "alpha", LONG).await;

    assert_eq!(
        workflows
            .purge_runs(Duration::from_secs(3600))
            .await
            .unwrap(),
        0
    );
    let finished_at = finished.finished_at.unwrap();
    eventually("the finished run to age", || async {
        database_now(&*store).await >= finished_at.plus(Duration::from_millis(1500))
    })
    .await;

    create(&*store, WORKFLOW).await;
    let recent = claim(&*store, "alpha", LONG).await.claim;
    workflows
        .record_step(&recent, "fetch", &StepUpdate::Started { attempt: 1 })
        .await
        .unwrap();
    workflows.finish(&recent, Ok("2".to_owned())).await.unwrap();
    let pending = create(&*store, WORKFLOW).await;

    assert_eq!(
        workflows.purge_runs(Duration::from_secs(1)).await.unwrap(),
        1
    );
    assert_eq!(workflows.run(&old.run).await.unwrap(), None);
    assert_eq!(workflows.step(&old.run, "fetch").await.unwrap(), None);
    assert_eq!(workflows.hook(&old.run, "approve").await.unwrap(), None);
    for kept in [&waiting.id, &running.id, &recent.run, &pending.id] {
        assert!(
            workflows.run(kept).await.unwrap().is_some(),
            "{kept} was purged"
        );
    }
    assert!(
        workflows
            .step(&recent.run, "fetch")
            .await
            .unwrap()
            .is_some()
    );
}
