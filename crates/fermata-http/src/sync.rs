//! `/sync/{document}`: the WebSocket endpoint Yjs clients connect to with `y-websocket`'s
//! `WebsocketProvider` (server URL `ws://HOST/sync`, the document's ID as the room name, or
//! `OWNER/NAME/SLUG`). The authorization layer admits the caller before the upgrade (by the
//! `token` query parameter: a client token, an API token or a session secret; or by the session
//! cookie of a same-origin upgrade) with read access at least; a caller without write access
//! (a viewer, a read client token) joins read-only. After the upgrade this handler shuttles binary
//! messages between the socket and the document's room, as the authenticated member (whom
//! activity history credits; for a client token, the admin who minted it).
//!
//! Access is checked again while the connection is open: whenever the access watch asks (a
//! logout, a token revocation, a password or role change, a membership change, here or in another
//! process), and when the credential expires (a client token's expiry, a session's). A
//! connection that lost read access is closed with [`close::REVOKED`] and leaves its room before
//! the re-check is answered, so nothing it sends afterwards reaches the room; one that lost write
//! access becomes read-only, and one given write access becomes writable.
//!
//! What a connection may hold is bounded (see `docs/limits.md`): no frame or message may be larger
//! than `max_message_bytes`, and one whose header declares more is refused with close code 1009
//! from its header, before any of its payload is read (the connection is kept half a second more,
//! so that a client still sending it reads that code); a message takes at most [`SEND_PATIENCE`]
//! to reach a client that reads slowly. A client's close frame is echoed, as the protocol asks.
//!
//! In a member of a cluster, a connection to a document that another member writes is relayed to
//! that member, which checks the caller again and serves it as above (see `forward.rs`).

use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use fermata_accounts::{Principal, Via, Watching};
use fermata_collab::{Outbound, OutboundReceiver, close};
use fermata_metrics::{Metrics, UpdateRefusal};
use fermata_store::{ErrorChain, RepositoryRole, UnixMillis, UserId};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite;

use crate::HttpState;
use crate::error::ApiError;
use crate::forward::{self, Onward};
use crate::policy::{Caller, Registration, SyncGrant, role_on_document};

pub(crate) async fn sync(
    State(state): State<HttpState>,
    grant: SyncGrant,
    registration: Option<axum::Extension<Registration>>,
    onward: Onward,
    upgrade: WebSocketUpgrade,
) -> Response {
    match forward::elsewhere(&state, &grant.channel.id, onward.request_headers()).await {
        Ok(None) => {}
        Ok(Some(elsewhere)) => {
            return forward::sync(state, upgrade, onward, grant.channel.id, elsewhere).await;
        }
        Err(error) => return error.into_response(),
    }
    let watching = match registration.and_then(|axum::Extension(r)| r.take()) {
        Some(watching) => watching,
        None => match state
            .accounts
            .access_watch()
            .watch(grant.caller.user_id())
            .await
        {
            Ok(watching) => watching,
            Err(error) => return ApiError::from(error).into_response(),
        },
    };
    // One limit for a frame and a message: y-websocket sends each message as one frame, and the
    // codec checks a frame's declared length before it reads (or makes room for) its payload.
    let max = state.documents.rooms().settings().max_message_bytes;
    upgrade
        .max_frame_size(max)
        .max_message_size(max)
        .read_buffer_size(READ_BUFFER)
        .on_upgrade(move |socket| serve(socket, state, grant, watching))
}

/// What a connection reads the socket into at a time; a larger message is gathered across
/// reads. The WebSocket layer's default, 128 KiB allocated for every connection, was most of an
/// idle client's cost (the rooms benchmark's memory per open room: 160 KiB before); 8 KiB was
/// still 40% of it (the peers benchmark's crowd: 19.2 KB an idle connection at 8 KiB).
pub(crate) const READ_BUFFER: usize = 4 * 1024;

/// A connection that sends nothing for this long is gone (live y-websocket clients renew their
/// presence every 15 seconds).
const IDLE_CONNECTION: Duration = Duration::from_secs(60);

/// How long one message may take to be taken by the client's socket. A client that reads nothing
/// for this long is gone: its connection is dropped, with the messages queued for it, rather than
/// held open (with its slot) for as long as the client keeps its receive window shut.
pub(crate) const SEND_PATIENCE: Duration = Duration::from_secs(30);

/// How long the echo of a client's close frame may take to go out.
pub(crate) const CLOSE_ECHO: Duration = Duration::from_secs(2);

/// Sends `message` within [`SEND_PATIENCE`]: whether it went out.
pub(crate) async fn send(socket: &mut WebSocket, message: Message) -> bool {
    matches!(
        tokio::time::timeout(SEND_PATIENCE, socket.send(message)).await,
        Ok(Ok(()))
    )
}

pub(crate) async fn close_with(socket: &mut WebSocket, code: u16, reason: String) {
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    send(socket, Message::Close(Some(frame))).await;
}

/// Ends a connection whose room closed: what the room still queued for it goes out first, then
/// the room's own close if it sent one (a stop, an archived document), or else a retry-later.
async fn close_after_room(socket: &mut WebSocket, outbound: &mut OutboundReceiver) {
    while let Some(next) = outbound.recv().await {
        match next {
            Outbound::Message(bytes) => {
                if !send(socket, Message::Binary(bytes.into())).await {
                    return;
                }
            }
            Outbound::Close { code, reason } => {
                close_with(socket, code, reason).await;
                return;
            }
        }
    }
    close_with(
        socket,
        close::TRY_AGAIN_LATER,
        "the document's room closed; reconnect".to_owned(),
    )
    .await;
}

/// How long a connection refused for a message over the limit is kept after its close frame went
/// out. The client is most likely still sending that message, which is never read: closing a
/// socket with unread data sends a reset, and a reset that reaches the client before it read the
/// close frame discards it, so the client would see a broken connection instead of 1009.
const REFUSAL_LINGER: Duration = Duration::from_millis(500);

/// Refuses a message over the size limit (counted, close code 1009), then keeps the connection
/// for [`REFUSAL_LINGER`] before the caller drops it.
pub(crate) async fn refuse_too_large(socket: &mut WebSocket, metrics: &Metrics) {
    metrics.update_refused(UpdateRefusal::MessageTooLarge);
    close_with(
        socket,
        close::TOO_BIG,
        "the message is larger than this server accepts".to_owned(),
    )
    .await;
    tokio::time::sleep(REFUSAL_LINGER).await;
}

/// Whether a read failed on a frame or message over the size limit.
pub(crate) fn too_large(error: axum::Error) -> bool {
    error
        .into_inner()
        .downcast_ref::<tungstenite::Error>()
        .is_some_and(|error| matches!(error, tungstenite::Error::Capacity(_)))
}

/// When the credential ends by itself: a client token's expiry, or a login session's.
fn expiry(caller: &Caller) -> Option<Instant> {
    let (ends, now) = match caller {
        Caller::Client(grant) => (grant.expires_at, UnixMillis::now()),
        Caller::User(Principal {
            via: Via::Session(context),
            ..
        }) => (context.session.expires_at, context.now),
        Caller::User(_) => return None,
    };
    let left = u64::try_from(ends.0.saturating_sub(now.0)).unwrap_or(0);
    Some(Instant::now() + Duration::from_millis(left))
}

/// Whom history credits for the connection's edits: the user, or for a client token the admin
/// who minted it.
fn member_of(caller: &Caller) -> UserId {
    match caller {
        Caller::User(principal) => principal.user.id.clone(),
        Caller::Client(grant) => grant.issuer.clone(),
    }
}

/// What a re-check found.
enum Recheck {
    /// Still allowed; writable or not.
    Allowed { writable: bool },
    /// Access ended.
    Revoked,
}

/// Checks the connection's credential and role again, from storage.
async fn recheck(state: &HttpState, grant: &SyncGrant) -> Result<Recheck, ApiError> {
    let caller = match &grant.caller {
        Caller::User(principal) => {
            let Some(user) = state.accounts.still_valid(principal).await? else {
                return Ok(Recheck::Revoked);
            };
            Caller::User(Principal {
                user,
                via: principal.via.clone(),
                may_issue_credentials: principal.may_issue_credentials,
            })
        }
        client @ Caller::Client(_) => client.clone(),
    };
    let channel = match state.documents.find(&grant.channel.id).await? {
        Some(channel) if channel.archived_at.is_none() => channel,
        _ => return Ok(Recheck::Revoked),
    };
    Ok(
        match role_on_document(state, &caller, &channel, None).await? {
            Some(role) => Recheck::Allowed {
                writable: role >= RepositoryRole::Editor,
            },
            None => Recheck::Revoked,
        },
    )
}

async fn serve(mut socket: WebSocket, state: HttpState, grant: SyncGrant, mut watching: Watching) {
    let rooms = state.documents.rooms().clone();
    let mut writable = grant.writable;
    let mut connection = match rooms
        .join(&grant.channel.id, &member_of(&grant.caller), !writable)
        .await
    {
        Ok(connection) => connection,
        Err(refusal) => {
            close_with(&mut socket, refusal.code, refusal.reason).await;
            return;
        }
    };
    let ends = expiry(&grant.caller);
    let expired = async {
        match ends {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(expired);
    // A message read from the client that waits for room in the room's inbox. No frame is read
    // meanwhile (the client is slowed down by its socket), while the room's answers still go
    // out: a client that sends faster than the room takes its messages keeps up with what it
    // is sent, and is not dropped as too far behind. A message still waiting when the
    // connection ends (its access revoked or expired, the room closing it) is dropped, as one
    // sent after it would be.
    let mut waiting: Option<Vec<u8>> = None;
    loop {
        tokio::select! {
            incoming = tokio::time::timeout(IDLE_CONNECTION, socket.recv()), if waiting.is_none() => match incoming.unwrap_or_else(|_idle| None) {
                Some(Ok(Message::Binary(bytes))) => waiting = Some(bytes.to_vec()),
                Some(Ok(Message::Text(_))) => {
                    state.metrics.update_refused(UpdateRefusal::Malformed);
                    close_with(&mut socket, close::POLICY, "y-websocket messages are binary".to_owned()).await;
                    break;
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_))) => {
                    // The codec queued the echo of the client's close frame (its code, so the
                    // client sees its own); the next read sends it and then reports the end.
                    let _ = tokio::time::timeout(CLOSE_ECHO, socket.recv()).await;
                    break;
                }
                Some(Err(error)) => {
                    // The codec refused a frame from its header, or the stream broke. Nothing
                    // more is read either way; a refusal is said with its close code.
                    if too_large(error) {
                        connection.leave().await;
                        refuse_too_large(&mut socket, &state.metrics).await;
                        return;
                    }
                    break;
                }
                None => break,
            },
            delivered = connection.inbox.deliver(&mut waiting), if waiting.is_some() => {
                if !delivered {
                    close_after_room(&mut socket, &mut connection.outbound).await;
                    break;
                }
            },
            outgoing = connection.outbound.recv() => match outgoing {
                Some(Outbound::Message(bytes)) => {
                    if !send(&mut socket, Message::Binary(bytes.into())).await {
                        break;
                    }
                }
                Some(Outbound::Close { code, reason }) => {
                    close_with(&mut socket, code, reason).await;
                    break;
                }
                None => break,
            },
            Some(done) = watching.rechecks.recv() => {
                match recheck(&state, &grant).await {
                    Ok(Recheck::Allowed { writable: now }) => {
                        let mut room_open = true;
                        if now != writable {
                            writable = now;
                            // What the client sent before the change reaches the room first,
                            // under the access it was sent with.
                            if waiting.is_some() {
                                room_open = connection.inbox.deliver(&mut waiting).await;
                            }
                            connection.set_read_only(!now).await;
                        }
                        let _ = done.send(());
                        if !room_open {
                            close_after_room(&mut socket, &mut connection.outbound).await;
                            break;
                        }
                    }
                    Ok(Recheck::Revoked) => {
                        close_with(&mut socket, close::REVOKED, "access to this document ended".to_owned()).await;
                        connection.leave().await;
                        let _ = done.send(());
                        return;
                    }
                    Err(error) => {
                        // Not knowing is not allowing: the client reconnects and is checked afresh.
                        tracing::warn!(document = %grant.channel.id, error = %ErrorChain(&error), "a live connection could not be checked again");
                        close_with(&mut socket, close::TRY_AGAIN_LATER, "access could not be checked; reconnect".to_owned()).await;
                        connection.leave().await;
                        let _ = done.send(());
                        return;
                    }
                }
            },
            () = &mut expired => {
                close_with(&mut socket, close::REVOKED, "the credential expired".to_owned()).await;
                break;
            },
        }
    }
    connection.leave().await;
}
