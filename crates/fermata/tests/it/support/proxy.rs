//! A TCP proxy between the process under test and its database, which the test can cut off
//! from the database as a network partition does, and join again.
//!
//! A partition closes nothing: the sockets stay open at both ends, what was sent waits unacked
//! (TCP retransmits it), and a new connection gets no further than the network lets it. So
//! `blackhole()` stops forwarding in both directions while keeping every socket open, holding
//! any bytes a pump had read, and new connections are accepted but not connected onwards;
//! `heal()` forwards what was held, connects what waited, and carries on, as retransmission
//! delivers what was sent during a partition once it heals. The proxy runs on a runtime of its
//! own, so a test that blocks its own threads (a synchronous HTTP request, `pg_ctl`) never
//! stalls it.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// A running proxy; dropping it ends every connection through it.
pub struct Proxy {
    address: SocketAddr,
    /// True while the partition lasts; every pump and waiting connection watches it.
    blackholed: Arc<watch::Sender<bool>>,
    /// The proxy's own runtime (an `Option` so `drop` can shut it down without blocking).
    runtime: Option<tokio::runtime::Runtime>,
}

impl Proxy {
    /// A proxy on a free loopback port to `upstream`.
    pub fn start(upstream: SocketAddr) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("fault-proxy")
            .enable_all()
            .build()
            .unwrap();
        // Bound here, without the runtime: the caller may be inside another one.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap();
        let blackholed = Arc::new(watch::Sender::new(false));
        let watch = blackholed.subscribe();
        runtime.spawn(async move {
            let listener = TcpListener::from_std(listener).unwrap();
            accept(listener, upstream, watch).await;
        });
        Proxy {
            address,
            blackholed,
            runtime: Some(runtime),
        }
    }

    /// Where clients connect to reach the upstream.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Stops forwarding anything, in either direction, on old and new connections alike.
    pub fn blackhole(&self) {
        self.blackholed.send_replace(true);
    }

    /// Forwards again, what was held first.
    pub fn heal(&self) {
        self.blackholed.send_replace(false);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Accepts connections for ever; each one's tasks live in the set, ended with the runtime.
async fn accept(listener: TcpListener, upstream: SocketAddr, watch: watch::Receiver<bool>) {
    let mut connections = JoinSet::new();
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        connections.spawn(connect(client, upstream, watch.clone()));
        // Reap the connections that ended, so the set does not grow with every one.
        while connections.try_join_next().is_some() {}
    }
}

/// Connects one accepted client onwards once no partition is in the way, then pumps both ways.
async fn connect(client: TcpStream, upstream: SocketAddr, mut watch: watch::Receiver<bool>) {
    open(&mut watch).await;
    let Ok(server) = TcpStream::connect(upstream).await else {
        // The database is down: the client sees its connection closed, as a refusal would.
        return;
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let upwards = tokio::spawn(pump(client_read, server_write, watch.clone()));
    let downwards = tokio::spawn(pump(server_read, client_write, watch));
    let _ = tokio::join!(upwards, downwards);
}

/// Copies one direction, holding each chunk read while the partition lasts; at the end of the
/// stream it shuts the other side's writing half, as a FIN would.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut watch: watch::Receiver<bool>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        open(&mut watch).await;
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        open(&mut watch).await;
        if to.write_all(&buffer[..read]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// Returns once no partition is in the way.
async fn open(watch: &mut watch::Receiver<bool>) {
    // The sender lives as long as the proxy, whose runtime ends these tasks first.
    let _ = watch.wait_for(|blackholed| !blackholed).await;
}
