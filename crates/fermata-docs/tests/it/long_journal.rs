//! A journal longer than the store reads in one statement, on SQLite and PostgreSQL: recovered
//! as a room opens it (on a thread of its own while the store reads the rest), it gives the
//! same document as recovering the whole snapshot; a row missing from the middle of the journal,
//! or of another epoch, is refused by both with the same error, naming the document.

use fermata_docs::{OVERLAP_FROM, Recovering, RecoveryError, Sidecar, SourceDoc, recover};
use fermata_store::{ChannelId, Commit, OperationId, Storage, StoreOptions};
use fermata_store_sql::testing::bench::seed_journal;
use fermata_store_sql::testing::{ScratchDatabase, ScratchStorage};

use crate::{new_document, tamper};

/// Updates after the checkpoint: more than one read of the store's, and more than a recovery
/// takes in place.
const UPDATES: usize = 9_000;

/// A document with a checkpoint and [`UPDATES`] small edits after it; returns its text.
async fn long_document(store: &ScratchStorage) -> (ChannelId, String) {
    let (fence, id) = new_document(store, "Long").await;
    let collaboration = store.collaboration();
    let mut doc = SourceDoc::new();
    let commit = Commit {
        channel: id.clone(),
        operation: OperationId::new("first").unwrap(),
        expected_revision: 0,
        update: Some(doc.insert(0, "# Plan\n").unwrap()),
        sidecar: Some(Sidecar::default().to_state()),
        events: Vec::new(),
        title: None,
        text: None,
    };
    collaboration.commit(&fence, &commit).await.unwrap();
    let open = recover(&collaboration.recovery_snapshot(&id).await.unwrap()).unwrap();
    collaboration
        .save_checkpoint(&fence, &id, &open.checkpoint())
        .await
        .unwrap();
    let updates: Vec<Vec<u8>> = (0..UPDATES)
        .map(|n| doc.insert(doc.len(), &format!("step {n}. ")).unwrap())
        .collect();
    seed_journal(store, &id, &updates).await;
    (id, doc.text())
}

/// The document recovered as a room opens it.
async fn opened(store: &ScratchStorage, id: &ChannelId) -> Result<String, RecoveryError> {
    let mut recovering = Recovering::new(id);
    store
        .collaboration()
        .read_for_recovery(id, &mut recovering)
        .await
        .unwrap();
    recovering.finish().map(|(_, open)| open.doc.text())
}

async fn long_journal_cases(open: impl AsyncFn() -> ScratchStorage) {
    assert!(i64::try_from(UPDATES).unwrap() > 2 * OVERLAP_FROM);
    let store = open().await;
    let (id, text) = long_document(&store).await;
    let snapshot = store.collaboration().recovery_snapshot(&id).await.unwrap();
    assert_eq!(snapshot.updates.len(), UPDATES);
    let whole = recover(&snapshot).unwrap();
    assert_eq!(whole.doc.text(), text);
    assert_eq!(opened(&store, &id).await.unwrap(), text);

    // Sequences 2 to 9,001 hold the steps: the rows below lie in the journal's second and third
    // reads.
    for (what, sql) in [
        (
            "a missing row",
            "DELETE FROM channel_updates WHERE channel_id = $1 AND sequence = 6000",
        ),
        (
            "a row of another epoch",
            "UPDATE channel_updates SET epoch = epoch + 1 WHERE channel_id = $1 \
             AND sequence = 8500",
        ),
    ] {
        let store = open().await;
        let (id, _) = long_document(&store).await;
        assert_eq!(tamper(&store, sql, &id).await, 1, "{what}");
        let snapshot = store.collaboration().recovery_snapshot(&id).await.unwrap();
        let refused = recover(&snapshot).expect_err(what).to_string();
        assert!(refused.contains(&id.0), "{what}: {refused}");
        let error = opened(&store, &id).await.expect_err(what);
        assert_eq!(error.to_string(), refused, "{what}");
    }
}

#[tokio::test]
async fn sqlite_a_long_journal_recovers_while_it_is_read() {
    long_journal_cases(async || {
        ScratchDatabase::sqlite()
            .open(StoreOptions::default())
            .await
    })
    .await;
}

#[tokio::test]
async fn postgres_a_long_journal_recovers_while_it_is_read() {
    long_journal_cases(async || {
        ScratchDatabase::postgres()
            .await
            .open(StoreOptions::default())
            .await
    })
    .await;
}
