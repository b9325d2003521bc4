//! Rooms on a real SQLite database: persistence before publication, batching, the checkpoint
//! policy, idle closing, limits, refusals, presence, a lost fence, read-only connections, program
//! updates merged like a client's, rewrites refused at a stale revision, and the slots of closed
//! rooms dropped. Each counts in the metrics the rooms record: rooms and connections, commits by
//! outcome, checkpoints, recoveries and refused updates by reason.

use std::sync::Arc;
use std::time::Duration;

use fermata_collab::protocol::{self, ClientMessage};
use fermata_collab::{CollabSettings, Connection, Outbound, RoomManager, WriterFence, close};
use fermata_docs::SourceDoc;
use fermata_metrics::Metrics;
use fermata_store::{Acquisition, ChannelId, Lease, LeaseName, Storage, StoreOptions, UserId};
use fermata_store_sql::testing::{ScratchDatabase, ScratchStorage};
use fermata_store_testkit::contract::PausedWrites;
use fermata_store_testkit::contract::create_document;
use fermata_store_testkit::eventually_some;
use tokio::time::timeout;

const QUIET: Duration = Duration::from_millis(300);
const PATIENCE: Duration = Duration::from_secs(10);

struct Rig {
    store: Arc<ScratchStorage>,
    /// The writer lease the rooms' fence was taken from.
    lease: Lease,
    fence: WriterFence,
    rooms: RoomManager,
    document: ChannelId,
    metrics: Arc<Metrics>,
}

impl Rig {
    /// The value of one series of the rooms' metrics, as `/metrics` writes it; 0 when the
    /// series has no sample yet.
    fn counted(&self, series: &str) -> f64 {
        let text = self.metrics.render();
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .map_or(0.0, |value| value.parse().expect("a numeric value"))
    }
}

async fn rig(settings: CollabSettings, options: StoreOptions) -> Rig {
    let store = Arc::new(ScratchDatabase::sqlite().open(options).await);
    let lease = match store
        .leases()
        .acquire(&LeaseName::WRITER, "rooms", Duration::from_secs(3600))
        .await
        .unwrap()
    {
        Acquisition::Granted(lease) => lease,
        Acquisition::Held(record) => panic!("held by {record:?}"),
    };
    let fence = WriterFence::default();
    fence.set(Some(lease.fence()));
    let document = create_document(store.collaboration(), &lease.fence(), "Room")
        .await
        .id;
    let shared: Arc<dyn Storage> = store.clone();
    let metrics = Arc::new(Metrics::new("test"));
    let rooms = RoomManager::new(
        shared,
        fermata_collab::DocumentFences::whole(fence.clone()),
        settings,
        Arc::clone(&metrics),
    );
    Rig {
        store,
        lease,
        fence,
        rooms,
        document,
        metrics,
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
        Client::join_as(rig, false).await
    }

    /// A client whose connection is read-only when `read_only` (a viewer's).
    async fn join_as(rig: &Rig, read_only: bool) -> Client {
        let connection = rig
            .rooms
            .join(&rig.document, &member(), read_only)
            .await
            .expect("join");
        let mut client = Client {
            doc: SourceDoc::new(),
            connection,
        };
        // The server opens with its state vector; answering it with ours brings the document.
        let greeting = client.next().await.expect("a greeting");
        assert!(matches!(
            protocol::decode(&greeting),
            Ok(ClientMessage::StateVector(_))
        ));
        let step1 = protocol::sync_step1(&client.doc.state_vector());
        assert!(client.connection.receive(step1).await);
        let reply = client.next().await.expect("sync step 2");
        match protocol::decode(&reply) {
            Ok(ClientMessage::Update(update)) => client.doc.apply_update(&update).unwrap(),
            other => panic!("expected sync step 2, got {other:?}"),
        }
        client
    }

    /// The next message the room sends, or `None` when it closes the connection quietly.
    async fn next(&mut self) -> Option<Vec<u8>> {
        match timeout(PATIENCE, self.connection.outbound.recv())
            .await
            .expect("the room went quiet")
        {
            Some(Outbound::Message(bytes)) => Some(bytes),
            Some(Outbound::Close { code, reason }) => panic!("closed: {code} {reason}"),
            None => None,
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

    /// Whether any update arrives within a quiet period.
    async fn hears_update(&mut self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.connection.outbound.recv()).await {
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

async fn stored_text(rig: &Rig) -> (String, i64) {
    let snapshot = rig
        .store
        .collaboration()
        .recovery_snapshot(&rig.document)
        .await
        .unwrap();
    let open = fermata_docs::recover(&snapshot).unwrap();
    (open.doc.text(), open.revision)
}

#[tokio::test]
async fn nothing_is_published_before_it_is_saved() {
    let pause = PausedWrites::default();
    let rig = rig(
        CollabSettings::default(),
        StoreOptions {
            fenced_write_hook: Some(pause.hook()),
            ..StoreOptions::default()
        },
    )
    .await;
    let mut writer = Client::join(&rig).await;
    let mut reader = Client::join(&rig).await;
    pause.arm();
    writer.type_text("saved first").await;
    pause.entered().await;
    assert!(
        !reader.hears_update(QUIET).await,
        "an update was broadcast before its commit finished"
    );
    assert_eq!(stored_text(&rig).await.0, "");
    pause.release();
    assert!(reader.hears_update(PATIENCE).await);
    assert_eq!(reader.doc.text(), "saved first");
    assert_eq!(stored_text(&rig).await, ("saved first".to_owned(), 1));
}

#[tokio::test]
async fn updates_arriving_together_are_committed_together() {
    let settings = CollabSettings {
        batch_window: Duration::from_millis(200),
        ..CollabSettings::default()
    };
    let rig = rig(settings, StoreOptions::default()).await;
    let mut writer = Client::join(&rig).await;
    for n in 0..10 {
        writer.type_text(&format!("{n} ")).await;
    }
    let mut reader = Client::join(&rig).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while reader.doc.text() != "0 1 2 3 4 5 6 7 8 9 " {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reader has {:?}",
            reader.doc.text()
        );
        reader.hears_update(Duration::from_millis(100)).await;
    }
    let (text, revision) = stored_text(&rig).await;
    assert_eq!(text, "0 1 2 3 4 5 6 7 8 9 ");
    assert!(revision < 10, "ten quick updates took {revision} commits");
}

#[tokio::test]
async fn checkpoints_follow_the_policy_and_an_idle_room_closes_with_one() {
    let settings = CollabSettings {
        batch_window: Duration::from_millis(1),
        checkpoint_every_commits: 3,
        idle_close: Duration::from_millis(200),
        ..CollabSettings::default()
    };
    let rig = rig(settings, StoreOptions::default()).await;
    let mut writer = Client::join(&rig).await;
    for n in 0..4 {
        writer.type_text(&format!("line {n}\n")).await;
        assert!(
            writer.hears_update(PATIENCE).await,
            "update {n} was not acknowledged"
        );
    }
    let snapshot = rig
        .store
        .collaboration()
        .recovery_snapshot(&rig.document)
        .await
        .unwrap();
    let checkpoint = snapshot
        .checkpoint
        .expect("a checkpoint after three commits");
    assert_eq!(checkpoint.through_sequence, 3);
    assert_eq!(snapshot.updates.len(), 1);
    assert_eq!(rig.counted("fermata_rooms_open"), 1.0);
    assert_eq!(rig.counted("fermata_room_connections"), 1.0);
    assert_eq!(
        rig.counted("fermata_document_commits_total{outcome=\"committed\"}"),
        4.0
    );
    assert_eq!(
        rig.counted("fermata_document_commit_batch_updates_count"),
        4.0
    );
    assert_eq!(
        rig.counted("fermata_document_checkpoints_total{outcome=\"saved\"}"),
        1.0
    );

    writer.connection.leave().await;
    let snapshot = eventually_some("the idle room's checkpoint", || async {
        let snapshot = rig
            .store
            .collaboration()
            .recovery_snapshot(&rig.document)
            .await
            .unwrap();
        snapshot
            .checkpoint
            .as_ref()
            .is_some_and(|c| c.through_sequence == 4)
            .then_some(snapshot)
    })
    .await;
    assert!(snapshot.updates.is_empty());
    assert_eq!(
        rig.counted("fermata_document_checkpoints_total{outcome=\"saved\"}"),
        2.0
    );
    assert_eq!(
        rig.counted("fermata_document_checkpoint_duration_seconds_count"),
        2.0
    );
    eventually_some("the idle room to close", || async {
        (rig.counted("fermata_rooms_open") == 0.0).then_some(())
    })
    .await;
    assert_eq!(rig.counted("fermata_room_connections"), 0.0);
    // The room has closed; a new client opens it again from the checkpoint.
    let reader = Client::join(&rig).await;
    assert_eq!(reader.doc.text(), "line 0\nline 1\nline 2\nline 3\n");
    assert_eq!(rig.counted("fermata_rooms_open"), 1.0);
    assert_eq!(
        rig.counted("fermata_document_recovery_duration_seconds_count"),
        2.0
    );
}

/// A client that stops reading is dropped once two of the largest messages' worth of bytes wait
/// for it, not when 256 messages of any size do; the room serves the others on.
#[tokio::test]
async fn a_client_that_stops_reading_is_dropped_at_a_byte_bound() {
    let settings = CollabSettings {
        max_message_bytes: 4096,
        ..CollabSettings::default()
    };
    let rig = rig(settings, StoreOptions::default()).await;
    let mut writer = Client::join(&rig).await;
    let mut stalled = Client::join(&rig).await;
    let line = "x".repeat(500);
    for _ in 0..40 {
        writer.type_text(&line).await;
        assert!(
            writer.hears_update(PATIENCE).await,
            "the writer's edit came back"
        );
    }
    let (code, reason) = stalled.closed().await;
    assert_eq!(code, close::TRY_AGAIN_LATER);
    assert_eq!(reason, "the client fell too far behind");
    writer.type_text("still served").await;
    assert!(writer.hears_update(PATIENCE).await);
}

#[tokio::test]
async fn limits_are_enforced_with_clear_refusals() {
    let settings = CollabSettings {
        max_clients_per_room: 2,
        max_document_bytes: 16,
        max_message_bytes: 4096,
        ..CollabSettings::default()
    };
    let rig = rig(settings, StoreOptions::default()).await;
    let mut first = Client::join(&rig).await;
    let mut second = Client::join(&rig).await;
    let refusal = rig
        .rooms
        .join(&rig.document, &member(), false)
        .await
        .unwrap_err();
    assert_eq!(refusal.code, close::TRY_AGAIN_LATER);

    first
        .type_text("this text is longer than sixteen bytes")
        .await;
    let (code, reason) = first.closed().await;
    assert_eq!(code, close::TOO_BIG, "{reason}");
    assert!(
        !second.hears_update(QUIET).await,
        "a refused update was broadcast"
    );

    assert!(second.connection.receive(vec![0u8; 5000]).await);
    let (code, _) = second.closed().await;
    assert_eq!(code, close::TOO_BIG);
    assert_eq!(stored_text(&rig).await, (String::new(), 0));
    assert_eq!(
        rig.counted("fermata_room_connections_limit{per=\"room\"}"),
        2.0
    );
    for reason in ["document_too_large", "message_too_large"] {
        assert_eq!(
            rig.counted(&format!(
                "fermata_document_updates_refused_total{{reason=\"{reason}\"}}"
            )),
            1.0,
            "{reason}"
        );
    }
}

#[tokio::test]
async fn bad_messages_are_refused_and_the_room_keeps_serving() {
    let rig = rig(CollabSettings::default(), StoreOptions::default()).await;
    let mut good = Client::join(&rig).await;
    let mut garbage = Client::join(&rig).await;
    assert!(garbage.connection.receive(vec![7, 7, 7, 7]).await);
    assert_eq!(garbage.closed().await.0, close::POLICY);

    // An update whose predecessors the document never saw.
    let mut foreign = Client::join(&rig).await;
    let mut elsewhere = SourceDoc::new();
    elsewhere.insert(0, "hidden").unwrap();
    let dependent = elsewhere.insert(6, " more").unwrap();
    assert!(
        foreign
            .connection
            .receive(protocol::update(dependent))
            .await
    );
    assert_eq!(foreign.closed().await.0, close::POLICY);

    // An update that puts NUL into the text, like one that reaches past it, is refused.
    let mut nul = Client::join(&rig).await;
    let update = nul.doc.insert(0, "a\0b").unwrap();
    assert!(nul.connection.receive(protocol::update(update)).await);
    let (code, reason) = nul.closed().await;
    assert_eq!(code, close::POLICY);
    assert!(reason.contains("NUL"), "{reason}");

    good.type_text("still fine").await;
    assert!(good.hears_update(PATIENCE).await);
    assert_eq!(stored_text(&rig).await.0, "still fine");
    assert_eq!(
        rig.counted("fermata_document_updates_refused_total{reason=\"malformed\"}"),
        3.0
    );
}

#[tokio::test]
async fn presence_is_relayed_and_cleared_but_never_stored() {
    let rig = rig(CollabSettings::default(), StoreOptions::default()).await;
    let ada = Client::join(&rig).await;
    let mut bob = Client::join(&rig).await;
    let presence = presence_message(42, 1, r#"{"user":{"name":"ada"}}"#);
    assert!(ada.connection.receive(presence.clone()).await);
    let relayed = bob.next().await.unwrap();
    assert_eq!(relayed, presence);
    ada.connection.leave().await;
    let removal = bob.next().await.unwrap();
    match protocol::decode(&removal) {
        Ok(ClientMessage::Awareness { clients, .. }) => assert_eq!(clients, [(42, 2)]),
        other => panic!("expected a removal, got {other:?}"),
    }
    assert_eq!(
        stored_text(&rig).await,
        (String::new(), 0),
        "presence reached storage"
    );
}

#[tokio::test]
async fn a_member_holds_a_bounded_share_of_a_room() {
    let settings = CollabSettings {
        max_connections_per_member: 2,
        ..CollabSettings::default()
    };
    let rig = rig(settings, StoreOptions::default()).await;
    let _first = Client::join(&rig).await;
    let _second = Client::join(&rig).await;
    let refusal = rig
        .rooms
        .join(&rig.document, &member(), false)
        .await
        .unwrap_err();
    assert_eq!(refusal.code, close::TRY_AGAIN_LATER);
    assert!(refusal.reason.contains("one person"), "{}", refusal.reason);
    let other = UserId("someone-else".to_owned());
    assert!(
        rig.rooms.join(&rig.document, &other, false).await.is_ok(),
        "another member still gets in"
    );
}

#[tokio::test]
async fn a_presence_flood_is_dropped_not_relayed_and_edits_still_flow() {
    let settings = CollabSettings {
        presence_per_second: 1,
        presence_burst: 5,
        ..CollabSettings::default()
    };
    let rig = rig(settings, StoreOptions::default()).await;
    let mut flooder = Client::join(&rig).await;
    let mut bob = Client::join(&rig).await;
    for clock in 1..=200 {
        let presence = presence_message(42, clock, r#"{"cursor":1}"#);
        assert!(flooder.connection.receive(presence).await);
    }
    flooder.type_text("still editing").await;
    let mut presence_heard = 0;
    let mut update_heard = false;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !update_heard {
        let message = tokio::time::timeout_at(deadline, bob.connection.outbound.recv())
            .await
            .expect("the edit never arrived");
        match message {
            Some(Outbound::Message(bytes)) => match protocol::decode(&bytes) {
                Ok(ClientMessage::Awareness { .. }) => presence_heard += 1,
                Ok(ClientMessage::Update(update)) => {
                    bob.doc.apply_update(&update).unwrap();
                    update_heard = true;
                }
                _ => {}
            },
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(
        (5..=7).contains(&presence_heard),
        "{presence_heard} of 200 presence messages were relayed"
    );
    assert_eq!(bob.doc.text(), "still editing");
    assert!(flooder.hears_update(PATIENCE).await);
    assert_eq!(
        rig.counted("fermata_document_updates_refused_total{reason=\"presence_rate\"}"),
        f64::from(200 - presence_heard)
    );
}

/// A presence message for one client, as y-protocols encodes it.
fn presence_message(client: u64, clock: u32, state: &str) -> Vec<u8> {
    use yrs::sync::awareness::{AwarenessUpdate, AwarenessUpdateEntry};
    use yrs::updates::encoder::Encode;
    let update = AwarenessUpdate {
        clients: [(
            yrs::block::ClientID::new(client),
            AwarenessUpdateEntry {
                clock,
                json: state.into(),
            },
        )]
        .into(),
    };
    yrs::sync::Message::Awareness(update).encode_v1()
}

#[tokio::test]
async fn without_the_writer_fence_nothing_is_acknowledged() {
    let rig = rig(CollabSettings::default(), StoreOptions::default()).await;
    let mut writer = Client::join(&rig).await;
    let mut reader = Client::join(&rig).await;
    rig.fence.set(None);
    writer.type_text("too late").await;
    let (code, _) = writer.closed().await;
    assert_eq!(code, close::RESYNC);
    assert!(!reader.hears_update(QUIET).await);
    assert_eq!(stored_text(&rig).await, (String::new(), 0));
    // With no fence at all the commit is not even tried: the room reads it as the database
    // being unavailable, as it does a store failure.
    assert_eq!(
        rig.counted("fermata_document_commits_total{outcome=\"failed\"}"),
        1.0
    );
}

/// The ways a write reaches the room: a client's batch and the program edits of the REST API.
#[derive(Debug, Clone, Copy)]
enum Write {
    ClientBatch,
    Rewrite,
    Rename,
    ProgramUpdate,
}

/// Whichever write meets the fence of a lease another process has taken over, the room ends as
/// one: its clients are told to come back later (to the new holder), nothing is stored, and the
/// room's task returns instead of serving on.
#[tokio::test]
async fn a_write_refused_by_the_fence_ends_the_room() {
    for write in [
        Write::ClientBatch,
        Write::Rewrite,
        Write::Rename,
        Write::ProgramUpdate,
    ] {
        let rig = rig(CollabSettings::default(), StoreOptions::default()).await;
        let mut writer = Client::join(&rig).await;
        let mut watcher = Client::join(&rig).await;
        assert_eq!(rig.counted("fermata_rooms_open"), 1.0);
        // A successor takes the lease over: the rooms' fence still names the old token.
        assert!(rig.store.leases().release(&rig.lease).await.unwrap());
        let successor = rig
            .store
            .leases()
            .acquire(&LeaseName::WRITER, "successor", Duration::from_secs(3600))
            .await
            .unwrap();
        assert!(matches!(successor, Acquisition::Granted(_)));
        let refused = match write {
            Write::ClientBatch => {
                writer.type_text("after the hand-over").await;
                None
            }
            Write::Rewrite => Some(
                rig.rooms
                    .rewrite(&rig.document, "after the hand-over".to_owned(), None)
                    .await
                    .map(drop)
                    .map_err(fermata_collab::EditError::from),
            ),
            Write::Rename => Some(
                rig.rooms
                    .rename(&rig.document, "After the hand-over".to_owned(), None)
                    .await
                    .map(drop),
            ),
            Write::ProgramUpdate => {
                let mut program = SourceDoc::new();
                let update = program.insert(0, "after the hand-over").unwrap();
                Some(
                    rig.rooms
                        .apply_update(&rig.document, update, None)
                        .await
                        .map(drop),
                )
            }
        };
        if let Some(refused) = refused {
            let error = refused.expect_err("a fenced write is refused");
            assert!(
                matches!(&error, fermata_collab::EditError::Store(e) if e.kind() == fermata_store::ErrorKind::Fenced),
                "{write:?}: {error:?}"
            );
        }
        for client in [&mut writer, &mut watcher] {
            let (code, _) = client.closed().await;
            assert_eq!(code, close::TRY_AGAIN_LATER, "{write:?}");
        }
        eventually_some("the room to end", || async {
            (rig.counted("fermata_rooms_open") == 0.0).then_some(())
        })
        .await;
        assert_eq!(stored_text(&rig).await, (String::new(), 0), "{write:?}");
    }
}

#[tokio::test]
async fn a_client_with_nothing_new_writes_nothing() {
    let rig = rig(CollabSettings::default(), StoreOptions::default()).await;
    let mut first = Client::join(&rig).await;
    first.type_text("hello").await;
    assert!(first.hears_update(PATIENCE).await);
    // A client that already has everything answers with an empty update on every connect.
    let second = Client::join(&rig).await;
    let empty = second.doc.diff_since(&second.doc.state_vector()).unwrap();
    assert!(second.connection.receive(protocol::sync_step2(empty)).await);
    assert!(
        !first.hears_update(QUIET).await,
        "an empty update was broadcast"
    );
    assert_eq!(
        stored_text(&rig).await,
        ("hello".to_owned(), 1),
        "an empty update was committed"
    );
}

#[tokio::test]
async fn only_a_clients_owner_clears_its_presence() {
    let rig = rig(CollabSettings::default(), StoreOptions::default()).await;
    let ada = Client::join(&rig).await;
    let mut bob = Client::join(&rig).await;
    let mallory = Client::join(&rig).await;
    let hello = presence_message(42, 1, r#"{"user":{"name":"ada"}}"#);
    assert!(ada.connection.receive(hello).await);
    let _ = bob.next().await.unwrap();
    // Mallory speaks for ada's client (y-websocket clients relay others' presence), then leaves.
    assert!(
        mallory
            .connection
            .receive(presence_message(42, 5, "null"))
            .await
    );
    let _ = bob.next().await.unwrap();
    mallory.connection.leave().await;
    let removal = protocol::awareness_removed(&[(42, 5)]);
    assert!(
        !hears(&mut bob, &removal, QUIET).await,
        "mallory's leaving cleared ada's presence"
    );
    // Ada's leaving clears it, one clock past the last one seen.
    ada.connection.leave().await;
    assert!(
        hears(&mut bob, &removal, PATIENCE).await,
        "ada's leaving did not clear her presence"
    );
}

/// Whether `client` is sent exactly `message` within `within`.
async fn hears(client: &mut Client, message: &[u8], within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while let Ok(Some(Outbound::Message(bytes))) =
        tokio::time::timeout_at(deadline, client.connection.outbound.recv()).await
    {
        if bytes == message {
            return true;
        }
    }
    false
}

#[tokio::test]
async fn no_room_opens_without_the_writer_lease() {
    let rig = rig(CollabSettings::default(), StoreOptions::default()).await;
    rig.fence.set(None);
    let refusal = rig
        .rooms
        .join(&rig.document, &member(), false)
        .await
        .unwrap_err();
    assert_eq!(refusal.code, close::TRY_AGAIN_LATER);
    let error = rig
        .rooms
        .rewrite(&rig.document, "text".to_owned(), None)
        .await
        .unwrap_err();
    assert!(error.is_retryable(), "{error}");
}

#[tokio::test]
async fn a_read_only_connection_syncs_and_its_edits_go_nowhere() {
    let rig = rig(CollabSettings::default(), StoreOptions::default()).await;
    let mut writer = Client::join(&rig).await;
    writer.type_text("shared ").await;
    assert!(
        writer.hears_update(PATIENCE).await,
        "its own edit, once saved"
    );
    let mut viewer = Client::join_as(&rig, true).await;
    assert_eq!(
        viewer.doc.text(),
        "shared ",
        "a read-only connection still syncs"
    );
    // The viewer types: told once that it is read-only, and nobody hears of it.
    viewer.type_text("from the viewer").await;
    viewer.type_text(" and more").await;
    let notice = viewer.next().await.expect("a notice");
    assert_eq!(notice, protocol::read_only_notice());
    assert!(
        !writer.hears_update(QUIET).await,
        "a read-only edit was relayed"
    );
    assert_eq!(stored_text(&rig).await, ("shared ".to_owned(), 1));
    // Presence still flows from a read-only connection.
    let presence = protocol::awareness_removed(&[(77, 1)]);
    assert!(viewer.connection.receive(presence.clone()).await);
    let heard = loop {
        let message = writer.next().await.expect("presence");
        if matches!(
            protocol::decode(&message),
            Ok(ClientMessage::Awareness { .. })
        ) {
            break message;
        }
    };
    assert_eq!(heard, presence);
    // Made writable, its next edit is kept; made read-only again, it is dropped again.
    assert!(viewer.connection.set_read_only(false).await);
    let update = viewer
        .doc
        .diff_since(&SourceDoc::new().state_vector())
        .unwrap();
    assert!(viewer.connection.receive(protocol::update(update)).await);
    assert!(writer.hears_update(PATIENCE).await);
    assert!(writer.doc.text().contains("from the viewer"));
    assert!(viewer.connection.set_read_only(true).await);
    viewer.type_text(" dropped").await;
    assert!(!writer.hears_update(QUIET).await);
    assert!(!stored_text(&rig).await.0.contains("dropped"));
    assert_eq!(
        rig.counted("fermata_document_updates_refused_total{reason=\"read_only\"}"),
        3.0
    );
}

#[tokio::test]
async fn a_program_update_merges_with_live_edits_and_is_broadcast() {
    let rig = rig(CollabSettings::default(), StoreOptions::default()).await;
    let mut client = Client::join(&rig).await;
    client.type_text("live ").await;
    assert!(
        client.hears_update(PATIENCE).await,
        "its own edit, once saved"
    );
    // The program built its update on an empty document: it still merges, reverting nothing.
    let mut program = SourceDoc::new();
    let update = program.insert(0, "program ").unwrap();
    let committed = rig
        .rooms
        .apply_update(&rig.document, update.clone(), None)
        .await
        .unwrap();
    assert!(!committed.repeated);
    assert!(client.hears_update(PATIENCE).await);
    let text = client.doc.text();
    assert!(
        text.contains("live ") && text.contains("program "),
        "{text}"
    );
    assert_eq!(stored_text(&rig).await.0, text);
    // The same update again changes nothing; an update with missing predecessors is refused.
    let again = rig
        .rooms
        .apply_update(&rig.document, update, None)
        .await
        .unwrap();
    assert!(again.repeated);
    let mut orphan = SourceDoc::new();
    orphan.insert(0, "a").unwrap();
    let later = orphan.insert(1, "b").unwrap();
    let refused = rig
        .rooms
        .apply_update(&rig.document, later, None)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, fermata_collab::EditError::Refused(_)),
        "{refused:?}"
    );
    assert_eq!(stored_text(&rig).await.0, text);
}

#[tokio::test]
async fn a_rewrite_at_a_stale_revision_changes_nothing() {
    let rig = rig(CollabSettings::default(), StoreOptions::default()).await;
    let mut client = Client::join(&rig).await;
    client.type_text("typed").await;
    assert!(
        client.hears_update(PATIENCE).await,
        "its own edit, once saved"
    );
    let (_, revision) = eventually_some("the edit to be saved", || async {
        let (text, revision) = stored_text(&rig).await;
        (text == "typed").then_some((text, revision))
    })
    .await;
    let refused = rig
        .rooms
        .rewrite_at(
            &rig.document,
            "replaced".to_owned(),
            None,
            Some(revision - 1),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(refused, fermata_collab::EditError::Stale { current } if current == revision),
        "{refused:?}"
    );
    let refused = rig
        .rooms
        .rename(&rig.document, "Renamed".to_owned(), Some(revision - 1))
        .await
        .unwrap_err();
    assert!(matches!(refused, fermata_collab::EditError::Stale { .. }));
    assert_eq!(stored_text(&rig).await, ("typed".to_owned(), revision));
    assert_eq!(
        rig.counted("fermata_document_updates_refused_total{reason=\"stale\"}"),
        2.0
    );
    rig.rooms
        .rewrite_at(&rig.document, "replaced".to_owned(), None, Some(revision))
        .await
        .unwrap();
    assert!(client.hears_update(PATIENCE).await);
    assert_eq!(client.doc.text(), "replaced");
}

/// Storage a revision ahead of the room (a commit whose answer was lost, landing after the room
/// reloaded) does not refuse a program that named no revision: its edit is made on the document
/// reloaded, once.
#[tokio::test]
async fn a_program_edit_catches_up_with_storage_that_moved_on_behind_the_room() {
    let rig = rig(CollabSettings::default(), StoreOptions::default()).await;
    rig.rooms
        .rewrite(&rig.document, "first\n".to_owned(), None)
        .await
        .unwrap();
    let (_, revision) = stored_text(&rig).await;
    let behind = fermata_store::Commit {
        channel: rig.document.clone(),
        operation: fermata_store::OperationId::new("landed-late").unwrap(),
        expected_revision: revision,
        update: None,
        sidecar: None,
        events: Vec::new(),
        title: Some("Renamed behind the room".to_owned()),
        text: None,
    };
    rig.store
        .collaboration()
        .commit(&rig.fence.current().unwrap(), &behind)
        .await
        .unwrap();
    rig.rooms
        .rewrite(&rig.document, "second\n".to_owned(), None)
        .await
        .expect("the rewrite is made on the reloaded document");
    assert_eq!(
        stored_text(&rig).await,
        ("second\n".to_owned(), revision + 2)
    );
    rig.rooms
        .rename(&rig.document, "Renamed again".to_owned(), None)
        .await
        .unwrap();
}

#[tokio::test]
async fn the_slots_of_closed_rooms_are_dropped() {
    let settings = CollabSettings {
        idle_close: Duration::from_millis(50),
        ..CollabSettings::default()
    };
    let rig = rig(settings, StoreOptions::default()).await;
    // Each document's room opens for one client, which leaves; the room then closes when idle.
    for n in 0..150 {
        let id = new_document(&rig, n).await;
        let connection = rig.rooms.join(&id, &member(), false).await.unwrap();
        connection.leave().await;
    }
    eventually_some("the idle rooms to close", || async {
        (rig.counted("fermata_rooms_open") == 0.0).then_some(())
    })
    .await;
    // Rooms opening from here on sweep the closed rooms' slots away once the map reaches its next
    // sweep, at most twice what the last sweep kept (at most 256 here, however many rooms were
    // still open when the sweeps above ran): then only the open rooms keep a slot.
    let mut open = Vec::new();
    for n in 150..300 {
        let id = new_document(&rig, n).await;
        open.push(rig.rooms.join(&id, &member(), false).await.unwrap());
        if rig.rooms.slots() == open.len() {
            return;
        }
    }
    panic!(
        "{} slots kept for {} open rooms after {} opened",
        rig.rooms.slots(),
        open.len(),
        150 + open.len()
    );
}

/// A new document of the rig's repository, titled after `n`.
async fn new_document(rig: &Rig, n: usize) -> ChannelId {
    let fence = rig.fence.current().unwrap();
    create_document(rig.store.collaboration(), &fence, &format!("Room {n}"))
        .await
        .id
}
