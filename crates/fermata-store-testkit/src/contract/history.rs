//! Contract cases for activity history: the session rule (with the change times passed in, so no
//! case waits ten minutes), authorless sessions, newest-first lists, fencing, and rows going
//! with their document (Chat rows included).

use std::sync::Arc;
use std::time::Duration;

use super::Harness;
use super::lease::{grant, plain};
use fermata_store::channel::ChannelId;
use fermata_store::chat::{ChatKey, RunStage, SessionStateDraft, ThreadDraft};
use fermata_store::error::ErrorKind;
use fermata_store::history::{Change, SESSION_GAP};
use fermata_store::lease::{Fence, Lease};
use fermata_store::time::UnixMillis;
use fermata_store::user::UserId;
use fermata_store::{Channel, Storage};

const LONG: Duration = Duration::from_secs(3600);

/// A store, the writer's lease and a document.
pub(super) struct Fixture {
    pub(super) store: Arc<dyn Storage>,
    pub(super) lease: Lease,
    pub(super) fence: Fence,
    pub(super) document: Channel,
}

impl Fixture {
    pub(super) async fn open(harness: &dyn Harness) -> Self {
        let store = plain(harness).await;
        let lease = grant(&*store, "writer", LONG).await;
        let fence = lease.fence();
        let document = create(&store, &fence, "Doc").await;
        Fixture {
            store,
            lease,
            fence,
            document,
        }
    }

    /// Releases the lease and grants it to a successor: `self.fence` is stale from now on.
    pub(super) async fn hand_over(&self) -> Fence {
        self.store.leases().release(&self.lease).await.unwrap();
        let successor = grant(&*self.store, "successor", LONG).await;
        assert!(successor.token > self.fence.token);
        successor.fence()
    }
}

pub(super) async fn create(store: &Arc<dyn Storage>, fence: &Fence, title: &str) -> Channel {
    super::create_document(store.collaboration(), fence, title).await
}

fn hash(n: i64) -> String {
    format!("{n:064x}")
}

const T0: i64 = 1_800_000_000_000;

fn gap() -> i64 {
    i64::try_from(SESSION_GAP.as_millis()).unwrap()
}

fn change(document: &Channel, author: Option<&str>, revision: i64, at: i64) -> Change {
    Change {
        channel: document.id.clone(),
        author: author.map(|a| UserId(a.to_owned())),
        text: format!("# Text at revision {revision}\n"),
        revision,
        source_hash: hash(revision),
        at: UnixMillis(at),
    }
}

pub async fn history_extends_an_authors_session_for_changes_under_ten_minutes_apart(
    harness: &dyn Harness,
) {
    let f = Fixture::open(harness).await;
    let history = f.store.history();
    let doc = &f.document;
    let record = |c: Change| {
        let fence = f.fence.clone();
        async move { history.record(&fence, &c).await.unwrap() }
    };

    let first = record(change(doc, Some("ann"), 1, T0)).await;
    assert!(!first.extended);
    assert_eq!(first.version.number, 1);
    // Within the gap of the session's end (not its start): the session keeps growing.
    let second = record(change(doc, Some("ann"), 2, T0 + gap() - 1)).await;
    assert!(second.extended);
    let third = record(change(doc, Some("ann"), 3, T0 + 2 * gap() - 2)).await;
    assert!(third.extended);
    assert_eq!(third.version.number, 1);
    assert_eq!(third.version.started_at, UnixMillis(T0));
    assert_eq!(third.version.ended_at, UnixMillis(T0 + 2 * gap() - 2));
    assert_eq!(third.version.revision, 3);
    assert_eq!(third.version.text, "# Text at revision 3\n");
    assert_eq!(third.version.source_hash, hash(3));
    // Exactly ten minutes of pause is not less than ten minutes: a new session.
    let paused = record(change(doc, Some("ann"), 4, T0 + 3 * gap() - 2)).await;
    assert!(!paused.extended);
    assert_eq!(paused.version.number, 2);
    // Another author starts a session, and ann coming back after bob starts another: only the
    // document's latest session is ever extended.
    let bob = record(change(doc, Some("bob"), 5, T0 + 3 * gap())).await;
    assert!(!bob.extended);
    let ann = record(change(doc, Some("ann"), 6, T0 + 3 * gap() + 1)).await;
    assert!(!ann.extended);
    assert_eq!(ann.version.number, 4);

    let stored = history.versions(&doc.id, 10).await.unwrap();
    assert_eq!(
        stored
            .iter()
            .map(|v| (
                v.number,
                v.author.as_ref().map(|a| a.0.as_str()),
                v.revision
            ))
            .collect::<Vec<_>>(),
        [
            (4, Some("ann"), 6),
            (3, Some("bob"), 5),
            (2, Some("ann"), 4),
            (1, Some("ann"), 3)
        ]
    );
    assert_eq!(stored[3], third.version);
    assert_eq!(stored[3].summary, None);
}

pub async fn history_gives_authorless_changes_sessions_of_their_own(harness: &dyn Harness) {
    let f = Fixture::open(harness).await;
    let history = f.store.history();
    let doc = &f.document;
    let mut numbers = Vec::new();
    for (revision, author) in [(1, None), (2, None), (3, Some("ann")), (4, None)] {
        let recorded = history
            .record(&f.fence, &change(doc, author, revision, T0 + revision))
            .await
            .unwrap();
        assert!(!recorded.extended);
        numbers.push(recorded.version.number);
    }
    assert_eq!(numbers, [1, 2, 3, 4]);
    let latest = history.version(&doc.id, 4).await.unwrap().unwrap();
    assert_eq!(latest.author, None);
    assert_eq!(latest.started_at, latest.ended_at);
}

pub async fn history_lists_newest_first_within_a_bound_and_reads_one(harness: &dyn Harness) {
    let f = Fixture::open(harness).await;
    let history = f.store.history();
    let other = create(&f.store, &f.fence, "Other").await;
    for revision in 1..=5 {
        history
            .record(&f.fence, &change(&f.document, None, revision, T0))
            .await
            .unwrap();
    }
    history
        .record(&f.fence, &change(&other, Some("ann"), 1, T0))
        .await
        .unwrap();
    let page = history.versions(&f.document.id, 3).await.unwrap();
    assert_eq!(page.iter().map(|v| v.number).collect::<Vec<_>>(), [5, 4, 3]);
    assert!(page.iter().all(|v| v.channel == f.document.id));
    assert_eq!(history.versions(&f.document.id, 0).await.unwrap(), []);
    let one = history.version(&f.document.id, 2).await.unwrap().unwrap();
    assert_eq!(
        (one.revision, one.source_hash.as_str()),
        (2, hash(2).as_str())
    );
    assert_eq!(history.version(&f.document.id, 6).await.unwrap(), None);
    assert_eq!(history.versions(&other.id, 10).await.unwrap().len(), 1);
}

pub async fn history_moves_only_forward_and_checks_its_values(harness: &dyn Harness) {
    let f = Fixture::open(harness).await;
    let history = f.store.history();
    let doc = &f.document;
    history
        .record(&f.fence, &change(doc, Some("ann"), 3, T0))
        .await
        .unwrap();
    for stale in [2, 3] {
        let err = history
            .record(&f.fence, &change(doc, Some("ann"), stale, T0 + 1))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Conflict);
    }
    let bad_hash = Change {
        source_hash: "not a hash".to_owned(),
        ..change(doc, None, 4, T0)
    };
    assert_eq!(
        history
            .record(&f.fence, &bad_hash)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Invalid
    );
    let nowhere = Change {
        channel: ChannelId::random(),
        ..change(doc, None, 4, T0)
    };
    assert_eq!(
        history.record(&f.fence, &nowhere).await.unwrap_err().kind(),
        ErrorKind::Missing
    );
    let stored = history.versions(&doc.id, 10).await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].ended_at, UnixMillis(T0));
}

pub async fn history_writes_under_a_lost_lease_are_fenced(harness: &dyn Harness) {
    let f = Fixture::open(harness).await;
    let successor = f.hand_over().await;
    let history = f.store.history();
    let late = change(&f.document, Some("ann"), 1, T0);
    assert_eq!(
        history.record(&f.fence, &late).await.unwrap_err().kind(),
        ErrorKind::Fenced
    );
    assert_eq!(history.versions(&f.document.id, 10).await.unwrap(), []);
    history.record(&successor, &late).await.unwrap();
}

pub async fn history_and_chat_rows_go_with_their_document(harness: &dyn Harness) {
    let f = Fixture::open(harness).await;
    let kept = create(&f.store, &f.fence, "Kept").await;
    let key = |k: &str| ChatKey::new(k).unwrap();
    for doc in [&f.document, &kept] {
        f.store
            .history()
            .record(&f.fence, &change(doc, Some("ann"), 1, T0))
            .await
            .unwrap();
        let chat = f.store.chat();
        chat.put_thread(
            &f.fence,
            &ThreadDraft {
                channel: doc.id.clone(),
                root_id: key("m1"),
                root_message_json: "{}".to_owned(),
                forked_at: UnixMillis(T0),
                creator: None,
                replies_json: "[]".to_owned(),
                compactions_json: "[]".to_owned(),
                context_usage_json: None,
                provenance_json: None,
            },
        )
        .await
        .unwrap();
        chat.put_session_state(
            &f.fence,
            &SessionStateDraft {
                channel: doc.id.clone(),
                compactions_json: "[]".to_owned(),
                context_usage_json: None,
                entries_json: "[]".to_owned(),
                leaf_id: None,
                entry_forks_json: "{}".to_owned(),
            },
        )
        .await
        .unwrap();
        chat.put_stage(
            &f.fence,
            &RunStage {
                channel: doc.id.clone(),
                run_id: key("r1"),
                stage_id: key("s1"),
                order: 0,
                status: "running".to_owned(),
                name: "Plan".to_owned(),
                kind: "review".to_owned(),
                parents: Vec::new(),
                started_at: Some(1),
                ended_at: None,
            },
        )
        .await
        .unwrap();
    }
    let collaboration = f.store.collaboration();
    collaboration
        .archive(&f.fence, &f.document.id)
        .await
        .unwrap();
    collaboration
        .delete_archived(&f.fence, &f.document.id)
        .await
        .unwrap();
    let gone = &f.document.id;
    let chat = f.store.chat();
    assert_eq!(f.store.history().versions(gone, 10).await.unwrap(), []);
    assert_eq!(chat.threads(gone).await.unwrap(), []);
    assert_eq!(chat.session_state(gone).await.unwrap(), None);
    assert_eq!(chat.stages(gone).await.unwrap(), []);
    assert_eq!(
        f.store
            .history()
            .versions(&kept.id, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(chat.threads(&kept.id).await.unwrap().len(), 1);
    assert!(chat.session_state(&kept.id).await.unwrap().is_some());
    assert_eq!(chat.stages(&kept.id).await.unwrap().len(), 1);
}
