//! Contract cases for the schema store: reservations with the lease and request keys, conditional
//! transitions, immutable inventories and terminal results, steps, the lease's heartbeat, expiry,
//! release and clearing, one review decision, artifacts and cleanup grants used once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use super::lease::plain;
use super::{Harness, eventually};
use fermata_store::Storage;
use fermata_store::error::ErrorKind;
use fermata_store::schema::{
    ArtifactState, AuditAction, CleanupKind, CleanupResult, ClearOutcome, DatabaseName,
    DatabaseReport, Decided, Decision, ErrorCode, FileChange, FileDifference, Freshness,
    InventoryId, LeaseClearing, NewArtifact, NewCleanupGrant, NewInventory, NewOperation,
    Operation, OperationId, OperationKind, OperationState, Outcome, PullRequest, RequestKey,
    Reservation, ReviewState, SafeError, SchemaLeaseStatus, StepKey, StepProgress, StepState,
    Subject, Transition,
};
use fermata_store::session::SecretHash;
use fermata_store::user::UserId;

const LONG: Duration = Duration::from_secs(3600);
const SHORT: Duration = Duration::from_millis(400);
/// A lease that must still be live for a few calls, then expire.
const BRIEF: Duration = Duration::from_millis(1500);

fn admin() -> UserId {
    UserId("admin".to_owned())
}

fn names(list: &[&str]) -> Vec<DatabaseName> {
    list.iter()
        .map(|name| DatabaseName::new(*name).unwrap())
        .collect()
}

fn new_operation(
    kind: OperationKind,
    key: &str,
    inventory: Option<InventoryId>,
    databases: &[&str],
) -> NewOperation {
    NewOperation {
        id: OperationId::generate(),
        kind,
        actor: admin(),
        request_key: RequestKey::new(key).unwrap(),
        inventory,
        databases: names(databases),
        remove_missing: false,
    }
}

fn created(reservation: Reservation) -> Operation {
    match reservation {
        Reservation::Created(operation) => operation,
        other => panic!("expected a new operation, got {other:?}"),
    }
}

/// An inventory operation that succeeded with `databases`, as the inventory workflow leaves it.
async fn inventory_of(store: &dyn Storage, databases: &[&str], lifetime: Duration) -> InventoryId {
    let schema = store.schema();
    let operation = created(
        schema
            .reserve_operation(
                &new_operation(
                    OperationKind::Inventory,
                    &format!("inventory-{}", uuid::Uuid::new_v4()),
                    None,
                    &[],
                ),
                LONG,
            )
            .await
            .unwrap(),
    );
    schema
        .record_inventory(&NewInventory {
            id: InventoryId::generate(),
            operation: operation.id,
            actor: admin(),
            server_version: "11.4.2-MariaDB".to_owned(),
            databases: names(databases),
            ignored: Vec::new(),
            lifetime,
        })
        .await
        .unwrap()
        .id
}

async fn refresh(store: &dyn Storage, key: &str, lease_ttl: Duration) -> Reservation {
    let inventory = inventory_of(store, &["app", "billing"], LONG).await;
    store
        .schema()
        .reserve_operation(
            &new_operation(
                OperationKind::Refresh,
                key,
                Some(inventory),
                &["app", "billing"],
            ),
            lease_ttl,
        )
        .await
        .unwrap()
}

async fn wait_for_lease_expiry(store: &dyn Storage) {
    eventually("the schema lease expires", || async {
        let now = store.schema().clock().await.unwrap();
        store
            .schema()
            .schema_lease()
            .await
            .unwrap()
            .is_none_or(|lease| lease.is_expired(now))
    })
    .await;
}

pub async fn schema_reservations_take_the_lease_and_repeat_by_request_key(harness: &dyn Harness) {
    let store = plain(harness).await;
    let schema = store.schema();
    let first = created(refresh(&*store, "browser-1", LONG).await);
    assert_eq!(first.state, OperationState::Reserved);
    assert_eq!(first.kind, OperationKind::Refresh);
    let lease = schema
        .schema_lease()
        .await
        .unwrap()
        .expect("the lease is taken");
    assert_eq!(lease.operation, first.id);
    assert_eq!(lease.status, SchemaLeaseStatus::Active);
    assert_eq!(lease.kind, OperationKind::Refresh);

    // The same request again returns the same operation and changes nothing.
    let again = NewOperation {
        id: OperationId::generate(),
        ..new_operation(
            OperationKind::Refresh,
            "browser-1",
            first.inventory,
            &["app"],
        )
    };
    match schema.reserve_operation(&again, LONG).await.unwrap() {
        Reservation::Existing(existing) => assert_eq!(existing, first),
        other => panic!("a repeated request created {other:?}"),
    }
    assert_eq!(
        schema
            .operation_by_request(&admin(), &RequestKey::new("browser-1").unwrap())
            .await
            .unwrap(),
        Some(first.clone())
    );
    assert!(
        schema
            .operation_by_request(
                &UserId("someone".to_owned()),
                &RequestKey::new("browser-1").unwrap()
            )
            .await
            .unwrap()
            .is_none()
    );
    assert!(schema.operation(again.id).await.unwrap().is_none());

    // Another refresh or verification is refused while the lease is held, naming the holder.
    let verification = new_operation(
        OperationKind::Verification,
        "browser-2",
        first.inventory,
        &["app"],
    );
    match schema.reserve_operation(&verification, LONG).await.unwrap() {
        Reservation::LeaseHeld(held) => assert_eq!(held.operation, first.id),
        other => panic!("a second lease holder: {other:?}"),
    }
    assert!(schema.operation(verification.id).await.unwrap().is_none());
    assert!(
        schema
            .database_results(verification.id)
            .await
            .unwrap()
            .is_empty()
    );

    // Inventory never takes the lease and stays available.
    let inventory = new_operation(OperationKind::Inventory, "browser-3", None, &[]);
    created(schema.reserve_operation(&inventory, LONG).await.unwrap());
    assert_eq!(
        schema.schema_lease().await.unwrap().unwrap().operation,
        first.id
    );

    // One pending result row per selected database, in selection order, and the audit event.
    let results = schema.database_results(first.id).await.unwrap();
    let selected: Vec<_> = results.iter().map(|row| row.database.as_str()).collect();
    assert_eq!(selected, ["app", "billing"]);
    assert!(
        results
            .iter()
            .all(|row| row.report.is_none() && row.finished_at.is_none())
    );
    let audit = schema.audit_events(first.id).await.unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].action, AuditAction::OperationRequested);
    assert_eq!(audit[0].actor, admin());

    // Selections the kinds cannot have are refused.
    for bad in [
        new_operation(OperationKind::Refresh, "bad-1", first.inventory, &[]),
        new_operation(OperationKind::Refresh, "bad-2", None, &["app"]),
        new_operation(OperationKind::Inventory, "bad-3", None, &["app"]),
        new_operation(
            OperationKind::Refresh,
            "bad-4",
            first.inventory,
            &["app", "app"],
        ),
    ] {
        let error = schema.reserve_operation(&bad, LONG).await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Invalid, "{bad:?}");
    }
}

pub async fn concurrent_reservations_let_exactly_one_take_the_lease(harness: &dyn Harness) {
    let store = plain(harness).await;
    let inventory = inventory_of(&*store, &["app"], LONG).await;
    let attempts = (0..8).map(|i| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            store
                .schema()
                .reserve_operation(
                    &new_operation(
                        OperationKind::Verification,
                        &format!("racer-{i}"),
                        Some(inventory),
                        &["app"],
                    ),
                    LONG,
                )
                .await
                .unwrap()
        })
    });
    let outcomes = futures::future::join_all(attempts).await;
    let winners: Vec<_> = outcomes
        .into_iter()
        .map(Result::unwrap)
        .filter_map(|outcome| match outcome {
            Reservation::Created(operation) => Some(operation.id),
            Reservation::LeaseHeld(_) => None,
            Reservation::Existing(other) => panic!("no request key repeated: {other:?}"),
        })
        .collect();
    assert_eq!(winners.len(), 1, "{winners:?}");
    assert_eq!(
        store
            .schema()
            .schema_lease()
            .await
            .unwrap()
            .unwrap()
            .operation,
        winners[0]
    );
}

pub async fn schema_transitions_are_conditional_and_terminal_states_never_change(
    harness: &dyn Harness,
) {
    use OperationState::*;
    let store = plain(harness).await;
    let schema = store.schema();
    let operation = created(refresh(&*store, "browser-1", LONG).await);
    let id = operation.id;

    let starting = schema
        .transition(id, &Transition::new(Reserved, Starting))
        .await
        .unwrap()
        .expect("reserved becomes starting");
    assert_eq!(starting.state, Starting);
    assert!(starting.finished_at.is_none());
    // The same move again finds the operation no longer reserved.
    assert!(
        schema
            .transition(id, &Transition::new(Reserved, Starting))
            .await
            .unwrap()
            .is_none()
    );
    // Moves the state machine does not have are refused outright.
    let error = schema
        .transition(id, &Transition::new(Starting, Publishing))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Invalid);

    // Racing moves from the same state: exactly one wins.
    let racers = (0..6).map(|i| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            let to = if i % 2 == 0 { Running } else { StartUnknown };
            store
                .schema()
                .transition(id, &Transition::new(Starting, to))
                .await
                .unwrap()
        })
    });
    let winners = futures::future::join_all(racers)
        .await
        .into_iter()
        .filter(|outcome| outcome.as_ref().unwrap().is_some())
        .count();
    assert_eq!(winners, 1);
    let now = schema.operation(id).await.unwrap().unwrap().state;

    // Failing with a safe error, releasing the lease in the same transaction.
    let error = SafeError::about(
        ErrorCode::DatabaseNoLongerVisible,
        Subject::Database(names(&["app"])[0].clone()),
    );
    let failed = schema
        .transition(id, &Transition::fail(now, error.clone()).releasing_lease())
        .await
        .unwrap()
        .expect("a live operation may fail");
    assert_eq!(failed.state, Failed);
    assert_eq!(failed.error, Some(error.clone()));
    assert!(failed.finished_at.is_some());
    assert!(schema.schema_lease().await.unwrap().is_none());

    // A terminal state never changes: no move out of it exists, and none is taken.
    for to in OperationState::ALL {
        match schema.transition(id, &Transition::new(Failed, to)).await {
            Err(error) => assert_eq!(error.kind(), ErrorKind::Invalid),
            Ok(moved) => panic!("failed moved to {to}: {moved:?}"),
        }
    }
    assert!(!schema.bind_run(id, "run-late").await.unwrap());
    let read = schema.operation(id).await.unwrap().unwrap();
    assert_eq!(read, failed);
    assert_eq!(read.error.unwrap().message(), error.message());
}

pub async fn operations_are_counted_by_kind_and_state(harness: &dyn Harness) {
    use OperationState::*;
    let store = plain(harness).await;
    let schema = store.schema();
    assert_eq!(schema.operation_counts().await.unwrap(), []);
    // A refresh reserves after an inventory of its own; a second inventory stays reserved too.
    let refresh = created(refresh(&*store, "browser-1", LONG).await);
    inventory_of(&*store, &["app"], LONG).await;
    schema
        .transition(refresh.id, &Transition::new(Reserved, Starting))
        .await
        .unwrap()
        .expect("reserved becomes starting");
    let counts: Vec<_> = schema
        .operation_counts()
        .await
        .unwrap()
        .into_iter()
        .map(|count| (count.kind, count.state, count.count))
        .collect();
    assert_eq!(
        counts,
        [
            (OperationKind::Inventory, Reserved, 2),
            (OperationKind::Refresh, Starting, 1),
        ]
    );
}

pub async fn the_first_bound_run_stays_bound(harness: &dyn Harness) {
    use OperationState::*;
    let store = plain(harness).await;
    let schema = store.schema();
    let operation = created(refresh(&*store, "browser-1", LONG).await);
    schema
        .transition(operation.id, &Transition::new(Reserved, Starting))
        .await
        .unwrap()
        .unwrap();
    // An uncertain start records why; the run turning up clears it.
    let unknown = Transition {
        error: Some(SafeError::new(ErrorCode::StartUnknown)),
        ..Transition::new(Starting, StartUnknown)
    };
    let uncertain = schema
        .transition(operation.id, &unknown)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        uncertain.error,
        Some(SafeError::new(ErrorCode::StartUnknown))
    );
    assert!(schema.bind_run(operation.id, "run-1").await.unwrap());
    let running = schema
        .transition(operation.id, &Transition::new(StartUnknown, Running))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(running.error, None);
    assert!(schema.bind_run(operation.id, "run-1").await.unwrap());
    assert!(!schema.bind_run(operation.id, "run-2").await.unwrap());
    let read = schema.operation(operation.id).await.unwrap().unwrap();
    assert_eq!(read.run_id.as_deref(), Some("run-1"));
    let lease = schema.schema_lease().await.unwrap().unwrap();
    assert_eq!(lease.run_id.as_deref(), Some("run-1"));
}

pub async fn a_refresh_records_its_reviewed_base_once(harness: &dyn Harness) {
    use OperationState::*;
    let store = plain(harness).await;
    let schema = store.schema();
    let operation = created(refresh(&*store, "browser-1", LONG).await);
    let id = operation.id;
    assert_eq!(operation.reviewed_base_commit, None);
    assert!(schema.record_reviewed_base(id, "c0ffee").await.unwrap());
    // Again with the same commit (a retried step): nothing changes; another commit is refused.
    assert!(schema.record_reviewed_base(id, "c0ffee").await.unwrap());
    assert!(!schema.record_reviewed_base(id, "beef").await.unwrap());
    let read = schema.operation(id).await.unwrap().unwrap();
    assert_eq!(read.reviewed_base_commit.as_deref(), Some("c0ffee"));
    assert!(
        !schema
            .record_reviewed_base(OperationId::generate(), "c0ffee")
            .await
            .unwrap()
    );

    // An operation that ended records nothing.
    schema
        .transition(
            id,
            &Transition::fail(Reserved, SafeError::new(ErrorCode::StartFailed)).releasing_lease(),
        )
        .await
        .unwrap()
        .unwrap();
    let other = created(refresh(&*store, "browser-2", LONG).await);
    schema
        .transition(
            other.id,
            &Transition::fail(Reserved, SafeError::new(ErrorCode::StartFailed)).releasing_lease(),
        )
        .await
        .unwrap()
        .unwrap();
    assert!(
        !schema
            .record_reviewed_base(other.id, "c0ffee")
            .await
            .unwrap()
    );
    let read = schema.operation(other.id).await.unwrap().unwrap();
    assert_eq!(read.reviewed_base_commit, None);
}

pub async fn a_publishing_refresh_records_its_pull_request_once(harness: &dyn Harness) {
    use OperationState::*;
    let store = plain(harness).await;
    let schema = store.schema();
    let id = created(refresh(&*store, "browser-1", LONG).await).id;
    let pull = PullRequest {
        number: 7,
        url: "https://github.example/acme/schemas/pull/7".to_owned(),
        head: "fermata/refresh".to_owned(),
        base: "main".to_owned(),
    };
    // Not publishing yet: nothing is recorded.
    assert!(!schema.record_pull_request(id, &pull).await.unwrap());
    for (from, to) in [
        (Reserved, Starting),
        (Starting, Running),
        (Running, AwaitingReview),
        (AwaitingReview, Publishing),
    ] {
        schema
            .transition(id, &Transition::new(from, to))
            .await
            .unwrap()
            .unwrap();
    }
    // A publication that failed is held: still publishing, with its error, the lease released.
    let held = schema
        .transition(
            id,
            &Transition {
                error: Some(SafeError::new(ErrorCode::GithubFailed)),
                ..Transition::new(Publishing, Publishing).releasing_lease()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(held.state, Publishing);
    assert_eq!(held.error, Some(SafeError::new(ErrorCode::GithubFailed)));
    assert!(held.finished_at.is_none());
    assert!(schema.schema_lease().await.unwrap().is_none());
    // Published again: the error goes.
    let again = schema
        .transition(id, &Transition::new(Publishing, Publishing))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.error, None);
    assert!(schema.record_pull_request(id, &pull).await.unwrap());
    // The same pull request again (a retried step) is fine; another is refused.
    assert!(schema.record_pull_request(id, &pull).await.unwrap());
    let other = PullRequest {
        number: 8,
        ..pull.clone()
    };
    assert!(!schema.record_pull_request(id, &other).await.unwrap());
    let done = schema
        .transition(
            id,
            &Transition::new(Publishing, Succeeded).releasing_lease(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.pull_request, Some(pull.clone()));
    assert!(!done.remove_missing);

    // The terminal operation's pull request stays listed until it is known to be settled; the
    // record sits beside the operation, which never changes.
    let unsettled = schema.unsettled_pull_requests().await.unwrap();
    assert_eq!(unsettled.iter().map(|op| op.id).collect::<Vec<_>>(), [id]);
    assert_eq!(unsettled[0].pull_request, Some(pull));
    assert!(schema.settle_pull_request(id).await.unwrap());
    assert!(
        schema.settle_pull_request(id).await.unwrap(),
        "settling again changes nothing"
    );
    assert!(schema.unsettled_pull_requests().await.unwrap().is_empty());
    assert_eq!(schema.operation(id).await.unwrap().unwrap(), done);

    // A refresh may propose removing missing databases, and reads so back; nothing else may.
    let inventory = inventory_of(&*store, &["app"], LONG).await;
    let removing = NewOperation {
        remove_missing: true,
        ..new_operation(
            OperationKind::Refresh,
            "browser-2",
            Some(inventory),
            &["app"],
        )
    };
    let reserved = created(schema.reserve_operation(&removing, LONG).await.unwrap());
    assert!(reserved.remove_missing);
    assert!(
        !schema.settle_pull_request(reserved.id).await.unwrap(),
        "no pull request, nothing to settle"
    );
    assert!(
        schema
            .operation(reserved.id)
            .await
            .unwrap()
            .unwrap()
            .remove_missing
    );
    let verification = NewOperation {
        remove_missing: true,
        ..new_operation(
            OperationKind::Verification,
            "browser-3",
            Some(inventory),
            &["app"],
        )
    };
    let refused = schema
        .reserve_operation(&verification, LONG)
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Invalid);
}

pub async fn inventories_are_immutable_and_keep_their_order(harness: &dyn Harness) {
    let store = plain(harness).await;
    let schema = store.schema();
    let operation = created(
        schema
            .reserve_operation(
                &new_operation(OperationKind::Inventory, "inv", None, &[]),
                LONG,
            )
            .await
            .unwrap(),
    );
    let exact = [
        "Zeta",
        "a b",
        "back`tick",
        "naïve",
        "ünïcode",
        "\u{4e2d}\u{6587}",
    ];
    let recorded = schema
        .record_inventory(&NewInventory {
            id: InventoryId::generate(),
            operation: operation.id,
            actor: admin(),
            server_version: "8.0.36".to_owned(),
            databases: names(&exact),
            ignored: names(&["scratch 1", "scratch`2"]),
            lifetime: LONG,
        })
        .await
        .unwrap();
    let listed: Vec<_> = recorded
        .databases
        .iter()
        .map(DatabaseName::as_str)
        .collect();
    assert_eq!(listed, exact);
    // What the filter left out is kept with it, in its order.
    assert_eq!(recorded.ignored, names(&["scratch 1", "scratch`2"]));
    assert_eq!(recorded.expires_at.since(recorded.discovered_at), LONG);
    assert_eq!(recorded.operation, operation.id);

    // Recording again for the same operation returns the first inventory, unchanged.
    let again = schema
        .record_inventory(&NewInventory {
            id: InventoryId::generate(),
            operation: operation.id,
            actor: UserId("someone-else".to_owned()),
            server_version: "9.9.9".to_owned(),
            databases: names(&["other"]),
            ignored: Vec::new(),
            lifetime: SHORT,
        })
        .await
        .unwrap();
    assert_eq!(again, recorded);
    assert_eq!(
        schema.inventory(recorded.id).await.unwrap(),
        Some(recorded.clone())
    );
    assert_eq!(
        schema.latest_inventory().await.unwrap(),
        Some(recorded.clone())
    );

    // A later discovery is the latest; an expired one says so on the database's clock.
    eventually("the database clock moves on", || async {
        schema.clock().await.unwrap() > recorded.discovered_at
    })
    .await;
    let later = inventory_of(&*store, &["x"], SHORT).await;
    assert_eq!(schema.latest_inventory().await.unwrap().unwrap().id, later);
    eventually("the short inventory expires", || async {
        let inventory = schema.inventory(later).await.unwrap().unwrap();
        inventory.is_expired(schema.clock().await.unwrap())
    })
    .await;

    // Inventories with duplicate names or for no operation are refused.
    let duplicate = NewInventory {
        id: InventoryId::generate(),
        operation: OperationId::generate(),
        actor: admin(),
        server_version: "8.0.36".to_owned(),
        databases: names(&["a", "a"]),
        ignored: Vec::new(),
        lifetime: LONG,
    };
    assert_eq!(
        schema
            .record_inventory(&duplicate)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Invalid
    );
    let ignored_and_listed = NewInventory {
        databases: names(&["a"]),
        ignored: names(&["a"]),
        ..duplicate.clone()
    };
    assert_eq!(
        schema
            .record_inventory(&ignored_and_listed)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Invalid
    );
    let orphan = NewInventory {
        databases: names(&["a"]),
        ..duplicate
    };
    assert_eq!(
        schema.record_inventory(&orphan).await.unwrap_err().kind(),
        ErrorKind::Invalid
    );
}

pub async fn database_results_become_immutable_when_terminal(harness: &dyn Harness) {
    let store = plain(harness).await;
    let schema = store.schema();
    let operation = created(refresh(&*store, "browser-1", LONG).await);
    let [app, billing] = <[DatabaseName; 2]>::try_from(names(&["app", "billing"])).unwrap();

    assert!(schema.begin_database(operation.id, &app).await.unwrap());
    let changed = DatabaseReport {
        outcome: Outcome::Changed,
        freshness: Freshness::Fresh,
        object_counts: BTreeMap::from([("tables".to_owned(), 12), ("views".to_owned(), 2)]),
        snapshot_hash: Some("a".repeat(64)),
        merged_hash: Some("b".repeat(64)),
        differences: Vec::new(),
        error: None,
    };
    assert!(
        schema
            .finish_database(operation.id, &app, &changed)
            .await
            .unwrap()
    );
    let failed = DatabaseReport::failed(
        SafeError::about(
            ErrorCode::DatabaseNoLongerVisible,
            Subject::Database(app.clone()),
        ),
        true,
    );
    assert!(
        !schema
            .finish_database(operation.id, &app, &failed)
            .await
            .unwrap()
    );
    assert!(!schema.begin_database(operation.id, &app).await.unwrap());

    let unregistered = DatabaseReport::failed(SafeError::new(ErrorCode::PermissionDenied), false);
    assert!(
        schema
            .finish_database(operation.id, &billing, &unregistered)
            .await
            .unwrap()
    );

    let results = schema.database_results(operation.id).await.unwrap();
    assert_eq!(results[0].report.as_ref(), Some(&changed));
    assert!(results[0].started_at.is_some() && results[0].finished_at.is_some());
    let billing_report = results[1].report.as_ref().unwrap();
    assert_eq!(billing_report.outcome, Outcome::Failed);
    assert_eq!(billing_report.freshness, Freshness::Unregistered);
    assert_eq!(
        billing_report.error.as_ref().unwrap().code(),
        ErrorCode::PermissionDenied
    );

    // A database outside the selection, and impossible reports, are refused.
    let stranger = DatabaseName::new("stranger").unwrap();
    assert_eq!(
        schema
            .begin_database(operation.id, &stranger)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Missing
    );
    let fresh_failure = DatabaseReport {
        freshness: Freshness::Fresh,
        ..unregistered
    };
    assert_eq!(
        schema
            .finish_database(operation.id, &app, &fresh_failure)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Invalid
    );
}

pub async fn a_database_history_lists_its_finished_results_latest_first(harness: &dyn Harness) {
    let store = plain(harness).await;
    let schema = store.schema();
    let [app, billing] = <[DatabaseName; 2]>::try_from(names(&["app", "billing"])).unwrap();
    let refreshed = created(refresh(&*store, "refresh-1", LONG).await);
    let unchanged = DatabaseReport {
        outcome: Outcome::Unchanged,
        freshness: Freshness::Fresh,
        object_counts: BTreeMap::from([("tables".to_owned(), 2)]),
        snapshot_hash: Some("a".repeat(64)),
        merged_hash: Some("a".repeat(64)),
        differences: Vec::new(),
        error: None,
    };
    assert!(
        schema
            .finish_database(refreshed.id, &app, &unchanged)
            .await
            .unwrap()
    );
    assert!(schema.release_lease(refreshed.id).await.unwrap());
    let first_finished = schema.database_results(refreshed.id).await.unwrap()[0]
        .finished_at
        .unwrap();
    eventually("the clock passes the first result", || async {
        schema.clock().await.unwrap() > first_finished
    })
    .await;

    let verification = created(
        schema
            .reserve_operation(
                &new_operation(
                    OperationKind::Verification,
                    "verify-1",
                    refreshed.inventory,
                    &["app"],
                ),
                LONG,
            )
            .await
            .unwrap(),
    );
    // Only a changed database lists the files that differ, and they are kept as listed.
    let differences = vec![
        FileDifference {
            path: "tables/orders.sql".to_owned(),
            change: FileChange::Modified,
        },
        FileDifference {
            path: "views/recent.sql".to_owned(),
            change: FileChange::Removed,
        },
    ];
    let listed_but_unchanged = DatabaseReport {
        differences: differences.clone(),
        ..unchanged.clone()
    };
    assert_eq!(
        schema
            .finish_database(verification.id, &app, &listed_but_unchanged)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Invalid
    );
    let drifted = DatabaseReport {
        outcome: Outcome::Changed,
        freshness: Freshness::Stale,
        snapshot_hash: Some("c".repeat(64)),
        differences,
        ..unchanged.clone()
    };
    assert!(
        schema
            .finish_database(verification.id, &app, &drifted)
            .await
            .unwrap()
    );
    assert_eq!(
        schema.database_results(verification.id).await.unwrap()[0]
            .report
            .as_ref(),
        Some(&drifted)
    );

    let history = schema.database_history(&app, 10).await.unwrap();
    let listed: Vec<_> = history
        .iter()
        .map(|check| {
            (
                check.kind,
                check.result.operation,
                check.result.report.clone(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            (
                OperationKind::Verification,
                verification.id,
                Some(drifted.clone())
            ),
            (OperationKind::Refresh, refreshed.id, Some(unchanged)),
        ]
    );
    let latest = schema.database_history(&app, 1).await.unwrap();
    assert_eq!(latest.len(), 1);
    assert_eq!(latest[0].result.operation, verification.id);
    // A result still pending is no part of the history, nor is another database's.
    assert!(
        schema
            .database_history(&billing, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let stranger = DatabaseName::new("stranger").unwrap();
    assert!(
        schema
            .database_history(&stranger, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn steps_count_attempts_and_never_change_once_terminal(harness: &dyn Harness) {
    let store = plain(harness).await;
    let schema = store.schema();
    let operation = created(refresh(&*store, "browser-1", Duration::from_secs(600)).await);
    let key = StepKey::new("database:0:app").unwrap();
    assert!(schema.step(operation.id, &key).await.unwrap().is_none());

    let lease_before = schema.schema_lease().await.unwrap().unwrap();
    let first = schema
        .record_step(operation.id, &key, &StepProgress::Attempt, Some(LONG))
        .await
        .unwrap();
    assert_eq!((first.state, first.attempts), (StepState::Running, 1));
    // The step boundary heartbeated the lease.
    let lease = schema.schema_lease().await.unwrap().unwrap();
    assert!(lease.expires_at > lease_before.expires_at);
    assert!(lease.heartbeat_at >= lease_before.heartbeat_at);

    let lost = SafeError::new(ErrorCode::ConnectionLost);
    let retrying = schema
        .record_step(
            operation.id,
            &key,
            &StepProgress::Retrying(lost.clone()),
            None,
        )
        .await
        .unwrap();
    assert_eq!(retrying.error, Some(lost.clone()));
    schema
        .record_step(operation.id, &key, &StepProgress::Attempt, None)
        .await
        .unwrap();
    let done = schema
        .record_step(operation.id, &key, &StepProgress::Succeeded, None)
        .await
        .unwrap();
    assert_eq!((done.state, done.attempts), (StepState::Succeeded, 2));
    assert!(done.terminal_at.is_some());
    assert_eq!(
        schema.step(operation.id, &key).await.unwrap(),
        Some(done.clone())
    );

    for progress in [
        StepProgress::Attempt,
        StepProgress::Failed(lost.clone()),
        StepProgress::Succeeded,
    ] {
        let error = schema
            .record_step(operation.id, &key, &progress, None)
            .await
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Conflict);
    }
    assert_eq!(
        schema.step(operation.id, &key).await.unwrap(),
        Some(done.clone())
    );

    // Steps are listed in the order they began.
    let later = StepKey::new("a-later-step").unwrap();
    eventually("the database clock moves on", || async {
        schema.clock().await.unwrap() > done.started_at
    })
    .await;
    let begun = schema
        .record_step(operation.id, &later, &StepProgress::Attempt, None)
        .await
        .unwrap();
    assert_eq!(schema.steps(operation.id).await.unwrap(), [done, begun]);

    // A step boundary of an operation whose lease is gone is fenced and writes nothing.
    let other = StepKey::new("database:1:billing").unwrap();
    assert!(schema.release_lease(operation.id).await.unwrap());
    let error = schema
        .record_step(operation.id, &other, &StepProgress::Attempt, Some(LONG))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Fenced);
    assert!(schema.step(operation.id, &other).await.unwrap().is_none());
    // The lease is checked before the step: a terminal step under a lost lease is fenced too.
    let error = schema
        .record_step(operation.id, &key, &StepProgress::Attempt, Some(LONG))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Fenced);
}

pub async fn the_schema_lease_heartbeats_expires_and_is_released_conditionally(
    harness: &dyn Harness,
) {
    let store = plain(harness).await;
    let schema = store.schema();
    let holder = created(refresh(&*store, "browser-1", BRIEF).await);
    let stranger = OperationId::generate();

    assert!(schema.heartbeat_lease(holder.id, BRIEF).await.unwrap());
    assert!(!schema.heartbeat_lease(stranger, LONG).await.unwrap());
    assert!(!schema.release_lease(stranger).await.unwrap());
    assert!(
        !schema
            .extend_lease_to(stranger, fermata_store::UnixMillis(i64::MAX))
            .await
            .unwrap()
    );

    wait_for_lease_expiry(&*store).await;
    // An expired lease is not revived by a heartbeat, and still blocks until cleared.
    assert!(!schema.heartbeat_lease(holder.id, LONG).await.unwrap());
    assert!(
        !schema
            .extend_lease_to(holder.id, fermata_store::UnixMillis(i64::MAX))
            .await
            .unwrap()
    );
    match refresh(&*store, "browser-2", LONG).await {
        Reservation::LeaseHeld(lease) => assert_eq!(lease.operation, holder.id),
        other => panic!("an expired lease was taken over: {other:?}"),
    }
    assert!(schema.release_lease(holder.id).await.unwrap());
    assert!(!schema.release_lease(holder.id).await.unwrap());

    // Extended to the review expiry, a lease no longer follows heartbeats.
    let reviewer = created(refresh(&*store, "browser-3", LONG).await);
    let until = schema
        .clock()
        .await
        .unwrap()
        .plus(Duration::from_secs(7200));
    assert!(schema.extend_lease_to(reviewer.id, until).await.unwrap());
    let lease = schema.schema_lease().await.unwrap().unwrap();
    assert_eq!(lease.status, SchemaLeaseStatus::AwaitingReview);
    assert_eq!(lease.expires_at, until);
    // A heartbeat after the decision makes it active again without shortening it.
    assert!(schema.heartbeat_lease(reviewer.id, SHORT).await.unwrap());
    let lease = schema.schema_lease().await.unwrap().unwrap();
    assert_eq!(
        (lease.status, lease.expires_at),
        (SchemaLeaseStatus::Active, until)
    );
}

pub async fn clearing_removes_only_an_expired_lease_of_the_named_operation(harness: &dyn Harness) {
    let store = plain(harness).await;
    let schema = store.schema();
    let live = created(refresh(&*store, "browser-1", LONG).await);
    let clearing = |operation| LeaseClearing {
        operation,
        actor: admin(),
    };

    match schema.clear_lease(&clearing(live.id)).await.unwrap() {
        ClearOutcome::Live(lease) => assert_eq!(lease.operation, live.id),
        other => panic!("a live lease was cleared: {other:?}"),
    }
    assert_eq!(
        schema
            .clear_lease(&clearing(OperationId::generate()))
            .await
            .unwrap(),
        ClearOutcome::NotHeld
    );
    assert!(schema.release_lease(live.id).await.unwrap());

    let stuck = created(refresh(&*store, "browser-2", BRIEF).await);
    schema
        .transition(
            stuck.id,
            &Transition::new(OperationState::Reserved, OperationState::Starting),
        )
        .await
        .unwrap()
        .unwrap();
    wait_for_lease_expiry(&*store).await;
    // Another operation's ID never clears it.
    assert_eq!(
        schema.clear_lease(&clearing(live.id)).await.unwrap(),
        ClearOutcome::NotHeld
    );
    assert_eq!(
        schema.clear_lease(&clearing(stuck.id)).await.unwrap(),
        ClearOutcome::Cleared {
            operation_failed: true
        }
    );
    let failed = schema.operation(stuck.id).await.unwrap().unwrap();
    assert_eq!(failed.state, OperationState::Failed);
    assert_eq!(failed.error.unwrap().code(), ErrorCode::LeaseCleared);
    assert!(schema.schema_lease().await.unwrap().is_none());
    let audit = schema.audit_events(stuck.id).await.unwrap();
    let actions: Vec<_> = audit.iter().map(|event| event.action).collect();
    assert_eq!(
        actions,
        [AuditAction::OperationRequested, AuditAction::LeaseCleared]
    );
    assert_eq!(
        schema.clear_lease(&clearing(stuck.id)).await.unwrap(),
        ClearOutcome::NotHeld
    );

    // An operation that ended without releasing its lease keeps its terminal state.
    let ended = created(refresh(&*store, "browser-3", SHORT).await);
    schema
        .transition(
            ended.id,
            &Transition::fail(
                OperationState::Reserved,
                SafeError::new(ErrorCode::StartFailed),
            ),
        )
        .await
        .unwrap()
        .unwrap();
    wait_for_lease_expiry(&*store).await;
    assert_eq!(
        schema.clear_lease(&clearing(ended.id)).await.unwrap(),
        ClearOutcome::Cleared {
            operation_failed: false
        }
    );
    let ended = schema.operation(ended.id).await.unwrap().unwrap();
    assert_eq!(ended.error.unwrap().code(), ErrorCode::StartFailed);

    // With the lease gone, a new refresh may start.
    created(refresh(&*store, "browser-4", LONG).await);
}

pub async fn a_review_takes_exactly_one_decision(harness: &dyn Harness) {
    let store = plain(harness).await;
    let schema = store.schema();
    let operation = created(refresh(&*store, "browser-1", LONG).await);
    let opened = schema.open_review(operation.id, LONG).await.unwrap();
    assert_eq!(opened.state, ReviewState::Pending);
    assert_eq!(
        schema.open_review(operation.id, SHORT).await.unwrap(),
        opened
    );
    // The window is open: it cannot expire yet.
    assert!(matches!(
        schema
            .decide_review(operation.id, &Decision::Expire)
            .await
            .unwrap(),
        Decided::Refused(_)
    ));

    let deciders = (0..6).map(|i| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            let who = UserId(format!("admin-{i}"));
            let decision = if i % 2 == 0 {
                Decision::Approve(who)
            } else {
                Decision::Reject(who)
            };
            store
                .schema()
                .decide_review(operation.id, &decision)
                .await
                .unwrap()
        })
    });
    let decisions: Vec<_> = futures::future::join_all(deciders)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let recorded: Vec<_> = decisions
        .iter()
        .filter_map(|decided| match decided {
            Decided::Recorded(review) => Some(review.clone()),
            Decided::Refused(_) => None,
        })
        .collect();
    assert_eq!(recorded.len(), 1, "{decisions:?}");
    let decision = &recorded[0];
    assert!(decision.actor.is_some() && decision.decided_at.is_some());
    assert_eq!(
        schema.review(operation.id).await.unwrap().as_ref(),
        Some(decision)
    );

    // A review whose window closed can only expire.
    let other = created(
        store
            .schema()
            .reserve_operation(
                &new_operation(OperationKind::Inventory, "inventory-late", None, &[]),
                LONG,
            )
            .await
            .unwrap(),
    );
    schema.open_review(other.id, SHORT).await.unwrap();
    eventually("the review window closes", || async {
        let review = schema.review(other.id).await.unwrap().unwrap();
        review.expires_at <= schema.clock().await.unwrap()
    })
    .await;
    assert!(matches!(
        schema
            .decide_review(other.id, &Decision::Approve(admin()))
            .await
            .unwrap(),
        Decided::Refused(_)
    ));
    match schema
        .decide_review(other.id, &Decision::Expire)
        .await
        .unwrap()
    {
        Decided::Recorded(review) => {
            assert_eq!(review.state, ReviewState::Expired);
            assert!(review.actor.is_none());
        }
        refused @ Decided::Refused(_) => panic!("an expired review did not expire: {refused:?}"),
    }
    assert_eq!(
        schema
            .decide_review(OperationId::generate(), &Decision::Expire)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Missing
    );
}

pub async fn artifacts_are_recorded_once_and_only_move_forward(harness: &dyn Harness) {
    let store = plain(harness).await;
    let schema = store.schema();
    let operation = created(refresh(&*store, "browser-1", LONG).await);
    let meta = NewArtifact {
        operation: operation.id,
        blob_locator: format!("artifacts/{}.bin", operation.id),
        key_version: 3,
        iv: vec![7; 12],
        auth_tag: vec![9; 16],
        ciphertext_hash: "c".repeat(64),
        manifest: r#"{"databases":["app"]}"#.to_owned(),
        decision_expires_at: fermata_store::UnixMillis(1_900_000_000_000),
        cleanup_target: format!("artifacts/{}.bin", operation.id),
    };
    let stored = schema.record_artifact(&meta).await.unwrap();
    assert_eq!(stored.state, ArtifactState::Stored);
    assert_eq!(stored.meta, meta);
    assert_eq!(schema.record_artifact(&meta).await.unwrap(), stored);
    let different = NewArtifact {
        key_version: 4,
        ..meta.clone()
    };
    assert_eq!(
        schema.record_artifact(&different).await.unwrap_err().kind(),
        ErrorKind::Conflict
    );

    use ArtifactState::*;
    assert_eq!(
        schema
            .move_artifact(operation.id, Stored, Stored)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Invalid
    );
    assert!(
        schema
            .move_artifact(operation.id, Stored, Discarded)
            .await
            .unwrap()
    );
    assert!(
        !schema
            .move_artifact(operation.id, Stored, Consumed)
            .await
            .unwrap()
    );
    assert!(
        schema
            .move_artifact(operation.id, Discarded, Deleted)
            .await
            .unwrap()
    );
    assert!(
        schema
            .record_artifact_cleanup(operation.id, CleanupResult::Deleted)
            .await
            .unwrap()
    );
    assert!(
        !schema
            .record_artifact_cleanup(operation.id, CleanupResult::AlreadyGone)
            .await
            .unwrap()
    );
    let read = schema.artifact(operation.id).await.unwrap().unwrap();
    assert_eq!(read.state, Deleted);
    assert_eq!(read.cleanup_result, Some(CleanupResult::Deleted));
}

pub async fn cleanup_grants_are_consumed_once(harness: &dyn Harness) {
    let store = plain(harness).await;
    let schema = store.schema();
    let operation = created(refresh(&*store, "browser-1", LONG).await);
    let grant = |seed: u8, lifetime| NewCleanupGrant {
        token_hash: SecretHash([seed; 32]),
        operation: operation.id,
        actor: admin(),
        lifetime,
        allowed: BTreeSet::from([CleanupKind::Artifact, CleanupKind::Workspace]),
    };
    let created_grant = schema.create_cleanup_grant(&grant(1, LONG)).await.unwrap();
    assert!(created_grant.used_at.is_none());
    assert_eq!(
        schema
            .create_cleanup_grant(&grant(1, LONG))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Conflict
    );
    // Not for a cleanup it does not allow, nor for an unknown token.
    assert!(
        schema
            .consume_cleanup_grant(&SecretHash([1; 32]), CleanupKind::Branch)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        schema
            .consume_cleanup_grant(&SecretHash([2; 32]), CleanupKind::Artifact)
            .await
            .unwrap()
            .is_none()
    );

    let consumers = (0..6).map(|_| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            store
                .schema()
                .consume_cleanup_grant(&SecretHash([1; 32]), CleanupKind::Artifact)
                .await
                .unwrap()
        })
    });
    let used: Vec<_> = futures::future::join_all(consumers)
        .await
        .into_iter()
        .filter_map(Result::unwrap)
        .collect();
    assert_eq!(used.len(), 1);
    assert!(used[0].used_at.is_some());
    assert_eq!(used[0].allowed, grant(1, LONG).allowed);

    // An expired grant is never consumed.
    let short = schema.create_cleanup_grant(&grant(3, SHORT)).await.unwrap();
    eventually("the short grant expires", || async {
        schema.clock().await.unwrap() > short.expires_at
    })
    .await;
    assert!(
        schema
            .consume_cleanup_grant(&SecretHash([3; 32]), CleanupKind::Artifact)
            .await
            .unwrap()
            .is_none()
    );
    for bad in [
        NewCleanupGrant {
            allowed: BTreeSet::new(),
            ..grant(4, LONG)
        },
        grant(5, Duration::from_secs(7200)),
    ] {
        assert_eq!(
            schema.create_cleanup_grant(&bad).await.unwrap_err().kind(),
            ErrorKind::Invalid
        );
    }
}
