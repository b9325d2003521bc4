//! Activity history through real rooms on SQLite: browser edits credited to their member and
//! recorded only after they are acknowledged, program and server rewrites, a history store that
//! fails or stalls without holding up an edit, and restoring a session through the rewrite path.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use fermata_collab::protocol::{self, ClientMessage};
use fermata_collab::{
    CollabSettings, Connection, DocumentFences, Documents, Outbound, RoomManager, WriterFence,
};
use fermata_docs::{Sidecar, SourceDoc};
use fermata_store::{
    Acquisition, Change, ChannelId, Commit, Fence, HistoryStore, LeaseName, OperationId, Recorded,
    Shard, ShardCount, Storage, StoreError, StoreOptions, StoreResult, UserId, Version,
};
use fermata_store_sql::testing::{ScratchDatabase, ScratchStorage};
use fermata_store_testkit::contract::create_document;
use fermata_store_testkit::{eventually, eventually_some};
use tokio::sync::Semaphore;
use tokio::time::timeout;

const PATIENCE: Duration = Duration::from_secs(10);
/// The permits of an open history gate.
const OPEN: u32 = 1 << 20;

/// What the history store under test does with a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Records it, once the test lets it (see `Controlled::gate`).
    Gated,
    /// Fails as an unreachable database would.
    Failing,
}

/// A history store in front of the real one that can hold or fail its writes.
#[derive(Debug)]
struct Controlled {
    real: Arc<ScratchStorage>,
    mode: Mode,
    gate: Semaphore,
    attempts: AtomicUsize,
}

#[async_trait]
impl HistoryStore for Controlled {
    async fn record(&self, fence: &Fence, change: &Change) -> StoreResult<Recorded> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        match self.mode {
            Mode::Failing => Err(StoreError::unavailable("the history database is away")),
            Mode::Gated => {
                let _permit = self.gate.acquire().await.expect("the gate stays open");
                self.real.history().record(fence, change).await
            }
        }
    }

    async fn versions(&self, channel: &ChannelId, limit: usize) -> StoreResult<Vec<Version>> {
        self.real.history().versions(channel, limit).await
    }

    async fn version(&self, channel: &ChannelId, number: i64) -> StoreResult<Option<Version>> {
        self.real.history().version(channel, number).await
    }
}

/// The real store with the controlled history store in place of its own.
#[derive(Debug)]
struct Wrapped(Controlled);

fermata_store::impl_storage!(
    Wrapped,
    driver = |wrapped| wrapped.0.real.driver(),
    stores = |wrapped| &wrapped.0,
    only = [history],
    others = |wrapped| wrapped.0.real,
);

struct Rig {
    store: Arc<Wrapped>,
    fence: Fence,
    /// The document's shard, when the rooms write it as a cluster's member does.
    shard: Option<Shard>,
    rooms: RoomManager,
    documents: Documents,
    document: ChannelId,
}

impl Rig {
    async fn open(mode: Mode) -> Rig {
        Rig::with_settings(mode, CollabSettings::default()).await
    }

    async fn with_settings(mode: Mode, settings: CollabSettings) -> Rig {
        Rig::build(mode, settings, false).await
    }

    /// The rig of a cluster's member: the rooms write the document under its shard's lease.
    async fn sharded(mode: Mode) -> Rig {
        Rig::build(mode, CollabSettings::default(), true).await
    }

    async fn build(mode: Mode, settings: CollabSettings, sharded: bool) -> Rig {
        let real = Arc::new(
            ScratchDatabase::sqlite()
                .open(StoreOptions::default())
                .await,
        );
        let lease = match real
            .leases()
            .acquire(&LeaseName::WRITER, "history", Duration::from_secs(3600))
            .await
            .unwrap()
        {
            Acquisition::Granted(lease) => lease,
            Acquisition::Held(record) => panic!("held by {record:?}"),
        };
        let fence = lease.fence();
        let created = create_document(real.collaboration(), &fence, "History").await;
        let (document, shard) = (created.id, sharded.then_some(created.shard));
        let fence = match shard {
            Some(shard) => {
                real.leases().release(&lease).await.unwrap();
                let name = LeaseName::shard_writer(shard);
                match real
                    .leases()
                    .acquire(&name, "member", Duration::from_secs(3600))
                    .await
                    .unwrap()
                {
                    Acquisition::Granted(lease) => lease.fence(),
                    Acquisition::Held(record) => panic!("held by {record:?}"),
                }
            }
            None => fence,
        };
        let store = Arc::new(Wrapped(Controlled {
            real,
            mode,
            gate: Semaphore::new(OPEN as usize),
            attempts: AtomicUsize::new(0),
        }));
        let writer = WriterFence::default();
        writer.set(Some(fence.clone()));
        let shared: Arc<dyn Storage> = store.clone();
        let fences = match shard {
            Some(shard) => {
                let fences = DocumentFences::sharded(Arc::clone(&shared), ShardCount::DEFAULT);
                fences.seat(shard, Some(fence.clone()));
                fences
            }
            None => DocumentFences::whole(writer.clone()),
        };
        let rooms = RoomManager::new(Arc::clone(&shared), fences, settings, Arc::default());
        let documents = Documents::new(shared, writer, rooms.clone());
        Rig {
            store,
            fence,
            shard,
            rooms,
            documents,
            document,
        }
    }

    /// Holds every history write until `release`.
    async fn hold_history(&self) {
        self.store.0.gate.acquire_many(OPEN).await.unwrap().forget();
    }

    fn release_history(&self) {
        self.store.0.gate.add_permits(OPEN as usize);
    }

    async fn stored(&self) -> (String, i64) {
        let snapshot = self
            .store
            .collaboration()
            .recovery_snapshot(&self.document)
            .await
            .unwrap();
        let open = fermata_docs::recover(&snapshot).unwrap();
        (open.doc.text(), open.revision)
    }

    async fn versions(&self) -> Vec<Version> {
        self.store
            .history()
            .versions(&self.document, 50)
            .await
            .unwrap()
    }

    /// Waits until history holds `count` sessions whose newest is at `revision`.
    async fn history_reaches(&self, count: usize, revision: i64) -> Vec<Version> {
        eventually_some(
            &format!("history with {count} sessions, the newest at revision {revision}"),
            || async {
                let versions = self.versions().await;
                (versions.len() == count && versions[0].revision == revision).then_some(versions)
            },
        )
        .await
    }
}

fn user(name: &str) -> UserId {
    UserId(name.to_owned())
}

/// A y-websocket client of a room, editing as one member.
struct Client {
    doc: SourceDoc,
    connection: Connection,
}

impl Client {
    async fn join(rig: &Rig, member: &str) -> Client {
        let connection = rig
            .rooms
            .join(&rig.document, &user(member), false)
            .await
            .expect("join");
        let mut client = Client {
            doc: SourceDoc::new(),
            connection,
        };
        let greeting = client.next().await;
        assert!(matches!(
            protocol::decode(&greeting),
            Ok(ClientMessage::StateVector(_))
        ));
        let step1 = protocol::sync_step1(&client.doc.state_vector());
        assert!(client.connection.receive(step1).await);
        client.hears_update().await;
        client
    }

    async fn next(&mut self) -> Vec<u8> {
        match timeout(PATIENCE, self.connection.outbound.recv())
            .await
            .expect("the room went quiet")
        {
            Some(Outbound::Message(bytes)) => bytes,
            other => panic!("expected a message, got {other:?}"),
        }
    }

    /// Waits for the next update and applies it.
    async fn hears_update(&mut self) {
        loop {
            if let Ok(ClientMessage::Update(update)) = protocol::decode(&self.next().await) {
                self.doc.apply_update(&update).unwrap();
                return;
            }
        }
    }

    /// Waits until the updates the room sends (its own echoes included) bring `text`.
    async fn sees(&mut self, text: &str) {
        while self.doc.text() != text {
            self.hears_update().await;
        }
    }

    async fn type_text(&mut self, text: &str) {
        let update = self.doc.insert(self.doc.len(), text).unwrap();
        assert!(self.connection.receive(protocol::update(update)).await);
    }
}

#[tokio::test]
async fn browser_edits_are_credited_to_their_member_and_recorded_only_after_acknowledgement() {
    let rig = Rig::open(Mode::Gated).await;
    let mut ann = Client::join(&rig, "ann").await;
    let mut bob = Client::join(&rig, "bob").await;
    rig.hold_history().await;

    ann.type_text("Hello").await;
    bob.sees("Hello").await;
    ann.type_text(" world").await;
    bob.sees("Hello world").await;
    // Both edits are saved and shown while their history writes are still held.
    let (text, revision) = rig.stored().await;
    assert_eq!(text, "Hello world");
    assert_eq!(bob.doc.text(), "Hello world");
    assert!(rig.versions().await.is_empty());

    rig.release_history();
    let versions = rig.history_reaches(1, revision).await;
    let session = &versions[0];
    assert_eq!(session.author, Some(user("ann")));
    assert_eq!(session.text, "Hello world");
    assert_eq!(
        session.source_hash,
        fermata_docs::source_hash("Hello world")
    );

    bob.type_text("!").await;
    ann.sees("Hello world!").await;
    let (_, revision) = rig.stored().await;
    let versions = rig.history_reaches(2, revision).await;
    assert_eq!(versions[0].author, Some(user("bob")));
    assert_eq!(versions[0].text, "Hello world!");
    assert_eq!(versions[1].author, Some(user("ann")));
}

/// Ann types; while her burst is still open (it settles a second after the last edit), `ending`
/// runs with the history's write held for a while once it settles the burst. The burst must be
/// recorded by the time `ending` returns: the server may then give up the fence it wrote under.
async fn assert_the_burst_is_recorded_by(rig: &Rig, what: &str, ending: impl Future<Output = ()>) {
    let mut ann = Client::join(rig, "ann").await;
    ann.type_text(&format!("typed just before the {what}"))
        .await;
    let revision = eventually_some("the edit saved", || async {
        let (text, revision) = rig.stored().await;
        (!text.is_empty()).then_some(revision)
    })
    .await;
    rig.hold_history().await;
    let release = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        rig.release_history();
    };
    tokio::join!(ending, release);
    let versions = rig.versions().await;
    assert_eq!(
        versions.len(),
        1,
        "the burst was not recorded by the {what}"
    );
    assert_eq!(versions[0].revision, revision);
    assert_eq!(versions[0].author, Some(user("ann")));
}

#[tokio::test]
async fn a_stop_records_the_burst_in_progress_before_it_returns() {
    let rig = Rig::open(Mode::Gated).await;
    let stopping = async {
        rig.rooms.shutdown("the server is stopping").await;
        rig.rooms.recordings_written().await;
    };
    assert_the_burst_is_recorded_by(&rig, "stop", stopping).await;
}

#[tokio::test]
async fn a_hand_over_records_the_burst_in_progress_before_the_shard_is_given_up() {
    let rig = Rig::sharded(Mode::Gated).await;
    let handing_over = rig.rooms.close_shard(
        rig.shard.unwrap(),
        "the document moved to another server; reconnect",
    );
    assert_the_burst_is_recorded_by(&rig, "hand-over", handing_over).await;
}

#[tokio::test]
async fn a_batch_mixing_members_is_credited_to_the_member_whose_update_came_last() {
    // A wide batch window, so both members' updates go into one commit.
    let settings = CollabSettings {
        batch_window: Duration::from_millis(500),
        ..CollabSettings::default()
    };
    let rig = Rig::with_settings(Mode::Gated, settings).await;
    let mut ann = Client::join(&rig, "ann").await;
    let mut bob = Client::join(&rig, "bob").await;
    ann.type_text("ann ").await;
    bob.type_text("bob ").await;
    let (text, revision) = eventually_some("both edits saved", || async {
        let stored = rig.stored().await;
        (stored.0.len() == 8).then_some(stored)
    })
    .await;
    assert_eq!(revision, 1, "the two updates were not one commit");
    let versions = rig.history_reaches(1, revision).await;
    assert_eq!(versions[0].author, Some(user("bob")));
    assert_eq!(versions[0].text, text);
    ann.sees(&text).await;
}

#[tokio::test]
async fn a_failing_history_store_never_fails_an_edit() {
    let rig = Rig::open(Mode::Failing).await;
    let mut ann = Client::join(&rig, "ann").await;
    let mut bob = Client::join(&rig, "bob").await;
    ann.type_text("First").await;
    bob.sees("First").await;
    ann.type_text(" and second").await;
    bob.sees("First and second").await;
    rig.documents
        .rewrite(&rig.document, "Rewritten".to_owned(), Some(user("carol")))
        .await
        .expect("a rewrite succeeds without history");
    ann.sees("Rewritten").await;
    assert_eq!(rig.stored().await.0, "Rewritten");
    // Ann's burst (her two edits, written as one when she pauses) and Carol's rewrite.
    eventually("history to be tried", || async {
        rig.store.0.attempts.load(Ordering::SeqCst) >= 2
    })
    .await;
    // The room still serves: a further edit is saved and shown.
    bob.sees("Rewritten").await;
    bob.type_text("!").await;
    ann.sees("Rewritten!").await;
    assert_eq!(rig.stored().await.0, "Rewritten!");
}

#[tokio::test]
async fn program_rewrites_credit_the_caller_and_server_edits_no_one() {
    let rig = Rig::open(Mode::Gated).await;
    let documents = &rig.documents;
    let by_carol = documents
        .rewrite(
            &rig.document,
            "From a program".to_owned(),
            Some(user("carol")),
        )
        .await
        .unwrap();
    rig.history_reaches(1, by_carol.revision).await;
    let by_server = documents
        .rewrite(&rig.document, "From the server".to_owned(), None)
        .await
        .unwrap();
    // The same text again changes nothing in history.
    let unchanged = documents
        .rewrite(&rig.document, "From the server".to_owned(), None)
        .await
        .unwrap();
    let versions = rig.history_reaches(2, by_server.revision).await;
    assert_eq!(versions[0].author, None);
    assert_eq!(versions[0].text, "From the server");
    assert_eq!(versions[1].author, Some(user("carol")));
    assert!(unchanged.revision >= by_server.revision);
    let listed = documents.versions(&rig.document, 1).await.unwrap();
    assert_eq!(listed, versions[..1]);
}

#[tokio::test]
async fn restoring_a_session_rewrites_through_the_room_for_the_restorer_and_keeps_the_sidecar() {
    let rig = Rig::open(Mode::Gated).await;
    // A sidecar with content, committed before the room opens.
    let sidecar = Sidecar {
        drafts: vec![serde_json::json!({"id": "draft-1", "text": "kept"})],
        relationships: vec![serde_json::json!({"kind": "decision", "id": "d1"})],
        ..Sidecar::default()
    }
    .to_state();
    rig.store
        .collaboration()
        .commit(
            &rig.fence,
            &Commit {
                channel: rig.document.clone(),
                operation: OperationId::new("sidecar").unwrap(),
                expected_revision: 0,
                update: None,
                sidecar: Some(sidecar.clone()),
                events: Vec::new(),
                title: None,
                text: None,
            },
        )
        .await
        .unwrap();
    let documents = &rig.documents;
    documents
        .rewrite(&rig.document, "First draft".to_owned(), Some(user("ann")))
        .await
        .unwrap();
    let second = documents
        .rewrite(&rig.document, "Second draft".to_owned(), Some(user("bob")))
        .await
        .unwrap();
    let versions = rig.history_reaches(2, second.revision).await;
    let first = versions[1].clone();
    assert_eq!(first.text, "First draft");

    let mut reader = Client::join(&rig, "dan").await;
    assert_eq!(reader.doc.text(), "Second draft");
    let restored = documents
        .restore_version(&rig.document, first.number, user("carol"))
        .await
        .unwrap();
    // It went through the room: connected clients are sent it once saved.
    reader.sees("First draft").await;
    assert_eq!(
        rig.stored().await,
        ("First draft".to_owned(), restored.revision)
    );
    let versions = rig.history_reaches(3, restored.revision).await;
    assert_eq!(versions[0].author, Some(user("carol")));
    assert_eq!(versions[0].text, "First draft");
    let snapshot = rig
        .store
        .collaboration()
        .recovery_snapshot(&rig.document)
        .await
        .unwrap();
    assert_eq!(snapshot.sidecar, Some(sidecar));

    let missing = documents
        .restore_version(&rig.document, 99, user("carol"))
        .await
        .unwrap_err();
    assert_eq!(missing.kind(), fermata_store::ErrorKind::Missing);
}
