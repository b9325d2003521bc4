//! Publication of an approved refresh as one pull request on the forge.
//!
//! What is published is the approved artifact alone: each changed database's folder in the
//! package is replaced by its candidate files, and `registry.json` gains or updates their entries
//! (a failed database keeps its folder and entry; an unregistered failure stays unregistered).
//! The pull request's description lists the changed databases with their counts, and every
//! failure and stale snapshot.
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
use fermata_store::schema::{DatabaseResult, Freshness, OperationId, Outcome};
use fermata_workflow::{RunContext, RunError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::artifact::ArtifactStore;
use crate::names;
use crate::package::{Package, REGISTRY_FILE, RegisteredSnapshot};
use crate::safe_context::{SafeCode, SafeContext, because};
use crate::tracked::Progress;

/// Who publication commits as.
const COMMITTER_NAME: &str = "Fermata";
const COMMITTER_EMAIL: &str = "fermata@localhost";

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
        let plural = |count: usize| if count == 1 { "" } else { "s" };
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
            body: description(self.operation, &results, &removed),
        };
        self.package
            .forge()
            .open_pull_request(&spec)
            .await
            .context("open the pull request")
    }
}

fn outcome(row: &DatabaseResult) -> Option<Outcome> {
    row.report.as_ref().map(|report| report.outcome)
}

/// The pull request's description: the changed databases with their counts, then every
/// failure (and whether its merged snapshot is now stale), the databases removed as no longer
/// on the server, then how many were unchanged.
pub(crate) fn description(
    operation: OperationId,
    results: &[DatabaseResult],
    removed: &[DatabaseName],
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
    let quoted = |name: &DatabaseName| format!("`{}`", name.as_str().replace('`', "``"));
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
