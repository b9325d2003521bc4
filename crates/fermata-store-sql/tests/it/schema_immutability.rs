//! The schema tables refuse changes to immutable rows even from outside the stores: the
//! migration's triggers guard terminal operations, inventories, terminal results and steps,
//! decided reviews and audit events on SQLite and PostgreSQL alike.

use std::time::Duration;

use fermata_store::schema::{
    DatabaseName, DatabaseReport, Decision, ErrorCode, InventoryId, NewInventory, NewOperation,
    OperationId, OperationKind, OperationState, RequestKey, Reservation, SafeError, StepKey,
    StepProgress, Transition,
};
use fermata_store::{Storage, StoreOptions, UserId};
use fermata_store_sql::testing::{ScratchDatabase, ScratchStorage};

const HOUR: Duration = Duration::from_secs(3600);

async fn reserve(store: &ScratchStorage, new: NewOperation) -> OperationId {
    match store.schema().reserve_operation(&new, HOUR).await.unwrap() {
        Reservation::Created(operation) => operation.id,
        other => panic!("not created: {other:?}"),
    }
}

fn operation(kind: OperationKind, key: &str, inventory: Option<InventoryId>) -> NewOperation {
    NewOperation {
        id: OperationId::generate(),
        kind,
        actor: UserId("admin".to_owned()),
        request_key: RequestKey::new(key).unwrap(),
        inventory,
        databases: if inventory.is_some() {
            vec![DatabaseName::new("app").unwrap()]
        } else {
            Vec::new()
        },
        remove_missing: false,
    }
}

/// Runs `statement` with `id` bound as `$1` and asserts the database refused it.
async fn refused(store: &ScratchStorage, statement: &str, id: &str) {
    let outcome = sqlx::query(statement)
        .bind(id.to_owned())
        .execute(store.storage.pool())
        .await;
    assert!(outcome.is_err(), "the database allowed: {statement}");
}

async fn immutable_rows_refuse_direct_updates(scratch: ScratchDatabase) {
    let store = scratch.open(StoreOptions::default()).await;
    let schema = store.schema();
    let discovery = reserve(&store, operation(OperationKind::Inventory, "inv", None)).await;
    let inventory = schema
        .record_inventory(&NewInventory {
            id: InventoryId::generate(),
            operation: discovery,
            actor: UserId("admin".to_owned()),
            server_version: "11.4.2-MariaDB".to_owned(),
            databases: vec![DatabaseName::new("app").unwrap()],
            ignored: Vec::new(),
            lifetime: HOUR,
        })
        .await
        .unwrap();
    let refresh = reserve(
        &store,
        operation(OperationKind::Refresh, "refresh", Some(inventory.id)),
    )
    .await;
    let app = DatabaseName::new("app").unwrap();
    schema
        .finish_database(
            refresh,
            &app,
            &DatabaseReport::failed(SafeError::new(ErrorCode::ConnectionLost), false),
        )
        .await
        .unwrap();
    let step = StepKey::new("database:0:app").unwrap();
    schema
        .record_step(refresh, &step, &StepProgress::Succeeded, None)
        .await
        .unwrap();
    schema.open_review(refresh, HOUR).await.unwrap();
    schema
        .decide_review(refresh, &Decision::Reject(UserId("admin".to_owned())))
        .await
        .unwrap();
    schema
        .transition(
            refresh,
            &Transition::fail(
                OperationState::Reserved,
                SafeError::new(ErrorCode::StartFailed),
            )
            .releasing_lease(),
        )
        .await
        .unwrap()
        .unwrap();
    let before = schema.operation(refresh).await.unwrap();

    let refresh_id = refresh.to_string();
    let inventory_id = inventory.id.to_string();
    for (statement, id) in [
        (
            "UPDATE schema_operation SET state = 'running' WHERE id = $1",
            &refresh_id,
        ),
        (
            "UPDATE schema_operation SET error = NULL WHERE id = $1",
            &refresh_id,
        ),
        (
            "UPDATE schema_inventory SET expires_at = expires_at + 1 WHERE id = $1",
            &inventory_id,
        ),
        (
            "UPDATE schema_inventory_database SET database_name = 'other' WHERE inventory_id = $1",
            &inventory_id,
        ),
        (
            "UPDATE schema_operation_database SET outcome = 'changed' WHERE operation_id = $1",
            &refresh_id,
        ),
        (
            "UPDATE schema_operation_step SET attempts = 9 WHERE operation_id = $1",
            &refresh_id,
        ),
        (
            "UPDATE schema_review SET state = 'approved' WHERE operation_id = $1",
            &refresh_id,
        ),
        (
            "UPDATE schema_audit_event SET actor = 'mallory' WHERE operation_id = $1",
            &refresh_id,
        ),
    ] {
        refused(&store, statement, id).await;
    }
    assert_eq!(schema.operation(refresh).await.unwrap(), before);
    assert_eq!(
        schema.inventory(inventory.id).await.unwrap(),
        Some(inventory)
    );
}

#[tokio::test]
async fn sqlite_immutable_rows_refuse_direct_updates() {
    immutable_rows_refuse_direct_updates(ScratchDatabase::sqlite()).await;
}

#[tokio::test]
async fn postgres_immutable_rows_refuse_direct_updates() {
    immutable_rows_refuse_direct_updates(ScratchDatabase::postgres().await).await;
}
