//! Benchmark of the document store, on SQLite (WAL, synchronous=FULL) and durable PostgreSQL,
//! each figure a ratio against a baseline measured in the same run:
//!
//! - commit: one fenced, revision-checked commit of a ~1 KB Yjs update (with its sidecar), against
//!   the bare single-row insert transaction of the durable core benchmark (interleaved, so drift
//!   lands on both alike); median, p99 and commits per second; beside it, for reference, the
//!   same insert as a statement alone, without `BEGIN` and `COMMIT` (as a lone commit runs on
//!   PostgreSQL); and the bytes a commit and the insert alone append to the database's log;
//! - recovery: reading and recovering a document from a checkpoint plus 1,000, 10,000 and 100,000
//!   journal updates (seeded in bulk) of a short document, and from the checkpoint of a ~1 MB one
//!   alone and with 1,000 and 10,000, against applying the same state and updates to a fresh
//!   yrs document in memory.
//!
//! `FERMATA_BENCH_ITERATIONS` sets the commit iterations (default 1000).

use std::time::{Duration, Instant};

use fermata_docs::{Recovering, Sidecar, SourceDoc, recover};
use fermata_store::{
    Acquisition, ChannelId, Commit, Fence, LeaseName, NewChannel, OperationId, Repository, Storage,
    StoreOptions,
};
use fermata_store_sql::testing::bench::{
    BareInserts, Figure, LogVolume, Summary, durable_setting, micros, ratio, seed_journal,
};
use fermata_store_sql::testing::{POSTGRES_URL_VAR, ScratchDatabase, ScratchStorage};

const JOURNAL_UPDATES: usize = 10_000;
const RECOVERY_RUNS: usize = 15;
/// Journal lengths and checkpoint sizes recovery is measured at: growth with the journal, then
/// with the document, whose checkpoint alone is what a cold document's first open reads and
/// checks.
const RECOVERY_CASES: [(usize, usize); 6] = [
    (1_000, 64),
    (JOURNAL_UPDATES, 64),
    (100_000, 64),
    (0, 1024 * 1024),
    (1_000, 1024 * 1024),
    (JOURNAL_UPDATES, 1024 * 1024),
];

fn main() {
    assert!(
        std::env::var_os(POSTGRES_URL_VAR).is_some(),
        "{POSTGRES_URL_VAR} is not set: run the benchmark with scripts/bench, which starts a \
         throwaway PostgreSQL server with fsync on"
    );
    let iterations: usize = std::env::var("FERMATA_BENCH_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        measure("sqlite", ScratchDatabase::sqlite(), iterations).await;
        measure("postgres", ScratchDatabase::postgres().await, iterations).await;
    });
}

async fn measure(backend: &str, database: ScratchDatabase, iterations: usize) {
    let store = database.open(StoreOptions::default()).await;
    println!("{backend}: {}", durable_setting(&store).await);
    let fence = match store
        .leases()
        .acquire(
            &LeaseName::WRITER,
            "documents benchmark",
            Duration::from_secs(3600),
        )
        .await
        .expect("acquire")
    {
        Acquisition::Granted(lease) => lease.fence(),
        Acquisition::Held(record) => panic!("held by {}", record.holder),
    };
    commits(backend, &store, &fence, iterations).await;
    recovery(backend, &store, &fence).await;
    println!();
    store.storage.close().await;
}

async fn new_document(store: &ScratchStorage, fence: &Fence, title: &str) -> ChannelId {
    store
        .collaboration()
        .create_channel(
            fence,
            &NewChannel {
                id: ChannelId::random(),
                repository: Repository::new("bench/documents").expect("a repository"),
                title: title.to_owned(),
                parent: None,
            },
        )
        .await
        .expect("create a document")
        .id
}

async fn commit(
    store: &ScratchStorage,
    fence: &Fence,
    id: &ChannelId,
    revision: i64,
    update: Vec<u8>,
    sidecar: &Sidecar,
) -> i64 {
    let commit = Commit {
        channel: id.clone(),
        operation: OperationId::new(format!("bench-{revision}")).expect("an operation ID"),
        expected_revision: revision,
        update: Some(update),
        sidecar: Some(sidecar.to_state()),
        events: Vec::new(),
        title: None,
        text: None,
    };
    store
        .collaboration()
        .commit(fence, &commit)
        .await
        .expect("commit")
        .revision
}

async fn commits(backend: &str, store: &ScratchStorage, fence: &Fence, iterations: usize) {
    let id = new_document(store, fence, "Commit benchmark").await;
    let mut doc = SourceDoc::new();
    let sidecar = Sidecar::default();
    // Roughly 1 KB of text per update, so the update is about 1 KB too.
    let paragraph = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(18);
    let mut bare = BareInserts::create(store, "x".repeat(1024)).await;
    let mut revision = 0;
    let (mut floor, mut alone, mut measured) = (Vec::new(), Vec::new(), Vec::new());
    let mut bytes = 0;
    let started = Instant::now();
    // The next commit of about 1 KB; returns its size and how long it took.
    let mut commit_next = async || {
        let update = doc.insert(doc.len(), &paragraph).expect("insert");
        let began = Instant::now();
        revision = commit(store, fence, &id, revision, update.clone(), &sidecar).await;
        (update.len(), began.elapsed())
    };
    for round in 0..iterations {
        let mut timed_commit = async || {
            let (size, took) = commit_next().await;
            bytes += size;
            took
        };
        if round % 2 == 0 {
            measured.push(timed_commit().await);
            floor.push(bare.insert(store).await);
        } else {
            floor.push(bare.insert(store).await);
            measured.push(timed_commit().await);
        }
        alone.push(bare.insert_alone(store).await);
    }
    let elapsed = started.elapsed();
    // Throughput of the commits alone, one after another: commits over the time they took.
    let committing: Duration = measured.iter().sum();
    let per_second = measured.len() as f64 / committing.as_secs_f64().max(f64::EPSILON);
    let (floor, alone, measured) = (
        Summary::of(floor),
        Summary::of(alone),
        Summary::of(measured),
    );
    println!(
        "  commit of a {}-byte Yjs update with its sidecar, {} iterations ({:.1} s in all)",
        bytes / iterations.max(1),
        measured.n,
        elapsed.as_secs_f64()
    );
    println!(
        "    bare insert floor     median {:>8.1} us  p99 {:>8.1} us",
        micros(floor.median),
        micros(floor.p99)
    );
    println!(
        "    bare insert alone     median {:>8.1} us  p99 {:>8.1} us  (no BEGIN, no COMMIT)",
        micros(alone.median),
        micros(alone.p99)
    );
    println!(
        "    document commit       median {:>8.1} us  p99 {:>8.1} us  ({:.0} commits/s)",
        micros(measured.median),
        micros(measured.p99),
        per_second
    );
    println!(
        "    ratio median {:.2}x, p99 {:.2}x; to the insert alone: median {:.2}x",
        ratio(measured.median, floor.median),
        ratio(measured.p99, floor.p99),
        ratio(measured.median, alone.median)
    );
    let inserted = log_volume(backend, store, &mut commit_next, &mut bare).await;
    spread_log_volume(backend, store, fence, inserted).await;
    for (name, measured, floor, floor_name, goal) in [
        (
            "commit (1 KB update + sidecar), median",
            measured.median,
            floor.median,
            "bare insert transaction",
            Some("<= 1.5"),
        ),
        (
            "commit (1 KB update + sidecar), p99",
            measured.p99,
            floor.p99,
            "bare insert transaction",
            None,
        ),
        (
            "commit (1 KB update + sidecar), median, to an insert alone",
            measured.median,
            alone.median,
            "bare insert alone, no BEGIN/COMMIT",
            Some("<= 1.3"),
        ),
    ] {
        Figure {
            group: format!("documents/{backend}"),
            name,
            unit: "us",
            measured: micros(measured),
            floor: micros(floor),
            floor_name,
            goal,
        }
        .record();
    }
}

/// Commits and single inserts whose log volume is measured: few enough that SQLite's log is
/// not checkpointed on the way.
const LOG_VOLUME_WRITES: usize = 20;

/// Records the bytes a commit appends to the database's log against the INSERT alone's: what
/// the flush of each durable write carries. Returns the INSERT alone's.
async fn log_volume(
    backend: &str,
    store: &ScratchStorage,
    commit_next: &mut impl AsyncFnMut() -> (usize, Duration),
    bare: &mut BareInserts,
) -> f64 {
    let volume = LogVolume::start(store).await;
    for _ in 0..LOG_VOLUME_WRITES {
        commit_next().await;
    }
    let committed = volume.bytes(store).await as f64 / LOG_VOLUME_WRITES as f64;
    let volume = LogVolume::start(store).await;
    for _ in 0..LOG_VOLUME_WRITES {
        bare.insert_alone(store).await;
    }
    let inserted = volume.bytes(store).await as f64 / LOG_VOLUME_WRITES as f64;
    println!(
        "    log written: {committed:.0} bytes a commit, {inserted:.0} bytes an insert alone \
         ({:.2}x)",
        committed / inserted
    );
    Figure {
        group: format!("documents/{backend}"),
        name: "log bytes a commit (1 KB update + sidecar) writes, to an insert alone",
        unit: "B",
        measured: committed,
        floor: inserted,
        floor_name: "bare insert alone, no BEGIN/COMMIT",
        goal: None,
    }
    .record();
    inserted
}

/// Documents the spread commits go round ([`spread_log_volume`]): few enough that one round's
/// log stays under SQLite's automatic checkpoint (1,000 pages).
const SPREAD_DOCUMENTS: usize = 50;

/// The log a commit of a short edit writes when commits go round many documents, as a crowd's
/// do, each document's last commit under a second before: each document's channel row, its
/// recency entry and its journal and operation pages are pages of their own, where one
/// document's commits share theirs. One round commits to each document once, to write its rows
/// as they are under such a load; the next is measured, against `inserted`, the bytes of the
/// INSERT alone.
async fn spread_log_volume(backend: &str, store: &ScratchStorage, fence: &Fence, inserted: f64) {
    let sidecar = Sidecar::default();
    let mut documents = Vec::new();
    for n in 0..SPREAD_DOCUMENTS {
        let id = new_document(store, fence, &format!("Spread {n}")).await;
        documents.push((id, SourceDoc::new(), 0));
    }
    let mut volume = None;
    for _round in 0..2 {
        volume = Some(LogVolume::start(store).await);
        for (id, doc, revision) in &mut documents {
            let update = doc
                .insert(doc.len(), "a twenty-byte edit. ")
                .expect("insert");
            *revision = commit(store, fence, id, *revision, update, &sidecar).await;
        }
    }
    let committed =
        volume.expect("a measured round").bytes(store).await as f64 / SPREAD_DOCUMENTS as f64;
    println!(
        "    log written going round {SPREAD_DOCUMENTS} documents: {committed:.0} bytes a commit \
         of a 20-byte edit ({:.2}x an insert alone)",
        committed / inserted
    );
    Figure {
        group: format!("documents/{backend}"),
        name: "log bytes a commit of a 20-byte edit writes going round 50 documents, to an insert alone",
        unit: "B",
        measured: committed,
        floor: inserted,
        floor_name: "bare insert alone, no BEGIN/COMMIT",
        goal: None,
    }
    .record();
}

/// Recovery against the same updates applied in memory, at each journal length, from a
/// checkpoint of a short document and of a ~1 MB one.
/// The goal of recovering `updates` after the checkpoint of a short document: the longer the
/// journal, the closer to applying the same updates in memory.
fn recovery_goal(updates: usize, checkpoint_bytes: usize) -> Option<&'static str> {
    match (updates, checkpoint_bytes < 1024) {
        (1_000, true) => Some("<= 2"),
        (JOURNAL_UPDATES, true) => Some("<= 1.3"),
        _ => None,
    }
}

async fn recovery(backend: &str, store: &ScratchStorage, fence: &Fence) {
    println!("  recovery from a checkpoint plus N journal updates, median of {RECOVERY_RUNS} runs");
    println!(
        "    {:>8} {:>12} {:>14} {:>10} {:>16} {:>8}",
        "updates", "checkpoint", "yrs in memory", "read", "read and recover", "ratio"
    );
    for (updates, checkpoint_bytes) in RECOVERY_CASES {
        let Timings {
            read,
            stored,
            in_memory,
        } = recovery_case(store, fence, updates, checkpoint_bytes).await;
        println!(
            "    {updates:>8} {:>9} KB {:>11.1} ms {:>7.1} ms {:>13.1} ms {:>7.2}x",
            checkpoint_bytes.div_ceil(1024),
            micros(in_memory) / 1000.0,
            micros(read) / 1000.0,
            micros(stored) / 1000.0,
            ratio(stored, in_memory)
        );
        let document = if checkpoint_bytes < 1024 {
            "a short document"
        } else {
            "a 1 MB document"
        };
        let name = format!("recovery, {updates} updates after a checkpoint of {document}");
        Figure {
            group: format!("documents/{backend}"),
            name: &name,
            unit: "ms",
            measured: micros(stored) / 1000.0,
            floor: micros(in_memory) / 1000.0,
            floor_name: "same updates applied to yrs in memory",
            goal: recovery_goal(updates, checkpoint_bytes),
        }
        .record();
    }
}

/// One recovery case: a checkpoint of `checkpoint_bytes` of text, then `count` small edits
/// seeded into the journal; returns the medians of reading and recovering it, and of applying
/// the same updates to a fresh yrs document in memory.
async fn recovery_case(
    store: &ScratchStorage,
    fence: &Fence,
    count: usize,
    checkpoint_bytes: usize,
) -> Timings {
    let id = new_document(store, fence, "Recovery benchmark").await;
    let collaboration = store.collaboration();
    let mut doc = SourceDoc::new();
    let sidecar = Sidecar::default();
    let line = "Recovery benchmark line of text, about sixty-four bytes long..\n";
    let text = line.repeat((checkpoint_bytes / line.len()).max(1));
    commit(
        store,
        fence,
        &id,
        0,
        doc.insert(0, &text).expect("insert"),
        &sidecar,
    )
    .await;
    let open = recover(
        &collaboration
            .recovery_snapshot(&id)
            .await
            .expect("snapshot"),
    )
    .expect("recover");
    collaboration
        .save_checkpoint(fence, &id, &open.checkpoint())
        .await
        .expect("checkpoint");
    let base = doc.encode_state();
    let updates: Vec<Vec<u8>> = (0..count)
        .map(|n| {
            doc.insert(doc.len(), &format!("edit {n} "))
                .expect("insert")
        })
        .collect();
    seed_journal(store, &id, &updates).await;
    let mut stored = Vec::new();
    let mut reads = Vec::new();
    let mut in_memory = Vec::new();
    for _ in 0..RECOVERY_RUNS {
        let began = Instant::now();
        collaboration
            .recovery_snapshot(&id)
            .await
            .expect("snapshot");
        reads.push(began.elapsed());

        // As a room opens a document: recovered while it is read.
        let began = Instant::now();
        let mut recovering = Recovering::new(&id);
        collaboration
            .read_for_recovery(&id, &mut recovering)
            .await
            .expect("read");
        let (_, open) = recovering.finish().expect("recover");
        stored.push(began.elapsed());
        assert_eq!(
            open.doc.text(),
            doc.text(),
            "recovery did not restore the document"
        );

        let began = Instant::now();
        let mut fresh = SourceDoc::from_state(&base).expect("base state");
        for update in &updates {
            fresh.apply_update(update).expect("apply");
        }
        in_memory.push(began.elapsed());
        assert_eq!(fresh.text(), doc.text());
    }
    Timings {
        read: Summary::of(reads).median,
        stored: Summary::of(stored).median,
        in_memory: Summary::of(in_memory).median,
    }
}

/// The medians of one recovery case: the store's read alone, the read and recovery together,
/// and the same updates applied in memory.
struct Timings {
    read: Duration,
    stored: Duration,
    in_memory: Duration,
}
