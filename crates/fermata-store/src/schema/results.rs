//! Per-database results of an operation and the operation's step rows.
//!
//! A database result has two independent fields, `outcome` and `freshness`, plus object counts,
//! hashes, the files a verification found changed, timings and a safe error; it becomes immutable
//! when its database's work is terminal. A database's history is its terminal results across
//! operations, each with its operation's kind.
//! A step row, keyed by a stable step key, records state, attempts, heartbeat, safe error and
//! terminal time, and is read by a retry before it repeats an external write.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{StoreError, StoreResult};
use crate::schema::operation::parse_stored;
use crate::schema::{DatabaseName, OperationId, OperationKind, SafeError};
use crate::time::UnixMillis;

/// Whether a database's snapshot changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Changed,
    Unchanged,
    Failed,
}

/// How a database's registered snapshot relates to the live schema after the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Freshness {
    Fresh,
    Stale,
    Unregistered,
}

impl Outcome {
    pub const ALL: [Outcome; 3] = [Outcome::Changed, Outcome::Unchanged, Outcome::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Changed => "changed",
            Outcome::Unchanged => "unchanged",
            Outcome::Failed => "failed",
        }
    }
}

impl Freshness {
    pub const ALL: [Freshness; 3] = [Freshness::Fresh, Freshness::Stale, Freshness::Unregistered];

    pub fn as_str(self) -> &'static str {
        match self {
            Freshness::Fresh => "fresh",
            Freshness::Stale => "stale",
            Freshness::Unregistered => "unregistered",
        }
    }
}

impl FromStr for Outcome {
    type Err = StoreError;

    fn from_str(text: &str) -> StoreResult<Self> {
        parse_stored(text, &Outcome::ALL, Outcome::as_str, "database outcome")
    }
}

impl FromStr for Freshness {
    type Err = StoreError;

    fn from_str(text: &str) -> StoreResult<Self> {
        parse_stored(
            text,
            &Freshness::ALL,
            Freshness::as_str,
            "database freshness",
        )
    }
}

/// How a file of a database's live snapshot differs from its merged snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileChange {
    Added,
    Removed,
    Modified,
}

impl FileChange {
    pub fn as_str(self) -> &'static str {
        match self {
            FileChange::Added => "added",
            FileChange::Removed => "removed",
            FileChange::Modified => "modified",
        }
    }
}

/// One file that differs, by its path inside the database's folder (`tables/orders.sql`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDifference {
    pub path: String,
    pub change: FileChange,
}

/// The terminal result of one database's work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseReport {
    pub outcome: Outcome,
    pub freshness: Freshness,
    /// Objects per category (`tables`, `views`, ...).
    pub object_counts: BTreeMap<String, u64>,
    /// The candidate snapshot's hash, when one was generated.
    pub snapshot_hash: Option<String>,
    /// The merged snapshot's hash it was compared with, when the database is registered.
    pub merged_hash: Option<String>,
    /// The files in which the live schema differs from the merged snapshot, in path order: what
    /// a verification that found the database changed reports (a refresh's review shows its
    /// diff instead, and lists none here).
    pub differences: Vec<FileDifference>,
    pub error: Option<SafeError>,
}

impl DatabaseReport {
    /// A failed database: stale when it has a merged snapshot, unregistered otherwise.
    pub fn failed(error: SafeError, registered: bool) -> Self {
        DatabaseReport {
            outcome: Outcome::Failed,
            freshness: if registered {
                Freshness::Stale
            } else {
                Freshness::Unregistered
            },
            object_counts: BTreeMap::new(),
            snapshot_hash: None,
            merged_hash: None,
            differences: Vec::new(),
            error: Some(error),
        }
    }

    /// Refuses combinations the result fields cannot have.
    pub fn check(&self) -> StoreResult<()> {
        let failed = self.outcome == Outcome::Failed;
        if failed != self.error.is_some() {
            return Err(StoreError::invalid(
                "a database result has a safe error exactly when it failed",
            ));
        }
        if failed && self.freshness == Freshness::Fresh {
            return Err(StoreError::invalid("a failed database is never fresh"));
        }
        if !self.differences.is_empty() && self.outcome != Outcome::Changed {
            return Err(StoreError::invalid(
                "only a changed database lists the files that differ",
            ));
        }
        Ok(())
    }
}

/// One selected database's result row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseResult {
    pub operation: OperationId,
    pub database: DatabaseName,
    /// Its place in the selection (inventory order), from 0.
    pub position: u32,
    pub started_at: Option<UnixMillis>,
    /// Set when the database's work is terminal; the row never changes after.
    pub finished_at: Option<UnixMillis>,
    pub report: Option<DatabaseReport>,
}

/// One terminal result in a database's history: what an operation of `kind` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseCheck {
    pub kind: OperationKind,
    pub result: DatabaseResult,
}

/// Where a step is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepState {
    Running,
    Succeeded,
    Failed,
}

impl StepState {
    pub const ALL: [StepState; 3] = [StepState::Running, StepState::Succeeded, StepState::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            StepState::Running => "running",
            StepState::Succeeded => "succeeded",
            StepState::Failed => "failed",
        }
    }

    pub fn is_terminal(self) -> bool {
        self != StepState::Running
    }
}

impl FromStr for StepState {
    type Err = StoreError;

    fn from_str(text: &str) -> StoreResult<Self> {
        parse_stored(text, &StepState::ALL, StepState::as_str, "step state")
    }
}

/// A step key: 1 to 200 printable ASCII characters, stable across retries and restarts
/// (`inventory`, `database:0:discover`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StepKey(String);

impl StepKey {
    pub fn new(key: impl Into<String>) -> StoreResult<Self> {
        let key = key.into();
        if key.is_empty() || key.len() > 200 || !key.chars().all(|c| c.is_ascii_graphic()) {
            return Err(StoreError::invalid(
                "a step key has 1 to 200 printable ASCII characters",
            ));
        }
        Ok(StepKey(key))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a step boundary records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepProgress {
    /// An attempt begins (attempts go up by one).
    Attempt,
    /// An attempt failed and will be retried.
    Retrying(SafeError),
    Succeeded,
    Failed(SafeError),
}

/// A step row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationStep {
    pub operation: OperationId,
    pub key: StepKey,
    pub state: StepState,
    pub attempts: u32,
    /// When its first attempt began.
    pub started_at: UnixMillis,
    pub heartbeat_at: UnixMillis,
    /// The latest failure, retried or final.
    pub error: Option<SafeError>,
    pub terminal_at: Option<UnixMillis>,
}
