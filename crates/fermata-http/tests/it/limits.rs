//! The server's limits over a real loopback socket, on a real SQLite database: an idle socket, a
//! request head that stops half-way and a body that stops early are all closed within their
//! bounds; a socket over its peer's connection cap is closed at once, while another peer is
//! served.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use fermata_collab::WriterFence;
use fermata_http::ServerLimits;
use fermata_metrics::Metrics;
use fermata_store::StoreOptions;
use fermata_store_sql::testing::ScratchDatabase;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::oneshot;

use crate::support;

/// Short enough for a test, with the bounds each check allows around them.
fn limits(header_read_timeout: Duration) -> ServerLimits {
    ServerLimits {
        header_read_timeout,
        keep_alive_timeout: header_read_timeout * 3 / 4,
        body_min_rate: 64 * 1024,
        body_grace: Duration::from_millis(500),
        max_connections: Some(256),
        max_connections_per_peer: 8,
        ..ServerLimits::default()
    }
}

/// A server on a loopback port: its address and what stops it.
struct Server {
    address: SocketAddr,
    metrics: Arc<Metrics>,
    _stop: oneshot::Sender<()>,
    _storage: fermata_store_sql::testing::ScratchStorage,
}

async fn server(limits: ServerLimits) -> Server {
    let storage = ScratchDatabase::sqlite()
        .open(StoreOptions::default())
        .await;
    let state = support::state(&storage, WriterFence::default());
    let metrics = Arc::clone(&state.metrics);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(fermata_http::serve(
        listener,
        fermata_http::router(state),
        limits,
        Arc::clone(&metrics),
        async move {
            let _ = stopped.await;
        },
    ));
    Server {
        address,
        metrics,
        _stop: stop,
        _storage: storage,
    }
}

/// A connection from the loopback address `from` (any of 127.0.0.0/8 reaches the server).
async fn connect(server: &Server, from: [u8; 4]) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(IpAddr::from(from), 0)).unwrap();
    socket.connect(server.address).await.unwrap()
}

/// Reads until the server closes the socket, within `bound`; what it sent.
async fn closed_within(stream: &mut TcpStream, bound: Duration) -> String {
    let mut received = Vec::new();
    tokio::time::timeout(bound, stream.read_to_end(&mut received))
        .await
        .expect("the server kept the socket open past its bound")
        .unwrap();
    String::from_utf8_lossy(&received).into_owned()
}

async fn get(stream: &mut TcpStream, path: &str) -> String {
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    closed_within(stream, Duration::from_secs(10)).await
}

#[tokio::test]
async fn idle_half_sent_and_stalled_requests_are_closed_within_their_bounds() {
    let server = server(limits(Duration::from_millis(800))).await;
    let bound = Duration::from_secs(5);

    let mut idle = connect(&server, [127, 0, 0, 1]).await;
    assert_eq!(closed_within(&mut idle, bound).await, "");

    let mut half = connect(&server, [127, 0, 0, 1]).await;
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: loc")
        .await
        .unwrap();
    assert_eq!(closed_within(&mut half, bound).await, "");

    let mut stalled = connect(&server, [127, 0, 0, 1]).await;
    stalled
        .write_all(
            b"POST /api/v1/session HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 524288\r\n\r\n",
        )
        .await
        .unwrap();
    stalled.write_all(&[b' '; 1024]).await.unwrap();
    let answer = closed_within(&mut stalled, bound).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body_too_slow"), "{answer}");

    // A kept-alive connection is closed once idle.
    let mut kept = connect(&server, [127, 0, 0, 1]).await;
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let answer = closed_within(&mut kept, bound).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    let metrics = server.metrics.render();
    for line in [
        "fermata_limited_total{limit=\"header_timeout\"}",
        "fermata_limited_total{limit=\"body_rate\"} 1",
    ] {
        assert!(metrics.contains(line), "missing {line} in {metrics}");
    }
    // Counted, not only there: every limit's series starts at zero.
    assert!(
        !metrics.contains("fermata_limited_total{limit=\"header_timeout\"} 0\n"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_peer_over_its_cap_is_closed_at_once_and_others_are_served() {
    // Held sockets stay open for the whole test.
    let limits = limits(Duration::from_secs(60));
    let per_peer = limits.max_connections_per_peer;
    let server = server(limits).await;
    let attacker = [127, 0, 0, 66];
    let mut held = Vec::new();
    for _ in 0..per_peer {
        held.push(connect(&server, attacker).await);
    }
    // Held sockets are served (a request on one is answered).
    let mut first = held.pop().unwrap();
    let answer = get(&mut first, "/healthz").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    held.push(connect(&server, attacker).await);

    // Over the cap, even `/healthz` gets no answer: the socket is closed as it is accepted.
    for path in ["/healthz", "/api/v1/me", "/healthz", "/api/v1/me"] {
        let mut over = connect(&server, attacker).await;
        let mut answer = Vec::new();
        let _ = over
            .write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
            .await;
        let _ = over.read_to_end(&mut answer).await;
        assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    }

    let mut other = connect(&server, [127, 0, 0, 2]).await;
    let answer = get(&mut other, "/api/v1/me").await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    // At least the four; a reopened held socket may have raced its predecessor's slot.
    let metrics = server.metrics.render();
    let refused = metrics
        .lines()
        .find_map(|line| line.strip_prefix("fermata_limited_total{limit=\"peer_connections\"} "))
        .and_then(|count| count.trim().parse::<u64>().ok());
    assert!(refused.is_some_and(|count| count >= 4), "{metrics}");
    drop(held);
}

/// `POST /api/v1/session` as `name` with a wrong password, from `from`, naming `forwarded` in
/// `X-Forwarded-For`: the status.
async fn wrong_login(server: &Server, from: [u8; 4], name: &str, forwarded: &str) -> String {
    let body = format!(r#"{{"name":"{name}","password":"not the password"}}"#);
    let mut stream = connect(server, from).await;
    stream
        .write_all(
            format!(
                "POST /api/v1/session HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
                 X-Forwarded-For: {forwarded}\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let answer = closed_within(&mut stream, Duration::from_secs(30)).await;
    answer
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn behind_a_trusted_proxy_each_client_is_throttled_by_its_own_address() {
    let limits = ServerLimits {
        trusted_proxies: fermata_http::client_address::TrustedProxies::new(vec![
            "127.0.0.1".parse().unwrap(),
        ]),
        ..limits(Duration::from_secs(60))
    };
    let server = server(limits).await;
    let proxy = [127, 0, 0, 1];
    // One client behind the proxy fails with twenty names: its address is locked.
    for n in 0..fermata_accounts::throttle::FREE_PER_ADDRESS {
        let status = wrong_login(&server, proxy, &format!("name-{n}"), "203.0.113.1").await;
        assert_eq!(status, "401");
    }
    assert_eq!(
        wrong_login(&server, proxy, "fresh-name", "203.0.113.1").await,
        "429"
    );
    // Another client behind the same proxy is not.
    assert_eq!(
        wrong_login(&server, proxy, "fresh-name", "203.0.113.2").await,
        "401"
    );
    // A client that is not a proxy cannot pass for another by naming it.
    let stranger = [127, 0, 0, 9];
    assert_eq!(
        wrong_login(&server, stranger, "other-name", "203.0.113.1").await,
        "401",
        "its own address is what counts"
    );
}
