//! The SQL adapters of the storage port: SQLite (the embedded default) and PostgreSQL.
//!
//! Both run through sqlx's `Any` driver, so every store's logic is written once; the differences
//! between the engines (clock, row locks, how a write transaction begins, advisory locks) live in
//! [`Dialect`] and each engine's migrations in `migrations/<dialect>/`. Nothing outside this
//! crate sees a driver type or a line of SQL.

mod api_token;
mod backup;
mod channel;
mod chat;
mod claim;
mod cluster;
mod collaboration;
mod commit_statement;
mod dialect;
mod error;
mod fence;
mod group_commit;
mod history;
mod jobs;
mod journal_read;
mod lease;
mod machine;
mod machine_choice;
mod mcp_session;
mod media;
pub mod migrations;
mod planner;
mod recovery_read;
mod repository;
mod research;
mod row;
mod schema;
mod search;
mod session;
mod tenure;
mod user;
mod workflow;
mod write_transaction;

#[cfg(feature = "testing")]
pub mod testing;

use std::path::PathBuf;
use std::sync::{Arc, Once};
use std::time::Duration;

use fermata_store::{StoreOptions, StoreResult, StoreResultExt};
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::migrate::Migrator;
use sqlx::{AnyConnection, AnyPool, ConnectOptions, Connection, Executor};

use crate::error::StoreContext;
use crate::write_transaction::WriteTransaction;

pub use dialect::Dialect;
pub use migrations::MigrationStatus;

/// Where the application database is.
#[derive(Clone)]
pub enum Database {
    /// A SQLite file, created on first use.
    Sqlite { path: PathBuf },
    /// A PostgreSQL database, by connection URL. The URL may hold a password: it is never
    /// printed, and `Debug` shows only that it is there.
    Postgres { url: String },
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Database::Sqlite { path } => f.debug_struct("Sqlite").field("path", path).finish(),
            Database::Postgres { .. } => f.write_str("Postgres { url: <redacted> }"),
        }
    }
}

impl Database {
    pub fn dialect(&self) -> Dialect {
        match self {
            Database::Sqlite { .. } => Dialect::Sqlite,
            Database::Postgres { .. } => Dialect::Postgres,
        }
    }
}

/// How long a statement may wait for SQLite's write lock before it fails as unavailable.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a caller may wait for a pooled connection (or its turn to write), unless the store
/// was given a wait limit (see [`acquire_timeout`]).
const POOL_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// The shortest wait for a pooled connection a wait limit can make: a busy pool hands over a
/// connection within it, however short the limit (tests run with half a second).
const MIN_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a caller may wait for a pooled connection or its turn to write. A serving process
/// waits at most its wait limit (no less than [`MIN_ACQUIRE_TIMEOUT`]): while the database is
/// down the pool keeps trying to connect until this deadline, so a commit or a request then fails
/// as unavailable within about one database wait rather than ten seconds.
fn acquire_timeout(wait_limit: Option<Duration>) -> Duration {
    wait_limit.map_or(POOL_ACQUIRE_TIMEOUT, |limit| limit.max(MIN_ACQUIRE_TIMEOUT))
}

/// How long a pooled PostgreSQL connection may sit idle and still be handed out without a
/// check. The pool checked it when it came back; within this time a connection that died since
/// fails its next statement as it would have failed right after a check, and every write is a
/// transaction that then leaves nothing behind.
const CHECKED_RECENTLY: Duration = Duration::from_secs(1);

/// Checks a pooled connection before it is handed out; `false` closes it and the pool takes or
/// opens another.
///
/// A connection still inside a transaction is never handed out. A transaction dropped without
/// its COMMIT is rolled back before its connection is taken back, but a COMMIT or ROLLBACK that
/// failed (a full disk, an I/O error: SQLite may have ended the transaction itself, and then
/// refuses the ROLLBACK) leaves the driver counting a transaction that no later statement may
/// inherit. Such a connection is closed here.
///
/// Beyond that, a check runs where it can tell anything: a PostgreSQL connection that sat idle
/// longer than [`CHECKED_RECENTLY`] (the server may have ended it, or the network dropped it)
/// answers a ping first. Skipping the check of a connection used moments ago saves a round trip
/// on the path of every write, as HikariCP's `aliveBypassWindowMs` does.
async fn check_idle_connection(
    conn: &mut AnyConnection,
    dialect: Dialect,
    idle_for: Duration,
) -> Result<bool, sqlx::Error> {
    if conn.is_in_transaction() {
        // At debug level: the failure that stranded it was the caller's to log, once per outage.
        tracing::debug!(
            "closed a pooled database connection left inside a transaction whose end failed"
        );
        return Ok(false);
    }
    if dialect == Dialect::Postgres && idle_for > CHECKED_RECENTLY {
        conn.ping().await?;
    }
    Ok(true)
}

/// Every store of one SQL database.
#[derive(Debug, Clone)]
pub struct SqlStorage {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    pool: AnyPool,
    /// Where write transactions begin: the pool itself on PostgreSQL; on SQLite a pool of two
    /// connections of its own, taken in turns (see `write_transaction.rs`).
    writes: AnyPool,
    write_turns: write_transaction::WriteTurns,
    dialect: Dialect,
    /// Kept to open connections outside the pool (lease renewal, migrations).
    connect_options: AnyConnectOptions,
    options: StoreOptions,
    fence_sql: fence::FenceStatements,
    /// The shard count and the documents' shards this process has read.
    cluster: cluster::ClusterCache,
    cluster_sql: cluster::Statements,
    /// Document commits waiting to share the next fenced transaction.
    commits: group_commit::CommitQueue,
    lease_sql: lease::Statements,
    tenure_sql: tenure::Statements,
    user_sql: user::Statements,
    session_sql: session::Statements,
    api_token_sql: api_token::Statements,
    machine_sql: machine::Statements,
    channel_sql: channel::Statements,
    collaboration_sql: collaboration::Statements,
    journal_sql: journal_read::JournalStatements,
    recovery_sql: recovery_read::RecoveryStatement,
    schema_sql: schema::Statements,
    workflow_sql: workflow::Statements,
    jobs_sql: jobs::Statements,
    research_sql: research::Statements,
    history_sql: history::Statements,
    chat_sql: chat::Statements,
    planner_sql: planner::Statements,
    machine_choice_sql: machine_choice::Statements,
    mcp_session_sql: mcp_session::Statements,
    media_sql: media::Statements,
    repository_sql: repository::Statements,
    search_sql: search::Statements,
}

impl SqlStorage {
    /// Connects to `database`. Applies no migration; see [`SqlStorage::migrate`].
    pub async fn connect(database: &Database, options: StoreOptions) -> StoreResult<Self> {
        static DRIVERS: Once = Once::new();
        DRIVERS.call_once(sqlx::any::install_default_drivers);

        let dialect = database.dialect();
        let connect_options = connect_options(database)?;
        let max_connections = match dialect {
            Dialect::Sqlite => 4,
            Dialect::Postgres => 10,
        };
        let wait_limit = options.wait_limit;
        let acquire_timeout = acquire_timeout(wait_limit);
        let pool_of = |max_connections| {
            AnyPoolOptions::new()
                .max_connections(max_connections)
                // The pool checks every connection it takes back (a round trip), so a check
                // before each use would only repeat it: a PostgreSQL connection is checked again
                // only after it sat idle (see `check_idle_connection`). A SQLite connection is a
                // file the process holds open: nothing can hang up on it.
                .test_before_acquire(false)
                .before_acquire(move |conn, meta| {
                    Box::pin(check_idle_connection(conn, dialect, meta.idle_for))
                })
                .acquire_timeout(acquire_timeout)
                .after_connect(move |conn, _meta| {
                    Box::pin(prepare_pooled(conn, dialect, wait_limit))
                })
                .connect_with(connect_options.clone())
        };
        let pool = pool_of(max_connections)
            .await
            .context("connecting to the database")?;
        // SQLite has one writer at a time: writes take turns (see `write_transaction.rs`).
        let (writes, write_turns) = match dialect {
            Dialect::Sqlite => (
                pool_of(2).await.context("connecting to the database")?,
                Some(Default::default()),
            ),
            Dialect::Postgres => (pool.clone(), None),
        };
        Ok(SqlStorage {
            inner: Arc::new(Inner {
                pool,
                writes,
                write_turns,
                dialect,
                connect_options,
                options,
                fence_sql: fence::FenceStatements::new(dialect),
                cluster: cluster::ClusterCache::default(),
                cluster_sql: cluster::Statements::new(dialect),
                commits: group_commit::CommitQueue::default(),
                lease_sql: lease::Statements::new(dialect),
                tenure_sql: tenure::Statements::new(dialect),
                user_sql: user::Statements::new(dialect),
                session_sql: session::Statements::new(dialect),
                api_token_sql: api_token::Statements::new(dialect),
                machine_sql: machine::Statements::new(dialect),
                channel_sql: channel::Statements::new(dialect),
                collaboration_sql: collaboration::Statements::new(dialect),
                journal_sql: journal_read::JournalStatements::new(dialect),
                recovery_sql: recovery_read::RecoveryStatement::new(dialect),
                schema_sql: schema::Statements::new(dialect),
                workflow_sql: workflow::Statements::new(dialect),
                jobs_sql: jobs::Statements::new(dialect),
                research_sql: research::Statements::new(dialect),
                history_sql: history::Statements::new(dialect),
                chat_sql: chat::Statements::new(dialect),
                planner_sql: planner::Statements::new(dialect),
                machine_choice_sql: machine_choice::Statements::new(dialect),
                mcp_session_sql: mcp_session::Statements::new(dialect),
                media_sql: media::Statements::new(dialect),
                repository_sql: repository::Statements::new(dialect),
                search_sql: search::Statements::new(dialect),
            }),
        })
    }

    pub fn dialect(&self) -> Dialect {
        self.inner.dialect
    }

    /// Where the database stands against this release's migrations. Fails with `Corrupt`, naming
    /// the file, when an applied migration differs from this release's.
    pub async fn migration_status(&self) -> StoreResult<MigrationStatus> {
        self.migration_status_against(migrations::embedded(self.inner.dialect))
            .await
    }

    /// Checks the applied migrations, then applies the pending ones in order.
    pub async fn migrate(&self) -> StoreResult<MigrationStatus> {
        self.migrate_with(migrations::embedded(self.inner.dialect))
            .await
    }

    /// [`SqlStorage::migration_status`] against another set of migration files.
    pub async fn migration_status_against(
        &self,
        migrator: &Migrator,
    ) -> StoreResult<MigrationStatus> {
        let mut conn = self.inner.dedicated_connection().await?;
        let status = migrations::check(&mut conn, migrator, self.inner.dialect).await;
        conn.close().await.ok();
        status
    }

    /// [`SqlStorage::migrate`] with another set of migration files.
    pub async fn migrate_with(&self, migrator: &Migrator) -> StoreResult<MigrationStatus> {
        let mut conn = self.inner.dedicated_connection().await?;
        let result = async {
            let before = migrations::check(&mut conn, migrator, self.inner.dialect).await?;
            if !before.pending.is_empty() {
                migrations::apply(&mut conn, migrator).await?;
            }
            migrations::check(&mut conn, migrator, self.inner.dialect).await
        }
        .await;
        conn.close().await.ok();
        result
    }

    /// Closes the pool, waiting for connections in use to come back.
    pub async fn close(&self) {
        self.inner.writes.close().await;
        self.inner.pool.close().await;
    }

    /// The shared pool, for benchmarks and tests that compare the stores with bare statements.
    #[cfg(feature = "testing")]
    pub fn pool(&self) -> &AnyPool {
        &self.inner.pool
    }
}

impl Inner {
    /// Begins a write transaction on a pooled connection (`BEGIN IMMEDIATE` on SQLite). When the
    /// store was opened with a writer fence, the transaction is a fenced one under the process's
    /// current fence, and is refused (`Fenced`) while the process does not hold the writer lease:
    /// every write a serving process makes goes through the fence, whether or not its method
    /// names one.
    async fn begin_write(&self, action: &str) -> StoreResult<WriteTransaction> {
        match &self.options.writer_fence {
            None => self.begin_ungated(action).await,
            Some(writer) => {
                let fence = writer.gate(action)?;
                Ok(self.begin_fenced(&fence, action).await?.into_transaction())
            }
        }
    }

    /// Begins a write transaction that no writer fence gates: for the lease operations, and for
    /// fenced transactions, which check their own fence.
    async fn begin_ungated(&self, action: &str) -> StoreResult<WriteTransaction> {
        let begin = self.dialect.begin_write();
        let patience = acquire_timeout(self.options.wait_limit);
        WriteTransaction::begin(&self.writes, &self.write_turns, begin, patience)
            .await
            .context(action)
    }

    /// A connection outside the pool, prepared like the pool's.
    async fn dedicated_connection(&self) -> StoreResult<AnyConnection> {
        let mut conn = AnyConnection::connect_with(&self.connect_options)
            .await
            .context("connecting to the database")?;
        prepare_connection(&mut conn, self.dialect)
            .await
            .context("preparing a database connection")?;
        Ok(conn)
    }
}

fn connect_options(database: &Database) -> StoreResult<AnyConnectOptions> {
    let options = match database {
        Database::Sqlite { path } => {
            let sqlite = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(path)
                .create_if_missing(true);
            AnyConnectOptions::from_url(&sqlite.to_url_lossy())
                .or_invalid("the SQLite database path is not usable")?
        }
        Database::Postgres { url } => url
            .parse::<AnyConnectOptions>()
            .or_invalid("the PostgreSQL connection URL does not parse")?,
    };
    Ok(options.disable_statement_logging())
}

/// Settings every connection gets, pooled or not.
async fn prepare_connection(conn: &mut AnyConnection, dialect: Dialect) -> Result<(), sqlx::Error> {
    if dialect == Dialect::Sqlite {
        // Set explicitly rather than trusting defaults: durability and integrity depend on them.
        conn.execute("PRAGMA journal_mode = WAL").await?;
        conn.execute("PRAGMA synchronous = FULL").await?;
        conn.execute("PRAGMA foreign_keys = ON").await?;
        // Statement journals (a group commit's savepoints) stay in memory rather than spilling
        // to a temporary file; they only ever undo part of a transaction, never recover one.
        conn.execute("PRAGMA temp_store = MEMORY").await?;
        let busy = format!("PRAGMA busy_timeout = {}", SQLITE_BUSY_TIMEOUT.as_millis());
        conn.execute(busy.as_str()).await?;
    }
    Ok(())
}

/// Settings every pooled connection gets: those of every connection, then the bounds on its
/// waits when the store was given a limit. Connections outside the pool (migrations, the lease
/// renewal channel) keep their own.
async fn prepare_pooled(
    conn: &mut AnyConnection,
    dialect: Dialect,
    wait_limit: Option<Duration>,
) -> Result<(), sqlx::Error> {
    prepare_connection(conn, dialect).await?;
    if let Some(limit) = wait_limit {
        for setting in dialect.pool_session_settings(limit) {
            conn.execute(setting.as_str()).await?;
        }
    }
    Ok(())
}

fermata_store::impl_storage!(SqlStorage, driver = |storage| storage.inner.dialect.name());
