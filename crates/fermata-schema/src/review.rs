//! Reviewing a refresh: the per-database diff of its candidate files against the merged files,
//! with the review notes the refresh sealed beside them ([`ReviewNotes`]: migration scripts and
//! lint findings), and the one decision (approve or reject) a fresh system administrator makes.
//!
//! The diff is computed on demand: the review artifact is fetched and decrypted in this
//! process, compared with the package's files at the operation's reviewed base commit, and
//! returned; the plaintext is never stored. A decision is a conditional update of the review row
//! that selects exactly one terminal decision, recorded with its actor and time, followed by the
//! decision hook that resumes the refresh's run (idempotency key `review:<operation ID>`). When
//! that delivery fails, the decision stands: the same request again delivers it, and so does
//! [`Reviews::resume_decided`], which a serving process runs periodically; a run that never hears
//! of it reads it from the review row when its review window closes.

use std::collections::BTreeMap;
use std::sync::Arc;

use fermata_schema_core::{DatabaseName, ErrorCode, SafeError, Subject};
use fermata_store::Storage;
pub use fermata_store::schema::FileChange;
use fermata_store::schema::{
    ArtifactState, Decided, Decision, FileDifference, Operation, OperationId, OperationState,
    Review, ReviewState,
};
use serde::{Deserialize, Serialize};
use similar::TextDiff;

use crate::admin::Administrator;
use crate::artifact::ArtifactStore;
use crate::lint::Finding;
use crate::migration::Migration;
use crate::operations::Workflows;
use crate::package::Package;
use crate::refresh_run::REVIEW_HOOK;
use crate::safe_context::{SafeCode, SafeContext};

/// What the reviewer decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Approve,
    Reject,
}

/// One file that differs, with its unified diff (`a/` is merged, `b/` the candidate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDiff {
    pub path: String,
    pub change: FileChange,
    pub diff: String,
}

/// What a refresh found out about a changed database besides its files, sealed in the review
/// artifact and never published as a file: both migration scripts between its merged snapshot
/// and the candidate, and the candidate's lint findings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewNotes {
    /// `None` when the merged snapshot's model could not be read.
    pub migration: Option<Migration>,
    pub lint: Vec<Finding>,
}

impl ReviewNotes {
    /// Notes as sealed; `None`, logged without their content, when they do not read (notes of
    /// another format leave the rest of the review readable).
    pub(crate) fn read(bytes: &[u8]) -> Option<ReviewNotes> {
        let value = serde_json::from_slice(bytes)
            .inspect_err(|error| {
                tracing::warn!(class = ?error.classify(), "review notes do not read; they are left out");
            })
            .ok()?;
        crate::drift::read_leniently(value, "review notes")
    }
}

/// One changed database: the files that differ, in path order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DatabaseDiff {
    pub database: DatabaseName,
    /// Whether the database has a merged snapshot (else every file is added).
    pub registered: bool,
    /// Whether the refresh removes it from the package, as no longer on the server (every file
    /// is removed).
    pub removed: bool,
    pub files: Vec<FileDiff>,
    /// The review notes; `None` for a database the refresh removes, and in an artifact written
    /// before notes.
    pub notes: Option<ReviewNotes>,
}

/// A refresh's review: the review row and the diff of every changed database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewDiff {
    pub operation: OperationId,
    pub base_commit: String,
    pub review: Review,
    pub databases: Vec<DatabaseDiff>,
}

/// The part of the artifact's manifest the diff needs.
#[derive(Deserialize)]
struct Manifest {
    databases: BTreeMap<String, ManifestEntry>,
    #[serde(default)]
    removed: Vec<DatabaseName>,
}

#[derive(Deserialize)]
struct ManifestEntry {
    folder: String,
}

/// The review service.
#[derive(Clone)]
pub struct Reviews {
    storage: Arc<dyn Storage>,
    workflows: Arc<dyn Workflows>,
    artifacts: ArtifactStore,
    package: Option<Package>,
}

impl std::fmt::Debug for Reviews {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reviews").finish_non_exhaustive()
    }
}

impl Reviews {
    pub fn new(
        storage: Arc<dyn Storage>,
        workflows: Arc<dyn Workflows>,
        artifacts: ArtifactStore,
        package: Option<Package>,
    ) -> Self {
        Reviews {
            storage,
            workflows,
            artifacts,
            package,
        }
    }

    /// Records `verdict` as the review's one decision, by a fresh administrator, and resumes the
    /// refresh. The same administrator repeating the same decision gets the operation again
    /// (and the hook delivered again); any other decision after the first is refused.
    pub async fn decide(
        &self,
        admin: &Administrator,
        id: OperationId,
        verdict: Verdict,
    ) -> Result<Operation, SafeError> {
        admin.require_fresh()?;
        let schema = self.storage.schema();
        let about = Subject::Operation(id.0);
        let operation = self.operation(id).await?;
        let not_pending = || SafeError::about(ErrorCode::ReviewNotPending, about.clone());
        let Some(run_id) = operation.run_id.clone() else {
            return Err(not_pending());
        };
        let (decision, wanted) = match verdict {
            Verdict::Approve => (
                Decision::Approve(admin.user().clone()),
                ReviewState::Approved,
            ),
            Verdict::Reject => (
                Decision::Reject(admin.user().clone()),
                ReviewState::Rejected,
            ),
        };
        let review = schema
            .review(id)
            .await
            .context("load the review")?
            .ok_or_else(not_pending)?;
        if review.state == ReviewState::Pending && operation.state != OperationState::AwaitingReview
        {
            return Err(not_pending());
        }
        match schema
            .decide_review(id, &decision)
            .await
            .context("record the review decision")?
        {
            Decided::Recorded(review) => {
                tracing::info!(operation = %id, actor = %admin.user(), decision = review.state.as_str(), "review decided");
            }
            Decided::Refused(review)
                if review.state == wanted && review.actor.as_ref() == Some(admin.user()) => {}
            Decided::Refused(review)
                if matches!(review.state, ReviewState::Pending | ReviewState::Expired) =>
            {
                return Err(SafeError::new(ErrorCode::ReviewExpired));
            }
            Decided::Refused(_) => return Err(not_pending()),
        }
        self.resume(&run_id, id, wanted).await?;
        self.operation(id).await
    }

    /// Delivers the decision hook again to every refresh among the latest `scan` operations that
    /// still awaits its review although the review was decided (the deciding process stopped
    /// between the two writes); returns how many it resumed. The hook's idempotency key makes a
    /// repeated delivery harmless.
    pub async fn resume_decided(&self, scan: u32) -> Result<usize, SafeError> {
        let schema = self.storage.schema();
        let mut resumed = 0;
        let operations = schema
            .recent_operations(scan)
            .await
            .context("list the recent operations")?;
        for operation in operations {
            if operation.state != OperationState::AwaitingReview {
                continue;
            }
            let Some(run_id) = &operation.run_id else {
                continue;
            };
            let decided = schema
                .review(operation.id)
                .await
                .context("load the review")?
                .filter(|review| {
                    matches!(review.state, ReviewState::Approved | ReviewState::Rejected)
                });
            if let Some(review) = decided {
                self.resume(run_id, operation.id, review.state).await?;
                resumed += 1;
            }
        }
        Ok(resumed)
    }

    async fn resume(
        &self,
        run_id: &str,
        id: OperationId,
        decision: ReviewState,
    ) -> Result<(), SafeError> {
        let payload = serde_json::json!({ "decision": decision.as_str() });
        self.workflows
            .resume(run_id, REVIEW_HOOK, &format!("review:{id}"), &payload)
            .await
    }

    /// The diff of every database in the refresh's review artifact against its merged files at
    /// the reviewed base commit.
    pub async fn diff(
        &self,
        _admin: &Administrator,
        id: OperationId,
    ) -> Result<ReviewDiff, SafeError> {
        let schema = self.storage.schema();
        let operation = self.operation(id).await?;
        let not_pending =
            || SafeError::about(ErrorCode::ReviewNotPending, Subject::Operation(id.0));
        let review = schema
            .review(id)
            .await
            .context("load the review")?
            .ok_or_else(not_pending)?;
        // A consumed or discarded artifact is being deleted: its review is over.
        let artifact = schema
            .artifact(id)
            .await
            .context("load the artifact record")?
            .filter(|artifact| artifact.state == ArtifactState::Stored)
            .ok_or_else(not_pending)?;
        let base_commit = operation
            .reviewed_base_commit
            .ok_or_else(|| SafeError::new(ErrorCode::RunUnreadable))?;
        let package = self
            .package
            .as_ref()
            .ok_or_else(|| SafeError::new(ErrorCode::PackageNotConfigured))?;
        let contents = self.artifacts.open(&artifact.meta).await?;
        let manifest: Manifest = serde_json::from_str(&contents.manifest).or_code(
            ErrorCode::ArtifactUnavailable,
            "read the artifact's manifest",
        )?;
        let mut databases = Vec::with_capacity(manifest.databases.len());
        for (name, entry) in manifest.databases {
            let database = DatabaseName::new(name).or_code(
                ErrorCode::ArtifactUnavailable,
                "read a database name in the artifact's manifest",
            )?;
            let prefix = format!("{}/", entry.folder);
            let candidate: BTreeMap<&str, &[u8]> = contents
                .files
                .iter()
                .filter_map(|(path, bytes)| {
                    path.strip_prefix(&prefix)
                        .map(|inner| (inner, bytes.as_slice()))
                })
                .collect();
            let merged = package.merged_files(&base_commit, &database).await?;
            let notes = contents
                .notes
                .get(&format!("{}.json", entry.folder))
                .and_then(|bytes| ReviewNotes::read(bytes));
            databases.push(DatabaseDiff {
                registered: merged.is_some(),
                removed: false,
                files: file_diffs(&merged.unwrap_or_default(), &candidate),
                database,
                notes,
            });
        }
        for database in manifest.removed {
            let merged = package
                .merged_files(&base_commit, &database)
                .await?
                .unwrap_or_default();
            databases.push(DatabaseDiff {
                registered: true,
                removed: true,
                files: file_diffs(&merged, &BTreeMap::new()),
                database,
                notes: None,
            });
        }
        Ok(ReviewDiff {
            operation: id,
            base_commit,
            review,
            databases,
        })
    }

    async fn operation(&self, id: OperationId) -> Result<Operation, SafeError> {
        self.storage
            .schema()
            .operation(id)
            .await
            .context("load the operation")?
            .ok_or_else(|| SafeError::about(ErrorCode::OperationMissing, Subject::Operation(id.0)))
    }
}

/// The files that differ between `merged` and `candidate`, in path order, and how.
fn differing_files(
    merged: &BTreeMap<String, Vec<u8>>,
    candidate: &BTreeMap<&str, &[u8]>,
) -> Vec<FileDifference> {
    let mut paths: Vec<&str> = merged.keys().map(String::as_str).collect();
    paths.extend(candidate.keys().copied());
    paths.sort_unstable();
    paths.dedup();
    paths
        .into_iter()
        .filter_map(|path| {
            let change = match (merged.get(path), candidate.get(path)) {
                (Some(old), Some(new)) if old.as_slice() == *new => return None,
                (Some(_), Some(_)) => FileChange::Modified,
                (None, _) => FileChange::Added,
                (_, None) => FileChange::Removed,
            };
            Some(FileDifference {
                path: path.to_owned(),
                change,
            })
        })
        .collect()
}

/// The files that differ between `merged` and `candidate`, in path order, with their diffs.
pub(crate) fn file_diffs(
    merged: &BTreeMap<String, Vec<u8>>,
    candidate: &BTreeMap<&str, &[u8]>,
) -> Vec<FileDiff> {
    differing_files(merged, candidate)
        .into_iter()
        .map(|FileDifference { path, change }| {
            let old = merged.get(&path).map(Vec::as_slice).unwrap_or_default();
            let new = candidate.get(path.as_str()).copied().unwrap_or_default();
            let diff = TextDiff::from_lines(
                String::from_utf8_lossy(old).as_ref(),
                String::from_utf8_lossy(new).as_ref(),
            )
            .unified_diff()
            .context_radius(3)
            .header(&format!("a/{path}"), &format!("b/{path}"))
            .to_string();
            FileDiff { path, change, diff }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_differing_files_are_listed_with_unified_diffs() {
        let merged = BTreeMap::from([
            (
                "tables/a.sql".to_owned(),
                b"CREATE TABLE a (\n  x int\n)\n".to_vec(),
            ),
            (
                "tables/gone.sql".to_owned(),
                b"CREATE TABLE gone (x int)\n".to_vec(),
            ),
            ("views/v.sql".to_owned(), b"same\n".to_vec()),
        ]);
        let candidate: BTreeMap<&str, &[u8]> = BTreeMap::from([
            (
                "tables/a.sql",
                b"CREATE TABLE a (\n  x int,\n  y int\n)\n".as_slice(),
            ),
            ("tables/new.sql", b"CREATE TABLE new (x int)\n".as_slice()),
            ("views/v.sql", b"same\n".as_slice()),
        ]);
        let diffs = file_diffs(&merged, &candidate);
        let listed: Vec<(&str, FileChange)> = diffs
            .iter()
            .map(|diff| (diff.path.as_str(), diff.change))
            .collect();
        assert_eq!(
            listed,
            [
                ("tables/a.sql", FileChange::Modified),
                ("tables/gone.sql", FileChange::Removed),
                ("tables/new.sql", FileChange::Added),
            ]
        );
        assert_eq!(
            diffs[0].diff,
            "--- a/tables/a.sql\n+++ b/tables/a.sql\n@@ -1,3 +1,4 @@\n CREATE TABLE a (\n-  x int\n+  x int,\n+  y int\n )\n"
        );
    }
}
