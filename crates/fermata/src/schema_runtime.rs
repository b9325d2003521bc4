//! Schema operations at run time: the workflow engine with the schema workflows registered
//! (inventory, refresh and verification, the schedule's and the notifications'), the operations, review and registry services over it,
//! the data folder's schema
//! folders, and the background work of a serving process (a workflow worker, the start of the
//! next scheduled check and the retention of ended runs).
//!
//! The data folder holds `schema-artifacts/` and `schema-drift/`, the local object store of
//! staged candidates, review artifacts and verifications' drift diffs (sealed with the process
//! keyring; an S3-compatible bucket instead when
//! `[schema.artifacts]` names one), and `tmp/`, where each refresh step makes
//! its own `refresh-*` folder and removes it when the step ends. A process killed mid-step leaves
//! its folder behind; [`sweep_scratch`] removes such leftovers before a process starts executing
//! runs itself (`serve` once it holds the writer lease, the command line when no server serves).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use fermata_accounts::KeyringHandle;
use fermata_forge::github::GitHub;
use fermata_forge::local::LocalGit;
use fermata_metrics::Metrics;
use fermata_schema::artifact::{ARTIFACT_FOLDER, ArtifactStore};
use fermata_schema::package::Package;
use fermata_schema::{
    DriftDiffs, EngineWorkflows, InventoryWorkflow, Notifier, NotifyWorkflow, Operations,
    RefreshSettings, RefreshWorkflow, RegistryReports, Reviews, ScheduleWorkflow,
    VerificationSettings, VerificationWorkflow,
};
use fermata_store::{ErrorChain, Storage};
use fermata_workflow::{Engine, WorkerSettings};
use tokio_util::sync::CancellationToken;

use crate::config::{SchemaSettings, ensure_data_dir};
use crate::failure::Failure;

/// How long an ended run is kept before it is purged. Operations, their results and their step
/// rows are kept: a report stays readable after its run is gone.
pub(crate) const RUN_RETENTION: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// How often ended runs are purged.
const PURGE_EVERY: Duration = Duration::from_secs(60 * 60);
/// How many of the latest operations the periodic settling looks at.
const SETTLE_SCAN: u32 = 200;
/// How often inventories whose run is gone are ended, and refreshes whose decision hook was
/// lost are resumed.
const SETTLE_EVERY: Duration = Duration::from_secs(60);
/// The data folder's scratch folder, in which refresh steps make their temporary folders.
const SCRATCH_FOLDER: &str = "tmp";
/// How the temporary folder of a refresh step is named (the workflow's own prefix).
const STEP_FOLDER_PREFIX: &str = "refresh-";

/// The engine and the schema services of one process.
#[derive(Debug, Clone)]
pub(crate) struct SchemaRuntime {
    pub(crate) engine: Engine,
    /// Scheduled drift checks (`[schema.schedule]`).
    pub(crate) schedule: ScheduleWorkflow,
    pub(crate) operations: Operations,
    /// Review diffs and decisions of refreshes.
    pub(crate) reviews: Reviews,
    /// The package registry with each database's last verification and freshness.
    pub(crate) registry: RegistryReports,
    /// Verifications' drift diffs, and their retention.
    pub(crate) drift: DriftDiffs,
    /// The data folder's scratch folder, swept before this process executes runs.
    scratch: PathBuf,
}

impl SchemaRuntime {
    /// The runtime over `storage`, with the artifact store and scratch folder in `data_dir`
    /// (both created when missing) and artifacts sealed by `keys`.
    pub(crate) async fn new(
        storage: Arc<dyn Storage>,
        settings: &SchemaSettings,
        data_dir: &Path,
        keys: Arc<KeyringHandle>,
    ) -> Result<Self, Failure> {
        let scratch = data_dir.join(SCRATCH_FOLDER);
        let artifact_root = data_dir.to_owned();
        let folder = scratch.clone();
        let bucket = settings.artifacts.clone();
        let artifacts = tokio::task::spawn_blocking(move || {
            let created =
                ensure_data_dir(&artifact_root).and_then(|()| std::fs::create_dir_all(&folder));
            created.map_err(|error| {
                Failure::runtime(format!("cannot create {}: {error}", folder.display()))
            })?;
            if let Some(bucket) = &bucket {
                return ArtifactStore::s3(bucket, keys).map_err(|error| {
                    Failure::runtime("cannot use the review artifact bucket `schema.artifacts`")
                        .with_source(error)
                });
            }
            // The store's keys start with `schema-artifacts/`, so its root is the data folder.
            ArtifactStore::local(&artifact_root, keys).map_err(|error| {
                Failure::runtime(format!(
                    "cannot use the review artifact folder {}",
                    artifact_root.join(ARTIFACT_FOLDER).display()
                ))
                .with_source(error)
            })
        })
        .await
        .map_err(|error| {
            Failure::runtime(format!("preparing the schema folders failed: {error}"))
        })??;

        // The package's repository (or its GitHub repository) is the forge refreshes read it
        // from and publish to.
        let package = match (&settings.package, &settings.github) {
            (None, _) => None,
            (Some(package), None) => Some(Package::on(
                package,
                Arc::new(LocalGit::new(&package.repository)),
            )),
            (Some(package), Some(github)) => {
                let forge = GitHub::new(github.clone()).map_err(|error| {
                    Failure::runtime(format!("cannot use the GitHub package: {error}"))
                })?;
                Some(Package::on(package, Arc::new(forge)))
            }
        };
        let notifier = Notifier::new(settings.notify.as_ref());
        let notify = NotifyWorkflow::new(Arc::clone(&storage), settings.notify.clone()).map_err(
            |error| Failure::runtime("cannot build the webhook client").with_source(error),
        )?;
        let refresh = RefreshWorkflow::new(
            Arc::clone(&storage),
            RefreshSettings {
                source: settings.source.clone(),
                workspace: settings.workspace.clone(),
                package: package.clone(),
                artifacts: artifacts.clone(),
                scratch: scratch.clone(),
                review_window: settings.review_window,
                connections: settings.connections,
                filter: settings.filter.clone(),
                publication_wait: settings.publication_wait,
                lint: settings.lint.clone(),
            },
        )
        .with_notifier(notifier.clone());
        let verification = VerificationWorkflow::new(
            Arc::clone(&storage),
            VerificationSettings {
                source: settings.source.clone(),
                package: package.clone(),
                connections: settings.connections,
                filter: settings.filter.clone(),
                artifacts: artifacts.clone(),
                workspace: settings.workspace.clone(),
            },
        )
        .with_notifier(notifier.clone());
        let engine = Engine::new(Arc::clone(&storage))
            .register(
                InventoryWorkflow::new(Arc::clone(&storage), settings.source.clone())
                    .with_filter(settings.filter.clone())
                    .with_notifier(notifier.clone()),
            )
            .register(refresh)
            .register(verification)
            .register(notify);
        // The operations start the three operation workflows; the schedule's workflow, which
        // requests operations, is registered after them, on the engine workers execute.
        let workflows = Arc::new(EngineWorkflows::new(engine.clone()));
        let operations =
            Operations::new(Arc::clone(&storage), workflows.clone()).with_notifier(notifier);
        let operations = match &package {
            Some(package) => operations.with_forge(package.forge_handle()),
            None => operations,
        };
        let schedule = ScheduleWorkflow::new(
            Arc::clone(&storage),
            operations.clone(),
            settings.schedule,
            package.clone(),
        );
        let engine = engine.register(schedule.clone());
        let registry = RegistryReports::new(Arc::clone(&storage), package.clone());
        let drift = DriftDiffs::new(
            Arc::clone(&storage),
            artifacts.clone(),
            settings.drift_retention,
        );
        let reviews = Reviews::new(storage, workflows, artifacts, package);
        Ok(SchemaRuntime {
            engine,
            schedule,
            operations,
            reviews,
            registry,
            drift,
            scratch,
        })
    }

    /// Removes the refresh step folders an earlier process left in the scratch folder. Only a
    /// process about to execute runs calls it, since the folders of steps in flight elsewhere
    /// would go too: a step whose folder vanishes fails with a retryable error and runs again.
    pub(crate) async fn sweep_scratch(&self) {
        let scratch = self.scratch.clone();
        let swept = tokio::task::spawn_blocking(move || sweep(&scratch)).await;
        match swept {
            Ok(Ok(0)) => {}
            Ok(Ok(removed)) => {
                tracing::info!(
                    removed,
                    "removed refresh step folders an earlier process left"
                );
            }
            Ok(Err(error)) => {
                tracing::warn!(error = %ErrorChain(&error), "could not sweep the scratch folder");
            }
            Err(error) => {
                tracing::warn!(error = %ErrorChain(&error), "sweeping the scratch folder failed")
            }
        }
    }

    /// Executes runs (recording their step attempts in `metrics`), starts the run of the next
    /// scheduled check (once per due time, checked with the settling), ends inventories whose run
    /// is gone and purges old runs until `stop` is cancelled.
    pub(crate) async fn work(
        &self,
        worker_name: String,
        metrics: Arc<Metrics>,
        stop: CancellationToken,
    ) {
        let worker = self
            .engine
            .clone()
            .with_metrics(metrics)
            .worker(worker_name, WorkerSettings::default());
        let purge = async {
            loop {
                if let Err(error) = self.engine.purge(RUN_RETENTION).await {
                    tracing::warn!(error = %ErrorChain(&error), "could not purge ended workflow runs");
                }
                tokio::time::sleep(PURGE_EVERY).await;
            }
        };
        let settle = async {
            // The due time whose run this process started (or found started).
            let mut ensured = None;
            loop {
                match self.schedule.next_due().await {
                    Ok(next) if next == ensured => {}
                    Ok(_) => match self.schedule.ensure(&self.engine).await {
                        Ok(due) => ensured = due,
                        Err(error) => {
                            tracing::warn!(code = %error.code().name(), error = %ErrorChain(&error), "could not start the next scheduled check");
                        }
                    },
                    Err(error) => {
                        tracing::warn!(code = %error.code().name(), error = %ErrorChain(&error), "could not read when the next scheduled check is due");
                    }
                }
                if let Err(error) = self.operations.settle_abandoned().await {
                    tracing::warn!(code = %error.code().name(), error = %ErrorChain(&error), "could not end abandoned inventories");
                }
                if let Err(error) = self.reviews.resume_decided(SETTLE_SCAN).await {
                    tracing::warn!(code = %error.code().name(), error = %ErrorChain(&error), "could not resume decided reviews");
                }
                if let Err(error) = self.drift.sweep().await {
                    tracing::warn!(code = %error.code().name(), error = %ErrorChain(&error), "could not delete expired drift diffs");
                }
                tokio::time::sleep(SETTLE_EVERY).await;
            }
        };
        tokio::select! {
            () = worker.run(stop.cancelled()) => {}
            () = purge => {}
            () = settle => {}
        }
    }
}

/// Removes every entry of `scratch` whose name starts with [`STEP_FOLDER_PREFIX`]; returns how
/// many went.
fn sweep(scratch: &Path) -> std::io::Result<usize> {
    let mut removed = 0;
    for entry in std::fs::read_dir(scratch)? {
        let entry = entry?;
        if !entry
            .file_name()
            .to_string_lossy()
            .starts_with(STEP_FOLDER_PREFIX)
        {
            continue;
        }
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
        removed += 1;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_removes_only_refresh_step_leftovers() {
        let scratch = tempfile::tempdir().unwrap();
        let left = scratch.path().join("refresh-a1b2c3");
        std::fs::create_dir_all(left.join("tables")).unwrap();
        std::fs::write(
            left.join("tables/orders.sql"),
            "CREATE TABLE orders (id int)\n",
        )
        .unwrap();
        std::fs::write(scratch.path().join("refresh-stray"), "x").unwrap();
        std::fs::create_dir(scratch.path().join("other")).unwrap();
        assert_eq!(sweep(scratch.path()).unwrap(), 2);
        let remaining: Vec<_> = std::fs::read_dir(scratch.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(remaining, ["other"]);
        assert_eq!(sweep(scratch.path()).unwrap(), 0);
    }
}
