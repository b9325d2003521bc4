//! Operations, reviews, drift diffs and the registry as people and scripts read them: the JSON of the no-store
//! routes and of the command line's `--json`, and the lines the command line prints. Instants are RFC 3339 on
//! the database's clock; errors are the safe error's four fields and nothing else.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use fermata_schema_core::{ErrorCode, ErrorStage, SafeError, Subject};
use fermata_store::UnixMillis;
use fermata_store::schema::{
    DatabaseCheck, DatabaseResult, FileDifference, Inventory, Operation, OperationStep,
    PullRequest, Review, SchemaLease,
};
use serde::Serialize;

use crate::drift::{DatabaseDrift, DriftDiff};
use crate::operations::OperationReport;
use crate::registry_view::{RegisteredDatabase, RegistryReport};
use crate::review::{DatabaseDiff, FileDiff, ReviewDiff};

/// The safe error: `{stage, code, retryable, message}`.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorView {
    pub stage: ErrorStage,
    pub code: ErrorCode,
    pub retryable: bool,
    pub message: String,
    /// What the message names, as data: an operation, a database, or an object of a database
    /// with its kind, name and the fixed reason it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
}

impl From<&SafeError> for ErrorView {
    fn from(error: &SafeError) -> Self {
        ErrorView {
            stage: error.stage(),
            code: error.code(),
            retryable: error.retryable(),
            message: error.message(),
            subject: error.subject().cloned(),
        }
    }
}

fn instant(at: UnixMillis) -> String {
    at.to_string()
}

/// One operation, as listed.
#[derive(Debug, Clone, Serialize)]
pub struct OperationSummary {
    pub id: String,
    pub kind: &'static str,
    pub state: &'static str,
    pub terminal: bool,
    pub actor: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inventory_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorView>,
    /// The commit a refresh compared with and published onto.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reviewed_base_commit: Option<String>,
    /// The pull request a refresh published.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<PullRequest>,
}

impl From<&Operation> for OperationSummary {
    fn from(operation: &Operation) -> Self {
        OperationSummary {
            id: operation.id.to_string(),
            kind: operation.kind.as_str(),
            state: operation.state.as_str(),
            terminal: operation.state.is_terminal(),
            actor: operation.actor.to_string(),
            inventory_id: operation.inventory.map(|id| id.to_string()),
            run_id: operation.run_id.clone(),
            created_at: instant(operation.created_at),
            updated_at: instant(operation.updated_at),
            finished_at: operation.finished_at.map(instant),
            error: operation.error.as_ref().map(ErrorView::from),
            reviewed_base_commit: operation.reviewed_base_commit.clone(),
            pull_request: operation.pull_request.clone(),
        }
    }
}

/// One selected database's result.
#[derive(Debug, Clone, Serialize)]
pub struct DatabaseView {
    pub name: String,
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freshness: Option<&'static str>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub object_counts: BTreeMap<String, u64>,
    /// The candidate snapshot's hash.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_hash: Option<String>,
    /// The merged snapshot's hash it was compared with (registered databases).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged_hash: Option<String>,
    /// The files in which a verification found the live schema differing from the merged
    /// snapshot.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<FileDifference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorView>,
}

impl From<&DatabaseResult> for DatabaseView {
    fn from(result: &DatabaseResult) -> Self {
        let state = match (&result.report, result.started_at) {
            (Some(_), _) => "done",
            (None, Some(_)) => "running",
            (None, None) => "pending",
        };
        let report = result.report.as_ref();
        DatabaseView {
            name: result.database.to_string(),
            state,
            outcome: report.map(|r| r.outcome.as_str()),
            freshness: report.map(|r| r.freshness.as_str()),
            object_counts: report.map(|r| r.object_counts.clone()).unwrap_or_default(),
            snapshot_hash: report.and_then(|r| r.snapshot_hash.clone()),
            merged_hash: report.and_then(|r| r.merged_hash.clone()),
            differences: report.map(|r| r.differences.clone()).unwrap_or_default(),
            started_at: result.started_at.map(instant),
            finished_at: result.finished_at.map(instant),
            error: report.and_then(|r| r.error.as_ref()).map(ErrorView::from),
        }
    }
}

/// An inventory: its header, its names in order, and the visible databases the configured
/// filter (`[schema] ignore_databases`) left out.
#[derive(Debug, Clone, Serialize)]
pub struct InventoryView {
    pub id: String,
    pub operation_id: String,
    pub actor: String,
    pub server_version: String,
    pub discovered_at: String,
    pub expires_at: String,
    pub databases: Vec<String>,
    pub ignored: Vec<String>,
}

impl From<&Inventory> for InventoryView {
    fn from(inventory: &Inventory) -> Self {
        InventoryView {
            id: inventory.id.to_string(),
            operation_id: inventory.operation.to_string(),
            actor: inventory.actor.to_string(),
            server_version: inventory.server_version.clone(),
            discovered_at: instant(inventory.discovered_at),
            expires_at: instant(inventory.expires_at),
            databases: inventory
                .databases
                .iter()
                .map(ToString::to_string)
                .collect(),
            ignored: inventory.ignored.iter().map(ToString::to_string).collect(),
        }
    }
}

/// The global lease.
#[derive(Debug, Clone, Serialize)]
pub struct LeaseView {
    pub operation_id: String,
    pub kind: &'static str,
    pub status: &'static str,
    pub acquired_at: String,
    pub heartbeat_at: String,
    pub expires_at: String,
}

impl From<&SchemaLease> for LeaseView {
    fn from(lease: &SchemaLease) -> Self {
        LeaseView {
            operation_id: lease.operation.to_string(),
            kind: lease.kind.as_str(),
            status: lease.status.as_str(),
            acquired_at: instant(lease.acquired_at),
            heartbeat_at: instant(lease.heartbeat_at),
            expires_at: instant(lease.expires_at),
        }
    }
}

/// One operation with everything known about it.
#[derive(Debug, Clone, Serialize)]
pub struct OperationView {
    #[serde(flatten)]
    pub summary: OperationSummary,
    pub databases: Vec<DatabaseView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inventory: Option<InventoryView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease: Option<LeaseView>,
    pub steps: Vec<StepView>,
    /// The actor's login name, when the user still exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actor_name: Option<String>,
    /// The review, once a refresh opened one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewStateView>,
}

/// A review row: pending until its one decision (approved, rejected or expired), who decided
/// and when, and when the window closes.
#[derive(Debug, Clone, Serialize)]
pub struct ReviewStateView {
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
    pub created_at: String,
    pub expires_at: String,
}

impl From<&Review> for ReviewStateView {
    fn from(review: &Review) -> Self {
        ReviewStateView {
            state: review.state.as_str(),
            actor: review.actor.as_ref().map(ToString::to_string),
            decided_at: review.decided_at.map(instant),
            created_at: instant(review.created_at),
            expires_at: instant(review.expires_at),
        }
    }
}

/// A refresh's review: the review row, the base commit the candidates are compared with, and
/// every changed database's differing files with their unified diffs.
#[derive(Debug, Clone, Serialize)]
pub struct ReviewView {
    pub operation_id: String,
    pub base_commit: String,
    #[serde(flatten)]
    pub review: ReviewStateView,
    pub databases: Vec<DatabaseDiff>,
}

impl From<&ReviewDiff> for ReviewView {
    fn from(diff: &ReviewDiff) -> Self {
        ReviewView {
            operation_id: diff.operation.to_string(),
            base_commit: diff.base_commit.clone(),
            review: ReviewStateView::from(&diff.review),
            databases: diff.databases.clone(),
        }
    }
}

impl ReviewView {
    /// The review as the command line prints it: each database's name and whether it is
    /// registered, then each differing file's unified diff, every line made printable.
    pub fn to_text(&self) -> String {
        let r = &self.review;
        let mut text = format!(
            "review of operation {}\n  state     {}\n  base      {}\n  expires   {}\n",
            self.operation_id, r.state, self.base_commit, r.expires_at
        );
        if let (Some(actor), Some(at)) = (&r.actor, &r.decided_at) {
            let _ = writeln!(text, "  decided   by {actor} at {at}");
        }
        for database in &self.databases {
            let registered = if database.removed {
                "no longer on the server: removed from the package"
            } else if database.registered {
                "registered"
            } else {
                "not registered"
            };
            let _ = writeln!(
                text,
                "\ndatabase {} ({registered}): {} file(s) differ",
                printable(database.database.as_str()),
                database.files.len()
            );
            write_diffs(&mut text, &database.files);
        }
        text
    }
}

/// A verification's drift diffs, for the API and the command line.
#[derive(Debug, Clone, Serialize)]
pub struct DriftView {
    pub operation_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
    /// When the diffs are deleted (absent while the verification runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_until: Option<String>,
    pub databases: Vec<DatabaseDrift>,
}

impl From<&DriftDiff> for DriftView {
    fn from(drift: &DriftDiff) -> Self {
        DriftView {
            operation_id: drift.operation.to_string(),
            base_commit: drift.base_commit.clone(),
            kept_until: drift.kept_until.map(instant),
            databases: drift.databases.clone(),
        }
    }
}

impl DriftView {
    /// The drift as the command line prints it: each drifted database, then each differing
    /// file's unified diff, every line made printable.
    pub fn to_text(&self) -> String {
        let mut text = format!("drift found by verification {}\n", self.operation_id);
        if let Some(commit) = &self.base_commit {
            let _ = writeln!(text, "  base      {commit}");
        }
        if let Some(until) = &self.kept_until {
            let _ = writeln!(text, "  kept to   {until}");
        }
        if self.databases.is_empty() {
            text.push_str("\nno database drifted\n");
        }
        for database in &self.databases {
            let _ = writeln!(
                text,
                "\ndatabase {}: {} file(s) differ",
                printable(database.database.as_str()),
                database.files.len()
            );
            write_diffs(&mut text, &database.files);
        }
        text
    }
}

/// Appends every line of each file's unified diff to `text`, made printable.
fn write_diffs(text: &mut String, files: &[FileDiff]) {
    for file in files {
        for line in file.diff.lines() {
            let _ = writeln!(text, "{}", printable(line));
        }
    }
}

/// One step of the operation: its attempts, and the latest error (retried, or final).
#[derive(Debug, Clone, Serialize)]
pub struct StepView {
    pub key: String,
    pub state: &'static str,
    pub attempts: u32,
    pub started_at: String,
    pub heartbeat_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorView>,
}

impl From<&OperationStep> for StepView {
    fn from(step: &OperationStep) -> Self {
        StepView {
            key: step.key.as_str().to_owned(),
            state: step.state.as_str(),
            attempts: step.attempts,
            started_at: instant(step.started_at),
            heartbeat_at: instant(step.heartbeat_at),
            finished_at: step.terminal_at.map(instant),
            error: step.error.as_ref().map(ErrorView::from),
        }
    }
}

impl From<&OperationReport> for OperationView {
    fn from(report: &OperationReport) -> Self {
        OperationView {
            summary: OperationSummary::from(&report.operation),
            databases: report.databases.iter().map(DatabaseView::from).collect(),
            inventory: report.inventory.as_ref().map(InventoryView::from),
            lease: report.lease.as_ref().map(LeaseView::from),
            steps: report.steps.iter().map(StepView::from).collect(),
            actor_name: report.actor_name.clone(),
            review: report.review.as_ref().map(ReviewStateView::from),
        }
    }
}

impl OperationView {
    /// The report as the command line prints it.
    pub fn to_text(&self) -> String {
        let s = &self.summary;
        let mut text = format!(
            "operation {}\n  kind      {}\n  state     {}\n  actor     {}\n  created   {}\n",
            s.id,
            s.kind,
            s.state,
            self.actor_name.as_deref().unwrap_or(&s.actor),
            s.created_at
        );
        if let Some(finished) = &s.finished_at {
            let _ = writeln!(text, "  finished  {finished}");
        }
        if let Some(run) = &s.run_id {
            let _ = writeln!(text, "  run       {run}");
        }
        if let Some(pull) = &s.pull_request {
            let _ = writeln!(
                text,
                "  pull      #{} {} ({} onto {})",
                pull.number,
                printable(&pull.url),
                printable(&pull.head),
                printable(&pull.base)
            );
        }
        if let Some(error) = &s.error {
            let _ = writeln!(
                text,
                "  error     {} ({}): {}",
                error.code.name(),
                error.stage.name(),
                printable(&error.message)
            );
        }
        if let Some(lease) = &self.lease {
            let _ = writeln!(
                text,
                "  lease     {} until {}",
                lease.status, lease.expires_at
            );
        }
        if let Some(review) = &self.review {
            let _ = writeln!(
                text,
                "  review    {} (window closes {})",
                review.state, review.expires_at
            );
        }
        if let Some(inventory) = &self.inventory {
            let _ = writeln!(
                text,
                "  inventory {} from {} ({}), expires {}",
                inventory.id,
                inventory.discovered_at,
                inventory.server_version,
                inventory.expires_at
            );
            if s.kind == "inventory" {
                let _ = writeln!(text, "  databases ({}):", inventory.databases.len());
                for name in &inventory.databases {
                    let _ = writeln!(text, "    {}", printable(name));
                }
                if !inventory.ignored.is_empty() {
                    let _ = writeln!(
                        text,
                        "  ignored by ignore_databases ({}):",
                        inventory.ignored.len()
                    );
                    for name in &inventory.ignored {
                        let _ = writeln!(text, "    {}", printable(name));
                    }
                }
            }
        }
        for step in &self.steps {
            let _ = write!(
                text,
                "  step {}  {} after {} attempt(s)",
                step.key, step.state, step.attempts
            );
            if let Some(error) = &step.error {
                let _ = write!(
                    text,
                    "  {}: {}",
                    error.code.name(),
                    printable(&error.message)
                );
            }
            text.push('\n');
        }
        for database in &self.databases {
            let _ = write!(text, "  {}  {}", printable(&database.name), database.state);
            if let (Some(outcome), Some(freshness)) = (database.outcome, database.freshness) {
                let _ = write!(text, "  {outcome}/{freshness}");
            }
            if let Some(error) = &database.error {
                let _ = write!(
                    text,
                    "  {}: {}",
                    error.code.name(),
                    printable(&error.message)
                );
            }
            text.push('\n');
            for difference in &database.differences {
                let _ = writeln!(
                    text,
                    "    {:<8}  {}",
                    difference.change.as_str(),
                    printable(&difference.path)
                );
            }
        }
        text
    }
}

/// A result in a database's history: the operation, its kind, when the result was recorded,
/// and what it found.
#[derive(Debug, Clone, Serialize)]
pub struct CheckView {
    pub operation_id: String,
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freshness: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_hash: Option<String>,
}

impl From<&DatabaseCheck> for CheckView {
    fn from(check: &DatabaseCheck) -> Self {
        let report = check.result.report.as_ref();
        CheckView {
            operation_id: check.result.operation.to_string(),
            kind: check.kind.as_str(),
            finished_at: check.result.finished_at.map(instant),
            outcome: report.map(|r| r.outcome.as_str()),
            freshness: report.map(|r| r.freshness.as_str()),
            snapshot_hash: report.and_then(|r| r.snapshot_hash.clone()),
        }
    }
}

/// A registered database's merged snapshot.
#[derive(Debug, Clone, Serialize)]
pub struct MergedSnapshotView {
    pub snapshot_hash: String,
    pub object_counts: BTreeMap<String, u64>,
    pub generator_version: String,
    /// The operation whose pull request merged it.
    pub operation_id: String,
}

/// One registered database: its merged snapshot, its last verification, and its freshness with
/// the result it was read from.
#[derive(Debug, Clone, Serialize)]
pub struct RegisteredDatabaseView {
    pub name: String,
    pub merged: MergedSnapshotView,
    pub freshness: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_verification: Option<CheckView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checked: Option<CheckView>,
}

impl From<&RegisteredDatabase> for RegisteredDatabaseView {
    fn from(registered: &RegisteredDatabase) -> Self {
        let snapshot = &registered.snapshot;
        RegisteredDatabaseView {
            name: registered.database.to_string(),
            merged: MergedSnapshotView {
                snapshot_hash: snapshot.snapshot_hash.clone(),
                object_counts: snapshot.object_counts.clone(),
                generator_version: snapshot.generator_version.clone(),
                operation_id: snapshot.operation_id.to_string(),
            },
            freshness: registered.freshness.as_str(),
            last_verification: registered.last_verification.as_ref().map(CheckView::from),
            checked: registered.checked.as_ref().map(CheckView::from),
        }
    }
}

/// The package registry at the base branch's head.
#[derive(Debug, Clone, Serialize)]
pub struct RegistryView {
    pub base_commit: String,
    pub databases: Vec<RegisteredDatabaseView>,
}

impl From<&RegistryReport> for RegistryView {
    fn from(report: &RegistryReport) -> Self {
        RegistryView {
            base_commit: report.base_commit.clone(),
            databases: report
                .databases
                .iter()
                .map(RegisteredDatabaseView::from)
                .collect(),
        }
    }
}

impl RegistryView {
    /// The registry as the command line prints it: a line per database with its freshness,
    /// counts and merged snapshot, and one for its last verification.
    pub fn to_text(&self) -> String {
        let mut text = format!(
            "registry at {}: {} database(s)\n",
            self.base_commit,
            self.databases.len()
        );
        for database in &self.databases {
            let merged = &database.merged;
            let counts = merged
                .object_counts
                .iter()
                .map(|(category, count)| format!("{count} {category}"))
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(
                text,
                "  {}  {}  {counts}\n    merged    {} by operation {} ({})",
                printable(&database.name),
                database.freshness,
                merged.snapshot_hash,
                merged.operation_id,
                printable(&merged.generator_version),
            );
            match &database.last_verification {
                Some(check) => {
                    let _ = writeln!(
                        text,
                        "    verified  {} by operation {}: {}",
                        check.finished_at.as_deref().unwrap_or("-"),
                        check.operation_id,
                        check.outcome.unwrap_or("-"),
                    );
                }
                None => text.push_str("    verified  never\n"),
            }
        }
        text
    }
}

/// A database name for a terminal: control characters are escaped so a name cannot move the
/// cursor or fake another line.
pub fn printable(name: &str) -> String {
    name.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_unicode().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}
