//! Benchmark of live collaboration through the real `fermata serve`, on SQLite (WAL,
//! synchronous=FULL) and durable PostgreSQL, each figure set against a floor measured in the same
//! run on the same database:
//!
//! - live: N WebSocket clients (yrs documents speaking y-websocket) on one document, each sending
//!   M small text inserts one after another and waiting for each to be acknowledged, that is for
//!   the server's broadcast of the committed batch that holds it (the server commits before it
//!   broadcasts, so an acknowledged update is durable); per-update latency from send to
//!   acknowledgement, and acknowledged updates per second over the whole run;
//! - floor: the same shape with bare single-row insert transactions, N concurrent writers each
//!   doing M inserts of a payload of the same size; per-insert latency and inserts per second.
//!
//! Then the same with many documents at once: D documents (default 64,
//! `FERMATA_BENCH_DOCUMENTS`) with 2 clients each, all typing, M/4 updates each, against as many
//! concurrent bare-insert writers.
//!
//! Then what rooms cost, on each engine: memory per open room with [`ROOMS`] documents open, one
//! idle client each, against the memory of the same documents' yrs state; the memory kept once
//! every client left and the rooms closed; the time to open a cold document of about 1 MB
//! (recovered from storage for its first client) against applying the same state to a fresh yrs
//! document; and the history text kept per edit of a typing session against the edits' own
//! bytes.
//!
//! The server runs with its default `[documents]` settings. `FERMATA_BENCH_CLIENTS` sets N
//! (default 8) and `FERMATA_BENCH_UPDATES` sets M (default 200); each writer first does a few
//! untimed warm-up writes.

#[path = "../tests/it/support/mod.rs"]
mod support;

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fermata_collab::CollabSettings;
use fermata_collab::protocol::{self, ClientMessage};
use fermata_store::StoreOptions;
use fermata_store_sql::Database;
use fermata_store_sql::testing::bench::{
    BareInserts, Figure, Summary, durable_setting, micros, ratio,
};
use fermata_store_sql::testing::{POSTGRES_URL_VAR, ScratchDatabase, ScratchStorage};
use futures::{SinkExt, StreamExt};
use serde_json::json;
use support::{Fermata, PATIENCE, request};
use tokio::net::TcpStream;
use tokio::sync::Barrier;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use yrs::updates::decoder::Decode;
use yrs::updates::encoder::Encode;
use yrs::{Doc, GetString, ID, IdSet, ReadTxn, StateVector, Text, TextRef, Transact, Update};

/// Untimed writes each writer does first, on both sides.
const WARM_UP: usize = 10;

/// The environment variables that configure fermata, cleared so the caller's do not leak in.
const SETTINGS_VARS: &[&str] = &[
    "FERMATA_CONFIG",
    "FERMATA_DATA_DIR",
    "FERMATA_STORAGE",
    "FERMATA_DATABASE_URL",
    "FERMATA_LISTEN",
    "FERMATA_HANDOVER",
    "FERMATA_LOG_FORMAT",
    "FERMATA_LOG",
    "FERMATA_KEYS",
    "FERMATA_KEYS_FILE",
    "FERMATA_SECURE_COOKIES",
    "HANDOVER",
];

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

#[derive(Debug, Clone, Copy)]
struct Workload {
    /// Documents open at once, each with `clients` writers.
    documents: usize,
    clients: usize,
    updates: usize,
}

impl Workload {
    fn writers(self) -> usize {
        self.documents * self.clients
    }

    fn name(self) -> String {
        match self.documents {
            1 => format!("{} clients on one document", self.clients),
            n => format!("{n} documents x {} clients", self.clients),
        }
    }
}

/// What one side measured: every timed write's latency, and the wall time of all of them.
#[derive(Debug)]
struct Run {
    latencies: Vec<Duration>,
    wall: Duration,
}

impl Run {
    fn per_second(&self) -> f64 {
        self.latencies.len() as f64 / self.wall.as_secs_f64().max(f64::EPSILON)
    }
}

fn main() {
    assert!(
        std::env::var_os(POSTGRES_URL_VAR).is_some(),
        "{POSTGRES_URL_VAR} is not set: run the benchmark with scripts/bench, which starts a \
         throwaway PostgreSQL server with fsync on"
    );
    let updates = setting("FERMATA_BENCH_UPDATES", 200);
    let workloads = [
        Workload {
            documents: 1,
            clients: setting("FERMATA_BENCH_CLIENTS", 8),
            updates,
        },
        Workload {
            documents: setting("FERMATA_BENCH_DOCUMENTS", 64),
            clients: 2,
            updates: (updates / 4).max(1),
        },
    ];
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        for workload in workloads {
            measure("sqlite", ScratchDatabase::sqlite(), workload).await;
            measure("postgres", ScratchDatabase::postgres().await, workload).await;
        }
        costs("sqlite", ScratchDatabase::sqlite()).await;
        costs("postgres", ScratchDatabase::postgres().await).await;
    });
}

fn setting(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(value) => match value.parse() {
            Ok(n) if n > 0 => n,
            _ => panic!("{name} must be a positive whole number, not {value:?}"),
        },
        Err(_) => default,
    }
}

/// The text client `client` inserts with its `n`th update: 20 bytes.
fn edit(client: usize, n: usize) -> String {
    format!("client {client:02} edit {n:04}\n")
}

/// The data folder for a server on `target`: it holds the key file, and for SQLite the database
/// file itself (the folder is then the scratch database's). A folder made here lives as long as
/// the returned guard.
fn data_dir(target: &Database) -> (PathBuf, Option<tempfile::TempDir>) {
    match target {
        Database::Sqlite { path } => (
            path.parent().expect("the SQLite file's folder").to_owned(),
            None,
        ),
        Database::Postgres { .. } => {
            let folder = tempfile::tempdir().expect("create a temporary folder");
            (folder.path().to_owned(), Some(folder))
        }
    }
}

async fn measure(backend: &str, database: ScratchDatabase, workload: Workload) {
    let target = database.database.clone();
    let (data_dir, _keys_folder) = data_dir(&target);
    let store = database.open(StoreOptions::default()).await;
    println!("{backend}: {}", durable_setting(&store).await);
    let settings = CollabSettings::default();
    println!(
        "  {}: {} writers x {} writes of {} bytes each, after {WARM_UP} untimed each; server \
         [documents] defaults (batch window {} ms, at most {} updates a commit)",
        workload.name(),
        workload.writers(),
        workload.updates,
        edit(0, 0).len(),
        settings.batch_window.as_millis(),
        settings.max_batch
    );
    let (live, commits) = live(&target, &data_dir, workload).await;
    let floor = floor(&store, workload).await;
    report(backend, workload, &live, commits, &floor);
    println!();
    store.storage.close().await;
}

/// The goal for acknowledged updates/s against as many bare-insert writers: level on
/// PostgreSQL, whose writers each have a connection of their own; half on SQLite, whose inserts
/// share the one write lock without the fence's and the document's work.
fn throughput_goal(backend: &str) -> &'static str {
    match backend {
        "postgres" => ">= 1",
        _ => ">= 0.5",
    }
}

fn report(backend: &str, workload: Workload, live: &Run, commits: i64, floor: &Run) {
    let (live_summary, floor_summary) = (
        Summary::of(live.latencies.clone()),
        Summary::of(floor.latencies.clone()),
    );
    println!(
        "    bare insert floor     {:>7.0} inserts/s       p50 {:>8.1} us  p99 {:>8.1} us  \
         ({} inserts in {:.2} s)",
        floor.per_second(),
        micros(floor_summary.median),
        micros(floor_summary.p99),
        floor_summary.n,
        floor.wall.as_secs_f64()
    );
    println!(
        "    fermata live          {:>7.0} acked updates/s p50 {:>8.1} us  p99 {:>8.1} us  \
         ({} updates in {:.2} s, {} commits, {:.1} updates a commit)",
        live.per_second(),
        micros(live_summary.median),
        micros(live_summary.p99),
        live_summary.n,
        live.wall.as_secs_f64(),
        commits,
        live_summary.n as f64 / commits.max(1) as f64
    );
    println!(
        "    latency fermata/floor: p50 {:.2}x, p99 {:.2}x; throughput floor/fermata: {:.2}x",
        ratio(live_summary.median, floor_summary.median),
        ratio(live_summary.p99, floor_summary.p99),
        floor.per_second() / live.per_second().max(f64::EPSILON)
    );
    let group = format!("rooms/{backend}");
    let name = workload.name();
    let throughput = format!("{name}: acknowledged updates/s");
    let p99 = format!("{name}: acknowledgement p99");
    for (figure, unit, measured, floor, floor_name, goal) in [
        (
            &throughput,
            "/s",
            live.per_second(),
            floor.per_second(),
            "concurrent bare-insert writers, inserts/s",
            throughput_goal(backend),
        ),
        (
            &p99,
            "us",
            micros(live_summary.p99),
            micros(floor_summary.p99),
            "bare insert p99",
            "<= 3",
        ),
    ] {
        Figure {
            group: group.clone(),
            name: figure,
            unit,
            measured,
            floor,
            floor_name,
            goal: Some(goal),
        }
        .record();
    }
}

/// `fermata WORDS...` aimed at `database`, with nothing from the caller's environment.
fn fermata(database: &Database, data_dir: &Path, words: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fermata"));
    command.args(words);
    for var in SETTINGS_VARS {
        command.env_remove(var);
    }
    command.arg("--data-dir").arg(data_dir);
    if let Database::Postgres { url } = database {
        command.args(["--storage", "postgres"]);
        command.env("FERMATA_DATABASE_URL", url);
    }
    command
}

/// Runs a CLI command to the end with `input` on its standard input; returns its standard output.
fn run(database: &Database, data_dir: &Path, words: &[&str], input: &str) -> String {
    let mut child = fermata(database, data_dir, words)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run fermata");
    child
        .stdin
        .take()
        .expect("its standard input")
        .write_all(input.as_bytes())
        .expect("write to fermata");
    let output = child.wait_with_output().expect("wait for fermata");
    assert!(
        output.status.success(),
        "fermata {} failed: {}{}",
        words.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// The benchmark's user and an API token for it.
fn bench_token(database: &Database, data_dir: &Path) -> String {
    run(
        database,
        data_dir,
        &["user", "add", "bench", "--password-stdin"],
        "a long enough password\n",
    );
    run(
        database,
        data_dir,
        &["token", "create", "--user", "bench"],
        "",
    )
}

/// `fermata serve` on a loopback port, ready; with `config` as its configuration file.
async fn serve(database: &Database, data_dir: &Path, config: Option<&Path>) -> Fermata {
    let mut serve = fermata(database, data_dir, &["serve"]);
    serve.args(["--listen", "127.0.0.1:0"]);
    if let Some(config) = config {
        serve.arg("--config").arg(config);
    }
    let server = Fermata::spawn(serve);
    server.wait_ready().await;
    server
}

/// Creates `count` documents; returns their IDs.
fn create_documents(address: SocketAddr, bearer: &str, count: usize) -> Vec<String> {
    (0..count)
        .map(|n| {
            let created = request(
                address,
                "POST",
                "/api/v1/documents",
                &[("Authorization", bearer)],
                Some(
                    &json!({"repository": "bench/rooms", "title": format!("Rooms benchmark {n}")}),
                ),
            );
            assert_eq!(created.status, 201, "{}", created.body);
            created.json()["id"]
                .as_str()
                .expect("the document's ID")
                .to_owned()
        })
        .collect()
}

/// A user, an API token for it, a server and one document; then the clients' run.
async fn live(database: &Database, data_dir: &Path, workload: Workload) -> (Run, i64) {
    let token = bench_token(database, data_dir);
    let mut server = serve(database, data_dir, None).await;
    let address = server.address().await;
    let bearer = format!("Bearer {token}");
    let documents = create_documents(address, &bearer, workload.documents);
    let expected: usize = (0..workload.clients)
        .flat_map(|c| (0..WARM_UP + workload.updates).map(move |n| edit(c, n).len()))
        .sum();

    // Everyone connects, syncs and warms up, then waits; the clock starts as they are let go.
    let ready = Arc::new(Barrier::new(workload.writers() + 1));
    let go = Arc::new(Barrier::new(workload.writers() + 1));
    let clients: Vec<Vec<_>> = documents
        .iter()
        .map(|document| {
            let url = format!("ws://{address}/sync/{document}?token={token}");
            (0..workload.clients)
                .map(|index| {
                    tokio::spawn(client(
                        url.clone(),
                        index,
                        workload.updates,
                        expected,
                        Arc::clone(&ready),
                        Arc::clone(&go),
                    ))
                })
                .collect()
        })
        .collect();
    gather(&ready, "the clients to connect and warm up").await;
    let before: i64 = documents
        .iter()
        .map(|document| revision(address, &bearer, document).0)
        .sum();
    let started = Instant::now();
    go.wait().await;
    let mut latencies = Vec::with_capacity(workload.writers() * workload.updates);
    let mut finished = started;
    let mut after = 0;
    for (document, handles) in documents.iter().zip(clients) {
        let mut texts = Vec::new();
        for handle in handles {
            let outcome = handle.await.expect("a client failed");
            latencies.extend(outcome.latencies);
            finished = finished.max(outcome.last_ack);
            texts.push(outcome.text);
        }
        let (revision, text) = revision(address, &bearer, document);
        after += revision;
        assert_eq!(text.len(), expected, "the server's document lacks updates");
        assert!(
            texts.iter().all(|t| *t == text),
            "a client's document differs from the server's"
        );
    }
    server.terminate();
    let status = server.wait_exit().await;
    assert!(
        status.success(),
        "the server did not stop cleanly ({status}):\n{}",
        server.output()
    );
    (
        Run {
            latencies,
            wall: finished - started,
        },
        after - before,
    )
}

/// Waits at `barrier` with the tasks, failing loudly when one of them never arrives (it failed).
async fn gather(barrier: &Barrier, what: &str) {
    tokio::time::timeout(PATIENCE, barrier.wait())
        .await
        .unwrap_or_else(|_| panic!("gave up waiting for {what}"));
}

/// The document's revision (one per commit) and text, over HTTP.
fn revision(address: SocketAddr, bearer: &str, document: &str) -> (i64, String) {
    let answer = request(
        address,
        "GET",
        &format!("/api/v1/documents/{document}"),
        &[("Authorization", bearer)],
        None,
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    let body = answer.json();
    (
        body["revision"].as_i64().expect("a revision"),
        body["text"].as_str().expect("a text").to_owned(),
    )
}

#[derive(Debug)]
struct ClientRun {
    latencies: Vec<Duration>,
    last_ack: Instant,
    text: String,
}

/// One y-websocket client: a yrs document whose root text `source` it appends to.
struct Client {
    socket: Socket,
    doc: Doc,
    text: TextRef,
    index: usize,
}

async fn client(
    url: String,
    index: usize,
    updates: usize,
    expected: usize,
    ready: Arc<Barrier>,
    go: Arc<Barrier>,
) -> ClientRun {
    let mut client = Client::connect(&url, index).await;
    for n in 0..WARM_UP {
        client.write(&edit(index, n)).await;
    }
    ready.wait().await;
    go.wait().await;
    let mut latencies = Vec::with_capacity(updates);
    for n in WARM_UP..WARM_UP + updates {
        latencies.push(client.write(&edit(index, n)).await);
    }
    let last_ack = Instant::now();
    // Then read on until everyone's updates are here, so every client ends with the same text.
    while (client.text.len(&client.doc.transact()) as usize) < expected {
        client.receive().await;
    }
    let text = client.text.get_string(&client.doc.transact());
    let _ = client.socket.close(None).await;
    ClientRun {
        latencies,
        last_ack,
        text,
    }
}

impl Client {
    /// Connects to `url` and asks for the document, as y-websocket does: with our state vector,
    /// so the server sends what we lack (its own step 1 is answered as it arrives).
    async fn connect(url: &str, index: usize) -> Client {
        let (socket, _) = tokio_tungstenite::connect_async_with_config(url, None, true)
            .await
            .unwrap_or_else(|error| panic!("client {index} could not connect: {error}"));
        let doc = Doc::new();
        let text = doc.get_or_insert_text("source");
        let mut client = Client {
            socket,
            doc,
            text,
            index,
        };
        let vector = client.doc.transact().state_vector().encode_v1();
        client.send(protocol::sync_step1(&vector)).await;
        client
    }

    /// Waits for the server's answer to our state vector (its sync step 2, the whole document
    /// for a new client); returns its bytes.
    async fn synced(&mut self) -> Vec<u8> {
        loop {
            let bytes = self.next_binary().await;
            match protocol::decode(&bytes) {
                Ok(ClientMessage::Update(update)) => {
                    let decoded = Update::decode_v1(&update).expect("the server's update");
                    self.doc
                        .transact_mut()
                        .apply_update(decoded)
                        .expect("apply the server's update");
                    return update;
                }
                Ok(ClientMessage::StateVector(vector)) => self.answer(&vector).await,
                _ => {}
            }
        }
    }

    async fn answer(&mut self, vector: &[u8]) {
        let vector = StateVector::decode_v1(vector).expect("the server's state vector");
        let diff = self.doc.transact().encode_diff_v1(&vector);
        self.send(protocol::sync_step2(diff)).await;
    }

    async fn send(&mut self, message: Vec<u8>) {
        self.socket
            .send(Message::binary(message))
            .await
            .unwrap_or_else(|error| panic!("client {} could not send: {error}", self.index));
    }

    /// Appends `edit`, sends the update and waits for the server to acknowledge it; returns the
    /// time from the send to the acknowledgement.
    async fn write(&mut self, edit: &str) -> Duration {
        let me = self.doc.client_id();
        let update = {
            let mut txn = self.doc.transact_mut();
            let end = self.text.len(&txn);
            self.text.insert(&mut txn, end, edit);
            txn.encode_update_v1()
        };
        // The update's last clock: acknowledged once a broadcast (a committed batch) holds it, that
        // is once the server's clock for this client is at or past the update's. The broadcast
        // is a diff since the batch's start, so a client's blocks in it start past clock 0, and
        // `Update::state_vector` (which counts only runs starting at 0) would not show them: the
        // ids the update inserts do.
        let last = ID::new(me, self.doc.transact().state_vector().get(&me) - 1);
        let sent = Instant::now();
        self.send(protocol::update(update)).await;
        loop {
            if let Some(inserted) = self.receive().await
                && inserted.contains(&last)
            {
                return sent.elapsed();
            }
        }
    }

    /// Handles the next message from the server; when it is an update, applies it to the
    /// client's document and returns the ids it inserts.
    async fn receive(&mut self) -> Option<IdSet> {
        let index = self.index;
        let bytes = self.next_binary().await;
        match protocol::decode(&bytes)
            .unwrap_or_else(|_| panic!("client {index}: not a y-websocket message"))
        {
            ClientMessage::StateVector(vector) => {
                self.answer(&vector).await;
                None
            }
            ClientMessage::Update(bytes) => {
                let update = Update::decode_v1(&bytes).expect("the server's update");
                let inserted = update.insertions(true);
                self.doc
                    .transact_mut()
                    .apply_update(update)
                    .expect("apply the server's update");
                Some(inserted)
            }
            _ => None,
        }
    }

    /// The next binary message from the server.
    async fn next_binary(&mut self) -> Vec<u8> {
        let index = self.index;
        loop {
            match tokio::time::timeout(PATIENCE, self.socket.next()).await {
                Err(_) => panic!("client {index}: nothing from the server in {PATIENCE:?}"),
                Ok(None) => panic!("client {index}: the server closed the connection"),
                Ok(Some(Err(error))) => panic!("client {index}: {error}"),
                Ok(Some(Ok(Message::Close(frame)))) => {
                    panic!("client {index}: the server closed the connection: {frame:?}")
                }
                Ok(Some(Ok(Message::Binary(bytes)))) => return bytes.to_vec(),
                Ok(Some(Ok(_))) => {}
            }
        }
    }
}

/// The floor: one writer per client, each doing its inserts one after another, all at once.
async fn floor(store: &ScratchStorage, workload: Workload) -> Run {
    let payload = "x".repeat(edit(0, 0).len());
    let first = BareInserts::create(store, payload).await;
    // Each writer's ids in a range of its own.
    let stride = (WARM_UP + workload.updates) as i64;
    let mut writers: Vec<BareInserts> = (1..workload.writers())
        .map(|index| first.writer_from(index as i64 * stride + 1))
        .collect();
    writers.insert(0, first);
    let ready = Arc::new(Barrier::new(workload.writers() + 1));
    let go = Arc::new(Barrier::new(workload.writers() + 1));
    let tasks: Vec<_> = writers
        .into_iter()
        .map(|mut writer| {
            let (store, ready, go) = (store.clone(), Arc::clone(&ready), Arc::clone(&go));
            tokio::spawn(async move {
                for _ in 0..WARM_UP {
                    writer.insert(&store).await;
                }
                ready.wait().await;
                go.wait().await;
                let mut latencies = Vec::with_capacity(workload.updates);
                for _ in 0..workload.updates {
                    latencies.push(writer.insert(&store).await);
                }
                (latencies, Instant::now())
            })
        })
        .collect();
    gather(&ready, "the bare insert writers to warm up").await;
    let started = Instant::now();
    go.wait().await;
    let mut latencies = Vec::with_capacity(workload.writers() * workload.updates);
    let mut finished = started;
    for task in tasks {
        let (times, done) = task.await.expect("a bare insert writer failed");
        latencies.extend(times);
        finished = finished.max(done);
    }
    Run {
        latencies,
        wall: finished - started,
    }
}

/// Documents open at once for the memory figure (`FERMATA_BENCH_ROOMS`).
const ROOMS: usize = 1000;

/// Bytes of text each document of the memory figure holds.
const ROOM_TEXT: usize = 2048;

/// About how large the cold document is, and the size of each update that writes it.
const COLD_BYTES: usize = 1024 * 1024;
const COLD_CHUNK: usize = 32 * 1024;

/// Edits of the typing session whose history is measured.
const HISTORY_EDITS: usize = 500;

/// Memory per open room, a cold 1 MB open and history kept per edit, on one engine; each against
/// its floor (see the module's documentation).
async fn costs(backend: &str, database: ScratchDatabase) {
    let target = database.database.clone();
    let (data_dir, _keys_folder) = data_dir(&target);
    let store = database.open(StoreOptions::default()).await;
    let config = data_dir.join("bench-costs.toml");
    // Rooms close a second after their last client; one loopback peer may hold every client.
    std::fs::write(
        &config,
        format!(
            "[documents]\nidle_close = \"1s\"\n\n[http]\nmax_connections_per_peer = {}\n",
            2 * setting("FERMATA_BENCH_ROOMS", ROOMS) + 64
        ),
    )
    .expect("write the configuration");
    let token = bench_token(&target, &data_dir);
    let mut server = serve(&target, &data_dir, Some(&config)).await;
    let address = server.address().await;
    let bearer = format!("Bearer {token}");
    let group = format!("rooms/{backend}");
    println!("{backend}: what rooms cost");
    room_memory(&server, address, &token, &group).await;
    cold_open(address, &token, &bearer, &group).await;
    history_per_edit(&store, address, &token, &bearer, &group).await;
    server.terminate();
    let status = server.wait_exit().await;
    assert!(
        status.success(),
        "the server did not stop cleanly ({status})"
    );
    println!();
    store.storage.close().await;
}

/// The server's resident memory now, in bytes (`VmRSS`).
fn resident(server: &Fermata) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid()))
        .expect("read the server's status");
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("the server's resident memory");
    kib * 1024.0
}

/// `fermata_rooms_open` from the server's metrics.
fn rooms_open(address: SocketAddr) -> usize {
    let (status, body) = support::get(address, "/metrics").expect("the metrics");
    assert_eq!(status, 200);
    body.lines()
        .find_map(|line| line.strip_prefix("fermata_rooms_open "))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .map_or(0, |value| value as usize)
}

async fn wait_rooms_open(address: SocketAddr, expected: usize) {
    let deadline = Instant::now() + PATIENCE;
    while rooms_open(address) != expected {
        assert!(
            Instant::now() < deadline,
            "the server never had {expected} rooms open"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Creates a document with `text`, program style.
fn create_with_text(address: SocketAddr, bearer: &str, key: &str, text: &str) -> String {
    let created = request(
        address,
        "POST",
        "/api/v1/documents",
        &[("Authorization", bearer), ("Idempotency-Key", key)],
        Some(&json!({"repository": "bench/costs", "title": key, "text": text})),
    );
    assert!(matches!(created.status, 200 | 201), "{}", created.body);
    created.json()["id"]
        .as_str()
        .expect("the document's ID")
        .to_owned()
}

/// Opens every document with one idle client each, twice (the rooms closing in between);
/// records the memory per open room, and what the second round kept that the first had freed.
async fn room_memory(server: &Fermata, address: SocketAddr, token: &str, group: &str) {
    let rooms = setting("FERMATA_BENCH_ROOMS", ROOMS);
    let bearer = format!("Bearer {token}");
    let text: String = "memory bench line\n".repeat(ROOM_TEXT / 18);
    let documents: Vec<String> = (0..rooms)
        .map(|n| create_with_text(address, &bearer, &format!("memory-{n}"), &text))
        .collect();
    wait_rooms_open(address, 0).await;
    let mut rounds = Vec::new();
    let mut state_bytes = 0;
    for _ in 0..2 {
        let before = resident(server);
        let mut clients = Vec::with_capacity(rooms);
        for (index, document) in documents.iter().enumerate() {
            let mut client = Client::connect(
                &format!("ws://{address}/sync/{document}?token={token}"),
                index,
            )
            .await;
            state_bytes = client.synced().await.len();
            clients.push(client);
        }
        wait_rooms_open(address, rooms).await;
        let open = resident(server);
        for mut client in clients {
            let _ = client.socket.close(None).await;
        }
        wait_rooms_open(address, 0).await;
        let closed = resident(server);
        rounds.push((before, open, closed));
    }
    let per_room = (rounds[0].1 - rounds[0].0) / rooms as f64 / 1024.0;
    // What the second round needed beyond the first, with the same rooms open: nothing, when
    // closing the rooms freed what they held for the next ones to reuse. (Resident memory after
    // the close says less: the allocator keeps freed pages for reuse.)
    let kept = (rounds[1].1 - rounds[0].1).max(0.0) / rooms as f64 / 1024.0;
    let state = state_bytes as f64 / 1024.0;
    let mib = |bytes: f64| bytes / 1048576.0;
    println!(
        "  {rooms} open rooms, one idle client each: {per_room:.1} KiB a room (each document's \
         state {state:.1} KiB); resident before, open, closed: {:.1}, {:.1}, {:.1} MiB, then in a \
         second round {:.1}, {:.1}, {:.1} MiB",
        mib(rounds[0].0),
        mib(rounds[0].1),
        mib(rounds[0].2),
        mib(rounds[1].0),
        mib(rounds[1].1),
        mib(rounds[1].2)
    );
    Figure {
        group: group.to_owned(),
        name: &format!("memory per open room ({rooms} rooms, one idle client each)"),
        unit: "KiB",
        measured: per_room,
        floor: state,
        floor_name: "the document's encoded Yjs state",
        goal: None,
    }
    .record();
    Figure {
        group: group.to_owned(),
        name: "memory a second round of the same rooms needed beyond the first, per room",
        unit: "KiB",
        measured: kept,
        floor: state,
        floor_name: "the document's encoded Yjs state",
        goal: Some("<= 1"),
    }
    .record();
}

/// Writes about 1 MB into a document through a client, lets its room close, then times the
/// first client's open (connect to the whole document received) three times; records the
/// median against applying the same state to a fresh yrs document.
async fn cold_open(address: SocketAddr, token: &str, bearer: &str, group: &str) {
    let document = create_documents(address, bearer, 1).remove(0);
    let url = format!("ws://{address}/sync/{document}?token={token}");
    let mut writer = Client::connect(&url, 0).await;
    writer.synced().await;
    let chunk = "cold document text, written in large updates.\n".repeat(COLD_CHUNK / 46);
    for _ in 0..COLD_BYTES / chunk.len() {
        writer.write(&chunk).await;
    }
    let _ = writer.socket.close(None).await;
    let mut opens = Vec::new();
    let mut applies = Vec::new();
    for _ in 0..3 {
        wait_rooms_open(address, 0).await;
        let started = Instant::now();
        let mut reader = Client::connect(&url, 1).await;
        let state = reader.synced().await;
        opens.push(started.elapsed());
        let _ = reader.socket.close(None).await;
        let started = Instant::now();
        let doc = Doc::new();
        doc.transact_mut()
            .apply_update(Update::decode_v1(&state).expect("the state"))
            .expect("apply the state");
        applies.push(started.elapsed());
        assert!(
            state.len() >= COLD_BYTES / 2,
            "the document is smaller than written"
        );
    }
    let (open, apply) = (Summary::of(opens).median, Summary::of(applies).median);
    println!(
        "  cold open of a {:.1} MB document: {:.1} ms (median of 3); applying its state to a \
         fresh yrs document {:.1} ms",
        COLD_BYTES as f64 / 1e6,
        micros(open) / 1000.0,
        micros(apply) / 1000.0
    );
    Figure {
        group: group.to_owned(),
        name: "cold open of a 1 MB document, median of 3",
        unit: "us",
        measured: micros(open),
        floor: micros(apply),
        floor_name: "its state applied to a fresh yrs document",
        goal: Some("<= 3"),
    }
    .record();
}

/// One member types [`HISTORY_EDITS`] edits in one session; records the history text kept per
/// edit against the edit's own bytes.
async fn history_per_edit(
    store: &ScratchStorage,
    address: SocketAddr,
    token: &str,
    bearer: &str,
    group: &str,
) {
    let document = create_documents(address, bearer, 1).remove(0);
    let mut typist =
        Client::connect(&format!("ws://{address}/sync/{document}?token={token}"), 0).await;
    typist.synced().await;
    for n in 0..HISTORY_EDITS {
        typist.write(&edit(0, n)).await;
    }
    let _ = typist.socket.close(None).await;
    wait_rooms_open(address, 0).await;
    let sql = match store.storage.dialect() {
        fermata_store_sql::Dialect::Sqlite => {
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(canonical_text)), 0) FROM document_versions \
             WHERE channel_id = ?"
        }
        fermata_store_sql::Dialect::Postgres => {
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(canonical_text)), 0)::BIGINT FROM \
             document_versions WHERE channel_id = $1"
        }
    };
    let (sessions, kept): (i64, i64) = sqlx::query_as(sql)
        .bind(&document)
        .fetch_one(store.storage.pool())
        .await
        .expect("read the history");
    let per_edit = kept as f64 / HISTORY_EDITS as f64;
    println!(
        "  history of {HISTORY_EDITS} edits by one member: {sessions} session(s), {kept} bytes of \
         text kept, {per_edit:.1} bytes an edit"
    );
    Figure {
        group: group.to_owned(),
        name: "history text kept per edit (one member typing one session)",
        unit: "B",
        measured: per_edit,
        floor: edit(0, 0).len() as f64,
        floor_name: "the edit's own text",
        goal: None,
    }
    .record();
}
