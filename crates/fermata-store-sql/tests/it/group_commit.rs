//! Group commit across documents: commits that wait while another runs share the next fenced
//! transaction, and each caller hears only its own answer. A refused commit and a repeated
//! operation ID leave nothing behind; the others in their group commit. A member the database
//! fails fails its group.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fermata_store::collaboration::OperationId;
use fermata_store::lease::{Acquisition, FencedWriteHook, LeaseName};
use fermata_store::{
    Channel, Commit, Committed, ErrorKind, Fence, Storage, StoreOptions, StoreResult,
};
use fermata_store_sql::Dialect;
use fermata_store_sql::testing::{ScratchDatabase, ScratchStorage};
use fermata_store_testkit::contract::PausedWrites;
use fermata_store_testkit::contract::create_document;
use fermata_store_testkit::eventually;
use tokio::task::JoinHandle;

/// Counts fenced transactions and pauses the armed one.
pub(crate) struct Counted {
    pub(crate) pause: PausedWrites,
    transactions: Arc<AtomicUsize>,
}

impl Counted {
    fn new() -> Self {
        Counted {
            pause: PausedWrites::default(),
            transactions: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn hook(&self) -> FencedWriteHook {
        let pause = self.pause.hook();
        let transactions = Arc::clone(&self.transactions);
        FencedWriteHook::new(move |fence| {
            transactions.fetch_add(1, Ordering::SeqCst);
            let pause = pause.clone();
            let fence = fence.clone();
            Box::pin(async move { pause.inside(&fence).await })
        })
    }

    pub(crate) fn count(&self) -> usize {
        self.transactions.load(Ordering::SeqCst)
    }
}

/// A store whose fenced transactions `counted` counts and can pause.
pub(crate) async fn counted_store(scratch: ScratchDatabase) -> (Counted, Arc<ScratchStorage>) {
    let counted = Counted::new();
    let store = scratch
        .open(StoreOptions {
            fenced_write_hook: Some(counted.hook()),
            ..StoreOptions::default()
        })
        .await;
    (counted, Arc::new(store))
}

/// Runs `commit` on a task of its own, as a room's commit runs beside others.
pub(crate) fn spawn_commit(
    store: &Arc<ScratchStorage>,
    fence: &Fence,
    commit: Commit,
) -> JoinHandle<StoreResult<Committed>> {
    let (store, fence) = (Arc::clone(store), fence.clone());
    tokio::spawn(async move { store.collaboration().commit(&fence, &commit).await })
}

/// The fence of the writer lease, taken on a store where it is free.
pub(crate) async fn writer_fence(store: &ScratchStorage) -> Fence {
    let lease = LeaseName::new("writer").unwrap();
    let Acquisition::Granted(granted) = store
        .leases()
        .acquire(&lease, "here", Duration::from_secs(3600))
        .await
        .unwrap()
    else {
        panic!("the lease is free")
    };
    granted.fence()
}

pub(crate) async fn create(store: &ScratchStorage, fence: &Fence, title: &str) -> Channel {
    create_document(store.collaboration(), fence, title).await
}

pub(crate) fn update(channel: &Channel, revision: i64, operation: &str, bytes: &[u8]) -> Commit {
    Commit {
        channel: channel.id.clone(),
        operation: OperationId::new(operation).unwrap(),
        expected_revision: revision,
        update: Some(bytes.to_vec()),
        sidecar: None,
        events: Vec::new(),
        title: None,
        text: None,
    }
}

async fn journal(store: &ScratchStorage, channel: &Channel) -> Vec<Vec<u8>> {
    store
        .collaboration()
        .updates_after(&channel.id, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|update| update.bytes)
        .collect()
}

async fn commits_wait_and_share_one_transaction(scratch: ScratchDatabase) {
    let (counted, store) = counted_store(scratch).await;
    let fence = writer_fence(&store).await;
    let [first, second, third, fourth, repeated] = [
        create(&store, &fence, "first").await,
        create(&store, &fence, "second").await,
        create(&store, &fence, "third").await,
        create(&store, &fence, "fourth").await,
        create(&store, &fence, "repeated").await,
    ];
    // An operation ID already used, sent again at the revision that followed it: its
    // statements run before the ID is found taken (by a different commit, since the revision
    // differs), and must all be rolled back.
    store
        .collaboration()
        .commit(&fence, &update(&repeated, 0, "op-once", b"once"))
        .await
        .unwrap();

    // The first commit holds the transaction; the rest queue behind it.
    counted.pause.arm();
    let run = |commit: Commit| spawn_commit(&store, &fence, commit);
    let held = run(update(&first, 0, "op-first", b"first"));
    counted.pause.entered().await;
    let before = counted.count();
    let queued: Vec<(&str, JoinHandle<StoreResult<Committed>>)> = vec![
        ("second", run(update(&second, 0, "op-second", b"second"))),
        ("stale", run(update(&third, 7, "op-stale", b"stale"))),
        ("fourth", run(update(&fourth, 0, "op-fourth", b"fourth"))),
        ("reused", run(update(&repeated, 1, "op-once", b"again"))),
        ("third", run(update(&third, 0, "op-third", b"third"))),
        ("repeat", run(update(&repeated, 0, "op-once", b"once"))),
        // A rename after `fourth`'s first commit, in the same group: it runs after the members
        // written together, after a savepoint of its own, and sees their writes.
        (
            "renamed",
            run(Commit {
                title: Some("renamed".to_owned()),
                ..update(&fourth, 1, "op-renamed", b"renamed")
            }),
        ),
    ];
    eventually("every commit to wait for the transaction", || async {
        store.storage.commits_waiting() == queued.len()
    })
    .await;
    counted.pause.release();

    assert_eq!(held.await.unwrap().unwrap().revision, 1);
    for (name, handle) in queued {
        let answer = handle.await.unwrap();
        match name {
            "stale" => assert_eq!(answer.unwrap_err().kind(), ErrorKind::Conflict),
            "reused" => assert_eq!(answer.unwrap_err().kind(), ErrorKind::Conflict),
            "repeat" => {
                let answer = answer.unwrap();
                assert!(answer.repeated, "{answer:?}");
                assert_eq!(answer.revision, 1);
            }
            "renamed" => assert_eq!(answer.unwrap().revision, 2),
            _ => {
                let answer = answer.unwrap();
                assert_eq!((answer.revision, answer.repeated), (1, false), "{name}");
            }
        }
    }
    assert_eq!(
        counted.count() - before,
        1,
        "the seven waiting commits shared one transaction"
    );

    // What the group wrote: each written commit once, nothing of the refused one or the repeat.
    for (channel, expected) in [
        (&first, vec![b"first".to_vec()]),
        (&second, vec![b"second".to_vec()]),
        (&third, vec![b"third".to_vec()]),
        (&fourth, vec![b"fourth".to_vec(), b"renamed".to_vec()]),
        (&repeated, vec![b"once".to_vec()]),
    ] {
        assert_eq!(
            journal(&store, channel).await,
            expected,
            "{}",
            channel.title
        );
    }
    let reread = store
        .collaboration()
        .channel(&repeated.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        reread.revision, 1,
        "the reused ID's commit advanced nothing"
    );
    let renamed = store
        .collaboration()
        .channel(&fourth.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((renamed.title.as_str(), renamed.revision), ("renamed", 2));

    // A lone commit afterwards runs in a transaction of its own, as before.
    store
        .collaboration()
        .commit(&fence, &update(&first, 1, "op-alone", b"alone"))
        .await
        .unwrap();
    assert_eq!(journal(&store, &first).await.len(), 2);
}

#[tokio::test]
async fn sqlite_commits_that_wait_share_one_transaction() {
    commits_wait_and_share_one_transaction(ScratchDatabase::sqlite()).await;
}

#[tokio::test]
async fn postgres_commits_that_wait_share_one_transaction() {
    commits_wait_and_share_one_transaction(ScratchDatabase::postgres().await).await;
}

/// A member written with others by the group statement has no savepoint of its own: when the
/// database fails the statement, the whole group fails rather than commit what came before or
/// after it as if it had been kept.
async fn a_member_the_database_fails_fails_its_group_and_commits_nothing(scratch: ScratchDatabase) {
    let (counted, store) = counted_store(scratch).await;
    // The database refuses one journal row outright, as a full disk or a broken constraint would.
    let refusal: &[&str] = match store.storage.dialect() {
        Dialect::Postgres => &[
            "CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN IF NEW.bytes = 'boom'::bytea THEN RAISE EXCEPTION 'refused'; END IF; \
             RETURN NEW; END $$",
            "CREATE TRIGGER refuse_boom BEFORE INSERT ON channel_updates FOR EACH ROW \
             EXECUTE FUNCTION refuse_boom()",
        ],
        Dialect::Sqlite => &[
            "CREATE TRIGGER refuse_boom BEFORE INSERT ON channel_updates \
             WHEN NEW.bytes = CAST('boom' AS BLOB) BEGIN SELECT RAISE(ABORT, 'refused'); END",
        ],
    };
    for statement in refusal {
        sqlx::query(statement)
            .execute(store.storage.pool())
            .await
            .unwrap();
    }
    let fence = writer_fence(&store).await;
    let [held, before, failing, after] = [
        create(&store, &fence, "held").await,
        create(&store, &fence, "before").await,
        create(&store, &fence, "failing").await,
        create(&store, &fence, "after").await,
    ];
    counted.pause.arm();
    let run = |commit: Commit| spawn_commit(&store, &fence, commit);
    let first = run(update(&held, 0, "op-held", b"held"));
    counted.pause.entered().await;
    let queued = [
        run(update(&before, 0, "op-before", b"before")),
        run(update(&failing, 0, "op-failing", b"boom")),
        run(update(&after, 0, "op-after", b"after")),
    ];
    eventually("every commit to wait for the transaction", || async {
        store.storage.commits_waiting() == queued.len()
    })
    .await;
    counted.pause.release();
    assert_eq!(first.await.unwrap().unwrap().revision, 1);
    for handle in queued {
        assert!(
            handle.await.unwrap().is_err(),
            "a member of the failed group was answered as kept"
        );
    }
    for channel in [&before, &failing, &after] {
        assert!(
            journal(&store, channel).await.is_empty(),
            "{}",
            channel.title
        );
    }
}

#[tokio::test]
async fn sqlite_a_member_the_database_fails_fails_its_group_and_commits_nothing() {
    a_member_the_database_fails_fails_its_group_and_commits_nothing(ScratchDatabase::sqlite())
        .await;
}

#[tokio::test]
async fn postgres_a_member_the_database_fails_fails_its_group_and_commits_nothing() {
    a_member_the_database_fails_fails_its_group_and_commits_nothing(
        ScratchDatabase::postgres().await,
    )
    .await;
}
