//! Hostile sockets against the real `fermata serve` on SQLite, on loopback: WebSocket frames
//! that declare more than the server accepts, a client's close frame, and a reopening flood of
//! connections from one address. The bounds they check are in `docs/limits.md`; the figures
//! are printed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio::time::{Instant, timeout};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;

use crate::hostile_load::{connect, memory};
use crate::support::{self, Target};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// The sockets that each declare a frame of [`DECLARED`] bytes and send [`SENT`] of it, all one
/// member's in one room, which the configuration lets it fill.
const FRAME_SOCKETS: usize = 64;
const FRAME_CONFIG: &str =
    "\n[documents]\nmax_clients_per_room = 64\nmax_connections_per_member = 64\n";
const DECLARED: u64 = 16 * MIB;
const SENT: usize = 2 * 1024 * 1024;
/// What `docs/limits.md` allows each open connection, besides the message it is receiving.
const PER_CONNECTION: u64 = 64 * KIB;
/// The process's own churn between two readings (tasks, buffers of the requests around them).
const NOISE: u64 = 8 * MIB;
/// The longest any one exchange may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

/// A user with an API token, a document, and the server: `(server, address, token, document)`.
async fn server_with_document(target: &Target) -> (support::Fermata, SocketAddr, String, String) {
    support::add_user(target, "ada", false);
    let (status, token, err) = target.run_with_input(&["token", "create", "--user", "ada"], "");
    assert!(status.success(), "{err}");
    let token = token.trim().to_owned();
    let server = target.serve(&[]);
    server.wait_ready().await;
    let address = server.address().await;
    let bearer = format!("Bearer {token}");
    let created = support::create_document(
        address,
        &[("Authorization", &bearer)],
        "ada/notes",
        "Frames",
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let document = created.json()["id"].as_str().unwrap().to_owned();
    (server, address, token, document)
}

/// A WebSocket upgrade to the document's room by hand, so the test may send frames no WebSocket
/// library would: the stream after the `101` head.
async fn upgrade(address: SocketAddr, token: &str, document: &str) -> TcpStream {
    let mut stream = connect([127, 0, 0, 1], address).await.unwrap();
    let head = format!(
        "GET /sync/{document}?token={token} HTTP/1.1\r\nHost: {address}\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut received = Vec::new();
    while !received.ends_with(b"\r\n\r\n") {
        let byte = timeout(PATIENCE, stream.read_u8()).await.unwrap().unwrap();
        received.push(byte);
    }
    let head = String::from_utf8_lossy(&received);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    stream
}

/// A masked binary frame's header declaring `length` bytes of payload.
fn frame_header(length: u64) -> Vec<u8> {
    let mut header = vec![0x82, 0x80 | 127];
    header.extend_from_slice(&length.to_be_bytes());
    header.extend_from_slice(&[1, 2, 3, 4]);
    header
}

/// Reads frames until the server's close frame: its code, or `None` when the stream ended
/// without one.
async fn close_code(stream: &mut TcpStream) -> Option<u16> {
    loop {
        let mut start = [0u8; 2];
        stream.read_exact(&mut start).await.ok()?;
        let length = match start[1] & 0x7f {
            126 => u64::from(stream.read_u16().await.ok()?),
            127 => stream.read_u64().await.ok()?,
            short => u64::from(short),
        };
        let mut payload = vec![0u8; usize::try_from(length).ok()?];
        stream.read_exact(&mut payload).await.ok()?;
        if start[0] & 0x0f == 0x8 {
            return Some(u16::from_be_bytes([*payload.first()?, *payload.get(1)?]));
        }
    }
}

/// Sockets declaring 16 MiB frames: each is refused with 1009 from its header, the server's
/// resident memory stays within what `docs/limits.md` allows an open connection while they are
/// open, and within the same noise of where it began once they close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_declaring_more_than_the_limit_are_refused_from_their_header() {
    let target = Target::sqlite();
    support::configure(&target, FRAME_CONFIG);
    let (server, address, token, document) = server_with_document(&target).await;
    let pid = server.pid();
    let before = memory(pid, "VmRSS:");

    let mut sockets = JoinSet::new();
    for _ in 0..FRAME_SOCKETS {
        let token = token.clone();
        let document = document.clone();
        sockets.spawn(async move {
            let mut stream = upgrade(address, &token, &document).await;
            let mut frame = frame_header(DECLARED);
            frame.resize(frame.len() + SENT, 0x55);
            // The server stops reading at the header, so the rest may not be taken.
            let _ = timeout(PATIENCE, stream.write_all(&frame)).await;
            let code = timeout(PATIENCE, close_code(&mut stream)).await.unwrap();
            (stream, code)
        });
    }
    let mut open = Vec::new();
    while let Some(joined) = sockets.join_next().await {
        let (stream, code) = joined.unwrap();
        assert_eq!(
            code,
            Some(1009),
            "a frame over the limit is closed with 1009"
        );
        open.push(stream);
    }
    let during = memory(pid, "VmRSS:");
    drop(open);
    // Memory given back is seen a moment later: poll, with a bound.
    let mut after = memory(pid, "VmRSS:");
    let deadline = Instant::now() + PATIENCE;
    while after > before + NOISE && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        after = memory(pid, "VmRSS:");
    }
    let metrics = support::get(address, "/metrics").unwrap().1;
    eprintln!(
        "{FRAME_SOCKETS} sockets declaring {} MiB frames, {} MiB sent each: RSS before {} KiB, \
         while open {} KiB, after closing {} KiB",
        DECLARED / MIB,
        SENT as u64 / MIB,
        before / KIB,
        during / KIB,
        after / KIB
    );
    let bound = before + FRAME_SOCKETS as u64 * PER_CONNECTION + NOISE;
    assert!(during <= bound, "RSS {during} while open, over {bound}");
    assert!(
        after <= before + NOISE,
        "RSS {after} after closing, from {before}"
    );
    assert!(
        metrics.contains(&format!(
            "fermata_document_updates_refused_total{{reason=\"message_too_large\"}} {FRAME_SOCKETS}"
        )),
        "{metrics}"
    );
}

/// A client's close frame comes back with its own code, as the protocol asks.
#[tokio::test]
async fn a_clients_close_frame_is_echoed() {
    let target = Target::sqlite();
    let (_server, address, token, document) = server_with_document(&target).await;
    let request = format!("ws://{address}/sync/{document}?token={token}")
        .into_client_request()
        .unwrap();
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    socket
        .send(Message::Close(Some(CloseFrame {
            code: 4000.into(),
            reason: "done here".into(),
        })))
        .await
        .unwrap();
    let echo = timeout(PATIENCE, async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Close(frame))) => return frame,
                Some(Ok(_)) => {}
                other => panic!("the stream ended without a close frame: {other:?}"),
            }
        }
    })
    .await
    .unwrap()
    .expect("a close frame with a code");
    assert_eq!(u16::from(echo.code), 4000);
}

/// The flood: as many sockets at once, from one address, each reopened as soon as the server
/// closes it, until [`FLOOD`] has passed or [`FLOOD_CONNECTIONS`] were opened.
const FLOOD_SOCKETS: usize = 128;
const FLOOD: Duration = Duration::from_secs(6);
const FLOOD_CONNECTIONS: usize = 20_000;
const FLOODER: [u8; 4] = [127, 0, 0, 66];
/// The cap under test: 16 in the health reserve, 48 ordinary, at most 24 for one address.
const FLOOD_CONFIG: &str = "\n[http]\nmax_connections = 64\nheader_read_timeout = \"2s\"\n";

/// A reopening flood from one address, while another address asks for `/healthz` and
/// `/api/v1/me` throughout: every one of those is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopening_flood_from_one_address_leaves_others_served() {
    let target = Target::sqlite();
    support::configure(&target, FLOOD_CONFIG);
    let (_server, address, token, _document) = server_with_document(&target).await;

    let opened = Arc::new(AtomicUsize::new(0));
    let closed_unanswered = Arc::new(AtomicUsize::new(0));
    let ends = Instant::now() + FLOOD;
    let mut flood = JoinSet::new();
    for _ in 0..FLOOD_SOCKETS {
        let opened = Arc::clone(&opened);
        let closed_unanswered = Arc::clone(&closed_unanswered);
        flood.spawn(async move {
            while Instant::now() < ends && opened.load(Ordering::Relaxed) < FLOOD_CONNECTIONS {
                let Ok(mut stream) = connect(FLOODER, address).await else {
                    continue;
                };
                opened.fetch_add(1, Ordering::Relaxed);
                // Held idle until the server closes it: at once over the cap, after the head
                // timeout within it.
                let mut answer = Vec::new();
                let read = timeout(PATIENCE, stream.read_to_end(&mut answer)).await;
                assert!(read.is_ok(), "a flooding socket was held open");
                if answer.is_empty() {
                    closed_unanswered.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }

    let bearer = format!("Bearer {token}");
    let probes = tokio::spawn(async move {
        let mut answered = 0;
        while Instant::now() < ends {
            for path in ["/healthz", "/api/v1/me"] {
                let bearer = bearer.clone();
                let answer = tokio::task::spawn_blocking(move || {
                    support::try_request(address, "GET", path, &[("Authorization", &bearer)], None)
                })
                .await
                .unwrap()
                .unwrap_or_else(|error| panic!("{path} during the flood: {error}"));
                assert_eq!(answer.status, 200, "{path}: {}", answer.body);
                answered += 1;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        answered
    });
    let answered = timeout(FLOOD + PATIENCE, probes).await.unwrap().unwrap();
    while let Some(joined) = timeout(PATIENCE, flood.join_next()).await.unwrap() {
        joined.unwrap();
    }
    let metrics = support::get(address, "/metrics").unwrap().1;
    let refused = metrics
        .lines()
        .find_map(|line| line.strip_prefix("fermata_limited_total{limit=\"peer_connections\"} "))
        .and_then(|count| count.trim().parse::<u64>().ok())
        .unwrap_or(0);
    eprintln!(
        "flood from one address: {} connections opened, {} closed without an answer, {refused} \
         refused at the address's cap; another address: {answered} of {answered} answered",
        opened.load(Ordering::Relaxed),
        closed_unanswered.load(Ordering::Relaxed),
    );
    assert!(answered > 0);
    assert!(refused > 0, "the flood never reached its cap: {metrics}");
}
