//! What migration `0020` and the commit statement's move of `updated_at` keep: a commit moves
//! its document's `updated_at` only once the time recorded is a second old, alone and in a
//! group, on SQLite and PostgreSQL; and the operation records an earlier release wrote survive
//! the table's rebuild on SQLite, so a repeated operation is still answered as a repeat and
//! recovery still finds every update it expects.

use fermata_store::collaboration::SidecarState;
use fermata_store::{
    Channel, Commit, Committed, Storage, StoreResult, UPDATED_AT_RESOLUTION_MS, UnixMillis,
};
use fermata_store_sql::testing::{ScratchDatabase, ScratchStorage};
use fermata_store_testkit::eventually;
use sqlx::migrate::Migrator;

use crate::earlier_release::migrations_before;
use crate::group_commit::{counted_store, create, spawn_commit, update, writer_fence};

/// An `updated_at` far ahead of any clock here: no commit is due to move it.
const AHEAD: i64 = 4_000_000_000_000;

/// An `updated_at` long past: the next commit moves it.
const LONG_AGO: i64 = 1_000;

async fn set_updated_at(store: &ScratchStorage, channel: &Channel, at: i64) {
    sqlx::query("UPDATE channels SET updated_at = $1 WHERE id = $2")
        .bind(at)
        .bind(channel.id.0.as_str())
        .execute(store.storage.pool())
        .await
        .unwrap();
}

async fn updated_at(store: &ScratchStorage, channel: &Channel) -> UnixMillis {
    store
        .collaboration()
        .channel(&channel.id)
        .await
        .unwrap()
        .unwrap()
        .updated_at
}

async fn a_commit_moves_updated_at_only_when_due(scratch: ScratchDatabase) {
    let (counted, store) = counted_store(scratch).await;
    let fence = writer_fence(&store).await;
    let [due, ahead, held] = [
        create(&store, &fence, "due").await,
        create(&store, &fence, "ahead").await,
        create(&store, &fence, "held").await,
    ];

    // Lone commits.
    set_updated_at(&store, &due, LONG_AGO).await;
    set_updated_at(&store, &ahead, AHEAD).await;
    for channel in [&due, &ahead] {
        store
            .collaboration()
            .commit(&fence, &update(channel, 0, "op-alone", b"alone"))
            .await
            .unwrap();
    }
    let moved = updated_at(&store, &due).await;
    assert!(
        moved >= due.created_at && moved.0 > LONG_AGO + UPDATED_AT_RESOLUTION_MS,
        "{moved:?}"
    );
    assert_eq!(updated_at(&store, &ahead).await, UnixMillis(AHEAD));

    // The same in a group: two commits wait behind a third and are written together.
    set_updated_at(&store, &due, LONG_AGO).await;
    counted.pause.arm();
    let run = |commit: Commit| spawn_commit(&store, &fence, commit);
    let first = run(update(&held, 0, "op-held", b"held"));
    counted.pause.entered().await;
    let before = counted.count();
    let queued: Vec<tokio::task::JoinHandle<StoreResult<Committed>>> = vec![
        run(update(&due, 1, "op-group", b"group")),
        run(update(&ahead, 1, "op-group", b"group")),
    ];
    eventually("both commits to wait for the transaction", || async {
        store.storage.commits_waiting() == 2
    })
    .await;
    counted.pause.release();
    first.await.unwrap().unwrap();
    for handle in queued {
        assert_eq!(handle.await.unwrap().unwrap().revision, 2);
    }
    assert_eq!(
        counted.count() - before,
        1,
        "the two shared one transaction"
    );
    let moved = updated_at(&store, &due).await;
    assert!(moved.0 > LONG_AGO + UPDATED_AT_RESOLUTION_MS, "{moved:?}");
    assert_eq!(updated_at(&store, &ahead).await, UnixMillis(AHEAD));
}

#[tokio::test]
async fn sqlite_a_commit_moves_updated_at_only_when_due() {
    a_commit_moves_updated_at_only_when_due(ScratchDatabase::sqlite()).await;
}

#[tokio::test]
async fn postgres_a_commit_moves_updated_at_only_when_due() {
    a_commit_moves_updated_at_only_when_due(ScratchDatabase::postgres().await).await;
}

async fn operation_records_survive_the_upgrade(scratch: ScratchDatabase) {
    let earlier = migrations_before(scratch.database.dialect(), "0020");
    let store = scratch
        .open_as_earlier_release(&Migrator::new(earlier.path()).await.unwrap())
        .await;
    let fence = writer_fence(&store).await;
    let channel = create(&store, &fence, "before").await;
    let commits = [
        update(&channel, 0, "op-1", b"one"),
        // A commit without an update: the sidecar alone.
        Commit {
            update: None,
            sidecar: Some(SidecarState {
                version: 1,
                json: "{}".to_owned(),
                unanswered_decisions: 0,
            }),
            ..update(&channel, 1, "op-2", b"")
        },
        update(&channel, 2, "op-3", b"three"),
    ];
    for commit in &commits {
        store.collaboration().commit(&fence, commit).await.unwrap();
    }

    store.storage.migrate().await.unwrap();

    for (n, commit) in commits.iter().enumerate() {
        let again = store.collaboration().commit(&fence, commit).await.unwrap();
        assert!(again.repeated, "{again:?}");
        assert_eq!(again.revision, n as i64 + 1);
    }
    let snapshot = store
        .collaboration()
        .recovery_snapshot(&channel.id)
        .await
        .unwrap();
    assert_eq!(snapshot.expected_update_sequences, [1, 3]);
    let next = store
        .collaboration()
        .commit(&fence, &update(&channel, 3, "op-4", b"four"))
        .await
        .unwrap();
    assert_eq!((next.revision, next.repeated), (4, false));
}

#[tokio::test]
async fn sqlite_operation_records_survive_the_upgrade() {
    operation_records_survive_the_upgrade(ScratchDatabase::sqlite()).await;
}

#[tokio::test]
async fn postgres_operation_records_survive_the_upgrade() {
    operation_records_survive_the_upgrade(ScratchDatabase::postgres().await).await;
}
