//! What every benchmark shares: nearest-rank summaries, the check that the database is durable,
//! the bare single-row insert transaction that is the floor every write is compared with (and
//! the same insert fenced), and the bytes a write appends to the database's log.

use std::time::{Duration, Instant};

use fermata_store::Fence;
use fermata_store::cluster::{ClusterStore as _, Shard};
use sqlx::Any;
use sqlx::Row;
use sqlx::any::AnyArguments;
use sqlx::query::Query;

use crate::Dialect;
use crate::testing::ScratchStorage;

/// A sample's size, median and 99th percentile (nearest rank: always an observed sample).
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub n: usize,
    pub median: Duration,
    pub p99: Duration,
}

impl Summary {
    pub fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        Summary {
            n: samples.len(),
            median: nearest_rank(&samples, 50),
            p99: nearest_rank(&samples, 99),
        }
    }
}

fn nearest_rank(sorted: &[Duration], percent: usize) -> Duration {
    let rank = (sorted.len() * percent).div_ceil(100).max(1);
    sorted[rank - 1]
}

pub fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

/// How many times slower `measured` is than `floor`.
pub fn ratio(measured: Duration, floor: Duration) -> f64 {
    measured.as_secs_f64() / floor.as_secs_f64()
}

/// The durability settings in force, refusing to measure without them: a benchmark of a database
/// that does not flush its commits would say nothing about a write.
pub async fn durable_setting(store: &ScratchStorage) -> String {
    let pool = store.storage.pool();
    match store.storage.dialect() {
        Dialect::Sqlite => {
            let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
                .fetch_one(pool)
                .await
                .expect("read SQLite's journal mode");
            let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
                .fetch_one(pool)
                .await
                .expect("read SQLite's synchronous setting");
            // 2 is FULL.
            assert!(
                journal.eq_ignore_ascii_case("wal") && synchronous == 2,
                "SQLite is not in WAL with synchronous=FULL (journal_mode={journal}, \
                 synchronous={synchronous})"
            );
            "file in a temporary folder, journal_mode=WAL, synchronous=FULL".to_owned()
        }
        Dialect::Postgres => {
            let (fsync, commit): (String, String) = sqlx::query_as(
                "SELECT current_setting('fsync'), current_setting('synchronous_commit')",
            )
            .fetch_one(pool)
            .await
            .expect("read PostgreSQL's durability settings");
            assert!(
                fsync == "on" && commit == "on",
                "PostgreSQL is not durable (fsync={fsync}, synchronous_commit={commit}): start it \
                 with `start_postgres durable`, as scripts/bench does"
            );
            format!("fresh scratch database, fsync={fsync}, synchronous_commit={commit}")
        }
    }
}

/// Bare single-row insert transactions into a table of the benchmark's own: the floor.
#[derive(Debug)]
pub struct BareInserts {
    /// How the adapter begins every write: on SQLite `BEGIN IMMEDIATE`, which takes the write
    /// lock up front, so the floor pays for the lock every store write pays for.
    begin: &'static str,
    /// The insert with its fence check in the same statement; see [`BareInserts::insert_fenced`].
    fenced_insert: String,
    payload: String,
    next_id: i64,
}

impl BareInserts {
    /// Creates the benchmark's table; each insert carries `payload`.
    pub async fn create(store: &ScratchStorage, payload: String) -> Self {
        sqlx::query("CREATE TABLE bench_rows (id BIGINT PRIMARY KEY, payload TEXT NOT NULL)")
            .execute(store.storage.pool())
            .await
            .expect("create the benchmark table");
        BareInserts {
            begin: store.storage.dialect().begin_write(),
            fenced_insert: fenced_insert(store.storage.dialect()),
            payload,
            next_id: 1,
        }
    }

    /// Another writer into the same table, for a floor of concurrent writers: its ids start at
    /// `first_id`, so writers given ranges apart never collide.
    pub fn writer_from(&self, first_id: i64) -> Self {
        BareInserts {
            begin: self.begin,
            fenced_insert: self.fenced_insert.clone(),
            payload: self.payload.clone(),
            next_id: first_id,
        }
    }

    /// One transaction: begin, insert one row, commit. Returns how long it took.
    pub async fn insert(&mut self, store: &ScratchStorage) -> Duration {
        let started = Instant::now();
        let mut tx = store
            .storage
            .pool()
            .begin_with(self.begin)
            .await
            .expect("begin the bare insert transaction");
        self.insert_row()
            .execute(&mut *tx)
            .await
            .expect("insert the bare row");
        tx.commit().await.expect("commit the bare insert");
        started.elapsed()
    }

    /// The same insert as a statement of its own, without `BEGIN` and `COMMIT` (the database
    /// commits it as its own transaction): one round trip, the cheapest durable write there is.
    /// Returns how long it took.
    pub async fn insert_alone(&mut self, store: &ScratchStorage) -> Duration {
        let started = Instant::now();
        self.insert_row()
            .execute(store.storage.pool())
            .await
            .expect("insert the bare row alone");
        started.elapsed()
    }

    /// The same insert as a fenced single-row write, the way the store writes one under a
    /// fence when its write is one statement in a transaction (a tenure's opening, a document
    /// commit that runs alone on SQLite): `BEGIN`, one statement that checks the fence (the
    /// lease row `FOR KEY SHARE` and the per-lease advisory lock on PostgreSQL) and inserts the
    /// row, `COMMIT`. Returns how long it took.
    pub async fn insert_fenced(&mut self, store: &ScratchStorage, fence: &Fence) -> Duration {
        let action = "a fenced benchmark insert";
        let (id, started) = (self.take_id(), Instant::now());
        let query = sqlx::query(&self.fenced_insert)
            .bind(fence.lease.as_str())
            .bind(fence.token.0)
            .bind(id)
            .bind(self.payload.as_str());
        let (tx, row) = store
            .storage
            .inner
            .begin_with_fenced_statement(fence, query, action)
            .await
            .expect("insert the fenced row");
        assert_eq!(
            row.try_get::<i64, _>(2)
                .expect("read the fenced insert's count"),
            1,
            "the fenced row was not inserted"
        );
        tx.commit(action).await.expect("commit the fenced insert");
        started.elapsed()
    }

    /// The same insert in a fenced transaction of several statements (`begin_fenced`, which
    /// every other fenced store write begins with): `BEGIN`, the fence check, the insert,
    /// `COMMIT`. Returns how long it took.
    pub async fn insert_in_fenced_transaction(
        &mut self,
        store: &ScratchStorage,
        fence: &Fence,
    ) -> Duration {
        let action = "a fenced benchmark insert";
        let started = Instant::now();
        let mut tx = store
            .storage
            .inner
            .begin_fenced(fence, action)
            .await
            .expect("begin the fenced insert transaction");
        tx.execute(self.insert_row(), action)
            .await
            .expect("insert the fenced row");
        tx.commit(action).await.expect("commit the fenced insert");
        started.elapsed()
    }

    fn take_id(&mut self) -> i64 {
        self.next_id += 1;
        self.next_id - 1
    }

    /// The next row's insert.
    fn insert_row(&mut self) -> Query<'_, Any, AnyArguments<'_>> {
        let id = self.take_id();
        sqlx::query("INSERT INTO bench_rows (id, payload) VALUES ($1, $2)")
            .bind(id)
            .bind(self.payload.as_str())
    }
}

/// The benchmark's insert carrying its fence check (lease `$1`, token `$2`, row `$3`, `$4`, and on
/// SQLite the clock `$5`), answering `(now, live, inserted)`.
fn fenced_insert(dialect: Dialect) -> String {
    let insert = "INSERT INTO bench_rows (id, payload)";
    match dialect {
        Dialect::Postgres => format!(
            "WITH {}, written AS ({insert} SELECT $3, $4 FROM fence WHERE live = 1 RETURNING 1) {}",
            dialect.fenced_head(),
            dialect.fenced_answer("(SELECT count(*) FROM written)", "", "")
        ),
        Dialect::Sqlite => format!(
            "{insert} VALUES ($3, $4); {}",
            dialect.fenced_answer("changes()", "", "$5")
        ),
    }
}

/// The bytes a database's write-ahead log grew by since [`LogVolume::start`]: the volume each
/// durable write must append and flush, which a write of more rows (more pages, more index
/// entries) pays for whatever else it saves.
#[derive(Debug)]
pub struct LogVolume {
    /// PostgreSQL's insert position when it started; SQLite's log starts empty instead.
    started: Option<i64>,
}

/// PostgreSQL's log insert position, in bytes.
const POSTGRES_LOG_POSITION: &str =
    "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::BIGINT";

impl LogVolume {
    /// Starts counting. SQLite's log is checkpointed and truncated first, so the frames in it
    /// later are those written since; between `start` and [`LogVolume::bytes`] fewer pages must
    /// be written than its automatic checkpoint waits for (1,000).
    pub async fn start(store: &ScratchStorage) -> Self {
        let pool = store.storage.pool();
        let started = match store.storage.dialect() {
            Dialect::Sqlite => {
                // A reader in the way leaves the log as it was and answers busy: the count would
                // then hold earlier writes.
                let (busy, _, _): (i64, i64, i64) =
                    sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
                        .fetch_one(pool)
                        .await
                        .expect("truncate SQLite's log");
                assert_eq!(busy, 0, "SQLite's log could not be truncated");
                None
            }
            Dialect::Postgres => Some(
                sqlx::query_scalar(POSTGRES_LOG_POSITION)
                    .fetch_one(pool)
                    .await
                    .expect("read PostgreSQL's log position"),
            ),
        };
        LogVolume { started }
    }

    /// The bytes written to the log since [`LogVolume::start`]: on SQLite its frames (a page and
    /// a 24-byte header each).
    pub async fn bytes(&self, store: &ScratchStorage) -> i64 {
        let pool = store.storage.pool();
        match self.started {
            None => {
                let (_, frames, _): (i64, i64, i64) =
                    sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
                        .fetch_one(pool)
                        .await
                        .expect("count SQLite's log frames");
                let page: i64 = sqlx::query_scalar("PRAGMA page_size")
                    .fetch_one(pool)
                    .await
                    .expect("read SQLite's page size");
                frames * (page + 24)
            }
            Some(started) => {
                let now: i64 = sqlx::query_scalar(POSTGRES_LOG_POSITION)
                    .fetch_one(pool)
                    .await
                    .expect("read PostgreSQL's log position");
                now - started
            }
        }
    }
}

/// Where `scripts/bench` collects every figure of a run, one JSON object a line.
pub const RECORD_VAR: &str = "FERMATA_BENCH_RECORD";

/// One figure of a run against its floor: `scripts/bench` prints them as one table and keeps
/// them as JSON for a later run to compare with.
#[derive(Debug, Clone)]
pub struct Figure<'a> {
    /// The benchmark and backend, as `documents/sqlite`.
    pub group: String,
    /// What was measured, as `commit median`.
    pub name: &'a str,
    pub unit: &'a str,
    pub measured: f64,
    pub floor: f64,
    /// What the floor is, as `bare insert median`.
    pub floor_name: &'a str,
    /// The goal for the ratio measured / floor, as `<= 1.5`, where there is one.
    pub goal: Option<&'a str>,
}

impl Figure<'_> {
    /// Appends the figure to the file `FERMATA_BENCH_RECORD` names; a run without it (a bench
    /// started by hand) only prints.
    pub fn record(&self) {
        self.append(None);
    }

    /// [`Figure::record`] for a figure that sums up rounds whose own ratios were `ratios`: with
    /// more than one, the lowest and the highest (its spread) are recorded too.
    pub fn record_over_rounds(&self, ratios: &[f64]) {
        let spread = ratios
            .iter()
            .fold([f64::INFINITY, f64::NEG_INFINITY], |[low, high], r| {
                [low.min(*r), high.max(*r)]
            });
        self.append((ratios.len() > 1).then_some(spread));
    }

    fn append(&self, spread: Option<[f64; 2]>) {
        let Some(path) = std::env::var_os(RECORD_VAR) else {
            return;
        };
        let mut line = serde_json::json!({
            "group": self.group,
            "figure": self.name,
            "unit": self.unit,
            "measured": self.measured,
            "floor": self.floor,
            "floor_name": self.floor_name,
            "ratio": self.measured / self.floor,
            "goal": self.goal,
        });
        if let Some(spread) = spread {
            line["spread"] = serde_json::json!(spread);
        }
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .expect("open the benchmark record");
        writeln!(file, "{line}").expect("append to the benchmark record");
    }
}

/// Appends `updates` to a document's journal as if each had been committed on its own (a
/// journal row, an operation record, the counters advanced), in one transaction of multi-row
/// inserts: a long journal for a recovery benchmark in seconds rather than one commit each.
pub async fn seed_journal(
    store: &ScratchStorage,
    id: &fermata_store::ChannelId,
    updates: &[Vec<u8>],
) {
    const ROWS: usize = 500;
    let mut tx = store.storage.pool().begin().await.expect("begin the seed");
    let (revision, sequence, epoch): (i64, i64, i64) =
        sqlx::query_as("SELECT revision, sequence, epoch FROM channels WHERE id = $1")
            .bind(&id.0)
            .fetch_one(&mut *tx)
            .await
            .expect("read the document's counters");
    let mut next = 0_i64;
    for chunk in updates.chunks(ROWS) {
        let rows = |columns: usize| {
            (0..chunk.len())
                .map(|row| {
                    let first = row * columns + 1;
                    let places: Vec<String> =
                        (first..first + columns).map(|n| format!("${n}")).collect();
                    format!("({})", places.join(", "))
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let journal = format!(
            "INSERT INTO channel_updates (channel_id, sequence, epoch, bytes) VALUES {}",
            rows(4)
        );
        let operations = format!(
            "INSERT INTO channel_operations \
             (channel_id, operation_id, fingerprint, revision, sequence, update_sequence) VALUES {}",
            rows(6)
        );
        let (mut journal, mut operations) = (sqlx::query(&journal), sqlx::query(&operations));
        for bytes in chunk {
            next += 1;
            journal = journal
                .bind(&id.0)
                .bind(sequence + next)
                .bind(epoch)
                .bind(bytes.clone());
            operations = operations
                .bind(&id.0)
                .bind(format!("seed-{}", sequence + next))
                .bind(vec![0_u8; 32])
                .bind(revision + next)
                .bind(sequence + next)
                .bind(sequence + next);
        }
        journal.execute(&mut *tx).await.expect("seed journal rows");
        operations
            .execute(&mut *tx)
            .await
            .expect("seed operation records");
    }
    sqlx::query("UPDATE channels SET revision = $2, sequence = $3 WHERE id = $1")
        .bind(&id.0)
        .bind(revision + next)
        .bind(sequence + next)
        .execute(&mut *tx)
        .await
        .expect("advance the document's counters");
    tx.commit().await.expect("commit the seed");
}

/// Stores `documents` (ID, title, text) in `repository` as if each had been created and its text
/// committed once (a channel row and its search row, which the engine indexes as it would a
/// commit's), in one transaction of multi-row inserts: a corpus for a search benchmark in
/// seconds rather than two fenced writes each.
pub async fn seed_documents(
    store: &ScratchStorage,
    repository: &fermata_store::Repository,
    documents: &[(fermata_store::ChannelId, String, String)],
) {
    const ROWS: usize = 200;
    // Each document on the shard a created one would have.
    let shards = store
        .storage
        .shard_count()
        .await
        .expect("read the shard count");
    let mut tx = store.storage.pool().begin().await.expect("begin the seed");
    for (chunk_number, chunk) in documents.chunks(ROWS).enumerate() {
        let rows = |columns: usize| {
            (0..chunk.len())
                .map(|row| {
                    let first = row * columns + 1;
                    let places: Vec<String> =
                        (first..first + columns).map(|n| format!("${n}")).collect();
                    format!("({})", places.join(", "))
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let channels = format!(
            "INSERT INTO channels (id, repository, title, slug, created_at, updated_at, \
             revision, sequence, epoch, shard) VALUES {}",
            rows(10)
        );
        let search = format!(
            "INSERT INTO document_search (channel_id, title, body) VALUES {}",
            rows(3)
        );
        let (mut channels, mut search) = (sqlx::query(&channels), sqlx::query(&search));
        for (offset, (id, title, text)) in chunk.iter().enumerate() {
            let n = i64::try_from(chunk_number * ROWS + offset).unwrap_or(i64::MAX);
            channels = channels
                .bind(&id.0)
                .bind(repository.as_str())
                .bind(title)
                .bind(format!("seeded-{n}"))
                .bind(n)
                .bind(n)
                .bind(1_i64)
                .bind(1_i64)
                .bind(1_i64)
                .bind(i64::from(Shard::of(id, shards).0));
            search = search.bind(&id.0).bind(title).bind(text);
        }
        channels
            .execute(&mut *tx)
            .await
            .expect("seed document rows");
        search.execute(&mut *tx).await.expect("seed search rows");
    }
    tx.commit().await.expect("commit the seed");
    if store.storage.dialect() == Dialect::Postgres {
        // What autovacuum would have done to a database this size: statistics for the planner,
        // and the GIN index's pending list merged.
        sqlx::query("VACUUM ANALYZE")
            .execute(store.storage.pool())
            .await
            .expect("analyze the seeded tables");
    }
}
