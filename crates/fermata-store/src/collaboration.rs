//! The collaboration store: fenced, revision-checked commits of Yjs updates, sidecar state and
//! events; ordered replay; checkpoints and epoch replacement; the consistent snapshot recovery
//! reads; archive, restore and deletion; slugs; children; program-created channels; generated
//! descriptions; and each user's saved navigation reference.
//!
//! The store holds bytes and text. It never decodes a Yjs update or a sidecar: that is the
//! documents layer's job, which also computes what the store must keep beside them (the sidecar's
//! version and unanswered-decision count, a checkpoint's canonical text and hash).

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use crate::channel::{
    Channel, ChannelFilter, ChannelId, CreationKey, DescriptionDraft, NewChannel, Repository, Slug,
};
use crate::error::{StoreError, StoreResult};
use crate::lease::Fence;
use crate::time::UnixMillis;
use crate::user::UserId;

/// A commit's idempotency key, chosen by the caller: 1 to 128 printable ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OperationId(String);

impl OperationId {
    pub fn new(text: impl Into<String>) -> StoreResult<Self> {
        let text = text.into();
        if text.is_empty() || text.len() > 128 || !text.chars().all(|c| c.is_ascii_graphic()) {
            return Err(StoreError::invalid(
                "an operation ID is 1 to 128 printable ASCII characters",
            ));
        }
        Ok(OperationId(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The sidecar as stored: its version, its JSON text (kept as text, since it may hold escapes a
/// JSON column would refuse), and the count of unanswered decisions computed from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidecarState {
    pub version: i64,
    pub json: String,
    pub unanswered_decisions: i64,
}

/// An event to append with a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventDraft {
    pub kind: String,
    pub payload: String,
}

/// One durable commit: any combination of a Yjs update, a new sidecar, events and a new title.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub channel: ChannelId,
    pub operation: OperationId,
    /// The storage revision the caller built this commit on.
    pub expected_revision: i64,
    pub update: Option<Vec<u8>>,
    pub sidecar: Option<SidecarState>,
    pub events: Vec<EventDraft>,
    /// A new display title; it promotes a new canonical slug in the same transaction.
    pub title: Option<String>,
    /// The document's plain text once `update` is applied, given with the update that changed
    /// it (`None`: the text is unchanged). The search index takes it in the same transaction, as
    /// [`indexed_text`](crate::search::indexed_text) makes it; a producer may give it so made, to
    /// hash and copy less of a long text.
    pub text: Option<String>,
}

impl Commit {
    /// A digest of everything the commit asks for, so a repeated operation ID can be told apart
    /// from a different payload under the same ID.
    pub fn fingerprint(&self) -> [u8; 32] {
        let mut hash = Sha256::new();
        let mut field = |bytes: &[u8]| {
            hash.update((bytes.len() as u64).to_be_bytes());
            hash.update(bytes);
        };
        field(self.channel.0.as_bytes());
        field(&self.expected_revision.to_be_bytes());
        field(self.update.as_deref().unwrap_or(b"\xff-none"));
        match &self.sidecar {
            Some(sidecar) => {
                field(&sidecar.version.to_be_bytes());
                field(sidecar.json.as_bytes());
            }
            None => field(b"\xff-none"),
        }
        for event in &self.events {
            field(event.kind.as_bytes());
            field(event.payload.as_bytes());
        }
        field(self.title.as_deref().unwrap_or("\u{ff}-none").as_bytes());
        field(self.text.as_deref().unwrap_or("\u{ff}-none").as_bytes());
        hash.finalize().into()
    }

    pub fn is_empty(&self) -> bool {
        self.update.is_none()
            && self.sidecar.is_none()
            && self.events.is_empty()
            && self.title.is_none()
    }
}

/// What an accepted commit was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub revision: i64,
    pub sequence: i64,
    /// True when this operation ID had already been committed with the same payload: the original
    /// result is returned and nothing changed.
    pub repeated: bool,
}

/// A Yjs update in the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalUpdate {
    pub sequence: i64,
    pub epoch: i64,
    pub bytes: Vec<u8>,
}

/// A stored event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub sequence: i64,
    pub kind: String,
    pub payload: String,
    pub created_at: UnixMillis,
}

/// A checkpoint to save: the complete Yjs state of one epoch through a sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCheckpoint {
    pub epoch: i64,
    pub through_sequence: i64,
    pub revision: i64,
    pub canonical_text: String,
    /// SHA-256 of the canonical text, lowercase hex.
    pub source_hash: String,
    pub state: Vec<u8>,
    pub sidecar: Option<SidecarState>,
}

/// A stored checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub epoch: i64,
    /// Raised by every checkpoint of the channel.
    pub generation: i64,
    pub through_sequence: i64,
    pub revision: i64,
    pub canonical_text: String,
    pub source_hash: String,
    pub state: Vec<u8>,
    pub sidecar: Option<SidecarState>,
    pub created_at: UnixMillis,
}

/// Everything recovery needs, read from one consistent snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoverySnapshot {
    pub channel: Channel,
    /// The channel's current sidecar; the checkpoint's copy stands in only when it is absent.
    pub sidecar: Option<SidecarState>,
    pub checkpoint: Option<Checkpoint>,
    /// Journal updates after the checkpoint, in sequence order.
    pub updates: Vec<JournalUpdate>,
    /// Events after the checkpoint, in sequence order.
    pub events: Vec<Event>,
    /// The sequences strictly after the checkpoint's `through_sequence` whose commits carried an
    /// update, from the operation records (which checkpoints never prune): each must have its
    /// journal row, and the journal must hold no other.
    pub expected_update_sequences: Vec<i64>,
}

/// What recovery reads before a document's journal: the channel, its sidecar, its checkpoint and
/// the sequences the journal must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryHead {
    pub channel: Channel,
    /// The channel's current sidecar; the checkpoint's copy stands in only when it is absent.
    pub sidecar: Option<SidecarState>,
    pub checkpoint: Option<Checkpoint>,
    /// As in [`RecoverySnapshot`].
    pub expected_update_sequences: Vec<i64>,
}

/// Receives a [`RecoverySnapshot`] while the store reads it, so that recovery can replay the
/// start of a long journal while the rest is still being read. The store calls
/// [`Self::head`] once, then [`Self::journal`] for each run of the journal in turn, then
/// [`Self::rest`] once. A read that fails stops calling it wherever it was: what it received
/// is then to be discarded.
pub trait RecoveryReceiver: Send {
    /// The channel, its sidecar, its checkpoint and the expected update sequences, before
    /// anything else.
    fn head(&mut self, head: RecoveryHead);
    /// The next run of journal updates after the checkpoint, in sequence order, each sequence
    /// after every sequence of the runs before it.
    fn journal(&mut self, run: Vec<JournalUpdate>);
    /// The events after the checkpoint, last.
    fn rest(&mut self, events: Vec<Event>);
}

/// The receiver that collects a whole [`RecoverySnapshot`].
#[derive(Debug, Default)]
struct Collected(Option<RecoverySnapshot>);

impl RecoveryReceiver for Collected {
    fn head(&mut self, head: RecoveryHead) {
        self.0 = Some(RecoverySnapshot {
            channel: head.channel,
            sidecar: head.sidecar,
            checkpoint: head.checkpoint,
            updates: Vec::new(),
            events: Vec::new(),
            expected_update_sequences: head.expected_update_sequences,
        });
    }

    fn journal(&mut self, mut run: Vec<JournalUpdate>) {
        if let Some(snapshot) = &mut self.0 {
            if snapshot.updates.is_empty() {
                snapshot.updates = run;
            } else {
                snapshot.updates.append(&mut run);
            }
        }
    }

    fn rest(&mut self, events: Vec<Event>) {
        if let Some(snapshot) = &mut self.0 {
            snapshot.events = events;
        }
    }
}

/// A channel a program creates with its complete first state, published atomically.
#[derive(Debug, Clone)]
pub struct PublishedChannel {
    pub repository: Repository,
    pub key: CreationKey,
    pub title: String,
    pub parent: Option<ChannelId>,
    /// The revision-zero checkpoint (epoch 1, through sequence 0, revision 0).
    pub checkpoint: NewCheckpoint,
}

/// The collaboration store. Every write is fenced by the writer lease.
#[async_trait]
pub trait CollaborationStore: Send + Sync {
    /// Creates a channel with metadata only (no snapshot until first opened), its canonical slug
    /// collision-suffixed within the repository. A parent must be in the same repository and have
    /// no parent itself.
    async fn create_channel(&self, fence: &Fence, channel: &NewChannel) -> StoreResult<Channel>;

    /// Creates a channel at the ID its creation key determines, with its revision-zero
    /// checkpoint, atomically. Repeating it returns the existing channel unchanged.
    async fn create_published(
        &self,
        fence: &Fence,
        channel: &PublishedChannel,
    ) -> StoreResult<Channel>;

    /// A channel by ID, archived or not.
    async fn channel(&self, id: &ChannelId) -> StoreResult<Option<Channel>>;

    /// Channels most recently updated first; archived ones only when asked for.
    async fn list_channels(&self, filter: &ChannelFilter) -> StoreResult<Vec<Channel>>;

    /// The channel a canonical or former slug names in `repository`, archived or not.
    async fn resolve_slug(
        &self,
        repository: &Repository,
        slug: &Slug,
    ) -> StoreResult<Option<Channel>>;

    /// Every slug of a channel: the canonical one first, then former ones.
    async fn slugs_of(&self, id: &ChannelId) -> StoreResult<Vec<Slug>>;

    /// A channel's children, archived ones only when asked for.
    async fn children_of(
        &self,
        id: &ChannelId,
        include_archived: bool,
    ) -> StoreResult<Vec<Channel>>;

    /// Commits atomically: locks the channel, checks the fence and the expected revision (a
    /// mismatch is `Conflict`), returns the original result for a repeated operation ID (the same
    /// ID with another payload is `Conflict`), then assigns the next revision and sequence and
    /// writes the update, sidecar, events and title it carries.
    async fn commit(&self, fence: &Fence, commit: &Commit) -> StoreResult<Committed>;

    /// Journal updates after `sequence`, in order.
    async fn updates_after(&self, id: &ChannelId, sequence: i64)
    -> StoreResult<Vec<JournalUpdate>>;

    /// Events after `sequence`, in order.
    async fn events_after(&self, id: &ChannelId, sequence: i64) -> StoreResult<Vec<Event>>;

    /// Replaces the channel's checkpoint and deletes the journal through its sequence, atomically.
    /// Its epoch must be the channel's; it may not go back before the current checkpoint nor past
    /// the last sequence. Operations and events are kept.
    async fn save_checkpoint(
        &self,
        fence: &Fence,
        id: &ChannelId,
        checkpoint: &NewCheckpoint,
    ) -> StoreResult<Checkpoint>;

    /// Installs a new Yjs history: the next epoch, with `checkpoint` as its complete state at a new
    /// revision and sequence, and the old epoch's journal gone, atomically.
    async fn replace_epoch(
        &self,
        fence: &Fence,
        id: &ChannelId,
        expected_revision: i64,
        checkpoint: &NewCheckpoint,
    ) -> StoreResult<Committed>;

    /// Everything recovery needs, from one consistent snapshot, handed to `receiver` as it is
    /// read (see [`RecoveryReceiver`]).
    async fn read_for_recovery(
        &self,
        id: &ChannelId,
        receiver: &mut dyn RecoveryReceiver,
    ) -> StoreResult<()>;

    /// Everything recovery needs, from one consistent snapshot, collected whole.
    async fn recovery_snapshot(&self, id: &ChannelId) -> StoreResult<RecoverySnapshot> {
        let mut collected = Collected::default();
        self.read_for_recovery(id, &mut collected).await?;
        collected
            .0
            .ok_or_else(|| StoreError::unavailable(format!("document {id} was not read")))
    }

    /// Archives a channel (metadata only; no counter moves). Idempotent.
    async fn archive(&self, fence: &Fence, id: &ChannelId) -> StoreResult<Channel>;

    /// Restores an archived channel. Idempotent.
    async fn restore(&self, fence: &Fence, id: &ChannelId) -> StoreResult<Channel>;

    /// Deletes an archived channel and everything it owns in one transaction, leaving no trace:
    /// its slugs and creation identity are free again. An active channel, or a parent that still
    /// has a child, is `Conflict`.
    async fn delete_archived(&self, fence: &Fence, id: &ChannelId) -> StoreResult<()>;

    /// Publishes a generated description: accepted once per job, raising the description revision
    /// without touching any collaboration counter or `updated_at`. Returns whether it changed.
    async fn publish_description(
        &self,
        fence: &Fence,
        id: &ChannelId,
        description: &DescriptionDraft,
    ) -> StoreResult<bool>;

    /// Saves the channel a user last had open (`None` clears it). Deleting the channel clears it.
    async fn set_navigation(&self, user: &UserId, channel: Option<&ChannelId>) -> StoreResult<()>;

    async fn navigation(&self, user: &UserId) -> StoreResult<Option<ChannelId>>;
}
