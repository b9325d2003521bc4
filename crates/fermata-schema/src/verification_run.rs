//! The verification workflow: whether each selected database's live schema still matches its
//! merged snapshot in the package. It holds the global lease from its start to its end and,
//! like the refresh whose first steps it shares (`database_run.rs`), runs:
//!
//! 1. `bind`, `load` (the inventory first, then the selection checked against it again) and
//!    `base` (the registry at the base branch's current commit, recorded on the operation).
//! 2. `database:<position>`, one durable step per selected database, one after another. A
//!    database the registry does not list fails as `unregistered` with
//!    `DATABASE_NOT_REGISTERED`. Otherwise the database must still be visible; it is snapshotted
//!    with the table filter its merged manifest records (so like is compared with like, whatever
//!    the configuration says now; the configured filter only for a manifest older than filters)
//!    over a bounded set of connections and snapshotted again over as many new ones (a schema
//!    that changed meanwhile is the retried `SCHEMA_CHANGED`), and the snapshot hash is compared
//!    with the registry's: the same hash is `unchanged` and `fresh`; another is `changed` and
//!    `stale`, the result listing every file of the live snapshot that differs from the merged
//!    files at the base commit (added, removed or modified; `manifest.json`, which holds only
//!    the others' hashes, is left out), and the unified diff of each sealed in the object store
//!    (see [`crate::drift`]) with both migration scripts between the two schemas (undo and
//!    adopt, see [`crate::migration`]), each verified in the workspace when one is configured. A database that could not be checked is `failed` and
//!    `stale`, and the next one runs; transient errors are retried by the runner's schedule,
//!    permanent ones are not.
//! 3. `finish` ends the operation `succeeded` and releases the lease; when every database
//!    failed, the operation fails with the first one's error instead.
//!
//! Nothing is written but the application database's rows and the sealed drift diffs: no file,
//! no review artifact, no publication. The results, differing files included, are the
//! operation's own rows, which outlive the workflow run.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use fermata_schema_core::{DatabaseName, ErrorCode, SafeError, Subject};
use fermata_store::Storage;
use fermata_store::schema::{
    DatabaseReport, FileDifference, Freshness, OperationId, OperationKind, Outcome,
    SCHEMA_LEASE_TTL,
};
use fermata_workflow::{Attempt, RunContext, RunError, Workflow};
use serde_json::Value;

use crate::artifact::ArtifactStore;
use crate::database_run::{
    LiveSnapshot, Selected, StepOutcome, database_steps, finish_succeeded, first_steps,
    recorded_outcome,
};
use crate::drift::SealedDrift;
use crate::engine::workflow_name;
use crate::inventory_run::run_operation;
use crate::notify::{EventKind, Notifier};
use crate::package::{Package, Registry};
use crate::review::file_diffs;
use crate::safe_context::{SafeCode, SafeContext};
use crate::snapshot::DatabaseSnapshot;
use crate::source::SourceSettings;
use crate::tracked::Progress;

/// The snapshot file that is not compared: it holds the other files' hashes.
const MANIFEST: &str = "manifest.json";

/// What a verification works with.
#[derive(Debug, Clone)]
pub struct VerificationSettings {
    /// The MySQL source; without it every verification fails with `SOURCE_NOT_CONFIGURED`.
    pub source: Option<SourceSettings>,
    /// The target repository; without it every verification fails with
    /// `PACKAGE_NOT_CONFIGURED`.
    pub package: Option<Package>,
    /// The most introspection connections a database step opens.
    pub connections: usize,
    /// What snapshots leave out (`[schema] ignore_tables`).
    pub filter: crate::Filter,
    /// Where drifted databases' diffs are sealed.
    pub artifacts: ArtifactStore,
    /// The verification workspace server: when set, a drifted database's migration scripts are
    /// verified there.
    pub workspace: Option<SourceSettings>,
}

/// A seam for fault injection: called in every database step once the live snapshot is taken
/// and before it is checked again. Tests fail, delay or alter the schema here, or look at the
/// lease; the default does nothing.
#[async_trait]
pub trait SnapshotProbe: Send + Sync + std::fmt::Debug {
    async fn snapshot_taken(
        &self,
        _database: &DatabaseName,
        _attempt: Attempt,
    ) -> Result<(), SafeError> {
        Ok(())
    }
}

#[derive(Debug)]
struct NoProbe;

impl SnapshotProbe for NoProbe {}

/// The verification workflow.
#[derive(Clone)]
pub struct VerificationWorkflow {
    storage: Arc<dyn Storage>,
    settings: Arc<VerificationSettings>,
    probe: Arc<dyn SnapshotProbe>,
    /// Where drift and failures are told.
    notifier: Notifier,
}

impl std::fmt::Debug for VerificationWorkflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerificationWorkflow")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl VerificationWorkflow {
    pub fn new(storage: Arc<dyn Storage>, settings: VerificationSettings) -> Self {
        VerificationWorkflow {
            storage,
            settings: Arc::new(settings),
            probe: Arc::new(NoProbe),
            notifier: Notifier::default(),
        }
    }

    /// Tells `notifier` when a verification finds drift or fails.
    #[must_use]
    pub fn with_notifier(mut self, notifier: Notifier) -> Self {
        self.notifier = notifier;
        self
    }

    /// Calls `probe` in every database step (fault injection).
    #[must_use]
    pub fn with_probe(mut self, probe: Arc<dyn SnapshotProbe>) -> Self {
        self.probe = probe;
        self
    }

    async fn execute(&self, ctx: &mut RunContext, id: OperationId) -> Result<Value, RunError> {
        let storage = &*self.storage;
        let settings = &*self.settings;
        let leased = Progress {
            storage,
            operation: id,
            lease_ttl: Some(SCHEMA_LEASE_TTL),
        };
        let Selected {
            databases: selected,
            base,
            registry,
        } = first_steps(&leased, ctx, &settings.source, &settings.package).await?;
        let changed = database_steps(
            &leased,
            ctx,
            &selected,
            &registry,
            |position, database, attempt| {
                self.database(id, position, database, &base.commit, &registry, attempt)
            },
        )
        .await?;
        finish_succeeded(&leased, ctx).await?;
        if !changed.is_empty() {
            self.notifier
                .emit(storage, EventKind::Drift, id, None)
                .await?;
        }
        tracing::info!(operation = %id, databases = selected.len(), changed = changed.len(), "verification ended");
        Ok(serde_json::json!({ "changed": changed.len() }))
    }

    /// One database's step body.
    async fn database(
        &self,
        id: OperationId,
        position: u32,
        database: &DatabaseName,
        commit: &str,
        registry: &Registry,
        attempt: Attempt,
    ) -> Result<StepOutcome, SafeError> {
        let schema = self.storage.schema();
        if !schema
            .begin_database(id, database)
            .await
            .context("record that a database's step began")?
        {
            // An earlier attempt recorded the result and died before the journal did.
            return recorded_outcome(&*self.storage, id, database).await;
        }
        let merged = registry.get(database).ok_or_else(|| {
            SafeError::about(
                ErrorCode::DatabaseNotRegistered,
                Subject::Database(database.clone()),
            )
        })?;
        let source = self
            .settings
            .source
            .as_ref()
            .ok_or_else(|| SafeError::new(ErrorCode::SourceNotConfigured))?;
        // Like with like: the merged snapshot's own filter, when its manifest records one.
        let filter = self.merged_filter(commit, database).await?;
        let live = LiveSnapshot::take(source, database, self.settings.connections, &filter).await?;
        self.probe.snapshot_taken(database, attempt).await?;
        live.verify_again(source, database).await?;

        let (outcome, freshness, differences) = if live.snapshot.snapshot_hash
            == merged.snapshot_hash
        {
            (Outcome::Unchanged, Freshness::Fresh, Vec::new())
        } else {
            let mut merged_files = self.merged_files(commit, database).await?;
            let candidate: BTreeMap<&str, &[u8]> = live
                .snapshot
                .files
                .iter()
                .filter(|(path, _)| path.as_str() != MANIFEST)
                .map(|(path, bytes)| (path.as_str(), bytes.as_slice()))
                .collect();
            let manifest = merged_files.remove(MANIFEST);
            let diffs = file_diffs(&merged_files, &candidate);
            merged_files.extend(manifest.map(|bytes| (MANIFEST.to_owned(), bytes)));
            let migration = match DatabaseSnapshot::from_files(merged_files) {
                Some(merged) => Some(
                    live.migration(&merged, self.settings.workspace.as_ref())
                        .await,
                ),
                None => {
                    tracing::warn!(database = %database, "the merged snapshot's model cannot be read; the drift has no migration script");
                    None
                }
            };
            let differences = diffs
                .iter()
                .map(|diff| FileDifference {
                    path: diff.path.clone(),
                    change: diff.change,
                })
                .collect();
            let sealed = serde_json::to_vec(&SealedDrift {
                files: diffs,
                migration,
            })
            .or_code(ErrorCode::ArtifactUnavailable, "write a drift diff")?;
            // Written before the result row: a retry writes it again at the same place.
            self.settings
                .artifacts
                .seal_drift(id, position, sealed)
                .await?;
            (Outcome::Changed, Freshness::Stale, differences)
        };
        let report = DatabaseReport {
            outcome,
            freshness,
            object_counts: live.object_counts(),
            snapshot_hash: Some(live.snapshot.snapshot_hash.clone()),
            merged_hash: Some(merged.snapshot_hash.clone()),
            differences,
            error: None,
        };
        schema
            .finish_database(id, database, &report)
            .await
            .context("record a database's result")?;
        tracing::info!(operation = %id, position, outcome = outcome.as_str(), differing = report.differences.len(), "database verified");
        Ok(StepOutcome { outcome })
    }

    /// The filter to snapshot `database` with: the one its merged manifest at `commit`
    /// records, else the configured one (a snapshot merged before manifests recorded filters).
    async fn merged_filter(
        &self,
        commit: &str,
        database: &DatabaseName,
    ) -> Result<crate::Filter, SafeError> {
        let package = self
            .settings
            .package
            .as_ref()
            .ok_or_else(|| SafeError::new(ErrorCode::PackageNotConfigured))?;
        let recorded = package.merged_filter(commit, database).await?;
        match recorded {
            Some(filter) => {
                if filter.ignore_tables != self.settings.filter.ignore_tables {
                    tracing::info!(database = %database, "the merged snapshot was taken with another table filter than the configured one; the verification uses the merged one");
                }
                Ok(filter)
            }
            None => Ok(self.settings.filter.clone()),
        }
    }

    /// The database's merged files at `commit`.
    async fn merged_files(
        &self,
        commit: &str,
        database: &DatabaseName,
    ) -> Result<BTreeMap<String, Vec<u8>>, SafeError> {
        let package = self
            .settings
            .package
            .as_ref()
            .ok_or_else(|| SafeError::new(ErrorCode::PackageNotConfigured))?;
        package
            .merged_files(commit, database)
            .await?
            // The registry at this commit listed it: the same commit cannot say otherwise.
            .ok_or_else(|| SafeError::new(ErrorCode::GithubFailed))
    }
}

#[async_trait]
impl Workflow for VerificationWorkflow {
    fn name(&self) -> &'static str {
        workflow_name(OperationKind::Verification)
    }

    async fn run(&self, ctx: &mut RunContext, input: Value) -> Result<Value, RunError> {
        run_operation(&*self.storage, &self.notifier, ctx, input, |ctx, id| {
            self.execute(ctx, id)
        })
        .await
    }
}
