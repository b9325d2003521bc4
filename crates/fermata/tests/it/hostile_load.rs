//! Hostile load against the real `fermata serve` on SQLite, on loopback only, bounded in count
//! and time: parallel uploads and thumbnails of images just under the pixel budget, idle,
//! half-sent and stalled sockets up to the connection cap of one address, a slot grab and a
//! presence flood in one room, and wrong-password storms against the administrator. Alongside,
//! two ordinary users log in, edit a document live and read it back.
//!
//! The bar: the ordinary users always succeed, the server's peak memory (`VmHWM`) stays under
//! the bound `docs/limits.md` gives for these settings, and `/healthz`, asked from another
//! address while the attacking one is refused at its cap, answers within 100 ms at the 99th
//! percentile. The figures are printed. Attackers and users bind their own loopback addresses (127.0.0.0/8), so
//! the server tells them apart as it would tell hosts apart.

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinSet;
use tokio::time::{Instant, timeout};
use tokio_tungstenite::tungstenite::Message;
use yrs::updates::decoder::Decode;
use yrs::updates::encoder::Encode;
use yrs::{GetString, ReadTxn, Text, Transact};

use fermata_collab::protocol::{self, ClientMessage};

use crate::support::{Fermata, Target};

const MIB: u64 = 1 << 20;

/// The settings under test (the defaults, but shorter timeouts and a smaller pixel budget, so the
/// test stays short and light), and the figures the bound is computed from.
const HEADER_READ_TIMEOUT_SECS: u64 = 3;
const PER_PEER: usize = 48;
const MAX_DECODE_BYTES: u64 = 32 * MIB;
const DECODE_CONCURRENCY: u64 = 2;
const UPLOAD_BUFFER_BYTES: u64 = 64 * MIB;
const THUMBNAIL_CACHE_BYTES: u64 = 16 * MIB;
const PASSWORD_CONCURRENCY: u64 = 2;
/// What one argon2id check takes (19 MiB), with room for its bookkeeping.
const PASSWORD_CHECK_BYTES: u64 = 20 * MIB;
const MEMBER_CONNECTIONS: usize = 8;
const PRESENCE_PER_SECOND: u64 = 10;
const PRESENCE_BURST: u64 = 20;

const CONFIG: &str = "\n[http]\nheader_read_timeout = \"3s\"\nkeep_alive_timeout = \"2s\"\n\
    body_grace = \"2s\"\nmax_connections_per_peer = 48\n\
    [media]\nmax_decode_bytes = 33554432\ndecode_concurrency = 2\ndecode_queue_wait = \"4s\"\n\
    upload_buffer_bytes = 67108864\nthumbnail_cache_bytes = 16777216\n\
    [accounts]\npassword_concurrency = 2\n";

const ADMIN_PASSWORD: &str = "the administrator's long password";
const USER_PASSWORD: &str = "an ordinary user's long password";

const ATTACKER: [u8; 4] = [127, 0, 0, 66];
const ALICE: [u8; 4] = [127, 0, 0, 2];
const BOB: [u8; 4] = [127, 0, 0, 3];
const ADMIN: [u8; 4] = [127, 0, 0, 4];
const MALLORY: [u8; 4] = [127, 0, 0, 67];
const MONITOR: [u8; 4] = [127, 0, 0, 5];

/// How long the attack runs at least.
const ATTACK: Duration = Duration::from_secs(20);
/// What each ordinary user does, spread over the attack.
const ROUNDS: usize = 8;
const ROUND_PAUSE: Duration = Duration::from_millis(1500);
/// The longest any one exchange may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(60);

/// An HTTP answer.
#[derive(Debug)]
struct Reply {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Reply {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| panic!("not JSON: {}", self.text()))
    }

    fn cookie(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            if !key.eq_ignore_ascii_case("set-cookie") {
                return None;
            }
            let value = value.trim().strip_prefix(name)?.strip_prefix('=')?;
            Some(value.split(';').next().unwrap_or_default().to_owned())
        })
    }
}

/// A socket to `server` from the loopback address `from`.
pub(crate) async fn connect(from: [u8; 4], server: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(IpAddr::from(from), 0))?;
    socket.connect(server).await
}

/// One HTTP/1.1 exchange on a new connection from `from`.
async fn http(
    from: [u8; 4],
    server: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> std::io::Result<Reply> {
    let mut stream = connect(from, server).await?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {server}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    let mut received = Vec::new();
    timeout(PATIENCE, stream.read_to_end(&mut received))
        .await
        .map_err(|_| std::io::Error::other("no answer in time"))??;
    let split = received
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no head"))?;
    let head = String::from_utf8_lossy(&received[..split]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut body = received[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    Ok(Reply { status, head, body })
}

fn dechunk(mut bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(line_end) = bytes.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(
            String::from_utf8_lossy(&bytes[..line_end])
                .split(';')
                .next()
                .unwrap_or("0")
                .trim(),
            16,
        )
        .unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = line_end + 2;
        out.extend_from_slice(&bytes[start..start + size]);
        bytes = &bytes[start + size + 2..];
    }
    out
}

/// A browser session: the cookie and the CSRF token.
#[derive(Clone, Debug)]
struct Session {
    cookie: String,
    csrf: String,
}

impl Session {
    fn headers(&self) -> Vec<(&'static str, String)> {
        vec![
            ("Cookie", format!("fermata_session={}", self.cookie)),
            ("X-CSRF-Token", self.csrf.clone()),
        ]
    }
}

async fn login(
    from: [u8; 4],
    server: SocketAddr,
    name: &str,
    password: &str,
    device: Option<&str>,
) -> std::io::Result<Reply> {
    let body = serde_json::json!({"name": name, "password": password}).to_string();
    let mut headers = vec![("Content-Type", "application/json".to_owned())];
    if let Some(device) = device {
        headers.push(("Cookie", format!("fermata_device={device}")));
    }
    http(
        from,
        server,
        "POST",
        "/api/v1/session",
        &headers,
        body.as_bytes(),
    )
    .await
}

fn session_of(reply: &Reply) -> Session {
    Session {
        cookie: reply.cookie("fermata_session").expect("a session cookie"),
        csrf: reply.json()["csrf_token"].as_str().unwrap().to_owned(),
    }
}

/// A PNG of `side` × `side` RGB pixels, all black but its first byte (`mark`): tiny on the wire,
/// `3 × side²` bytes decoded.
fn large_png(side: u32, mark: u8) -> Vec<u8> {
    let row = 1 + 3 * side as usize;
    let mut raw = vec![0u8; row * side as usize];
    raw[1] = mark;
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(&raw).unwrap();
    let idat = encoder.finish().unwrap();
    let mut ihdr = side.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&side.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    for (kind, data) in [(b"IHDR", ihdr), (b"IDAT", idat), (b"IEND", Vec::new())] {
        out.extend_from_slice(&u32::try_from(data.len()).unwrap().to_be_bytes());
        let mut crc = flate2::Crc::new();
        crc.update(kind);
        crc.update(&data);
        out.extend_from_slice(kind);
        out.extend_from_slice(&data);
        out.extend_from_slice(&crc.sum().to_be_bytes());
    }
    out
}

/// The server process's memory, in bytes: `VmHWM` (peak) or `VmRSS` (now).
pub(crate) fn memory(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
        * 1024
}

fn p99(samples: &mut [Duration]) -> Duration {
    assert!(!samples.is_empty());
    samples.sort();
    let index = (samples.len() * 99).div_ceil(100).saturating_sub(1);
    samples[index.min(samples.len() - 1)]
}

type Socket = tokio_tungstenite::WebSocketStream<TcpStream>;

/// A WebSocket to the document's room from `from`, as the session's browser opens it; `None`
/// when the server refuses it before or right after the upgrade.
async fn join_room(
    from: [u8; 4],
    server: SocketAddr,
    document: &str,
    session: &Session,
) -> Option<Socket> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
    let stream = connect(from, server).await.ok()?;
    let mut request = format!("ws://{server}/sync/{document}")
        .into_client_request()
        .ok()?;
    request.headers_mut().insert(
        "Cookie",
        format!("fermata_session={}", session.cookie).parse().ok()?,
    );
    let (socket, _) = tokio_tungstenite::client_async(request, stream)
        .await
        .ok()?;
    Some(socket)
}

/// A live editor: a yrs document bound to the room's `source` text.
struct Editor {
    socket: Socket,
    doc: yrs::Doc,
    text: yrs::TextRef,
}

impl Editor {
    async fn open(socket: Socket) -> Self {
        let doc = yrs::Doc::new();
        let text = doc.get_or_insert_text("source");
        let mut editor = Editor { socket, doc, text };
        let vector = editor.doc.transact().state_vector().encode_v1();
        editor
            .socket
            .send(Message::binary(protocol::sync_step1(&vector)))
            .await
            .expect("send the state vector");
        editor
    }

    async fn append(&mut self, line: &str) {
        let update = {
            let mut txn = self.doc.transact_mut();
            let end = self.text.len(&txn);
            self.text.insert(&mut txn, end, line);
            txn.encode_update_v1()
        };
        self.socket
            .send(Message::binary(protocol::update(update)))
            .await
            .expect("send an update");
    }

    /// Reads the room until the text holds `needle`; false when the room closes or goes quiet.
    async fn until(&mut self, needle: &str) -> bool {
        let deadline = Instant::now() + PATIENCE;
        while !self.text.get_string(&self.doc.transact()).contains(needle) {
            let Ok(Some(Ok(message))) = tokio::time::timeout_at(deadline, self.socket.next()).await
            else {
                return false;
            };
            match message {
                Message::Binary(bytes) => match protocol::decode(&bytes) {
                    Ok(ClientMessage::Update(update)) => {
                        let update = yrs::Update::decode_v1(&update).expect("an update");
                        self.doc
                            .transact_mut()
                            .apply_update(update)
                            .expect("it applies");
                    }
                    Ok(ClientMessage::StateVector(vector)) => {
                        let vector = yrs::StateVector::decode_v1(&vector).expect("a vector");
                        let diff = self.doc.transact().encode_diff_v1(&vector);
                        let _ = self
                            .socket
                            .send(Message::binary(protocol::sync_step2(diff)))
                            .await;
                    }
                    _ => {}
                },
                Message::Close(_) => return false,
                _ => {}
            }
        }
        true
    }
}

/// What the ordinary users did: each operation's time, and anything that failed.
#[derive(Default)]
struct Ordinary {
    /// Each kind of operation's times: log in, join the room, an edit until the room sends it
    /// back committed, read the document.
    latencies: Mutex<std::collections::BTreeMap<&'static str, Vec<Duration>>>,
    failures: Mutex<Vec<String>>,
    rounds: AtomicUsize,
}

impl Ordinary {
    fn timed(&self, kind: &'static str, started: Instant) {
        self.latencies
            .lock()
            .unwrap()
            .entry(kind)
            .or_default()
            .push(started.elapsed());
    }

    fn failed(&self, what: String) {
        self.failures.lock().unwrap().push(what);
    }
}

/// One ordinary user: log in, join the room, write a line, wait for the other's line of the
/// same round, read the document back; [`ROUNDS`] times, a little apart, through the attack.
async fn ordinary_user(
    name: &'static str,
    other: &'static str,
    from: [u8; 4],
    server: SocketAddr,
    document: String,
    record: Arc<Ordinary>,
) {
    for round in 0..ROUNDS {
        tokio::time::sleep(ROUND_PAUSE).await;
        let started = Instant::now();
        let session = match login(from, server, name, USER_PASSWORD, None).await {
            Ok(reply) if reply.status == 200 => session_of(&reply),
            other => {
                record.failed(format!("{name} round {round}: login {other:?}"));
                return;
            }
        };
        record.timed("log in", started);

        let started = Instant::now();
        let Some(socket) = join_room(from, server, &document, &session).await else {
            record.failed(format!("{name} round {round}: the room refused"));
            return;
        };
        let mut editor = Editor::open(socket).await;
        record.timed("join the room", started);
        // The room sends the editor's own line back once it is committed: sent and saved.
        let started = Instant::now();
        let line = format!("{name} {round}\n");
        editor.append(&line).await;
        let mut echo = Editor::open(
            join_room(from, server, &document, &session)
                .await
                .expect("a second view joins"),
        )
        .await;
        if !echo.until(&line).await {
            record.failed(format!(
                "{name} round {round}: its own line was never saved"
            ));
            return;
        }
        record.timed("edit live", started);
        let _ = echo.socket.close(None).await;
        if !editor.until(&format!("{other} {round}\n")).await {
            record.failed(format!("{name} round {round}: {other}'s line never came"));
            return;
        }
        let _ = editor.socket.close(None).await;

        let started = Instant::now();
        match http(
            from,
            server,
            "GET",
            &format!("/api/v1/documents/{document}"),
            &session.headers(),
            b"",
        )
        .await
        {
            Ok(reply)
                if reply.status == 200
                    && reply.json()["text"]
                        .as_str()
                        .is_some_and(|text| text.contains(&format!("{name} {round}\n"))) =>
            {
                record.timed("read", started);
            }
            other => {
                record.failed(format!("{name} round {round}: read {other:?}"));
                return;
            }
        }
        record.rounds.fetch_add(1, Ordering::Relaxed);
    }
}

/// Keeps `PER_PEER` sockets open from the attacking address until `done`: idle ones, ones that
/// send half a request head, and one upload that declares 30 MB and stops after 1 KB. Returns
/// how many sockets it opened, and the answers the stalled uploads got.
async fn hold_sockets(
    server: SocketAddr,
    document: String,
    token: String,
    done: Arc<AtomicBool>,
) -> (usize, Vec<String>) {
    let opened = Arc::new(AtomicUsize::new(0));
    let stalled = Arc::new(Mutex::new(Vec::new()));
    let mut holders = JoinSet::new();
    for slot in 0..PER_PEER {
        let done = Arc::clone(&done);
        let opened = Arc::clone(&opened);
        let stalled = Arc::clone(&stalled);
        let document = document.clone();
        let token = token.clone();
        holders.spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let Ok(mut stream) = connect(ATTACKER, server).await else {
                    continue;
                };
                opened.fetch_add(1, Ordering::Relaxed);
                match slot % 3 {
                    0 => {}
                    1 => {
                        let _ = stream
                            .write_all(b"GET /api/v1/me HTTP/1.1\r\nHost: loc")
                            .await;
                    }
                    _ if slot == 2 => {
                        let head = format!(
                            "POST /api/v1/documents/{document}/images HTTP/1.1\r\nHost: {server}\r\n\
                             Authorization: Bearer {token}\r\nContent-Length: 31457280\r\n\r\n"
                        );
                        let _ = stream.write_all(head.as_bytes()).await;
                        let _ = stream.write_all(&[0u8; 1024]).await;
                    }
                    _ => {}
                }
                // The server closes it; a socket it left open past the bound fails the test.
                let mut answer = Vec::new();
                let bound = Duration::from_secs(HEADER_READ_TIMEOUT_SECS * 2 + 8);
                match timeout(bound, stream.read_to_end(&mut answer)).await {
                    Ok(_) => {
                        if slot == 2 {
                            stalled
                                .lock()
                                .unwrap()
                                .push(String::from_utf8_lossy(&answer).into_owned());
                        }
                    }
                    Err(_) => panic!("an attacking socket was held open past {bound:?}"),
                }
            }
        });
    }
    while holders.join_next().await.is_some() {}
    let stalled = stalled.lock().unwrap().clone();
    (opened.load(Ordering::Relaxed), stalled)
}

/// `/healthz` every 50 ms until `done`, first from the attacking address (closed at once while
/// it holds its cap, answered when one of its sockets was just closed), then from the monitor's:
/// the monitor's answers' times.
async fn probe_health(server: SocketAddr, done: Arc<AtomicBool>) -> Vec<Duration> {
    let mut times = Vec::new();
    while !done.load(Ordering::Relaxed) {
        if let Ok(reply) = http(ATTACKER, server, "GET", "/healthz", &[], b"").await {
            assert_eq!(reply.status, 200, "{}", reply.head);
        }
        let started = Instant::now();
        let reply = http(MONITOR, server, "GET", "/healthz", &[], b"")
            .await
            .expect("/healthz answers");
        assert_eq!(
            (reply.status, reply.text().as_str()),
            (200, "ok\n"),
            "{}",
            reply.head
        );
        times.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    times
}

/// Uploads images just under the pixel budget, eight at once, then asks for thumbnails of each
/// at four widths at once: every answer is a success or a safe refusal.
async fn image_storm(
    server: SocketAddr,
    document: String,
    token: String,
    images: Vec<Vec<u8>>,
) -> Vec<u16> {
    let bearer = vec![("Authorization", format!("Bearer {token}"))];
    let mut statuses = Vec::new();
    let mut uploads = JoinSet::new();
    for round in 0..2 {
        for image in &images {
            let image = image.clone();
            let bearer = bearer.clone();
            let path = format!("/api/v1/documents/{document}/images");
            let from = [127, 0, 0, 100 + round];
            uploads.spawn(async move {
                http(from, server, "POST", &path, &bearer, &image)
                    .await
                    .map(|reply| (reply.status, reply.json()))
            });
        }
    }
    let mut addresses = Vec::new();
    while let Some(done) = uploads.join_next().await {
        let (status, body) = done.unwrap().expect("an upload answers");
        statuses.push(status);
        if let Some(address) = body["image"]["address"]
            .as_str()
            .or_else(|| body["address"].as_str())
        {
            addresses.push(address.to_owned());
        }
    }
    addresses.sort();
    addresses.dedup();
    let mut thumbnails = JoinSet::new();
    for address in &addresses {
        for width in [360, 720, 960, 1024] {
            let bearer = bearer.clone();
            let path = format!("{address}?w={width}");
            thumbnails.spawn(async move {
                http([127, 0, 0, 102], server, "GET", &path, &bearer, b"")
                    .await
                    .map(|reply| reply.status)
            });
        }
    }
    while let Some(done) = thumbnails.join_next().await {
        statuses.push(done.unwrap().expect("a thumbnail answers"));
    }
    statuses
}

/// Grabs as many of the room's slots as the server allows one member, then floods presence from
/// one of them for a few seconds: the slots it got and how long it flooded.
async fn room_attack(server: SocketAddr, document: String, session: Session) -> (usize, Duration) {
    let mut sockets = Vec::new();
    for _ in 0..MEMBER_CONNECTIONS + 4 {
        let Some(mut socket) = join_room(MALLORY, server, &document, &session).await else {
            continue;
        };
        // A refused join is closed right after the upgrade.
        let refused = matches!(
            timeout(Duration::from_millis(500), socket.next()).await,
            Ok(Some(Ok(Message::Close(_))) | None)
        );
        if !refused {
            sockets.push(socket);
        }
    }
    let held = sockets.len();
    assert!(held > 0, "mallory never got into the room");
    let started = Instant::now();
    let state = format!("{{\"cursor\":\"{}\"}}", "x".repeat(1000));
    let mut clock = 1;
    while started.elapsed() < Duration::from_secs(4) {
        let message = presence(4242, clock, &state);
        clock += 1;
        if sockets[0].send(Message::binary(message)).await.is_err() {
            break;
        }
    }
    let flooded = started.elapsed();
    for mut socket in sockets {
        let _ = socket.close(None).await;
    }
    (held, flooded)
}

fn presence(client: u64, clock: u32, state: &str) -> Vec<u8> {
    use yrs::sync::awareness::{AwarenessUpdate, AwarenessUpdateEntry};
    let update = AwarenessUpdate {
        clients: [(
            yrs::block::ClientID::new(client),
            AwarenessUpdateEntry {
                clock,
                json: state.into(),
            },
        )]
        .into(),
    };
    yrs::sync::Message::Awareness(update).encode_v1()
}

/// Counts the presence messages a quiet member of the room hears while the flood runs.
async fn presence_heard(socket: Socket, done: Arc<AtomicBool>) -> u64 {
    let mut editor = Editor::open(socket).await;
    let mut heard = 0;
    while !done.load(Ordering::Relaxed) {
        match timeout(Duration::from_millis(200), editor.socket.next()).await {
            Ok(Some(Ok(Message::Binary(bytes)))) => {
                if let Ok(ClientMessage::Awareness { clients, .. }) = protocol::decode(&bytes)
                    && clients.iter().any(|(client, _)| *client == 4242)
                {
                    heard += 1;
                }
            }
            Ok(Some(Ok(_))) | Err(_) => {}
            Ok(_) => break,
        }
    }
    heard
}

/// Wrong passwords for the administrator from several addresses, a few at a time.
async fn password_storm(server: SocketAddr) -> Vec<u16> {
    let mut statuses = Vec::new();
    for wave in 0..6u8 {
        let mut attempts = JoinSet::new();
        for n in 0..8u8 {
            let from = [127, 0, 1, wave * 8 + n + 1];
            attempts.spawn(async move {
                login(from, server, "admin", "not the password at all", None)
                    .await
                    .map(|reply| reply.status)
            });
        }
        while let Some(done) = attempts.join_next().await {
            statuses.push(done.unwrap().expect("a login answers"));
        }
    }
    statuses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_clients_leave_ordinary_users_served_within_bounds() {
    let target = Target::sqlite();
    let mut config = std::fs::read_to_string(target.config()).unwrap();
    config.push_str(CONFIG);
    std::fs::write(target.config(), config).unwrap();
    for (name, role, password) in [
        ("admin", Some("system_admin"), ADMIN_PASSWORD),
        ("alice", None, USER_PASSWORD),
        ("bob", None, USER_PASSWORD),
        ("mallory", None, USER_PASSWORD),
    ] {
        let mut words = vec!["user", "add", name, "--password-stdin"];
        if let Some(role) = role {
            words.extend(["--role", role]);
        }
        let (status, out, err) = target.run_with_input(&words, &format!("{password}\n"));
        assert!(status.success(), "{out}{err}");
    }
    let (status, token, err) = target.run_with_input(&["token", "create", "--user", "mallory"], "");
    assert!(status.success(), "{err}");
    let token = token.trim().to_owned();

    let server: Fermata = target.serve(&[]);
    server.wait_ready().await;
    let address = server.address().await;
    let pid = server.pid();

    // Before the attack: the administrator's browser logs in (and keeps its known-device mark),
    // alice makes the document, mallory signs in.
    let admin = login(ADMIN, address, "admin", ADMIN_PASSWORD, None)
        .await
        .unwrap();
    assert_eq!(admin.status, 200, "{}", admin.text());
    let device = admin.cookie("fermata_device").expect("a known-device mark");
    let alice = session_of(
        &login(ALICE, address, "alice", USER_PASSWORD, None)
            .await
            .unwrap(),
    );
    let mut headers = alice.headers();
    headers.push(("Content-Type", "application/json".to_owned()));
    let created = http(
        ALICE,
        address,
        "POST",
        "/api/v1/documents",
        &headers,
        br#"{"repository": "alice/app", "title": "Under load"}"#,
    )
    .await
    .unwrap();
    assert_eq!(created.status, 201, "{}", created.text());
    let document = created.json()["id"].as_str().unwrap().to_owned();
    // Alice's repository: Bob edits with her, and Mallory is a member too, as the attacks on a
    // room and its images need.
    for member in ["bob", "mallory"] {
        let added = http(
            ALICE,
            address,
            "PUT",
            &format!("/api/v1/repositories/alice/app/members/{member}"),
            &headers,
            br#"{"role": "editor"}"#,
        )
        .await
        .unwrap();
        assert!(
            added.status == 200 || added.status == 201,
            "{}",
            added.text()
        );
    }
    let mallory = session_of(
        &login(MALLORY, address, "mallory", USER_PASSWORD, None)
            .await
            .unwrap(),
    );
    // 3200² × 3 bytes = 29.3 MiB of pixels each, under the 32 MiB budget, in a few KiB.
    let images = tokio::task::spawn_blocking(|| {
        (1..=4u8)
            .map(|mark| large_png(3200, mark))
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    let idle = memory(pid, "VmRSS:");

    let record = Arc::new(Ordinary::default());
    let users = [
        tokio::spawn(ordinary_user(
            "alice",
            "bob",
            ALICE,
            address,
            document.clone(),
            Arc::clone(&record),
        )),
        tokio::spawn(ordinary_user(
            "bob",
            "alice",
            BOB,
            address,
            document.clone(),
            Arc::clone(&record),
        )),
    ];
    let listener = join_room([127, 0, 0, 5], address, &document, &alice)
        .await
        .expect("a listener joins");
    let listening = Arc::new(AtomicBool::new(false));
    let heard = tokio::spawn(presence_heard(listener, Arc::clone(&listening)));
    let attack_over = Arc::new(AtomicBool::new(false));
    let sockets = tokio::spawn(hold_sockets(
        address,
        document.clone(),
        token.clone(),
        Arc::clone(&attack_over),
    ));
    let probes = tokio::spawn(probe_health(address, Arc::clone(&attack_over)));
    let started = Instant::now();
    let (images, room, storm) = tokio::join!(
        image_storm(address, document.clone(), token.clone(), images),
        room_attack(address, document.clone(), mallory.clone()),
        password_storm(address),
    );
    let remaining = ATTACK.saturating_sub(started.elapsed());
    tokio::time::sleep(remaining).await;
    attack_over.store(true, Ordering::Relaxed);
    listening.store(true, Ordering::Relaxed);
    let attack = started.elapsed();
    for user in users {
        timeout(PATIENCE * 2, user)
            .await
            .expect("the ordinary users finished")
            .unwrap();
    }
    let (opened, stalled) = timeout(PATIENCE, sockets).await.unwrap().unwrap();
    let mut health = timeout(PATIENCE, probes).await.unwrap().unwrap();
    let presence_relayed = timeout(PATIENCE, heard).await.unwrap().unwrap();

    // After the storms, the administrator's own browser still logs in.
    let again = login(ADMIN, address, "admin", ADMIN_PASSWORD, Some(&device))
        .await
        .unwrap();
    let peak = memory(pid, "VmHWM:");
    let metrics = http([127, 0, 0, 1], address, "GET", "/metrics", &[], b"")
        .await
        .unwrap()
        .text();

    let failures = record.failures.lock().unwrap().clone();
    let by_kind = record.latencies.lock().unwrap().clone();
    let mut latencies: Vec<Duration> = by_kind.values().flatten().copied().collect();
    let kinds: Vec<String> = by_kind
        .into_iter()
        .map(|(kind, mut times)| format!("{kind} {} ms", p99(&mut times).as_millis()))
        .collect();
    let rounds = record.rounds.load(Ordering::Relaxed);
    // The bound docs/limits.md gives: the idle process, the upload buffer, the decodes at once
    // (each under three pixel budgets), the thumbnail cache, the password checks at once, and
    // 64 KiB per connection held.
    let connections = (PER_PEER + 64) as u64;
    let bound = idle
        + UPLOAD_BUFFER_BYTES
        + DECODE_CONCURRENCY * 3 * MAX_DECODE_BYTES
        + THUMBNAIL_CACHE_BYTES
        + PASSWORD_CONCURRENCY * PASSWORD_CHECK_BYTES
        + connections * 64 * 1024;
    let health_p99 = p99(&mut health);
    let users_p99 = p99(&mut latencies);
    let mut out = std::io::stderr();
    let _ = writeln!(
        out,
        "hostile load over {:.1} s: peak memory {} MiB (idle {} MiB, bound {} MiB); \
         /healthz p99 {} ms over {} probes; ordinary users p99 {} ms over {} operations in {} rounds \
         ({}); \
         images {:?}; logins {:?}; room slots taken {} of {}, presence heard {} in {:.1} s of flood; \
         sockets opened {}",
        attack.as_secs_f64(),
        peak / MIB,
        idle / MIB,
        bound / MIB,
        health_p99.as_millis(),
        health.len(),
        users_p99.as_millis(),
        latencies.len(),
        rounds,
        kinds.join(", "),
        images,
        storm,
        room.0,
        MEMBER_CONNECTIONS,
        presence_relayed,
        room.1.as_secs_f64(),
        opened,
    );

    assert!(failures.is_empty(), "ordinary users failed: {failures:?}");
    assert_eq!(rounds, 2 * ROUNDS, "the ordinary users' rounds");
    assert!(
        peak < bound,
        "peak memory {} MiB over the bound {} MiB",
        peak / MIB,
        bound / MIB
    );
    assert!(
        health_p99 < Duration::from_millis(100),
        "/healthz p99 {health_p99:?}"
    );
    assert!(
        images
            .iter()
            .all(|status| matches!(status, 200 | 201 | 503)),
        "{images:?}"
    );
    assert!(images.contains(&201), "no upload got through: {images:?}");
    assert!(
        storm.iter().all(|status| matches!(status, 401 | 429 | 503)),
        "{storm:?}"
    );
    assert!(
        storm.contains(&429),
        "the storm was never held back: {storm:?}"
    );
    assert_eq!(again.status, 200, "{}", again.text());
    assert_eq!(room.0, MEMBER_CONNECTIONS, "a member held more of the room");
    let allowed = PRESENCE_BURST + PRESENCE_PER_SECOND * (room.1.as_secs() + 1);
    assert!(
        presence_relayed <= allowed,
        "{presence_relayed} presence messages relayed, at most {allowed} allowed"
    );
    assert!(
        opened > PER_PEER,
        "the held sockets were never closed and reopened"
    );
    // A stalled upload on a socket within the cap is cut short with 408; one over the cap (its
    // address's sockets were all taken when it opened) is closed at once, unanswered.
    assert!(
        stalled
            .iter()
            .all(|answer| answer.starts_with("HTTP/1.1 408") || answer.is_empty()),
        "{stalled:?}"
    );
    assert!(
        stalled
            .iter()
            .any(|answer| answer.starts_with("HTTP/1.1 408")),
        "no stalled upload was cut short: {stalled:?}"
    );
    for line in [
        "fermata_login_failures_total",
        "fermata_login_locks_total",
        "fermata_limited_total{limit=\"login\"}",
        "fermata_limited_total{limit=\"peer_connections\"}",
        "fermata_limited_total{limit=\"body_rate\"}",
    ] {
        assert!(metrics.contains(line), "{line} missing from {metrics}");
    }
    // Counted, not only there: every limit's series starts at zero.
    for limit in ["peer_connections", "body_rate"] {
        let zero = format!("fermata_limited_total{{limit=\"{limit}\"}} 0\n");
        assert!(
            !metrics.contains(&zero),
            "{limit} counted nothing: {metrics}"
        );
    }
}
