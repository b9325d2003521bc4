//! Several `serve` processes on one PostgreSQL database, with real y-websocket clients typing in
//! documents spread over every member's shards: a member killed with `kill -9`, frozen with
//! SIGSTOP, and cut off from the database; a member joining and one stopping with SIGTERM; and
//! the nginx front of deploy/nginx in front of two members.
//!
//! What must hold through each (docs/storage.md, "Several processes"): every line a client saw
//! of another (the room broadcasts only what it committed) and every line typed is stored in the
//! end; clients of documents whose shards no fault touched are never disconnected; every shard
//! has one live holder once the cluster settles, and none is held by a process that was stopped
//! or cut off. A client of a document whose holder died reconnects through a live member, which
//! forwards it to the shard's next holder. Takeover and hand-over times are printed, not asserted:
//! wall-clock time on a shared machine proves nothing.

use crate::support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use fermata_store::{ChannelId, ClusterView, LeaseName, Storage};
use support::postgres_cluster::{PgCluster, free_port, running_as_root};
use support::proxy::Proxy;
use support::{
    Fermata, PATIENCE, Target, Typist, api_token, create, tail, try_text_of, typed_lines,
};

/// Short lease timings, so a takeover takes seconds (ttl 6 s); they satisfy the rules of
/// `LeaseTimings::check`.
const CLUSTER: &str = "[writer_lease]\n\
    ttl = \"6s\"\nrenew_every = \"1s\"\nattempt_timeout = \"500ms\"\n\
    abandon_after = \"800ms\"\nsafety_deadline = \"4s\"\ndrain_timeout = \"1s\"\n\
    [cluster]\nenabled = true\n";

/// The two typists of each document.
const PREFIXES: [&str; 2] = ["ada-", "bob-"];

/// How many documents are created through each member (each in a shard that member holds).
const DOCUMENTS_PER_MEMBER: usize = 2;

struct Member {
    process: Fermata,
    address: SocketAddr,
}

struct Cluster {
    target: Target,
    token: String,
    members: Vec<Member>,
}

impl Cluster {
    /// `size` members on `target`, started one after the other; returns once every shard is
    /// held and every member holds some.
    async fn start(target: Target, size: usize) -> Cluster {
        target.replace_config(CLUSTER);
        let token = api_token(&target);
        let mut cluster = Cluster {
            target,
            token,
            members: Vec::new(),
        };
        for _ in 0..size {
            cluster.join(&[]).await;
        }
        cluster
    }

    /// Starts one more member (with `env`), and waits until the cluster is settled with it.
    async fn join(&mut self, env: &[(&str, &std::ffi::OsStr)]) -> usize {
        let process = self.target.serve_with_env(&[], env);
        process.wait_ready().await;
        let address = process.address().await;
        self.members.push(Member { process, address });
        let live: Vec<SocketAddr> = self.members.iter().map(|m| m.address).collect();
        self.settled(&live).await;
        self.members.len() - 1
    }

    /// Waits until exactly the members at `live` are in the cluster, each holds some shards, and
    /// every shard is held by the member placement gives it (so no hand-over is still to come);
    /// returns how long that took.
    async fn settled(&self, live: &[SocketAddr]) -> Duration {
        let started = Instant::now();
        let store = self.target.store().await;
        let count = store.cluster().shard_count().await.unwrap();
        loop {
            let view = store.cluster().view().await.unwrap();
            let holders = held_by(&view);
            let members = view.members.len();
            let in_place = view.shards_in_place(count);
            if members == live.len()
                && in_place == usize::from(count.get())
                && live
                    .iter()
                    .all(|address| holders.get(address).is_some_and(|n| *n > 0))
                && holders.keys().all(|address| live.contains(address))
            {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < PATIENCE,
                "the cluster never settled on {live:?}: {holders:?}, {members} members, \
                 {in_place} shards in place"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The address of the member that writes `document` now.
    async fn holder_of(&self, document: &str) -> SocketAddr {
        let store = self.target.store().await;
        let channel = store
            .collaboration()
            .channel(&ChannelId(document.to_owned()))
            .await
            .unwrap()
            .unwrap();
        let view = store.cluster().view().await.unwrap();
        let record = view
            .live_holder(&LeaseName::shard_writer(channel.shard))
            .expect("every shard is held");
        let member = view
            .members
            .iter()
            .find(|m| m.lease.holder == record.holder)
            .expect("the holder is a live member");
        address_of(&member.announcement.address)
    }

    /// Creates [`DOCUMENTS_PER_MEMBER`] documents through each member.
    fn documents(&self) -> Vec<String> {
        let mut documents = Vec::new();
        for (m, member) in self.members.iter().enumerate() {
            for d in 0..DOCUMENTS_PER_MEMBER {
                documents.push(create(
                    member.address,
                    &self.token,
                    &format!("Cluster {m}-{d}"),
                ));
            }
        }
        documents
    }

    fn logs(&self) -> String {
        self.members
            .iter()
            .enumerate()
            .map(|(i, m)| format!("== member {i}\n{}", tail(&m.process.output())))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// How many shards each member holds live in `view`, by its announced address.
fn held_by(view: &ClusterView) -> BTreeMap<SocketAddr, usize> {
    let mut holders = BTreeMap::new();
    for record in &view.leases {
        if record.name.shard().is_none() || !record.is_live(view.now) {
            continue;
        }
        let member = view
            .members
            .iter()
            .find(|m| m.lease.holder == record.holder);
        // A shard still held by a member that is no longer live counts under port 0.
        let address = member.map_or_else(
            || "0.0.0.0:0".parse().unwrap(),
            |m| address_of(&m.announcement.address),
        );
        *holders.entry(address).or_insert(0) += 1;
    }
    holders
}

fn address_of(base: &str) -> SocketAddr {
    base.trim_start_matches("http://").parse().unwrap()
}

/// A document, its typists, and the member they connect to.
struct Typed {
    document: String,
    via: SocketAddr,
    typists: Vec<(&'static str, Typist)>,
}

/// Starts two typists on each document, connected through `via(document)`, typing for
/// `typing`; returns once each has synced and its third line is stored.
async fn type_in(
    cluster: &Cluster,
    documents: &[String],
    typing: Duration,
    via: impl Fn(&str) -> SocketAddr,
) -> Vec<Typed> {
    let mut typed = Vec::new();
    for document in documents {
        let address = via(document);
        let typists = PREFIXES
            .iter()
            .map(|prefix| {
                let typist = Typist::spawn_typing_through(
                    address,
                    document,
                    &cluster.token,
                    prefix,
                    typing,
                    typing + PATIENCE,
                );
                (*prefix, typist)
            })
            .collect();
        typed.push(Typed {
            document: document.clone(),
            via: address,
            typists,
        });
    }
    for document in &typed {
        for (prefix, typist) in &document.typists {
            typist.event("synced", &mut Vec::new());
            let line = format!("{prefix}3\n");
            wait_for_text(cluster, document, &format!("{line:?} stored"), |text| {
                text.contains(&line)
            })
            .await;
        }
    }
    typed
}

async fn wait_for_text(
    cluster: &Cluster,
    typed: &Typed,
    what: &str,
    holds: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + PATIENCE;
    let mut last = None;
    loop {
        if let Some(text) = try_text_of(typed.via, &cluster.token, &typed.document) {
            if holds(&text) {
                return text;
            }
            last = Some(text);
        }
        assert!(
            Instant::now() < deadline,
            "gave up waiting for {what} in {}; the text was {last:?}\n{}",
            typed.document,
            cluster.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits for every typist to finish, then checks every line typed and every line seen is
/// stored; returns how many times each document's typists were disconnected.
async fn finish(cluster: &Cluster, typed: &[Typed], fault: &str) -> Vec<usize> {
    let mut disconnects = Vec::new();
    for document in typed {
        let mut closes = 0;
        let mut counts = Vec::new();
        let mut seen = Vec::new();
        for (prefix, typist) in &document.typists {
            let mut events = Vec::new();
            let done = typist.event("done", &mut events);
            assert_eq!(
                done["synced"],
                true,
                "{fault}: a typist of {} never synced again: {done}\n{}",
                document.document,
                cluster.logs()
            );
            closes += events.iter().filter(|e| e["event"] == "closed").count();
            counts.push((*prefix, done["typed"].as_u64().unwrap()));
            for line in done["seen"].as_array().unwrap() {
                seen.push(line.as_str().unwrap().to_owned());
            }
        }
        let stored = wait_for_text(cluster, document, "every typed line", |text| {
            counts
                .iter()
                .all(|(prefix, count)| typed_lines(text, prefix).len() as u64 >= *count)
        })
        .await;
        for (prefix, count) in &counts {
            let mut kept = typed_lines(&stored, prefix);
            kept.sort_unstable();
            kept.dedup();
            assert_eq!(
                kept,
                (1..=*count).collect::<Vec<_>>(),
                "{fault}: {prefix}'s lines in {} are not each stored once",
                document.document
            );
        }
        for line in &seen {
            assert!(
                stored.lines().any(|stored| stored == line),
                "{fault}: the acknowledged line {line:?} of {} was lost",
                document.document
            );
        }
        eprintln!(
            "{fault}: {} typed {counts:?}, {} lines seen by the other, {closes} disconnects",
            document.document,
            seen.len()
        );
        disconnects.push(closes);
    }
    disconnects
}

/// Waits until no shard is held by a member at `gone` (nor by any member that is not live) and
/// every shard is held again; returns how long that took from `since`.
async fn taken_over(cluster: &Cluster, gone: SocketAddr, since: Instant) -> Duration {
    let live: Vec<SocketAddr> = cluster
        .members
        .iter()
        .map(|m| m.address)
        .filter(|address| *address != gone)
        .collect();
    cluster.settled(&live).await;
    since.elapsed()
}

/// The documents' typists for a fault of the member at `faulted`: a document that member writes
/// is typed into through `entry` (a live member, which forwards to its next writer), any other
/// at its writer directly; returns each document's writer before the fault, with the typists.
async fn type_around(
    cluster: &Cluster,
    faulted: SocketAddr,
    entry: SocketAddr,
    typing: Duration,
) -> (BTreeMap<String, SocketAddr>, Vec<Typed>) {
    let documents = cluster.documents();
    let mut holders = BTreeMap::new();
    for document in &documents {
        holders.insert(document.clone(), cluster.holder_of(document).await);
    }
    let typed = type_in(cluster, &documents, typing, |document| {
        let holder = holders[document];
        if holder == faulted { entry } else { holder }
    })
    .await;
    assert!(
        holders.values().any(|holder| *holder == faulted),
        "no document was in the shards of the member at fault"
    );
    (holders, typed)
}

/// Checks that no client of a document whose writer was not `faulted` was disconnected.
fn assert_undisturbed(
    cluster: &Cluster,
    holders: &BTreeMap<String, SocketAddr>,
    faulted: SocketAddr,
    typed: &[Typed],
    disconnects: &[usize],
) {
    for (document, closes) in typed.iter().zip(disconnects) {
        if holders[&document.document] != faulted {
            assert_eq!(
                *closes,
                0,
                "a client of {}, whose shard no fault touched, was disconnected\n{}",
                document.document,
                cluster.logs()
            );
        }
    }
}

/// `kill -9` of one member of three: its shards are taken over after their leases expire, its
/// documents' clients (connected through a live member) reconnect and lose nothing, and the other
/// documents' clients (connected to their holders) see no disconnect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_member_loses_no_acknowledged_update_and_disturbs_no_other_shard() {
    let mut cluster = Cluster::start(Target::postgres().await, 3).await;
    // `status` lists the members, each with its address and shards, and the shards held.
    let (status, out) = cluster.target.run("status");
    assert!(status.success(), "{out}");
    assert!(out.contains("cluster: 3 live members"), "{out}");
    assert!(out.contains("shards held: 256 of 256"), "{out}");
    assert!(out.contains("shards in place: 256 of 256"), "{out}");
    for member in &cluster.members {
        assert!(
            out.contains(&format!("at http://{}", member.address)),
            "{out}"
        );
    }
    assert_eq!(out.matches(", coordinator").count(), 1, "{out}");
    let victim = cluster.members[1].address;
    let entry = cluster.members[0].address;
    let (holders, typed) = type_around(&cluster, victim, entry, Duration::from_secs(14)).await;
    let killed = Instant::now();
    cluster.members[1].process.kill();
    let takeover = taken_over(&cluster, victim, killed).await;
    eprintln!("kill -9: every shard of the killed member held again {takeover:?} after the kill");
    let disconnects = finish(&cluster, &typed, "kill -9").await;
    assert_undisturbed(&cluster, &holders, victim, &typed, &disconnects);
}

/// SIGSTOP of one member while its documents are written: its leases expire while it is frozen,
/// the others take its shards over, and once it runs again it writes nothing under the tokens it
/// lost (its clients, through a live member, lose nothing), and stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_member_is_taken_over_and_writes_nothing_after() {
    let mut cluster = Cluster::start(Target::postgres().await, 3).await;
    let frozen = cluster.members[2].address;
    let entry = cluster.members[0].address;
    let (holders, typed) = type_around(&cluster, frozen, entry, Duration::from_secs(16)).await;
    let stopped = Instant::now();
    cluster.members[2].process.signal("STOP");
    let takeover = taken_over(&cluster, frozen, stopped).await;
    eprintln!("SIGSTOP: every shard of the frozen member held again {takeover:?} after it froze");
    cluster.members[2].process.signal("CONT");
    // Thawed, it finds its member lease gone and stops (exit code 4).
    let status = cluster.members[2].process.wait_exit().await;
    assert_eq!(status.code(), Some(4), "{}", cluster.logs());
    let disconnects = finish(&cluster, &typed, "SIGSTOP").await;
    assert_undisturbed(&cluster, &holders, frozen, &typed, &disconnects);
}

/// A member cut off from the database (a network partition between it and PostgreSQL): it gives
/// its shards up by their safety deadline and stops; the others take them over once the leases
/// expire, and nothing acknowledged is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_cut_off_from_the_database_gives_its_shards_up() {
    let database = PgCluster::start();
    let upstream: SocketAddr = format!("127.0.0.1:{}", database.port()).parse().unwrap();
    let proxy = Proxy::start(upstream);
    let mut cluster = Cluster::start(Target::postgres_at(database.url()), 2).await;
    // The third member reaches the database through the proxy.
    let url = format!("postgres://postgres@{}/postgres", proxy.address());
    let url = std::ffi::OsString::from(url);
    let third = cluster
        .join(&[("FERMATA_DATABASE_URL", url.as_os_str())])
        .await;
    let cut = cluster.members[third].address;
    let entry = cluster.members[0].address;
    let (holders, typed) = type_around(&cluster, cut, entry, Duration::from_secs(16)).await;
    let partitioned = Instant::now();
    proxy.blackhole();
    let takeover = taken_over(&cluster, cut, partitioned).await;
    eprintln!("partition: every shard of the cut member held again {takeover:?} after the cut");
    let status = cluster.members[third].process.wait_exit().await;
    assert_eq!(status.code(), Some(4), "{}", cluster.logs());
    proxy.heal();
    let disconnects = finish(&cluster, &typed, "partition").await;
    assert_undisturbed(&cluster, &holders, cut, &typed, &disconnects);
}

/// A member that started the cluster cold and died in its startup reset, before it announced
/// itself, leaves the coordinator's lease to expire: a member that joins meanwhile waits for
/// that, then starts the cluster itself, reset included, rather than joining a cluster that was
/// never reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_start_whose_member_died_before_announcing_itself_is_made_again() {
    let target = Target::postgres().await;
    target.replace_config(CLUSTER);
    let (status, out) = target.run("migrate");
    assert!(status.success(), "{out}");
    let store = target.store().await;
    let died = store
        .leases()
        .acquire(&LeaseName::COORDINATOR, "died", Duration::from_secs(3))
        .await
        .unwrap();
    assert!(matches!(died, fermata_store::Acquisition::Granted(_)));
    let member = target.serve_with_env(&[], &[]);
    member.wait_for_output("joined the cluster; serving").await;
    let out = member.output();
    assert!(
        out.contains("another member is starting the cluster; waiting for it"),
        "{out}"
    );
    let joined = out
        .lines()
        .find(|line| line.contains("joined the cluster; serving"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(joined.contains("coordinator=true"), "{joined}");
}

/// A fourth member joins while clients type, then one of the first three stops with SIGTERM:
/// each hands shards over (rooms closed under the held fence, clients sent to reconnect), the
/// clients, all connected through the first member, lose nothing, and every hand-over's time is
/// in the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_join_and_leave_while_clients_type_without_loss() {
    let mut cluster = Cluster::start(Target::postgres().await, 3).await;
    let documents = cluster.documents();
    let entry = cluster.members[0].address;
    let typed = type_in(&cluster, &documents, Duration::from_secs(16), |_| entry).await;
    let joined = Instant::now();
    cluster.join(&[]).await;
    eprintln!(
        "join: the cluster settled with a fourth member {:?} after it started",
        joined.elapsed()
    );
    let leaving = cluster.members[1].address;
    let stopping = Instant::now();
    cluster.members[1].process.terminate();
    let status = cluster.members[1].process.wait_exit().await;
    assert!(status.success(), "{}", cluster.logs());
    let settled = taken_over(&cluster, leaving, stopping).await;
    eprintln!("SIGTERM: every shard of the stopped member held again {settled:?} after the signal");
    for (i, member) in cluster.members.iter().enumerate() {
        let mut took: Vec<f64> = member
            .process
            .output()
            .lines()
            .filter(|line| line.contains("handed a shard over"))
            .filter_map(|line| {
                line.split("took_ms=")
                    .nth(1)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .collect();
        took.sort_by(f64::total_cmp);
        let at = |q: f64| {
            took.get(((took.len() as f64 - 1.0) * q).round() as usize)
                .copied()
        };
        eprintln!(
            "member {i} handed {} shards over: p50 {:?} ms, p99 {:?} ms, slowest {:?} ms",
            took.len(),
            at(0.5),
            at(0.99),
            took.last()
        );
    }
    finish(&cluster, &typed, "join and SIGTERM").await;
}

/// nginx running deploy/nginx/fermata-cluster.conf, its members and port put in.
struct NginxFront {
    address: SocketAddr,
    child: std::process::Child,
    _folder: tempfile::TempDir,
}

impl NginxFront {
    async fn start(members: &[SocketAddr]) -> NginxFront {
        let nginx = std::path::Path::new("/usr/sbin/nginx");
        assert!(
            nginx.exists(),
            "nginx is not installed (scripts/test installs nginx-light where it is missing)"
        );
        let folder = tempfile::tempdir().unwrap();
        let dir = folder.path().display().to_string();
        let example = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../deploy/nginx/fermata-cluster.conf"),
        )
        .unwrap();
        let port = free_port();
        let servers: String = members
            .iter()
            .map(|m| format!("    server {m} max_fails=1 fail_timeout=5s;\n"))
            .collect();
        let mut front = String::new();
        let mut placed = false;
        for line in example.lines() {
            if line.trim_start().starts_with("server 10.0.0.") {
                if !placed {
                    front.push_str(&servers);
                    placed = true;
                }
            } else if line.trim() == "listen 80;" {
                front.push_str(&format!("    listen 127.0.0.1:{port};\n"));
            } else {
                front.push_str(line);
                front.push('\n');
            }
        }
        assert!(placed, "the example lists no member");
        std::fs::write(folder.path().join("front.conf"), front).unwrap();
        let user = if running_as_root() { "user root;" } else { "" };
        let conf = format!(
            "{user}\ndaemon off;\nworker_processes 1;\npid {dir}/nginx.pid;\n\
             error_log {dir}/error.log;\nevents {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {dir}/body;\n\
             proxy_temp_path {dir}/proxy;\n  fastcgi_temp_path {dir}/fastcgi;\n\
             uwsgi_temp_path {dir}/uwsgi;\n  scgi_temp_path {dir}/scgi;\n\
             include {dir}/front.conf;\n}}\n"
        );
        std::fs::write(folder.path().join("nginx.conf"), conf).unwrap();
        let child = std::process::Command::new(nginx)
            .args(["-p", &dir, "-c", &format!("{dir}/nginx.conf")])
            .stderr(std::fs::File::create(folder.path().join("stderr.log")).unwrap())
            .spawn()
            .unwrap();
        let address: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let started = Instant::now();
        while std::net::TcpStream::connect(address).is_err() {
            assert!(
                started.elapsed() < PATIENCE,
                "nginx never listened: {}{}",
                std::fs::read_to_string(folder.path().join("stderr.log")).unwrap_or_default(),
                std::fs::read_to_string(folder.path().join("error.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        NginxFront {
            address,
            child,
            _folder: folder,
        }
    }
}

impl Drop for NginxFront {
    /// A fast shutdown (SIGTERM) stops the workers with the master; a master killed outright
    /// would leave them running.
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// The nginx front in deploy/nginx, in front of two members: live connections (WebSocket
/// upgrades) and document requests through it reach the members, and every line is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nginx_front_in_deploy_carries_live_connections_and_requests() {
    let cluster = Cluster::start(Target::postgres().await, 2).await;
    let members: Vec<SocketAddr> = cluster.members.iter().map(|m| m.address).collect();
    let front = NginxFront::start(&members).await;
    let documents = cluster.documents();
    let typed = type_in(&cluster, &documents, Duration::from_secs(4), |_| {
        front.address
    })
    .await;
    let disconnects = finish(&cluster, &typed, "through nginx").await;
    assert!(
        disconnects.iter().all(|closes| *closes == 0),
        "{disconnects:?}"
    );
}
