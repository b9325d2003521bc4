//! What one client may hold of the server: connections, and time. The accept loop of
//! [`crate::serve`] lives here.
//!
//! - **Connections** are capped per peer address (an IPv6 peer by its /64) and in total, the total
//!   below the process's open-file limit, and the total is shared so that one address cannot
//!   fill it ([`Gate`] has the rule). A socket its address may not open is closed as soon as it
//!   is accepted, so a reopening flood holds nothing. When only the small health reserve is left,
//!   a connection from an address holding few is served one request there, and only `/healthz`
//!   and `/readyz` are answered (anything else gets 503 with `Retry-After`), so a probe still gets
//!   its answer from a server whose ordinary slots are all taken. Past the reserve, the socket is
//!   closed.
//! - **Time.** The whole request head must arrive within `header_read_timeout` of the connection
//!   opening or of the previous answer (hyper enforces it, and it also bounds an idle socket that
//!   never sends a byte). A connection with no request in flight and no byte moving either way
//!   for `keep_alive_timeout` is closed; one that a graceful close cannot end within another
//!   `header_read_timeout` (a client that stopped reading) is cut. A request body must keep
//!   arriving at `body_min_rate` bytes a second once `body_grace` has passed; a body that falls
//!   behind ends its request with 408 and its connection.
//!
//! A connection's slot lives as long as its socket, WebSockets included: the slot travels with
//! the socket through an upgrade.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use fermata_store::ErrorChain;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};
use tower::ServiceExt as _;

use crate::client_address::{ClientAddress, TrustedProxies};
use crate::error::ApiError;
use fermata_metrics::{Limit, Metrics};

/// The limits of the HTTP server, each a setting of `[http]` (see `docs/limits.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLimits {
    /// The request head (request line and headers) must arrive within this long of the
    /// connection opening or of the previous answer.
    pub header_read_timeout: Duration,
    /// A connection with no request in flight and no byte moving closes after this long.
    pub keep_alive_timeout: Duration,
    /// Once `body_grace` has passed, a request body must have arrived at this many bytes a second
    /// on average since its request began.
    pub body_min_rate: u64,
    /// How long a request body may take before its rate counts.
    pub body_grace: Duration,
    /// The most connections open at once; `None` takes the open-file limit less
    /// [`FILES_KEPT_FREE`]. A larger value is lowered to that.
    pub max_connections: Option<usize>,
    /// The most connections one peer address holds at once. A configured proxy is not capped
    /// per address (every client behind it shares its address); the total cap still holds.
    pub max_connections_per_peer: usize,
    /// The proxies whose `X-Forwarded-For` names the client.
    pub trusted_proxies: TrustedProxies,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            header_read_timeout: Duration::from_secs(10),
            keep_alive_timeout: Duration::from_secs(5),
            body_min_rate: 4 * 1024,
            body_grace: Duration::from_secs(10),
            max_connections: None,
            max_connections_per_peer: 256,
            trusted_proxies: TrustedProxies::default(),
        }
    }
}

/// Open files kept free of connections: the database pool, the data folder, logs.
pub const FILES_KEPT_FREE: usize = 256;
/// Connections kept for health probes beyond the caps, within the total.
pub const HEALTH_RESERVE: usize = 32;
/// How long a connection in the health reserve may take to send its request head.
const RESERVE_HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// The fewest connections the total cap allows, whatever the open-file limit.
const MIN_CONNECTIONS: usize = 64;

impl ServerLimits {
    /// The total cap for an open-file limit of `file_limit`: the configured one, never above the
    /// limit less [`FILES_KEPT_FREE`].
    pub fn total_cap(&self, file_limit: Option<u64>) -> usize {
        let below_files = file_limit
            .and_then(|limit| usize::try_from(limit).ok())
            .map_or(usize::MAX, |limit| {
                limit.saturating_sub(FILES_KEPT_FREE).max(MIN_CONNECTIONS)
            });
        match self.max_connections {
            Some(configured) => configured.min(below_files),
            None if below_files == usize::MAX => 4096,
            None => below_files,
        }
    }
}

/// The process's soft limit of open files, when the system says.
fn open_file_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// How many connections the kernel completes and holds for the accept loop. A listener's usual
/// 128 overflows when a crowd connects at once (clients reconnecting after a restart or a network
/// blip): each handshake dropped there waits a second for the client to retry it. The kernel caps
/// the figure at `net.core.somaxconn`.
const ACCEPT_BACKLOG: u32 = 4096;

/// A listening socket on `address`, with room for a crowd's handshakes ([`ACCEPT_BACKLOG`]).
pub fn listen(address: SocketAddr) -> io::Result<TcpListener> {
    let socket = if address.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // As `TcpListener::bind` does: a restarted server may listen again at once.
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(ACCEPT_BACKLOG)
}

/// Serves `router` on `listener` under `limits` until `shutdown` completes, then stops
/// accepting, lets every connection finish its request in flight, and returns. Dropping the
/// future before then ends every connection and the request it has in flight.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ServerLimits,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let total = limits.total_cap(open_file_limit());
    if limits
        .max_connections
        .is_some_and(|configured| configured > total)
    {
        tracing::warn!(
            configured = limits.max_connections.unwrap_or_default(),
            used = total,
            "http.max_connections is over the open-file limit; lowered"
        );
    }
    let gate = Arc::new(Gate::new(
        total,
        limits.max_connections_per_peer,
        limits.trusted_proxies.clone(),
    ));
    tracing::info!(
        max_connections = total,
        max_connections_per_peer = gate.per_peer,
        header_read_timeout = ?limits.header_read_timeout,
        keep_alive_timeout = ?limits.keep_alive_timeout,
        "connection limits"
    );
    metrics.http_connection_limits(total, gate.per_peer);
    let router = router.layer(axum::middleware::from_fn_with_state(
        BodyRate {
            min_rate: limits.body_min_rate,
            grace: limits.body_grace,
            metrics: Arc::clone(&metrics),
        },
        slow_bodies,
    ));
    let shared = Arc::new(Shared {
        router,
        limits,
        metrics,
    });
    // Every connection holds a receiver: a send asks them all to finish. Their tasks are kept
    // in one set, so a stop that stops waiting for this future (its drain ran out of time) ends
    // the requests still in flight with it.
    let (stop_tx, stop_rx) = watch::channel(());
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        while connections.try_join_next().is_some() {}
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of files or memory for a moment: what is open still closes, so try
                    // again shortly rather than spin.
                    tracing::warn!(error = %ErrorChain(&error), "could not accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let slot = match gate.admit(peer.ip()) {
            Ok(slot) => slot,
            Err(refused) => {
                // Closed without a word and without waiting: whatever the client sent is not
                // read, and its slot is free again at once.
                shared.metrics.limited(match refused {
                    Refused::PeerCap => Limit::PeerConnections,
                    Refused::Full => Limit::Connections,
                });
                drop(stream);
                continue;
            }
        };
        // Small writes go out at once: a live document's acknowledgements and broadcasts are a
        // few bytes each, and Nagle's algorithm would hold one back until the client's delayed
        // acknowledgement of the previous (up to 40 ms here). A socket that refuses the option
        // still serves.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(error = %ErrorChain(&error), "could not turn off Nagle's algorithm on a connection");
        }
        if slot.reserve {
            shared.metrics.limited(Limit::Connections);
        }
        connections.spawn(connection(
            stream,
            peer,
            slot,
            Arc::clone(&shared),
            stop_rx.clone(),
        ));
    }
    drop(listener);
    drop(stop_rx);
    // Tell every connection to finish, then wait until each has.
    stop_tx.send_replace(());
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// What every connection task shares.
struct Shared {
    router: Router,
    limits: ServerLimits,
    metrics: Arc<Metrics>,
}

/// Serves one connection until it ends, is idle too long, or the server stops.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    slot: Slot,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<()>,
) {
    let reserve = slot.reserve;
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Metered {
        stream,
        activity: Arc::clone(&activity),
        _slot: slot,
        _counted: shared.metrics.http_connection(),
    });
    let service = ConnectionService {
        shared: Arc::clone(&shared),
        peer,
        activity: Arc::clone(&activity),
        reserve,
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(if reserve {
            RESERVE_HEADER_TIMEOUT.min(shared.limits.header_read_timeout)
        } else {
            shared.limits.header_read_timeout
        })
        .keep_alive(!reserve);
    let conn = builder.serve_connection(io, service).with_upgrades();
    let mut conn = std::pin::pin!(conn);
    let keep_alive = shared.limits.keep_alive_timeout;
    let grace = shared.limits.header_read_timeout;
    let mut closing: Option<Pin<Box<Sleep>>> = None;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(error) = result
                    && error.is_timeout()
                {
                    shared.metrics.limited(Limit::HeaderTimeout);
                }
                break;
            }
            () = activity.idle_for(keep_alive), if closing.is_none() => {
                conn.as_mut().graceful_shutdown();
                closing = Some(Box::pin(tokio::time::sleep(grace)));
            }
            _ = stop.changed(), if closing.is_none() => {
                conn.as_mut().graceful_shutdown();
                closing = Some(Box::pin(tokio::time::sleep(grace)));
            }
            () = async { closing.as_mut().expect("guarded").await }, if closing.is_some() => {
                // The client neither sent nor read anything since it was asked to finish.
                break;
            }
        }
    }
}

/// The per-connection service: marks the request in flight, tells the handlers who is calling,
/// and in the health reserve answers only the health routes.
#[derive(Clone)]
struct ConnectionService {
    shared: Arc<Shared>,
    peer: SocketAddr,
    activity: Arc<Activity>,
    reserve: bool,
}

impl hyper::service::Service<hyper::Request<Incoming>> for ConnectionService {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, request: hyper::Request<Incoming>) -> Self::Future {
        let in_flight = InFlight::begin(Arc::clone(&self.activity));
        let mut request = request.map(Body::new);
        let client = self
            .shared
            .limits
            .trusted_proxies
            .client(self.peer.ip(), request.headers());
        request.extensions_mut().insert(ConnectInfo(self.peer));
        request.extensions_mut().insert(ClientAddress(client));
        if self.reserve && !matches!(request.uri().path(), "/healthz" | "/readyz") {
            drop(in_flight);
            return Box::pin(async { Ok(busy()) });
        }
        let router = self.shared.router.clone();
        Box::pin(async move {
            let response = router.oneshot(request).await;
            drop(in_flight);
            response
        })
    }
}

/// The answer to a request over a connection cap.
fn busy() -> Response {
    let mut error = ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "too_many_connections",
        "this address has as many connections open as the server allows; close some and retry",
    );
    error.retry_after = Some(1);
    let mut response = error.into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// When a connection last moved a byte or finished a request, and how many requests it has in
/// flight: what the keep-alive timeout reads.
struct Activity {
    opened: Instant,
    /// Milliseconds after `opened` of the last activity.
    last: AtomicU64,
    in_flight: AtomicUsize,
}

impl Activity {
    fn new() -> Self {
        Activity {
            opened: Instant::now(),
            last: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        }
    }

    fn touch(&self) {
        let millis = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(millis, Ordering::Relaxed);
    }

    /// Completes once nothing has been in flight or moved for `limit`.
    async fn idle_for(&self, limit: Duration) {
        loop {
            let last = self.opened + Duration::from_millis(self.last.load(Ordering::Relaxed));
            let deadline = last + limit;
            if Instant::now() >= deadline && self.in_flight.load(Ordering::Relaxed) == 0 {
                return;
            }
            // Looked at again when the deadline passes: activity since moves it on.
            tokio::time::sleep_until(deadline.max(Instant::now() + limit / 4)).await;
        }
    }
}

/// One request in flight; counted out when its answer is ready or the request is dropped.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn begin(activity: Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        activity.touch();
        InFlight(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The socket, recording activity as bytes move, and holding the connection's slot (and its
/// place in `fermata_http_connections`) for as long as the socket lives (through a WebSocket
/// upgrade too).
struct Metered {
    stream: TcpStream,
    activity: Arc<Activity>,
    _slot: Slot,
    _counted: fermata_metrics::Held,
}

impl AsyncRead for Metered {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for Metered {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(written)) if written > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(written)) if written > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Counts connections in total and per peer, and hands out slots, so that no address can fill
/// the total:
///
/// - an address holds at most `max_connections_per_peer` connections, and never more than half
///   of the ordinary slots (the total less the health reserve), whatever that setting says;
/// - the last quarter of the ordinary slots, and the health reserve after them, take only
///   connections from addresses holding fewer than [`FEW_CONNECTIONS`], so people who hold a
///   few still get in while the big holders have taken everything else.
///
/// A configured proxy counts as holding none: every client behind it shares its address.
struct Gate {
    counts: Mutex<Counts>,
    /// Past this many open connections, only addresses holding few are let in.
    shared: usize,
    /// Ordinary connections stop here; the health reserve fills the rest up to the total.
    ordinary: usize,
    total: usize,
    /// What one address may hold: the setting, at most half of `ordinary`.
    per_peer: usize,
    proxies: TrustedProxies,
}

/// An address holding fewer connections than this counts as holding few: a browser's six
/// connections to a host and a socket per open document.
const FEW_CONNECTIONS: usize = 8;

/// Why a socket was closed as soon as it was accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    /// Its address holds as many connections as one address may.
    PeerCap,
    /// The server has no slot left that its address may take.
    Full,
}

#[derive(Default)]
struct Counts {
    open: usize,
    by_peer: HashMap<IpAddr, usize>,
}

/// A connection's place under the caps, given back when dropped.
struct Slot {
    gate: Arc<Gate>,
    /// The key it counts under per peer (none for a configured proxy).
    peer: Option<IpAddr>,
    /// Served from the health reserve: one request, health routes only.
    reserve: bool,
}

impl Gate {
    fn new(total: usize, per_peer: usize, proxies: TrustedProxies) -> Self {
        let ordinary = total - HEALTH_RESERVE.min(total / 4);
        Gate {
            counts: Mutex::new(Counts::default()),
            shared: ordinary - ordinary / 4,
            ordinary,
            total,
            per_peer: per_peer.min(ordinary / 2).max(1),
            proxies,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        // Only counters live here: after a panic elsewhere they are still what they were.
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for a connection from `peer`, ordinary or in the health reserve, or why it gets
    /// none.
    fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Slot, Refused> {
        let key = (!self.proxies.contains(peer)).then(|| peer_key(peer));
        let mut counts = self.lock();
        let held = key.map_or(0, |key| counts.by_peer.get(&key).copied().unwrap_or(0));
        if held >= self.per_peer {
            return Err(Refused::PeerCap);
        }
        let holds_few = held < FEW_CONNECTIONS;
        if counts.open >= self.total || (counts.open >= self.shared && !holds_few) {
            return Err(Refused::Full);
        }
        let reserve = counts.open >= self.ordinary;
        counts.open += 1;
        if let Some(key) = key {
            *counts.by_peer.entry(key).or_default() += 1;
        }
        Ok(Slot {
            gate: Arc::clone(self),
            peer: key,
            reserve,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.gate.lock();
        counts.open -= 1;
        if let Some(key) = self.peer
            && let Some(count) = counts.by_peer.get_mut(&key)
        {
            *count -= 1;
            if *count == 0 {
                counts.by_peer.remove(&key);
            }
        }
    }
}

/// The key a peer is capped by: an IPv6 address by its /64, which one host usually holds whole.
fn peer_key(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                IpAddr::V6(segments.into())
            }
        },
        v4 @ IpAddr::V4(_) => v4,
    }
}

/// The body rate every request is held to.
#[derive(Clone)]
struct BodyRate {
    min_rate: u64,
    grace: Duration,
    metrics: Arc<Metrics>,
}

/// Holds each request body to the minimum rate; a request whose body fell behind is answered
/// 408 and its connection closed, whatever its handler made of the broken body.
async fn slow_bodies(State(rate): State<BodyRate>, request: Request, next: Next) -> Response {
    let fell_behind = Arc::new(AtomicBool::new(false));
    let request = request.map(|body| {
        Body::new(MinRate {
            inner: body,
            min_rate: rate.min_rate.max(1),
            grace: rate.grace,
            started: Instant::now(),
            received: 0,
            deadline: Box::pin(tokio::time::sleep(rate.grace)),
            fell_behind: Arc::clone(&fell_behind),
        })
    });
    let response = next.run(request).await;
    if !fell_behind.load(Ordering::Relaxed) {
        return response;
    }
    rate.metrics.limited(Limit::BodyRate);
    let mut response = ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        "body_too_slow",
        format!(
            "the request body arrived slower than {} bytes a second",
            rate.min_rate
        ),
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A request body that fails once it falls behind its minimum rate.
struct MinRate {
    inner: Body,
    min_rate: u64,
    grace: Duration,
    started: Instant,
    received: u64,
    /// When the bytes received so far stop being enough: `started + grace + received / rate`.
    deadline: Pin<Box<Sleep>>,
    fell_behind: Arc<AtomicBool>,
}

/// The error a body that fell behind its minimum rate ends with.
#[derive(Debug, thiserror::Error)]
#[error("the request body arrived too slowly")]
struct BodyTooSlow;

impl http_body::Body for MinRate {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received += data.len() as u64;
                    let earned =
                        Duration::from_secs_f64(this.received as f64 / this.min_rate as f64);
                    let deadline = this.started + this.grace + earned;
                    this.deadline.as_mut().reset(deadline);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                if this.deadline.as_mut().poll(cx).is_ready() {
                    this.fell_behind.store(true, Ordering::Relaxed);
                    return Poll::Ready(Some(Err(axum::Error::new(BodyTooSlow))));
                }
                Poll::Pending
            }
            other @ Poll::Ready(_) => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_stays_below_the_file_limit() {
        let limits = ServerLimits::default();
        assert_eq!(limits.total_cap(Some(20_000)), 20_000 - FILES_KEPT_FREE);
        assert_eq!(limits.total_cap(Some(100)), MIN_CONNECTIONS);
        let configured = ServerLimits {
            max_connections: Some(1_000),
            ..ServerLimits::default()
        };
        assert_eq!(configured.total_cap(Some(20_000)), 1_000);
        assert_eq!(configured.total_cap(Some(1_024)), 1_024 - FILES_KEPT_FREE);
    }

    #[test]
    fn a_peer_over_its_cap_is_refused_at_once_and_others_are_served() {
        let gate = Arc::new(Gate::new(400, 2, TrustedProxies::default()));
        let peer: IpAddr = "192.0.2.9".parse().unwrap();
        let first = gate.admit(peer).unwrap();
        let second = gate.admit(peer).unwrap();
        assert!(!first.reserve && !second.reserve);
        assert_eq!(gate.admit(peer).err(), Some(Refused::PeerCap));
        let other: IpAddr = "192.0.2.10".parse().unwrap();
        assert!(
            !gate.admit(other).unwrap().reserve,
            "another peer is served"
        );
        drop(first);
        assert!(!gate.admit(peer).unwrap().reserve, "a freed slot is reused");
        drop(second);
    }

    #[test]
    fn one_address_cannot_fill_the_total() {
        // 64 in all: 16 in the health reserve, 48 ordinary, the last 12 of them for addresses
        // holding few; one address holds at most 24.
        let gate = Arc::new(Gate::new(64, 256, TrustedProxies::default()));
        let flood: IpAddr = "192.0.2.1".parse().unwrap();
        let held: Vec<Slot> = std::iter::from_fn(|| gate.admit(flood).ok()).collect();
        assert_eq!(held.len(), 24);
        assert_eq!(gate.admit(flood).err(), Some(Refused::PeerCap));
        // A second big holder gets the rest of the open slots...
        let second: IpAddr = "192.0.2.2".parse().unwrap();
        let more: Vec<Slot> = std::iter::from_fn(|| gate.admit(second).ok()).collect();
        assert_eq!(more.len(), 12);
        assert_eq!(gate.admit(second).err(), Some(Refused::Full));
        // ...and addresses holding few still get the kept quarter, then the health reserve.
        let small: Vec<Slot> = (0..12)
            .map(|n| gate.admit(IpAddr::from([198, 51, 100, n])).unwrap())
            .collect();
        assert!(small.iter().all(|slot| !slot.reserve));
        let probe = gate.admit("203.0.113.7".parse().unwrap()).unwrap();
        assert!(probe.reserve);
    }

    #[test]
    fn the_total_is_never_passed() {
        let gate = Arc::new(Gate::new(
            MIN_CONNECTIONS,
            usize::MAX,
            TrustedProxies::default(),
        ));
        let slots: Vec<Slot> = (0..MIN_CONNECTIONS)
            .map(|n| {
                gate.admit(IpAddr::from([10, 0, 0, u8::try_from(n % 250).unwrap()]))
                    .unwrap()
            })
            .collect();
        assert_eq!(
            slots.iter().filter(|slot| slot.reserve).count(),
            MIN_CONNECTIONS / 4
        );
        assert_eq!(
            gate.admit("10.9.9.9".parse().unwrap()).err(),
            Some(Refused::Full)
        );
    }

    #[test]
    fn ipv6_peers_count_by_their_prefix() {
        assert_eq!(
            peer_key("2001:db8::1".parse().unwrap()),
            peer_key("2001:db8::ffff".parse().unwrap())
        );
        assert_eq!(
            peer_key("::ffff:127.0.0.1".parse().unwrap()),
            "127.0.0.1".parse::<IpAddr>().unwrap()
        );
    }
}
