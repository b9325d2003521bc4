//! The refresh workflow, step by step as docs/schema-operations.md gives it:
//!
//! 1. `bind`: binds the run to its operation and moves it to `running`.
//! 2. `load`: loads the inventory before anything touches the source, refuses it once expired,
//!    and checks the selection against it again (every name exactly in it, inventory order,
//!    no duplicates; nothing is ever added).
//! 3. `base`: reads the package's registry at the base branch's current commit and records that
//!    commit on the operation as its reviewed base.
//! 4. `database:<position>`, one durable step per selected database, one after another: the
//!    database must still be visible; its snapshot is taken over a bounded set of connections,
//!    written as one archive into a temporary folder of its own (removed whatever happens,
//!    panics included),
//!    verified by the shared connection verifier (every object's `SHOW CREATE` read again over
//!    as many new connections, opened once the snapshot's are closed, and checked against the
//!    candidate's model, with the rest of the catalog but the tables', must give the same hash; with
//!    a workspace configured, the candidate must also apply into a scratch schema there and
//!    snapshot back to the same model), compared with its merged snapshot, and, when it changed,
//!    staged sealed in the object store with its review notes (both migration scripts between the
//!    merged snapshot and the candidate, verified in the workspace when one is configured, and the
//!    candidate's lint findings; see [`crate::review::ReviewNotes`]). The candidate is read back
//!    and sealed, and without a workspace its notes written, while the verifier's pass runs on a
//!    task of its own; both are staged only once it passed. Transient errors are retried by the
//!    runner's schedule; permanent ones are not. A database that fails gets its failed result
//!    (`stale` when registered, else `unregistered`) and the next one runs; when every one
//!    failed, the operation fails with the first one's error.
//!    A refresh asked to remove missing databases then lists, in step `missing`, the registered
//!    databases its inventory neither lists nor left out by `ignore_databases`.
//! 5. With no changed database (and none to remove) the operation succeeds here, its report the
//!    outcome. Otherwise `review:open` opens the review, `artifact` seals every staged
//!    candidate and its notes (and the names to remove) into the one review artifact, and `review:await`
//!    holds the lease to the review expiry and moves the operation to `awaiting_review`.
//! 6. The run waits for the decision hook until the review expires; `review:decision` reads the
//!    one decision (recording the expiry when none came). A rejected or expired review's
//!    `finish` ends the operation `rejected` or `expired`, releasing the lease in the same
//!    transaction, and `cleanup` deletes the artifact under a cleanup grant.
//! 7. An approved review is published as one pull request (see [`crate::publication`]):
//!    `publish:begin` moves the operation to `publishing`, `publish:parent` chooses the parent
//!    commit once, `publish:commit` writes the deterministic commit, `publish:branch` creates the
//!    branch only when absent, `publish:pull` finds or opens the pull request, and
//!    `publish:finish` records it, marks the artifact `consumed` and ends the operation
//!    `succeeded`, releasing the lease. The forge writes wait out its rate limits in durable
//!    sleeps (see [`crate::publication`]). A round that fails (but with `BASE_CHANGED`, which
//!    fails the refresh) is held by `publish:held`: the operation stays `publishing` with the
//!    error, the lease is released, the artifact is kept, and the run waits for
//!    `republish:<round>` to run the next round (`publish:<round>:begin`, then the same steps
//!    under `publish:<round>:`), which writes under the same keys.
//!    Once published, `cleanup` deletes the consumed artifact under a cleanup grant, as after a
//!    rejection.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fermata_schema_core::{DatabaseName, ErrorCode, SafeError};
use fermata_store::schema::PullRequest;
use fermata_store::schema::{
    ArtifactState, CleanupKind, CleanupResult, DatabaseReport, Decided, Decision, Freshness,
    NewCleanupGrant, OperationId, OperationKind, OperationState, Outcome, ReviewState,
    SCHEMA_LEASE_TTL, Transition,
};
use fermata_store::{ErrorChain, SecretHash, Storage, UnixMillis};
use fermata_workflow::{Attempt, RunContext, RunError, Workflow};
use serde::Serialize;
use serde_json::Value;

use crate::artifact::{ArtifactStore, SealedCandidate, candidate_archive, candidate_files};
use crate::database_run::{
    LiveSnapshot, Selected, StepOutcome, database_steps, end_operation, finish_succeeded,
    first_steps, recorded_outcome, require_state,
};
use crate::engine::{RunInput, workflow_name};
use crate::inventory_run::run_operation;
use crate::lint::{self, LintSettings};
use crate::names;
use crate::notify::{EXPIRY_NOTICE, EventKind, Notifier};
use crate::package::{Package, Registry};
use crate::publication::{Paced, Publication};
use crate::review::ReviewNotes;
use crate::safe_context::{SafeCode, SafeContext};
use crate::snapshot::DatabaseSnapshot;
use crate::source::SourceSettings;
use crate::step_failure::{run_failed, safe_error};
use crate::tracked::Progress;

/// How many introspection connections a database step opens when nothing else is configured.
pub const DEFAULT_CONNECTIONS: usize = 8;
/// How long a review stays open when nothing else is configured.
pub const DEFAULT_REVIEW_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);
/// The hook a review decision resumes the run with.
pub const REVIEW_HOOK: &str = "review";
/// The longest a publication waits for the forge's rate limits when nothing else is configured.
pub const DEFAULT_PUBLICATION_WAIT: Duration = Duration::from_secs(60 * 60);
/// The hook that resumes a refresh whose publication failed, for its next round (the hook is
/// `republish:<round>`).
pub const REPUBLISH_HOOK: &str = "republish";
/// How long the cleanup grant a refresh makes for itself (published, rejected or expired) lives.
const CLEANUP_GRANT_LIFETIME: Duration = Duration::from_secs(10 * 60);

/// What a refresh works with.
#[derive(Debug, Clone)]
pub struct RefreshSettings {
    /// The MySQL source; without it every refresh fails with `SOURCE_NOT_CONFIGURED`.
    pub source: Option<SourceSettings>,
    /// The verification workspace server: when set, every candidate must also apply there into
    /// a scratch schema and snapshot back to the same model.
    pub workspace: Option<SourceSettings>,
    /// The target repository; without it every refresh fails with `PACKAGE_NOT_CONFIGURED`.
    pub package: Option<Package>,
    /// Where staged candidates and review artifacts are kept.
    pub artifacts: ArtifactStore,
    /// The folder in which each database step makes its own temporary folder.
    pub scratch: PathBuf,
    /// How long a review stays open before the refresh expires.
    pub review_window: Duration,
    /// The most introspection connections a database step opens.
    pub connections: usize,
    /// What snapshots leave out (`[schema] ignore_tables`).
    pub filter: crate::Filter,
    /// The longest a publication waits, in all, for the forge's rate limits to lift before the
    /// write that met them fails as usual.
    pub publication_wait: Duration,
    /// The lint rules every changed database's candidate is checked against (`[schema.lint]`).
    pub lint: LintSettings,
}

/// A seam for fault injection: called in every database step once the candidate is written to
/// its temporary folder and before it is verified. Tests fail, delay, alter the schema or panic
/// here; the default does nothing.
#[async_trait]
pub trait CandidateProbe: Send + Sync + std::fmt::Debug {
    async fn candidate_written(
        &self,
        database: &DatabaseName,
        folder: &Path,
        attempt: Attempt,
    ) -> Result<(), SafeError>;
}

#[derive(Debug)]
struct NoProbe;

#[async_trait]
impl CandidateProbe for NoProbe {
    async fn candidate_written(
        &self,
        _: &DatabaseName,
        _: &Path,
        _: Attempt,
    ) -> Result<(), SafeError> {
        Ok(())
    }
}

/// The refresh workflow.
#[derive(Clone)]
pub struct RefreshWorkflow {
    storage: Arc<dyn Storage>,
    settings: Arc<RefreshSettings>,
    probe: Arc<dyn CandidateProbe>,
    /// Where reviews, publications and failures are told.
    notifier: Notifier,
}

impl std::fmt::Debug for RefreshWorkflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefreshWorkflow")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl RefreshWorkflow {
    pub fn new(storage: Arc<dyn Storage>, settings: RefreshSettings) -> Self {
        RefreshWorkflow {
            storage,
            settings: Arc::new(settings),
            probe: Arc::new(NoProbe),
            notifier: Notifier::default(),
        }
    }

    /// Tells `notifier` when a review opens or is about to expire, when a pull request is
    /// published and when a refresh fails.
    #[must_use]
    pub fn with_notifier(mut self, notifier: Notifier) -> Self {
        self.notifier = notifier;
        self
    }

    /// Calls `probe` in every database step (fault injection).
    #[must_use]
    pub fn with_probe(mut self, probe: Arc<dyn CandidateProbe>) -> Self {
        self.probe = probe;
        self
    }

    async fn execute(&self, ctx: &mut RunContext, id: OperationId) -> Result<Value, RunError> {
        let storage = &*self.storage;
        let schema = storage.schema();
        let leased = Progress {
            storage,
            operation: id,
            lease_ttl: Some(SCHEMA_LEASE_TTL),
        };
        let settings = &*self.settings;
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
                self.database(id, position, database, (&base.commit, &registry), attempt)
            },
        )
        .await?;
        // The operation's request never changes, so every execution reads the same here.
        let remove_missing = schema
            .operation(id)
            .await
            .map_err(RunError::Lost)?
            .is_some_and(|operation| operation.remove_missing);
        let missing: Vec<DatabaseName> = if remove_missing {
            leased
                .step(ctx, "missing", |_| {
                    missing_databases(storage, id, &registry)
                })
                .await?
        } else {
            Vec::new()
        };

        let unleased = Progress {
            lease_ttl: None,
            ..leased
        };
        if changed.is_empty() && missing.is_empty() {
            finish_succeeded(&leased, ctx).await?;
            tracing::info!(operation = %id, "refresh found no change; nothing to review");
            return Ok(serde_json::json!({ "changed": 0 }));
        }

        let expires_at: i64 = leased
            .step(ctx, "review:open", |_| async {
                schema
                    .open_review(id, self.settings.review_window)
                    .await
                    .map(|review| review.expires_at.0)
                    .context("open the review")
            })
            .await?;
        leased
            .step(ctx, "artifact", |_| async {
                self.seal_artifact(id, &base.commit, &changed, &missing, UnixMillis(expires_at))
                    .await
            })
            .await?;
        // Its body holds the lease to the review expiry; a heartbeat at its boundary would make
        // the lease active again, with the heartbeat's shorter lifetime.
        unleased
            .step(ctx, "review:await", |_| async {
                self.await_review(id, UnixMillis(expires_at)).await
            })
            .await?;

        self.notifier
            .emit(storage, EventKind::ReviewOpened, id, None)
            .await?;
        let notice = EXPIRY_NOTICE.min(self.settings.review_window / 2);
        let expiring = UnixMillis(expires_at - i64::try_from(notice.as_millis()).unwrap_or(0));
        self.notifier
            .emit(storage, EventKind::ReviewExpiring, id, Some(expiring))
            .await?;
        let now = schema.clock().await.map_err(RunError::Lost)?;
        let remaining = UnixMillis(expires_at).since(now);
        // The timeout is fixed by the first execution that waits; later ones pass it again.
        let _delivered = ctx.hook_within(REVIEW_HOOK, remaining).await?;
        // The lease ran out with the review window: what follows writes without it.
        let decision: ReviewState = unleased
            .step(ctx, "review:decision", |_| async {
                self.decision(id).await
            })
            .await?;
        if decision == ReviewState::Approved {
            let pull = self.publish(ctx, id, &base.commit, leased).await?;
            unleased
                .step(ctx, "cleanup", |_| async { self.clean_up(id).await })
                .await?;
            self.notifier
                .emit(storage, EventKind::PullRequestPublished, id, None)
                .await?;
            tracing::info!(operation = %id, pull_request = pull.number, changed = changed.len(), "refresh published");
            return Ok(
                serde_json::json!({ "changed": changed.len(), "pull_request": pull.number }),
            );
        }
        let (to, error) = match decision {
            ReviewState::Rejected => (
                OperationState::Rejected,
                Some(SafeError::new(ErrorCode::ReviewRejected)),
            ),
            _ => (
                OperationState::Expired,
                Some(SafeError::new(ErrorCode::ReviewExpired)),
            ),
        };
        unleased
            .step(ctx, "finish", |_| async {
                schema
                    .move_artifact(id, ArtifactState::Stored, ArtifactState::Discarded)
                    .await
                    .context("move the artifact to its next state")?;
                end_operation(
                    storage,
                    id,
                    OperationState::AwaitingReview,
                    to,
                    error.clone(),
                )
                .await
            })
            .await?;
        unleased
            .step(ctx, "cleanup", |_| async { self.clean_up(id).await })
            .await?;
        tracing::info!(operation = %id, decision = decision.as_str(), changed = changed.len(), "refresh ended");
        Ok(serde_json::json!({ "changed": changed.len(), "decision": decision.as_str() }))
    }

    /// Publishes an approved refresh (see [`crate::publication`]) and ends it `succeeded` with
    /// its pull request, the artifact consumed and the lease released. A round of publication
    /// that fails (other than with `BASE_CHANGED`, which ends the refresh for a new one) is held:
    /// the operation stays `publishing` with the round's error, the lease is released, the
    /// artifact is kept, and the run waits for `republish:<next round>`, which
    /// [`crate::Operations::republish`] delivers; the next round writes under the same keys.
    async fn publish(
        &self,
        ctx: &mut RunContext,
        id: OperationId,
        base_commit: &str,
        leased: Progress<'_>,
    ) -> Result<PullRequest, RunError> {
        let schema = self.storage.schema();
        let decided_at: i64 = leased
            .step(ctx, "publish:begin", |_| async {
                let publishing =
                    Transition::new(OperationState::AwaitingReview, OperationState::Publishing);
                if schema
                    .transition(id, &publishing)
                    .await
                    .context("move the operation to its next state")?
                    .is_none()
                {
                    require_state(&*self.storage, id, OperationState::Publishing).await?;
                }
                let review = schema
                    .review(id)
                    .await
                    .context("load the review")?
                    .ok_or_else(|| SafeError::new(ErrorCode::RunUnreadable))?;
                let decided = review
                    .decided_at
                    .ok_or_else(|| SafeError::new(ErrorCode::RunUnreadable))?;
                Ok(decided.0.div_euclid(1000))
            })
            .await?;
        let unleased = Progress {
            lease_ttl: None,
            ..leased
        };
        let mut round: u32 = 1;
        loop {
            // The first round runs under the lease; later ones come after it was released.
            let progress = if round == 1 { leased } else { unleased };
            let published = self
                .publish_round(ctx, id, base_commit, decided_at, round, progress)
                .await;
            let error = match published {
                Err(RunError::Failed(error)) => safe_error(&error),
                other => return other,
            };
            if error.code() == ErrorCode::BaseChanged {
                return Err(run_failed(error));
            }
            unleased
                .step(ctx, &round_step(round, "held"), |_| {
                    self.hold_publication(id, round, error.clone())
                })
                .await?;
            round += 1;
            ctx.hook(&format!("{REPUBLISH_HOOK}:{round}")).await?;
            tracing::info!(operation = %id, round, "publication is tried again");
        }
    }

    /// One round of publication: `publish[:<round>]:parent`, `:commit`, `:branch`, `:pull` and
    /// `:finish`; a round after the first begins with `publish:<round>:begin`, which clears the
    /// held error.
    async fn publish_round(
        &self,
        ctx: &mut RunContext,
        id: OperationId,
        base_commit: &str,
        decided_at: i64,
        round: u32,
        progress: Progress<'_>,
    ) -> Result<PullRequest, RunError> {
        let schema = self.storage.schema();
        let not_configured = || run_failed(SafeError::new(ErrorCode::PackageNotConfigured));
        let package = self.settings.package.as_ref().ok_or_else(not_configured)?;
        let publication = Publication {
            storage: &*self.storage,
            artifacts: &self.settings.artifacts,
            package,
            operation: id,
        };
        if round > 1 {
            progress
                .step(ctx, &round_step(round, "begin"), |_| async {
                    let again =
                        Transition::new(OperationState::Publishing, OperationState::Publishing);
                    schema
                        .transition(id, &again)
                        .await
                        .context("move the operation to its next state")?;
                    require_state(&*self.storage, id, OperationState::Publishing).await
                })
                .await?;
        }
        let paced = Paced {
            progress,
            wait_limit: self.settings.publication_wait,
        };
        let parent: String = paced
            .step(ctx, &round_step(round, "parent"), || async {
                let change = publication.change(base_commit).await?;
                publication.parent(base_commit, &change).await
            })
            .await?;
        let commit: String = paced
            .step(ctx, &round_step(round, "commit"), || async {
                let change = publication.change(base_commit).await?;
                publication.commit(&parent, change, decided_at).await
            })
            .await?;
        paced
            .step(ctx, &round_step(round, "branch"), || async {
                publication.branch(&commit).await
            })
            .await?;
        let pull: PullRequest = paced
            .step(ctx, &round_step(round, "pull"), || async {
                publication.pull_request().await.map(|pull| PullRequest {
                    number: pull.number,
                    url: pull.url,
                    head: pull.head,
                    base: pull.base,
                })
            })
            .await?;
        let unleased = Progress {
            lease_ttl: None,
            ..progress
        };
        unleased
            .step(ctx, &round_step(round, "finish"), |_| async {
                if !schema
                    .record_pull_request(id, &pull)
                    .await
                    .context("record the pull request")?
                {
                    require_state(&*self.storage, id, OperationState::Publishing).await?;
                    return Err(SafeError::new(ErrorCode::PublicationConflict));
                }
                schema
                    .move_artifact(id, ArtifactState::Stored, ArtifactState::Consumed)
                    .await
                    .context("move the artifact to its next state")?;
                end_operation(
                    &*self.storage,
                    id,
                    OperationState::Publishing,
                    OperationState::Succeeded,
                    None,
                )
                .await
            })
            .await?;
        Ok(pull)
    }

    /// Holds a publication whose round failed with `error`: the operation stays `publishing`
    /// with that error and releases the lease; the artifact stays stored.
    async fn hold_publication(
        &self,
        id: OperationId,
        round: u32,
        error: SafeError,
    ) -> Result<(), SafeError> {
        let held = Transition {
            error: Some(error.clone()),
            ..Transition::new(OperationState::Publishing, OperationState::Publishing)
                .releasing_lease()
        };
        self.storage
            .schema()
            .transition(id, &held)
            .await
            .context("hold the failed publication")?;
        require_state(&*self.storage, id, OperationState::Publishing).await?;
        tracing::warn!(operation = %id, round, code = %error.code().name(), "publication failed; the approved refresh waits to be published again");
        Ok(())
    }

    /// One database's step body.
    async fn database(
        &self,
        id: OperationId,
        position: u32,
        database: &DatabaseName,
        (base_commit, registry): (&str, &Registry),
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
        let source = self
            .settings
            .source
            .as_ref()
            .ok_or_else(|| SafeError::new(ErrorCode::SourceNotConfigured))?;
        // The step's own folder: removed when this guard drops, on every way out of the step
        // (success, error or panic).
        let folder = tempfile::Builder::new()
            .prefix("refresh-")
            .tempdir_in(&self.settings.scratch)
            .or_code(SCRATCH_UNAVAILABLE, "make the step's temporary folder")?;
        let started = std::time::Instant::now();
        let live = LiveSnapshot::take(
            source,
            database,
            self.settings.connections,
            &self.settings.filter,
        )
        .await?;
        let snapshotted = started.elapsed();
        let live = Arc::new(live);
        let candidate = &live.snapshot;
        write_candidate(folder.path(), Arc::clone(&live)).await?;
        let written = started.elapsed();
        self.probe
            .candidate_written(database, folder.path(), attempt)
            .await?;
        let merged = registry
            .get(database)
            .map(|entry| entry.snapshot_hash.clone());
        let outcome = if merged.as_deref() == Some(candidate.snapshot_hash.as_str()) {
            Outcome::Unchanged
        } else {
            Outcome::Changed
        };
        // While the source answers the verifier, what needs no MySQL connection is prepared for a
        // changed candidate: the candidate read back and sealed, and its review notes unless their
        // scripts are to be verified in a workspace, whose account may be the one the verifier
        // counts its connections against. Nothing is staged before the candidate is verified.
        let verification = live.verify_again_meanwhile(source, database);
        let workspace = self.settings.workspace.as_ref();
        let prepared = if outcome == Outcome::Changed {
            let at = (id, position);
            let notes = workspace.is_none();
            Some(
                self.prepare_review(&live, at, base_commit, database, folder.path(), notes)
                    .await,
            )
        } else {
            None
        };
        let prepared_at = started.elapsed();
        verification.finished().await?;
        let verified = started.elapsed();
        if let Some(workspace) = workspace {
            live.verify_in_workspace(workspace).await?;
        }
        // The bytes staged: the sealed candidate's and its notes'.
        let mut staged_bytes = (0, 0);
        if let Some(prepared) = prepared {
            let (notes, sealed) = prepared?;
            let notes = match notes {
                Some(notes) => notes,
                None => self.review_notes_json(&live, base_commit, database).await?,
            };
            staged_bytes = (sealed.envelope_bytes(), notes.len());
            // The notes first: a candidate staged is one the artifact step finds.
            self.settings
                .artifacts
                .stage_notes(id, position, notes)
                .await?;
            self.settings.artifacts.stage(sealed).await?;
        }
        let report = DatabaseReport {
            outcome,
            freshness: Freshness::Fresh,
            object_counts: live.object_counts(),
            snapshot_hash: Some(candidate.snapshot_hash.clone()),
            merged_hash: merged,
            differences: Vec::new(),
            error: None,
        };
        schema
            .finish_database(id, database, &report)
            .await
            .context("record a database's result")?;
        drop(folder);
        tracing::info!(
            operation = %id,
            position,
            outcome = outcome.as_str(),
            snapshot_ms = snapshotted.as_millis(),
            written_ms = (written - snapshotted).as_millis(),
            verified_ms = (verified - written).as_millis(),
            review_ms = (prepared_at - written).as_millis(),
            staged_ms = (started.elapsed() - verified).as_millis(),
            candidate_bytes = staged_bytes.0,
            notes_bytes = staged_bytes.1,
            "database snapshotted"
        );
        Ok(StepOutcome { outcome })
    }

    /// A changed database's candidate read back from `folder` and sealed, ready to stage once it
    /// is verified, and its review notes as JSON ([`RefreshWorkflow::review_notes_json`]) when
    /// `with_notes`.
    async fn prepare_review(
        &self,
        live: &LiveSnapshot,
        (id, position): (OperationId, u32),
        base_commit: &str,
        database: &DatabaseName,
        folder: &Path,
        with_notes: bool,
    ) -> Result<(Option<Vec<u8>>, SealedCandidate), SafeError> {
        let notes = if with_notes {
            Some(self.review_notes_json(live, base_commit, database).await?)
        } else {
            None
        };
        let archive = read_candidate(folder).await?;
        let sealed = self
            .settings
            .artifacts
            .seal_candidate(id, position, archive)
            .await?;
        Ok((notes, sealed))
    }

    /// [`RefreshWorkflow::review_notes`], as the JSON that is staged.
    async fn review_notes_json(
        &self,
        live: &LiveSnapshot,
        base_commit: &str,
        database: &DatabaseName,
    ) -> Result<Vec<u8>, SafeError> {
        let notes = self.review_notes(live, base_commit, database).await;
        serde_json::to_vec(&notes).or_code(ErrorCode::ArtifactUnavailable, "write review notes")
    }

    /// A changed database's review notes: both migration scripts between its merged snapshot at
    /// `base_commit` (nothing, for a database the package does not have yet) and the candidate,
    /// verified in the workspace when one is configured, and the candidate's lint findings. The
    /// notes add to the review and never fail it: when the merged snapshot cannot be read, they
    /// say there is no script, and the log says why.
    async fn review_notes(
        &self,
        live: &LiveSnapshot,
        base_commit: &str,
        database: &DatabaseName,
    ) -> ReviewNotes {
        let merged = match &self.settings.package {
            Some(package) => package.merged_files(base_commit, database).await,
            None => Err(SafeError::new(ErrorCode::PackageNotConfigured)),
        };
        let workspace = self.settings.workspace.as_ref();
        let migration = match merged.map(|files| files.map(DatabaseSnapshot::from_files)) {
            Ok(Some(Some(merged))) => Some(live.migration(&merged, workspace).await),
            Ok(None) => {
                let empty = DatabaseSnapshot::empty_like(&live.snapshot);
                Some(live.migration(&empty, workspace).await)
            }
            Ok(Some(None)) => {
                tracing::warn!(database = %database, "the merged snapshot's model cannot be read; the review has no migration script");
                None
            }
            Err(error) => {
                tracing::warn!(database = %database, code = %error.code().name(), error = %ErrorChain(&error), "the merged snapshot cannot be read; the review has no migration script");
                None
            }
        };
        ReviewNotes {
            migration,
            lint: lint::lint(&live.snapshot.model, &self.settings.lint),
        }
    }

    /// Seals every staged candidate into the one review artifact and records its row; a retry
    /// that finds the row recorded writes nothing.
    async fn seal_artifact(
        &self,
        id: OperationId,
        base_commit: &str,
        changed: &[u32],
        missing: &[DatabaseName],
        expires_at: UnixMillis,
    ) -> Result<(), SafeError> {
        let schema = self.storage.schema();
        let artifacts = &self.settings.artifacts;
        if schema
            .artifact(id)
            .await
            .context("load the artifact record")?
            .is_none()
        {
            let started = std::time::Instant::now();
            let results = schema
                .database_results(id)
                .await
                .context("load the database results")?;
            let mut files = BTreeMap::new();
            let mut notes = BTreeMap::new();
            let mut databases = BTreeMap::new();
            for position in changed {
                let Some(row) = results.iter().find(|row| row.position == *position) else {
                    return Err(SafeError::new(ErrorCode::RunUnreadable));
                };
                let report = row
                    .report
                    .as_ref()
                    .ok_or_else(|| SafeError::new(ErrorCode::RunUnreadable))?;
                let folder = names::file_name(row.database.as_str())?;
                for (path, bytes) in artifacts.staged(id, *position).await? {
                    files.insert(format!("{folder}/{path}"), bytes);
                }
                if let Some(bytes) = artifacts.staged_notes(id, *position).await? {
                    notes.insert(format!("{folder}.json"), bytes.to_vec());
                }
                databases.insert(
                    row.database.as_str().to_owned(),
                    ManifestEntry {
                        folder,
                        snapshot_hash: report.snapshot_hash.clone().unwrap_or_default(),
                        merged_hash: report.merged_hash.clone(),
                        object_counts: report.object_counts.clone(),
                    },
                );
            }
            tracing::info!(
                operation = %id,
                databases = changed.len(),
                read_ms = started.elapsed().as_millis(),
                "staged candidates read for the review artifact"
            );
            let manifest = serde_json::to_string_pretty(&ArtifactManifest {
                base_commit,
                databases,
                format: 1,
                operation_id: id.to_string(),
                removed: missing
                    .iter()
                    .map(|name| name.as_str().to_owned())
                    .collect(),
            })
            .or_code(
                ErrorCode::ArtifactUnavailable,
                "write the artifact's manifest",
            )?;
            let artifact = artifacts
                .store(id, files, notes, format!("{manifest}\n"), expires_at)
                .await?;
            schema
                .record_artifact(&artifact)
                .await
                .context("record the artifact")?;
        }
        for position in changed {
            artifacts.discard_staged(id, *position).await;
        }
        Ok(())
    }

    /// Holds the lease until the review expires and moves the operation to `awaiting_review`.
    async fn await_review(&self, id: OperationId, expires_at: UnixMillis) -> Result<(), SafeError> {
        let schema = self.storage.schema();
        if !schema
            .extend_lease_to(id, expires_at)
            .await
            .context("extend the schema lease")?
        {
            return Err(SafeError::new(ErrorCode::LeaseExpired));
        }
        let awaiting = Transition::new(OperationState::Running, OperationState::AwaitingReview);
        if schema
            .transition(id, &awaiting)
            .await
            .context("move the operation to its next state")?
            .is_none()
        {
            require_state(&*self.storage, id, OperationState::AwaitingReview).await?;
        }
        tracing::info!(operation = %id, "refresh awaits its review");
        Ok(())
    }

    /// The review's one decision; an undecided review past its window is recorded expired.
    async fn decision(&self, id: OperationId) -> Result<ReviewState, SafeError> {
        let schema = self.storage.schema();
        let review = schema
            .review(id)
            .await
            .context("load the review")?
            .ok_or_else(|| SafeError::new(ErrorCode::RunUnreadable))?;
        if review.state != ReviewState::Pending {
            return Ok(review.state);
        }
        match schema
            .decide_review(id, &Decision::Expire)
            .await
            .context("record the review decision")?
        {
            Decided::Recorded(review) | Decided::Refused(review)
                if review.state != ReviewState::Pending =>
            {
                Ok(review.state)
            }
            // Woken before the window closed without a decision: not a state a hook leaves.
            _ => Err(SafeError::new(ErrorCode::RunUnreadable)),
        }
    }

    /// Deletes a consumed or discarded artifact under a cleanup grant this step makes and
    /// consumes (a grant that is not found unused, unexpired and for this operation stops it),
    /// and records the result. The grant's token lives only in this step's memory.
    async fn clean_up(&self, id: OperationId) -> Result<(), SafeError> {
        let schema = self.storage.schema();
        let Some(artifact) = schema
            .artifact(id)
            .await
            .context("load the artifact record")?
        else {
            return Ok(());
        };
        // Only an artifact that was published from (consumed) or discarded is deleted.
        if artifact.cleanup_result.is_some()
            || !matches!(
                artifact.state,
                ArtifactState::Consumed | ArtifactState::Discarded
            )
        {
            return Ok(());
        }
        let operation = schema
            .operation(id)
            .await
            .context("load the operation")?
            .ok_or_else(|| SafeError::new(ErrorCode::RunLost))?;
        let actor = schema
            .review(id)
            .await
            .context("load the review")?
            .and_then(|review| review.actor)
            .unwrap_or(operation.actor);
        let token = fermata_crypto::SecretToken::generate("fmtc_");
        let token_hash = SecretHash(token.hash().0);
        schema
            .create_cleanup_grant(&NewCleanupGrant {
                token_hash,
                operation: id,
                actor,
                lifetime: CLEANUP_GRANT_LIFETIME,
                allowed: [CleanupKind::Artifact].into(),
            })
            .await
            .context("create the cleanup grant")?;
        let grant = schema
            .consume_cleanup_grant(&token_hash, CleanupKind::Artifact)
            .await
            .context("consume the cleanup grant")?;
        if grant.is_none_or(|grant| grant.operation != id) {
            return Err(SafeError::new(ErrorCode::ArtifactUnavailable));
        }
        let result = self.settings.artifacts.delete(id).await;
        schema
            .record_artifact_cleanup(id, result)
            .await
            .context("record the artifact cleanup")?;
        if result != CleanupResult::Failed {
            schema
                .move_artifact(id, artifact.state, ArtifactState::Deleted)
                .await
                .context("move the artifact to its next state")?;
        }
        tracing::info!(operation = %id, result = result.as_str(), "review artifact cleaned up");
        Ok(())
    }
}

/// The key of publication step `name` in `round`: `publish:<name>` in the first round,
/// `publish:<round>:<name>` in later ones.
fn round_step(round: u32, name: &str) -> String {
    if round == 1 {
        format!("publish:{name}")
    } else {
        format!("publish:{round}:{name}")
    }
}

/// Whether `key` is the step that held a failed round of publication (`publish:held`, or
/// `publish:<round>:held`).
pub(crate) fn is_held_step(key: &str) -> bool {
    key == "publish:held" || (key.starts_with("publish:") && key.ends_with(":held"))
}

/// The review artifact's canonical manifest: fields in sorted order, as serde writes them.
#[derive(Serialize)]
struct ArtifactManifest<'a> {
    base_commit: &'a str,
    databases: BTreeMap<String, ManifestEntry>,
    format: u32,
    operation_id: String,
    /// Registered databases the inventory no longer lists, whose folders and registry entries
    /// the pull request removes (`--remove-missing`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    removed: Vec<String>,
}

#[derive(Serialize)]
struct ManifestEntry {
    folder: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    merged_hash: Option<String>,
    object_counts: BTreeMap<String, u64>,
    snapshot_hash: String,
}

/// Step `missing`'s body: the registered databases the operation's inventory neither lists nor
/// left out by `ignore_databases`, in registry order.
async fn missing_databases(
    storage: &dyn Storage,
    id: OperationId,
    registry: &Registry,
) -> Result<Vec<DatabaseName>, SafeError> {
    let schema = storage.schema();
    let selected_from = schema
        .operation(id)
        .await
        .context("load the operation")?
        .and_then(|operation| operation.inventory)
        .ok_or_else(|| SafeError::new(ErrorCode::InventoryMissing))?;
    let inventory = schema
        .inventory(selected_from)
        .await
        .context("load the inventory")?
        .ok_or_else(|| SafeError::new(ErrorCode::InventoryMissing))?;
    Ok(registry
        .databases()
        .keys()
        .filter(|name| !inventory.databases.contains(name) && !inventory.ignored.contains(name))
        .cloned()
        .collect())
}

/// A step's temporary folder that cannot be used: the local disk, which is storage for now.
const SCRATCH_UNAVAILABLE: ErrorCode = ErrorCode::StorageUnavailable;

/// The candidate in a step's folder: its files as one compressed archive
/// (`artifact::candidate_archive`), one file to create rather than one per object (creating 2,400
/// small files took 1.2 to 1.7 s on a disk where writing the archive takes milliseconds).
const CANDIDATE_FILE: &str = "candidate.tar.lz4";

/// Writes the candidate into `folder`, as [`CANDIDATE_FILE`].
async fn write_candidate(folder: &Path, live: Arc<LiveSnapshot>) -> Result<(), SafeError> {
    let target = folder.join(CANDIDATE_FILE);
    let bytes = tokio::task::spawn_blocking(move || candidate_archive(&live.snapshot.files))
        .await
        .or_code(SCRATCH_UNAVAILABLE, "archive the candidate's files")??;
    tokio::fs::write(target, bytes)
        .await
        .or_code(SCRATCH_UNAVAILABLE, "write the candidate's files")
}

/// Reads the candidate's archive back from `folder`, checked to be one: what is staged is what
/// the step verified.
async fn read_candidate(folder: &Path) -> Result<Vec<u8>, SafeError> {
    let bytes = tokio::fs::read(folder.join(CANDIDATE_FILE))
        .await
        .or_code(SCRATCH_UNAVAILABLE, "read the candidate's files")?;
    tokio::task::spawn_blocking(move || candidate_files(&bytes).map(|_| bytes))
        .await
        .or_code(SCRATCH_UNAVAILABLE, "read the candidate's files")?
}

#[async_trait]
impl Workflow for RefreshWorkflow {
    fn name(&self) -> &'static str {
        workflow_name(OperationKind::Refresh)
    }

    async fn run(&self, ctx: &mut RunContext, input: Value) -> Result<Value, RunError> {
        let operation = serde_json::from_value::<RunInput>(input.clone()).ok();
        let ran = run_operation(&*self.storage, &self.notifier, ctx, input, |ctx, id| {
            self.execute(ctx, id)
        })
        .await;
        if let (Err(RunError::Failed(_)), Some(RunInput { operation })) = (&ran, operation) {
            self.discard_staged(operation).await?;
        }
        ran
    }
}

impl RefreshWorkflow {
    /// Deletes every candidate a failed refresh staged and never sealed (one already gone, or
    /// never staged, is fine).
    async fn discard_staged(&self, id: OperationId) -> Result<(), RunError> {
        let results = self.storage.schema().database_results(id).await;
        for row in results.map_err(RunError::Lost)? {
            self.settings
                .artifacts
                .discard_staged(id, row.position)
                .await;
        }
        Ok(())
    }
}
