//! Schema operations: their kinds, the ten states and the transitions between them, and the
//! operation row as stored. Every transition is a conditional update from an expected state, so
//! a terminal state never changes.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{StoreError, StoreResult, StoreResultExt};
use crate::schema::{DatabaseName, InventoryId, SafeError};
use crate::time::UnixMillis;
use crate::user::UserId;

/// A schema operation's ID (a UUID), generated before the workflow is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OperationId(pub uuid::Uuid);

impl OperationId {
    pub fn generate() -> Self {
        OperationId(uuid::Uuid::new_v4())
    }
}

impl fmt::Display for OperationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for OperationId {
    type Err = StoreError;

    fn from_str(text: &str) -> StoreResult<Self> {
        uuid::Uuid::parse_str(text)
            .map(OperationId)
            .or_invalid("an operation ID is a UUID")
    }
}

/// What an operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationKind {
    /// Lists the databases the snapshot account can see. Never takes the lease.
    Inventory,
    /// Generates, verifies, reviews and publishes snapshots of selected databases.
    Refresh,
    /// Compares selected registered databases with their merged snapshots.
    Verification,
}

impl OperationKind {
    pub const ALL: [OperationKind; 3] = [
        OperationKind::Inventory,
        OperationKind::Refresh,
        OperationKind::Verification,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OperationKind::Inventory => "inventory",
            OperationKind::Refresh => "refresh",
            OperationKind::Verification => "verification",
        }
    }

    /// Whether the operation holds the global schema lease.
    pub fn takes_lease(self) -> bool {
        !matches!(self, OperationKind::Inventory)
    }
}

/// Where an operation is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationState {
    Reserved,
    Starting,
    StartUnknown,
    Running,
    AwaitingReview,
    Publishing,
    Succeeded,
    Failed,
    Rejected,
    Expired,
}

impl OperationState {
    pub const ALL: [OperationState; 10] = [
        OperationState::Reserved,
        OperationState::Starting,
        OperationState::StartUnknown,
        OperationState::Running,
        OperationState::AwaitingReview,
        OperationState::Publishing,
        OperationState::Succeeded,
        OperationState::Failed,
        OperationState::Rejected,
        OperationState::Expired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OperationState::Reserved => "reserved",
            OperationState::Starting => "starting",
            OperationState::StartUnknown => "start_unknown",
            OperationState::Running => "running",
            OperationState::AwaitingReview => "awaiting_review",
            OperationState::Publishing => "publishing",
            OperationState::Succeeded => "succeeded",
            OperationState::Failed => "failed",
            OperationState::Rejected => "rejected",
            OperationState::Expired => "expired",
        }
    }

    /// Succeeded, failed, rejected and expired: states that never change.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            OperationState::Succeeded
                | OperationState::Failed
                | OperationState::Rejected
                | OperationState::Expired
        )
    }

    /// Failed, rejected and expired: the terminal states that are not a success.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            OperationState::Failed | OperationState::Rejected | OperationState::Expired
        )
    }

    /// Whether an operation may move from `self` to `to`. Any live state may fail; a terminal
    /// state goes nowhere. `publishing` may "move" to itself: a publication that failed is held
    /// there with its error (and without the lease) until it is published again.
    pub fn may_become(self, to: OperationState) -> bool {
        use OperationState::*;
        match (self, to) {
            (from, _) if from.is_terminal() => false,
            (_, Failed) => true,
            (Reserved, Starting)
            | (Starting, Running | StartUnknown)
            | (StartUnknown, Running | Expired)
            | (Running, AwaitingReview | Publishing | Succeeded | Expired)
            | (AwaitingReview, Publishing | Succeeded | Rejected | Expired)
            | (Publishing, Publishing | Succeeded) => true,
            _ => false,
        }
    }
}

impl fmt::Display for OperationState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses the stored text of an enum whose `as_str` names every value in `all`.
pub(crate) fn parse_stored<T: Copy>(
    text: &str,
    all: &[T],
    name: impl Fn(T) -> &'static str,
    what: &str,
) -> StoreResult<T> {
    all.iter()
        .copied()
        .find(|value| name(*value) == text)
        .ok_or_else(|| {
            StoreError::corrupt(format!("a stored {what} is not one this release knows"))
        })
}

impl FromStr for OperationState {
    type Err = StoreError;

    fn from_str(text: &str) -> StoreResult<Self> {
        parse_stored(
            text,
            &OperationState::ALL,
            OperationState::as_str,
            "operation state",
        )
    }
}

impl FromStr for OperationKind {
    type Err = StoreError;

    fn from_str(text: &str) -> StoreResult<Self> {
        parse_stored(
            text,
            &OperationKind::ALL,
            OperationKind::as_str,
            "operation kind",
        )
    }
}

/// The key a browser (or a script) sends with a request to start an operation, so that repeating
/// the request returns the operation it already created: 1 to 100 printable ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestKey(String);

impl RequestKey {
    pub fn new(key: impl Into<String>) -> StoreResult<Self> {
        let key = key.into();
        if key.is_empty() || key.len() > 100 || !key.chars().all(|c| c.is_ascii_graphic()) {
            return Err(StoreError::invalid(
                "a request key has 1 to 100 printable ASCII characters",
            ));
        }
        Ok(RequestKey(key))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The pull request an operation published (filled by publication).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequest {
    pub number: u64,
    pub url: String,
    pub head: String,
    pub base: String,
}

/// An operation to insert in `reserved` state.
#[derive(Debug, Clone)]
pub struct NewOperation {
    pub id: OperationId,
    pub kind: OperationKind,
    pub actor: UserId,
    pub request_key: RequestKey,
    /// The inventory a refresh or verification selects from.
    pub inventory: Option<InventoryId>,
    /// The selected databases, in inventory order, without duplicates.
    pub databases: Vec<DatabaseName>,
    /// A refresh that also proposes removing the registered databases its inventory no longer
    /// lists.
    pub remove_missing: bool,
}

/// An operation row as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    pub id: OperationId,
    pub kind: OperationKind,
    pub state: OperationState,
    pub actor: UserId,
    pub request_key: RequestKey,
    pub inventory: Option<InventoryId>,
    /// A refresh that also proposes removing the registered databases its inventory no longer
    /// lists.
    pub remove_missing: bool,
    /// The workflow run, once bound.
    pub run_id: Option<String>,
    pub reviewed_base_commit: Option<String>,
    pub pull_request: Option<PullRequest>,
    pub error: Option<SafeError>,
    pub created_at: UnixMillis,
    pub updated_at: UnixMillis,
    pub finished_at: Option<UnixMillis>,
}

/// A conditional state change: from `from` to `to`, with what the new state records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub from: OperationState,
    pub to: OperationState,
    /// The safe error of a failed or expired operation.
    pub error: Option<SafeError>,
    /// Also release the schema lease this operation holds, in the same transaction.
    pub release_lease: bool,
}

impl Transition {
    pub fn new(from: OperationState, to: OperationState) -> Self {
        Transition {
            from,
            to,
            error: None,
            release_lease: false,
        }
    }

    /// To `failed` with `error`.
    pub fn fail(from: OperationState, error: SafeError) -> Self {
        Transition {
            from,
            to: OperationState::Failed,
            error: Some(error),
            release_lease: false,
        }
    }

    #[must_use]
    pub fn releasing_lease(mut self) -> Self {
        self.release_lease = true;
        self
    }

    /// Refuses transitions the state machine does not have.
    pub fn check(&self) -> StoreResult<()> {
        if self.from.may_become(self.to) {
            Ok(())
        } else {
            Err(StoreError::invalid(format!(
                "an operation cannot move from {} to {}",
                self.from, self.to
            )))
        }
    }
}

impl NewOperation {
    /// Refuses operations their kind cannot have: an inventory selects nothing; a refresh or
    /// verification names its inventory and at least one database, each once.
    pub fn check(&self) -> StoreResult<()> {
        let mut seen = std::collections::HashSet::new();
        if !self.databases.iter().all(|name| seen.insert(name)) {
            return Err(StoreError::invalid("a selection names each database once"));
        }
        if self.remove_missing && self.kind != OperationKind::Refresh {
            return Err(StoreError::invalid(
                "only a refresh proposes removing missing databases",
            ));
        }
        match (self.kind, &self.inventory, self.databases.is_empty()) {
            (OperationKind::Inventory, None, true) => Ok(()),
            (OperationKind::Inventory, _, _) => Err(StoreError::invalid(
                "an inventory operation selects no databases",
            )),
            (_, Some(_), false) => Ok(()),
            (_, None, _) => Err(StoreError::invalid(
                "a refresh or verification names its inventory",
            )),
            (_, Some(_), true) => Err(StoreError::invalid("a selection names a database")),
        }
    }
}
