//! The server errors a snapshot can meet, provoked on the test MariaDB through the snapshot's own
//! queries: another session holds a write lock on a sequence, whose settings the snapshot reads
//! from the sequence itself, so that read waits for the lock. The wait then ends as the server
//! ends it: `lock_wait_timeout` (1205, `LOCK_WAIT_TIMEOUT`), `max_statement_time` (1969,
//! `QUERY_TIMED_OUT`), `KILL QUERY` (1317, `QUERY_INTERRUPTED`), or the sequence dropped
//! meanwhile (`SCHEMA_CHANGED`). Each is retryable and about the database.
//!
//! Two codes can only be tested by their mapping (`source.rs`): a deadlock (1213) needs two
//! transactions that each hold a row or metadata lock the other wants, and a snapshot holds none
//! between its statements (it reads the catalog in autocommit mode and locks nothing); MySQL's
//! execution time limit (3024) is MySQL's, and no MySQL server runs here.

use fermata_schema::snapshot::snapshot;
use fermata_store::schema::{DatabaseName, ErrorCode, ErrorStage, SafeError, Subject};
use fermata_store_testkit::eventually;
use sqlx::mysql::MySqlConnection;
use sqlx::{Executor, Row};

use crate::support::{admin, connections_after, create_database, quoted, unique};

/// A database with a table and a sequence, and a session holding a write lock on the sequence.
async fn locked_sequence() -> (String, MySqlConnection) {
    let database = unique("locked");
    let mut locker = admin().await;
    create_database(
        &mut locker,
        &database,
        &["CREATE TABLE t (a int)", "CREATE SEQUENCE s"],
    )
    .await;
    locker.execute("LOCK TABLES s WRITE").await.unwrap();
    (database, locker)
}

async fn drop_database(database: &str) {
    admin()
        .await
        .execute(format!("DROP DATABASE IF EXISTS {}", quoted(database)).as_str())
        .await
        .unwrap();
}

/// A snapshot of `database` over one connection that ran `setting` first.
async fn snapshot_after(setting: &str, database: &str) -> Result<(), SafeError> {
    let mut connections = connections_after(1, Some(setting)).await;
    snapshot(
        &mut connections,
        &DatabaseName::new(database).unwrap(),
        "test",
    )
    .await
    .map(|_| ())
}

fn assert_retryable_about(error: &SafeError, code: ErrorCode, stage: ErrorStage, database: &str) {
    assert_eq!((error.code(), error.stage()), (code, stage), "{error}");
    assert!(error.retryable(), "{error}");
    assert_eq!(
        error.subject(),
        Some(&Subject::Database(DatabaseName::new(database).unwrap()))
    );
}

/// Waits until the connection `id` waits for a metadata lock.
async fn until_waiting(id: u64) {
    eventually(
        "the snapshot waits for the sequence's lock",
        || async move {
            let row = sqlx::query(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
             WHERE ID = ? AND STATE LIKE 'Waiting for table metadata lock%'",
            )
            .bind(id)
            .fetch_one(&mut admin().await)
            .await
            .unwrap();
            row.get::<i64, _>(0) == 1
        },
    )
    .await;
}

/// Starts a snapshot of `database` on a connection of its own; returns the connection's ID and
/// the snapshot's task.
async fn waiting_snapshot(database: &str) -> (u64, tokio::task::JoinHandle<Result<(), SafeError>>) {
    let mut connections = connections_after(1, None).await;
    let id: u64 = sqlx::query("SELECT CONNECTION_ID()")
        .fetch_one(&mut connections[0])
        .await
        .unwrap()
        .get(0);
    let name = DatabaseName::new(database).unwrap();
    let task =
        tokio::spawn(async move { snapshot(&mut connections, &name, "test").await.map(|_| ()) });
    until_waiting(id).await;
    (id, task)
}

#[tokio::test]
async fn a_lock_wait_timeout_is_retried_as_lock_wait_timeout() {
    let (database, mut locker) = locked_sequence().await;
    let error = snapshot_after("SET SESSION lock_wait_timeout = 1", &database)
        .await
        .unwrap_err();
    assert_retryable_about(
        &error,
        ErrorCode::LockWaitTimeout,
        ErrorStage::Timeout,
        &database,
    );
    locker.execute("UNLOCK TABLES").await.unwrap();
    drop_database(&database).await;
}

#[tokio::test]
async fn the_statement_time_limit_is_retried_as_query_timed_out() {
    let (database, mut locker) = locked_sequence().await;
    let error = snapshot_after("SET SESSION max_statement_time = 1", &database)
        .await
        .unwrap_err();
    assert_retryable_about(
        &error,
        ErrorCode::QueryTimedOut,
        ErrorStage::Timeout,
        &database,
    );
    locker.execute("UNLOCK TABLES").await.unwrap();
    drop_database(&database).await;
}

#[tokio::test]
async fn a_killed_query_is_retried_as_query_interrupted() {
    let (database, mut locker) = locked_sequence().await;
    let (id, task) = waiting_snapshot(&database).await;
    admin()
        .await
        .execute(format!("KILL QUERY {id}").as_str())
        .await
        .unwrap();
    let error = task.await.unwrap().unwrap_err();
    assert_retryable_about(
        &error,
        ErrorCode::QueryInterrupted,
        ErrorStage::Connection,
        &database,
    );
    locker.execute("UNLOCK TABLES").await.unwrap();
    drop_database(&database).await;
}

#[tokio::test]
async fn a_sequence_dropped_while_it_is_read_is_a_schema_change() {
    let (database, mut locker) = locked_sequence().await;
    let (_, task) = waiting_snapshot(&database).await;
    locker.execute("DROP SEQUENCE s").await.unwrap();
    locker.execute("UNLOCK TABLES").await.unwrap();
    let error = task.await.unwrap().unwrap_err();
    assert_retryable_about(
        &error,
        ErrorCode::SchemaChanged,
        ErrorStage::Verification,
        &database,
    );
    // Nothing is left to wait for: the next snapshot takes what is there.
    let mut connections = connections_after(1, None).await;
    let taken = snapshot(
        &mut connections,
        &DatabaseName::new(&database).unwrap(),
        "test",
    )
    .await
    .unwrap();
    assert!(taken.model.sequences.is_empty());
    drop_database(&database).await;
}
