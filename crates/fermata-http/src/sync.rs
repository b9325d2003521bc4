//! `/sync/{document}`: the WebSocket endpoint Yjs clients connect to with `y-websocket`'s
//! `WebsocketProvider` (server URL `ws://HOST/sync`, the document's ID as the room name, or
//! `OWNER/NAME/SLUG`). The caller is authenticated before the upgrade, by the `token` query
//! parameter (an API token or a session secret) or the session cookie; a cookie-authenticated
//! upgrade must come from this server's own origin. After the upgrade this handler only shuttles
//! binary messages between the socket and the document's room, as the authenticated member
//! (whom activity history credits for the connection's edits).

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use fermata_collab::{Outbound, RoomManager, close};
use fermata_crypto::SecretToken;
use fermata_store::{ChannelId, ErrorKind, Repository, Slug, UserId};
use serde::Deserialize;

use crate::HttpState;
use crate::error::ApiError;

#[derive(Deserialize)]
pub(crate) struct TokenQuery {
    token: Option<String>,
}

/// Extra room above the largest accepted message, so an oversized one still arrives whole and is
/// refused with a clear close reason instead of a dropped connection.
const FRAME_ALLOWANCE: usize = 1024 * 1024;

pub(crate) async fn sync(
    State(state): State<HttpState>,
    Path(room): Path<String>,
    Query(query): Query<TokenQuery>,
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    let accounts = &state.accounts;
    let authenticated = match query.token.filter(|t| !t.is_empty()) {
        Some(token) => {
            let token = SecretToken::from_given(token);
            match accounts.authenticate_api_token(&token).await {
                Ok(Some(principal)) => Ok(Some(principal)),
                Ok(None) => accounts.authenticate_session(&token).await,
                Err(error) => Err(error),
            }
        }
        None => {
            let cookie = axum_extra::extract::CookieJar::from_headers(&headers)
                .get(crate::auth::SESSION_COOKIE)
                .map(|c| SecretToken::from_given(c.value()));
            if !same_origin(&headers) {
                return ApiError::new(
                    StatusCode::FORBIDDEN,
                    "csrf",
                    "cross-site WebSocket refused",
                )
                .into_response();
            }
            match cookie {
                Some(secret) => accounts.authenticate_session(&secret).await,
                None => Ok(None),
            }
        }
    };
    let member = match authenticated {
        Ok(Some(principal)) => principal.user.id,
        Ok(None) => return ApiError::unauthenticated().into_response(),
        Err(error) => return ApiError::from(error).into_response(),
    };
    let id = match resolve(&state, &room).await {
        Ok(id) => id,
        Err(error) => return error.into_response(),
    };
    let rooms = state.documents.rooms().clone();
    upgrade
        .max_message_size(rooms.settings().max_message_bytes + FRAME_ALLOWANCE)
        .on_upgrade(move |socket| serve(socket, rooms, id, member))
}

/// A room name: a document ID, or `OWNER/NAME/SLUG` (a canonical or former slug). A missing or
/// archived document is refused before the upgrade, where y-websocket backs off between retries.
async fn resolve(state: &HttpState, room: &str) -> Result<ChannelId, ApiError> {
    let not_found = || ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such document");
    let channel = match ChannelId::parse(room) {
        // Any failure is refused as missing, as the client expects; one that is not a missing
        // row is kept for the log.
        Ok(id) => state
            .documents
            .channel(&id)
            .await
            .map_err(|error| match error.kind() {
                ErrorKind::Missing => not_found(),
                _ => not_found().with_source(error),
            })?,
        Err(_) => {
            let (repository, slug) = room.rsplit_once('/').ok_or_else(not_found)?;
            // Dropped on purpose: a room name that is not `OWNER/NAME/SLUG` names no document.
            let repository = Repository::new(repository).map_err(|_| not_found())?;
            let slug = Slug::new(slug).map_err(|_| not_found())?;
            state
                .documents
                .resolve(&repository, &slug)
                .await?
                .ok_or_else(not_found)?
        }
    };
    if channel.archived_at.is_some() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "archived",
            "the document is archived; restore it to edit",
        ));
    }
    Ok(channel.id)
}

/// A connection that sends nothing for this long is gone (live y-websocket clients renew their
/// presence every 15 seconds).
const IDLE_CONNECTION: std::time::Duration = std::time::Duration::from_secs(60);

fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) else {
        return true;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    origin
        .split_once("://")
        .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host))
}

async fn close_with(socket: &mut WebSocket, code: u16, reason: String) {
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    let _ = socket.send(Message::Close(Some(frame))).await;
}

async fn serve(mut socket: WebSocket, rooms: RoomManager, id: ChannelId, member: UserId) {
    let mut connection = match rooms.join(&id, &member).await {
        Ok(connection) => connection,
        Err(refusal) => {
            close_with(&mut socket, refusal.code, refusal.reason).await;
            return;
        }
    };
    loop {
        tokio::select! {
            incoming = tokio::time::timeout(IDLE_CONNECTION, socket.recv()) => match incoming.unwrap_or_else(|_idle| None) {
                Some(Ok(Message::Binary(bytes))) => {
                    if !connection.receive(bytes.to_vec()).await {
                        close_with(&mut socket, close::TRY_AGAIN_LATER, "the document's room closed; reconnect".to_owned()).await;
                        break;
                    }
                }
                Some(Ok(Message::Text(_))) => {
                    close_with(&mut socket, close::POLICY, "y-websocket messages are binary".to_owned()).await;
                    break;
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_)) | Err(_)) | None => break,
            },
            outgoing = connection.outbound.recv() => match outgoing {
                Some(Outbound::Message(bytes)) => {
                    if socket.send(Message::Binary(bytes.into())).await.is_err() {
                        break;
                    }
                }
                Some(Outbound::Close { code, reason }) => {
                    close_with(&mut socket, code, reason).await;
                    break;
                }
                None => break,
            },
        }
    }
    connection.leave().await;
}
