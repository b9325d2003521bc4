//! Operations, reviews, drift diffs and the registry as people and scripts read them: the JSON of the no-store
//! routes and of the command line's `--json`, and the lines the command line prints. Instants are RFC 3339 on
//! the database's clock; errors are the safe error's four fields and nothing else.
//!
//! A drifted or reviewed database's migration scripts ([`MigrationView`]) travel here as data
//! (each statement, marked when destructive, the workspace's verdict with its reason, the notes)
//! with the ready-made client script beside it, destructive statements left out; the command
//! line's text shows one summary line per script, and [`script_file`] the whole scripts on
//! request. None of it is logged or stored: it is built for one answer from a sealed object.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use fermata_schema_core::{DatabaseName, ErrorCode, ErrorStage, SafeError, Subject};
use fermata_store::UnixMillis;
use fermata_store::schema::{
    DatabaseCheck, DatabaseResult, FileDifference, Inventory, Operation, OperationStep,
    PullRequest, Review, SchemaLease,
};
use serde::Serialize;

use crate::drift::{DatabaseDrift, DriftDiff};
use crate::lint::Finding;
use crate::migration::{Direction, Migration, Script, Verification, comment};
use crate::operations::OperationReport;
use crate::registry_view::{RegisteredDatabase, RegistryReport};
use crate::review::{DatabaseDiff, FileDiff, ReviewDiff};
use crate::snapshot::render::identifier;

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

/// One statement of a migration script.
#[derive(Debug, Clone, Serialize)]
pub struct StatementView {
    /// The statement as shown, without a terminator.
    pub sql: String,
    /// Why it loses data, when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive: Option<String>,
}

/// One migration script: what the workspace said of it, its statements and notes, and the
/// script for the `mysql`/`mariadb` client.
#[derive(Debug, Clone, Serialize)]
pub struct ScriptView {
    /// `{"state": "verified"}`, or `failed` (it does not give the target: never run it as is) or
    /// `unverified` (no workspace is configured, or it could not be used), with a `reason`.
    pub verification: Verification,
    /// Every statement in the order it runs, destructive ones included and marked.
    pub statements: Vec<StatementView>,
    /// Renames that were not guessed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// How many statements lose data.
    pub destructive: usize,
    /// The script as a file for the client ([`Script::text`]), destructive statements left out.
    pub text: String,
    /// [`Script::summary`].
    #[serde(skip)]
    headline: String,
}

impl ScriptView {
    /// `script`, a script of `database`.
    pub fn new(database: &str, script: &Script) -> Self {
        ScriptView {
            verification: script.verification.clone(),
            statements: script
                .statements
                .iter()
                .map(|statement| StatementView {
                    sql: statement.sql.clone(),
                    destructive: statement.destructive.clone(),
                })
                .collect(),
            notes: script.notes.clone(),
            destructive: script.destructive_count(),
            text: script.text(database, false),
            headline: script.summary(),
        }
    }

    /// The script in one line: `3 statements, verified; 1 destructive left out`.
    pub fn summary(&self) -> String {
        let mut line = self.headline.clone();
        if self.destructive > 0 {
            let _ = write!(line, "; {} destructive left out", self.destructive);
        }
        line
    }
}

/// A database's two migration scripts.
#[derive(Debug, Clone, Serialize)]
pub struct MigrationView {
    /// Live (or the refresh's candidate) → merged snapshot.
    pub undo: ScriptView,
    /// Merged snapshot → live (or the candidate): the migration that made the change.
    pub adopt: ScriptView,
}

impl MigrationView {
    /// `migration`, the scripts of `database`.
    pub fn new(database: &str, migration: &Migration) -> Self {
        MigrationView {
            undo: ScriptView::new(database, &migration.undo),
            adopt: ScriptView::new(database, &migration.adopt),
        }
    }

    /// Both scripts with their directions, undo first.
    pub fn scripts(&self) -> [(Direction, &ScriptView); 2] {
        [
            (Direction::Undo, &self.undo),
            (Direction::Adopt, &self.adopt),
        ]
    }
}

/// Appends a line per script of `migration` (its summary, then its notes) to `text`, or
/// `missing` when there is none.
fn write_migration(text: &mut String, migration: Option<&MigrationView>, missing: &str) {
    match migration {
        Some(migration) => {
            for (direction, script) in migration.scripts() {
                let _ = writeln!(
                    text,
                    "  {}: {}",
                    direction.as_str(),
                    printable(&script.summary())
                );
                for note in &script.notes {
                    let _ = writeln!(text, "    note: {}", printable(note));
                }
            }
        }
        None => {
            let _ = writeln!(text, "  {missing}");
        }
    }
}

/// The scripts going `direction` of `databases`, one after another, as one file for the
/// `mysql`/`mariadb` client: each script selects its database with its own `USE` (see
/// [`Script::text`]); a database without a script is a comment line saying why, and the file
/// goes on.
pub fn script_file<'a>(
    databases: impl IntoIterator<Item = (&'a DatabaseName, Result<&'a Migration, &'a str>)>,
    direction: Direction,
    allow_destructive: bool,
) -> String {
    let mut file = String::new();
    for (database, migration) in databases {
        if !file.is_empty() {
            file.push('\n');
        }
        match migration {
            Ok(migration) => {
                file.push_str(
                    &migration
                        .script(direction)
                        .text(database.as_str(), allow_destructive),
                );
            }
            Err(why) => {
                let _ = writeln!(
                    file,
                    "-- {}: no {} script: {}.",
                    comment(&identifier(database.as_str())),
                    direction.as_str(),
                    comment(why)
                );
            }
        }
    }
    file
}

/// One changed database of a review: its files, its migration scripts and its lint findings.
#[derive(Debug, Clone, Serialize)]
pub struct ReviewDatabaseView {
    pub database: DatabaseName,
    /// Whether the database has a merged snapshot (else every file is added).
    pub registered: bool,
    /// Whether the refresh removes it from the package (every file is removed).
    pub removed: bool,
    /// The files that differ, in path order, with their unified diffs (`a/` merged, `b/` the
    /// candidate).
    pub files: Vec<FileDiff>,
    /// Absent for a database the refresh removes, when the merged snapshot's model could not be
    /// read, and in an artifact written before scripts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migration: Option<MigrationView>,
    /// The candidate's lint findings (`[]`: none); absent for a database the refresh removes and
    /// in an artifact written before lint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lint: Option<Vec<Finding>>,
}

impl ReviewDatabaseView {
    /// Why the database has no migration script, when it has none.
    pub fn no_script(&self) -> &'static str {
        no_review_script(self.removed, self.lint.is_some())
    }
}

/// A refresh's review: the review row, the base commit the candidates are compared with, and
/// every changed database's differing files with their unified diffs, migration scripts and
/// lint findings.
#[derive(Debug, Clone, Serialize)]
pub struct ReviewView {
    pub operation_id: String,
    pub base_commit: String,
    #[serde(flatten)]
    pub review: ReviewStateView,
    pub databases: Vec<ReviewDatabaseView>,
}

impl From<&ReviewDiff> for ReviewView {
    fn from(diff: &ReviewDiff) -> Self {
        ReviewView {
            operation_id: diff.operation.to_string(),
            base_commit: diff.base_commit.clone(),
            review: ReviewStateView::from(&diff.review),
            databases: diff
                .databases
                .iter()
                .map(|database| ReviewDatabaseView {
                    database: database.database.clone(),
                    registered: database.registered,
                    removed: database.removed,
                    files: database.files.clone(),
                    migration: database
                        .notes
                        .as_ref()
                        .and_then(|notes| notes.migration.as_ref())
                        .map(|migration| MigrationView::new(database.database.as_str(), migration)),
                    lint: database.notes.as_ref().map(|notes| notes.lint.clone()),
                })
                .collect(),
        }
    }
}

impl ReviewView {
    /// The review as the command line prints it: each database's name and whether it is
    /// registered, a line per migration script, its lint findings, then each differing file's
    /// unified diff, every line made printable.
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
            if !database.removed {
                let missing = format!("no migration script: {}", database.no_script());
                write_migration(&mut text, database.migration.as_ref(), &missing);
            }
            match database.lint.as_deref() {
                None => {}
                Some([]) => text.push_str("  lint: no findings\n"),
                Some(findings) => {
                    let _ = writeln!(text, "  lint: {} finding(s)", findings.len());
                    for finding in findings {
                        let _ = writeln!(
                            text,
                            "    {:<7}  {}  {}: {}",
                            finding.severity.id(),
                            finding.rule.id(),
                            printable(&finding.object),
                            printable(&finding.message)
                        );
                    }
                }
            }
            write_diffs(&mut text, &database.files);
        }
        if self
            .databases
            .iter()
            .any(|database| database.migration.is_some())
        {
            let _ = writeln!(
                text,
                "\n`fermata schema review {} --ddl [--direction adopt]` prints the scripts.",
                self.operation_id
            );
        }
        text
    }
}

/// One drifted database: the files that differ with their unified diffs (`a/` merged, `b/`
/// live), and its migration scripts.
#[derive(Debug, Clone, Serialize)]
pub struct DriftDatabaseView {
    pub database: DatabaseName,
    pub files: Vec<FileDiff>,
    /// Absent for drift sealed before scripts were, or when the merged snapshot's model could
    /// not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migration: Option<MigrationView>,
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
    pub databases: Vec<DriftDatabaseView>,
}

impl From<&DriftDiff> for DriftView {
    fn from(drift: &DriftDiff) -> Self {
        DriftView {
            operation_id: drift.operation.to_string(),
            base_commit: drift.base_commit.clone(),
            kept_until: drift.kept_until.map(instant),
            databases: drift
                .databases
                .iter()
                .map(|database| DriftDatabaseView {
                    database: database.database.clone(),
                    files: database.files.clone(),
                    migration: database
                        .migration
                        .as_ref()
                        .map(|migration| MigrationView::new(database.database.as_str(), migration)),
                })
                .collect(),
        }
    }
}

impl DriftView {
    /// The drift as the command line prints it: each drifted database with a line per
    /// migration script, then each differing file's unified diff, every line made printable.
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
            write_migration(
                &mut text,
                database.migration.as_ref(),
                &format!("no migration script: {NO_DRIFT_SCRIPT}"),
            );
            write_diffs(&mut text, &database.files);
        }
        if self
            .databases
            .iter()
            .any(|database| database.migration.is_some())
        {
            let _ = writeln!(
                text,
                "\n`fermata schema drift {} --ddl [--direction adopt]` prints the scripts.",
                self.operation_id
            );
        }
        text
    }
}

/// Why a drifted database has no migration script.
pub const NO_DRIFT_SCRIPT: &str =
    "the drift was sealed before scripts were, or the merged snapshot's model could not be read";

/// A drifted database's scripts, or why it has none (for [`script_file`]).
pub fn drift_scripts(database: &DatabaseDrift) -> Result<&Migration, &'static str> {
    database.migration.as_ref().ok_or(NO_DRIFT_SCRIPT)
}

/// A reviewed database's scripts, or why it has none (for [`script_file`]).
pub fn review_scripts(database: &DatabaseDiff) -> Result<&Migration, &'static str> {
    database
        .notes
        .as_ref()
        .and_then(|notes| notes.migration.as_ref())
        .ok_or_else(|| no_review_script(database.removed, database.notes.is_some()))
}

/// Why a reviewed database has no migration script: the refresh removes it, its review notes
/// were written before scripts were, or (`has_notes`) the merged model could not be read.
fn no_review_script(removed: bool, has_notes: bool) -> &'static str {
    if removed {
        "the refresh removes the database from the package"
    } else if has_notes {
        "the merged snapshot's model could not be read"
    } else {
        "the review was written before scripts were"
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

#[cfg(test)]
mod tests {
    use fermata_store::schema::{FileChange, OperationId};

    use super::*;
    use crate::drift::DatabaseDrift;
    use crate::lint::{Rule, Severity};
    use crate::migration::Statement;
    use crate::snapshot::model::Flavor;

    fn script(direction: Direction, verification: Verification) -> Script {
        let mut dropped = Statement {
            sql: "ALTER TABLE `orders` DROP COLUMN `note`".to_owned(),
            destructive: Some("drops column `note` and its values".to_owned()),
            definer_clause: None,
            compound: false,
        };
        let added = Statement {
            sql: "ALTER TABLE `orders` ADD COLUMN `placed` date".to_owned(),
            destructive: None,
            ..dropped.clone()
        };
        if direction == Direction::Adopt {
            dropped.destructive = None;
        }
        Script {
            direction,
            flavor: Flavor::Mariadb,
            statements: vec![dropped, added],
            notes: vec!["a rename is never guessed".to_owned()],
            verification,
        }
    }

    fn migration() -> Migration {
        Migration {
            undo: script(Direction::Undo, Verification::Verified),
            adopt: script(
                Direction::Adopt,
                Verification::Failed {
                    reason: "the workspace refused statement 2 of 2 with error 1064".to_owned(),
                },
            ),
        }
    }

    fn drift() -> DriftDiff {
        DriftDiff {
            operation: OperationId::generate(),
            base_commit: Some("abc123".to_owned()),
            kept_until: None,
            databases: vec![
                DatabaseDrift {
                    database: DatabaseName::new("app").unwrap(),
                    files: vec![FileDiff {
                        path: "tables/orders.sql".to_owned(),
                        change: FileChange::Modified,
                        diff: "--- a/tables/orders.sql\n+++ b/tables/orders.sql\n".to_owned(),
                    }],
                    migration: Some(migration()),
                },
                DatabaseDrift {
                    database: DatabaseName::new("old\nname").unwrap(),
                    files: Vec::new(),
                    migration: None,
                },
            ],
        }
    }

    #[test]
    fn drift_json_carries_each_script_as_data_and_text_without_destructive_statements() {
        let view = DriftView::from(&drift());
        let json = serde_json::to_value(&view).unwrap();
        let undo = &json["databases"][0]["migration"]["undo"];
        assert_eq!(
            undo["verification"],
            serde_json::json!({"state": "verified"})
        );
        assert_eq!(undo["destructive"], 1);
        assert_eq!(
            undo["statements"][0]["destructive"],
            "drops column `note` and its values"
        );
        assert!(undo["statements"][1].get("destructive").is_none());
        assert_eq!(undo["notes"][0], "a rename is never guessed");
        let text = undo["text"].as_str().unwrap();
        assert!(text.contains("USE `app`;\n"), "{text}");
        assert!(!text.contains("DROP COLUMN"), "{text}");
        assert_eq!(
            json["databases"][0]["migration"]["adopt"]["verification"],
            serde_json::json!({
                "state": "failed",
                "reason": "the workspace refused statement 2 of 2 with error 1064",
            })
        );
        assert!(json["databases"][1].get("migration").is_none());
    }

    #[test]
    fn the_text_summarizes_each_script_in_a_line_and_says_when_there_is_none() {
        let drift = drift();
        let text = DriftView::from(&drift).to_text();
        assert!(
            text.contains(
                "database app: 1 file(s) differ\n  undo: 2 statements, verified; 1 destructive left out\n    note: a rename is never guessed\n  adopt: 2 statements, NOT verified: the workspace refused statement 2 of 2 with error 1064\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("database old\\u{a}name: 0 file(s) differ\n  no migration script: the drift was sealed before scripts were"),
            "{text}"
        );
        assert!(text.ends_with(&format!(
            "`fermata schema drift {} --ddl [--direction adopt]` prints the scripts.\n",
            drift.operation
        )));
    }

    #[test]
    fn the_script_file_puts_every_script_in_one_file_and_comments_a_missing_one() {
        let drift = drift();
        let file = script_file(
            drift
                .databases
                .iter()
                .map(|database| (&database.database, drift_scripts(database))),
            Direction::Undo,
            true,
        );
        let expected = format!(
            "{}\n-- `old\\u{{a}}name`: no undo script: the drift was sealed before scripts were, or the merged snapshot's model could not be read.\n",
            migration().undo.text("app", true)
        );
        assert_eq!(file, expected);
        assert!(file.contains("-- destructive: drops column `note`"));
    }

    #[test]
    fn a_review_shows_scripts_and_lint_findings_per_database() {
        use crate::review::ReviewNotes;
        use fermata_store::schema::{Review, ReviewState};
        let finding = Finding {
            rule: Rule::FloatForMoney,
            severity: Severity::Warning,
            object: "column `orders`.`price`".to_owned(),
            message: "Use DECIMAL.".to_owned(),
        };
        let database = |name: &str, notes: Option<ReviewNotes>, removed: bool| DatabaseDiff {
            database: DatabaseName::new(name).unwrap(),
            registered: true,
            removed,
            files: Vec::new(),
            notes,
        };
        let diff = ReviewDiff {
            operation: OperationId::generate(),
            base_commit: "abc123".to_owned(),
            review: Review {
                operation: OperationId::generate(),
                state: ReviewState::Pending,
                actor: None,
                decided_at: None,
                created_at: fermata_store::UnixMillis(0),
                expires_at: fermata_store::UnixMillis(0),
            },
            databases: vec![
                database(
                    "app",
                    Some(ReviewNotes {
                        migration: Some(migration()),
                        lint: vec![finding],
                    }),
                    false,
                ),
                database(
                    "crm",
                    Some(ReviewNotes {
                        migration: None,
                        lint: Vec::new(),
                    }),
                    false,
                ),
                database("old", None, false),
                database("gone", None, true),
            ],
        };
        let view = ReviewView::from(&diff);
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(
            json["databases"][0]["lint"],
            serde_json::json!([{
                "rule": "float-for-money",
                "severity": "warning",
                "object": "column `orders`.`price`",
                "message": "Use DECIMAL.",
            }])
        );
        assert_eq!(json["databases"][0]["migration"]["undo"]["destructive"], 1);
        assert_eq!(json["databases"][1]["lint"], serde_json::json!([]));
        assert!(json["databases"][2].get("lint").is_none());
        let text = view.to_text();
        assert!(
            text.contains("  lint: 1 finding(s)\n    warning  float-for-money  column `orders`.`price`: Use DECIMAL.\n"),
            "{text}"
        );
        assert!(
            text.contains("database crm (registered): 0 file(s) differ\n  no migration script: the merged snapshot's model could not be read\n  lint: no findings\n"),
            "{text}"
        );
        assert!(
            text.contains("database old (registered): 0 file(s) differ\n  no migration script: the review was written before scripts were\n"),
            "{text}"
        );
        assert!(
            text.contains("database gone (no longer on the server: removed from the package): 0 file(s) differ\n"),
            "{text}"
        );
        let file = script_file(
            diff.databases
                .iter()
                .map(|database| (&database.database, review_scripts(database))),
            Direction::Adopt,
            false,
        );
        assert!(
            file.contains(
                "-- `gone`: no adopt script: the refresh removes the database from the package.\n"
            ),
            "{file}"
        );
    }
}
