//! The label values of the metrics: each a closed set, so every family has a bounded number of
//! series whatever clients send.

use prometheus_client::encoding::EncodeLabelSet;

/// How one renewal attempt of the writer lease ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RenewalOutcome {
    /// Renewed within the attempt timeout.
    Renewed,
    /// Renewed, but too late to count: retried at once.
    Slow,
    /// Failed with an error; retried until the safety deadline.
    Failed,
    /// Got no reply at all; its connection was abandoned.
    Abandoned,
}

impl RenewalOutcome {
    pub(crate) const ALL: [RenewalOutcome; 4] = [
        RenewalOutcome::Renewed,
        RenewalOutcome::Slow,
        RenewalOutcome::Failed,
        RenewalOutcome::Abandoned,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RenewalOutcome::Renewed => "renewed",
            RenewalOutcome::Slow => "slow",
            RenewalOutcome::Failed => "failed",
            RenewalOutcome::Abandoned => "abandoned",
        }
    }
}

/// A limit that turned a client away or cut it short.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    /// A connection over the cap of its peer address (served from the health reserve).
    PeerConnections,
    /// A connection over the total cap (served from the health reserve, or closed).
    Connections,
    /// A connection whose request head did not arrive in time.
    HeaderTimeout,
    /// A request body that fell behind the minimum rate.
    BodyRate,
    /// A decode or thumbnail that waited its whole queue time for a turn.
    DecodeQueue,
    /// A login or re-authentication refused while its name or address was locked.
    Login,
}

impl Limit {
    pub(crate) const ALL: [Limit; 6] = [
        Limit::PeerConnections,
        Limit::Connections,
        Limit::HeaderTimeout,
        Limit::BodyRate,
        Limit::DecodeQueue,
        Limit::Login,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Limit::PeerConnections => "peer_connections",
            Limit::Connections => "connections",
            Limit::HeaderTimeout => "header_timeout",
            Limit::BodyRate => "body_rate",
            Limit::DecodeQueue => "decode_queue",
            Limit::Login => "login",
        }
    }
}

/// How one document commit ended, retries included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommitOutcome {
    /// Saved under a new revision.
    Committed,
    /// Its operation ID had landed before (a retry whose first answer was lost): nothing new.
    Repeated,
    /// The document had moved on from the revision the commit was made on.
    Conflict,
    /// Refused by the writer fence: this process no longer holds the writer lease.
    Fenced,
    /// Refused by the store's rules (an invalid commit).
    Invalid,
    /// The store failed (unavailable, corrupt, missing).
    Failed,
}

impl CommitOutcome {
    pub(crate) const ALL: [CommitOutcome; 6] = [
        CommitOutcome::Committed,
        CommitOutcome::Repeated,
        CommitOutcome::Conflict,
        CommitOutcome::Fenced,
        CommitOutcome::Invalid,
        CommitOutcome::Failed,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CommitOutcome::Committed => "committed",
            CommitOutcome::Repeated => "repeated",
            CommitOutcome::Conflict => "conflict",
            CommitOutcome::Fenced => "fenced",
            CommitOutcome::Invalid => "invalid",
            CommitOutcome::Failed => "failed",
        }
    }
}

/// Why a client's message to a document, or a program's update, was refused or dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UpdateRefusal {
    /// Not a y-websocket message, a state vector or update that does not decode, or an update
    /// the document refuses (missing predecessors, a root type other than the text).
    Malformed,
    /// A message (an update or presence) larger than the server accepts.
    MessageTooLarge,
    /// An update that would make the document larger than the server keeps.
    DocumentTooLarge,
    /// An update with content from a read-only connection: dropped, never stored or relayed.
    ReadOnly,
    /// Presence sent faster than a connection's share: dropped, not relayed.
    PresenceRate,
    /// A program's edit made on a revision the document has moved on from (`If-Match`).
    Stale,
}

impl UpdateRefusal {
    pub(crate) const ALL: [UpdateRefusal; 6] = [
        UpdateRefusal::Malformed,
        UpdateRefusal::MessageTooLarge,
        UpdateRefusal::DocumentTooLarge,
        UpdateRefusal::ReadOnly,
        UpdateRefusal::PresenceRate,
        UpdateRefusal::Stale,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            UpdateRefusal::Malformed => "malformed",
            UpdateRefusal::MessageTooLarge => "message_too_large",
            UpdateRefusal::DocumentTooLarge => "document_too_large",
            UpdateRefusal::ReadOnly => "read_only",
            UpdateRefusal::PresenceRate => "presence_rate",
            UpdateRefusal::Stale => "stale",
        }
    }
}

/// What a forwarded request is: a live connection (`/sync`) or a request of the documents API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ForwardKind {
    /// A live connection to a document, relayed frame by frame.
    Sync,
    /// A request of the documents API, relayed whole.
    Http,
}

impl ForwardKind {
    pub(crate) const ALL: [ForwardKind; 2] = [ForwardKind::Sync, ForwardKind::Http];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ForwardKind::Sync => "sync",
            ForwardKind::Http => "http",
        }
    }
}

/// How a request for a document another member writes (or none does) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ForwardOutcome {
    /// The member that writes it answered, and its answer was relayed.
    Forwarded,
    /// That member refused the live connection's upgrade.
    Refused,
    /// That member could not be reached, or did not answer in time.
    Unreachable,
    /// No member writes the document at the moment (a hand-over is under way).
    Unplaced,
    /// The request had been forwarded already, by a member whose view of the cluster disagrees
    /// with this one's: it is not sent on again.
    AlreadyForwarded,
}

impl ForwardOutcome {
    pub(crate) const ALL: [ForwardOutcome; 5] = [
        ForwardOutcome::Forwarded,
        ForwardOutcome::Refused,
        ForwardOutcome::Unreachable,
        ForwardOutcome::Unplaced,
        ForwardOutcome::AlreadyForwarded,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ForwardOutcome::Forwarded => "forwarded",
            ForwardOutcome::Refused => "refused",
            ForwardOutcome::Unreachable => "unreachable",
            ForwardOutcome::Unplaced => "unplaced",
            ForwardOutcome::AlreadyForwarded => "already_forwarded",
        }
    }
}

/// How one attempt of a workflow step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttemptOutcome {
    /// The step succeeded.
    Succeeded,
    /// A transient failure; the step is tried again.
    Retried,
    /// The step failed for good: a permanent error, or the last try's.
    Failed,
}

impl AttemptOutcome {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Succeeded => "succeeded",
            AttemptOutcome::Retried => "retried",
            AttemptOutcome::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct OutcomeLabel {
    pub(crate) outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct LimitLabel {
    pub(crate) limit: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct ReasonLabel {
    pub(crate) reason: &'static str,
}

/// What the process was doing when the database did not take its work.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct CauseLabel {
    pub(crate) cause: &'static str,
}

/// What a cap applies to: `process` or `peer` for HTTP connections, `room` or `member` for a
/// room's connections.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct PerLabel {
    pub(crate) per: &'static str,
}

/// An HTTP request: its method, the route template it matched (never the raw path) and the
/// status it was answered with.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct RequestLabels {
    pub(crate) method: &'static str,
    pub(crate) route: String,
    pub(crate) status: u16,
}

/// A forwarded request: its kind and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct ForwardLabels {
    pub(crate) kind: &'static str,
    pub(crate) outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct KindLabel {
    pub(crate) kind: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct OperationLabels {
    pub(crate) kind: &'static str,
    pub(crate) state: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct AttemptLabels {
    pub(crate) workflow: String,
    pub(crate) outcome: &'static str,
}
