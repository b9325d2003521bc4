//! The documents JSON API under `/api/v1/documents`, described by `/api/v1/openapi.json`: each
//! route's access is declared here, in the route table, and checked by the authorization layer
//! before a handler runs (see `policy`).
//!
//! A read answers the document's storage revision as its `ETag`. `PUT .../text`, `PATCH` and a
//! version's restore honour `If-Match`: at another revision they answer 412 with the current one
//! and change nothing; without it they apply to whatever the document holds then. The Yjs-native
//! routes read the document as one binary update (`GET .../state`) and merge a program's binary
//! update the way a live client's is merged (`POST .../updates`), so a program edits without
//! reverting anyone. An admin mints client tokens (`POST .../client-tokens`).

use std::collections::HashMap;
use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use fermata_accounts::ClientAccess;
use fermata_collab::{DocumentView, EditError, KeyedOutcome};
use fermata_store::{Channel, ChannelId, CreationKey, Repository, RepositoryRole, UserId, Version};
use serde::{Deserialize, Serialize};

use crate::HttpState;
use crate::error::ApiError;
use crate::forward;
use crate::policy::{Access, CreationGrant, DocumentGrant, ListGrant, Routes, never_cached};

pub(crate) fn routes() -> Routes {
    use RepositoryRole::{Admin, Editor, Viewer};
    // A document's read routes take its client tokens; nothing else does.
    let read = Access::Document {
        need: Viewer,
        client_tokens: true,
    };
    let read_members_only = Access::Document {
        need: Viewer,
        client_tokens: false,
    };
    let write = Access::Document {
        need: Editor,
        client_tokens: false,
    };
    let admin = Access::Document {
        need: Admin,
        client_tokens: false,
    };
    Routes::new()
        .post("/api/v1/documents", Access::CreateDocument, create)
        .get("/api/v1/documents", Access::ListDocuments, list)
        .get("/api/v1/documents/by-slug", Access::DocumentBySlug, by_slug)
        .get("/api/v1/documents/{id}", read, read_document)
        .patch("/api/v1/documents/{id}", write, rename)
        .delete("/api/v1/documents/{id}", admin, delete)
        .put("/api/v1/documents/{id}/text", write, rewrite)
        .get("/api/v1/documents/{id}/state", read, state)
        .post("/api/v1/documents/{id}/updates", write, updates)
        .post("/api/v1/documents/{id}/client-tokens", admin, client_token)
        .post("/api/v1/documents/{id}/archive", admin, archive)
        .post("/api/v1/documents/{id}/restore", admin, restore)
        .get(
            "/api/v1/documents/{id}/children",
            read_members_only,
            children,
        )
        .get("/api/v1/documents/{id}/versions", read, versions)
        .post(
            "/api/v1/documents/{id}/versions/{version}/restore",
            write,
            restore_version,
        )
        .get("/api/v1/openapi.json", Access::Public, openapi)
}

/// The OpenAPI description of this API, kept beside the code it describes.
const OPENAPI: &str = include_str!("openapi.json");

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

/// A document's metadata and counters.
#[derive(Debug, Serialize)]
struct ChannelView {
    id: String,
    repository: String,
    title: String,
    slug: String,
    parent: Option<String>,
    archived_at: Option<String>,
    created_at: String,
    updated_at: String,
    revision: i64,
    sequence: i64,
    epoch: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<DescriptionView>,
}

#[derive(Debug, Serialize)]
struct DescriptionView {
    text: String,
    revision: i64,
    source_plan_revision: i64,
    generator_version: String,
    projected_at: String,
}

impl From<&Channel> for ChannelView {
    fn from(channel: &Channel) -> Self {
        ChannelView {
            id: channel.id.to_string(),
            repository: channel.repository.to_string(),
            title: channel.title.clone(),
            slug: channel.slug.to_string(),
            parent: channel.parent.as_ref().map(ToString::to_string),
            archived_at: channel.archived_at.map(|t| t.to_string()),
            created_at: channel.created_at.to_string(),
            updated_at: channel.updated_at.to_string(),
            revision: channel.revision,
            sequence: channel.sequence,
            epoch: channel.epoch,
            description: channel.description.as_ref().map(|d| DescriptionView {
                text: d.text.clone(),
                revision: d.revision,
                source_plan_revision: d.source_plan_revision,
                generator_version: d.generator_version.clone(),
                projected_at: d.projected_at.to_string(),
            }),
        }
    }
}

/// A document with its canonical text.
#[derive(Debug, Serialize)]
struct DocumentBody {
    #[serde(flatten)]
    channel: ChannelView,
    text: String,
    source_hash: String,
}

impl From<&DocumentView> for DocumentBody {
    fn from(view: &DocumentView) -> Self {
        DocumentBody {
            channel: ChannelView::from(&view.channel),
            text: view.text.clone(),
            source_hash: view.source_hash.clone(),
        }
    }
}

/// Query parameters, with a malformed query answered as a JSON error like every other.
pub(crate) struct ApiQuery<T>(pub(crate) T);

impl<T: serde::de::DeserializeOwned, S: Send + Sync> axum::extract::FromRequestParts<S>
    for ApiQuery<T>
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(value)| ApiQuery(value))
            // Dropped on purpose: axum's rejection quotes the query, and the answer is enough.
            .map_err(|_| ApiError::bad_request("a query parameter is missing or not valid"))
    }
}

/// A document ID given in a request body: malformed is bad input, not a missing document.
fn parse_body_id(id: &str) -> Result<ChannelId, ApiError> {
    // Dropped on purpose: the answer says what a document ID is.
    ChannelId::parse(id).map_err(|_| ApiError::bad_request("a document ID is a UUID"))
}

pub(crate) async fn json_body<T: serde::de::DeserializeOwned>(
    request: Request,
) -> Result<T, ApiError> {
    let (_, bytes) = json_bytes(request).await?;
    parse_json(&bytes)
}

/// The parts of a request whose body is JSON, and the body's bytes (16 MiB at most).
async fn json_bytes(request: Request) -> Result<(Parts, Bytes), ApiError> {
    let json = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !json {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "json_required",
            "send application/json",
        ));
    }
    let (parts, body) = request.into_parts();
    // Dropped on purpose: reading stops only at the limit, which the answer names.
    let bytes = axum::body::to_bytes(body, 16 << 20).await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            "the body is too large",
        )
    })?;
    Ok((parts, bytes))
}

fn parse_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|error| {
        ApiError::bad_request(format!(
            "the body is not the expected JSON (line {}, column {})",
            error.line(),
            error.column()
        ))
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    repository: String,
    title: String,
    parent: Option<String>,
    /// Only with an `Idempotency-Key`: the document's first text.
    text: Option<String>,
}

async fn create(
    State(state): State<HttpState>,
    grant: CreationGrant,
    request: Request,
) -> Result<Response, ApiError> {
    let key = idempotency_key(request.headers())?;
    let (parts, bytes) = json_bytes(request).await?;
    let body: CreateBody = parse_json(&bytes)?;
    let repository = Repository::new(body.repository)?;
    let parent = body.parent.as_deref().map(parse_body_id).transpose()?;
    let CreationGrant::Granted {
        repository: granted,
        creates,
        principal,
    } = grant
    else {
        return Err(ApiError::forbidden("no access policy grants this"));
    };
    if granted != repository {
        return Err(ApiError::forbidden("no access policy grants this"));
    }
    let documents = &state.documents;
    // In a cluster, a document with a parent or a key is created by the member that writes its
    // shard, which checks the caller's access again.
    let route = documents
        .route_of_new(&repository, key.as_ref(), parent.as_ref())
        .await?;
    if let Some(elsewhere) = forward::elsewhere_by(route, &parts.headers) {
        let request = Request::from_parts(parts, Body::from(bytes));
        return Ok(forward::send_elsewhere(&state, elsewhere, request).await);
    }
    if creates {
        documents
            .repositories()
            .create(&principal.user, &repository)
            .await?;
    }
    match key {
        None => {
            if body.text.is_some() {
                return Err(ApiError::bad_request(
                    "a document created with text needs an Idempotency-Key header",
                ));
            }
            let channel = documents.create(repository, body.title, parent).await?;
            let view = documents.read(&channel.id).await?;
            Ok((
                StatusCode::CREATED,
                etag(&view.channel),
                Json(DocumentBody::from(&view)),
            )
                .into_response())
        }
        Some(key) => {
            let text = body.text.unwrap_or_default();
            let outcome = documents
                .create_with_key(
                    repository,
                    key,
                    body.title,
                    parent,
                    &text,
                    &principal.user.id,
                )
                .await?;
            let (status, channel) = match outcome {
                KeyedOutcome::Created(channel) => (StatusCode::CREATED, channel),
                KeyedOutcome::Repeated(channel) => (StatusCode::OK, channel),
                KeyedOutcome::AnotherCaller => {
                    return Err(ApiError::new(
                        StatusCode::CONFLICT,
                        "idempotency_key_in_use",
                        "this Idempotency-Key was used in this repository by another caller; use another key",
                    ));
                }
                KeyedOutcome::AnotherBody => {
                    return Err(ApiError::new(
                        StatusCode::CONFLICT,
                        "idempotency_key_reused",
                        "this Idempotency-Key was used with another title, parent or text; nothing changed",
                    ));
                }
            };
            let view = documents.read(&channel.id).await?;
            Ok((status, etag(&view.channel), Json(DocumentBody::from(&view))).into_response())
        }
    }
}

fn idempotency_key(headers: &HeaderMap) -> Result<Option<CreationKey>, ApiError> {
    match headers.get("idempotency-key") {
        None => Ok(None),
        Some(value) => {
            // Dropped on purpose: the answer says what is wrong with the header.
            let text = value
                .to_str()
                .map_err(|_| ApiError::bad_request("the Idempotency-Key header is not text"))?;
            Ok(Some(CreationKey::new(text)?))
        }
    }
}

/// The query of a list of documents, and of a search, which lists the documents it finds.
#[derive(Deserialize)]
pub(crate) struct ListQuery {
    /// Resolved by the authorization layer, which chose the list's scope from it.
    #[serde(rename = "repository")]
    _repository: Option<String>,
    #[serde(default)]
    pub(crate) archived: bool,
    pub(crate) limit: Option<usize>,
    pub(crate) cursor: Option<String>,
}

#[derive(Serialize)]
struct ListBody {
    documents: Vec<ChannelView>,
    next_cursor: Option<String>,
}

async fn list(
    State(state): State<HttpState>,
    grant: ListGrant,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<ListBody>, ApiError> {
    let limit = query.limit.unwrap_or(50).clamp(1, 500);
    let page = state
        .documents
        .list(&grant.scope, query.archived, limit, query.cursor.as_deref())
        .await?;
    Ok(Json(ListBody {
        documents: page.documents.iter().map(ChannelView::from).collect(),
        next_cursor: page.next,
    }))
}

/// The `ETag` of a document at a storage revision.
fn etag(channel: &Channel) -> [(header::HeaderName, HeaderValue); 1] {
    let value = HeaderValue::from_str(&format!("\"{}\"", channel.revision))
        .expect("a number is a header value");
    [(header::ETAG, value)]
}

/// The revision `If-Match` names: `None` without the header or with `*`. A value that names no
/// revision of this server's matches none.
fn if_match(headers: &HeaderMap) -> Option<i64> {
    let value = headers.get(header::IF_MATCH)?;
    let text = value.to_str().unwrap_or_default().trim();
    if text == "*" {
        return None;
    }
    let tag = text.split(',').next().unwrap_or_default().trim();
    let tag = tag.strip_prefix("W/").unwrap_or(tag);
    Some(
        tag.strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'))
            .and_then(|t| t.parse().ok())
            .unwrap_or(-1),
    )
}

/// An edit refusal as an answer: 412 with the current revision for a stale `If-Match`.
fn edit_refused(error: EditError) -> Response {
    match error {
        EditError::Stale { current } => {
            #[derive(Serialize)]
            struct Stale<'a> {
                error: StaleInner<'a>,
                current_revision: i64,
            }
            #[derive(Serialize)]
            struct StaleInner<'a> {
                code: &'a str,
                message: String,
            }
            let body = Stale {
                error: StaleInner {
                    code: "precondition_failed",
                    message: format!(
                        "the document is at revision {current}, not the one If-Match names; nothing changed"
                    ),
                },
                current_revision: current,
            };
            let tag = HeaderValue::from_str(&format!("\"{current}\""))
                .expect("a number is a header value");
            (
                StatusCode::PRECONDITION_FAILED,
                [(header::ETAG, tag)],
                Json(body),
            )
                .into_response()
        }
        EditError::Refused(refused) => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            refused.code(),
            format!("{refused}; nothing changed"),
        )
        .into_response(),
        EditError::Store(error) => ApiError::from(error).into_response(),
    }
}

async fn by_slug(
    State(state): State<HttpState>,
    grant: DocumentGrant,
) -> Result<Response, ApiError> {
    let view = state.documents.read(grant.id()).await?;
    Ok((etag(&view.channel), Json(DocumentBody::from(&view))).into_response())
}

async fn read_document(
    State(state): State<HttpState>,
    grant: DocumentGrant,
) -> Result<Response, ApiError> {
    let view = state.documents.read(grant.id()).await?;
    Ok((etag(&view.channel), Json(DocumentBody::from(&view))).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RenameBody {
    title: String,
}

async fn rename(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    request: Request,
) -> Result<Response, Response> {
    let expected = if_match(request.headers());
    let body: RenameBody = json_body(request)
        .await
        .map_err(IntoResponse::into_response)?;
    let channel = state
        .documents
        .rename(grant.id(), body.title, expected)
        .await
        .map_err(edit_refused)?;
    Ok((etag(&channel), Json(ChannelView::from(&channel))).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TextBody {
    text: String,
}

async fn rewrite(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    request: Request,
) -> Result<Response, Response> {
    let expected = if_match(request.headers());
    let body: TextBody = json_body(request)
        .await
        .map_err(IntoResponse::into_response)?;
    state
        .documents
        .rewrite_at(grant.id(), body.text, grant.caller.user_id(), expected)
        .await
        .map_err(edit_refused)?;
    let view = state
        .documents
        .read(grant.id())
        .await
        .map_err(|e| ApiError::from(e).into_response())?;
    Ok((etag(&view.channel), Json(DocumentBody::from(&view))).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StateQuery {
    /// A v1 Yjs state vector, base64 (standard or URL-safe, padded or not).
    state_vector: Option<String>,
}

fn decode_base64(text: &str) -> Option<Vec<u8>> {
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let trimmed = text.trim_end_matches('=');
    STANDARD_NO_PAD
        .decode(trimmed)
        .or_else(|_| URL_SAFE_NO_PAD.decode(trimmed))
        .ok()
}

async fn state(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    ApiQuery(query): ApiQuery<StateQuery>,
) -> Result<Response, Response> {
    let vector = match query.state_vector {
        Some(text) => match decode_base64(&text) {
            Some(vector) => Some(vector),
            None => {
                return Err(ApiError::bad_request("state_vector is not base64").into_response());
            }
        },
        None => None,
    };
    let (bytes, revision) = state
        .documents
        .state(grant.id(), vector)
        .await
        .map_err(|error| match error {
            EditError::Refused(_) => {
                ApiError::bad_request("state_vector is not a Yjs state vector").into_response()
            }
            other => edit_refused(other),
        })?;
    let tag =
        HeaderValue::from_str(&format!("\"{revision}\"")).expect("a number is a header value");
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            ),
            (header::ETAG, tag),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        bytes,
    )
        .into_response())
}

async fn updates(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    request: Request,
) -> Result<Response, Response> {
    let limit = state.documents.rooms().settings().max_message_bytes;
    let bytes = axum::body::to_bytes(request.into_body(), limit)
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                "the update is larger than this server accepts",
            )
            .into_response()
        })?;
    if bytes.is_empty() {
        return Err(ApiError::bad_request("send a Yjs update (v1) as the body").into_response());
    }
    let channel = state
        .documents
        .apply_update(grant.id(), bytes.to_vec(), grant.caller.user_id())
        .await
        .map_err(edit_refused)?;
    Ok((etag(&channel), Json(ChannelView::from(&channel))).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientTokenBody {
    access: String,
    /// Seconds; an hour when absent.
    ttl: Option<u64>,
}

#[derive(Serialize)]
struct ClientTokenView {
    token: String,
    document: String,
    access: &'static str,
    expires_at: String,
}

async fn client_token(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    request: Request,
) -> Result<Response, ApiError> {
    let body: ClientTokenBody = json_body(request).await?;
    let access = ClientAccess::parse(&body.access)
        .ok_or_else(|| ApiError::bad_request("access is \"read\" or \"write\""))?;
    let issuer = grant
        .caller
        .user_id()
        .ok_or_else(|| ApiError::forbidden("a client token cannot mint client tokens"))?;
    let ttl = Duration::from_secs(body.ttl.unwrap_or(3600));
    let minted = state
        .accounts
        .mint_client_token(grant.id(), access, ttl, &issuer)?;
    let view = ClientTokenView {
        token: minted.token.expose().to_owned(),
        document: grant.id().to_string(),
        access: access.as_str(),
        expires_at: minted.expires_at.to_string(),
    };
    Ok(never_cached((StatusCode::CREATED, Json(view))))
}

async fn archive(
    State(state): State<HttpState>,
    grant: DocumentGrant,
) -> Result<Json<ChannelView>, ApiError> {
    Ok(Json(ChannelView::from(
        &state.documents.archive(grant.id()).await?,
    )))
}

async fn restore(
    State(state): State<HttpState>,
    grant: DocumentGrant,
) -> Result<Json<ChannelView>, ApiError> {
    Ok(Json(ChannelView::from(
        &state.documents.restore(grant.id()).await?,
    )))
}

async fn delete(
    State(state): State<HttpState>,
    grant: DocumentGrant,
) -> Result<StatusCode, ApiError> {
    state.documents.delete(grant.id()).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
struct ChildrenQuery {
    #[serde(default)]
    archived: bool,
}

async fn children(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    ApiQuery(query): ApiQuery<ChildrenQuery>,
) -> Result<Json<Vec<ChannelView>>, ApiError> {
    let children = state.documents.children(grant.id(), query.archived).await?;
    Ok(Json(children.iter().map(ChannelView::from).collect()))
}

#[derive(Deserialize)]
struct VersionsQuery {
    limit: Option<usize>,
}

/// One editing session of a document's activity history.
#[derive(Serialize)]
struct VersionView {
    number: i64,
    /// The name of the member credited; absent for server and Planner edits.
    author: Option<String>,
    revision: i64,
    source_hash: String,
    started_at: String,
    ended_at: String,
    /// Shown only while it still describes the session's source.
    summary: Option<String>,
    /// The complete canonical text the session left.
    text: String,
}

impl VersionView {
    fn new(version: &Version, names: &HashMap<UserId, String>) -> Self {
        VersionView {
            number: version.number,
            author: version.author.as_ref().and_then(|a| names.get(a).cloned()),
            revision: version.revision,
            source_hash: version.source_hash.clone(),
            started_at: version.started_at.to_string(),
            ended_at: version.ended_at.to_string(),
            summary: version.current_summary().map(str::to_owned),
            text: version.text.clone(),
        }
    }
}

#[derive(Serialize)]
struct VersionsBody {
    versions: Vec<VersionView>,
}

async fn versions(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    ApiQuery(query): ApiQuery<VersionsQuery>,
) -> Result<Json<VersionsBody>, ApiError> {
    let limit = query.limit.unwrap_or(20).clamp(1, 100);
    let versions = state.documents.versions(grant.id(), limit).await?;
    let names: HashMap<UserId, String> = state
        .accounts
        .users()
        .await?
        .into_iter()
        .map(|user| (user.id, user.name.to_string()))
        .collect();
    Ok(Json(VersionsBody {
        versions: versions
            .iter()
            .map(|v| VersionView::new(v, &names))
            .collect(),
    }))
}

async fn restore_version(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    Path((_, version)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Response> {
    let number: i64 = version.parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such version").into_response()
    })?;
    let by = grant
        .caller
        .user_id()
        .ok_or_else(|| ApiError::forbidden("a client token cannot restore").into_response())?;
    state
        .documents
        .restore_version_at(grant.id(), number, by, if_match(&headers))
        .await
        .map_err(edit_refused)?;
    let view = state
        .documents
        .read(grant.id())
        .await
        .map_err(|e| ApiError::from(e).into_response())?;
    Ok((etag(&view.channel), Json(DocumentBody::from(&view))).into_response())
}
