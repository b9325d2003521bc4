//! One open document's room: an actor task that owns the recovered document and its clients.
//!
//! Persistence before publication: a client update is decoded, applied to the room's document
//! (which refuses anything undecodable or with missing predecessors), batched with the updates
//! that queued while the previous commit ran (and those that arrive within the batch window, when
//! one is set), committed as one fenced, revision-checked commit under a
//! fresh operation ID, and only then broadcast. If the commit fails the room reloads its document
//! from storage, so nothing unsaved is ever served, and the clients whose updates were lost are
//! told to resync. Presence is relayed and never stored. Once a commit that changed the text is
//! acknowledged, the room tells its history recorder, which takes the text when the member's
//! burst of changes ends (see `history.rs`).
//!
//! A read-only connection (a viewer's, or a read client token's) syncs and sends presence, but
//! its updates with content are dropped before they are applied: never stored, never relayed.
//! The first one it sends is answered with the y-protocols "permission denied" message, which the
//! stock y-websocket client reports without closing, so the client learns once why its edits
//! stay local and does not reconnect in a loop re-sending them. A program's update (`POST
//! .../updates`) goes through the same validation, commit and broadcast as a client's.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use fermata_docs::{DocError, OpenDocument, Recovering};
use fermata_metrics::{CommitOutcome, Held, Metrics, StorageCause, UpdateRefusal};
use fermata_store::{
    ChannelId, Commit, Committed, ErrorChain, ErrorKind, OperationId, Storage, StoreError,
    StoreResultExt, UserId,
};
use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, timeout_at};

use crate::fairness::{self, PresenceBudget};
use crate::fence::WriterFence;
use crate::gather;
use crate::history::Recorder;
use crate::outbound::OutboundSender;
use crate::protocol::{self, ClientMessage};
use crate::search_index::{PendingIndex, Unindexed};
use crate::settings::CollabSettings;
use crate::storage_outage;

/// A connection's number within the process.
pub(crate) type ConnId = u64;

/// The WebSocket close codes a room uses.
pub mod close {
    /// The client sent something the protocol or the document refuses.
    pub const POLICY: u16 = 1008;
    /// A message, or the document it would make, is too large.
    pub const TOO_BIG: u16 = 1009;
    /// The server failed.
    pub const INTERNAL: u16 = 1011;
    /// Come back later: the room is full, or the server is handing over.
    pub const TRY_AGAIN_LATER: u16 = 1013;
    /// The client's last updates were not saved: reconnect and sync again.
    pub const RESYNC: u16 = 4001;
    /// The connection's access ended: its credential was revoked or expired, or it lost its
    /// membership. A reconnect is refused unless access comes back.
    pub const REVOKED: u16 = 4003;
}

/// What a room sends a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outbound {
    Message(Vec<u8>),
    Close { code: u16, reason: String },
}

/// What a room's inbox takes.
#[derive(Debug)]
pub(crate) enum Inbound {
    Join {
        conn: ConnId,
        /// The authenticated member the connection edits as.
        member: UserId,
        /// Whether its updates are dropped (a viewer's or a read client token's connection).
        read_only: bool,
        outbound: OutboundSender,
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
    /// The connection's access changed while it was open.
    Access {
        conn: ConnId,
        read_only: bool,
    },
    Message {
        conn: ConnId,
        bytes: Vec<u8>,
    },
    Leave {
        conn: ConnId,
    },
    Rewrite {
        text: String,
        /// Who history credits: the calling user, or no one for a server edit.
        author: Option<UserId>,
        /// The revision the caller read (`If-Match`); the rewrite is refused at any other.
        expected: Option<i64>,
        reply: oneshot::Sender<Result<Committed, EditError>>,
    },
    Rename {
        title: String,
        expected: Option<i64>,
        reply: oneshot::Sender<Result<Committed, EditError>>,
    },
    /// A program's Yjs update, merged like a client's.
    Update {
        update: Vec<u8>,
        author: Option<UserId>,
        reply: oneshot::Sender<Result<Committed, EditError>>,
    },
    Read {
        reply: oneshot::Sender<(String, i64)>,
    },
    /// The document as one update (the difference from a state vector, if given) and its revision.
    State {
        vector: Option<Vec<u8>>,
        reply: oneshot::Sender<Result<(Vec<u8>, i64), DocError>>,
    },
    /// Index the document's text for search now, if a commit left it behind.
    Index {
        done: oneshot::Sender<()>,
    },
    Shutdown {
        code: u16,
        reason: String,
        /// Answered once the room has checkpointed and closed its clients.
        done: oneshot::Sender<()>,
    },
}

/// Why a program's edit was refused.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// The document moved on from the revision the caller read (`If-Match`); nothing changed.
    #[error("the document is at revision {current}, not the revision given in If-Match")]
    Stale { current: i64 },
    /// The Yjs update does not decode or does not fit the document; nothing changed.
    #[error("the update was refused: {0}")]
    Refused(DocError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl EditError {
    fn is_fenced(&self) -> bool {
        matches!(self, EditError::Store(e) if e.kind() == ErrorKind::Fenced)
    }
}

/// Why a client cannot join a room: the close code and reason for a WebSocket client, and the
/// error kind for a program's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: u16,
    pub reason: String,
    pub kind: ErrorKind,
}

/// The largest presence message a client may send.
const MAX_PRESENCE_BYTES: usize = 64 * 1024;
/// The most presence clients one connection may speak for.
const MAX_PRESENCE_CLIENTS: usize = 8;

/// The reason a closing room gives a join, which then goes to a new room.
pub(crate) const ROOM_CLOSING: &str = "the document's room is closing";

pub(crate) fn closing() -> Refusal {
    Refusal {
        code: close::TRY_AGAIN_LATER,
        reason: ROOM_CLOSING.to_owned(),
        kind: ErrorKind::Unavailable,
    }
}

/// How many times a commit is retried after a transient failure, under the same operation ID.
const COMMIT_ATTEMPTS: u32 = 3;

/// A failed commit attempt that answered within this long is worth another: a pooled connection
/// a database restart ended, a deadlock, a serialization failure. One that took longer waited for
/// a database that did not answer (the pool tried to connect until its deadline); retrying it
/// would only keep the room's clients from hearing that nothing was saved.
const QUICK_FAILURE: Duration = Duration::from_millis(500);

struct Conn {
    outbound: OutboundSender,
    /// Whom history credits for this connection's edits.
    member: UserId,
    /// Its updates are dropped: a viewer's or a read client token's connection.
    read_only: bool,
    /// Whether it was told, once, that its edits are not saved.
    told_read_only: bool,
    /// The client's last presence message, for clients who join later.
    presence: Option<Vec<u8>>,
    /// How much presence the client may still send (see `fairness`).
    presence_budget: PresenceBudget,
    /// When its last update was taken into a batch, to tell whether it is typing (see
    /// `gather`).
    last_update: Option<Instant>,
    /// Its place in `fermata_room_connections`, given back when it leaves.
    _joined: Held,
}

/// Whether a room serves on after what it just handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
enum Flow {
    Continue,
    /// The room has ended (its lease is lost, its document could not be reloaded, or it was shut
    /// down): its clients were closed, and its task returns.
    Stop,
}

pub(crate) struct Room {
    /// Set once the room can no longer serve (its document could not be reloaded after a failed
    /// commit, or the lease was lost): its clients were closed. A program's edit answers its
    /// caller with the edit's own result, so the room reads its [`Flow`] from here afterwards.
    ended: bool,
    id: ChannelId,
    doc: OpenDocument,
    storage: Arc<dyn Storage>,
    fence: WriterFence,
    settings: CollabSettings,
    metrics: Arc<Metrics>,
    /// Its place in `fermata_rooms_open`, given back when the room's task ends.
    _open: Held,
    conns: HashMap<ConnId, Conn>,
    commits_since_checkpoint: usize,
    bytes_since_checkpoint: usize,
    /// An upper bound of the encoded state's size: exact at load, plus every committed update.
    size_estimate: usize,
    /// Each presence client's owner (the first connection that spoke for it) and last clock, so
    /// a leaving connection clears only its own clients' presence.
    presence_owners: HashMap<u64, (ConnId, u32)>,
    /// The state vector of what the clients have been sent (everything committed and broadcast),
    /// so a reload sends them what storage holds beyond it.
    published: Vec<u8>,
    history: Recorder,
    /// The live edits committed but not yet indexed for search (see `search_index.rs`).
    unindexed: PendingIndex,
    /// How long the last commit took, for how long a batch waits for its writers (see `gather`).
    last_commit: Duration,
}

impl Room {
    /// Opens a room by recovering its document; also gives its history's recording, to run as a
    /// task beside the room's. An archived document is not opened for editing.
    pub(crate) async fn open(
        storage: Arc<dyn Storage>,
        fence: WriterFence,
        settings: CollabSettings,
        metrics: Arc<Metrics>,
        unindexed: Unindexed,
        id: &ChannelId,
    ) -> Result<(Room, BoxFuture<'static, ()>), Refusal> {
        let doc = load(&*storage, &metrics, id).await?;
        let tail = (doc.stored.tail_updates, doc.stored.tail_bytes);
        let (history, recording) =
            Recorder::start(Arc::clone(&storage), fence.clone(), id.clone(), &doc);
        let room = Room {
            ended: false,
            history,
            unindexed: PendingIndex::new(id.clone(), unindexed),
            id: id.clone(),
            size_estimate: doc.stored.size_estimate(),
            presence_owners: HashMap::new(),
            published: doc.doc.state_vector(),
            doc,
            storage,
            fence,
            settings,
            _open: metrics.room_opened(),
            metrics,
            conns: HashMap::new(),
            // The journal after the checkpoint counts towards the next: a document opened with a
            // long one (after a crash) is checkpointed as soon as the policy says, or on close.
            commits_since_checkpoint: tail.0,
            bytes_since_checkpoint: tail.1,
            last_commit: Duration::ZERO,
        };
        Ok((room, recording))
    }

    /// Serves the inbox until the room closes: idle, shut down, or its lease lost.
    pub(crate) async fn run(mut self, mut inbox: mpsc::Receiver<Inbound>) {
        loop {
            // An idle room closes: no message within the idle delay reads as the end.
            let idle_until = self
                .conns
                .is_empty()
                .then(|| Instant::now() + self.settings.idle_close);
            let burst_ends = self.history.deadline();
            let index_due = self.unindexed.deadline();
            let deadline = [idle_until, burst_ends, index_due]
                .into_iter()
                .flatten()
                .min();
            let next = match deadline {
                Some(deadline) => match timeout_at(deadline, inbox.recv()).await {
                    Ok(next) => next,
                    Err(_) if Some(deadline) == burst_ends => {
                        self.history.settle(&self.doc);
                        continue;
                    }
                    Err(_) if Some(deadline) == index_due => {
                        if self.index_text().await == Flow::Stop {
                            self.history.settle(&self.doc);
                            return;
                        }
                        continue;
                    }
                    Err(_) => None,
                },
                None => inbox.recv().await,
            };
            let Some(message) = next else {
                self.close_idle(&mut inbox).await;
                self.history.settle(&self.doc);
                return;
            };
            if self.handle(message, &mut inbox).await == Flow::Stop {
                self.history.settle(&self.doc);
                return;
            }
        }
    }

    /// Stops taking messages, answers what was already queued (a join is sent to a new room),
    /// indexes what it has not, and takes the final checkpoint.
    async fn close_idle(&mut self, inbox: &mut mpsc::Receiver<Inbound>) {
        inbox.close();
        while let Some(message) = inbox.recv().await {
            match message {
                Inbound::Join { reply, .. } => {
                    let _ = reply.send(Err(closing()));
                }
                Inbound::Message { .. } | Inbound::Leave { .. } => {}
                other => {
                    let _ = Box::pin(self.handle(other, inbox)).await;
                }
            }
        }
        // The room ends either way; what stays unindexed keeps its mark in storage.
        let _ = self.index_text().await;
        self.checkpoint_if_worthwhile().await;
    }

    /// Handles one inbound message.
    async fn handle(&mut self, message: Inbound, inbox: &mut mpsc::Receiver<Inbound>) -> Flow {
        match message {
            Inbound::Join {
                conn,
                member,
                read_only,
                outbound,
                reply,
            } => {
                let _ = reply.send(self.join(conn, member, read_only, outbound));
                Flow::Continue
            }
            Inbound::Access { conn, read_only } => {
                if let Some(state) = self.conns.get_mut(&conn) {
                    state.read_only = read_only;
                }
                Flow::Continue
            }
            Inbound::Leave { conn } => {
                self.leave(conn);
                Flow::Continue
            }
            Inbound::Message { conn, bytes } => self.client_message(conn, &bytes, inbox).await,
            Inbound::Rewrite {
                text,
                author,
                expected,
                reply,
            } => {
                let mut result = self.checked_rewrite(&text, expected).await;
                if self.caught_up_with_storage(&result).await {
                    result = self.checked_rewrite(&text, expected).await;
                }
                let lost = matches!(&result, Err(e) if e.is_fenced());
                let saved = result.is_ok();
                let _ = reply.send(result);
                if saved {
                    self.history.changed(author, &self.doc);
                }
                self.after_program_edit(lost)
            }
            Inbound::Rename {
                title,
                expected,
                reply,
            } => {
                let mut result = self.checked_rename(&title, expected).await;
                if self.caught_up_with_storage(&result).await {
                    result = self.checked_rename(&title, expected).await;
                }
                let lost = matches!(&result, Err(e) if e.is_fenced());
                let _ = reply.send(result);
                self.after_program_edit(lost)
            }
            Inbound::Update {
                update,
                author,
                reply,
            } => {
                let mut result = self.program_update(&update, author.clone()).await;
                if self.caught_up_with_storage(&result).await {
                    result = self.program_update(&update, author).await;
                }
                let lost = matches!(&result, Err(e) if e.is_fenced());
                let _ = reply.send(result);
                self.after_program_edit(lost)
            }
            Inbound::Read { reply } => {
                let _ = reply.send((self.doc.doc.text(), self.doc.revision));
                Flow::Continue
            }
            Inbound::State { vector, reply } => {
                let state = match vector {
                    Some(vector) => self.doc.doc.diff_since(&vector),
                    None => Ok(self.doc.doc.encode_state()),
                };
                let _ = reply.send(state.map(|bytes| (bytes, self.doc.revision)));
                Flow::Continue
            }
            Inbound::Index { done } => {
                let flow = self.index_text().await;
                let _ = done.send(());
                flow
            }
            Inbound::Shutdown { code, reason, done } => {
                let _ = self.index_text().await;
                self.checkpoint_if_worthwhile().await;
                self.close_all(code, &reason);
                let _ = done.send(());
                Flow::Stop
            }
        }
    }

    fn join(
        &mut self,
        conn: ConnId,
        member: UserId,
        read_only: bool,
        outbound: OutboundSender,
    ) -> Result<(), Refusal> {
        let held = self.conns.values().filter(|c| c.member == member).count();
        if !fairness::member_has_room(held, &self.settings) {
            tracing::info!(
                document = %self.id,
                member = %member,
                held,
                "a member's connection refused: it holds its share of the room"
            );
            return Err(Refusal {
                code: close::TRY_AGAIN_LATER,
                reason: "you have as many connections to this document as one person may"
                    .to_owned(),
                kind: ErrorKind::Unavailable,
            });
        }
        if self.conns.len() >= self.settings.max_clients_per_room {
            return Err(Refusal {
                code: close::TRY_AGAIN_LATER,
                reason: "this document has as many clients as it serves at once".to_owned(),
                kind: ErrorKind::Unavailable,
            });
        }
        let mut greeting = vec![protocol::sync_step1(&self.doc.doc.state_vector())];
        greeting.extend(self.conns.values().filter_map(|c| c.presence.clone()));
        for message in greeting {
            outbound.send(message);
        }
        self.conns.insert(
            conn,
            Conn {
                outbound,
                member,
                read_only,
                told_read_only: false,
                presence: None,
                presence_budget: PresenceBudget::new(&self.settings),
                last_update: None,
                _joined: self.metrics.room_joined(),
            },
        );
        Ok(())
    }

    fn leave(&mut self, conn: ConnId) {
        if self.conns.remove(&conn).is_none() {
            return;
        }
        let mut gone = Vec::new();
        self.presence_owners.retain(|client, (owner, clock)| {
            let keep = *owner != conn;
            if !keep {
                gone.push((*client, *clock));
            }
            keep
        });
        if !gone.is_empty() {
            self.broadcast(&protocol::awareness_removed(&gone), None);
        }
    }

    async fn client_message(
        &mut self,
        conn: ConnId,
        bytes: &[u8],
        inbox: &mut mpsc::Receiver<Inbound>,
    ) -> Flow {
        if !self.conns.contains_key(&conn) {
            return Flow::Continue;
        }
        if bytes.len() > self.settings.max_message_bytes {
            self.metrics.update_refused(UpdateRefusal::MessageTooLarge);
            self.refuse(
                conn,
                close::TOO_BIG,
                "the message is larger than this server accepts",
            );
            return Flow::Continue;
        }
        match protocol::decode(bytes) {
            Err(_) => {
                self.metrics.update_refused(UpdateRefusal::Malformed);
                self.refuse(conn, close::POLICY, "not a y-websocket message");
            }
            Ok(ClientMessage::StateVector(vector)) => match self.doc.doc.sync_answer(&vector) {
                Ok(diff) => self.send(conn, protocol::sync_step2(diff)),
                Err(_) => {
                    self.metrics.update_refused(UpdateRefusal::Malformed);
                    self.refuse(conn, close::POLICY, "the state vector does not decode");
                }
            },
            Ok(ClientMessage::Update(update)) => {
                if self.drops_updates_of(conn, &update) {
                    return Flow::Continue;
                }
                return self.batch(conn, update, inbox).await;
            }
            Ok(ClientMessage::Awareness { raw, clients }) => {
                if raw.len() > MAX_PRESENCE_BYTES {
                    self.metrics.update_refused(UpdateRefusal::MessageTooLarge);
                    self.refuse(conn, close::TOO_BIG, "the presence message is too large");
                    return Flow::Continue;
                }
                if let Some(state) = self.conns.get_mut(&conn)
                    && !state.presence_budget.take()
                {
                    self.metrics.update_refused(UpdateRefusal::PresenceRate);
                    if state.presence_budget.first_drop() {
                        tracing::info!(
                            document = %self.id,
                            member = %state.member,
                            "dropping presence a connection sends too fast"
                        );
                    }
                    return Flow::Continue;
                }
                // y-websocket clients relay every presence change they hear, other clients'
                // included, so a presence client belongs to the first connection that spoke for
                // it (as in the reference server): only its owner's leaving clears it.
                for (client, clock) in clients {
                    let owned = self
                        .presence_owners
                        .values()
                        .filter(|(owner, _)| *owner == conn)
                        .count();
                    match self.presence_owners.get_mut(&client) {
                        Some((_, known)) => *known = (*known).max(clock),
                        None if owned < MAX_PRESENCE_CLIENTS => {
                            self.presence_owners.insert(client, (conn, clock));
                        }
                        None => {}
                    }
                }
                if let Some(state) = self.conns.get_mut(&conn) {
                    state.presence = Some(raw.clone());
                }
                // Echoed to the sender too: the client counts it as traffic and stays connected.
                self.broadcast(&raw, None);
            }
            Ok(ClientMessage::AwarenessQuery) => {
                let states: Vec<Vec<u8>> = self
                    .conns
                    .values()
                    .filter_map(|c| c.presence.clone())
                    .collect();
                for state in states {
                    self.send(conn, state);
                }
            }
            Ok(ClientMessage::Ignored) => {}
        }
        Flow::Continue
    }

    /// Gathers the updates already waiting and those that arrive within the batch window (group
    /// commit: while one commit runs, the next batch queues up), and while commits are slow, those
    /// of the room's other typing writers (see `gather`); then commits them.
    async fn batch(
        &mut self,
        first_conn: ConnId,
        first: Vec<u8>,
        inbox: &mut mpsc::Receiver<Inbound>,
    ) -> Flow {
        let start = Instant::now();
        let sibling_wait = gather::sibling_wait(self.last_commit);
        let deadlines = gather::Deadlines::new(start, self.settings.batch_window, sibling_wait);
        let mut awaited = if sibling_wait.is_zero() {
            Vec::new()
        } else {
            self.typing_writers(start, first_conn)
        };
        let mut updates = vec![(first_conn, first)];
        let mut after = None;
        while updates.len() < self.settings.max_batch {
            let next = match inbox.try_recv() {
                Ok(message) => Some(message),
                Err(mpsc::error::TryRecvError::Empty) => {
                    match deadlines.next(Instant::now(), !awaited.is_empty()) {
                        Some(deadline) => {
                            timeout_at(deadline, inbox.recv()).await.unwrap_or_default()
                        }
                        // The default window is zero: what already waits is the batch.
                        None => None,
                    }
                }
                Err(mpsc::error::TryRecvError::Disconnected) => None,
            };
            match next {
                Some(Inbound::Message { conn, bytes })
                    if bytes.len() <= self.settings.max_message_bytes =>
                {
                    match protocol::decode(&bytes) {
                        Ok(ClientMessage::Update(update)) => {
                            awaited.retain(|writer| *writer != conn);
                            updates.push((conn, update));
                        }
                        _ => {
                            after = Some(Inbound::Message { conn, bytes });
                            break;
                        }
                    }
                }
                Some(other) => {
                    after = Some(other);
                    break;
                }
                None => break,
            }
        }
        let taken = Instant::now();
        for (conn, _) in &updates {
            if let Some(state) = self.conns.get_mut(conn) {
                state.last_update = Some(taken);
            }
        }
        if self.commit_updates(updates).await == Flow::Stop {
            return Flow::Stop;
        }
        match after {
            Some(message) => Box::pin(self.handle(message, inbox)).await,
            None => Flow::Continue,
        }
    }

    /// The room's writers other than `first` whose last update is recent enough that they are
    /// typing at `now`.
    fn typing_writers(&self, now: Instant, first: ConnId) -> Vec<ConnId> {
        self.conns
            .iter()
            .filter(|(id, conn)| {
                **id != first
                    && !conn.read_only
                    && conn
                        .last_update
                        .is_some_and(|last| now.duration_since(last) <= gather::TYPING)
            })
            .map(|(id, _)| *id)
            .collect()
    }

    /// Applies, commits and broadcasts a batch.
    async fn commit_updates(&mut self, updates: Vec<(ConnId, Vec<u8>)>) -> Flow {
        let writers = updates
            .iter()
            .filter_map(|(conn, _)| self.conns.get(conn))
            .filter(|conn| !conn.read_only)
            .map(|conn| &conn.member);
        self.history.before_batch(writers, &self.doc);
        let before = self.doc.doc.state_vector();
        let mut accepted: Vec<(ConnId, Vec<u8>)> = Vec::new();
        for (conn, update) in updates {
            if !self.conns.contains_key(&conn) || self.drops_updates_of(conn, &update) {
                continue;
            }
            match self.doc.doc.apply_client_update(&update) {
                Ok(()) => accepted.push((conn, update)),
                Err(error) => {
                    self.metrics.update_refused(UpdateRefusal::Malformed);
                    self.refuse(
                        conn,
                        close::POLICY,
                        &format!("the update was refused: {error}"),
                    );
                    // The document may hold part of the refused update: start again from storage.
                    if self.reload_with(&accepted).await == Flow::Stop {
                        return Flow::Stop;
                    }
                }
            }
        }
        if accepted.is_empty() {
            return Flow::Continue;
        }
        let Ok(diff) = self.doc.doc.diff_since(&before) else {
            return self.reload_with(&[]).await;
        };
        // A client with nothing new answers the server's sync step 1 with an empty update:
        // nothing to save, nothing to send.
        if fermata_docs::is_empty_update(&diff) {
            return Flow::Continue;
        }
        if !self.fits(diff.len()) {
            let senders: Vec<ConnId> = accepted.iter().map(|(conn, _)| *conn).collect();
            for conn in senders {
                self.metrics.update_refused(UpdateRefusal::DocumentTooLarge);
                self.refuse(
                    conn,
                    close::TOO_BIG,
                    "the document would be larger than this server keeps",
                );
            }
            return self.reload_with(&[]).await;
        }
        // The batch is credited to the member whose update came last in it (of the connections
        // still here: one refused after its update was accepted is gone from `conns`).
        let author = accepted
            .iter()
            .rev()
            .find_map(|(conn, _)| self.conns.get(conn))
            .map(|c| c.member.clone());
        let commit = self.commit_request(Some(diff.clone()), None);
        match self.commit(commit).await {
            Ok(_) => {
                self.metrics.commit_batch(accepted.len());
                self.unindexed.committed(Instant::now());
                self.broadcast(&protocol::update(diff), None);
                self.published = self.doc.doc.state_vector();
                self.history.batched(author, &self.doc);
                Flow::Continue
            }
            Err(error) if error.kind() == ErrorKind::Fenced => self.end_for_lease_loss(),
            Err(error) => {
                // An unavailable database was logged as an outage where the commit failed.
                if error.kind() != ErrorKind::Unavailable {
                    tracing::warn!(document = %self.id, error = %ErrorChain(&error), "an update could not be saved; its clients resync");
                }
                // A client that sent nothing new in this batch (the empty sync answer of one that
                // just connected) lost nothing, and stays.
                let senders: Vec<ConnId> = accepted
                    .iter()
                    .filter(|(_, update)| !fermata_docs::is_empty_update(update))
                    .map(|(conn, _)| *conn)
                    .collect();
                for conn in senders {
                    self.refuse(
                        conn,
                        close::RESYNC,
                        "the update was not saved; reconnect to sync again",
                    );
                }
                self.reload_with(&[]).await
            }
        }
    }

    /// Whether `conn` is read-only, in which case its update is dropped (never applied, stored or
    /// relayed). The first update with content it sends is answered with the protocol's
    /// "permission denied" message, once.
    fn drops_updates_of(&mut self, conn: ConnId, update: &[u8]) -> bool {
        let Some(state) = self.conns.get_mut(&conn) else {
            return false;
        };
        if !state.read_only {
            return false;
        }
        if fermata_docs::is_empty_update(update) {
            return true;
        }
        self.metrics.update_refused(UpdateRefusal::ReadOnly);
        if !state.told_read_only {
            state.told_read_only = true;
            self.send(conn, protocol::read_only_notice());
        }
        true
    }

    /// [`Room::rewrite`] unless the document moved on from `expected`.
    async fn checked_rewrite(
        &mut self,
        text: &str,
        expected: Option<i64>,
    ) -> Result<Committed, EditError> {
        self.check_expected(expected)?;
        self.history.settle(&self.doc);
        self.rewrite(text).await
    }

    /// A rename committed unless the document moved on from `expected`.
    async fn checked_rename(
        &mut self,
        title: &str,
        expected: Option<i64>,
    ) -> Result<Committed, EditError> {
        self.check_expected(expected)?;
        let commit = self.commit_request(None, Some(title.to_owned()));
        Ok(self.commit(commit).await?)
    }

    /// Whether a program's edit that failed because storage was at another revision than the
    /// room should be tried once more, on the document reloaded now. Storage moves on behind
    /// the room only when a commit whose answer was lost (given up on, or cut off with its
    /// connection) lands after the room reloaded; the program asked for no revision of its own
    /// (`Stale` answers that), so it must not hear of it.
    async fn caught_up_with_storage(&mut self, result: &Result<Committed, EditError>) -> bool {
        let behind =
            matches!(result, Err(EditError::Store(error)) if error.kind() == ErrorKind::Conflict);
        behind && !self.ended && self.reload_with(&[]).await == Flow::Continue
    }

    /// Refuses a program's edit made on a revision the document has moved on from.
    fn check_expected(&self, expected: Option<i64>) -> Result<(), EditError> {
        match expected {
            Some(revision) if revision != self.doc.revision => {
                self.metrics.update_refused(UpdateRefusal::Stale);
                Err(EditError::Stale {
                    current: self.doc.revision,
                })
            }
            _ => Ok(()),
        }
    }

    /// Merges a program's Yjs update the way a client's is: applied (refusing anything
    /// undecodable or with missing predecessors), committed, then broadcast and recorded.
    async fn program_update(
        &mut self,
        update: &[u8],
        author: Option<UserId>,
    ) -> Result<Committed, EditError> {
        self.history.settle(&self.doc);
        let before = self.doc.doc.state_vector();
        if let Err(refused) = self.doc.doc.apply_client_update(update) {
            self.metrics.update_refused(UpdateRefusal::Malformed);
            // The document may hold part of the refused update: start again from storage.
            let _ = self.reload_with(&[]).await;
            return Err(EditError::Refused(refused));
        }
        let diff = self
            .doc
            .doc
            .diff_since(&before)
            .map_err(|_| StoreError::corrupt("the updated document does not encode"))?;
        if fermata_docs::is_empty_update(&diff) {
            return Ok(Committed {
                revision: self.doc.revision,
                sequence: self.doc.sequence,
                repeated: true,
            });
        }
        if !self.fits(diff.len()) {
            self.metrics.update_refused(UpdateRefusal::DocumentTooLarge);
            let _ = self.reload_with(&[]).await;
            return Err(
                StoreError::invalid("the document would be larger than this server keeps").into(),
            );
        }
        match self.commit(self.commit_with_text(diff.clone())).await {
            Ok(committed) => {
                self.unindexed.indexed();
                self.broadcast(&protocol::update(diff), None);
                self.published = self.doc.doc.state_vector();
                self.history.changed(author, &self.doc);
                Ok(committed)
            }
            Err(error) => {
                if error.kind() != ErrorKind::Fenced {
                    let _ = self.reload_with(&[]).await;
                }
                Err(error.into())
            }
        }
    }

    /// Whether the document, grown by `added` bytes (already applied), stays within its limit.
    /// The estimate is an upper bound; the exact size is measured only when it crosses the limit.
    fn fits(&mut self, added: usize) -> bool {
        let limit = self.settings.max_document_bytes;
        if self.size_estimate + added <= limit {
            return true;
        }
        let exact = self.doc.doc.state_size();
        self.size_estimate = exact.saturating_sub(added);
        exact <= limit
    }

    /// Replaces the whole text (the program rewrite path: a program's text, a restored version,
    /// an import), under the rules a live client's update keeps, committed before anyone sees it.
    async fn rewrite(&mut self, text: &str) -> Result<Committed, EditError> {
        let before = self.doc.doc.state_vector();
        if let Err(refused) = self.doc.doc.replace_text(text) {
            self.metrics.update_refused(UpdateRefusal::Malformed);
            // The document may hold part of the refused text: start again from storage.
            let _ = self.reload_with(&[]).await;
            return Err(EditError::Refused(refused));
        }
        let diff = self
            .doc
            .doc
            .diff_since(&before)
            .or_corrupt("the rewritten document does not encode")?;
        if !self.fits(diff.len()) {
            self.metrics.update_refused(UpdateRefusal::DocumentTooLarge);
            let _ = self.reload_with(&[]).await;
            return Err(StoreError::invalid("the text is larger than this server keeps").into());
        }
        let result = self.commit(self.commit_with_text(diff.clone())).await;
        match &result {
            Ok(_) => {
                self.unindexed.indexed();
                self.broadcast(&protocol::update(diff), None);
                self.published = self.doc.doc.state_vector();
            }
            Err(_) => {
                let _ = self.reload_with(&[]).await;
            }
        }
        Ok(result?)
    }

    fn commit_request(&self, update: Option<Vec<u8>>, title: Option<String>) -> Commit {
        Commit {
            channel: self.id.clone(),
            operation: OperationId::new(uuid::Uuid::new_v4().to_string())
                .expect("a UUID is a valid operation ID"),
            expected_revision: self.doc.revision,
            text: None,
            update,
            sidecar: None,
            events: Vec::new(),
            title,
        }
    }

    /// A program's edit (`update`, applied here already) committed with the text it leaves, so
    /// the search index has it at once: programs edit seldom, and may search right after.
    fn commit_with_text(&self, update: Vec<u8>) -> Commit {
        Commit {
            text: Some(self.doc.doc.text()),
            ..self.commit_request(Some(update), None)
        }
    }

    /// Writes the document's text to the search index if a live edit left it behind; a failure
    /// is tried again a little later, and the mark in storage covers a stop before that.
    /// Storage at another revision (a commit whose answer was lost landed after all) reloads
    /// the document, which is indexed at the next try.
    async fn index_text(&mut self) -> Flow {
        if !self.unindexed.is_pending() {
            return Flow::Continue;
        }
        let Ok(fence) = self.fence.current() else {
            // No lease now: the mark in storage stays for whoever holds it next.
            self.unindexed.failed(Instant::now());
            return Flow::Continue;
        };
        let text = self.doc.doc.text();
        let result = self
            .storage
            .search()
            .refresh_text(&fence, &self.id, self.doc.revision, &text)
            .await;
        match result {
            Ok(true) => {
                self.unindexed.indexed();
                Flow::Continue
            }
            Ok(false) => {
                self.unindexed.failed(Instant::now());
                self.reload_with(&[]).await
            }
            Err(error) => {
                if error.kind() != ErrorKind::Unavailable && error.kind() != ErrorKind::Fenced {
                    tracing::warn!(document = %self.id, error = %ErrorChain(&error), "the document's text could not be indexed for search; it is tried again");
                }
                self.unindexed.failed(Instant::now());
                Flow::Continue
            }
        }
    }

    /// Commits under the writer fence, retrying transient failures with the same operation ID
    /// (so a retry of a commit that did land answers with its original result).
    ///
    /// A commit the database does not answer within `commit_patience` (a network partition, a
    /// server that stopped answering) is given up as unavailable and not retried: its senders
    /// are told at once that nothing was saved, rather than wait with the room for as long as
    /// the partition lasts. It may still land when the database answers again; the room then
    /// reloads what was stored, and a client sending its edits again adds nothing twice.
    async fn commit(&mut self, commit: Commit) -> Result<Committed, StoreError> {
        let update_bytes = commit.update.as_ref().map(Vec::len);
        let bytes = update_bytes.unwrap_or(0);
        let started = Instant::now();
        let sent = std::time::Instant::now();
        let mut attempt = 0;
        let result = loop {
            let fence = match self.fence.current() {
                Ok(fence) => fence,
                Err(error) => break Err(error),
            };
            let attempt_started = Instant::now();
            let answer = tokio::time::timeout(
                self.settings.commit_patience,
                self.storage.collaboration().commit(&fence, &commit),
            )
            .await;
            let Ok(answer) = answer else {
                break Err(StoreError::unavailable(format!(
                    "the database did not answer a commit within {} ms",
                    self.settings.commit_patience.as_millis()
                )));
            };
            match answer {
                Err(error)
                    if error.is_retryable()
                        && attempt + 1 < COMMIT_ATTEMPTS
                        && attempt_started.elapsed() < QUICK_FAILURE =>
                {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
                }
                other => break other,
            }
        };
        self.last_commit = started.elapsed();
        self.metrics
            .commit(commit_outcome(&result), self.last_commit, update_bytes);
        match &result {
            Ok(_) => storage_outage::answered(&self.metrics, StorageCause::Commit, sent),
            Err(error) => {
                storage_outage::failed(&self.metrics, StorageCause::Commit, error);
            }
        }
        let committed = result?;
        self.doc.revision = committed.revision;
        self.doc.sequence = committed.sequence;
        self.size_estimate += bytes;
        if bytes > 0 {
            self.commits_since_checkpoint += 1;
            self.bytes_since_checkpoint += bytes;
            if self.commits_since_checkpoint >= self.settings.checkpoint_every_commits
                || self.bytes_since_checkpoint >= self.settings.checkpoint_every_bytes
            {
                self.checkpoint().await;
            }
        }
        Ok(committed)
    }

    async fn checkpoint(&mut self) {
        let Ok(fence) = self.fence.current() else {
            return;
        };
        let started = Instant::now();
        let sent = std::time::Instant::now();
        let saved = self
            .storage
            .collaboration()
            .save_checkpoint(&fence, &self.id, &self.doc.checkpoint())
            .await;
        self.metrics.checkpoint(saved.is_ok(), started.elapsed());
        match saved {
            Ok(saved) => {
                storage_outage::answered(&self.metrics, StorageCause::Checkpoint, sent);
                tracing::debug!(document = %self.id, through = saved.through_sequence, "checkpoint saved");
                self.commits_since_checkpoint = 0;
                self.bytes_since_checkpoint = 0;
            }
            Err(error) => {
                if !storage_outage::failed(&self.metrics, StorageCause::Checkpoint, &error) {
                    tracing::warn!(document = %self.id, error = %ErrorChain(&error), "a checkpoint could not be saved");
                }
            }
        }
    }

    async fn checkpoint_if_worthwhile(&mut self) {
        if self.commits_since_checkpoint > 0 {
            self.checkpoint().await;
        }
    }

    /// Reloads the document from storage and applies `updates` again (updates that applied to
    /// the same committed state before); false when the document can no longer be served.
    ///
    /// Storage may hold more than the room did (a commit that landed although its answer was
    /// lost): the clients are sent what they lack of it, so they stay in step with what is saved.
    async fn reload_with(&mut self, updates: &[(ConnId, Vec<u8>)]) -> Flow {
        match load(&*self.storage, &self.metrics, &self.id).await {
            Ok(doc) => {
                self.doc = doc;
                self.history.reset(&self.doc);
                self.size_estimate = self.doc.stored.size_estimate();
                if let Ok(missing) = self.doc.doc.diff_since(&self.published)
                    && !fermata_docs::is_empty_update(&missing)
                {
                    self.broadcast(&protocol::update(missing), None);
                }
                self.published = self.doc.doc.state_vector();
                for (conn, update) in updates {
                    if self.doc.doc.apply_update(update).is_err() {
                        self.refuse(
                            *conn,
                            close::RESYNC,
                            "the update could not be applied again; reconnect",
                        );
                    }
                }
                Flow::Continue
            }
            Err(refusal) => {
                self.close_all(refusal.code, &refusal.reason);
                self.ended = true;
                Flow::Stop
            }
        }
    }

    /// Whether the room goes on after a program's edit: not once the lease is `lost` (it then
    /// ends as it does when a client's batch meets the fence) or the room has ended.
    fn after_program_edit(&mut self, lost: bool) -> Flow {
        if lost {
            return self.end_for_lease_loss();
        }
        if self.ended {
            Flow::Stop
        } else {
            Flow::Continue
        }
    }

    /// The lease is gone: nothing more is accepted here; clients come back to the next holder.
    fn end_for_lease_loss(&mut self) -> Flow {
        self.ended = true;
        self.close_all(
            close::TRY_AGAIN_LATER,
            "the server is handing over; reconnect shortly",
        );
        Flow::Stop
    }

    fn send(&mut self, conn: ConnId, message: Vec<u8>) {
        let slow = self
            .conns
            .get(&conn)
            .is_some_and(|c| !c.outbound.send(message));
        if slow {
            self.refuse(
                conn,
                close::TRY_AGAIN_LATER,
                "the client fell too far behind",
            );
        }
    }

    fn broadcast(&mut self, message: &[u8], except: Option<ConnId>) {
        let targets: Vec<ConnId> = self
            .conns
            .keys()
            .copied()
            .filter(|c| Some(*c) != except)
            .collect();
        for conn in targets {
            self.send(conn, message.to_vec());
        }
    }

    /// Closes one connection with a reason and forgets it.
    fn refuse(&mut self, conn: ConnId, code: u16, reason: &str) {
        if let Some(gone) = self.conns.get(&conn) {
            gone.outbound.close(code, reason);
        }
        self.leave(conn);
    }

    fn close_all(&mut self, code: u16, reason: &str) {
        for (_, conn) in self.conns.drain() {
            conn.outbound.close(code, reason);
        }
    }
}

/// How a commit ended, for `fermata_document_commits_total`.
fn commit_outcome(result: &Result<Committed, StoreError>) -> CommitOutcome {
    match result {
        Ok(committed) if committed.repeated => CommitOutcome::Repeated,
        Ok(_) => CommitOutcome::Committed,
        Err(error) => match error.kind() {
            ErrorKind::Conflict => CommitOutcome::Conflict,
            ErrorKind::Fenced => CommitOutcome::Fenced,
            ErrorKind::Invalid => CommitOutcome::Invalid,
            ErrorKind::Missing | ErrorKind::Corrupt | ErrorKind::Unavailable => {
                CommitOutcome::Failed
            }
        },
    }
}

/// The refusal a client hears when reading document `id` failed with `error`.
pub(crate) fn read_refusal(metrics: &Metrics, id: &ChannelId, error: &StoreError) -> Refusal {
    match error.kind() {
        ErrorKind::Missing => Refusal {
            code: close::POLICY,
            reason: "no such document".to_owned(),
            kind: ErrorKind::Missing,
        },
        ErrorKind::Unavailable => {
            storage_outage::failed(metrics, StorageCause::Load, error);
            Refusal {
                code: close::TRY_AGAIN_LATER,
                reason: "the database does not answer: nothing can be saved just now; \
                         reconnect shortly"
                    .to_owned(),
                kind: ErrorKind::Unavailable,
            }
        }
        kind => {
            tracing::error!(document = %id, error = %ErrorChain(error), "could not read a document");
            Refusal {
                code: close::INTERNAL,
                reason: "the document could not be read".to_owned(),
                kind,
            }
        }
    }
}

/// Recovers a document for a room, timing the recoveries that succeed.
async fn load(
    storage: &dyn Storage,
    metrics: &Metrics,
    id: &ChannelId,
) -> Result<OpenDocument, Refusal> {
    let started = Instant::now();
    let sent = std::time::Instant::now();
    let mut recovering = Recovering::new(id);
    storage
        .collaboration()
        .read_for_recovery(id, &mut recovering)
        .await
        .map_err(|error| read_refusal(metrics, id, &error))?;
    storage_outage::answered(metrics, StorageCause::Load, sent);
    if recovering
        .channel()
        .is_some_and(|channel| channel.archived_at.is_some())
    {
        return Err(Refusal {
            code: close::POLICY,
            reason: "the document is archived; restore it to edit".to_owned(),
            kind: ErrorKind::Conflict,
        });
    }
    let (_, recovered) = recovering.finish().map_err(|error| {
        tracing::error!(document = %id, error = %ErrorChain(&error), "a document failed recovery");
        Refusal {
            code: close::INTERNAL,
            reason: "the document is damaged and cannot be opened".to_owned(),
            kind: ErrorKind::Corrupt,
        }
    })?;
    metrics.recovery(started.elapsed());
    Ok(recovered)
}
