//! Benchmark: what fencing costs a single-row write, against a bare single-row insert
//! transaction, on SQLite and on PostgreSQL, measured on the same database in the same run.
//!
//! What is timed, and why this way:
//!
//! - Bare side: one single-row insert transaction through the store's own pool: begin (as the
//!   adapter begins every write), INSERT one row into `bench_rows`, a table only this benchmark
//!   creates, COMMIT. Pool checkout is inside the timed region, as it is on the fenced sides.
//! - Fenced single-row write (the figure with the goal): the same INSERT into the same table as
//!   the store writes one row under a fence when its write is one statement (a document commit
//!   that runs alone, a tenure's opening; `begin_with_fenced_statement`): begin, one statement
//!   that locks the lease row `FOR KEY SHARE` (plus the per-lease advisory lock on PostgreSQL),
//!   checks the fence on the database's clock and inserts the row, COMMIT. The only difference
//!   from the bare side is the fence.
//! - For reference, the same INSERT in a fenced transaction of several statements
//!   (`begin_fenced`, which every other fenced store write begins with): begin, the fence check,
//!   the INSERT, COMMIT; one round trip more.
//! - For reference, a fenced port method: one call of `tenures().open(fence, start)`: begin, then
//!   one statement that checks the fence, runs the supersede UPDATE (which matches no row, see
//!   below) and INSERTs one tenure row, COMMIT. It writes a table with two indexes and runs a
//!   second write, so it costs more than the fence alone.
//!
//! `open` under a token that already has a tenure returns early without writing, and `close` is
//! a no-op after its first call, so each `open` needs a fresh token. Getting one is setup, not
//! the write being measured, and is left out of the timed region: close the previous tenure (so
//! the supersede UPDATE in the timed `open` matches nothing), release the lease, acquire it
//! again. Those three untimed statements run before each round of timed operations, and the
//! order of the round reverses every iteration, so no side always runs straight after them.
//!
//! The kinds of operation are interleaved, one of each per iteration, so drift in the machine or
//! the database (WAL growth, checkpoints, autovacuum, cache warmth) lands on all alike.
//!
//! SQLite runs with the adapter's durable settings (WAL, synchronous=FULL) on a file in a temporary
//! folder; PostgreSQL runs on a fresh database of the server named by `FERMATA_TEST_POSTGRES_URL`,
//! which `scripts/bench` starts with fsync on. Both settings are checked before measuring, and a
//! backend that is absent or not durable stops the benchmark with a panic: it is never skipped.
//!
//! `FERMATA_BENCH_ITERATIONS` overrides the number of measured iterations (default 2000).

use std::time::{Duration, Instant};

use fermata_store::{Acquisition, Lease, LeaseName, Storage, StoreOptions, TenureStart};
use fermata_store_sql::testing::bench::{
    BareInserts, Figure, Summary, durable_setting, micros, ratio,
};
use fermata_store_sql::testing::{POSTGRES_URL_VAR, ScratchDatabase, ScratchStorage};

const ITERATIONS_VAR: &str = "FERMATA_BENCH_ITERATIONS";
const DEFAULT_ITERATIONS: usize = 2000;
/// Enough to fill the pool, the statement caches and the page cache before anything is recorded.
const WARMUP_ITERATIONS: usize = 100;
/// Far longer than any run, so the lease never expires under the benchmark.
const LEASE_TTL: Duration = Duration::from_secs(3600);
/// Bare insert, fenced single-row write, fenced transaction, `tenures().open`.
const KINDS: usize = 4;
const LEASE: &str = "bench:fenced-write";
const HOLDER: &str = "bench-host:4242:fenced-write";

fn main() {
    let iterations = iterations();
    // Checked before any work, so a missing server fails the run at once rather than after the
    // SQLite half.
    if std::env::var_os(POSTGRES_URL_VAR).is_none() {
        panic!(
            "{POSTGRES_URL_VAR} is not set: run the benchmark with scripts/bench, which starts a \
             throwaway PostgreSQL server with fsync on"
        );
    }
    // One thread: the timed futures never wait on a scheduler hop to another worker.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build the tokio runtime");
    runtime.block_on(async {
        let sqlite = ScratchDatabase::sqlite();
        print_report(&measure("sqlite", sqlite, iterations).await);
        let postgres = ScratchDatabase::postgres().await;
        print_report(&measure("postgres", postgres, iterations).await);
    });
}

fn iterations() -> usize {
    match std::env::var(ITERATIONS_VAR) {
        Ok(text) => text
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or_else(|| panic!("{ITERATIONS_VAR} must be a positive integer, got {text:?}")),
        Err(_) => DEFAULT_ITERATIONS,
    }
}

/// One backend's figures.
#[derive(Debug)]
struct Report {
    backend: &'static str,
    setting: String,
    warmup: usize,
    bare: Summary,
    fenced: Summary,
    transaction: Summary,
    open: Summary,
}

/// A migrated scratch store, the lease it writes under, and the bench table's next key.
#[derive(Debug)]
struct Bench {
    store: ScratchStorage,
    bare: BareInserts,
    lease: Lease,
    start: TenureStart,
}

async fn measure(backend: &'static str, database: ScratchDatabase, iterations: usize) -> Report {
    let store = database.open(StoreOptions::default()).await;
    let setting = durable_setting(&store).await;
    let name = LeaseName::new(LEASE).expect("the benchmark lease name is valid");
    let lease = grant(&store, &name).await;
    let start = TenureStart {
        holder: HOLDER.to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
    };
    // About as many bytes as the tenure row carries in its text columns.
    let bare = BareInserts::create(&store, format!("{LEASE} {HOLDER} {}", start.version)).await;
    let mut bench = Bench {
        store,
        bare,
        lease,
        start,
    };
    // Every fresh grant closes the previous tenure first, so the first grant needs one too.
    bench
        .store
        .tenures()
        .open(&bench.lease.fence(), &bench.start)
        .await
        .expect("open the first tenure");

    bench.run(WARMUP_ITERATIONS).await;
    let [bare, fenced, transaction, open] = bench.run(iterations).await;
    bench.store.storage.close().await;
    Report {
        backend,
        setting,
        warmup: WARMUP_ITERATIONS,
        bare: Summary::of(bare),
        fenced: Summary::of(fenced),
        transaction: Summary::of(transaction),
        open: Summary::of(open),
    }
}

async fn grant(store: &ScratchStorage, name: &LeaseName) -> Lease {
    match store
        .leases()
        .acquire(name, HOLDER, LEASE_TTL)
        .await
        .expect("acquire the benchmark lease")
    {
        Acquisition::Granted(lease) => lease,
        Acquisition::Held(record) => panic!(
            "the benchmark lease is held by {} although it was just released",
            record.holder
        ),
    }
}

impl Bench {
    /// Runs `iterations` interleaved rounds and returns the latencies of each kind: bare,
    /// fenced single-row write, fenced transaction, `open`.
    async fn run(&mut self, iterations: usize) -> [Vec<Duration>; KINDS] {
        let mut samples: [Vec<Duration>; KINDS] = Default::default();
        for i in 0..iterations {
            self.regrant().await;
            for kind in 0..KINDS {
                let kind = if i % 2 == 0 { kind } else { KINDS - 1 - kind };
                let fence = self.lease.fence();
                let elapsed = match kind {
                    0 => self.bare.insert(&self.store).await,
                    1 => self.bare.insert_fenced(&self.store, &fence).await,
                    2 => {
                        self.bare
                            .insert_in_fenced_transaction(&self.store, &fence)
                            .await
                    }
                    _ => self.open().await,
                };
                samples[kind].push(elapsed);
            }
        }
        samples
    }

    /// Untimed: a fresh token with no tenure yet, and no other open tenure of the lease.
    async fn regrant(&mut self) {
        let store = &self.store;
        store
            .tenures()
            .close(&self.lease.fence())
            .await
            .expect("close the previous tenure");
        assert!(
            store
                .leases()
                .release(&self.lease)
                .await
                .expect("release the benchmark lease"),
            "the benchmark lease was lost before it was released"
        );
        self.lease = grant(store, &self.lease.name).await;
    }

    async fn open(&self) -> Duration {
        let fence = self.lease.fence();
        let started = Instant::now();
        let tenure = self
            .store
            .tenures()
            .open(&fence, &self.start)
            .await
            .expect("open a tenure under the fresh token");
        let elapsed = started.elapsed();
        assert_eq!(tenure.token, fence.token, "the tenure was not written");
        elapsed
    }
}

fn print_report(report: &Report) {
    println!(
        "{}: {} ({} warm-up iterations discarded)",
        report.backend, report.setting, report.warmup
    );
    println!(
        "  {:<32} {:>6} {:>12} {:>12}",
        "operation", "n", "median us", "p99 us"
    );
    for (operation, summary) in [
        ("bare insert transaction", &report.bare),
        ("fenced single-row write", &report.fenced),
        ("fenced transaction, same insert", &report.transaction),
        ("tenures().open", &report.open),
    ] {
        println!(
            "  {operation:<32} {:>6} {:>12.1} {:>12.1}",
            summary.n,
            micros(summary.median),
            micros(summary.p99)
        );
    }
    for (operation, summary) in [
        ("fenced write", &report.fenced),
        ("fenced transaction", &report.transaction),
        ("open", &report.open),
    ] {
        println!(
            "  {operation} vs bare: median {:.2}x, p99 {:.2}x",
            ratio(summary.median, report.bare.median),
            ratio(summary.p99, report.bare.p99)
        );
    }
    println!();
    for (name, fenced, bare, goal) in [
        (
            "fenced single-row write, median",
            report.fenced.median,
            report.bare.median,
            Some("<= 1.3"),
        ),
        (
            "fenced single-row write, p99",
            report.fenced.p99,
            report.bare.p99,
            None,
        ),
        (
            "fenced transaction of the same insert, median",
            report.transaction.median,
            report.bare.median,
            None,
        ),
        (
            "fenced port method (tenures().open), median",
            report.open.median,
            report.bare.median,
            None,
        ),
    ] {
        Figure {
            group: format!("fenced_write/{}", report.backend),
            name,
            unit: "us",
            measured: micros(fenced),
            floor: micros(bare),
            floor_name: "bare insert transaction",
            goal,
        }
        .record();
    }
}
