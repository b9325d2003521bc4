//! Publication of an approved refresh as one pull request on the forge.
//!
//! What is published is the approved artifact alone: each changed database's folder in the
//! package is replaced by its candidate files, and `registry.json` gains or updates their entries
//! (a failed database keeps its folder and entry; an unregistered failure stays unregistered).
//! The pull request's description lists the changed databases with their counts, and every
//! failure and stale snapshot; then, from the review notes sealed in the artifact, each changed
//! database's adopt-direction migration script (collapsed, verified or not as the workspace
//! said, cut to keep the body within the forge's limit) and the lint findings.
//!
//! Every external write has a stable key from the operation ID and reads the forge's state
//! first, so a crash between any two of them ends with one branch, one commit and one pull
//! request: the parent is chosen once (the reviewed base, or the base branch's new head when the
//! paths the change touches did not change since; otherwise `BASE_CHANGED`, and the artifact is
//! kept for a new refresh), the commit is deterministic (fixed author and committer, the review
//! decision's time, the same parent and tree), the branch `fermata/refresh-<operation>` is
//! created only when absent and must point at that commit when present, and the pull request is
//! looked up by its head branch before one is opened.
//!
//! A write the forge answers with its rate limit is not spent on the runner's short retry
//! schedule: [`Paced`] records the wait the forge asked for (its `retry-after`, else the time
//! until its `x-ratelimit-reset` on the database's clock, else a minute) as the step's outcome,
//! sleeps it out durably, and tries the write again in a step of its own (`<key>:2`, ...), as
//! long as the waits add up to no more than `publication_wait`. Past that, the write fails as any
//! other forge failure would.

use std::collections::BTreeMap;
use std::error::Error as StdError;
use std::fmt::Write as _;
use std::future::Future;
use std::time::Duration;

use fermata_forge::{
    CommitSpec, ForgeError, ForgeErrorKind, PullRequest, PullRequestSpec, Signature, TreeChange,
};
use fermata_schema_core::{DatabaseName, ErrorCode, SafeError, Subject};
use fermata_store::Storage;
use fermata_store::schema::{DatabaseResult, Freshness, NewArtifact, OperationId, Outcome};
use fermata_workflow::{RunContext, RunError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::artifact::ArtifactStore;
use crate::migration::{Script, plural};
use crate::names;
use crate::package::{Package, REGISTRY_FILE, RegisteredSnapshot};
use crate::review::ReviewNotes;
use crate::safe_context::{SafeCode, SafeContext, because};
use crate::snapshot::render::identifier;
use crate::tracked::Progress;
use crate::view::printable;

/// Who publication commits as.
const COMMITTER_NAME: &str = "Fermata";
const COMMITTER_EMAIL: &str = "fermata@localhost";

/// The most characters the description holds: GitHub refuses a body over 65,536, and this
/// leaves room to spare.
const DESCRIPTION_LIMIT: usize = 60_000;

/// The wait when the forge names its rate limit without saying for how long.
const UNSPECIFIED_RATE_LIMIT_WAIT: Duration = Duration::from_secs(60);
/// The shortest wait for a rate limit, so a reset time already past still waits a little.
const SHORTEST_RATE_LIMIT_WAIT: Duration = Duration::from_secs(1);

/// The head branch of an operation's pull request.
pub fn branch_name(operation: OperationId) -> String {
    format!("fermata/refresh-{operation}")
}

/// The part of the artifact's manifest publication needs.
#[derive(Deserialize)]
struct Manifest {
    databases: BTreeMap<String, ManifestEntry>,
    /// Registered databases no longer on the server, removed from the package.
    #[serde(default)]
    removed: Vec<DatabaseName>,
}

impl Manifest {
    fn parse(text: &str) -> Result<Manifest, SafeError> {
        serde_json::from_str(text).or_code(
            ErrorCode::ArtifactUnavailable,
            "read the artifact's manifest",
        )
    }
}

#[derive(Deserialize)]
struct ManifestEntry {
    folder: String,
}

/// One approved refresh's publication.
pub(crate) struct Publication<'a> {
    pub(crate) storage: &'a dyn Storage,
    pub(crate) artifacts: &'a ArtifactStore,
    pub(crate) package: &'a Package,
    pub(crate) operation: OperationId,
}

impl Publication<'_> {
    /// The tree change the approved artifact makes on the package at `base_commit`.
    pub(crate) async fn change(&self, base_commit: &str) -> Result<TreeChange, SafeError> {
        let schema = self.storage.schema();
        let artifact = schema
            .artifact(self.operation)
            .await
            .context("load the artifact record")?
            .ok_or_else(|| SafeError::new(ErrorCode::ArtifactUnavailable))?;
        let contents = self.artifacts.open(&artifact.meta).await?;
        let manifest = Manifest::parse(&contents.manifest)?;
        let results = schema
            .database_results(self.operation)
            .await
            .context("load the database results")?;
        let mut registry = self.package.registry_at(base_commit).await?;
        let mut change = TreeChange::default();
        for (name, entry) in manifest.databases {
            let result = results
                .iter()
                .find(|row| row.database.as_str() == name)
                .and_then(|row| row.report.as_ref().map(|report| (row, report)))
                .filter(|(_, report)| report.outcome == Outcome::Changed)
                .ok_or_else(|| SafeError::new(ErrorCode::ArtifactUnavailable))?;
            let (row, report) = result;
            let prefix = format!("{}/", entry.folder);
            let files: BTreeMap<String, Vec<u8>> = contents
                .files
                .iter()
                .filter_map(|(path, bytes)| {
                    path.strip_prefix(&prefix)
                        .map(|inner| (inner.to_owned(), bytes.clone()))
                })
                .collect();
            registry.register(
                row.database.clone(),
                RegisteredSnapshot {
                    snapshot_hash: report.snapshot_hash.clone().unwrap_or_default(),
                    object_counts: report.object_counts.clone(),
                    generator_version: env!("CARGO_PKG_VERSION").to_owned(),
                    operation_id: self.operation,
                },
            )?;
            change.folders.insert(
                format!("{}/{}", self.package.settings().path, entry.folder),
                files,
            );
        }
        for database in &manifest.removed {
            registry.unregister(database);
            // A folder given no files is removed.
            change.folders.insert(
                format!(
                    "{}/{}",
                    self.package.settings().path,
                    names::file_name(database.as_str())?
                ),
                BTreeMap::new(),
            );
        }
        change.files.insert(
            format!("{}/{REGISTRY_FILE}", self.package.settings().path),
            registry.to_canonical_json(),
        );
        Ok(change)
    }

    /// The commit to publish onto: the reviewed base while it is the base branch's head; the new
    /// head when the base branch moved without changing what `change` touches; otherwise the
    /// permanent `BASE_CHANGED`.
    pub(crate) async fn parent(
        &self,
        base_commit: &str,
        change: &TreeChange,
    ) -> Result<String, SafeError> {
        let head = self
            .package
            .forge()
            .branch_head(&self.package.settings().base_branch)
            .await
            .context("read the base branch")?
            .ok_or_else(|| because(ErrorCode::GithubFailed, "the base branch does not exist"))?;
        if head == base_commit {
            return Ok(head);
        }
        if self
            .package
            .forge()
            .paths_changed(base_commit, &head, &change.touched_paths())
            .await
            .context("compare the base branch's head with the reviewed base")?
        {
            tracing::warn!(operation = %self.operation, "the base branch changed what the pull request would touch");
            return Err(SafeError::about(
                ErrorCode::BaseChanged,
                Subject::Operation(self.operation.0),
            ));
        }
        tracing::info!(operation = %self.operation, "the base branch moved; publishing onto its new head");
        Ok(head)
    }

    /// Creates the deterministic commit of `change` on `parent`, made at `decided_at` (seconds).
    pub(crate) async fn commit(
        &self,
        parent: &str,
        change: TreeChange,
        decided_at: i64,
    ) -> Result<String, SafeError> {
        let spec = CommitSpec {
            parent: parent.to_owned(),
            change,
            message: format!(
                "Schema snapshots from refresh {}\n\nApproved in Fermata; the pull request lists what changed.\n",
                self.operation
            ),
            signature: Signature {
                name: COMMITTER_NAME.to_owned(),
                email: COMMITTER_EMAIL.to_owned(),
                time: decided_at,
            },
        };
        self.package
            .forge()
            .create_commit(&spec)
            .await
            .context("create the commit")
    }

    pub(crate) async fn branch(&self, commit: &str) -> Result<(), SafeError> {
        self.package
            .forge()
            .create_branch(&branch_name(self.operation), commit)
            .await
            .context("create the branch")
    }

    /// The operation's pull request: the one its branch already has, else a new one.
    pub(crate) async fn pull_request(&self) -> Result<PullRequest, SafeError> {
        let head = branch_name(self.operation);
        let found = self.package.forge().find_pull_request(&head).await;
        if let Some(existing) = found.context("look up the pull request")? {
            return Ok(existing);
        }
        let results = self
            .storage
            .schema()
            .database_results(self.operation)
            .await
            .context("load the database results")?;
        let changed = results
            .iter()
            .filter(|row| outcome(row) == Some(Outcome::Changed))
            .count();
        // The names to remove are in the artifact row's manifest, which is not secret.
        let artifact = self
            .storage
            .schema()
            .artifact(self.operation)
            .await
            .context("load the artifact record")?
            .ok_or_else(|| SafeError::new(ErrorCode::ArtifactUnavailable))?;
        let removed = Manifest::parse(&artifact.meta.manifest)?.removed;
        let notes = self.review_notes(&artifact.meta).await?;
        let mut title = format!(
            "Schema snapshots: {changed} database{} changed",
            plural(changed)
        );
        if !removed.is_empty() {
            let _ = write!(title, ", {} removed", removed.len());
        }
        let spec = PullRequestSpec {
            head,
            base: self.package.settings().base_branch.clone(),
            title,
            body: description(self.operation, &results, &removed, &notes),
        };
        self.package
            .forge()
            .open_pull_request(&spec)
            .await
            .context("open the pull request")
    }

    /// The review notes the approved artifact holds, by database name. Notes that do not read
    /// are left out of the description (and logged, without their content): the pull request
    /// still opens.
    async fn review_notes(
        &self,
        artifact: &NewArtifact,
    ) -> Result<BTreeMap<String, ReviewNotes>, SafeError> {
        let contents = self.artifacts.open(artifact).await?;
        let manifest = Manifest::parse(&contents.manifest)?;
        let mut notes = BTreeMap::new();
        for (name, entry) in manifest.databases {
            let Some(bytes) = contents.notes.get(&format!("{}.json", entry.folder)) else {
                continue;
            };
            if let Some(read) = ReviewNotes::read(bytes) {
                notes.insert(name, read);
            }
        }
        Ok(notes)
    }
}

fn outcome(row: &DatabaseResult) -> Option<Outcome> {
    row.report.as_ref().map(|report| report.outcome)
}

/// The pull request's description: the changed databases with their counts, then every
/// failure (and whether its merged snapshot is now stale), the databases removed as no longer
/// on the server, how many were unchanged; then, for each changed database with review notes
/// (`notes`, by name), its adopt-direction migration script in a collapsed block, and the lint
/// findings. Each script block, and the findings, gets a fair share of what the limit leaves
/// ([`DESCRIPTION_LIMIT`]); one too long for it is cut with a line saying how many statements
/// were left out and how to see them all.
pub(crate) fn description(
    operation: OperationId,
    results: &[DatabaseResult],
    removed: &[DatabaseName],
    notes: &BTreeMap<String, ReviewNotes>,
) -> String {
    let mut text = format!("Schema snapshots from Fermata refresh `{operation}`.\n");
    let mut section = |title: &str, lines: Vec<String>| {
        if !lines.is_empty() {
            let _ = write!(text, "\n### {title}\n\n");
            for line in lines {
                let _ = writeln!(text, "- {line}");
            }
        }
    };
    section(
        "Changed",
        results
            .iter()
            .filter_map(|row| {
                let report = row.report.as_ref()?;
                (report.outcome == Outcome::Changed).then(|| {
                    let counts: Vec<String> = report
                        .object_counts
                        .iter()
                        .filter(|(_, count)| **count > 0)
                        .map(|(kind, count)| format!("{count} {kind}"))
                        .collect();
                    format!("{} ({})", quoted(&row.database), counts.join(", "))
                })
            })
            .collect(),
    );
    section(
        "Failed",
        results
            .iter()
            .filter_map(|row| {
                let report = row.report.as_ref()?;
                let error = report.error.as_ref()?;
                let freshness = match report.freshness {
                    Freshness::Stale => "stale: its merged snapshot is kept",
                    _ => "unregistered: not added to the package",
                };
                Some(format!(
                    "{}: {} ({freshness})",
                    quoted(&row.database),
                    error.message()
                ))
            })
            .collect(),
    );
    section(
        "Removed",
        removed
            .iter()
            .map(|name| format!("{}: no longer on the server", quoted(name)))
            .collect(),
    );
    let unchanged = results
        .iter()
        .filter(|row| outcome(row) == Some(Outcome::Unchanged))
        .count();
    if unchanged > 0 {
        let _ = write!(text, "\n{unchanged} selected database(s) did not change.\n");
    }
    let noted: Vec<(&DatabaseName, &ReviewNotes)> = results
        .iter()
        .filter(|row| outcome(row) == Some(Outcome::Changed))
        .filter_map(|row| {
            notes
                .get(row.database.as_str())
                .map(|notes| (&row.database, notes))
        })
        .collect();
    if !noted.is_empty() {
        text.push_str(
            "\n### Migrations\n\nThe adopt script of each changed database: the migration from its merged snapshot to the new one, destructive statements marked.\n\n",
        );
        // The lint section comes last and gets a share too.
        let blocks = noted.len() + 1;
        for (index, (database, notes)) in noted.iter().enumerate() {
            let share = DESCRIPTION_LIMIT.saturating_sub(text.len()) / (blocks - index);
            let block = match &notes.migration {
                Some(migration) => script_block(operation, database, &migration.adopt, share),
                None => format!(
                    "- {}: no migration script: the merged snapshot's model could not be read.\n\n",
                    quoted(database)
                ),
            };
            text.push_str(&block);
        }
        let share = DESCRIPTION_LIMIT.saturating_sub(text.len());
        text.push_str(&lint_section(operation, &noted, share));
    }
    if text.len() > DESCRIPTION_LIMIT {
        // Only a description whose lists alone pass the limit gets here.
        let mut cut = DESCRIPTION_LIMIT - 200;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        let _ = write!(
            text,
            "\n\n(Cut to fit the forge's limit: `fermata schema show {operation}` lists every database.)\n"
        );
    }
    text
}

/// `name` in backquotes, as the description's lists show names.
fn quoted(name: &DatabaseName) -> String {
    identifier(&printable(name.as_str()))
}

/// `text` with the characters HTML gives a meaning escaped, for a `<summary>`.
fn html(text: &str) -> String {
    printable(text)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The collapsed block of `database`'s adopt script `script`, at most `share` long: the whole
/// script, or as many of its first statements as fit and a line saying how many were left out;
/// a line alone when not even one statement fits.
fn script_block(
    operation: OperationId,
    database: &DatabaseName,
    script: &Script,
    share: usize,
) -> String {
    let count = script.statements.len();
    let mut summary = script.summary();
    let destructive = script.destructive_count();
    if destructive > 0 {
        let _ = write!(summary, "; {destructive} destructive, marked");
    }
    let head = format!(
        "<details><summary>Migration of <code>{}</code> (adopt): {}</summary>\n\n",
        html(database.as_str()),
        html(&summary)
    );
    let whole = fenced(&head, &script.text(database.as_str(), true));
    if whole.len() <= share || count == 0 {
        return whole;
    }
    let shown = |kept: usize| {
        let cut = Script {
            statements: script.statements[..kept].to_vec(),
            ..script.clone()
        };
        let mut sql = cut.text(database.as_str(), true);
        let _ = writeln!(
            sql,
            "-- {} of {count} statements left out here to fit the forge's limit; the review showed the whole script (`fermata schema review {operation} --ddl --direction adopt`, before the decision).",
            count - kept
        );
        fenced(&head, &sql)
    };
    // The most statements that fit, found by halving: at least one, fewer than all (none: not
    // even one fits).
    let (mut fits, mut too_many) = (0, count);
    while too_many - fits > 1 {
        let middle = (fits + too_many) / 2;
        if shown(middle).len() <= share {
            fits = middle;
        } else {
            too_many = middle;
        }
    }
    if fits == 0 {
        return format!(
            "- Migration of {} (adopt): {}; too long to show here: the review showed it (`fermata schema review {operation} --ddl --direction adopt`, before the decision).\n\n",
            quoted(database),
            printable(&summary)
        );
    }
    shown(fits)
}

/// `sql` in an `sql` code block after `head`, closed with `</details>`: the fence is longer than
/// any run of backquotes in `sql`, which therefore cannot close it.
fn fenced(head: &str, sql: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in sql.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    format!("{head}{fence}sql\n{sql}{fence}\n</details>\n\n")
}

/// The lint section: each finding of each database in `noted`, at most `share` long; the
/// findings that do not fit are counted instead.
fn lint_section(
    operation: OperationId,
    noted: &[(&DatabaseName, &ReviewNotes)],
    share: usize,
) -> String {
    let total: usize = noted.iter().map(|(_, notes)| notes.lint.len()).sum();
    let mut text = "### Lint\n\n".to_owned();
    if total == 0 {
        text.push_str("No findings.\n");
        return text;
    }
    // Room for the line counting what did not fit.
    let room = share.saturating_sub(200);
    let mut listed = 0;
    'databases: for (database, notes) in noted {
        if notes.lint.is_empty() {
            continue;
        }
        let title = format!("- {}:\n", quoted(database));
        if text.len() + title.len() > room {
            break;
        }
        text.push_str(&title);
        for finding in &notes.lint {
            let line = format!(
                "  - `{}` `{}` {}: {}\n",
                finding.severity.id(),
                finding.rule.id(),
                html(&finding.object),
                html(&finding.message)
            );
            if text.len() + line.len() > room {
                break 'databases;
            }
            text.push_str(&line);
            listed += 1;
        }
    }
    if listed < total {
        let _ = write!(
            text,
            "\n{} more finding(s) left out here to fit the forge's limit; the review listed them all (`fermata schema review {operation}`, before the decision).\n",
            total - listed
        );
    }
    text
}

/// Publication steps that talk to the forge, recorded with `progress`, waiting out the forge's
/// rate limits in durable sleeps up to `wait_limit` in all (see the module documentation).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Paced<'a> {
    pub(crate) progress: Progress<'a>,
    pub(crate) wait_limit: Duration,
}

/// What a paced step came to: its value, or the forge's request to wait before trying again.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Pacing<T> {
    Done(T),
    Wait { millis: u64 },
}

impl Paced<'_> {
    /// Runs step `key` with `body`; a rate limit whose wait fits in what is left of the limit
    /// is slept out and the body runs again in step `<key>:<try>`.
    pub(crate) async fn step<T, F, Fut>(
        &self,
        ctx: &mut RunContext,
        key: &str,
        mut body: F,
    ) -> Result<T, RunError>
    where
        T: Serialize + DeserializeOwned + Send,
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, SafeError>> + Send,
    {
        let storage = self.progress.storage;
        let mut waited = Duration::ZERO;
        let mut tries: u32 = 1;
        loop {
            let step_key = if tries == 1 {
                key.to_owned()
            } else {
                format!("{key}:{tries}")
            };
            let remaining = self.wait_limit.saturating_sub(waited);
            let paced: Pacing<T> = self
                .progress
                .step(ctx, &step_key, |_| {
                    let tried = body();
                    async move {
                        match tried.await {
                            Ok(value) => Ok(Pacing::Done(value)),
                            Err(error) => match requested_wait(storage, &error).await {
                                Some(wait) if wait <= remaining => Ok(Pacing::Wait {
                                    millis: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                                }),
                                _ => Err(error),
                            },
                        }
                    }
                })
                .await?;
            match paced {
                Pacing::Done(value) => return Ok(value),
                Pacing::Wait { millis } => {
                    let wait = Duration::from_millis(millis);
                    tracing::info!(operation = %self.progress.operation, step = %step_key, wait_ms = millis, "the forge asked to wait; publication sleeps");
                    ctx.sleep(&format!("{step_key}:wait"), wait).await?;
                    waited += wait;
                    tries += 1;
                }
            }
        }
    }
}

/// How long the forge asked to wait, when `error` is its rate limit: its `retry-after`, else
/// the time until its reset on the database's clock, else [`UNSPECIFIED_RATE_LIMIT_WAIT`].
async fn requested_wait(storage: &dyn Storage, error: &SafeError) -> Option<Duration> {
    if error.code() != ErrorCode::GithubRateLimited {
        return None;
    }
    let mut cause: Option<&(dyn StdError + 'static)> = error.source();
    let limit = loop {
        let current = cause?;
        if let Some(forge) = current.downcast_ref::<ForgeError>() {
            break forge.kind();
        }
        cause = current.source();
    };
    let ForgeErrorKind::RateLimited { retry_after, reset } = limit else {
        return None;
    };
    let wait = match (retry_after, reset) {
        (Some(wait), _) => wait,
        (None, Some(reset)) => {
            // Unreadable, the clock leaves the wait unknown: the step fails as usual.
            let now = storage.schema().clock().await.ok()?;
            let reset_ms = i64::try_from(reset).ok()?.saturating_mul(1000);
            Duration::from_millis(u64::try_from(reset_ms.saturating_sub(now.0)).unwrap_or(0))
        }
        (None, None) => UNSPECIFIED_RATE_LIMIT_WAIT,
    };
    Some(wait.max(SHORTEST_RATE_LIMIT_WAIT))
}

#[cfg(test)]
mod tests {
    use fermata_store::schema::DatabaseReport;

    use super::*;
    use crate::lint::{Finding, Rule, Severity};
    use crate::migration::{Direction, Migration, Statement, Verification};
    use crate::snapshot::model::Flavor;

    fn changed(operation: OperationId, name: &str, position: u32) -> DatabaseResult {
        DatabaseResult {
            operation,
            database: DatabaseName::new(name).unwrap(),
            position,
            started_at: None,
            finished_at: None,
            report: Some(DatabaseReport {
                outcome: Outcome::Changed,
                freshness: Freshness::Fresh,
                object_counts: BTreeMap::from([("tables".to_owned(), 2)]),
                snapshot_hash: None,
                merged_hash: None,
                differences: Vec::new(),
                error: None,
            }),
        }
    }

    fn script(
        direction: Direction,
        statements: Vec<Statement>,
        verification: Verification,
    ) -> Script {
        Script {
            direction,
            flavor: Flavor::Mariadb,
            statements,
            notes: Vec::new(),
            verification,
        }
    }

    fn notes(adopt: Script, lint: Vec<Finding>) -> ReviewNotes {
        ReviewNotes {
            migration: Some(Migration {
                undo: script(Direction::Undo, Vec::new(), Verification::Verified),
                adopt,
            }),
            lint,
        }
    }

    fn statement(sql: &str) -> Statement {
        Statement {
            sql: sql.to_owned(),
            destructive: None,
            definer_clause: None,
            compound: false,
        }
    }

    #[test]
    fn the_description_carries_each_adopt_script_collapsed_and_the_lint_findings() {
        let operation = OperationId::generate();
        let results = [
            changed(operation, "app <&>", 0),
            changed(operation, "crm", 1),
        ];
        let mut dropped = statement("ALTER TABLE `orders` DROP COLUMN `note`");
        dropped.destructive = Some("drops column `note`".to_owned());
        let app = script(
            Direction::Adopt,
            vec![
                statement("ALTER TABLE `orders` ADD COLUMN `a```` int"),
                dropped,
            ],
            Verification::Verified,
        );
        let crm = script(
            Direction::Adopt,
            vec![statement("CREATE TABLE `t` (`id` int)")],
            Verification::Failed {
                reason: "the result differs from the target in tables/t.sql".to_owned(),
            },
        );
        let finding = Finding {
            rule: Rule::NoPrimaryKey,
            severity: Severity::Warning,
            object: "table `t`".to_owned(),
            message: "Add a primary key.".to_owned(),
        };
        let all = BTreeMap::from([
            ("app <&>".to_owned(), notes(app.clone(), Vec::new())),
            ("crm".to_owned(), notes(crm, vec![finding])),
        ]);
        let text = description(operation, &results, &[], &all);
        assert!(text.contains("### Migrations"), "{text}");
        // The name is escaped in the summary; the destructive statement is in, marked.
        assert!(
            text.contains(
                "<details><summary>Migration of <code>app &lt;&amp;&gt;</code> (adopt): 2 statements, verified; 1 destructive, marked</summary>\n\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("-- destructive: drops column `note`\n"),
            "{text}"
        );
        // A run of four backquotes in the SQL: the fence is five long.
        assert!(
            text.contains(&format!(
                "`````sql\n{}`````\n</details>",
                app.text("app <&>", true)
            )),
            "{text}"
        );
        assert!(
            text.contains(
                "Migration of <code>crm</code> (adopt): 1 statement, NOT verified: the result differs from the target in tables/t.sql</summary>"
            ),
            "{text}"
        );
        assert!(
            text.contains("### Lint\n\n- `crm`:\n  - `warning` `no-primary-key` table `t`: Add a primary key.\n"),
            "{text}"
        );
        assert!(text.find("### Migrations") < text.find("### Lint"));
    }

    #[test]
    fn an_unverified_script_and_no_findings_are_said_and_no_notes_means_no_sections() {
        let operation = OperationId::generate();
        let results = [changed(operation, "app", 0)];
        let app = script(
            Direction::Adopt,
            vec![statement("CREATE TABLE `t` (`id` int)")],
            Verification::Unverified {
                reason: "no verification workspace is configured ([schema.workspace])".to_owned(),
            },
        );
        let all = BTreeMap::from([("app".to_owned(), notes(app, Vec::new()))]);
        let text = description(operation, &results, &[], &all);
        assert!(
            text.contains("(adopt): 1 statement, unverified: no verification workspace is configured ([schema.workspace])</summary>"),
            "{text}"
        );
        assert!(text.ends_with("### Lint\n\nNo findings.\n"), "{text}");
        let unreadable = BTreeMap::from([(
            "app".to_owned(),
            ReviewNotes {
                migration: None,
                lint: Vec::new(),
            },
        )]);
        let text = description(operation, &results, &[], &unreadable);
        assert!(
            text.contains(
                "- `app`: no migration script: the merged snapshot's model could not be read."
            ),
            "{text}"
        );
        let text = description(operation, &results, &[], &BTreeMap::new());
        assert!(
            !text.contains("### Migrations") && !text.contains("### Lint"),
            "{text}"
        );
    }

    #[test]
    fn long_scripts_and_findings_are_cut_to_keep_the_body_within_the_limit() {
        let operation = OperationId::generate();
        let names: Vec<String> = (0..3).map(|n| format!("db{n}")).collect();
        let results: Vec<_> = names
            .iter()
            .zip(0..)
            .map(|(name, position)| changed(operation, name, position))
            .collect();
        let long = |name: &str| {
            script(
                Direction::Adopt,
                (0..2_000)
                    .map(|n| statement(&format!("CREATE TABLE `{name}_table_{n}` (`id` int NOT NULL, `note` varchar(200) DEFAULT NULL)")))
                    .collect(),
                Verification::Verified,
            )
        };
        let findings: Vec<Finding> = (0..2_000)
            .map(|n| Finding {
                rule: Rule::NoPrimaryKey,
                severity: Severity::Warning,
                object: format!("table `t{n}`"),
                message: "The table has no primary key: add one.".to_owned(),
            })
            .collect();
        let all: BTreeMap<String, ReviewNotes> = names
            .iter()
            .map(|name| (name.clone(), notes(long(name), findings.clone())))
            .collect();
        let text = description(operation, &results, &[], &all);
        assert!(text.len() <= DESCRIPTION_LIMIT, "{}", text.len());
        let hint = format!(
            "statements left out here to fit the forge's limit; the review showed the whole script (`fermata schema review {operation} --ddl --direction adopt`, before the decision)."
        );
        assert_eq!(text.matches(&hint).count(), 3, "{text}");
        assert_eq!(text.matches("</details>").count(), 3);
        assert!(
            text.contains(&format!(
                "more finding(s) left out here to fit the forge's limit; the review listed them all (`fermata schema review {operation}`, before the decision)."
            )),
            "{text}"
        );
        // Every block is still closed: its fence opens and closes.
        assert_eq!(text.matches("```sql\n").count(), 3);
        assert_eq!(text.matches("```\n</details>").count(), 3);
    }
}
