//! The rooms of this process: one actor per open document, opened by recovery on the first join
//! (or the first program write) and gone after its idle delay. When the writer lease is lost or
//! the server stops, every room closes its clients with a retry-later reason and no new room
//! opens; a room that has not stopped by the end of the stop's drain is abandoned where it is.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use fermata_metrics::Metrics;
use fermata_store::{ChannelId, Committed, Shard, Storage, StoreError, UserId};
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::PollSender;

use crate::document_fences::DocumentFences;
use crate::outbound::{OutboundReceiver, outbound_queue};
use crate::room::{ConnId, EditError, Inbound, ROOM_CLOSING, Refusal, Room, close, read_refusal};
use crate::search_index::Unindexed;
use crate::settings::CollabSettings;

/// A document's place in the manager: its room's inbox while the room is open.
type Slot = Arc<Mutex<Option<mpsc::Sender<Inbound>>>>;

/// The smallest map size at which closed rooms' slots are swept.
const MIN_SWEEP: usize = 64;

/// Every open room.
#[derive(Debug, Clone)]
pub struct RoomManager {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    storage: Arc<dyn Storage>,
    /// The fence of each document's room: one for all, or its shard's.
    fences: DocumentFences,
    settings: CollabSettings,
    /// Where rooms record what they do: open rooms and connections, commits, checkpoints,
    /// recoveries and refused updates.
    metrics: Arc<Metrics>,
    /// One slot per document that was opened: the inbox of its room while open. A closed room's
    /// inbox refuses sends, which tells a joiner to open a new room. The map's lock is held only
    /// to find a slot; opening (recovering) a document holds its slot's lock alone, so a slow
    /// recovery never holds up other documents.
    rooms: std::sync::Mutex<HashMap<ChannelId, Slot>>,
    /// The map's size at which `slot` next drops the slots of closed rooms: twice what the
    /// last sweep kept, so the map stays within twice the open rooms at an amortized constant
    /// cost per lookup.
    sweep_at: AtomicUsize,
    /// Set once rooms stop opening: the code and reason new clients are closed with.
    closed: std::sync::Mutex<Option<(u16, String)>>,
    /// The tasks of every open room and its history's recording, so a stop that runs out of time
    /// can abandon them.
    tasks: std::sync::Mutex<JoinSet<()>>,
    next_conn: AtomicU64,
    /// The documents whose rooms hold live edits not yet indexed for search.
    unindexed: Unindexed,
    /// The shard of each document whose room opened here, in a member of a cluster, with the
    /// signal its history recording ends with: what a hand-over closes and waits for. An entry
    /// of a room that closed since goes with its shard's hand-over.
    shards: std::sync::Mutex<HashMap<ChannelId, (Shard, oneshot::Receiver<()>)>>,
}

/// A client's place in a room.
#[derive(Debug)]
pub struct Connection {
    /// The way in: what the client sends the room.
    pub inbox: RoomInbox,
    /// What the room sends this client, in order.
    pub outbound: OutboundReceiver,
}

/// A connection's way in to its room, apart from its outbound queue so that a connection can
/// wait for room in the inbox while it goes on sending the client what the room answered.
#[derive(Debug)]
pub struct RoomInbox {
    id: ConnId,
    /// The room's inbox, where a wait for room keeps its place in the queue when it is dropped
    /// and taken up again.
    room: PollSender<Inbound>,
}

impl RoomInbox {
    /// Hands the client message in `waiting` to the room once its inbox has room for it, and
    /// takes it from `waiting`; false when the room has closed. Until then `waiting` keeps the
    /// message, and a wait that is dropped loses nothing, nor its place in the inbox's queue, so
    /// a connection can wait for this and for its outbound queue at once: a client whose
    /// messages come faster than the room takes them is slowed down (its frames are not read
    /// meanwhile) but still sent what the room answered.
    pub async fn deliver(&mut self, waiting: &mut Option<Vec<u8>>) -> bool {
        if std::future::poll_fn(|cx| self.room.poll_reserve(cx))
            .await
            .is_err()
        {
            return false;
        }
        match waiting.take() {
            Some(bytes) => self
                .room
                .send_item(Inbound::Message {
                    conn: self.id,
                    bytes,
                })
                .is_ok(),
            None => true,
        }
    }

    /// Sends the room `message`, waiting for room in its inbox; false when it has closed.
    async fn send(&self, message: Inbound) -> bool {
        match self.room.get_ref() {
            Some(room) => room.send(message).await.is_ok(),
            None => false,
        }
    }
}

impl Connection {
    /// Hands a client message to the room. False when the room has closed.
    pub async fn receive(&self, bytes: Vec<u8>) -> bool {
        let conn = self.inbox.id;
        self.inbox.send(Inbound::Message { conn, bytes }).await
    }

    /// Makes the connection read-only (its updates dropped from now on) or writable again, when
    /// its access changed while it was open.
    pub async fn set_read_only(&self, read_only: bool) -> bool {
        let conn = self.inbox.id;
        self.inbox.send(Inbound::Access { conn, read_only }).await
    }

    /// Leaves the room (its presence is cleared for the others).
    pub async fn leave(self) {
        let conn = self.inbox.id;
        self.inbox.send(Inbound::Leave { conn }).await;
    }
}

impl RoomManager {
    pub fn new(
        storage: Arc<dyn Storage>,
        fences: DocumentFences,
        settings: CollabSettings,
        metrics: Arc<Metrics>,
    ) -> Self {
        metrics.room_limits(
            settings.max_clients_per_room,
            settings.max_connections_per_member,
        );
        RoomManager {
            inner: Arc::new(Inner {
                storage,
                fences,
                settings,
                metrics,
                rooms: std::sync::Mutex::new(HashMap::new()),
                sweep_at: AtomicUsize::new(MIN_SWEEP),
                closed: std::sync::Mutex::new(None),
                tasks: std::sync::Mutex::new(JoinSet::new()),
                next_conn: AtomicU64::new(1),
                unindexed: Unindexed::default(),
                shards: std::sync::Mutex::default(),
            }),
        }
    }

    pub fn settings(&self) -> CollabSettings {
        self.inner.settings
    }

    /// The fences documents are written under.
    pub fn fences(&self) -> &DocumentFences {
        &self.inner.fences
    }

    /// How many documents the manager keeps a slot for: those with an open room, and at most
    /// about as many again whose room closed since the last sweep.
    pub fn slots(&self) -> usize {
        self.inner
            .rooms
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    fn closed(&self) -> Option<Refusal> {
        self.inner
            .closed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .map(|(code, reason)| Refusal {
                code,
                reason,
                kind: fermata_store::ErrorKind::Unavailable,
            })
    }

    fn slot(&self, id: &ChannelId) -> Slot {
        let mut rooms = self
            .inner
            .rooms
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if rooms.len() >= self.inner.sweep_at.load(Ordering::Relaxed) {
            // A slot nobody else holds, not locked by an opening room, whose room is gone. Anyone
            // who took a slot took it under this lock and still holds its `Arc`, so no slot in
            // use is dropped.
            rooms.retain(|_, slot| {
                Arc::strong_count(slot) > 1
                    || slot.try_lock().map_or(true, |open| {
                        open.as_ref().is_some_and(|inbox| !inbox.is_closed())
                    })
            });
            let next = (rooms.len() * 2).max(MIN_SWEEP);
            self.inner.sweep_at.store(next, Ordering::Relaxed);
        }
        Arc::clone(rooms.entry(id.clone()).or_default())
    }

    /// The inbox of the document's room, opening the room when it is not open. No room opens
    /// while this process does not hold the writer lease: it would serve a document another
    /// process may still be changing.
    async fn room(&self, id: &ChannelId) -> Result<mpsc::Sender<Inbound>, Refusal> {
        if let Some(refusal) = self.closed() {
            return Err(refusal);
        }
        let (fence, shard) = self
            .inner
            .fences
            .for_document(id)
            .await
            .map_err(|error| read_refusal(&self.inner.metrics, id, &error))?;
        if fence.current().is_err() {
            return Err(Refusal {
                code: close::TRY_AGAIN_LATER,
                reason: "this server is not serving this document now; reconnect shortly"
                    .to_owned(),
                kind: fermata_store::ErrorKind::Unavailable,
            });
        }
        let slot = self.slot(id);
        let mut open = slot.lock().await;
        if let Some(inbox) = open.as_ref().filter(|inbox| !inbox.is_closed()) {
            return Ok(inbox.clone());
        }
        let (room, recording) = Room::open(
            Arc::clone(&self.inner.storage),
            fence,
            self.inner.settings,
            Arc::clone(&self.inner.metrics),
            self.inner.unindexed.clone(),
            id,
        )
        .await?;
        let (inbox, receiver) = mpsc::channel(1024);
        let mut tasks = self
            .inner
            .tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Rooms that closed by themselves (idle) are forgotten here, so the set stays small.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(room.run(receiver));
        // The signal is sent when the recording ends, or dropped when it is aborted.
        let (recorded, recording_ended) = oneshot::channel();
        tasks.spawn(async move {
            recording.await;
            let _ = recorded.send(());
        });
        drop(tasks);
        if let Some(shard) = shard {
            self.inner
                .shards
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(id.clone(), (shard, recording_ended));
        }
        *open = Some(inbox.clone());
        Ok(inbox)
    }

    /// Joins a client to a document's room, editing as `member` (whom history credits), or only
    /// reading and sending presence when `read_only`.
    pub async fn join(
        &self,
        id: &ChannelId,
        member: &UserId,
        read_only: bool,
    ) -> Result<Connection, Refusal> {
        // A room that closed between the lookup and the join is replaced by a new one, once.
        for _ in 0..2 {
            let inbox = self.room(id).await?;
            let conn = self.inner.next_conn.fetch_add(1, Ordering::Relaxed);
            // Two of the largest messages a client may send: what a slow reader may leave
            // waiting, besides the one it is being written.
            let (outbound_sender, outbound) =
                outbound_queue(2 * self.inner.settings.max_message_bytes);
            let (reply, answer) = oneshot::channel();
            let join = Inbound::Join {
                conn,
                member: member.clone(),
                read_only,
                outbound: outbound_sender,
                reply,
            };
            if inbox.send(join).await.is_err() {
                continue;
            }
            match answer.await {
                Ok(Ok(())) => {
                    return Ok(Connection {
                        inbox: RoomInbox {
                            id: conn,
                            room: PollSender::new(inbox),
                        },
                        outbound,
                    });
                }
                // The room was closing: a new one opens on the next turn.
                Ok(Err(refusal)) if refusal.reason == ROOM_CLOSING => {}
                Ok(Err(refusal)) => return Err(refusal),
                // The room closed before it answered: open a new one.
                Err(_) => {}
            }
        }
        Err(Refusal {
            code: close::TRY_AGAIN_LATER,
            reason: "the document's room is closing; reconnect".to_owned(),
            kind: fermata_store::ErrorKind::Unavailable,
        })
    }

    async fn ask<T>(
        &self,
        id: &ChannelId,
        request: impl FnOnce(oneshot::Sender<T>) -> Inbound,
    ) -> Result<T, StoreError> {
        let refused = |refusal: Refusal| StoreError::new(refusal.kind, refusal.reason);
        let inbox = self.room(id).await.map_err(refused)?;
        let (reply, answer) = oneshot::channel();
        // Dropped on purpose: a closed channel says only that the room's task ended, as the
        // message does.
        inbox
            .send(request(reply))
            .await
            .map_err(|_| StoreError::unavailable("the document's room closed; try again"))?;
        answer
            .await
            .map_err(|_| StoreError::unavailable("the document's room closed; try again"))
    }

    /// Replaces a document's whole text through its room, so connected clients see it only
    /// after it is saved. History credits `author` (`None` for a server edit).
    pub async fn rewrite(
        &self,
        id: &ChannelId,
        text: String,
        author: Option<UserId>,
    ) -> Result<Committed, StoreError> {
        self.rewrite_at(id, text, author, None)
            .await
            .map_err(into_store_error)
    }

    /// [`RoomManager::rewrite`], refused with [`EditError::Stale`] unless the document is still
    /// at `expected` (when given) as the room applies it.
    pub async fn rewrite_at(
        &self,
        id: &ChannelId,
        text: String,
        author: Option<UserId>,
        expected: Option<i64>,
    ) -> Result<Committed, EditError> {
        self.ask(id, |reply| Inbound::Rewrite {
            text,
            author,
            expected,
            reply,
        })
        .await?
    }

    /// Renames a document through its room (the title and slug change in one fenced commit),
    /// refused with [`EditError::Stale`] unless it is still at `expected` (when given).
    pub async fn rename(
        &self,
        id: &ChannelId,
        title: String,
        expected: Option<i64>,
    ) -> Result<Committed, EditError> {
        self.ask(id, |reply| Inbound::Rename {
            title,
            expected,
            reply,
        })
        .await?
    }

    /// Merges a program's Yjs update into a document the way a client's is merged: validated,
    /// committed, then broadcast. History credits `author`.
    pub async fn apply_update(
        &self,
        id: &ChannelId,
        update: Vec<u8>,
        author: Option<UserId>,
    ) -> Result<Committed, EditError> {
        self.ask(id, |reply| Inbound::Update {
            update,
            author,
            reply,
        })
        .await?
    }

    /// An open document as one Yjs update (the difference from `vector`, if given) with its
    /// revision, if its room is open.
    pub async fn state_open(
        &self,
        id: &ChannelId,
        vector: Option<Vec<u8>>,
    ) -> Option<Result<(Vec<u8>, i64), fermata_docs::DocError>> {
        let inbox = self.open_inbox(id).await?;
        let (reply, answer) = oneshot::channel();
        inbox.send(Inbound::State { vector, reply }).await.ok()?;
        answer.await.ok()
    }

    /// The inbox of the document's room if it is open, without opening it.
    async fn open_inbox(&self, id: &ChannelId) -> Option<mpsc::Sender<Inbound>> {
        let slot = self
            .inner
            .rooms
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .cloned()?;
        let inbox = slot.lock().await.clone();
        inbox.filter(|inbox| !inbox.is_closed())
    }

    /// The current text and revision of an open document, if its room is open.
    pub async fn read_open(&self, id: &ChannelId) -> Option<(String, i64)> {
        let inbox = self.open_inbox(id).await?;
        let (reply, answer) = oneshot::channel();
        inbox.send(Inbound::Read { reply }).await.ok()?;
        answer.await.ok()
    }

    /// Has every open room with live edits not yet indexed write them to the search index, so a
    /// search finds what was saved a moment ago. A room busy for longer than `patience` (a commit
    /// waiting on the database) is not waited for: the search then sees its text as indexed last.
    pub async fn index_open_texts(&self, patience: std::time::Duration) {
        let documents = self.inner.unindexed.documents();
        let asks = documents.iter().map(|id| async move {
            let inbox = self.open_inbox(id).await?;
            let (done, indexed) = oneshot::channel();
            inbox.send(Inbound::Index { done }).await.ok()?;
            indexed.await.ok()
        });
        let _ = tokio::time::timeout(patience, futures::future::join_all(asks)).await;
    }

    /// Closes one document's room (after it was archived or deleted) and waits for it: its
    /// clients are closed with [`close::REVOKED`], as their access to it ended.
    pub async fn close(&self, id: &ChannelId, reason: &str) {
        if let Some(inbox) = self.open_inbox(id).await {
            shut(inbox, close::REVOKED, reason).await;
        }
    }

    /// Closes the rooms of one shard's documents, which this process is about to hand over, and
    /// waits for them: each checkpoints under the shard's fence, which is still held, and closes
    /// its clients with a retry-later reason, so they reconnect to the shard's next holder; then
    /// its history recording writes the burst the room settled as it stopped, under that fence
    /// too. Each room is waited for at most twice [`SHUTDOWN_WAIT`].
    pub async fn close_shard(&self, shard: Shard, reason: &str) {
        let rooms: Vec<(ChannelId, oneshot::Receiver<()>)> = {
            let mut shards = self
                .inner
                .shards
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let ids: Vec<ChannelId> = shards
                .iter()
                .filter(|(_, (of, _))| *of == shard)
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| shards.remove(&id).map(|(_, ended)| (id, ended)))
                .collect()
        };
        let closing = rooms.into_iter().map(|(id, recording_ended)| async move {
            if let Some(inbox) = self.open_inbox(&id).await {
                shut(inbox, close::TRY_AGAIN_LATER, reason).await;
            }
            // Sent or dropped, the recording is over; a room stuck behind the database keeps
            // its recording waiting, and the hand-over goes on without it.
            let _ = tokio::time::timeout(SHUTDOWN_WAIT, recording_ended).await;
        });
        futures::future::join_all(closing).await;
    }

    /// Stops every room and refuses new ones: on a lost lease or a stop.
    pub async fn shutdown(&self, reason: &str) {
        *self
            .inner
            .closed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((close::TRY_AGAIN_LATER, reason.to_owned()));
        let slots: Vec<_> = self
            .inner
            .rooms
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .drain()
            .map(|(_, slot)| slot)
            .collect();
        // Every room stops at once, under one bound, so many rooms cannot outlast the stop.
        let stops = slots.into_iter().map(|slot| async move {
            let inbox = slot.lock().await.take();
            if let Some(inbox) = inbox {
                shut(inbox, close::TRY_AGAIN_LATER, reason).await;
            }
        });
        futures::future::join_all(stops).await;
    }

    /// Waits, after [`Self::shutdown`], until every room's history recording has written what
    /// its room left: each ends once its room is gone and its queue is recorded, so the burst a
    /// room settled as it stopped is written under the fence like any other. The tasks are taken
    /// out of the set, so a stop that stops waiting drops them, which aborts them, as
    /// [`Self::abandon`] would.
    pub async fn recordings_written(&self) {
        let mut tasks = std::mem::take(
            &mut *self
                .inner
                .tasks
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        while tasks.join_next().await.is_some() {}
    }

    /// Ends every room task where it is, for a stop whose drain ran out of time: a room stuck
    /// behind the database neither checkpoints nor closes its clients, and a commit in flight is
    /// dropped: its transaction rolls back, or it committed and was never broadcast, and in
    /// either case no client was told it was kept. Its clients' connections end with the
    /// process.
    pub fn abandon(&self) {
        self.inner
            .tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .abort_all();
    }
}

/// An edit refusal where the caller did not ask for a revision check: only the store's.
fn into_store_error(error: EditError) -> StoreError {
    match error {
        EditError::Store(error) => error,
        other => StoreError::invalid(other.to_string()),
    }
}

/// How long a stopping room may take to checkpoint and close its clients.
const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Asks a room to stop and waits (bounded) until it has.
async fn shut(inbox: mpsc::Sender<Inbound>, code: u16, reason: &str) {
    let (done, finished) = oneshot::channel();
    let stop = Inbound::Shutdown {
        code,
        reason: reason.to_owned(),
        done,
    };
    if inbox.send(stop).await.is_ok() {
        let _ = tokio::time::timeout(SHUTDOWN_WAIT, finished).await;
    }
}
