//! Corruption in the stored rows themselves, on SQLite and PostgreSQL: a tampered checkpoint
//! hash, a truncated update, every update or one moved to another epoch, an unknown sidecar
//! version and a missing journal row are each reported as corrupt, naming the document; recovery
//! never answers with a wrong or empty document. A channel sequence far past the journal is still
//! read.

use fermata_docs::{Sidecar, SourceDoc, recover};
use fermata_store::{ChannelId, Commit, ErrorKind, OperationId, Storage, StoreError, StoreOptions};
use fermata_store_sql::testing::{ScratchDatabase, ScratchStorage};

use crate::{new_document, tamper};

/// A document with a checkpoint and three journal updates after it.
async fn document(store: &ScratchStorage) -> ChannelId {
    let (fence, id) = new_document(store, "Doc").await;
    let collaboration = store.collaboration();
    let mut doc = SourceDoc::new();
    for (n, text) in ["# Plan\n", "First step. ", "Second step. ", "Third step."]
        .iter()
        .enumerate()
    {
        let update = doc.insert(doc.len(), text).unwrap();
        let commit = Commit {
            channel: id.clone(),
            operation: OperationId::new(format!("op-{n}")).unwrap(),
            expected_revision: i64::try_from(n).unwrap(),
            update: Some(update),
            sidecar: Some(Sidecar::default().to_state()),
            events: Vec::new(),
            title: None,
            text: None,
        };
        collaboration.commit(&fence, &commit).await.unwrap();
        if n == 0 {
            let snapshot = collaboration.recovery_snapshot(&id).await.unwrap();
            let open = recover(&snapshot).unwrap();
            collaboration
                .save_checkpoint(&fence, &id, &open.checkpoint())
                .await
                .unwrap();
        }
    }
    let open = recover(&collaboration.recovery_snapshot(&id).await.unwrap()).unwrap();
    assert_eq!(
        open.doc.text(),
        "# Plan\nFirst step. Second step. Third step."
    );
    id
}

async fn corrupt_cases(open: impl AsyncFn() -> ScratchStorage, truncate: &str) {
    let cases: [(&str, String); 6] = [
        (
            "checkpoint hash",
            "UPDATE channel_snapshots SET source_hash = 'aaaa' WHERE channel_id = $1".to_owned(),
        ),
        (
            "truncated update",
            format!(
                "UPDATE channel_updates SET bytes = {truncate} WHERE channel_id = $1 \
                 AND sequence = (SELECT MAX(sequence) FROM channel_updates WHERE channel_id = $1)"
            ),
        ),
        (
            "update from another epoch",
            "UPDATE channel_updates SET epoch = epoch + 1 WHERE channel_id = $1".to_owned(),
        ),
        (
            "one update from another epoch",
            "UPDATE channel_updates SET epoch = epoch + 1 WHERE channel_id = $1 \
             AND sequence = (SELECT MAX(sequence) FROM channel_updates WHERE channel_id = $1)"
                .to_owned(),
        ),
        (
            "unknown sidecar version",
            "UPDATE channel_state SET version = 99 WHERE channel_id = $1".to_owned(),
        ),
        (
            "missing journal row",
            "DELETE FROM channel_updates WHERE channel_id = $1 \
             AND sequence = (SELECT MIN(sequence) FROM channel_updates WHERE channel_id = $1)"
                .to_owned(),
        ),
    ];
    for (what, sql) in cases {
        let store = open().await;
        let id = document(&store).await;
        assert!(
            tamper(&store, &sql, &id).await >= 1,
            "the tampering changed nothing: {what}"
        );
        let snapshot = store.collaboration().recovery_snapshot(&id).await.unwrap();
        let error = StoreError::from(recover(&snapshot).expect_err(what));
        assert_eq!(error.kind(), ErrorKind::Corrupt, "{what}");
        assert!(
            error.to_string().contains(&id.0),
            "{what}: the error does not name the document: {error}"
        );
    }
}

/// A channel whose sequence runs far past its journal (as tampering could leave it) is still
/// read: the journal read skips the empty stretch at once instead of walking it range by range.
async fn a_far_sequence_is_read(store: ScratchStorage) {
    let id = document(&store).await;
    let changed = tamper(
        &store,
        "UPDATE channels SET sequence = 9000000000000000000 WHERE id = $1",
        &id,
    )
    .await;
    assert_eq!(changed, 1);
    let snapshot = store.collaboration().recovery_snapshot(&id).await.unwrap();
    let sequences: Vec<i64> = snapshot.updates.iter().map(|u| u.sequence).collect();
    assert_eq!(sequences, [2, 3, 4]);
}

#[tokio::test]
async fn sqlite_a_far_sequence_is_read() {
    a_far_sequence_is_read(
        ScratchDatabase::sqlite()
            .open(StoreOptions::default())
            .await,
    )
    .await;
}

#[tokio::test]
async fn postgres_a_far_sequence_is_read() {
    a_far_sequence_is_read(
        ScratchDatabase::postgres()
            .await
            .open(StoreOptions::default())
            .await,
    )
    .await;
}

#[tokio::test]
async fn sqlite_corruption_is_reported_naming_the_document() {
    corrupt_cases(
        async || {
            ScratchDatabase::sqlite()
                .open(StoreOptions::default())
                .await
        },
        "substr(bytes, 1, length(bytes) - 3)",
    )
    .await;
}

#[tokio::test]
async fn postgres_corruption_is_reported_naming_the_document() {
    corrupt_cases(
        async || {
            ScratchDatabase::postgres()
                .await
                .open(StoreOptions::default())
                .await
        },
        "substring(bytes FROM 1 FOR length(bytes) - 3)",
    )
    .await;
}
