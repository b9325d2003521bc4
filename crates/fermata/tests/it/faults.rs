//! Database faults under the real binary, on the real engines, while two real y-websocket
//! clients type: PostgreSQL restarted (`-m immediate`), killed and started again 15 s later
//! while the clients stop typing, stopped for longer than a renewal and for longer than the
//! safety deadline, cut off by a network partition; a full disk under SQLite's and under
//! PostgreSQL's data; fsync refused and slow under both. And once with every client, the server
//! and the database killed, so that nobody can send anything again.
//!
//! What the server must do through each is in
//! [operations.md](../../../../docs/operations.md#database-outages): `/readyz` says 503
//! `storage_unavailable` while the database fails and 200 once it answers again, the same process
//! serving on (or, past the safety deadline, exiting with code 4 so a successor takes over); a
//! room closes the clients whose updates it could not save, and they reconnect and send them
//! again, so every line typed is stored in the end and no line another client saw (the room
//! broadcasts only what it committed) is ever lost; a program's write answers 503 with
//! `Retry-After` and writes nothing half-way. Each test also prints how long recovery took, from
//! the database answering again to `/readyz` 200 and to the first commit, and how long each
//! program write waited for its answer, without asserting on them: wall-clock time on a shared
//! machine proves nothing.
//!
//! Every PostgreSQL case runs a cluster of its own ([`PgCluster`]): the shared scratch server
//! serves other tests meanwhile. The disk cases mount a tmpfs and the fsync cases build a C shim,
//! so they need root and `gcc`, as CI has; without them they fail saying so.

use crate::support;

use std::ffi::OsString;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use support::fsync_shim::FsyncShim;
use support::postgres_cluster::{PgCluster, StopMode};
use support::proxy::Proxy;
use support::tmpfs::Tmpfs;
use support::{
    Answer, Fermata, PATIENCE, Target, Typist, api_token, create, get, tail, try_request,
    try_text_of, typed_lines,
};

/// Lease timings for the faults a process rides through, quickly: a renewal every 2 s, so a
/// fault of a few seconds fails at least one, and a safety deadline (20 s) well beyond every
/// such fault here. They satisfy the rules of `LeaseTimings::check`.
const RIDING_LEASE: &str = "[writer_lease]\n\
    ttl = \"30s\"\nrenew_every = \"2s\"\nattempt_timeout = \"1s\"\n\
    abandon_after = \"1500ms\"\nsafety_deadline = \"20s\"\ndrain_timeout = \"3s\"\n";

/// How long the typists type before and after the fault, beyond the fault itself.
const TYPING_AROUND: Duration = Duration::from_secs(8);

/// How long the typists type to type through a fault of `fault`: from before it until well after.
fn around(fault: Duration) -> Duration {
    fault + TYPING_AROUND
}

/// The two typists' line prefixes.
const PREFIXES: [&str; 2] = ["ada-", "bob-"];

/// Whether `/readyz` must have answered 503 `storage_unavailable` during a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unready {
    /// The fault lasts long enough that commits or renewals fail during it.
    Required,
    /// The fault may pass without a failure the process sees: a restart of the database takes
    /// well under a second, and a commit that retries on a new connection may ride through it.
    /// Whatever `/readyz` said is printed instead, and the failure counter need not move.
    NotRequired,
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL goes away and comes back.

/// A crash of the database server: every session ends at once, the restart recovers from WAL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_killed_and_restarted() {
    let cluster = PgCluster::start();
    let target = Target::postgres_at(cluster.url());
    target.replace_config(RIDING_LEASE);
    let scene = Scene::start(&target, &[], around(Duration::from_secs(2))).await;
    let outage = scene.outage_begins();
    cluster.restart(StopMode::Immediate);
    let outage = outage.healed().await;
    scene
        .finish(
            "postgres restart -m immediate",
            outage,
            Unready::NotRequired,
        )
        .await;
}

/// A crash that lasts: PostgreSQL killed (`-m immediate`) and started again 15 s later, while
/// the typists stop typing 5 s into the outage, so what they typed waits in them until the
/// database is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_killed_and_started_again_15_s_later() {
    let cluster = PgCluster::start();
    let target = Target::postgres_at(cluster.url());
    target.replace_config(RIDING_LEASE);
    let down_for = Duration::from_secs(15);
    let scene = Scene::start(&target, &[], Duration::from_secs(7)).await;
    let outage = scene.outage_begins();
    cluster.stop(StopMode::Immediate);
    tokio::time::sleep(down_for).await;
    cluster.start_again();
    let outage = outage.healed().await;
    scene
        .finish(
            "postgres killed (-m immediate), started 15 s later",
            outage,
            Unready::Required,
        )
        .await;
}

/// The operator's scenario: the database stopped for longer than one renewal but less than the
/// safety deadline, with the default lease timings (ttl 30 s, renewals every 10 s, deadline
/// 25 s): 12 s, so at least one renewal falls inside it whenever it starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stopped_for_less_than_the_safety_deadline() {
    let cluster = PgCluster::start();
    let target = Target::postgres_at(cluster.url());
    target.replace_config("");
    let stopped_for = Duration::from_secs(12);
    let scene = Scene::start(&target, &[], around(stopped_for)).await;
    let outage = scene.outage_begins();
    cluster.stop(StopMode::Fast);
    tokio::time::sleep(stopped_for).await;
    cluster.start_again();
    let outage = outage.healed().await;
    scene
        .finish(
            "postgres stopped (-m fast) for 12 s",
            outage,
            Unready::Required,
        )
        .await;
}

/// Past the safety deadline the process must stop (exit code 4), and a successor started with
/// `--handover wait` on the same database and address serves everything the clients held.
/// Short lease timings (deadline 2 s) keep it quick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stopped_for_longer_than_the_safety_deadline() {
    let cluster = PgCluster::start();
    let target = Target::postgres_at(cluster.url());
    // The target's own configuration is the fast lease (ttl 3 s, deadline 2 s).
    let mut scene = Scene::start(&target, &[], around(Duration::from_secs(5))).await;
    let outage = scene.outage_begins();
    cluster.stop(StopMode::Fast);
    let status = scene.server.wait_exit().await;
    let output = scene.server.output();
    assert_eq!(status.code(), Some(4), "{}", tail(&output));
    assert!(
        output.contains("lost the writer lease"),
        "{}",
        tail(&output)
    );
    cluster.start_again();
    let outage = outage.healed().await;
    let successor = target.serve_at(scene.address, &["--handover", "wait"], &[]);
    scene.replace_server(successor);
    scene
        .finish(
            "postgres stopped past the safety deadline, then a successor",
            outage,
            Unready::Required,
        )
        .await;
}

/// Acknowledged in the strictest sense: both clients and the serving process killed, and the
/// database crashed (`pg_ctl restart -m immediate`), before anyone could send anything again, so
/// nothing remains but what the database made durable. Every line one typist saw of the other
/// (a room broadcasts only what it committed) must be there when a successor serves. With the
/// clients alive, their resending would hide such a loss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_crash_with_every_client_gone_keeps_every_acknowledged_line() {
    let cluster = PgCluster::start();
    let target = Target::postgres_at(cluster.url());
    let mut scene = Scene::start(&target, &[], around(Duration::from_secs(2))).await;
    for prefix in PREFIXES {
        let line = format!("{prefix}20\n");
        scene
            .wait_for_text(&format!("{line:?} stored"), |text| text.contains(&line))
            .await;
    }
    let mut seen = Vec::new();
    for (_, typist) in std::mem::take(&mut scene.typists) {
        for event in typist.kill() {
            if event["event"] == "seen" {
                seen.extend(
                    event["lines"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|line| line.as_str().unwrap().to_owned()),
                );
            }
        }
    }
    scene.server.kill();
    cluster.restart(StopMode::Immediate);
    let successor = target.serve_at(scene.address, &["--handover", "wait"], &[]);
    successor.wait_ready().await;
    let stored = text_of(scene.address, &scene.token, &scene.document);
    assert!(
        seen.len() >= 20,
        "the typists saw too little of each other to tell: {seen:?}"
    );
    let stored_lines: std::collections::HashSet<&str> = stored.lines().collect();
    let lost: Vec<&String> = seen
        .iter()
        .filter(|line| !stored_lines.contains(line.as_str()))
        .collect();
    assert!(
        lost.is_empty(),
        "acknowledged lines lost in the crash: {lost:?}\n{}",
        tail(&successor.output())
    );
    eprintln!(
        "every client, the server and the database crashed: all {} acknowledged lines kept",
        seen.len()
    );
}

/// A network partition between fermata and PostgreSQL, shorter than the safety deadline: no
/// socket closes, nothing gets through, then everything held is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_partitioned_then_healed() {
    let cluster = PgCluster::start();
    let upstream: SocketAddr = format!("127.0.0.1:{}", cluster.port()).parse().unwrap();
    let proxy = Proxy::start(upstream);
    let target = Target::postgres_at(format!("postgres://postgres@{}/postgres", proxy.address()));
    target.replace_config(RIDING_LEASE);
    let cut_for = Duration::from_secs(6);
    let scene = Scene::start(&target, &[], around(cut_for)).await;
    let outage = scene.outage_begins();
    proxy.blackhole();
    tokio::time::sleep(cut_for).await;
    proxy.heal();
    let outage = outage.healed().await;
    scene
        .finish("postgres partitioned for 6 s", outage, Unready::Required)
        .await;
}

// ---------------------------------------------------------------------------------------------
// A full disk.

/// SQLite's folder (the database, its WAL, the key file) on a 64 MiB tmpfs that fills up while
/// the clients type, for 6 s, and is freed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_disk_full() {
    let target = Target::sqlite();
    target.replace_config(RIDING_LEASE);
    let full_for = Duration::from_secs(6);
    let tmpfs = Tmpfs::mount(&target.data_dir(), "64m");
    let scene = Scene::start(&target, &[], around(full_for)).await;
    let outage = scene.outage_begins();
    let filled = tmpfs.fill();
    eprintln!("filled the SQLite folder with {filled} bytes");
    tokio::time::sleep(full_for).await;
    tmpfs.free();
    let outage = outage.healed().await;
    scene
        .finish("SQLite's disk full for 6 s", outage, Unready::Required)
        .await;
}

/// PostgreSQL's data folder on a 256 MiB tmpfs that fills up while the clients type, for 6 s,
/// and is freed again. PostgreSQL may PANIC when it cannot write its WAL and then fail its crash
/// recovery on the same full disk; if it does not accept connections once the space is back,
/// the test starts it again, as an operator would, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_disk_full() {
    let place = tempfile::tempdir().unwrap();
    let tmpfs = Tmpfs::mount(&place.path().join("disk"), "256m");
    let cluster = PgCluster::start_with(Some(tmpfs.path().join("data")), Vec::new());
    let target = Target::postgres_at(cluster.url());
    target.replace_config(RIDING_LEASE);
    let full_for = Duration::from_secs(6);
    let scene = Scene::start(&target, &[], around(full_for)).await;
    let outage = scene.outage_begins();
    let filled = tmpfs.fill();
    eprintln!("filled PostgreSQL's folder with {filled} bytes");
    tokio::time::sleep(full_for).await;
    tmpfs.free();
    recover_as_an_operator(&cluster).await;
    let outage = outage.healed().await;
    scene
        .finish("PostgreSQL's disk full for 6 s", outage, Unready::Required)
        .await;
    drop(cluster); // stopped before its file system is unmounted
}

// ---------------------------------------------------------------------------------------------
// fsync refused, and slow.

/// SQLite inside fermata has every fsync refused with EIO for 4 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_fsync_refused() {
    let target = Target::sqlite();
    target.replace_config(RIDING_LEASE);
    let shim = FsyncShim::build();
    let refused_for = Duration::from_secs(4);
    let scene = Scene::start(&target, &shim.env(), around(refused_for)).await;
    let outage = scene.outage_begins();
    shim.fail();
    tokio::time::sleep(refused_for).await;
    shim.pass();
    let outage = outage.healed().await;
    assert!(
        shim.failed_calls() > 0,
        "the shim refused no fsync: it never reached SQLite"
    );
    scene
        .finish("SQLite's fsync refused for 4 s", outage, Unready::Required)
        .await;
}

/// SQLite inside fermata waits 1.5 s in every fsync for 5 s: longer than a renewal's
/// `attempt_timeout` (1 s), so renewals fail while commits, one at a time, get slow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_fsync_slow() {
    let target = Target::sqlite();
    target.replace_config(RIDING_LEASE);
    let shim = FsyncShim::build();
    let slow_for = Duration::from_secs(5);
    let scene = Scene::start(&target, &shim.env(), around(slow_for)).await;
    let outage = scene.outage_begins();
    shim.slow(1500);
    tokio::time::sleep(slow_for).await;
    shim.pass();
    let outage = outage.healed().await;
    assert!(
        shim.slowed_calls() > 0,
        "the shim slowed no fsync: it never reached SQLite"
    );
    scene
        .finish(
            "SQLite's fsync slow (1.5 s) for 5 s",
            outage,
            Unready::Required,
        )
        .await;
}

/// The PostgreSQL server has every fsync refused with EIO for 3 s. PostgreSQL PANICs on a failed
/// fsync and restarts through crash recovery, which needs fsync too; if it does not accept
/// connections once fsync works again, the test starts it, as an operator would, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_fsync_refused() {
    let shim = FsyncShim::build();
    let cluster = PgCluster::start_with(None, shim.env());
    let target = Target::postgres_at(cluster.url());
    target.replace_config(RIDING_LEASE);
    let refused_for = Duration::from_secs(3);
    let scene = Scene::start(&target, &[], around(refused_for)).await;
    let outage = scene.outage_begins();
    shim.fail();
    tokio::time::sleep(refused_for).await;
    shim.pass();
    recover_as_an_operator(&cluster).await;
    let outage = outage.healed().await;
    assert!(
        shim.failed_calls() > 0,
        "the shim refused no fsync: it never reached PostgreSQL"
    );
    scene
        .finish(
            "PostgreSQL's fsync refused for 3 s",
            outage,
            Unready::Required,
        )
        .await;
}

/// The PostgreSQL server waits 1.5 s in every fsync for 5 s: each commit waits for its WAL
/// flush, and renewals outlast their `attempt_timeout` (1 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_fsync_slow() {
    let shim = FsyncShim::build();
    let cluster = PgCluster::start_with(None, shim.env());
    let target = Target::postgres_at(cluster.url());
    target.replace_config(RIDING_LEASE);
    let slow_for = Duration::from_secs(5);
    let scene = Scene::start(&target, &[], around(slow_for)).await;
    let outage = scene.outage_begins();
    shim.slow(1500);
    tokio::time::sleep(slow_for).await;
    shim.pass();
    let outage = outage.healed().await;
    assert!(
        shim.slowed_calls() > 0,
        "the shim slowed no fsync: it never reached PostgreSQL"
    );
    scene
        .finish(
            "PostgreSQL's fsync slow (1.5 s) for 5 s",
            outage,
            Unready::Required,
        )
        .await;
}

/// Waits for a PostgreSQL server that may have crashed to accept connections again, and starts
/// it when it does not come back by itself within 15 s, as an operator would.
async fn recover_as_an_operator(cluster: &PgCluster) {
    if cluster.wait_accepting(Duration::from_secs(15)).await {
        return;
    }
    eprintln!(
        "PostgreSQL did not come back by itself; starting it as an operator would. Its log:\n{}",
        tail(&cluster.log())
    );
    cluster.start_again();
}

// ---------------------------------------------------------------------------------------------
// The scene every fault plays in.

/// A served target with two typists typing in one document, a second document for program
/// writes, and the server's readiness and metrics sampled throughout.
struct Scene {
    server: Fermata,
    /// The server's address; a successor listens on the same one, where the clients reconnect.
    address: SocketAddr,
    token: String,
    /// The document the typists type in.
    document: String,
    /// The document program writes rewrite during the outage: a rewrite replaces the whole text,
    /// which would erase the typists' lines in theirs.
    probe_document: String,
    typists: Vec<(&'static str, Typist)>,
    /// One monitor per process that served, the current one last.
    monitors: Vec<Monitor>,
}

impl Scene {
    /// Serves `target` (with `env` for the server process), creates the documents, and starts
    /// the typists, who type for `typing` (see [`around`]); returns once both typists' lines are
    /// being stored.
    async fn start(target: &Target, env: &[(String, OsString)], typing: Duration) -> Scene {
        let token = api_token(target);
        let server = target.serve_at("127.0.0.1:0".parse().unwrap(), &[], env);
        server.wait_ready().await;
        let address = server.address().await;
        let document = create(address, &token, "Typed through faults");
        let probe_document = create(address, &token, "Rewritten through faults");
        let first = rewrite(address, &token, &probe_document, 0).unwrap();
        assert_eq!(first.status, 200, "{}", first.body);
        let monitor = Monitor::start(address);
        let typists = PREFIXES
            .iter()
            .map(|prefix| {
                let typist = Typist::spawn_typing_through(
                    address,
                    &document,
                    &token,
                    prefix,
                    typing,
                    typing + PATIENCE,
                );
                (*prefix, typist)
            })
            .collect::<Vec<_>>();
        let scene = Scene {
            server,
            address,
            token,
            document,
            probe_document,
            typists,
            monitors: vec![monitor],
        };
        for (prefix, typist) in &scene.typists {
            typist.event("synced", &mut Vec::new());
            let line = format!("{prefix}3\n");
            scene
                .wait_for_text(&format!("{line:?} stored"), |text| text.contains(&line))
                .await;
        }
        scene
    }

    /// Marks the start of the outage and starts rewriting the probe document while it lasts.
    fn outage_begins(&self) -> Outage {
        Outage {
            began: Instant::now(),
            probes: Probes::start(self.address, &self.token, &self.probe_document),
        }
    }

    /// A successor takes over serving on the same address: the monitor of the process that
    /// exited is kept and a new one watches the successor.
    fn replace_server(&mut self, successor: Fermata) {
        self.server = successor;
        self.monitors.push(Monitor::start(self.address));
    }

    /// Checks everything the fault must have left as it was, and prints the recovery times.
    async fn finish(self, fault: &str, outage: HealedOutage, unready: Unready) {
        // Ready again, the same process (or its successor) serving.
        let ready_at = self.wait_ready_after(outage.healed).await;
        let pid = self.server.pid();

        // The typists reconnect, send what they hold and finish.
        let mut dones = Vec::new();
        for (prefix, typist) in &self.typists {
            let mut events = Vec::new();
            let done = typist.event("done", &mut events);
            let closes = events.iter().filter(|e| e["event"] == "closed").count();
            assert_eq!(
                done["synced"],
                true,
                "{fault}: typist {prefix} never synced again after the outage ({closes} closes): \
                 {done}\n{}",
                tail(&self.server.output())
            );
            let resynced = events.iter().filter(|e| e["event"] == "resynced").count();
            eprintln!(
                "{fault}: typist {prefix} typed {} lines, closed {closes} times, synced again \
                 {resynced} times, saw {} lines of the other",
                done["typed"],
                done["seen"].as_array().map_or(0, Vec::len)
            );
            dones.push((*prefix, done, closes));
        }

        // Every line typed is stored once, and so is every line one typist saw of the other.
        let typed: Vec<(&str, u64)> = dones
            .iter()
            .map(|(prefix, done, _)| (*prefix, done["typed"].as_u64().unwrap()))
            .collect();
        let what = format!("every typed line stored ({fault}; lines typed: {typed:?})");
        let stored = self
            .wait_for_text(&what, |text| {
                typed
                    .iter()
                    .all(|(prefix, count)| typed_lines(text, prefix).len() as u64 >= *count)
            })
            .await;
        for (prefix, count) in &typed {
            let mut kept = typed_lines(&stored, prefix);
            kept.sort_unstable();
            assert_eq!(
                kept,
                (1..=*count).collect::<Vec<_>>(),
                "{fault}: typist {prefix}'s lines are not stored exactly once each"
            );
        }
        for (prefix, done, _) in &dones {
            let stored_lines: std::collections::HashSet<&str> = stored.lines().collect();
            let lost: Vec<&str> = done["seen"]
                .as_array()
                .unwrap()
                .iter()
                .map(|line| line.as_str().unwrap())
                .filter(|line| !stored_lines.contains(line))
                .collect();
            assert!(
                lost.is_empty(),
                "{fault}: lines {prefix} saw acknowledged are not stored: {lost:?}"
            );
        }

        // No program write answered anything but 200 or 503 with Retry-After, and none was
        // stored half-way; and a rewrite works again.
        // A successor took over: the process the rewrites went to may have gone mid-request.
        let replaced = self.monitors.len() > 1;
        outage.check_probes(fault, replaced);
        let kept = text_of(self.address, &self.token, &self.probe_document);
        let whole = (0..=outage.probes.len()).find(|index| kept == probe_text(*index));
        let last_saved = outage.last_saved_probe();
        assert!(
            whole.is_some_and(|index| index >= last_saved),
            "{fault}: the rewritten document holds neither a whole rewrite nor the last saved \
             one (probe {last_saved}): {kept:?}"
        );
        let after = outage.probes.len() + 1;
        self.wait_for_rewrite(after).await;

        // Readiness said so during the outage, as the server saw it: until it was ready again.
        let samples: Vec<ReadySample> = self
            .monitors
            .iter()
            .flat_map(Monitor::ready_samples)
            .collect();
        let unavailable = samples.iter().any(|sample| {
            (outage.began..=ready_at).contains(&sample.at)
                && sample.answer.as_ref().is_some_and(|(code, body)| {
                    *code == 503 && body.contains("storage_unavailable")
                })
        });
        let answers: Vec<String> = samples
            .iter()
            .filter(|sample| sample.at >= outage.began)
            .filter_map(|sample| sample.answer.as_ref())
            .map(|(code, body)| format!("{code} {}", body.trim()))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        assert!(
            unavailable || unready == Unready::NotRequired,
            "{fault}: /readyz never answered 503 storage_unavailable during the outage; it \
             answered: {answers:?}\n{}",
            tail(&self.server.output())
        );
        eprintln!("{fault}: /readyz answered {answers:?} from the start of the outage");

        // The recovery times, to read, not to assert.
        let current = self.monitors.last().unwrap();
        let first_commit = current.first_commit_after(outage.healed);
        eprintln!(
            "{fault}: /readyz 200 {:?} after the database answered again; first commit {}; \
             typists closed {:?} times; outage {:?}",
            ready_at.duration_since(outage.healed),
            first_commit.map_or("not seen".to_owned(), |at| format!(
                "{:?} after",
                at.saturating_duration_since(outage.healed)
            )),
            dones
                .iter()
                .map(|(_, _, closes)| *closes)
                .collect::<Vec<_>>(),
            outage.healed.duration_since(outage.began),
        );
        assert_eq!(self.server.pid(), pid, "{fault}: another process serves");
        let output = self.server.output();
        assert!(!output.contains("panicked"), "{fault}: {}", tail(&output));

        // The metrics saw it (they may land after the rest; they are checked last). A process
        // that exited took its counts along, and its successor saw no failure.
        let failures = self
            .monitors
            .iter()
            .flat_map(Monitor::scrapes)
            .filter_map(|scrape| scrape.failures)
            .fold(None, |max: Option<f64>, value| {
                Some(max.map_or(value, |max| max.max(value)))
            });
        assert!(
            failures.is_some_and(|count| count > 0.0)
                || unready == Unready::NotRequired
                || replaced,
            "{fault}: fermata_storage_failures_total never rose (scraped {failures:?})"
        );
        let available = scrape(self.address).and_then(|metrics| metrics.available);
        assert_eq!(
            available,
            Some(1.0),
            "{fault}: fermata_storage_available is not 1 after the outage"
        );
    }

    /// Waits until `/readyz` answers 200, and returns when it first did after `healed`.
    async fn wait_ready_after(&self, healed: Instant) -> Instant {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some((200, _)) = get(self.address, "/readyz") {
                return self
                    .monitors
                    .last()
                    .unwrap()
                    .first_ready_after(healed)
                    .unwrap_or_else(Instant::now);
            }
            assert!(
                Instant::now() < deadline,
                "never ready again after the outage:\n{}",
                tail(&self.server.output())
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Polls the stored text of the typists' document until `holds` says it holds what it
    /// should; returns it. A failed read (503 while the database comes back) is tried again.
    async fn wait_for_text(&self, what: &str, holds: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        let mut last = None;
        loop {
            if let Some(text) = try_text_of(self.address, &self.token, &self.document) {
                if holds(&text) {
                    return text;
                }
                last = Some(text);
            }
            assert!(
                Instant::now() < deadline,
                "gave up waiting for {what}; the text was {last:?}\n{}",
                tail(&self.server.output())
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Rewrites the probe document once more, until it is saved (a 503 is tried again), and
    /// checks the document then holds exactly that.
    async fn wait_for_rewrite(&self, index: usize) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let answer = rewrite(self.address, &self.token, &self.probe_document, index)
                .expect("a rewrite after the outage got no answer");
            if answer.status == 200 {
                break;
            }
            assert!(
                answer.status == 503 && Instant::now() < deadline,
                "a rewrite after the outage answered {}: {}",
                answer.status,
                answer.body
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(
            text_of(self.address, &self.token, &self.probe_document),
            probe_text(index)
        );
    }
}

/// An outage in progress: when it began, and the rewrites sent while it lasts.
struct Outage {
    began: Instant,
    probes: Probes,
}

impl Outage {
    /// The database answers again (the caller brought it back just now).
    async fn healed(self) -> HealedOutage {
        let healed = Instant::now();
        HealedOutage {
            began: self.began,
            healed,
            probes: self.probes.finish().await,
        }
    }
}

/// An outage that ended, with what each rewrite sent during it got.
struct HealedOutage {
    began: Instant,
    healed: Instant,
    probes: Vec<Probe>,
}

impl HealedOutage {
    /// Each rewrite answered 200, or 503 with `Retry-After`; when `replaced` (the process
    /// exited during the outage) one may also have found no server.
    fn check_probes(&self, fault: &str, replaced: bool) {
        assert!(!self.probes.is_empty(), "{fault}: no rewrite was sent");
        for probe in &self.probes {
            match &probe.outcome {
                Ok(answer) if answer.status == 200 => {}
                Ok(answer) if answer.status == 503 => assert!(
                    answer.headers.to_ascii_lowercase().contains("retry-after:"),
                    "{fault}: rewrite {} answered 503 without Retry-After: {answer:?}",
                    probe.index
                ),
                Ok(answer) => panic!(
                    "{fault}: rewrite {} during the outage answered {}: {}",
                    probe.index, answer.status, answer.body
                ),
                Err(error) => assert!(
                    replaced,
                    "{fault}: rewrite {} during the outage got no answer: {error}",
                    probe.index
                ),
            }
        }
        let answered: Vec<String> = self
            .probes
            .iter()
            .map(|probe| match &probe.outcome {
                Ok(answer) => format!("{} in {:.1?}", answer.status, probe.took),
                Err(_) => format!("no answer in {:.1?}", probe.took),
            })
            .collect();
        eprintln!("{fault}: rewrites during the outage answered {answered:?}");
    }

    /// The index of the last rewrite saved (0, before the outage, when none during it was).
    fn last_saved_probe(&self) -> usize {
        self.probes
            .iter()
            .filter(|probe| {
                probe
                    .outcome
                    .as_ref()
                    .is_ok_and(|answer| answer.status == 200)
            })
            .map(|probe| probe.index)
            .max()
            .unwrap_or(0)
    }
}

/// One rewrite of the probe document and what it got.
struct Probe {
    index: usize,
    /// How long its answer took.
    took: Duration,
    outcome: std::io::Result<Answer>,
}

/// Rewrites of the probe document, one after another, while the outage lasts; each waits for
/// its answer on the blocking pool, as long as the server takes.
struct Probes {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<Probe>>,
}

impl Probes {
    fn start(address: SocketAddr, token: &str, document: &str) -> Probes {
        let stop = Arc::new(AtomicBool::new(false));
        let (token, document) = (token.to_owned(), document.to_owned());
        let stopped = Arc::clone(&stop);
        let task = tokio::spawn(async move {
            let mut probes = Vec::new();
            loop {
                let index = probes.len() + 1;
                let (token, document) = (token.clone(), document.clone());
                let sent = Instant::now();
                let outcome =
                    tokio::task::spawn_blocking(move || rewrite(address, &token, &document, index))
                        .await
                        .unwrap();
                probes.push(Probe {
                    index,
                    took: sent.elapsed(),
                    outcome,
                });
                if stopped.load(Ordering::SeqCst) {
                    return probes;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
        Probes { stop, task }
    }

    /// Stops after the rewrite in flight, and returns them all.
    async fn finish(self) -> Vec<Probe> {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap()
    }
}

/// The text of rewrite `index`: many lines, so a rewrite stored half-way shows.
fn probe_text(index: usize) -> String {
    (0..20)
        .map(|line| format!("rewrite {index}, line {line}\n"))
        .collect()
}

/// `PUT /api/v1/documents/{document}/text` with [`probe_text`]`(index)`.
fn rewrite(
    address: SocketAddr,
    token: &str,
    document: &str,
    index: usize,
) -> std::io::Result<Answer> {
    try_request(
        address,
        "PUT",
        &format!("/api/v1/documents/{document}/text"),
        &[("Authorization", &format!("Bearer {token}"))],
        Some(&json!({"text": probe_text(index)})),
    )
}

// ---------------------------------------------------------------------------------------------
// Watching the server.

/// One `/readyz` answer (`None`: no answer) and when it came.
#[derive(Debug, Clone)]
struct ReadySample {
    at: Instant,
    answer: Option<(u16, String)>,
}

/// What a scrape of `/metrics` said of storage and commits.
#[derive(Debug, Clone, Copy)]
struct Scrape {
    at: Instant,
    /// `fermata_document_commits_total{outcome="committed"}`.
    committed: Option<f64>,
    /// `fermata_storage_failures_total`, summed over its causes.
    failures: Option<f64>,
    /// `fermata_storage_available`.
    available: Option<f64>,
}

/// Samples one server's `/readyz` every 25 ms and its `/metrics` every 100 ms, each in a task of
/// its own (the requests on the blocking pool) so a scrape that waits on the database delays no
/// readiness sample; stops on drop.
struct Monitor {
    ready: Arc<Mutex<Vec<ReadySample>>>,
    scrapes: Arc<Mutex<Vec<Scrape>>>,
    tasks: [tokio::task::JoinHandle<()>; 2],
}

impl Monitor {
    fn start(address: SocketAddr) -> Monitor {
        let ready: Arc<Mutex<Vec<ReadySample>>> = Arc::default();
        let scrapes: Arc<Mutex<Vec<Scrape>>> = Arc::default();
        let samples = Arc::clone(&ready);
        let readiness = tokio::spawn(async move {
            loop {
                let answer = tokio::task::spawn_blocking(move || get(address, "/readyz"))
                    .await
                    .unwrap();
                let at = Instant::now();
                samples.lock().unwrap().push(ReadySample { at, answer });
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        });
        let taken = Arc::clone(&scrapes);
        let metrics = tokio::spawn(async move {
            loop {
                let scraped = tokio::task::spawn_blocking(move || scrape(address))
                    .await
                    .unwrap();
                taken.lock().unwrap().extend(scraped);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Monitor {
            ready,
            scrapes,
            tasks: [readiness, metrics],
        }
    }

    fn ready_samples(&self) -> Vec<ReadySample> {
        self.ready.lock().unwrap().clone()
    }

    fn scrapes(&self) -> Vec<Scrape> {
        self.scrapes.lock().unwrap().clone()
    }

    /// When `/readyz` first answered 200 after `since`.
    fn first_ready_after(&self, since: Instant) -> Option<Instant> {
        self.ready_samples()
            .into_iter()
            .find(|sample| sample.at > since && matches!(sample.answer, Some((200, _))))
            .map(|sample| sample.at)
    }

    /// When a scrape first counted a commit that was not counted at `since`.
    fn first_commit_after(&self, since: Instant) -> Option<Instant> {
        let scrapes = self.scrapes();
        let before = scrapes
            .iter()
            .rev()
            .filter(|scrape| scrape.at <= since)
            .find_map(|scrape| scrape.committed)
            .unwrap_or(0.0);
        scrapes
            .iter()
            .find(|scrape| scrape.at > since && scrape.committed.is_some_and(|c| c > before))
            .map(|scrape| scrape.at)
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Scrapes `/metrics`; `None` when nothing answered 200.
fn scrape(address: SocketAddr) -> Option<Scrape> {
    let (200, text) = get(address, "/metrics")? else {
        return None;
    };
    Some(Scrape {
        at: Instant::now(),
        committed: metric(
            &text,
            "fermata_document_commits_total",
            "outcome=\"committed\"",
        ),
        failures: metric(&text, "fermata_storage_failures_total", ""),
        available: metric(&text, "fermata_storage_available", ""),
    })
}

/// The sum of the samples of `name` whose labels contain `labels`, in Prometheus' text format;
/// `None` when there is no such sample.
fn metric(text: &str, name: &str, labels: &str) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            (metric == name && rest.contains(labels)).then(|| value.parse::<f64>().ok())?
        })
        .fold(None, |sum, value| Some(sum.unwrap_or(0.0) + value))
}

// ---------------------------------------------------------------------------------------------
// Small helpers.

/// The stored text of `document`; fails the test when the server does not answer 200.
fn text_of(address: SocketAddr, token: &str, document: &str) -> String {
    try_text_of(address, token, document).expect("the document could not be read")
}
