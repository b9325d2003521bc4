//! The Planner store: each document's Planner state (`agent_state`: its owner session, status,
//! reserved summary and transcript cursor, and the generation token of first-Planner ownership),
//! the holds a remote Planner link leaves for the next process (`planner_link_holds`), the
//! digests of the credentials paired machines hand to a Planner backend (`planner_credentials`),
//! the model and thinking level people chose (`planner_model_choices`), saved answers to open
//! decisions (`decision_answers`), the rows an earlier release kept for deferred turns
//! (`planner_deferred_turns`, only ever closed now), and the startup resets run under the writer
//! lease before any room opens.
//!
//! No row here is a secret: a hold names a session or machine by ID, a credential is kept only
//! as its SHA-256 digest. Every write is fenced by the writer lease, and the rows that say so
//! record the fencing token they were written under.

use std::time::Duration;

use async_trait::async_trait;

use crate::channel::ChannelId;
use crate::collaboration::SidecarState;
use crate::error::{StoreError, StoreResult, StoreResultExt};
use crate::lease::{Fence, FencingToken};
use crate::machine::MachineId;
use crate::session::{SecretHash, SessionId, SessionSweep};
use crate::time::UnixMillis;
use crate::user::UserId;

/// What a document's Planner is doing, as the room shows it. Startup forces every document to
/// `Unavailable`. Stored as the lowercase word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlannerStatus {
    Unavailable,
    Starting,
    Ready,
    Working,
}

impl PlannerStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PlannerStatus::Unavailable => "unavailable",
            PlannerStatus::Starting => "starting",
            PlannerStatus::Ready => "ready",
            PlannerStatus::Working => "working",
        }
    }

    /// The status a stored word names; anything else is `Corrupt`.
    pub fn parse(text: &str) -> StoreResult<Self> {
        match text {
            "unavailable" => Ok(PlannerStatus::Unavailable),
            "starting" => Ok(PlannerStatus::Starting),
            "ready" => Ok(PlannerStatus::Ready),
            "working" => Ok(PlannerStatus::Working),
            _ => Err(StoreError::corrupt("a Planner status is not a known word")),
        }
    }
}

/// One document's Planner state (`agent_state`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentState {
    pub channel: ChannelId,
    /// The process session that owns the Planner. Not a credential: the serving process alone
    /// holds the session's verifier. Cleared when the session goes.
    pub owner: Option<SessionId>,
    pub status: PlannerStatus,
    /// Reserved: kept, never advanced by this release.
    pub summary: Option<String>,
    /// Reserved: kept, never advanced by this release.
    pub transcript_cursor: Option<i64>,
    /// Raised by every claim and hand-over; a release or hand-over names the generation it
    /// holds, so a stale owner cannot end its successor's tenure.
    pub generation: i64,
    pub updated_at: UnixMillis,
}

/// The hold's owner: a browser login session (the hold goes with it), or a paired machine,
/// which has no login a restart can keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldOwner {
    Session(SessionId),
    Machine(MachineId),
}

/// The longest held-sessions text a hold may carry.
pub const MAX_HELD_SESSIONS_BYTES: usize = 1 << 20;

/// The held sessions of a link hold, as JSON text the store checks only for being a JSON array
/// of objects. The Planner link writes one object per held session: `id`, `waitingRequests`
/// (each `{ "requestId", "question": { "kind", "decisions": [..] } | null }`, so its answer can be
/// given again), `unacknowledgedAnswers` and `heldStops`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldSessions(String);

impl HeldSessions {
    pub fn new(json: impl Into<String>) -> StoreResult<Self> {
        let json = json.into();
        if json.len() > MAX_HELD_SESSIONS_BYTES {
            return Err(StoreError::invalid("the held sessions are too long"));
        }
        let parsed: serde_json::Value =
            serde_json::from_str(&json).or_invalid("the held sessions are not JSON")?;
        let all_objects = parsed
            .as_array()
            .is_some_and(|entries| entries.iter().all(serde_json::Value::is_object));
        if !all_objects {
            return Err(StoreError::invalid(
                "the held sessions are not a list of objects",
            ));
        }
        Ok(HeldSessions(json))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A link hold to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLinkHold {
    pub channel: ChannelId,
    pub owner: HoldOwner,
    pub user: UserId,
    /// The Planner generation the link held.
    pub generation: i64,
    pub held_sessions: HeldSessions,
    /// The length of the hand-over window after this write, if there is one.
    pub handover: Option<Duration>,
}

/// A stored link hold (`planner_link_holds`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkHold {
    pub channel: ChannelId,
    pub owner: HoldOwner,
    pub user: UserId,
    pub generation: i64,
    pub held_sessions: HeldSessions,
    /// When the link was suspended: the first write of the hold; a rewrite with the same owner
    /// and generation keeps it.
    pub suspended_at: UnixMillis,
    /// The hand-over window's length (`handover_until`), which the next process counts again
    /// from its own start and then clears.
    pub handover: Option<Duration>,
    /// The writer lease's token the row was last written under.
    pub fencing_token: FencingToken,
}

/// A Planner credential's digest to record before the credential is handed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPlannerCredential {
    /// The SHA-256 of the credential. The credential itself is never stored.
    pub digest: SecretHash,
    pub machine: MachineId,
    pub channel: ChannelId,
    /// How long it is valid, from now on the database's clock.
    pub ttl: Duration,
}

/// A recorded Planner credential (`planner_credentials`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannerCredential {
    pub digest: SecretHash,
    pub machine: MachineId,
    pub channel: ChannelId,
    pub created_at: UnixMillis,
    pub expires_at: UnixMillis,
}

/// The longest model or thinking-level name kept, in characters.
pub const MAX_CHOICE_CHARS: usize = 200;

/// A model or thinking-level name: not checked against any catalog here (a model that has gone
/// stays stored), only bounded: 1 to [`MAX_CHOICE_CHARS`] characters, no control characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChoiceName(String);

impl ChoiceName {
    pub fn new(text: impl Into<String>) -> StoreResult<Self> {
        let text = text.into();
        let count = text.chars().count();
        if count == 0 || count > MAX_CHOICE_CHARS || text.chars().any(char::is_control) {
            return Err(StoreError::invalid(
                "a model or thinking level is 1 to 200 characters without control characters",
            ));
        }
        Ok(ChoiceName(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A model choice to write: it replaces the previous one whole; with neither part it removes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewModelChoice {
    pub channel: ChannelId,
    pub model: Option<ChoiceName>,
    pub thinking_level: Option<ChoiceName>,
    pub chosen_by: UserId,
}

/// A stored model choice (`planner_model_choices`): at least one part is present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelChoice {
    pub channel: ChannelId,
    pub model: Option<ChoiceName>,
    pub thinking_level: Option<ChoiceName>,
    pub chosen_by: UserId,
    pub chosen_at: UnixMillis,
    pub fencing_token: FencingToken,
}

/// A decision's ID in its document's sidecar, or a Planner turn's ID: 1 to 128 printable ASCII
/// characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PlannerKey(String);

impl PlannerKey {
    pub fn new(text: impl Into<String>) -> StoreResult<Self> {
        let text = text.into();
        if text.is_empty() || text.len() > 128 || !text.chars().all(|c| c.is_ascii_graphic()) {
            return Err(StoreError::invalid(
                "a decision or turn ID is 1 to 128 printable ASCII characters",
            ));
        }
        Ok(PlannerKey(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A saved answer to a decision the Planner left open (`decision_answers`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionAnswer {
    pub channel: ChannelId,
    pub decision: PlannerKey,
    /// The answer's generation: a newer one replaces the row and waits again.
    pub generation: i64,
    pub saved_at: UnixMillis,
    /// The Planner turn claimed to carry it.
    pub claimed_by: Option<PlannerKey>,
    /// When that turn was delivered; a delivered row is never claimed again.
    pub delivered_at: Option<UnixMillis>,
}

/// How an earlier release's deferred turn stands (`planner_deferred_turns.state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeferredTurnState {
    Waiting,
    Started,
    Ended,
    Interrupted,
    Cancelled,
}

impl DeferredTurnState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeferredTurnState::Waiting => "waiting",
            DeferredTurnState::Started => "started",
            DeferredTurnState::Ended => "ended",
            DeferredTurnState::Interrupted => "interrupted",
            DeferredTurnState::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> StoreResult<Self> {
        match text {
            "waiting" => Ok(DeferredTurnState::Waiting),
            "started" => Ok(DeferredTurnState::Started),
            "ended" => Ok(DeferredTurnState::Ended),
            "interrupted" => Ok(DeferredTurnState::Interrupted),
            "cancelled" => Ok(DeferredTurnState::Cancelled),
            _ => Err(StoreError::corrupt(
                "a deferred turn state is not a known word",
            )),
        }
    }
}

/// What retiring the deferred turns closed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeferredTurnRetirement {
    /// Waiting rows, now cancelled.
    pub cancelled: u64,
    /// Started rows, now interrupted.
    pub interrupted: u64,
}

/// What the startup reset of sessions and Planner owners did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OwnerReset {
    pub sessions: SessionSweep,
    /// Documents whose owner reference was cleared.
    pub owners_cleared: u64,
    /// Documents whose owner was kept: their hold names the owning session, which the reset keeps.
    pub owners_kept: u64,
}

/// A child document's stored conversation state, as the startup clearing reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildConversation {
    pub channel: ChannelId,
    /// `channel_state`'s sidecar.
    pub state: Option<SidecarState>,
    /// The latest `channel_snapshots` row's sidecar.
    pub snapshot: Option<SidecarState>,
    /// Whether its `agent_state` has a reserved summary or transcript cursor set.
    pub has_reserved_context: bool,
}

/// A child's sidecars with its conversation cleared, to write back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClearedChild {
    pub channel: ChannelId,
    /// Replaces `channel_state`'s sidecar when given (which must exist).
    pub state: Option<SidecarState>,
    /// Replaces the latest snapshot's sidecar when given (which must exist).
    pub snapshot: Option<SidecarState>,
}

/// The Planner store. Every write is fenced by the writer lease.
#[async_trait]
pub trait PlannerStore: Send + Sync {
    /// The document's Planner state; `None` before any Planner claimed it.
    async fn agent_state(&self, channel: &ChannelId) -> StoreResult<Option<AgentState>>;

    /// Makes `session` the document's first Planner owner, atomically: it succeeds only while
    /// the document has no owner, so of several concurrent claimants exactly one wins; the others
    /// get `Conflict`. Sets the status to `Starting`, raises the generation and returns the new
    /// state. `Missing` for an unknown document; `Invalid` for an unknown session.
    async fn claim_planner(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        session: &SessionId,
    ) -> StoreResult<AgentState>;

    /// Sets the status, if the owner still holds `generation` (`Conflict` otherwise).
    async fn set_planner_status(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        generation: i64,
        status: PlannerStatus,
    ) -> StoreResult<AgentState>;

    /// Hands the Planner to `session`, if the owner still holds `generation` (`Conflict`
    /// otherwise), raising the generation.
    async fn hand_over_planner(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        generation: i64,
        session: &SessionId,
    ) -> StoreResult<AgentState>;

    /// Clears the owner and makes the status `Unavailable`, if the owner still holds
    /// `generation` (`Conflict` otherwise). The generation, summary and cursor stay.
    async fn release_planner(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        generation: i64,
    ) -> StoreResult<AgentState>;

    /// Writes the document's link hold, replacing any earlier one, under the fence's token.
    async fn write_link_hold(&self, fence: &Fence, hold: &NewLinkHold) -> StoreResult<LinkHold>;

    /// Removes the document's link hold. Returns whether there was one.
    async fn remove_link_hold(&self, fence: &Fence, channel: &ChannelId) -> StoreResult<bool>;

    async fn link_hold(&self, channel: &ChannelId) -> StoreResult<Option<LinkHold>>;

    /// The next process's start: returns every hold as stored, with its hand-over window, and
    /// rewrites each under this fence without the window, so no later process is given it.
    async fn take_link_holds(&self, fence: &Fence) -> StoreResult<Vec<LinkHold>>;

    /// Records a Planner credential's digest. Call it, and let it succeed, before the credential
    /// is handed out: a credential whose digest was not recorded must never leave the server.
    /// A digest already recorded is `Conflict`; an unknown machine or document is `Invalid`.
    async fn record_planner_credential(
        &self,
        fence: &Fence,
        credential: &NewPlannerCredential,
    ) -> StoreResult<PlannerCredential>;

    /// The unexpired credential with this digest.
    async fn planner_credential(
        &self,
        digest: &SecretHash,
    ) -> StoreResult<Option<PlannerCredential>>;

    /// Withdraws every credential a machine handed out. Returns how many went.
    async fn withdraw_planner_credentials(
        &self,
        fence: &Fence,
        machine: &MachineId,
    ) -> StoreResult<u64>;

    /// Removes expired credentials. Returns how many went.
    async fn sweep_planner_credentials(&self, fence: &Fence) -> StoreResult<u64>;

    /// Writes a model choice under the fence's token, replacing the previous one whole; a choice
    /// with neither a model nor a thinking level removes the row and returns `None`. Call it
    /// before the choice is answered or shown to the room.
    async fn choose_model(
        &self,
        fence: &Fence,
        choice: &NewModelChoice,
    ) -> StoreResult<Option<ModelChoice>>;

    async fn model_choice(&self, channel: &ChannelId) -> StoreResult<Option<ModelChoice>>;

    /// Saves an answer at `generation`: a newer generation than the stored one replaces the row
    /// and waits again (claim and delivery cleared); an older or equal one changes nothing.
    /// Returns whether it was stored.
    async fn save_decision_answer(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        decision: &PlannerKey,
        generation: i64,
    ) -> StoreResult<bool>;

    /// Claims for `turn` every undelivered answer of the document that no other turn claimed
    /// (answers `turn` already claimed are returned again). A delivered answer is never claimed.
    async fn claim_decision_answers(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        turn: &PlannerKey,
    ) -> StoreResult<Vec<DecisionAnswer>>;

    /// Marks the answers `turn` claimed as delivered. Returns how many.
    async fn deliver_decision_answers(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        turn: &PlannerKey,
    ) -> StoreResult<u64>;

    /// The document's saved answers, by decision ID.
    async fn decision_answers(&self, channel: &ChannelId) -> StoreResult<Vec<DecisionAnswer>>;

    /// Closes an earlier release's open deferred turns in one fenced statement: waiting becomes
    /// cancelled, started becomes interrupted, each recording the fence's token and when. Nothing
    /// else ever writes those rows. Idempotent: a second run closes nothing.
    async fn retire_deferred_turns(&self, fence: &Fence) -> StoreResult<DeferredTurnRetirement>;

    /// The startup reset, in one fenced transaction: clears every Planner owner reference and
    /// forces every status to `Unavailable` (generation, summary and cursor unchanged), except
    /// the owner of a document whose link hold names the owning session when that session is
    /// kept (unexpired, with a secret and credentials); then removes expired and metadata-only
    /// sessions, which takes their holds with them. Idempotent.
    async fn reset_owners(&self, fence: &Fence) -> StoreResult<OwnerReset>;

    /// Every child document's stored sidecars, archived ones included, by ID.
    async fn child_conversations(&self) -> StoreResult<Vec<ChildConversation>>;

    /// Replaces a child's sidecars and resets its reserved summary and transcript cursor, in one
    /// fenced transaction. No collaboration counter moves: not the storage revision, sequence or
    /// epoch, not the snapshot's revision or generation, not `updated_at`. `Invalid` for a
    /// document that is not a child; `Missing` when a sidecar to replace is not there.
    async fn replace_child_sidecars(&self, fence: &Fence, child: &ClearedChild) -> StoreResult<()>;
}

/// A row of an earlier release's `planner_deferred_turns`. This release never creates one; the
/// type exists to read the rows back and for tests to seed them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeferredTurn {
    pub id: String,
    pub channel: ChannelId,
    /// `composer`, `invoke_planner`, `invoke_system`, `comment` or `draft`.
    pub kind: String,
    pub state: DeferredTurnState,
    /// The fencing token of its latest transition.
    pub fencing_token: FencingToken,
    pub resolved_at: Option<UnixMillis>,
}

/// The refusal of a Planner write made under a generation that no longer holds the document.
pub fn not_held() -> StoreError {
    StoreError::conflict("the Planner is no longer held at this generation")
}

/// The refusal of a first-Planner claim on a document that already has one.
pub fn already_owned() -> StoreError {
    StoreError::conflict("the document already has a Planner")
}

/// The refusal of a child's sidecar rewrite on a document without a parent.
pub fn not_a_child() -> StoreError {
    StoreError::invalid("the document is not a child")
}
