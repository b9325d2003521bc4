//! What every benchmark shares: nearest-rank summaries, the check that the database is durable,
//! and the bare single-row insert transaction that is the floor every write is compared with.

use std::time::{Duration, Instant};

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
            payload,
            next_id: 1,
        }
    }

    /// Another writer into the same table, for a floor of concurrent writers: its ids start at
    /// `first_id`, so writers given ranges apart never collide.
    pub fn writer_from(&self, first_id: i64) -> Self {
        BareInserts {
            begin: self.begin,
            payload: self.payload.clone(),
            next_id: first_id,
        }
    }

    /// One transaction: begin, insert one row, commit. Returns how long it took.
    pub async fn insert(&mut self, store: &ScratchStorage) -> Duration {
        let id = self.next_id;
        self.next_id += 1;
        let started = Instant::now();
        let mut tx = store
            .storage
            .pool()
            .begin_with(self.begin)
            .await
            .expect("begin the bare insert transaction");
        sqlx::query("INSERT INTO bench_rows (id, payload) VALUES ($1, $2)")
            .bind(id)
            .bind(self.payload.as_str())
            .execute(&mut *tx)
            .await
            .expect("insert the bare row");
        tx.commit().await.expect("commit the bare insert");
        started.elapsed()
    }
}
