//! What the authorization layer hands a handler once the caller passed: the document, the
//! repository, the creation or the list it may use, with the caller and its role, and the
//! administrator on the administrator pages. Each grant is an extractor that fails closed: a
//! handler whose route did not grant it refuses the request.
//!
//! Also here: how a caller is recognised (a client token, a login session or an API token), how a
//! document or a repository is found from what the request names, the caller's role on a
//! document, which live connections compute again while they are open, and the access-watch
//! registration a live connection is handed.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use fermata_accounts::{ClientAccess, ClientGrant, ClientTokenError, Principal, Watching};
use fermata_collab::{Standing, may_create};
use fermata_store::{
    Channel, ChannelId, DocumentScope, Repository, RepositoryRole, Role, Slug, User, UserId,
};

use super::QueryToken;
use crate::HttpState;
use crate::auth::{Authenticated, SESSION_COOKIE};
use crate::error::ApiError;
use crate::view;

/// Who is calling a document route: a signed-in user, or the holder of a client token.
#[derive(Debug, Clone)]
pub(crate) enum Caller {
    User(Principal),
    Client(ClientGrant),
}

impl Caller {
    /// The user, unless the caller holds a client token.
    pub(crate) fn user(&self) -> Option<&User> {
        match self {
            Caller::User(principal) => Some(&principal.user),
            Caller::Client(_) => None,
        }
    }

    pub(crate) fn user_id(&self) -> Option<UserId> {
        self.user().map(|user| user.id.clone())
    }
}

/// A document the caller may use, with their role on it.
#[derive(Debug, Clone)]
pub(crate) struct DocumentGrant {
    /// As read when the request was authorized.
    pub(crate) channel: Channel,
    pub(crate) role: RepositoryRole,
    pub(crate) caller: Caller,
}

impl DocumentGrant {
    pub(crate) fn id(&self) -> &ChannelId {
        &self.channel.id
    }
}

/// A live connection the caller may open: writable, or read-only.
#[derive(Debug, Clone)]
pub(crate) struct SyncGrant {
    pub(crate) channel: Channel,
    pub(crate) caller: Caller,
    pub(crate) writable: bool,
}

/// A repository the caller may use.
#[derive(Debug, Clone)]
pub(crate) struct RepositoryGrant {
    pub(crate) repository: Repository,
    pub(crate) standing: Standing,
    pub(crate) principal: Principal,
}

/// A creation the caller may make: where, and whether the repository is to be created first.
#[derive(Debug, Clone)]
pub(crate) enum CreationGrant {
    Granted {
        repository: Repository,
        /// The repository does not exist yet: the creation makes it, with the caller as admin.
        creates: bool,
        principal: Box<Principal>,
    },
    /// The body names no repository: the handler refuses the body before it needs a grant.
    Unresolved,
}

/// The documents a list may show.
#[derive(Debug, Clone)]
pub(crate) struct ListGrant {
    pub(crate) scope: DocumentScope,
}

/// A signed-in `system_admin` on the administrator pages.
#[derive(Debug, Clone)]
pub(crate) struct PageAdmin(pub(crate) Principal);

/// The watch registration the authorization layer made before it checked the caller of
/// `/sync`, handed to the connection it admitted, so a change of access made while the caller
/// was checked is not missed.
#[derive(Debug, Clone)]
pub(crate) struct Registration(Arc<Mutex<Option<Watching>>>);

impl Registration {
    fn new(watching: Watching) -> Self {
        Registration(Arc::new(Mutex::new(Some(watching))))
    }

    /// The registration, the first time it is asked for.
    pub(crate) fn take(&self) -> Option<Watching> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

fn no_grant() -> ApiError {
    tracing::error!("a handler needed a grant its route's policy does not give");
    ApiError::forbidden("no access policy grants this")
}

macro_rules! grant_extractor {
    ($grant:ty) => {
        impl<S: Send + Sync> FromRequestParts<S> for $grant {
            type Rejection = ApiError;

            async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
                parts
                    .extensions
                    .get::<$grant>()
                    .cloned()
                    .ok_or_else(no_grant)
            }
        }
    };
}

grant_extractor!(DocumentGrant);
grant_extractor!(SyncGrant);
grant_extractor!(RepositoryGrant);
grant_extractor!(CreationGrant);
grant_extractor!(ListGrant);
grant_extractor!(PageAdmin);

fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such document")
}

fn no_repository() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such repository")
}

fn needs(role: RepositoryRole) -> ApiError {
    ApiError::forbidden(format!("this needs the {role} role in the repository"))
}

fn client_token_refused(error: ClientTokenError) -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthenticated",
        error.to_string(),
    )
}

fn rejection(response: impl IntoResponse) -> Response {
    response.into_response()
}

/// The caller of a route that takes client tokens: the client token in `?token=`, if one, or
/// the signed-in user.
async fn caller(state: &HttpState, parts: &mut Parts) -> Result<Caller, Response> {
    if let Some(QueryToken(token)) = parts.extensions.get::<QueryToken>().cloned()
        && fermata_accounts::Accounts::is_client_token(&token)
    {
        return state
            .accounts
            .open_client_token(&token)
            .map(Caller::Client)
            .map_err(|error| client_token_refused(error).into_response());
    }
    let Authenticated(principal) = Authenticated::from_request_parts(parts, state)
        .await
        .map_err(rejection)?;
    Ok(Caller::User(principal))
}

async fn principal(state: &HttpState, parts: &mut Parts) -> Result<Principal, Response> {
    Authenticated::from_request_parts(parts, state)
        .await
        .map(|Authenticated(principal)| principal)
        .map_err(rejection)
}

async fn path_param(parts: &mut Parts, name: &str) -> Option<String> {
    let params = RawPathParams::from_request_parts(parts, &()).await.ok()?;
    params
        .iter()
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_owned())
}

fn query_param(parts: &Parts, name: &str) -> Option<String> {
    let query = parts.uri.query()?;
    super::form_pairs(query)
        .into_iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value)
}

/// The caller's role on `channel` now, or none. A `system_admin` acting where they are not a
/// member is recorded under `audit` (when given) first; a client token counts while it names
/// this document and its issuer still administers the repository.
pub(crate) async fn role_on_document(
    state: &HttpState,
    caller: &Caller,
    channel: &Channel,
    audit: Option<&str>,
) -> Result<Option<RepositoryRole>, ApiError> {
    let repositories = state.documents.repositories();
    match caller {
        Caller::User(principal) => {
            let Some(standing) = repositories
                .standing(&principal.user, &channel.repository)
                .await?
            else {
                return Ok(None);
            };
            if standing.overriding
                && let Some(action) = audit
            {
                repositories
                    .record_override(
                        &principal.user,
                        &channel.repository,
                        action,
                        Some(&channel.id),
                    )
                    .await?;
            }
            Ok(Some(standing.role))
        }
        Caller::Client(grant) => {
            if grant.document != channel.id {
                return Ok(None);
            }
            let Some(issuer) = state.accounts.user_by_id(&grant.issuer).await? else {
                return Ok(None);
            };
            let issuer_admin = repositories
                .standing(&issuer, &channel.repository)
                .await?
                .is_some_and(|standing| standing.role == RepositoryRole::Admin);
            Ok(issuer_admin.then_some(match grant.access {
                ClientAccess::Read => RepositoryRole::Viewer,
                ClientAccess::Write => RepositoryRole::Editor,
            }))
        }
    }
}

/// The grant for `channel`, or the refusal: 404 to whoever cannot read it, 403 to a reader who
/// needs more.
async fn document_grant(
    state: &HttpState,
    caller: Caller,
    channel: Channel,
    need: RepositoryRole,
    action: &str,
) -> Result<DocumentGrant, Response> {
    let role = role_on_document(state, &caller, &channel, Some(action))
        .await
        .map_err(rejection)?
        .ok_or_else(|| not_found().into_response())?;
    if role < need {
        return Err(needs(need).into_response());
    }
    Ok(DocumentGrant {
        channel,
        role,
        caller,
    })
}

async fn channel(state: &HttpState, id: &ChannelId) -> Result<Channel, Response> {
    state
        .documents
        .find(id)
        .await
        .map_err(|error| ApiError::from(error).into_response())?
        .ok_or_else(|| not_found().into_response())
}

/// The document `{id}` names.
pub(super) async fn document(
    state: &HttpState,
    parts: &mut Parts,
    need: RepositoryRole,
    action: &str,
) -> Result<DocumentGrant, Response> {
    let caller = caller(state, parts).await?;
    let id = path_param(parts, "id")
        .await
        .and_then(|id| ChannelId::parse(&id).ok())
        .ok_or_else(|| not_found().into_response())?;
    let channel = channel(state, &id).await?;
    document_grant(state, caller, channel, need, action).await
}

/// The document `?repository=&slug=` names.
pub(super) async fn document_by_slug(
    state: &HttpState,
    parts: &mut Parts,
    action: &str,
) -> Result<DocumentGrant, Response> {
    let caller = caller(state, parts).await?;
    let (Some(repository), Some(slug)) =
        (query_param(parts, "repository"), query_param(parts, "slug"))
    else {
        return Err(
            ApiError::bad_request("a query parameter is missing or not valid").into_response(),
        );
    };
    let repository = Repository::new(repository).map_err(|e| ApiError::from(e).into_response())?;
    let no_slug = || {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no document has that slug",
        )
        .into_response()
    };
    let slug = Slug::new(slug).map_err(|_| no_slug())?;
    let channel = state
        .documents
        .resolve(&repository, &slug)
        .await
        .map_err(|e| ApiError::from(e).into_response())?
        .ok_or_else(no_slug)?;
    document_grant(state, caller, channel, RepositoryRole::Viewer, action)
        .await
        .map_err(|refusal| {
            if refusal.status() == StatusCode::NOT_FOUND {
                no_slug()
            } else {
                refusal
            }
        })
}

/// The document a page's `{*document}` names: its ID, or `OWNER/NAME/SLUG` (a canonical or
/// former slug), for a signed-in user who may read it.
pub(super) async fn document_page(
    state: &HttpState,
    parts: &mut Parts,
    action: &str,
) -> Result<DocumentGrant, Response> {
    let principal = principal(state, parts).await?;
    let named = path_param(parts, "document").await.unwrap_or_default();
    let channel = room_channel(state, &named)
        .await
        .map_err(rejection)?
        .ok_or_else(|| not_found().into_response())?;
    document_grant(
        state,
        Caller::User(principal),
        channel,
        RepositoryRole::Viewer,
        action,
    )
    .await
}

/// Whether `Origin`, when present, names the host the request was sent to.
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

/// The caller of `/sync`: `?token=` (a client token, an API token or a session secret), or the
/// session cookie of a same-origin upgrade.
async fn sync_caller(state: &HttpState, parts: &Parts) -> Result<Caller, Response> {
    let accounts = &state.accounts;
    let authenticated = match parts.extensions.get::<QueryToken>().cloned() {
        Some(QueryToken(token)) if fermata_accounts::Accounts::is_client_token(&token) => {
            return accounts
                .open_client_token(&token)
                .map(Caller::Client)
                .map_err(|error| client_token_refused(error).into_response());
        }
        Some(QueryToken(token)) => match accounts.authenticate_api_token(&token).await {
            Ok(Some(principal)) => Ok(Some(principal)),
            Ok(None) => accounts.authenticate_session(&token).await,
            Err(error) => Err(error),
        },
        None => {
            if !same_origin(&parts.headers) {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "csrf",
                    "cross-site WebSocket refused",
                )
                .into_response());
            }
            let cookie = axum_extra::extract::CookieJar::from_headers(&parts.headers)
                .get(SESSION_COOKIE)
                .map(|c| fermata_crypto::SecretToken::from_given(c.value()));
            match cookie {
                Some(secret) => accounts.authenticate_session(&secret).await,
                None => Ok(None),
            }
        }
    };
    match authenticated {
        Ok(Some(principal)) => Ok(Caller::User(principal)),
        Ok(None) => Err(ApiError::unauthenticated().into_response()),
        Err(error) => Err(ApiError::from(error).into_response()),
    }
}

/// The document a `/sync` room names: its ID, or `OWNER/NAME/SLUG` (a canonical or former slug).
async fn room_channel(state: &HttpState, room: &str) -> Result<Option<Channel>, ApiError> {
    if let Ok(id) = ChannelId::parse(room) {
        return Ok(state.documents.find(&id).await?);
    }
    let Some((repository, slug)) = room.rsplit_once('/') else {
        return Ok(None);
    };
    let (Ok(repository), Ok(slug)) = (Repository::new(repository), Slug::new(slug)) else {
        return Ok(None);
    };
    Ok(state.documents.resolve(&repository, &slug).await?)
}

/// A `/sync` connection: read access to connect, write access to edit. A missing document and
/// one the caller cannot read are refused alike before the upgrade, where y-websocket backs off
/// between retries; an archived one is refused to its readers.
pub(super) async fn sync(
    state: &HttpState,
    parts: &mut Parts,
    action: &str,
) -> Result<SyncGrant, Response> {
    // Watched before the caller is checked, so a change made while it is checked is not missed.
    let watching = state
        .accounts
        .access_watch()
        .watch(None)
        .await
        .map_err(|e| ApiError::from(e).into_response())?;
    let caller = sync_caller(state, parts).await?;
    watching.act_for(caller.user_id());
    parts.extensions.insert(Registration::new(watching));
    let room = path_param(parts, "room").await.unwrap_or_default();
    let channel = room_channel(state, &room)
        .await
        .map_err(rejection)?
        .ok_or_else(|| not_found().into_response())?;
    let grant = document_grant(state, caller, channel, RepositoryRole::Viewer, action).await?;
    if grant.channel.archived_at.is_some() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "archived",
            "the document is archived; restore it to edit",
        )
        .into_response());
    }
    Ok(SyncGrant {
        writable: grant.role >= RepositoryRole::Editor,
        channel: grant.channel,
        caller: grant.caller,
    })
}

/// The administrator pages: a `system_admin`; anyone else signed in gets the page saying so
/// (403), and a visitor is sent to the login form and back.
pub(super) async fn admin_page(
    state: &HttpState,
    parts: &mut Parts,
) -> Result<PageAdmin, Response> {
    let principal = principal(state, parts).await?;
    if !principal.user.has_role(Role::SystemAdmin) {
        return Err(view::needs_system_admin(principal.user.name.as_str()));
    }
    Ok(PageAdmin(principal))
}

/// The repository `{owner}/{name}` names.
pub(super) async fn repository(
    state: &HttpState,
    parts: &mut Parts,
    need: RepositoryRole,
    action: &str,
) -> Result<RepositoryGrant, Response> {
    let principal = principal(state, parts).await?;
    let name = match (
        path_param(parts, "owner").await,
        path_param(parts, "name").await,
    ) {
        (Some(owner), Some(name)) => Repository::new(format!("{owner}/{name}")).ok(),
        _ => None,
    }
    .ok_or_else(|| no_repository().into_response())?;
    let standing = standing_in(state, &principal, &name, action)
        .await?
        .ok_or_else(|| no_repository().into_response())?;
    if standing.role < need {
        return Err(needs(need).into_response());
    }
    Ok(RepositoryGrant {
        repository: name,
        standing,
        principal,
    })
}

/// The caller's standing in a repository, its override recorded first.
async fn standing_in(
    state: &HttpState,
    principal: &Principal,
    name: &Repository,
    action: &str,
) -> Result<Option<Standing>, Response> {
    let repositories = state.documents.repositories();
    let standing = repositories
        .standing(&principal.user, name)
        .await
        .map_err(|e| ApiError::from(e).into_response())?;
    if let Some(standing) = standing
        && standing.overriding
    {
        repositories
            .record_override(&principal.user, name, action, None)
            .await
            .map_err(|e| ApiError::from(e).into_response())?;
    }
    Ok(standing)
}

/// A list: the caller's repositories, or the one `?repository=` names when they may read it.
pub(super) async fn list(
    state: &HttpState,
    parts: &mut Parts,
    action: &str,
) -> Result<ListGrant, Response> {
    let principal = principal(state, parts).await?;
    let Some(repository) = query_param(parts, "repository") else {
        return Ok(ListGrant {
            scope: DocumentScope::MemberOf(principal.user.id),
        });
    };
    let name = Repository::new(repository).map_err(|e| ApiError::from(e).into_response())?;
    standing_in(state, &principal, &name, action)
        .await?
        .ok_or_else(|| no_repository().into_response())?;
    Ok(ListGrant {
        scope: DocumentScope::Repository(name),
    })
}

/// The largest creation body read.
const MAX_CREATION_BODY: usize = 16 << 20;

/// A creation: the repository its body names, where the caller must be an editor, or which they
/// may create when it does not exist. The body is read here and handed on unchanged.
pub(super) async fn creation(
    state: &HttpState,
    parts: &mut Parts,
    body: Body,
    action: &str,
) -> Result<(CreationGrant, Body), Response> {
    let principal = principal(state, parts).await?;
    let bytes = axum::body::to_bytes(body, MAX_CREATION_BODY)
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                "the body is too large",
            )
            .into_response()
        })?;
    let named = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|value| value.get("repository")?.as_str().map(str::to_owned))
        .and_then(|name| Repository::new(name).ok());
    let Some(name) = named else {
        return Ok((CreationGrant::Unresolved, Body::from(bytes)));
    };
    let creates = match standing_in(state, &principal, &name, action).await? {
        Some(standing) if standing.role >= RepositoryRole::Editor => false,
        Some(_) => return Err(needs(RepositoryRole::Editor).into_response()),
        None => {
            let exists = state
                .documents
                .repositories()
                .repository(&name)
                .await
                .map_err(|e| ApiError::from(e).into_response())?
                .is_some();
            if exists || !may_create(&principal.user, &name) {
                return Err(no_repository().into_response());
            }
            true
        }
    };
    Ok((
        CreationGrant::Granted {
            repository: name,
            creates,
            principal: Box::new(principal),
        },
        Body::from(bytes),
    ))
}
