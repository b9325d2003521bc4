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

use std::collections::BTreeMap;
use std::fmt::Write as _;

use fermata_forge::{CommitSpec, PullRequest, PullRequestSpec, Signature, TreeChange};
use fermata_schema_core::{ErrorCode, SafeError, Subject};
use fermata_store::Storage;
use fermata_store::schema::{DatabaseResult, Freshness, OperationId, Outcome};
use serde::Deserialize;

use crate::artifact::ArtifactStore;
use crate::package::{Package, REGISTRY_FILE, RegisteredSnapshot};
use crate::safe_context::{SafeCode, SafeContext, because};

/// Who publication commits as.
const COMMITTER_NAME: &str = "Fermata";
const COMMITTER_EMAIL: &str = "fermata@localhost";

/// The head branch of an operation's pull request.
pub fn branch_name(operation: OperationId) -> String {
    format!("fermata/refresh-{operation}")
}

/// The part of the artifact's manifest publication needs.
#[derive(Deserialize)]
struct Manifest {
    databases: BTreeMap<String, ManifestEntry>,
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
        let manifest: Manifest = serde_json::from_str(&contents.manifest).or_code(
            ErrorCode::ArtifactUnavailable,
            "read the artifact's manifest",
        )?;
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
        let spec = PullRequestSpec {
            head,
            base: self.package.settings().base_branch.clone(),
            title: format!(
                "Schema snapshots: {changed} database{} changed",
                if changed == 1 { "" } else { "s" }
            ),
            body: description(self.operation, &results),
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
/// failure (and whether its merged snapshot is now stale), then how many were unchanged.
pub(crate) fn description(operation: OperationId, results: &[DatabaseResult]) -> String {
    let mut text = format!("Schema snapshots from Fermata refresh `{operation}`.\n");
    let mut section = |title: &str, lines: Vec<String>| {
        if !lines.is_empty() {
            let _ = write!(text, "\n### {title}\n\n");
            for line in lines {
                let _ = writeln!(text, "- {line}");
            }
        }
    };
    let quoted = |row: &DatabaseResult| format!("`{}`", row.database.as_str().replace('`', "``"));
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
                    format!("{} ({})", quoted(row), counts.join(", "))
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
                    quoted(row),
                    error.message()
                ))
            })
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
