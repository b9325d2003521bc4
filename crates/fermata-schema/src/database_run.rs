//! What the workflows over a selection of databases, the refresh and the verification, share:
//! their first steps (`bind`, `load`, `base`), the `database:<position>` steps (one
//! durable step per selected database, one after another, a failure recorded as that database's
//! result while the next one runs), the live snapshot a database step takes and checks again, and
//! the conditional end of the operation that releases the global lease.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use fermata_schema_core::{DatabaseName, ErrorCode, SafeError, Subject};
use fermata_store::Storage;
use fermata_store::schema::{DatabaseReport, OperationId, OperationState, Outcome, Transition};
use fermata_workflow::{Attempt, RunContext, RunError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::task::AbortOnDropHandle;

use crate::inventory::discover;
use crate::migration::Migration;
use crate::operations::begin_run;
use crate::package::{Package, Registry};
use crate::safe_context::{SafeCode, SafeContext};
use crate::snapshot::{self, DatabaseSnapshot};
use crate::source::SourceSettings;
use crate::step_failure::{run_failed, safe_error};
use crate::tracked::Progress;
use crate::{pool, selection};

/// The package a run compares with, as its journal keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Base {
    pub(crate) commit: String,
    /// The registry's canonical JSON.
    pub(crate) registry: String,
}

/// What the first steps found: the selection, and the package it is compared with.
pub(crate) struct Selected {
    pub(crate) databases: Vec<DatabaseName>,
    pub(crate) base: Base,
    pub(crate) registry: Registry,
}

/// The first steps of a run over a selection, each recorded with `progress`: `bind` binds the
/// run and moves the operation to `running`, `load` loads the selection ([`load_selection`]) and
/// `base` the package at the base branch's head ([`read_base`]).
pub(crate) async fn first_steps(
    progress: &Progress<'_>,
    ctx: &mut RunContext,
    source: &Option<SourceSettings>,
    package: &Option<Package>,
) -> Result<Selected, RunError> {
    let (storage, id) = (progress.storage, progress.operation);
    let (source, package) = (source.as_ref(), package.as_ref());
    let run_id = ctx.run_id().0.clone();
    progress
        .step(ctx, "bind", |_| {
            let run_id = run_id.clone();
            async move { begin_run(storage, id, &run_id).await.map(|_| ()) }
        })
        .await?;
    let databases: Vec<DatabaseName> = progress
        .step(ctx, "load", |_| load_selection(storage, source, id))
        .await?;
    let base: Base = progress
        .step(ctx, "base", |_| read_base(storage, package, id))
        .await?;
    let registry = Registry::parse(base.registry.as_bytes()).map_err(run_failed)?;
    Ok(Selected {
        databases,
        base,
        registry,
    })
}

/// Step `finish` of a run that succeeded without a review: the operation moves from `running`
/// to `succeeded`, releasing the lease (so the step's own boundary heartbeats none).
pub(crate) async fn finish_succeeded(
    progress: &Progress<'_>,
    ctx: &mut RunContext,
) -> Result<(), RunError> {
    let unleased = Progress {
        lease_ttl: None,
        ..*progress
    };
    unleased
        .step(ctx, "finish", |_| {
            end_operation(
                unleased.storage,
                unleased.operation,
                OperationState::Running,
                OperationState::Succeeded,
                None,
            )
        })
        .await
}

/// What one database step decided.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct StepOutcome {
    pub(crate) outcome: Outcome,
}

/// The `load` step's body: the selection, checked again against the inventory, which is loaded first.
/// Without a source nothing can run, which fails the operation here rather than every database.
pub(crate) async fn load_selection(
    storage: &dyn Storage,
    source: Option<&SourceSettings>,
    id: OperationId,
) -> Result<Vec<DatabaseName>, SafeError> {
    if source.is_none() {
        return Err(SafeError::new(ErrorCode::SourceNotConfigured));
    }
    let schema = storage.schema();
    let operation = schema
        .operation(id)
        .await
        .context("load the operation")?
        .ok_or_else(|| SafeError::about(ErrorCode::OperationMissing, Subject::Operation(id.0)))?;
    let inventory_id = operation
        .inventory
        .ok_or_else(|| SafeError::new(ErrorCode::InventoryMissing))?;
    let inventory = schema
        .inventory(inventory_id)
        .await
        .context("load the inventory")?
        .ok_or_else(|| SafeError::new(ErrorCode::InventoryMissing))?;
    let now = schema.clock().await.context("read the database's clock")?;
    let requested: Vec<String> = schema
        .database_results(id)
        .await
        .context("load the database results")?
        .into_iter()
        .map(|row| row.database.as_str().to_owned())
        .collect();
    selection::resolve(&inventory, now, &requested)
}

/// The `base` step's body: the package's base commit and registry, the commit recorded on the
/// operation once (a refresh's reviewed base).
pub(crate) async fn read_base(
    storage: &dyn Storage,
    package: Option<&Package>,
    id: OperationId,
) -> Result<Base, SafeError> {
    let package = package.ok_or_else(|| SafeError::new(ErrorCode::PackageNotConfigured))?;
    let base = package.base_snapshot().await?;
    let schema = storage.schema();
    let recorded = schema
        .operation(id)
        .await
        .context("load the operation")?
        .and_then(|operation| operation.reviewed_base_commit);
    // A retry after the commit was recorded compares with that commit, whatever the branch
    // says now.
    let commit = match recorded {
        Some(commit) => commit,
        None => {
            if !schema
                .record_reviewed_base(id, &base.commit)
                .await
                .context("record the reviewed base commit")?
            {
                return Err(SafeError::new(ErrorCode::RunLost));
            }
            base.commit.clone()
        }
    };
    let registry = if commit == base.commit {
        base.registry
    } else {
        package.registry_at(&commit).await?
    };
    Ok(Base {
        commit,
        registry: String::from_utf8(registry.to_canonical_json())
            .or_code(ErrorCode::GithubFailed, "write the registry as text")?,
    })
}

/// Runs step `database:<position>` with `body` for every selected database, one after another,
/// and returns the positions of those whose outcome is `changed`. A database whose step fails
/// gets its failed result (`stale` when `registry` has it, else `unregistered`) and the next one
/// runs; when every one failed, so does the run, with the first one's error (each result keeps
/// its own). A lease that is gone stops the run at once.
pub(crate) async fn database_steps<'a, F, Fut>(
    progress: &Progress<'_>,
    ctx: &mut RunContext,
    selected: &'a [DatabaseName],
    registry: &Registry,
    mut body: F,
) -> Result<Vec<u32>, RunError>
where
    F: FnMut(u32, &'a DatabaseName, Attempt) -> Fut + Send,
    Fut: Future<Output = Result<StepOutcome, SafeError>> + Send,
{
    let schema = progress.storage.schema();
    let mut changed = Vec::new();
    let mut failures = Vec::new();
    for (position, database) in selected.iter().enumerate() {
        let position = u32::try_from(position).unwrap_or(u32::MAX);
        let registered = registry.get(database).is_some();
        let stepped = progress
            .step(ctx, &format!("database:{position}"), |attempt| {
                body(position, database, attempt)
            })
            .await;
        match stepped {
            Ok(StepOutcome {
                outcome: Outcome::Changed,
            }) => changed.push(position),
            Ok(_) => {}
            Err(RunError::Failed(error)) => {
                let safe = safe_error(&error);
                // Without the lease no later step can run either.
                if matches!(
                    safe.code(),
                    ErrorCode::LeaseExpired | ErrorCode::LeaseCleared
                ) {
                    return Err(RunError::Failed(error));
                }
                // Recorded once; a replay finds it recorded and changes nothing.
                schema
                    .finish_database(
                        progress.operation,
                        database,
                        &DatabaseReport::failed(safe, registered),
                    )
                    .await
                    .map_err(RunError::Lost)?;
                failures.push(error);
            }
            Err(other) => return Err(other),
        }
    }
    if failures.len() == selected.len()
        && let Some(first) = failures.into_iter().next()
    {
        return Err(RunError::Failed(first));
    }
    Ok(changed)
}

/// The outcome a database's result row already holds, for a step whose earlier attempt recorded
/// the result and died before the journal did; a failed one fails the step again.
pub(crate) async fn recorded_outcome(
    storage: &dyn Storage,
    id: OperationId,
    database: &DatabaseName,
) -> Result<StepOutcome, SafeError> {
    let report = storage
        .schema()
        .database_results(id)
        .await
        .context("load the database results")?
        .into_iter()
        .find(|row| &row.database == database)
        .and_then(|row| row.report)
        .ok_or_else(|| SafeError::new(ErrorCode::RunUnreadable))?;
    match report.error {
        Some(error) => Err(error),
        None => Ok(StepOutcome {
            outcome: report.outcome,
        }),
    }
}

/// A database's snapshot taken from the source, with the server version it reported.
pub(crate) struct LiveSnapshot {
    pub(crate) snapshot: DatabaseSnapshot,
    server_version: String,
    /// How many connections the snapshot was taken over: the verifier opens as many new ones.
    connections: usize,
}

impl LiveSnapshot {
    /// Snapshots `database` over at most `connections` connections within the account's
    /// headroom, once the first connection saw it still visible. The connections are closed
    /// before it returns, which gives their share of the headroom back to the verifier.
    pub(crate) async fn take(
        source: &SourceSettings,
        database: &DatabaseName,
        connections: usize,
        filter: &crate::Filter,
    ) -> Result<LiveSnapshot, SafeError> {
        let mut first = source.connect().await?;
        let discovery = discover(&mut first).await?;
        if !discovery.databases.contains(database) {
            return Err(SafeError::about(
                ErrorCode::DatabaseNoLongerVisible,
                Subject::Database(database.clone()),
            ));
        }
        let mut connections = pool::open(source, first, connections).await?;
        let snapshot = snapshot::snapshot_filtered(
            &mut connections,
            database,
            &discovery.server_version,
            filter,
        )
        .await?;
        let count = connections.len();
        pool::close(connections).await;
        Ok(LiveSnapshot {
            snapshot,
            server_version: discovery.server_version,
            connections: count,
        })
    }

    /// The shared connection verifier's first check ([`snapshot::verify_live`]) over new
    /// connections, as many as the snapshot had (within the account's headroom again), opened
    /// after the snapshot's were closed: a schema that changed meanwhile is the retryable
    /// `SCHEMA_CHANGED`.
    pub(crate) async fn verify_again(
        &self,
        source: &SourceSettings,
        database: &DatabaseName,
    ) -> Result<(), SafeError> {
        let first = source.connect().await?;
        let mut verifiers = pool::open(source, first, self.connections).await?;
        let verified = snapshot::verify_live(
            &mut verifiers,
            database,
            &self.snapshot,
            &self.server_version,
        )
        .await;
        pool::close(verifiers).await;
        verified
    }

    /// [`LiveSnapshot::verify_again`] on a task of its own, so that the step can prepare what
    /// follows a verified candidate while the server answers the verifier; the pass stops if its
    /// [`Verification`] is dropped before it finished.
    pub(crate) fn verify_again_meanwhile(
        self: &Arc<Self>,
        source: &SourceSettings,
        database: &DatabaseName,
    ) -> Verification {
        let (live, source, database) = (Arc::clone(self), source.clone(), database.clone());
        Verification(AbortOnDropHandle::new(tokio::spawn(async move {
            live.verify_again(&source, &database).await
        })))
    }

    /// The shared connection verifier's second check ([`snapshot::verify_in_workspace`]): the
    /// snapshot's files applied into a scratch schema on `workspace` snapshot back to its model.
    pub(crate) async fn verify_in_workspace(
        &self,
        workspace: &SourceSettings,
    ) -> Result<(), SafeError> {
        snapshot::verify_in_workspace(workspace, &self.snapshot, &self.server_version).await
    }

    /// Both migration scripts between this snapshot and `merged`, each verified in `workspace`
    /// when one is configured.
    pub(crate) async fn migration(
        &self,
        merged: &DatabaseSnapshot,
        workspace: Option<&SourceSettings>,
    ) -> Migration {
        Migration::verified(&self.snapshot, merged, workspace, &self.server_version).await
    }

    /// The snapshot's object counts, from its manifest.
    pub(crate) fn object_counts(&self) -> BTreeMap<String, u64> {
        self.snapshot
            .files
            .get("manifest.json")
            .and_then(|bytes| serde_json::from_slice::<Value>(bytes).ok())
            .and_then(|manifest| {
                serde_json::from_value::<BTreeMap<String, u64>>(manifest["counts"].clone()).ok()
            })
            .unwrap_or_default()
    }
}

/// The verifier's pass running beside the step ([`LiveSnapshot::verify_again_meanwhile`]).
pub(crate) struct Verification(AbortOnDropHandle<Result<(), SafeError>>);

impl Verification {
    /// The pass's answer, once it finished; a panic in it goes on in the step.
    pub(crate) async fn finished(self) -> Result<(), SafeError> {
        match self.0.await {
            Ok(verified) => verified,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(error) => Err(error).or_code(ErrorCode::VerificationFailed, "verify the candidate"),
        }
    }
}

/// Moves the operation from `from` to `to`, releasing the lease; already there is fine.
pub(crate) async fn end_operation(
    storage: &dyn Storage,
    id: OperationId,
    from: OperationState,
    to: OperationState,
    error: Option<SafeError>,
) -> Result<(), SafeError> {
    let ended = Transition {
        error,
        ..Transition::new(from, to).releasing_lease()
    };
    if storage
        .schema()
        .transition(id, &ended)
        .await
        .context("move the operation to its next state")?
        .is_none()
    {
        require_state(storage, id, to).await?;
    }
    Ok(())
}

/// Succeeds when the operation is in `state` (a retry after the move), else fails with the
/// error the operation ended with (an administrator's clear, say).
pub(crate) async fn require_state(
    storage: &dyn Storage,
    id: OperationId,
    state: OperationState,
) -> Result<(), SafeError> {
    let operation = storage
        .schema()
        .operation(id)
        .await
        .context("load the operation")?
        .ok_or_else(|| SafeError::new(ErrorCode::RunLost))?;
    if operation.state == state {
        Ok(())
    } else {
        Err(operation
            .error
            .unwrap_or_else(|| SafeError::new(ErrorCode::RunLost)))
    }
}
