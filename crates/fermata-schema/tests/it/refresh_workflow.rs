//! The refresh operation end to end on the real parts: a SQLite application database, the
//! MariaDB server the test command provisions (`FERMATA_TEST_MYSQL_URL`), a local git package,
//! an object store in a folder and the durable workflow engine. Inventory, refresh, review,
//! approval, rejection and expiry; the refresh rules (expired inventory, empty selection, unknown
//! names, duplicates, a database dropped after the inventory, a permission failure that is not
//! retried, a transient failure that recovers on its second attempt under an injected clock,
//! drift caught by the verifier, an account's connection limit respected); step folders never left behind, even by a panic; two
//! concurrent decisions of which exactly one wins; publication through lost answers, rate limits
//! waited out (the local forge's and the fake GitHub's `retry-after`), a failed publication held
//! and published again once, and the removal of databases no longer on the server.

use crate::fake_github::{Canned, FakeGitHub};
use crate::git_support;
use crate::support;
use crate::webhook_support::Receiver;
use crate::workflow_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::http::Method;
use fermata_accounts::KeyringHandle;
use fermata_crypto::Keyring;
use fermata_forge::local::LocalGit;
use fermata_forge::{
    CommitSpec, Forge, ForgeError, ForgeErrorKind, PullRequest, PullRequestSpec, PullState,
};
use fermata_schema::artifact::{ArtifactStore, artifact_location};
use fermata_schema::migration::Verification;
use fermata_schema::package::{Package, PackageSettings, Registry};
use fermata_schema::refresh_run::{CandidateProbe, DEFAULT_CONNECTIONS};
use fermata_schema::review::FileChange;
use fermata_schema::{
    Administrator, EngineWorkflows, Notifier, NotifySettings, NotifyWorkflow, OperationReport,
    OperationRequest, Operations, RefreshSettings, RefreshWorkflow, Reviews, SourceSettings,
    Verdict, names,
};
use fermata_store::schema::{
    ArtifactState, CleanupResult, DatabaseName, Decision, ErrorCode, Freshness, InventoryId,
    NewInventory, OperationId, OperationKind, OperationState, Outcome, RequestKey, ReviewState,
    SafeError, SchemaLeaseStatus, StepKey, StepState, Transition,
};
use fermata_store::{Storage, StoreOptions, UserId, UserName};
use fermata_store_sql::testing::ScratchDatabase;
use fermata_workflow::{Attempt, Engine, Worker, WorkerSettings};
use git_support::TestRepository;
use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use sqlx::Executor;
use sqlx::mysql::MySqlConnection;
use support::{admin, quoted, settings, snapshot_account, unique};
use workflow_support::{MAX_EXECUTIONS, RecordedPauses, administrator, request, run_until};

/// What the probe does once, in the first database step's first attempt, once the candidate is
/// written.
#[derive(Debug)]
enum Fault {
    None,
    /// Fail the first attempt with this (transient) error.
    FailFirst(ErrorCode),
    /// Run this DDL in the database on the first attempt: the verifier must see it.
    AlterFirst(String),
    /// Panic on the first attempt.
    PanicFirst,
    /// Never return from the first attempt: its worker is taken away there.
    HangFirst,
    /// Nothing in the step; the verification workspace's account may not create schemas.
    WorkspaceRefused,
    /// Fail every attempt of this database's step with this error.
    FailDatabase(String, ErrorCode),
    /// Add a column to this database's `customer` table in every attempt of its step, once its
    /// candidate is written: the verifier never agrees with it.
    AlterDatabase(String),
}

#[derive(Debug)]
struct Probe {
    fault: Fault,
    /// The step folders the probe saw, to check they are gone afterwards.
    folders: Mutex<Vec<PathBuf>>,
    /// Set once the fault happened.
    fired: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl CandidateProbe for Probe {
    async fn candidate_written(
        &self,
        database: &DatabaseName,
        folder: &Path,
        attempt: Attempt,
    ) -> Result<(), SafeError> {
        assert!(
            folder.join("candidate.tar.lz4").is_file(),
            "the candidate is in the step's folder"
        );
        self.folders.lock().unwrap().push(folder.to_owned());
        if let Fault::FailDatabase(failing, code) = &self.fault {
            return match database.as_str() == failing {
                true => Err(SafeError::new(*code)),
                false => Ok(()),
            };
        }
        if let Fault::AlterDatabase(altered) = &self.fault {
            if database.as_str() == altered {
                let ddl = format!(
                    "ALTER TABLE {}.customer ADD COLUMN added_{} int",
                    quoted(altered),
                    attempt.number()
                );
                admin().await.execute(ddl.as_str()).await.unwrap();
            }
            return Ok(());
        }
        if attempt.number() > 1 || self.fired.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Ok(());
        }
        match &self.fault {
            Fault::None => Ok(()),
            Fault::FailFirst(code) => Err(SafeError::new(*code)),
            Fault::AlterFirst(ddl) => {
                let mut admin = admin().await;
                admin
                    .execute(format!("USE {}", quoted(database.as_str())).as_str())
                    .await
                    .unwrap();
                admin.execute(ddl.as_str()).await.unwrap();
                Ok(())
            }
            Fault::PanicFirst => panic!("an injected panic in a database step"),
            Fault::HangFirst => std::future::pending().await,
            Fault::WorkspaceRefused | Fault::FailDatabase(..) | Fault::AlterDatabase(_) => Ok(()),
        }
    }
}

/// One of the writes publication makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    Commit,
    Branch,
    Pull,
}

/// What the local forge does wrong, on one kind of write.
#[derive(Debug, Clone, Copy)]
enum ForgeFault {
    /// The write is done and then answered with a retryable failure, once, as a lost response
    /// or a crash right after the write would leave it.
    AnswerLost(Write),
    /// The write is answered with the rate limit (a `retry-after` of the given seconds), the
    /// given number of times, before it is done, as GitHub answers a spent limit.
    RateLimited(Write, u32, u64),
}

/// The local forge, with a [`ForgeFault`].
#[derive(Debug)]
struct FaultyForge {
    inner: Arc<LocalGit>,
    fault: ForgeFault,
    /// How many times the fault's write was tried.
    tries: AtomicU32,
}

impl FaultyForge {
    async fn write<T>(
        &self,
        write: Write,
        doing: impl std::future::Future<Output = Result<T, ForgeError>>,
    ) -> Result<T, ForgeError> {
        match self.fault {
            ForgeFault::AnswerLost(faulty) if faulty == write => {
                let value = doing.await?;
                if self.tries.fetch_add(1, AtomicOrdering::SeqCst) == 0 {
                    return Err(ForgeError::failed("an injected failure after the write"));
                }
                Ok(value)
            }
            ForgeFault::RateLimited(faulty, times, seconds)
                if faulty == write && self.tries.fetch_add(1, AtomicOrdering::SeqCst) < times =>
            {
                let limited = ForgeErrorKind::RateLimited {
                    retry_after: Some(Duration::from_secs(seconds)),
                    reset: None,
                };
                Err(ForgeError::new(limited, "an injected rate limit").with_status(429))
            }
            _ => doing.await,
        }
    }
}

#[async_trait]
impl Forge for FaultyForge {
    async fn branch_head(&self, branch: &str) -> Result<Option<String>, ForgeError> {
        self.inner.branch_head(branch).await
    }
    async fn paths_changed(
        &self,
        from: &str,
        to: &str,
        paths: &[String],
    ) -> Result<bool, ForgeError> {
        self.inner.paths_changed(from, to, paths).await
    }
    async fn create_commit(&self, spec: &CommitSpec) -> Result<String, ForgeError> {
        self.write(Write::Commit, self.inner.create_commit(spec))
            .await
    }
    async fn create_branch(&self, branch: &str, commit: &str) -> Result<(), ForgeError> {
        self.write(Write::Branch, self.inner.create_branch(branch, commit))
            .await
    }
    async fn find_pull_request(&self, head: &str) -> Result<Option<PullRequest>, ForgeError> {
        self.inner.find_pull_request(head).await
    }
    async fn open_pull_request(&self, spec: &PullRequestSpec) -> Result<PullRequest, ForgeError> {
        self.write(Write::Pull, self.inner.open_pull_request(spec))
            .await
    }
    async fn pull_request(&self, number: u64) -> Result<Option<PullRequest>, ForgeError> {
        self.inner.pull_request(number).await
    }
    async fn close_pull_request(&self, number: u64) -> Result<bool, ForgeError> {
        self.inner.close_pull_request(number).await
    }
    async fn delete_branch(&self, branch: &str) -> Result<bool, ForgeError> {
        self.inner.delete_branch(branch).await
    }
    async fn read_file(&self, commit: &str, path: &str) -> Result<Option<Vec<u8>>, ForgeError> {
        self.inner.read_file(commit, path).await
    }
    async fn read_folder(
        &self,
        commit: &str,
        path: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, ForgeError> {
        self.inner.read_folder(commit, path).await
    }
}

/// The longest a publication here waits for the forge's rate limits.
const PUBLICATION_WAIT: Duration = Duration::from_secs(30);

struct Harness {
    storage: Arc<dyn Storage>,
    admin: Administrator,
    second_admin: Administrator,
    operations: Operations,
    reviews: Reviews,
    worker: Worker,
    engine: Engine,
    pauses: Arc<RecordedPauses>,
    probe: Arc<Probe>,
    repository: TestRepository,
    local: Arc<LocalGit>,
    objects: Arc<dyn ObjectStore>,
    scratch: tempfile::TempDir,
    _artifact_folder: tempfile::TempDir,
    /// Its refreshes verify in a workspace.
    _scratch_schemas: tokio::sync::RwLockReadGuard<'static, ()>,
}

/// Where a harness's refreshes publish.
enum Publishing {
    /// The local package repository.
    Local,
    /// The local package repository, answering as the fault says.
    Faulty(ForgeFault),
    /// Another forge (the fake GitHub), whose base branch the test lays out.
    On(Arc<dyn Forge>),
}

async fn harness(source: SourceSettings, fault: Fault, review_window: Duration) -> Harness {
    harness_publishing(source, fault, review_window, Publishing::Local).await
}

/// A harness whose refreshes publish as `publishing` says.
async fn harness_publishing(
    source: SourceSettings,
    fault: Fault,
    review_window: Duration,
    publishing: Publishing,
) -> Harness {
    build(source, fault, review_window, publishing, None, None).await
}

/// A harness whose artifacts go to the test bucket (moto's server, `FERMATA_TEST_S3_URL`).
async fn harness_on_s3(source: SourceSettings) -> Harness {
    let bucket = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(std::env::var("FERMATA_TEST_S3_URL").expect("run with scripts/test"))
        .with_bucket_name("fermata-test")
        .with_region("us-east-1")
        .with_access_key_id("fermata")
        .with_secret_access_key("fermata-secret")
        .with_allow_http(true)
        .build()
        .unwrap();
    let objects: Arc<dyn ObjectStore> = Arc::new(bucket);
    let window = Duration::from_secs(3600);
    build(
        source,
        Fault::None,
        window,
        Publishing::Local,
        None,
        Some(objects),
    )
    .await
}

/// A harness whose refreshes post their events to the webhooks of `notify`.
async fn harness_notifying(
    source: SourceSettings,
    review_window: Duration,
    notify: NotifySettings,
) -> Harness {
    build(
        source,
        Fault::None,
        review_window,
        Publishing::Local,
        Some(notify),
        None,
    )
    .await
}

async fn build(
    source: SourceSettings,
    fault: Fault,
    review_window: Duration,
    publishing: Publishing,
    notify: Option<NotifySettings>,
    bucket: Option<Arc<dyn ObjectStore>>,
) -> Harness {
    let storage: Arc<dyn Storage> = Arc::new(
        ScratchDatabase::sqlite()
            .open(StoreOptions::default())
            .await,
    );
    let admin = administrator(&*storage, "u-admin", "ada").await;
    let second_admin = administrator(&*storage, "u-grace", "grace").await;
    let repository = TestRepository::new(false);
    repository.commit(
        "main",
        &BTreeMap::from([("README.md".to_owned(), b"Schemas.\n".to_vec())]),
    );
    let artifact_folder = tempfile::tempdir().unwrap();
    let objects: Arc<dyn ObjectStore> = bucket.unwrap_or_else(|| {
        Arc::new(LocalFileSystem::new_with_prefix(artifact_folder.path()).unwrap())
    });
    let keys = Arc::new(KeyringHandle::new(Keyring::generate(), None));
    let artifacts = ArtifactStore::new(Arc::clone(&objects), keys);
    let scratch = tempfile::tempdir().unwrap();
    let package = PackageSettings::new(repository.path(), "main");
    let local = Arc::new(LocalGit::new(repository.path()));
    let forge: Arc<dyn Forge> = match publishing {
        Publishing::Faulty(fault) => Arc::new(FaultyForge {
            inner: Arc::clone(&local),
            fault,
            tries: AtomicU32::new(0),
        }),
        Publishing::Local => Arc::clone(&local) as Arc<dyn Forge>,
        Publishing::On(forge) => forge,
    };
    let probe = Arc::new(Probe {
        fault,
        folders: Mutex::default(),
        fired: std::sync::atomic::AtomicBool::new(false),
    });
    let pauses = Arc::new(RecordedPauses::default());
    let mut server = support::admin().await;
    let (user, password) = if matches!(probe.fault, Fault::WorkspaceRefused) {
        support::snapshot_account_named(&mut server, "nows").await
    } else {
        support::workspace_account(&mut server).await
    };
    let workspace = settings(&user, &password);
    let refresh = RefreshWorkflow::new(
        Arc::clone(&storage),
        RefreshSettings {
            source: Some(source.clone()),
            workspace: Some(workspace),
            package: Some(Package::on(&package, Arc::clone(&forge))),
            artifacts: artifacts.clone(),
            scratch: scratch.path().to_owned(),
            review_window,
            connections: DEFAULT_CONNECTIONS,
            filter: fermata_schema::Filter::default(),
            publication_wait: PUBLICATION_WAIT,
            lint: Default::default(),
        },
    )
    .with_probe(Arc::clone(&probe) as Arc<dyn CandidateProbe>)
    .with_notifier(Notifier::new(notify.as_ref()));
    let engine = workflow_support::engine(&storage, &pauses, source, refresh)
        .register(NotifyWorkflow::new(Arc::clone(&storage), notify).unwrap());
    let workflows = Arc::new(EngineWorkflows::new(engine.clone()));
    let operations = Operations::new(Arc::clone(&storage), workflows.clone()).with_forge(forge);
    let reviews = Reviews::new(
        Arc::clone(&storage),
        workflows,
        artifacts,
        Some(Package::on(&package, Arc::clone(&local) as Arc<dyn Forge>)),
    );
    let worker = engine.worker("refresh-test-worker", WorkerSettings::default());
    Harness {
        storage,
        admin,
        second_admin,
        operations,
        reviews,
        worker,
        engine,
        pauses,
        probe,
        repository,
        local,
        objects,
        scratch,
        _artifact_folder: artifact_folder,
        _scratch_schemas: support::SCRATCH_SCHEMAS.read().await,
    }
}

impl Harness {
    /// Runs an inventory to its end and returns its ID.
    async fn inventory(&self) -> InventoryId {
        workflow_support::inventory(&self.operations, &self.worker, &self.admin).await
    }

    async fn refresh(&self, inventory: InventoryId, databases: &[&str]) -> OperationId {
        let kind = OperationKind::Refresh;
        workflow_support::start(&self.operations, &self.admin, kind, inventory, databases).await
    }

    /// An inventory operation reserved straight in the store, as a request would, under a new
    /// request key made from `key`; nothing runs it.
    async fn reserve_inventory(&self, key: &str) -> fermata_store::schema::Operation {
        let reserved = self
            .storage
            .schema()
            .reserve_operation(
                &fermata_store::schema::NewOperation {
                    id: OperationId::generate(),
                    kind: OperationKind::Inventory,
                    actor: UserId("u-admin".to_owned()),
                    request_key: RequestKey::new(unique(key)).unwrap(),
                    inventory: None,
                    databases: Vec::new(),
                    remove_missing: false,
                },
                Duration::from_secs(60),
            )
            .await
            .unwrap();
        let fermata_store::schema::Reservation::Created(operation) = reserved else {
            panic!("{reserved:?}")
        };
        operation
    }

    /// Asks for a refresh of `databases` from `inventory` under a new request key made from
    /// `key`, as the administrator; the start protocol's answer.
    async fn request_refresh(
        &self,
        key: &str,
        inventory: InventoryId,
        databases: &[&str],
    ) -> Result<fermata_store::schema::Operation, SafeError> {
        self.operations
            .request(
                &self.admin,
                &request(
                    OperationKind::Refresh,
                    &unique(key),
                    Some(inventory),
                    databases,
                ),
            )
            .await
    }

    /// Executes runs until operation `id` is in a state `done` accepts.
    async fn run_until(
        &self,
        id: OperationId,
        done: impl Fn(OperationState) -> bool,
    ) -> OperationReport {
        run_until(&self.operations, &self.worker, id, done).await
    }

    async fn awaiting_review(&self, id: OperationId) -> OperationReport {
        let report = self
            .run_until(id, |state| {
                state == OperationState::AwaitingReview || state.is_terminal()
            })
            .await;
        assert_eq!(
            report.operation.state,
            OperationState::AwaitingReview,
            "{:?}",
            report.operation
        );
        report
    }

    async fn step_attempts(&self, id: OperationId, key: &str) -> (StepState, u32) {
        workflow_support::step_attempts(&*self.storage, id, key).await
    }

    /// Ada as an administrator whose session is not fresh.
    async fn stale_admin(&self) -> Administrator {
        let ada = self
            .storage
            .users()
            .user_by_name(&UserName::new("ada").unwrap())
            .await
            .unwrap()
            .unwrap();
        Administrator::from_user(&ada, false).unwrap()
    }

    /// Every file on `branch` of the package repository.
    fn branch_files(&self, branch: &str) -> BTreeMap<String, Vec<u8>> {
        self.repository.files_at(branch)
    }

    /// Runs a refresh of `databases` to its review and approves it; returns its ID and its
    /// report at the review.
    async fn approve(
        &self,
        inventory: InventoryId,
        databases: &[&str],
    ) -> (OperationId, OperationReport) {
        let id = self.refresh(inventory, databases).await;
        let report = self.awaiting_review(id).await;
        self.reviews
            .decide(&self.admin, id, Verdict::Approve)
            .await
            .unwrap();
        (id, report)
    }

    /// Runs a refresh of `databases` to its review, approves it and runs it to its end.
    async fn approved(&self, inventory: InventoryId, databases: &[&str]) -> OperationReport {
        let (id, _) = self.approve(inventory, databases).await;
        self.run_until(id, |state| state.is_terminal()).await
    }

    /// Every object the store holds, by location.
    async fn objects(&self) -> Vec<String> {
        workflow_support::object_locations(&*self.objects).await
    }

    /// Nothing is left in the scratch folder, and every step folder the probe saw is gone.
    fn assert_no_step_folder_left(&self) {
        let left: Vec<_> = std::fs::read_dir(self.scratch.path())
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        assert!(left.is_empty(), "step folders left behind: {left:?}");
        for folder in self.probe.folders.lock().unwrap().iter() {
            assert!(!folder.exists(), "{} is still there", folder.display());
        }
    }

    /// Registers `database` in the package with its current snapshot, as a merge would.
    async fn register(&self, database: &str) {
        let snapshot = support::take(database, 1).await.unwrap();
        self.repository.commit_package("main", &[snapshot]);
    }
}

/// Creates `database` with a few tables and a view.
async fn create_database(admin: &mut MySqlConnection, database: &str) {
    for statement in [
        format!("CREATE DATABASE {} CHARACTER SET utf8mb4", quoted(database)),
        format!("USE {}", quoted(database)),
        "CREATE TABLE customer (id int NOT NULL PRIMARY KEY, name varchar(50) NOT NULL)".to_owned(),
        "CREATE TABLE `order` (id int NOT NULL PRIMARY KEY, customer int, \
         CONSTRAINT fk_c FOREIGN KEY (customer) REFERENCES customer (id))"
            .to_owned(),
        "CREATE VIEW big_orders AS SELECT id FROM `order` WHERE id > 100".to_owned(),
    ] {
        admin.execute(statement.as_str()).await.unwrap();
    }
}

async fn drop_database(admin: &mut MySqlConnection, database: &str) {
    admin
        .execute(format!("DROP DATABASE IF EXISTS {}", quoted(database)).as_str())
        .await
        .unwrap();
}

async fn drop_databases(admin: &mut MySqlConnection, databases: &[&str]) {
    for database in databases {
        drop_database(admin, database).await;
    }
}

/// Two databases (`…a` registered and unchanged, `…b` new) and an account that sees both.
async fn two_databases() -> (MySqlConnection, [String; 2], SourceSettings) {
    let mut admin = admin().await;
    let names = [unique("a"), unique("b")];
    for name in &names {
        create_database(&mut admin, name).await;
    }
    let (user, password) = snapshot_account(&mut admin, &names).await;
    (admin, names, settings(&user, &password))
}

#[tokio::test]
async fn a_refresh_is_reviewed_and_approved_and_ends_with_its_report() {
    let (mut admin, [a, b], source) = two_databases().await;
    let harness = harness(source, Fault::None, Duration::from_secs(3600)).await;
    harness.register(&a).await;
    let inventory = harness.inventory().await;
    // Duplicates and any order: the selection keeps the inventory's order, each name once.
    let id = harness.refresh(inventory, &[&b, &a, &b]).await;
    let report = harness.awaiting_review(id).await;

    let results: Vec<_> = report
        .databases
        .iter()
        .map(|row| {
            let report = row.report.as_ref().unwrap();
            (row.database.as_str(), report.outcome, report.freshness)
        })
        .collect();
    assert_eq!(
        results,
        [
            (a.as_str(), Outcome::Unchanged, Freshness::Fresh),
            (b.as_str(), Outcome::Changed, Freshness::Fresh)
        ]
    );
    let changed = report.databases[1].report.as_ref().unwrap();
    assert_eq!(changed.object_counts["tables"], 2);
    assert_eq!(changed.object_counts["views"], 1);
    assert!(changed.merged_hash.is_none());
    let unchanged = report.databases[0].report.as_ref().unwrap();
    assert_eq!(unchanged.snapshot_hash, unchanged.merged_hash);

    // The reviewed base is the branch's head when the refresh read it.
    let head = harness.repository.head("main");
    assert_eq!(
        report.operation.reviewed_base_commit.as_deref(),
        Some(head.as_str())
    );

    // The lease is held to the review's expiry; the review is pending; the staged candidates
    // are gone and only the artifact remains.
    let schema = harness.storage.schema();
    let review = schema.review(id).await.unwrap().unwrap();
    assert_eq!(review.state, ReviewState::Pending);
    let lease = report.lease.clone().expect("the refresh holds the lease");
    assert_eq!(lease.expires_at, review.expires_at);
    assert_eq!(lease.status, SchemaLeaseStatus::AwaitingReview);
    let artifact = schema.artifact(id).await.unwrap().unwrap();
    assert_eq!(artifact.state, ArtifactState::Stored);
    assert_eq!(artifact.meta.decision_expires_at, review.expires_at);
    assert_eq!(harness.objects().await, [artifact_location(id)]);
    let manifest: serde_json::Value = serde_json::from_str(&artifact.meta.manifest).unwrap();
    assert_eq!(manifest["base_commit"], head.as_str());
    assert!(manifest["databases"].get(&b).is_some());
    assert!(
        manifest["databases"].get(&a).is_none(),
        "an unchanged database is not reviewed"
    );

    // The diff: every file of the new database is added; the unchanged one is not listed.
    let diff = harness.reviews.diff(&harness.admin, id).await.unwrap();
    assert_eq!(diff.databases.len(), 1);
    let new = &diff.databases[0];
    assert_eq!(new.database.as_str(), b);
    assert!(!new.registered);
    let paths: Vec<String> = new.files.iter().map(|file| file.path.clone()).collect();
    assert_eq!(
        paths,
        [
            "manifest.json",
            "schema.json",
            "tables/customer.sql",
            "tables/order.sql",
            "views/big_orders.sql"
        ]
    );
    assert!(
        new.files[2].diff.contains("+CREATE TABLE `customer`"),
        "{}",
        new.files[2].diff
    );
    // Its notes: the migration from nothing, proven in the workspace, and no lint finding.
    let notes = new
        .notes
        .as_ref()
        .expect("a changed database has review notes");
    let migration = notes.migration.as_ref().unwrap();
    assert_eq!(migration.adopt.verification, Verification::Verified);
    assert_eq!(migration.undo.verification, Verification::Verified);
    let adopt = migration.adopt.text(&b, false);
    assert!(adopt.contains("CREATE TABLE `customer`"), "{adopt}");
    assert!(
        adopt.contains("ALTER TABLE `order`\n  ADD CONSTRAINT `fk_c` FOREIGN KEY"),
        "{adopt}"
    );
    assert_eq!(migration.adopt.destructive_count(), 0);
    assert_eq!(
        migration.undo.destructive_count(),
        2,
        "both tables are dropped"
    );
    assert_eq!(notes.lint, []);

    // A stale session may not decide.
    let stale = harness.stale_admin().await;
    let refused = harness
        .reviews
        .decide(&stale, id, Verdict::Approve)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), ErrorCode::AccessDenied);

    let decided = harness
        .reviews
        .decide(&harness.admin, id, Verdict::Approve)
        .await
        .unwrap();
    assert_eq!(decided.state, OperationState::AwaitingReview);
    // Repeating the same decision is harmless; the other one is refused.
    harness
        .reviews
        .decide(&harness.admin, id, Verdict::Approve)
        .await
        .unwrap();
    let other = harness
        .reviews
        .decide(&harness.admin, id, Verdict::Reject)
        .await
        .unwrap_err();
    assert_eq!(other.code(), ErrorCode::ReviewNotPending);

    let report = harness.run_until(id, |state| state.is_terminal()).await;
    assert_eq!(report.operation.state, OperationState::Succeeded);
    assert!(report.lease.is_none());
    assert!(
        schema.schema_lease().await.unwrap().is_none(),
        "the lease is released"
    );
    let review = schema.review(id).await.unwrap().unwrap();
    assert_eq!(review.state, ReviewState::Approved);
    assert_eq!(review.actor, Some(UserId("u-admin".to_owned())));
    assert!(review.decided_at.is_some());
    // Published from, then deleted under the cleanup step's grant.
    let artifact = schema.artifact(id).await.unwrap().unwrap();
    assert_eq!(
        artifact.state,
        ArtifactState::Deleted,
        "published from, then deleted"
    );
    assert_eq!(artifact.cleanup_result, Some(CleanupResult::Deleted));
    assert!(harness.objects().await.is_empty());
    assert_eq!(
        harness.step_attempts(id, "cleanup").await,
        (StepState::Succeeded, 1)
    );

    // Published: one pull request from the operation's branch onto main, whose tree holds the
    // candidate files of the changed database and the registry with both databases.
    let pull = report
        .operation
        .pull_request
        .clone()
        .expect("a pull request");
    assert_eq!((pull.number, pull.base.as_str()), (1, "main"));
    assert_eq!(pull.head, format!("fermata/refresh-{id}"));
    let tree = harness.branch_files(&pull.head);
    let registry = Registry::parse(&tree["schemas/registry.json"]).unwrap();
    let registered: Vec<&str> = registry
        .databases()
        .keys()
        .map(DatabaseName::as_str)
        .collect();
    assert_eq!(registered, [a.as_str(), b.as_str()]);
    let entry = registry
        .get(&DatabaseName::new(b.clone()).unwrap())
        .unwrap();
    assert_eq!(Some(&entry.snapshot_hash), changed.snapshot_hash.as_ref());
    assert_eq!(entry.operation_id, id);
    let folder_b = format!("schemas/{}/", names::file_name(&b).unwrap());
    let published: Vec<&str> = tree
        .keys()
        .filter_map(|path| path.strip_prefix(&folder_b))
        .collect();
    assert_eq!(published, paths);
    assert_eq!(
        harness.local.pull_request(1).await.unwrap().unwrap().state,
        PullState::Open
    );
    harness.assert_no_step_folder_left();
    assert!(
        harness.pauses.0.lock().unwrap().is_empty(),
        "nothing was retried"
    );

    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn a_rejected_refresh_ends_rejected_and_its_artifact_is_deleted_under_a_grant() {
    let (mut admin, [a, b], source) = two_databases().await;
    let harness = harness(source, Fault::None, Duration::from_secs(3600)).await;
    let inventory = harness.inventory().await;
    let id = harness.refresh(inventory, &[&a, &b]).await;
    harness.awaiting_review(id).await;

    // Two administrators decide at once: exactly one decision is recorded.
    let (approve, reject) = tokio::join!(
        harness.reviews.decide(&harness.admin, id, Verdict::Approve),
        harness
            .reviews
            .decide(&harness.second_admin, id, Verdict::Reject),
    );
    assert_eq!(
        usize::from(approve.is_ok()) + usize::from(reject.is_ok()),
        1,
        "{approve:?} {reject:?}"
    );
    let report = harness.run_until(id, |state| state.is_terminal()).await;
    let review = harness.storage.schema().review(id).await.unwrap().unwrap();
    let expected = if approve.is_ok() {
        (OperationState::Succeeded, ReviewState::Approved)
    } else {
        (OperationState::Rejected, ReviewState::Rejected)
    };
    assert_eq!((report.operation.state, review.state), expected);
    assert!(
        harness
            .storage
            .schema()
            .schema_lease()
            .await
            .unwrap()
            .is_none()
    );

    if approve.is_err() {
        assert_eq!(
            report.operation.error.as_ref().map(SafeError::code),
            Some(ErrorCode::ReviewRejected)
        );
        let artifact = harness
            .storage
            .schema()
            .artifact(id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(artifact.state, ArtifactState::Deleted);
        assert_eq!(artifact.cleanup_result, Some(CleanupResult::Deleted));
        assert!(
            harness.objects().await.is_empty(),
            "{:?}",
            harness.objects().await
        );
    }
    harness.assert_no_step_folder_left();
    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn an_undecided_review_expires_and_releases_the_lease() {
    let (mut admin, [a, b], source) = two_databases().await;
    let harness = harness(source, Fault::None, Duration::from_secs(2)).await;
    let inventory = harness.inventory().await;
    let id = harness.refresh(inventory, &[&a, &b]).await;
    let awaiting = harness.awaiting_review(id).await;
    // Held at least to the review's expiry (a lease is never shortened).
    let review = harness.storage.schema().review(id).await.unwrap().unwrap();
    let lease = awaiting.lease.unwrap();
    assert!(lease.expires_at >= review.expires_at);
    assert_eq!(lease.status, SchemaLeaseStatus::AwaitingReview);
    let report = harness.run_until(id, |state| state.is_terminal()).await;
    assert_eq!(report.operation.state, OperationState::Expired);
    assert_eq!(
        report.operation.error.as_ref().map(SafeError::code),
        Some(ErrorCode::ReviewExpired)
    );
    let schema = harness.storage.schema();
    assert_eq!(
        schema.review(id).await.unwrap().unwrap().state,
        ReviewState::Expired
    );
    assert!(schema.schema_lease().await.unwrap().is_none());
    let artifact = schema.artifact(id).await.unwrap().unwrap();
    assert_eq!(artifact.state, ArtifactState::Deleted);
    // A decision after the window is refused.
    let late = harness
        .reviews
        .decide(&harness.admin, id, Verdict::Approve)
        .await
        .unwrap_err();
    assert_eq!(late.code(), ErrorCode::ReviewExpired);
    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn an_approval_after_the_window_is_refused_before_it_is_recorded() {
    let (mut admin, [a, b], source) = two_databases().await;
    let harness = harness(source, Fault::None, Duration::from_secs(2)).await;
    let inventory = harness.inventory().await;
    let id = harness.refresh(inventory, &[&a, &b]).await;
    harness.awaiting_review(id).await;
    // The window closes on the database's clock; the run has not looked yet.
    let schema = harness.storage.schema();
    let review = schema.review(id).await.unwrap().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while schema.clock().await.unwrap() < review.expires_at {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the window never closed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let late = harness
        .reviews
        .decide(&harness.admin, id, Verdict::Approve)
        .await
        .unwrap_err();
    assert_eq!(late.code(), ErrorCode::ReviewExpired);
    // Nothing of it was recorded: the review is still undecided until the run expires it.
    let review = schema.review(id).await.unwrap().unwrap();
    assert_eq!((review.state, review.actor), (ReviewState::Pending, None));
    let report = harness.run_until(id, |state| state.is_terminal()).await;
    assert_eq!(report.operation.state, OperationState::Expired);
    assert_eq!(
        schema.review(id).await.unwrap().unwrap().state,
        ReviewState::Expired
    );
    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn a_refresh_with_no_change_ends_with_its_report_and_no_review() {
    let (mut admin, [a, b], source) = two_databases().await;
    let harness = harness(source, Fault::None, Duration::from_secs(3600)).await;
    harness.register(&a).await;
    let inventory = harness.inventory().await;
    let id = harness.refresh(inventory, &[&a]).await;
    let report = harness.run_until(id, |state| state.is_terminal()).await;
    assert_eq!(report.operation.state, OperationState::Succeeded);
    assert_eq!(
        report.databases[0].report.as_ref().unwrap().outcome,
        Outcome::Unchanged
    );
    let schema = harness.storage.schema();
    assert!(schema.review(id).await.unwrap().is_none());
    assert!(schema.artifact(id).await.unwrap().is_none());
    assert!(schema.schema_lease().await.unwrap().is_none());
    assert!(harness.objects().await.is_empty());
    harness.assert_no_step_folder_left();
    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn requests_outside_the_inventory_are_refused_before_anything_runs() {
    let (mut admin, [a, b], source) = two_databases().await;
    let harness = harness(source, Fault::None, Duration::from_secs(3600)).await;
    let inventory = harness.inventory().await;
    let refused = |databases: &'static [&'static str]| {
        let request = request(
            OperationKind::Refresh,
            &unique("bad"),
            Some(inventory),
            databases,
        );
        let operations = harness.operations.clone();
        let admin = harness.admin.clone();
        async move { operations.request(&admin, &request).await }
    };
    assert_eq!(
        refused(&[]).await.unwrap_err().code(),
        ErrorCode::EmptySelection
    );
    assert_eq!(
        refused(&["not_there"]).await.unwrap_err().code(),
        ErrorCode::DatabaseNotInInventory
    );

    // An expired inventory, recorded as discovery would have, a day old.
    let schema = harness.storage.schema();
    let old = harness.reserve_inventory("old").await;
    let expired = schema
        .record_inventory(&NewInventory {
            id: InventoryId::generate(),
            operation: old.id,
            actor: UserId("u-admin".to_owned()),
            server_version: "test".to_owned(),
            databases: vec![DatabaseName::new(a.clone()).unwrap()],
            ignored: Vec::new(),
            lifetime: Duration::from_millis(1),
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let error = harness
        .operations
        .request(
            &harness.admin,
            &request(
                OperationKind::Refresh,
                &unique("exp"),
                Some(expired.id),
                &[&a],
            ),
        )
        .await
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::InventoryExpired);
    assert!(
        schema.schema_lease().await.unwrap().is_none(),
        "nothing took the lease"
    );
    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn a_database_dropped_after_the_inventory_fails_and_the_next_one_runs() {
    let (mut admin, [a, b], source) = two_databases().await;
    let harness = harness(source, Fault::None, Duration::from_secs(3600)).await;
    let inventory = harness.inventory().await;
    drop_database(&mut admin, &a).await;
    let id = harness.refresh(inventory, &[&a, &b]).await;
    let report = harness.awaiting_review(id).await;
    let first = report.databases[0].report.as_ref().unwrap();
    assert_eq!(first.outcome, Outcome::Failed);
    assert_eq!(first.freshness, Freshness::Unregistered);
    assert_eq!(
        first.error.as_ref().map(SafeError::code),
        Some(ErrorCode::DatabaseNoLongerVisible)
    );
    assert_eq!(
        harness.step_attempts(id, "database:0").await,
        (StepState::Failed, 1)
    );
    let second = report.databases[1].report.as_ref().unwrap();
    assert_eq!(second.outcome, Outcome::Changed);
    harness.assert_no_step_folder_left();
    drop_database(&mut admin, &b).await;
}

#[tokio::test]
async fn a_permission_failure_is_permanent_and_never_retried() {
    let mut admin = admin().await;
    let database = unique("perm");
    create_database(&mut admin, &database).await;
    // The account may read the tables but not view definitions.
    let (user, password) = support::snapshot_account_named(&mut admin, "np").await;
    admin
        .execute(
            format!(
                "GRANT SELECT ON {}.* TO '{user}'@'127.0.0.1'",
                support::grant_pattern(&database)
            )
            .as_str(),
        )
        .await
        .unwrap();
    let harness = harness(
        settings(&user, &password),
        Fault::None,
        Duration::from_secs(3600),
    )
    .await;
    harness.register(&database).await;
    let inventory = harness.inventory().await;
    let id = harness.refresh(inventory, &[&database]).await;
    let report = harness.run_until(id, |state| state.is_terminal()).await;
    let result = report.databases[0].report.as_ref().unwrap();
    assert_eq!(result.outcome, Outcome::Failed);
    assert_eq!(
        result.freshness,
        Freshness::Stale,
        "it has a merged snapshot"
    );
    let error = result.error.clone().unwrap();
    assert_eq!(error.code(), ErrorCode::PermissionDenied);
    assert!(!error.retryable());
    assert_eq!(
        harness.step_attempts(id, "database:0").await,
        (StepState::Failed, 1)
    );
    assert!(harness.pauses.0.lock().unwrap().is_empty());
    // Its only database failed, so the operation failed with that error.
    assert_eq!(report.operation.state, OperationState::Failed);
    assert_eq!(report.operation.error, Some(error));
    assert!(
        harness
            .storage
            .schema()
            .schema_lease()
            .await
            .unwrap()
            .is_none()
    );
    harness.assert_no_step_folder_left();
    drop_database(&mut admin, &database).await;
}

#[tokio::test]
async fn a_transient_failure_recovers_on_the_second_attempt_after_one_second() {
    let (mut admin, [a, b], source) = two_databases().await;
    let harness = harness(
        source,
        Fault::FailFirst(ErrorCode::ConnectionLost),
        Duration::from_secs(3600),
    )
    .await;
    let inventory = harness.inventory().await;
    let id = harness.refresh(inventory, &[&a]).await;
    let report = harness.awaiting_review(id).await;
    assert_eq!(
        report.databases[0].report.as_ref().unwrap().outcome,
        Outcome::Changed
    );
    assert_eq!(
        harness.step_attempts(id, "database:0").await,
        (StepState::Succeeded, 2)
    );
    assert_eq!(*harness.pauses.0.lock().unwrap(), [Duration::from_secs(1)]);
    harness.assert_no_step_folder_left();
    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn drift_between_generation_and_verification_is_caught_and_retried() {
    let (mut admin, [a, b], source) = two_databases().await;
    let harness = harness(
        source,
        Fault::AlterFirst("ALTER TABLE customer ADD COLUMN added int".to_owned()),
        Duration::from_secs(3600),
    )
    .await;
    let inventory = harness.inventory().await;
    let id = harness.refresh(inventory, &[&a]).await;
    harness.awaiting_review(id).await;
    let step = harness
        .storage
        .schema()
        .step(id, &StepKey::new("database:0").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((step.state, step.attempts), (StepState::Succeeded, 2));
    assert_eq!(
        step.error.as_ref().map(SafeError::code),
        Some(ErrorCode::SchemaChanged),
        "the first attempt's failure is kept"
    );
    // The candidate under review has the column added during the first attempt.
    let diff = harness.reviews.diff(&harness.admin, id).await.unwrap();
    let customer = diff.databases[0]
        .files
        .iter()
        .find(|file| file.path == "tables/customer.sql")
        .unwrap();
    assert!(customer.diff.contains("`added` int"), "{}", customer.diff);
    harness.assert_no_step_folder_left();
    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn a_panicking_step_leaves_no_folder_behind() {
    let (mut admin, [a, b], source) = two_databases().await;
    let harness = harness(source, Fault::PanicFirst, Duration::from_secs(3600)).await;
    let inventory = harness.inventory().await;
    let id = harness.refresh(inventory, &[&a]).await;
    let worker = harness.worker.clone();
    // The worker executing the step panics; its task ends with the panic.
    let outcome = tokio::spawn(async move {
        loop {
            if worker.run_once().await.unwrap().is_none() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    })
    .await;
    assert!(outcome.unwrap_err().is_panic());
    assert_eq!(harness.probe.folders.lock().unwrap().len(), 1);
    harness.assert_no_step_folder_left();
    assert!(
        !harness
            .operations
            .report(id)
            .await
            .unwrap()
            .operation
            .state
            .is_terminal()
    );
    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn the_connections_stay_within_the_accounts_limit() {
    let (mut admin, [a, b], _) = two_databases().await;
    // An account that may hold two connections at a time: a pool of eight would be refused.
    let (user, password) = snapshot_account(&mut admin, &[a.clone(), b.clone()]).await;
    admin
        .execute(format!("ALTER USER '{user}'@'127.0.0.1' WITH MAX_USER_CONNECTIONS 2").as_str())
        .await
        .unwrap();
    let harness = harness(
        settings(&user, &password),
        Fault::None,
        Duration::from_secs(3600),
    )
    .await;
    let inventory = harness.inventory().await;
    let id = harness.refresh(inventory, &[&a, &b]).await;
    let report = harness.awaiting_review(id).await;
    for row in &report.databases {
        assert_eq!(row.report.as_ref().unwrap().outcome, Outcome::Changed);
    }
    for position in 0..2 {
        assert_eq!(
            harness
                .step_attempts(id, &format!("database:{position}"))
                .await,
            (StepState::Succeeded, 1),
            "no attempt met the limit"
        );
    }
    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn a_decision_whose_hook_was_lost_is_delivered_again() {
    let (mut admin, [a, b], source) = two_databases().await;
    let harness = harness(source, Fault::None, Duration::from_secs(3600)).await;
    let inventory = harness.inventory().await;
    let id = harness.refresh(inventory, &[&a]).await;
    harness.awaiting_review(id).await;
    // The deciding process stopped after recording the decision, before the hook.
    harness
        .storage
        .schema()
        .decide_review(id, &Decision::Approve(UserId("u-admin".to_owned())))
        .await
        .unwrap();
    assert!(
        harness.worker.run_once().await.unwrap().is_none(),
        "the run still waits"
    );
    assert_eq!(harness.reviews.resume_decided(50).await.unwrap(), 1);
    let report = harness.run_until(id, |state| state.is_terminal()).await;
    assert_eq!(report.operation.state, OperationState::Succeeded);
    assert_eq!(harness.reviews.resume_decided(50).await.unwrap(), 0);
    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn a_worker_lost_mid_step_is_replaced_and_nothing_is_done_twice() {
    let (mut admin, [a, b], source) = two_databases().await;
    let harness = harness(source, Fault::HangFirst, Duration::from_secs(3600)).await;
    let inventory = harness.inventory().await;
    let id = harness.refresh(inventory, &[&a, &b]).await;
    let brief = WorkerSettings {
        claim_ttl: Duration::from_secs(1),
        poll_interval: Duration::from_millis(50),
    };
    // The first worker hangs in the first database's step and is then taken away mid-step, as
    // a process that died would be: it writes nothing more and its claim runs out.
    let lost = harness.engine.worker("lost-worker", brief.clone());
    let hanging = tokio::spawn(async move { lost.run_once().await });
    for _ in 0..100 {
        if !harness.probe.folders.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        harness.probe.folders.lock().unwrap().len(),
        1,
        "the first attempt began"
    );
    hanging.abort();
    assert!(hanging.await.unwrap_err().is_cancelled());

    let replacement = harness.engine.worker("replacement", brief);
    let mut report = harness.operations.report(id).await.unwrap();
    for _ in 0..MAX_EXECUTIONS {
        if report.operation.state == OperationState::AwaitingReview {
            break;
        }
        if replacement.run_once().await.unwrap().is_none() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        report = harness.operations.report(id).await.unwrap();
    }
    assert_eq!(
        report.operation.state,
        OperationState::AwaitingReview,
        "{:?}",
        report.operation
    );
    // The interrupted attempt counts; the step ran once more, and every database once.
    assert_eq!(
        harness.step_attempts(id, "database:0").await,
        (StepState::Succeeded, 2)
    );
    assert_eq!(
        harness.step_attempts(id, "database:1").await,
        (StepState::Succeeded, 1)
    );
    assert_eq!(
        harness.step_attempts(id, "bind").await,
        (StepState::Succeeded, 1)
    );
    assert_eq!(harness.objects().await, [artifact_location(id)]);
    harness.assert_no_step_folder_left();
    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn publication_survives_a_lost_answer_at_every_write() {
    for write in [Write::Commit, Write::Branch, Write::Pull] {
        let fault = ForgeFault::AnswerLost(write);
        let (mut admin, [a, b], source) = two_databases().await;
        let harness = harness_publishing(
            source,
            Fault::None,
            Duration::from_secs(3600),
            Publishing::Faulty(fault),
        )
        .await;
        let inventory = harness.inventory().await;
        let base = harness.repository.head_id("main");
        let report = harness.approved(inventory, &[&a, &b]).await;
        assert_eq!(
            report.operation.state,
            OperationState::Succeeded,
            "fault {fault:?}"
        );
        assert_published_once(&harness, report.operation.id, base).await;
        assert_eq!(report.operation.pull_request.unwrap().number, 1);
        assert_eq!(
            *harness.pauses.0.lock().unwrap(),
            [Duration::from_secs(1)],
            "fault {fault:?}"
        );
        drop_databases(&mut admin, &[&a, &b]).await;
    }
}

/// Exactly one branch, one commit on `base` and one pull request (number 1) for refresh `id`.
async fn assert_published_once(harness: &Harness, id: OperationId, base: git2::Oid) {
    let branch = format!("fermata/refresh-{id}");
    assert_eq!(
        harness.repository.branches("fermata/"),
        std::slice::from_ref(&branch)
    );
    let head = harness.repository.head_id(&branch);
    let commit = harness.repository.repository.find_commit(head).unwrap();
    assert_eq!(commit.parent_ids().collect::<Vec<_>>(), [base]);
    let pull = harness
        .local
        .find_pull_request(&branch)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(pull.number, 1, "one pull request");
    assert!(harness.local.pull_request(2).await.unwrap().is_none());
}

/// Executes runs until operation `id` is in a state `done` accepts, for at most a minute: a run
/// may sleep on the database's clock in between.
async fn run_within_a_minute(
    harness: &Harness,
    id: OperationId,
    done: impl Fn(&OperationReport) -> bool,
) -> OperationReport {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let report = harness.operations.report(id).await.unwrap();
        if done(&report) {
            return report;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "operation {id} did not get there: {:?}",
            report.operation
        );
        if harness.worker.run_once().await.unwrap().is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Two databases refreshed with a forge that answers as `fault` says, approved; returns the
/// server connection, the databases, the harness, the base commit, the refresh and its report at
/// the review.
async fn approved_on(
    fault: ForgeFault,
) -> (
    MySqlConnection,
    [String; 2],
    Harness,
    git2::Oid,
    OperationId,
    OperationReport,
) {
    let (admin, [a, b], source) = two_databases().await;
    let harness = harness_publishing(
        source,
        Fault::None,
        Duration::from_secs(3600),
        Publishing::Faulty(fault),
    )
    .await;
    let inventory = harness.inventory().await;
    let base = harness.repository.head_id("main");
    let (id, report) = harness.approve(inventory, &[&a, &b]).await;
    (admin, [a, b], harness, base, id, report)
}

#[tokio::test]
async fn a_rate_limited_publication_waits_as_the_forge_asks_and_succeeds() {
    // The branch is refused twice with `retry-after: 1`.
    let (mut admin, [a, b], harness, base, id, _) =
        approved_on(ForgeFault::RateLimited(Write::Branch, 2, 1)).await;
    let report =
        run_within_a_minute(&harness, id, |report| report.operation.state.is_terminal()).await;
    assert_eq!(report.operation.state, OperationState::Succeeded);
    assert_published_once(&harness, id, base).await;
    // Each rate limit was waited out in a durable sleep and the write tried again in a step of
    // its own; none spent the runner's retries.
    for key in ["publish:branch", "publish:branch:2", "publish:branch:3"] {
        assert_eq!(
            harness.step_attempts(id, key).await,
            (StepState::Succeeded, 1),
            "{key}"
        );
    }
    assert!(harness.pauses.0.lock().unwrap().is_empty());
    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn a_publication_github_rate_limits_waits_as_asked_and_succeeds() {
    let github = FakeGitHub::start().await;
    github.commit_on("main", &[("README.md", b"Schemas.\n")]);
    let (mut admin, [a, b], source) = two_databases().await;
    let forge: Arc<dyn Forge> = Arc::new(github.forge());
    let harness = harness_publishing(
        source,
        Fault::None,
        Duration::from_secs(3600),
        Publishing::On(forge),
    )
    .await;
    let inventory = harness.inventory().await;
    // GitHub's secondary limit on creating the branch, with `retry-after: 1`.
    github.answer_next(Method::POST, "git/refs", Canned::SecondaryRateLimit(1));
    github.take_requests();
    let (id, _) = harness.approve(inventory, &[&a, &b]).await;
    let report =
        run_within_a_minute(&harness, id, |report| report.operation.state.is_terminal()).await;
    assert_eq!(
        report.operation.state,
        OperationState::Succeeded,
        "{:?}",
        report.operation
    );
    let pull = report.operation.pull_request.unwrap();
    assert_eq!(
        (pull.number, pull.head.clone()),
        (1, format!("fermata/refresh-{id}"))
    );
    // The branch was asked for twice (the first answered with the limit), after one wait in a
    // step of its own; one commit, one pull request, and none of the runner's retries.
    let writes: Vec<String> = github
        .take_requests()
        .into_iter()
        .filter(|line| {
            line.starts_with("POST git/commits")
                || line.starts_with("POST git/refs")
                || line.starts_with("POST pulls")
        })
        .collect();
    assert_eq!(
        writes,
        [
            "POST git/commits",
            "POST git/refs",
            "POST git/refs",
            "POST pulls"
        ]
    );
    assert_eq!(
        harness.step_attempts(id, "publish:branch:2").await,
        (StepState::Succeeded, 1)
    );
    assert!(harness.pauses.0.lock().unwrap().is_empty());
    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn a_failed_publication_keeps_the_approved_refresh_and_is_published_again_once() {
    // Rate limited for longer than the publication may wait, on every one of the four tries.
    let (mut admin, [a, b], harness, base, id, report) =
        approved_on(ForgeFault::RateLimited(Write::Pull, 4, 3600)).await;

    // Not thrown away: still publishing, with the forge's error; the lease released; the
    // artifact kept; the run waits to publish again.
    let held = run_within_a_minute(&harness, id, OperationReport::awaits_republication).await;
    assert_eq!(held.operation.state, OperationState::Publishing);
    assert_eq!(
        held.operation.error.as_ref().map(SafeError::code),
        Some(ErrorCode::GithubRateLimited)
    );
    assert_eq!(held.held_publications(), 1);
    assert!(held.lease.is_none(), "the lease is released");
    let artifact = harness
        .storage
        .schema()
        .artifact(id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(artifact.state, ArtifactState::Stored);
    assert_eq!(
        harness.step_attempts(id, "publish:pull").await,
        (StepState::Failed, 4)
    );
    assert!(harness.local.pull_request(1).await.unwrap().is_none());

    // Publishing again needs a fresh session, and an operation that waits for it.
    let stale = harness.stale_admin().await;
    let refused = harness
        .operations
        .republish(&stale, &id.to_string())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), ErrorCode::AccessDenied);
    let inventory_id = report.inventory.as_ref().unwrap().operation;
    let refused = harness
        .operations
        .republish(&harness.admin, &inventory_id.to_string())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), ErrorCode::NothingToPublish);

    // Published again, twice over (the second request finds the round already asked for):
    // the same branch and commit, and one pull request.
    for _ in 0..2 {
        harness
            .operations
            .republish(&harness.admin, &id.to_string())
            .await
            .unwrap();
    }
    let report =
        run_within_a_minute(&harness, id, |report| report.operation.state.is_terminal()).await;
    assert_eq!(report.operation.state, OperationState::Succeeded);
    assert!(report.operation.error.is_none());
    assert_eq!(report.operation.pull_request.as_ref().unwrap().number, 1);
    assert_published_once(&harness, id, base).await;
    assert_eq!(
        harness.step_attempts(id, "publish:2:pull").await,
        (StepState::Succeeded, 1)
    );
    let artifact = harness
        .storage
        .schema()
        .artifact(id)
        .await
        .unwrap()
        .unwrap();
    // Published from, then deleted under the cleanup step's grant.
    assert_eq!(artifact.state, ArtifactState::Deleted);
    let refused = harness
        .operations
        .republish(&harness.admin, &id.to_string())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), ErrorCode::NothingToPublish);
    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn an_open_pull_request_blocks_refreshes_until_it_is_merged_or_closed() {
    let (mut admin, [a, b], source) = two_databases().await;
    let harness = harness(source, Fault::None, Duration::from_secs(3600)).await;
    let inventory = harness.inventory().await;
    let first = harness.approved(inventory, &[&a, &b]).await;
    let first_pull = first.operation.pull_request.clone().unwrap();

    // While it is open: refreshes are refused, inventories are not.
    let refused = harness
        .request_refresh("blocked", inventory, &[&a])
        .await
        .unwrap_err();
    assert_eq!(refused.code(), ErrorCode::PullRequestOpen);
    assert_eq!(
        refused.subject(),
        Some(&fermata_store::schema::Subject::Operation(
            first.operation.id.0
        ))
    );

    // 300 later operations (more than any page of recent ones) do not lift the block: it asks
    // about every published pull request not known to be settled, not the latest few.
    let schema = harness.storage.schema();
    for n in 0..300 {
        let later = harness.reserve_inventory(&format!("later-{n}")).await;
        schema
            .transition(
                later.id,
                &Transition::new(OperationState::Reserved, OperationState::Failed),
            )
            .await
            .unwrap()
            .unwrap();
    }
    let still = harness
        .request_refresh("still-blocked", inventory, &[&a])
        .await
        .unwrap_err();
    assert_eq!(still.code(), ErrorCode::PullRequestOpen);
    assert_eq!(
        harness.operations.open_pull_request().await.unwrap(),
        Some((first.operation.id, first_pull.clone()))
    );
    let inventory = harness.inventory().await;

    // Merged (a real fast-forward of main onto the pull request's branch): allowed, and with
    // no schema change nothing is published.
    harness
        .repository
        .fast_forward("main", harness.repository.head_id(&first_pull.head));
    assert_eq!(
        harness
            .local
            .pull_request(first_pull.number)
            .await
            .unwrap()
            .unwrap()
            .state,
        PullState::Merged
    );
    let id = harness.refresh(inventory, &[&a, &b]).await;
    let report = harness.run_until(id, |state| state.is_terminal()).await;
    assert_eq!(report.operation.state, OperationState::Succeeded);
    assert!(
        report.operation.pull_request.is_none(),
        "nothing changed, nothing published"
    );
    for row in &report.databases {
        assert_eq!(row.report.as_ref().unwrap().outcome, Outcome::Unchanged);
    }

    // A changed schema: a second pull request that touches only that database and the registry.
    admin
        .execute(
            format!(
                "ALTER TABLE {}.customer ADD COLUMN phone varchar(20)",
                quoted(&b)
            )
            .as_str(),
        )
        .await
        .unwrap();
    let second = harness.approved(inventory, &[&a, &b]).await;
    let second_pull = second.operation.pull_request.clone().unwrap();
    assert_eq!(second_pull.number, 2);
    let before = harness.branch_files("main");
    let after = harness.branch_files(&second_pull.head);
    let mut touched: Vec<&str> = after
        .iter()
        .filter(|(path, content)| before.get(*path) != Some(content))
        .map(|(path, _)| path.as_str())
        .collect();
    touched.extend(
        before
            .keys()
            .filter(|path| !after.contains_key(*path))
            .map(String::as_str),
    );
    let folder_b = format!("schemas/{}/", names::file_name(&b).unwrap());
    assert!(!touched.is_empty());
    for path in &touched {
        assert!(
            path.starts_with(&folder_b) || *path == "schemas/registry.json",
            "{path} was touched"
        );
    }

    // Closed: allowed again.
    // Closed by an administrator through Fermata (a stale session may not).
    let stale = harness.stale_admin().await;
    let second_id = second.operation.id.to_string();
    let refused = harness
        .operations
        .close_pull_request(&stale, &second_id)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), ErrorCode::AccessDenied);
    harness
        .operations
        .close_pull_request(&harness.admin, &second_id)
        .await
        .unwrap();
    assert_eq!(
        harness
            .local
            .pull_request(second_pull.number)
            .await
            .unwrap()
            .unwrap()
            .state,
        PullState::Closed
    );
    // Its branch is deleted in the package.
    assert_eq!(
        harness.local.branch_head(&second_pull.head).await.unwrap(),
        None
    );
    let inventory = harness.inventory().await;
    harness
        .request_refresh("after-close", inventory, &[&a])
        .await
        .unwrap();
    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn a_pull_request_closed_on_the_forge_lifts_the_block_and_loses_its_branch() {
    let (mut admin, [a, b], source) = two_databases().await;
    let harness = harness(source, Fault::None, Duration::from_secs(3600)).await;
    let inventory = harness.inventory().await;
    let published = harness.approved(inventory, &[&a, &b]).await;
    let pull = published.operation.pull_request.clone().unwrap();

    let branch = async || harness.local.branch_head(&pull.head).await.unwrap();
    let unsettled = async || {
        let schema = harness.storage.schema();
        schema.unsettled_pull_requests().await.unwrap().len()
    };

    // Closed by hand on the forge, not through Fermata: the branch is still there.
    assert!(harness.local.close_pull_request(pull.number).await.unwrap());
    assert!(branch().await.is_some());

    // What a page shows asks and learns it is closed, and changes nothing.
    assert_eq!(harness.operations.open_pull_request().await.unwrap(), None);
    assert!(branch().await.is_some());
    assert_eq!(unsettled().await, 1, "showing the block recorded nothing");
    // The block before a refresh asks, learns it is closed, records so, and deletes the branch
    // nothing will merge; a refresh may start.
    assert_eq!(
        harness.operations.settle_pull_requests().await.unwrap(),
        None
    );
    assert_eq!(branch().await, None);
    assert_eq!(
        unsettled().await,
        0,
        "a settled pull request is not asked about again"
    );
    let inventory = harness.inventory().await;
    harness
        .request_refresh("after-forge-close", inventory, &[&a])
        .await
        .unwrap();
    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn a_base_that_moved_is_built_on_unless_it_changed_what_is_published() {
    let (mut admin, [a, b], source) = two_databases().await;
    let harness = harness(source, Fault::None, Duration::from_secs(3600)).await;
    let inventory = harness.inventory().await;

    // The base moves after the review by a change elsewhere: the commit goes onto the new head.
    let id = harness.refresh(inventory, &[&a]).await;
    harness.awaiting_review(id).await;
    let mut moved = harness.branch_files("main");
    moved.insert("README.md".to_owned(), b"Schemas, reviewed.\n".to_vec());
    let new_head = harness.repository.commit("main", &moved);
    harness
        .reviews
        .decide(&harness.admin, id, Verdict::Approve)
        .await
        .unwrap();
    let report = harness.run_until(id, |state| state.is_terminal()).await;
    assert_eq!(report.operation.state, OperationState::Succeeded);
    let head = harness
        .repository
        .head_id(&report.operation.pull_request.unwrap().head);
    let parents: Vec<_> = harness
        .repository
        .repository
        .find_commit(head)
        .unwrap()
        .parent_ids()
        .collect();
    assert_eq!(parents, [new_head]);

    // Merged; then a refresh whose base branch changes the registry meanwhile is refused and
    // keeps its artifact.
    harness.repository.fast_forward("main", head);
    let inventory = harness.inventory().await;
    let id = harness.refresh(inventory, &[&b]).await;
    harness.awaiting_review(id).await;
    let mut moved = harness.branch_files("main");
    moved.insert(
        "schemas/registry.json".to_owned(),
        Registry::default().to_canonical_json(),
    );
    harness.repository.commit("main", &moved);
    harness
        .reviews
        .decide(&harness.admin, id, Verdict::Approve)
        .await
        .unwrap();
    let report = harness.run_until(id, |state| state.is_terminal()).await;
    assert_eq!(report.operation.state, OperationState::Failed);
    let error = report.operation.error.unwrap();
    assert_eq!(error.code(), ErrorCode::BaseChanged);
    assert!(!error.retryable());
    let artifact = harness
        .storage
        .schema()
        .artifact(id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        artifact.state,
        ArtifactState::Stored,
        "kept for a new refresh"
    );
    assert!(
        harness
            .storage
            .schema()
            .schema_lease()
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        harness
            .repository
            .branches(&format!("fermata/refresh-{id}"))
            .is_empty()
    );
    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn a_refresh_can_propose_removing_the_databases_no_longer_on_the_server() {
    let (mut admin, [a, b], source) = two_databases().await;
    let harness = harness(source, Fault::None, Duration::from_secs(3600)).await;
    let snapshots = [
        support::take(&a, 1).await.unwrap(),
        support::take(&b, 1).await.unwrap(),
    ];
    harness.repository.commit_package("main", &snapshots);
    drop_database(&mut admin, &b).await;
    let inventory = harness.inventory().await;

    // Nothing of `a` changed; `b` is registered but gone: the refresh proposes removing it.
    let request = OperationRequest {
        remove_missing: true,
        ..request(
            OperationKind::Refresh,
            "remove-missing",
            Some(inventory),
            &[&a],
        )
    };
    let id = harness
        .operations
        .request(&harness.admin, &request)
        .await
        .unwrap()
        .id;
    let report = harness.awaiting_review(id).await;
    assert!(report.operation.remove_missing);
    assert_eq!(
        report.databases[0].report.as_ref().unwrap().outcome,
        Outcome::Unchanged
    );
    let diff = harness.reviews.diff(&harness.admin, id).await.unwrap();
    assert_eq!(diff.databases.len(), 1);
    let removed = &diff.databases[0];
    assert_eq!(removed.database.as_str(), b);
    assert!(removed.removed && removed.registered);
    assert!(
        removed
            .files
            .iter()
            .all(|file| file.change == FileChange::Removed),
        "{removed:?}"
    );
    assert!(
        removed
            .files
            .iter()
            .any(|file| file.path == "tables/order.sql")
    );

    harness
        .reviews
        .decide(&harness.admin, id, Verdict::Approve)
        .await
        .unwrap();
    let report = harness.run_until(id, |state| state.is_terminal()).await;
    assert_eq!(report.operation.state, OperationState::Succeeded);
    let tree = harness.branch_files(&report.operation.pull_request.unwrap().head);
    let registry = Registry::parse(&tree["schemas/registry.json"]).unwrap();
    let registered: Vec<&str> = registry
        .databases()
        .keys()
        .map(DatabaseName::as_str)
        .collect();
    assert_eq!(registered, [a.as_str()]);
    let gone = format!("schemas/{}/", names::file_name(&b).unwrap());
    assert!(!tree.keys().any(|path| path.starts_with(&gone)), "{tree:?}");
    let kept = format!("schemas/{}/", names::file_name(&a).unwrap());
    assert!(tree.keys().any(|path| path.starts_with(&kept)));
    drop_databases(&mut admin, &[&a]).await;
}

#[tokio::test]
async fn every_candidate_is_also_verified_in_the_workspace() {
    let (mut admin, [a, b], source) = two_databases().await;
    let harness = harness(source, Fault::WorkspaceRefused, Duration::from_secs(3600)).await;
    let inventory = harness.inventory().await;
    let id = harness.refresh(inventory, &[&a]).await;
    let report = harness.run_until(id, |state| state.is_terminal()).await;
    let result = report.databases[0].report.as_ref().unwrap();
    assert_eq!(result.outcome, Outcome::Failed);
    assert_eq!(
        result.error.as_ref().map(SafeError::code),
        Some(ErrorCode::PermissionDenied),
        "the workspace refused the scratch schema"
    );
    assert_eq!(report.operation.state, OperationState::Failed);
    harness.assert_no_step_folder_left();
    drop_databases(&mut admin, &[&a, &b]).await;
}

/// Executes runs until `receiver` has a post of `kind`; returns its posts of that kind.
async fn delivered(
    harness: &Harness,
    receiver: &Receiver,
    kind: &str,
) -> Vec<crate::webhook_support::Post> {
    for _ in 0..100 {
        let posts = receiver.of(kind);
        if !posts.is_empty() {
            return posts;
        }
        if harness.worker.run_once().await.unwrap().is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    panic!("no {kind} event arrived: {:?}", receiver.posts());
}

#[tokio::test]
async fn webhooks_get_signed_events_when_a_review_opens_nears_its_expiry_and_is_published() {
    // The receiver fails the first post: it is tried again, and both tries are in the report.
    let receiver = Receiver::start(1).await;
    let (mut admin, [unchanged, new], source) = two_databases().await;
    let harness = harness_notifying(source, Duration::from_secs(8), receiver.settings()).await;
    harness.register(&unchanged).await;
    let inventory = harness.inventory().await;
    let id = harness.refresh(inventory, &[&unchanged, &new]).await;
    harness.awaiting_review(id).await;

    let opened = delivered(&harness, &receiver, "review.opened").await;
    assert_eq!(opened.len(), 2, "one failed try, one delivered");
    let review = harness.storage.schema().review(id).await.unwrap().unwrap();
    for post in &opened {
        assert!(post.verified, "{post:?}");
        assert_eq!(post.headers["x-fermata-event"], "review.opened");
        assert_eq!(
            post.headers["x-fermata-delivery"],
            format!("review.opened:{id}")
        );
        let body = &post.body;
        assert_eq!(body["id"], format!("review.opened:{id}"));
        assert_eq!(body["operation"], id.to_string());
        assert_eq!(body["operation_kind"], "refresh");
        assert_eq!(body["state"], "awaiting_review");
        assert_eq!(body["review_expires_at"], review.expires_at.to_string());
        let databases: Vec<_> = body["databases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|database| {
                (
                    database["name"].as_str().unwrap(),
                    database["outcome"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            databases,
            [(unchanged.as_str(), "unchanged"), (new.as_str(), "changed")]
        );
    }
    let step = harness.step_attempts(id, "notify:review.opened:0").await;
    assert_eq!(step, (StepState::Succeeded, 2));

    // Half the window before it closes, the still pending review is announced as expiring.
    let expiring = delivered(&harness, &receiver, "review.expiring").await;
    assert!(expiring.iter().all(|post| post.verified));
    let now = harness.storage.schema().clock().await.unwrap();
    assert!(now < review.expires_at, "the notice came before the expiry");
    harness
        .reviews
        .decide(&harness.admin, id, Verdict::Approve)
        .await
        .unwrap();
    let report = harness.run_until(id, OperationState::is_terminal).await;
    assert_eq!(report.operation.state, OperationState::Succeeded);
    let pull = report.operation.pull_request.unwrap();
    let published = delivered(&harness, &receiver, "pull_request.published").await;
    assert_eq!(published.len(), 1);
    assert!(published[0].verified);
    assert_eq!(published[0].body["pull_request"]["number"], pull.number);
    assert_eq!(published[0].body["pull_request"]["url"], pull.url.as_str());
    assert_eq!(published[0].body["state"], "succeeded");

    // No event holds DDL or a secret.
    for post in receiver.posts() {
        let text = post.body.to_string();
        for forbidden in ["CREATE", "customer", "password", "webhook-test-secret"] {
            assert!(!text.contains(forbidden), "{text}");
        }
    }
    drop_databases(&mut admin, &[&unchanged, &new]).await;
}

#[tokio::test]
async fn published_and_staged_artifacts_are_gone_from_a_bucket() {
    let (mut admin, [a, b], source) = two_databases().await;
    let harness = harness_on_s3(source).await;
    let inventory = harness.inventory().await;
    let id = harness.refresh(inventory, &[&a, &b]).await;
    harness.awaiting_review(id).await;
    let ours = |objects: Vec<String>| -> Vec<String> {
        objects
            .into_iter()
            .filter(|location| location.contains(&id.to_string()))
            .collect()
    };
    // The staged candidates went when the artifact was sealed; the artifact waits for review.
    assert_eq!(ours(harness.objects().await), [artifact_location(id)]);
    harness
        .reviews
        .decide(&harness.admin, id, Verdict::Approve)
        .await
        .unwrap();
    let report = harness.run_until(id, OperationState::is_terminal).await;
    assert_eq!(report.operation.state, OperationState::Succeeded);
    let artifact = harness
        .storage
        .schema()
        .artifact(id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(artifact.state, ArtifactState::Deleted);
    assert_eq!(artifact.cleanup_result, Some(CleanupResult::Deleted));
    assert!(ours(harness.objects().await).is_empty());
    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn a_candidate_the_verifier_refuses_is_never_staged() {
    let (mut admin, [a, b], source) = two_databases().await;
    // The second database changes after every candidate of it is written, while its review
    // is prepared beside the verifier's pass.
    let harness = harness(
        source,
        Fault::AlterDatabase(b.clone()),
        Duration::from_secs(3600),
    )
    .await;
    let inventory = harness.inventory().await;
    let id = harness.refresh(inventory, &[&a, &b]).await;
    let report = harness.awaiting_review(id).await;
    let failed = report.databases[1].report.as_ref().unwrap();
    assert_eq!(
        failed.error.as_ref().map(SafeError::code),
        Some(ErrorCode::SchemaChanged)
    );
    // The artifact step deleted the one staged candidate it sealed; none of the refused ones
    // was ever written.
    let ours: Vec<String> = harness
        .objects()
        .await
        .into_iter()
        .filter(|location| location.contains(&id.to_string()))
        .collect();
    assert_eq!(ours, [artifact_location(id)]);
    let manifest = harness.reviews.diff(&harness.admin, id).await.unwrap();
    assert_eq!(manifest.databases.len(), 1, "{manifest:?}");
    harness.assert_no_step_folder_left();
    drop_databases(&mut admin, &[&a, &b]).await;
}

#[tokio::test]
async fn a_refresh_that_fails_before_sealing_leaves_no_staged_candidate() {
    let (mut admin, [a, b], source) = two_databases().await;
    // The first database's candidate is staged; the second's step finds the lease gone, which
    // fails the refresh before the artifact is sealed.
    let fault = Fault::FailDatabase(b.clone(), ErrorCode::LeaseExpired);
    let harness = harness(source, fault, Duration::from_secs(3600)).await;
    let inventory = harness.inventory().await;
    let id = harness.refresh(inventory, &[&a, &b]).await;
    let report = harness.run_until(id, OperationState::is_terminal).await;
    assert_eq!(report.operation.state, OperationState::Failed);
    assert_eq!(
        harness.step_attempts(id, "database:0").await,
        (StepState::Succeeded, 1)
    );
    assert!(
        harness
            .storage
            .schema()
            .artifact(id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        harness.objects().await.is_empty(),
        "{:?}",
        harness.objects().await
    );
    harness.assert_no_step_folder_left();
    drop_databases(&mut admin, &[&a, &b]).await;
}
