//! Forwarding between the members of a cluster: a request for a document that another member
//! writes is sent on to that member, and its answer relayed.
//!
//! Each shard of documents is written by one member, the holder of its writer lease
//! ([`fermata_collab::Route`] says which, and answers `Here` at once, without a read, in a process
//! that serves alone). Once the authorization layer admitted the caller, `/sync` and the JSON API
//! routes of one document ask where it is written:
//!
//! - here: the request is served as in a process that serves alone;
//! - by another member: a live connection is upgraded and joined to a WebSocket opened to the
//!   same path and query at that member, and the two are relayed frame by frame (binary, text,
//!   ping and pong, and the close with its code and reason) under the same size limit as
//!   `/sync`; a request of the documents API is sent whole (its body streamed, so the member
//!   applies the route's body limit as it reads) and its status, headers and body relayed. The
//!   forwarded request carries the caller's own credentials and the headers the edge checks, so
//!   the member authenticates and authorizes the caller itself, exactly as if it had connected
//!   directly: revocation, presence and the viewers' read-only rule are the writer's to apply;
//! - by no member at the moment (a hand-over is under way): a live connection is closed at once
//!   with 1013 (try again later), a request answered 503 `handing_over` with `Retry-After`.
//!
//! A forwarded request carries [`FORWARDED`], and one that carries it is never forwarded again:
//! when two members' views of the cluster disagree for a moment, the request is answered as if
//! no member wrote the document rather than sent back and forth. A member that cannot be reached
//! (refused, or silent past a bound) gets the same answers, 1013 or 503 `unavailable`, with a
//! safe message; the cause is logged with its chain and counted. Members reach each other over
//! plain HTTP at the addresses they announce; no answer names an address.

use std::net::SocketAddr;
use std::sync::LazyLock;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, FromRequestParts, MatchedPath, Request, State};
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use fermata_collab::{Route, close};
use fermata_metrics::{ForwardKind, ForwardOutcome};
use fermata_store::{ChannelId, ErrorChain};
use futures::{SinkExt as _, StreamExt as _};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame as UpstreamClose;
use tokio_tungstenite::tungstenite::{self, Message as UpstreamMessage};

use crate::HttpState;
use crate::error::ApiError;
use crate::policy::{DocumentGrant, QueryToken};
use crate::sync::{
    CLOSE_ECHO, READ_BUFFER, SEND_PATIENCE, close_with, refuse_too_large, send, too_large,
};

/// The header a forwarded request carries; a request that carries it is not forwarded again.
pub(crate) const FORWARDED: &str = "x-fermata-forwarded";

/// The header that names the clients a request passed through proxies for.
const FORWARDED_FOR: &str = "x-forwarded-for";

/// How long a TCP connection to a member may take to open.
const CONNECT_PATIENCE: Duration = Duration::from_secs(5);

/// How long a member may take to answer a live connection's upgrade, its connection included.
const UPGRADE_PATIENCE: Duration = Duration::from_secs(10);

/// How long a member may take to send a forwarded request's answer head (the body then streams
/// for as long as it takes).
const ANSWER_PATIENCE: Duration = Duration::from_secs(30);

/// What a live connection is told when no member writes its document at the moment.
const HANDED_OVER: &str = "the document is being handed over; reconnect shortly";

/// The request headers a live connection is forwarded with: what the member authenticates the
/// caller by and the edge checks, nothing else.
const SYNC_HEADERS: [HeaderName; 6] = [
    header::COOKIE,
    header::AUTHORIZATION,
    header::ORIGIN,
    header::HOST,
    header::USER_AGENT,
    header::SEC_WEBSOCKET_PROTOCOL,
];

/// Headers that describe one connection rather than the request: never forwarded either way.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// The one HTTP client of the process, for the documents API's forwarded requests; its
/// connections to each member are kept and reused.
static CLIENT: LazyLock<Client<HttpConnector, Body>> = LazyLock::new(|| {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(CONNECT_PATIENCE));
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new()).build(connector)
});

/// Where a request for a document this process does not write goes.
#[derive(Debug)]
pub(crate) enum Elsewhere {
    /// To the member serving at this base URL.
    Member(String),
    /// Nowhere: no member writes the document at the moment ([`ForwardOutcome::Unplaced`]), or
    /// the request was forwarded to this process already ([`ForwardOutcome::AlreadyForwarded`]).
    Nowhere(ForwardOutcome),
}

/// Where the request carrying `headers` for document `id` goes: `None` when it is served here.
pub(crate) async fn elsewhere(
    state: &HttpState,
    id: &ChannelId,
    headers: &HeaderMap,
) -> Result<Option<Elsewhere>, ApiError> {
    Ok(elsewhere_by(state.documents.route(id).await?, headers))
}

/// Where the request carrying `headers` goes when its document is written at `route`: `None`
/// when it is served here.
pub(crate) fn elsewhere_by(route: Route, headers: &HeaderMap) -> Option<Elsewhere> {
    match route {
        Route::Here => None,
        Route::Member(_) if headers.contains_key(FORWARDED) => {
            Some(Elsewhere::Nowhere(ForwardOutcome::AlreadyForwarded))
        }
        Route::Member(base) => Some(Elsewhere::Member(base)),
        Route::Unplaced => Some(Elsewhere::Nowhere(ForwardOutcome::Unplaced)),
    }
}

/// What a request is sent on with: its path and query as the client sent them (the `token`
/// parameter, which the authorization layer takes out, put back), its headers, and the address
/// of the peer it came from.
#[derive(Debug)]
pub(crate) struct Onward {
    path_and_query: String,
    headers: HeaderMap,
    peer: Option<SocketAddr>,
}

impl Onward {
    fn of(parts: &Parts) -> Self {
        let mut path_and_query = parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned());
        if let Some(QueryToken(token)) = parts.extensions.get::<QueryToken>() {
            let pair = serde_urlencoded::to_string([("token", token.expose())]).unwrap_or_default();
            path_and_query.push(if parts.uri.query().is_some() {
                '&'
            } else {
                '?'
            });
            path_and_query.push_str(&pair);
        }
        Onward {
            path_and_query,
            headers: parts.headers.clone(),
            peer: parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|ConnectInfo(peer)| *peer),
        }
    }

    /// The headers sent on: those `keep` allows, with [`FORWARDED`] set and the peer appended
    /// to `X-Forwarded-For` (a member that lists this one in `trusted_proxies` then sees the
    /// client's address, not this member's).
    fn headers(&self, keep: impl Fn(&HeaderName) -> bool) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in &self.headers {
            if keep(name) && name != FORWARDED && name != FORWARDED_FOR {
                headers.append(name.clone(), value.clone());
            }
        }
        headers.insert(FORWARDED, HeaderValue::from_static("1"));
        let earlier = self
            .headers
            .get_all(FORWARDED_FOR)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .collect::<Vec<_>>()
            .join(", ");
        let chain = match (earlier.is_empty(), self.peer) {
            (_, None) => earlier,
            (true, Some(peer)) => peer.ip().to_string(),
            (false, Some(peer)) => format!("{earlier}, {}", peer.ip()),
        };
        if let Ok(value) = HeaderValue::from_str(&chain)
            && !chain.is_empty()
        {
            headers.insert(FORWARDED_FOR, value);
        }
        headers
    }
}

impl Onward {
    /// The request's own headers.
    pub(crate) fn request_headers(&self) -> &HeaderMap {
        &self.headers
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Onward {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Onward::of(parts))
    }
}

/// Whether `name` is a hop-by-hop header, or one the `Connection` header of `headers` names.
fn hop_by_hop(name: &HeaderName, headers: &HeaderMap) -> bool {
    HOP_BY_HOP.contains(name)
        || headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .any(|named| named.trim().eq_ignore_ascii_case(name.as_str()))
}

/// A member's address as it is reached: the host and port of its `http` base URL (anything else
/// in it, such as credentials or a path, is not used, and never shown).
#[derive(Debug)]
struct Member {
    authority: String,
}

impl Member {
    fn of(base: &str) -> Result<Self, Unreached> {
        let uri: Uri = base.parse().map_err(|_| Unreached::Address)?;
        match (uri.scheme_str(), uri.host()) {
            (Some("http"), Some(host)) => Ok(Member {
                authority: format!("{host}:{}", uri.port_u16().unwrap_or(80)),
            }),
            _ => Err(Unreached::Address),
        }
    }
}

/// Why a member did not take a forwarded request. The message names no address, so no
/// credential in one reaches the log.
#[derive(Debug, thiserror::Error)]
enum Unreached {
    #[error("the member's announced address is not an http URL with a host")]
    Address,
    #[error("the member did not answer within {0:?}")]
    Late(Duration),
    #[error("the member could not be connected to")]
    Connect(#[source] std::io::Error),
    #[error("the member refused the upgrade with status {0}")]
    Refused(StatusCode),
    #[error("the WebSocket handshake with the member failed")]
    Handshake(#[source] tungstenite::Error),
    #[error("the request to the member failed")]
    Request(#[source] hyper_util::client::legacy::Error),
}

impl Unreached {
    fn outcome(&self) -> ForwardOutcome {
        match self {
            Unreached::Refused(_) => ForwardOutcome::Refused,
            _ => ForwardOutcome::Unreachable,
        }
    }
}

/// The `Retry-After` of a refusal: about how long a planned hand-over takes.
fn try_again(state: &HttpState, code: &'static str, message: &str) -> ApiError {
    let mut answer = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code, message);
    answer.retry_after = Some(state.readiness.retry_after_seconds());
    answer
}

/// Serves a live connection to a document written elsewhere: relayed to the member that writes
/// it, or closed with 1013.
pub(crate) async fn sync(
    state: HttpState,
    upgrade: WebSocketUpgrade,
    onward: Onward,
    document: ChannelId,
    elsewhere: Elsewhere,
) -> Response {
    let max = state.documents.rooms().settings().max_message_bytes;
    let upgrade = upgrade
        .max_frame_size(max)
        .max_message_size(max)
        .read_buffer_size(READ_BUFFER);
    let base = match elsewhere {
        Elsewhere::Member(base) => base,
        Elsewhere::Nowhere(outcome) => {
            state.metrics.forwarded(ForwardKind::Sync, outcome);
            return closed_at_once(upgrade, HANDED_OVER);
        }
    };
    let started = Instant::now();
    match open_upstream(&base, &onward, max).await {
        Ok((upstream, protocol)) => {
            state
                .metrics
                .forward_reached(ForwardKind::Sync, started.elapsed());
            state
                .metrics
                .forwarded(ForwardKind::Sync, ForwardOutcome::Forwarded);
            let upgrade = match protocol {
                Some(protocol) => upgrade.protocols([protocol]),
                None => upgrade,
            };
            upgrade.on_upgrade(move |socket| relay(socket, upstream, state))
        }
        Err(error) => {
            let outcome = error.outcome();
            if outcome == ForwardOutcome::Refused {
                state
                    .metrics
                    .forward_reached(ForwardKind::Sync, started.elapsed());
            }
            state.metrics.forwarded(ForwardKind::Sync, outcome);
            tracing::warn!(%document, error = %ErrorChain(&error), "a live connection could not be forwarded to the member that writes its document");
            let reason = match outcome {
                ForwardOutcome::Refused => {
                    "the document's server refused the connection; reconnect"
                }
                _ => "the document's server cannot be reached just now; reconnect shortly",
            };
            closed_at_once(upgrade, reason)
        }
    }
}

/// Takes the upgrade and closes the connection at once with 1013 and `reason`.
fn closed_at_once(upgrade: WebSocketUpgrade, reason: &'static str) -> Response {
    upgrade.on_upgrade(move |mut socket| async move {
        close_with(&mut socket, close::TRY_AGAIN_LATER, reason.to_owned()).await;
        let _ = tokio::time::timeout(CLOSE_ECHO, socket.recv()).await;
    })
}

/// Opens the WebSocket to the member at `base`: the socket, and the subprotocol it chose.
async fn open_upstream(
    base: &str,
    onward: &Onward,
    max: usize,
) -> Result<(WebSocketStream<TcpStream>, Option<String>), Unreached> {
    let member = Member::of(base)?;
    let uri: Uri = format!("ws://{}{}", member.authority, onward.path_and_query)
        .parse()
        .map_err(|_| Unreached::Address)?;
    let mut request = uri.into_client_request().map_err(Unreached::Handshake)?;
    request
        .headers_mut()
        .extend(onward.headers(|name| SYNC_HEADERS.contains(name)));
    let config = WebSocketConfig::default()
        .max_frame_size(Some(max))
        .max_message_size(Some(max))
        .read_buffer_size(READ_BUFFER);
    let handshake = async {
        let stream = TcpStream::connect(&member.authority)
            .await
            .map_err(Unreached::Connect)?;
        stream.set_nodelay(true).map_err(Unreached::Connect)?;
        tokio_tungstenite::client_async_with_config(request, stream, Some(config))
            .await
            .map_err(|error| match error {
                tungstenite::Error::Http(response) => Unreached::Refused(response.status()),
                other => Unreached::Handshake(other),
            })
    };
    let (socket, response) = tokio::time::timeout(UPGRADE_PATIENCE, handshake)
        .await
        .map_err(|_| Unreached::Late(UPGRADE_PATIENCE))??;
    let protocol = response
        .headers()
        .get(header::SEC_WEBSOCKET_PROTOCOL)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    Ok((socket, protocol))
}

/// Relays messages between the client and the member until either side closes: each close is
/// passed on with its code and reason, and the end of either connection ends the other.
async fn relay(mut client: WebSocket, mut upstream: WebSocketStream<TcpStream>, state: HttpState) {
    loop {
        tokio::select! {
            incoming = client.recv() => match incoming {
                Some(Ok(message @ Message::Close(_))) => {
                    let _ = tokio::time::timeout(SEND_PATIENCE, upstream.send(to_upstream(message))).await;
                    // The client's echo goes out on the next read; the member's answer is awaited
                    // so its side ends cleanly too.
                    let _ = tokio::time::timeout(CLOSE_ECHO, client.recv()).await;
                    let _ = tokio::time::timeout(CLOSE_ECHO, upstream.next()).await;
                    return;
                }
                Some(Ok(message)) => {
                    let sent = tokio::time::timeout(SEND_PATIENCE, upstream.send(to_upstream(message))).await;
                    if !matches!(sent, Ok(Ok(()))) {
                        close_with(&mut client, close::TRY_AGAIN_LATER, "the connection to the document's server was lost; reconnect".to_owned()).await;
                        return;
                    }
                }
                Some(Err(error)) => {
                    let _ = tokio::time::timeout(CLOSE_ECHO, upstream.close(None)).await;
                    if too_large(error) {
                        refuse_too_large(&mut client, &state.metrics).await;
                    }
                    return;
                }
                None => {
                    let _ = tokio::time::timeout(CLOSE_ECHO, upstream.close(None)).await;
                    return;
                }
            },
            outgoing = upstream.next() => match outgoing {
                Some(Ok(UpstreamMessage::Close(frame))) => {
                    let frame = frame.map(|frame| axum::extract::ws::CloseFrame {
                        code: frame.code.into(),
                        reason: frame.reason.as_str().into(),
                    });
                    send(&mut client, Message::Close(frame)).await;
                    // The codec queued the echo of the member's close; flushing sends it.
                    let _ = tokio::time::timeout(CLOSE_ECHO, upstream.flush()).await;
                    let _ = tokio::time::timeout(CLOSE_ECHO, client.recv()).await;
                    return;
                }
                Some(Ok(message)) => {
                    if let Some(message) = to_client(message)
                        && !send(&mut client, message).await
                    {
                        let _ = tokio::time::timeout(CLOSE_ECHO, upstream.close(None)).await;
                        return;
                    }
                }
                Some(Err(_)) | None => {
                    close_with(&mut client, close::TRY_AGAIN_LATER, "the connection to the document's server was lost; reconnect".to_owned()).await;
                    return;
                }
            },
        }
    }
}

/// A client's message as sent on to the member.
fn to_upstream(message: Message) -> UpstreamMessage {
    match message {
        Message::Binary(bytes) => UpstreamMessage::Binary(bytes),
        Message::Text(text) => UpstreamMessage::Text(text.as_str().into()),
        Message::Ping(bytes) => UpstreamMessage::Ping(bytes),
        Message::Pong(bytes) => UpstreamMessage::Pong(bytes),
        Message::Close(frame) => UpstreamMessage::Close(frame.map(|frame| UpstreamClose {
            code: frame.code.into(),
            reason: frame.reason.as_str().into(),
        })),
    }
}

/// The member's message as sent on to the client (a close is handled apart; a raw frame is
/// never read).
fn to_client(message: UpstreamMessage) -> Option<Message> {
    Some(match message {
        UpstreamMessage::Binary(bytes) => Message::Binary(bytes),
        UpstreamMessage::Text(text) => Message::Text(text.as_str().into()),
        UpstreamMessage::Ping(bytes) => Message::Ping(bytes),
        UpstreamMessage::Pong(bytes) => Message::Pong(bytes),
        UpstreamMessage::Close(_) | UpstreamMessage::Frame(_) => return None,
    })
}

/// The layer inside the authorization layer: an API request granted one document (the routes
/// that name it by ID, and by slug), and a page's form that changes one (any method but `GET`
/// and `HEAD`; a page is read from the database by any member), is sent to the member that
/// writes it when that is not this process, and answered 503 when none does. (A creation names
/// its document's shard only in its body: the documents API's handler forwards it, with
/// [`send_elsewhere`].)
pub(crate) async fn documents_api(
    State(state): State<HttpState>,
    request: Request,
    next: Next,
) -> Response {
    let api = request
        .extensions()
        .get::<MatchedPath>()
        .is_some_and(|path| path.as_str().starts_with("/api/"));
    let writes = !matches!(*request.method(), Method::GET | Method::HEAD);
    let Some(id) = request
        .extensions()
        .get::<DocumentGrant>()
        .filter(|_| api || writes)
        .map(|grant| grant.id().clone())
    else {
        return next.run(request).await;
    };
    match elsewhere(&state, &id, request.headers()).await {
        Ok(None) => next.run(request).await,
        Ok(Some(elsewhere)) => send_elsewhere(&state, elsewhere, request).await,
        Err(error) => error.into_response(),
    }
}

/// Sends `request` to the member `elsewhere` names and relays its answer; 503 when no member
/// writes its document at the moment, or the member cannot be reached.
pub(crate) async fn send_elsewhere(
    state: &HttpState,
    elsewhere: Elsewhere,
    request: Request,
) -> Response {
    match elsewhere {
        Elsewhere::Member(base) => relay_request(state, &base, request).await,
        Elsewhere::Nowhere(outcome) => {
            state.metrics.forwarded(ForwardKind::Http, outcome);
            try_again(
                state,
                "handing_over",
                "the document is being handed over; try again shortly",
            )
            .into_response()
        }
    }
}

/// Sends `request` to the member at `base` and relays its answer; 503 when it cannot be reached.
async fn relay_request(state: &HttpState, base: &str, request: Request) -> Response {
    let started = Instant::now();
    match send_upstream(base, request).await {
        Ok(answer) => {
            state
                .metrics
                .forward_reached(ForwardKind::Http, started.elapsed());
            state
                .metrics
                .forwarded(ForwardKind::Http, ForwardOutcome::Forwarded);
            let (mut parts, body) = answer.into_parts();
            let hops: Vec<HeaderName> = parts
                .headers
                .keys()
                .filter(|name| hop_by_hop(name, &parts.headers))
                .cloned()
                .collect();
            for name in hops {
                parts.headers.remove(name);
            }
            Response::from_parts(parts, Body::new(body))
        }
        Err(error) => {
            state.metrics.forwarded(ForwardKind::Http, error.outcome());
            try_again(
                state,
                "unavailable",
                "the server that writes this document cannot be reached just now; try again shortly",
            )
            .with_source(error)
            .into_response()
        }
    }
}

async fn send_upstream(
    base: &str,
    request: Request,
) -> Result<hyper::Response<hyper::body::Incoming>, Unreached> {
    let member = Member::of(base)?;
    let (parts, body) = request.into_parts();
    let onward = Onward::of(&parts);
    let mut upstream = hyper::Request::new(body);
    *upstream.method_mut() = parts.method;
    *upstream.uri_mut() = format!("http://{}{}", member.authority, onward.path_and_query)
        .parse()
        .map_err(|_| Unreached::Address)?;
    *upstream.headers_mut() = onward.headers(|name| !hop_by_hop(name, &onward.headers));
    tokio::time::timeout(ANSWER_PATIENCE, CLIENT.request(upstream))
        .await
        .map_err(|_| Unreached::Late(ANSWER_PATIENCE))?
        .map_err(Unreached::Request)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn onward(uri: &str, headers: &[(&str, &str)], token: Option<&str>) -> Onward {
        let mut request = axum::http::Request::builder().uri(uri);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let (mut parts, ()) = request.body(()).unwrap().into_parts();
        if let Some(token) = token {
            parts
                .extensions
                .insert(QueryToken(fermata_crypto::SecretToken::from_given(
                    token.to_owned(),
                )));
        }
        parts
            .extensions
            .insert(ConnectInfo(SocketAddr::from(([10, 0, 0, 9], 5000))));
        Onward::of(&parts)
    }

    #[test]
    fn the_token_goes_back_into_the_query() {
        assert_eq!(
            onward("/sync/d", &[], Some("fms_a+b")).path_and_query,
            "/sync/d?token=fms_a%2Bb"
        );
        assert_eq!(
            onward("/x?w=1", &[], Some("t")).path_and_query,
            "/x?w=1&token=t"
        );
        assert_eq!(onward("/x?w=1", &[], None).path_and_query, "/x?w=1");
    }

    #[test]
    fn forwarded_headers_are_marked_and_name_the_peer() {
        let sent = onward(
            "/sync/d",
            &[
                ("cookie", "fermata_session=s"),
                ("host", "fermata.example"),
                ("x-csrf-token", "c"),
                ("x-forwarded-for", "192.0.2.1"),
                (FORWARDED, "0"),
                ("connection", "upgrade, x-private"),
                ("x-private", "p"),
            ],
            None,
        );
        let live = sent.headers(|name| SYNC_HEADERS.contains(name));
        assert_eq!(live[header::COOKIE], "fermata_session=s");
        assert_eq!(live[header::HOST], "fermata.example");
        assert!(!live.contains_key("x-csrf-token"));
        assert_eq!(live[FORWARDED], "1");
        assert_eq!(live[FORWARDED_FOR], "192.0.2.1, 10.0.0.9");
        let whole = sent.headers(|name| !hop_by_hop(name, &sent.headers));
        assert_eq!(whole["x-csrf-token"], "c");
        assert!(!whole.contains_key(header::CONNECTION));
        assert!(!whole.contains_key("x-private"));
    }

    #[test]
    fn a_member_is_reached_by_host_and_port_only() {
        assert_eq!(
            Member::of("http://user:secret@10.0.0.5:8080/x")
                .unwrap()
                .authority,
            "10.0.0.5:8080"
        );
        assert_eq!(Member::of("http://[::1]").unwrap().authority, "[::1]:80");
        assert!(Member::of("https://10.0.0.5").is_err());
        assert!(Member::of("not a url").is_err());
    }
}
