//! Rooms and the documents service when storage fails, on the memory adapter and on SQLite,
//! through the fault-injecting wrapper of the testkit: a commit refused while the database is
//! unavailable is never broadcast and its sender is told to resync, then stored once re-sent; a
//! commit that landed but whose answer was lost is neither lost nor stored twice, and every
//! client ends up with what was stored; a program's write that fails changes nothing stored; a
//! document that cannot be loaded is refused while the fault lasts and opens once it is gone.

use std::sync::Arc;
use std::time::Duration;

use fermata_collab::protocol::{self, ClientMessage};
use fermata_collab::{
    CollabSettings, Connection, Documents, EditError, Outbound, RoomManager, WriterFence, close,
};
use fermata_docs::SourceDoc;
use fermata_metrics::Metrics;
use fermata_store::{
    Acquisition, ChannelId, Commit, ErrorKind, Fence, LeaseName, OperationId, Storage,
    StoreOptions, UserId,
};
use fermata_store_sql::testing::ScratchDatabase;
use fermata_store_testkit::contract::create_document;
use fermata_store_testkit::memory::MemoryStorage;
use fermata_store_testkit::unreliable::{Fault, Faults, UnreliableStorage};
use tokio::time::{Instant, timeout, timeout_at};

/// How long a client listens for an update that must not come.
const QUIET: Duration = Duration::from_millis(300);
const PATIENCE: Duration = Duration::from_secs(10);

/// A document commit, the call a room saves every edit with.
const COMMIT: &str = "collaboration.commit";
/// The read a room opens its document with.
const LOAD: &str = "collaboration.read_for_recovery";

/// Each case once on the memory adapter and once on a SQLite file.
macro_rules! on_memory_and_sqlite {
    ($($case:ident),+ $(,)?) => {
        mod memory {
            $(
                #[tokio::test]
                async fn $case() {
                    super::$case(super::Backend::Memory).await;
                }
            )+
        }

        mod sqlite {
            $(
                #[tokio::test]
                async fn $case() {
                    super::$case(super::Backend::Sqlite).await;
                }
            )+
        }
    };
}

on_memory_and_sqlite!(
    a_failed_commit_is_not_broadcast_and_is_stored_once_sent_again,
    a_commit_whose_answer_was_lost_is_found_by_its_retry,
    a_commit_whose_answers_stay_lost_is_stored_once_and_reaches_every_client,
    a_failed_program_write_changes_nothing_stored,
    a_document_that_cannot_be_loaded_is_refused_until_the_fault_clears,
);

#[derive(Debug, Clone, Copy)]
enum Backend {
    Memory,
    Sqlite,
}

struct Rig {
    /// The real store, read past the faults.
    inner: Arc<dyn Storage>,
    faults: Faults,
    fence: Fence,
    rooms: RoomManager,
    documents: Documents,
    document: ChannelId,
    /// Where the rooms report storage outages (`/readyz` reads them).
    metrics: Arc<Metrics>,
}

impl Rig {
    async fn open(backend: Backend) -> Rig {
        let inner: Arc<dyn Storage> = match backend {
            Backend::Memory => Arc::new(MemoryStorage::new(StoreOptions::default())),
            Backend::Sqlite => Arc::new(
                ScratchDatabase::sqlite()
                    .open(StoreOptions::default())
                    .await,
            ),
        };
        let lease = match inner
            .leases()
            .acquire(&LeaseName::WRITER, "faults", Duration::from_secs(3600))
            .await
            .unwrap()
        {
            Acquisition::Granted(lease) => lease,
            Acquisition::Held(record) => panic!("held by {record:?}"),
        };
        let fence = lease.fence();
        let document = create_document(inner.collaboration(), &fence, "Faults")
            .await
            .id;
        let unreliable = UnreliableStorage::new(Arc::clone(&inner));
        let faults = unreliable.faults();
        let storage: Arc<dyn Storage> = Arc::new(unreliable);
        let writer_fence = WriterFence::default();
        writer_fence.set(Some(fence.clone()));
        let metrics = Arc::new(Metrics::new("test"));
        let rooms = RoomManager::new(
            Arc::clone(&storage),
            fermata_collab::DocumentFences::whole(writer_fence.clone()),
            CollabSettings::default(),
            Arc::clone(&metrics),
        );
        let documents = Documents::new(storage, writer_fence, rooms.clone());
        Rig {
            inner,
            faults,
            fence,
            rooms,
            documents,
            document,
            metrics,
        }
    }

    /// The document's text and revision as stored, read from the inner store.
    async fn stored(&self) -> (String, i64) {
        let snapshot = self
            .inner
            .collaboration()
            .recovery_snapshot(&self.document)
            .await
            .unwrap();
        let open = fermata_docs::recover(&snapshot).unwrap();
        (open.doc.text(), open.revision)
    }

    /// How many updates the document's journal holds.
    async fn journaled(&self) -> usize {
        self.inner
            .collaboration()
            .updates_after(&self.document, 0)
            .await
            .unwrap()
            .len()
    }
}

/// The member every client here edits as.
fn member() -> UserId {
    UserId("member".to_owned())
}

/// A client: its own copy of the document and its place in the room.
struct Client {
    doc: SourceDoc,
    connection: Connection,
}

impl Client {
    async fn join(rig: &Rig) -> Client {
        Client::rejoin(rig, SourceDoc::new()).await
    }

    /// Connects with `doc` as a y-websocket client reconnects: it answers the server's state
    /// vector with what the server lacks (its edits that were not saved), and syncs.
    async fn rejoin(rig: &Rig, doc: SourceDoc) -> Client {
        let connection = rig
            .rooms
            .join(&rig.document, &member(), false)
            .await
            .expect("join");
        let mut client = Client { doc, connection };
        let greeting = client.next().await;
        let Ok(ClientMessage::StateVector(server)) = protocol::decode(&greeting) else {
            panic!("expected the server's state vector");
        };
        let step1 = protocol::sync_step1(&client.doc.state_vector());
        assert!(client.connection.receive(step1).await);
        let reply = client.next().await;
        match protocol::decode(&reply) {
            Ok(ClientMessage::Update(update)) => client.doc.apply_update(&update).unwrap(),
            other => panic!("expected sync step 2, got {other:?}"),
        }
        // As a stock client does, it sends its step 2 even when it is empty: a room whose next
        // commit fails must not count this client among the senders it closes.
        let unsaved = client.doc.diff_since(&server).unwrap();
        assert!(
            client
                .connection
                .receive(protocol::sync_step2(unsaved))
                .await
        );
        client
    }

    /// The next message the room sends.
    async fn next(&mut self) -> Vec<u8> {
        match timeout(PATIENCE, self.connection.outbound.recv())
            .await
            .expect("the room went quiet")
        {
            Some(Outbound::Message(bytes)) => bytes,
            other => panic!("expected a message, got {other:?}"),
        }
    }

    /// The close the room sends next, skipping ordinary messages.
    async fn closed(&mut self) -> (u16, String) {
        loop {
            match timeout(PATIENCE, self.connection.outbound.recv())
                .await
                .expect("no close came")
            {
                Some(Outbound::Close { code, reason }) => return (code, reason),
                Some(Outbound::Message(_)) => {}
                None => panic!("the connection ended without a close"),
            }
        }
    }

    /// Whether an update arrives within `within`; applied to the client's copy when it does.
    async fn hears_update(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            match timeout_at(deadline, self.connection.outbound.recv()).await {
                Err(_) => return false,
                Ok(Some(Outbound::Message(bytes))) => {
                    if let Ok(ClientMessage::Update(update)) = protocol::decode(&bytes) {
                        self.doc.apply_update(&update).unwrap();
                        return true;
                    }
                }
                Ok(other) => panic!("unexpected {other:?}"),
            }
        }
    }

    async fn type_text(&mut self, text: &str) {
        let update = self.doc.insert(self.doc.len(), text).unwrap();
        assert!(self.connection.receive(protocol::update(update)).await);
    }
}

async fn a_failed_commit_is_not_broadcast_and_is_stored_once_sent_again(backend: Backend) {
    let rig = Rig::open(backend).await;
    let mut writer = Client::join(&rig).await;
    let mut reader = Client::join(&rig).await;
    rig.faults
        .set(COMMIT, Fault::before(ErrorKind::Unavailable));
    writer.type_text("typed while the database is away").await;
    let (code, reason) = writer.closed().await;
    assert_eq!(code, close::RESYNC, "{reason}");
    assert!(
        !reader.hears_update(QUIET).await,
        "an update that was not saved was broadcast"
    );
    assert_eq!(rig.stored().await, (String::new(), 0));
    assert!(rig.faults.failed(COMMIT) >= 1);
    assert!(
        !rig.metrics.storage_available(),
        "a commit the database did not take is an outage"
    );

    rig.faults.clear(COMMIT);
    let Client { doc, connection } = writer;
    connection.leave().await;
    let mut writer = Client::rejoin(&rig, doc).await;
    assert!(reader.hears_update(PATIENCE).await, "the update sent again");
    assert_eq!(reader.doc.text(), "typed while the database is away");
    assert!(writer.hears_update(PATIENCE).await, "its own update, saved");
    assert_eq!(
        rig.stored().await,
        ("typed while the database is away".to_owned(), 1)
    );
    assert_eq!(rig.journaled().await, 1);
    assert!(
        rig.metrics.storage_available(),
        "the commit that was taken ended the outage"
    );
}

async fn a_commit_whose_answer_was_lost_is_found_by_its_retry(backend: Backend) {
    let rig = Rig::open(backend).await;
    let mut writer = Client::join(&rig).await;
    let mut reader = Client::join(&rig).await;
    rig.faults
        .set(COMMIT, Fault::after(ErrorKind::Unavailable).times(1));
    writer.type_text("landed, answer lost").await;
    assert!(writer.hears_update(PATIENCE).await, "its own update, saved");
    assert!(reader.hears_update(PATIENCE).await);
    assert_eq!(reader.doc.text(), "landed, answer lost");
    assert_eq!(
        rig.stored().await,
        ("landed, answer lost".to_owned(), 1),
        "the retry stored it again"
    );
    assert_eq!(rig.journaled().await, 1);
    assert_eq!(
        (rig.faults.calls(COMMIT), rig.faults.failed(COMMIT)),
        (2, 1),
        "one commit whose answer was lost, one retry answered from what it stored"
    );
}

async fn a_commit_whose_answers_stay_lost_is_stored_once_and_reaches_every_client(
    backend: Backend,
) {
    let rig = Rig::open(backend).await;
    let mut writer = Client::join(&rig).await;
    let mut reader = Client::join(&rig).await;
    rig.faults.set(COMMIT, Fault::after(ErrorKind::Unavailable));
    writer.type_text("landed, never answered").await;
    let (code, reason) = writer.closed().await;
    assert_eq!(code, close::RESYNC, "{reason}");
    // The room reloads what storage holds, which is more than it published.
    assert!(
        reader.hears_update(PATIENCE).await,
        "the stored update did not reach the other client"
    );
    assert_eq!(reader.doc.text(), "landed, never answered");
    assert_eq!(rig.stored().await, ("landed, never answered".to_owned(), 1));
    assert_eq!(rig.journaled().await, 1);

    rig.faults.clear(COMMIT);
    let Client { doc, connection } = writer;
    connection.leave().await;
    let mut writer = Client::rejoin(&rig, doc).await;
    assert_eq!(writer.doc.text(), "landed, never answered");
    assert!(
        !reader.hears_update(QUIET).await && !writer.hears_update(QUIET).await,
        "the update sent again was broadcast again"
    );
    assert_eq!(rig.stored().await, ("landed, never answered".to_owned(), 1));
    assert_eq!(rig.journaled().await, 1);
}

async fn a_failed_program_write_changes_nothing_stored(backend: Backend) {
    let rig = Rig::open(backend).await;
    let before = rig
        .documents
        .rewrite(&rig.document, "before".to_owned(), None)
        .await
        .unwrap();
    let stored = ("before".to_owned(), before.revision);
    assert_eq!(rig.stored().await, stored);
    rig.faults
        .set(COMMIT, Fault::before(ErrorKind::Unavailable));

    let error = rig
        .documents
        .rewrite(&rig.document, "rewritten".to_owned(), None)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    let mut program = SourceDoc::new();
    let update = program.insert(0, "merged ").unwrap();
    let error = rig
        .documents
        .apply_update(&rig.document, update, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, EditError::Store(e) if e.kind() == ErrorKind::Unavailable),
        "{error:?}"
    );
    let error = rig
        .documents
        .rename(&rig.document, "Renamed".to_owned(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, EditError::Store(e) if e.kind() == ErrorKind::Unavailable),
        "{error:?}"
    );
    assert_eq!(rig.stored().await, stored);
    let channel = rig
        .inner
        .collaboration()
        .channel(&rig.document)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(channel.title, "Faults");
    // The open room serves what is stored, not the writes that failed.
    let read = rig.documents.read(&rig.document).await.unwrap();
    assert_eq!(read.text, "before");

    rig.faults.clear(COMMIT);
    rig.documents
        .rewrite(&rig.document, "rewritten".to_owned(), None)
        .await
        .unwrap();
    assert_eq!(
        rig.stored().await,
        ("rewritten".to_owned(), before.revision + 1)
    );
}

async fn a_document_that_cannot_be_loaded_is_refused_until_the_fault_clears(backend: Backend) {
    let rig = Rig::open(backend).await;
    let mut seeded = SourceDoc::new();
    let update = seeded.insert(0, "seeded").unwrap();
    rig.inner
        .collaboration()
        .commit(
            &rig.fence,
            &Commit {
                channel: rig.document.clone(),
                operation: OperationId::new("seed").unwrap(),
                expected_revision: 0,
                update: Some(update),
                sidecar: None,
                events: Vec::new(),
                title: None,
                text: None,
            },
        )
        .await
        .unwrap();
    rig.faults.set(LOAD, Fault::before(ErrorKind::Unavailable));

    let refusal = rig
        .rooms
        .join(&rig.document, &member(), false)
        .await
        .unwrap_err();
    assert_eq!(
        (refusal.code, refusal.kind),
        (close::TRY_AGAIN_LATER, ErrorKind::Unavailable),
        "{}",
        refusal.reason
    );
    let error = rig
        .documents
        .rewrite(&rig.document, "rewritten".to_owned(), None)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    let error = rig.documents.read(&rig.document).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    assert_eq!(rig.stored().await, ("seeded".to_owned(), 1));
    assert!(rig.faults.failed(LOAD) >= 3);

    rig.faults.clear(LOAD);
    let client = Client::join(&rig).await;
    assert_eq!(client.doc.text(), "seeded");
    assert_eq!(rig.stored().await, ("seeded".to_owned(), 1));
}
