//! The documents JSON API under `/api/v1/documents`, described by `/api/v1/openapi.json`.

use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use fermata_collab::DocumentView;
use std::collections::HashMap;

use fermata_store::{
    Channel, ChannelFilter, ChannelId, CreationKey, Repository, Slug, UserId, Version,
};
use serde::{Deserialize, Serialize};

use crate::HttpState;
use crate::auth::Authenticated;
use crate::error::ApiError;

pub(crate) fn routes() -> Router<HttpState> {
    Router::new()
        .route("/api/v1/documents", post(create).get(list))
        .route("/api/v1/documents/by-slug", get(by_slug))
        .route(
            "/api/v1/documents/{id}",
            get(read).patch(rename).delete(delete),
        )
        .route("/api/v1/documents/{id}/text", put(rewrite))
        .route("/api/v1/documents/{id}/archive", post(archive))
        .route("/api/v1/documents/{id}/restore", post(restore))
        .route("/api/v1/documents/{id}/children", get(children))
        .route("/api/v1/documents/{id}/versions", get(versions))
        .route(
            "/api/v1/documents/{id}/versions/{version}/restore",
            post(restore_version),
        )
        .route("/api/v1/openapi.json", get(openapi))
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

pub(crate) fn parse_id(id: &str) -> Result<ChannelId, ApiError> {
    // Dropped on purpose: text that is not a document ID names no document.
    ChannelId::parse(id)
        .map_err(|_| ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such document"))
}

pub(crate) async fn json_body<T: serde::de::DeserializeOwned>(
    request: Request,
) -> Result<T, ApiError> {
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
    // Dropped on purpose: reading stops only at the limit, which the answer names.
    let bytes = axum::body::to_bytes(request.into_body(), 16 << 20)
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                "the body is too large",
            )
        })?;
    serde_json::from_slice(&bytes).map_err(|error| {
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
    _caller: Authenticated,
    request: Request,
) -> Result<Response, ApiError> {
    let key = idempotency_key(request.headers())?;
    let body: CreateBody = json_body(request).await?;
    let repository = Repository::new(body.repository)?;
    let parent = body.parent.as_deref().map(parse_body_id).transpose()?;
    let documents = &state.documents;
    match key {
        None => {
            if body.text.is_some() {
                return Err(ApiError::bad_request(
                    "a document created with text needs an Idempotency-Key header",
                ));
            }
            let channel = documents.create(repository, body.title, parent).await?;
            let view = documents.read(&channel.id).await?;
            Ok((StatusCode::CREATED, Json(DocumentBody::from(&view))).into_response())
        }
        Some(key) => {
            let text = body.text.unwrap_or_default();
            let (channel, created) = documents
                .create_with_key(repository, key, body.title, parent, &text)
                .await?;
            let view = documents.read(&channel.id).await?;
            let status = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok((status, Json(DocumentBody::from(&view))).into_response())
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

#[derive(Deserialize)]
struct ListQuery {
    repository: Option<String>,
    #[serde(default)]
    archived: bool,
    limit: Option<usize>,
    cursor: Option<String>,
}

#[derive(Serialize)]
struct ListBody {
    documents: Vec<ChannelView>,
    next_cursor: Option<String>,
}

async fn list(
    State(state): State<HttpState>,
    _caller: Authenticated,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<ListBody>, ApiError> {
    let filter = ChannelFilter {
        repository: query.repository.map(Repository::new).transpose()?,
        include_archived: query.archived,
    };
    let limit = query.limit.unwrap_or(50).clamp(1, 500);
    let page = state
        .documents
        .list(&filter, limit, query.cursor.as_deref())
        .await?;
    Ok(Json(ListBody {
        documents: page.documents.iter().map(ChannelView::from).collect(),
        next_cursor: page.next,
    }))
}

#[derive(Deserialize)]
struct SlugQuery {
    repository: String,
    slug: String,
}

async fn by_slug(
    State(state): State<HttpState>,
    _caller: Authenticated,
    ApiQuery(query): ApiQuery<SlugQuery>,
) -> Result<Json<DocumentBody>, ApiError> {
    let repository = Repository::new(query.repository)?;
    let not_found = || {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no document has that slug",
        )
    };
    // Dropped on purpose: text that is not a slug names no document.
    let slug = Slug::new(query.slug).map_err(|_| not_found())?;
    let channel = state
        .documents
        .resolve(&repository, &slug)
        .await?
        .ok_or_else(not_found)?;
    Ok(Json(DocumentBody::from(
        &state.documents.read(&channel.id).await?,
    )))
}

async fn read(
    State(state): State<HttpState>,
    _caller: Authenticated,
    Path(id): Path<String>,
) -> Result<Json<DocumentBody>, ApiError> {
    let id = parse_id(&id)?;
    Ok(Json(DocumentBody::from(&state.documents.read(&id).await?)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RenameBody {
    title: String,
}

async fn rename(
    State(state): State<HttpState>,
    _caller: Authenticated,
    Path(id): Path<String>,
    request: Request,
) -> Result<Json<ChannelView>, ApiError> {
    let id = parse_id(&id)?;
    let body: RenameBody = json_body(request).await?;
    Ok(Json(ChannelView::from(
        &state.documents.rename(&id, body.title).await?,
    )))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TextBody {
    text: String,
}

async fn rewrite(
    State(state): State<HttpState>,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
    request: Request,
) -> Result<Json<DocumentBody>, ApiError> {
    let id = parse_id(&id)?;
    let body: TextBody = json_body(request).await?;
    state
        .documents
        .rewrite(&id, body.text, Some(caller.user.id))
        .await?;
    Ok(Json(DocumentBody::from(&state.documents.read(&id).await?)))
}

async fn archive(
    State(state): State<HttpState>,
    _caller: Authenticated,
    Path(id): Path<String>,
) -> Result<Json<ChannelView>, ApiError> {
    let id = parse_id(&id)?;
    Ok(Json(ChannelView::from(
        &state.documents.archive(&id).await?,
    )))
}

async fn restore(
    State(state): State<HttpState>,
    _caller: Authenticated,
    Path(id): Path<String>,
) -> Result<Json<ChannelView>, ApiError> {
    let id = parse_id(&id)?;
    Ok(Json(ChannelView::from(
        &state.documents.restore(&id).await?,
    )))
}

async fn delete(
    State(state): State<HttpState>,
    _caller: Authenticated,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(&id)?;
    state.documents.delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
struct ChildrenQuery {
    #[serde(default)]
    archived: bool,
}

async fn children(
    State(state): State<HttpState>,
    _caller: Authenticated,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<ChildrenQuery>,
) -> Result<Json<Vec<ChannelView>>, ApiError> {
    let id = parse_id(&id)?;
    let children = state.documents.children(&id, query.archived).await?;
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
    _caller: Authenticated,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<VersionsQuery>,
) -> Result<Json<VersionsBody>, ApiError> {
    let id = parse_id(&id)?;
    let limit = query.limit.unwrap_or(20).clamp(1, 100);
    let versions = state.documents.versions(&id, limit).await?;
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
    Authenticated(caller): Authenticated,
    Path((id, version)): Path<(String, String)>,
) -> Result<Json<DocumentBody>, ApiError> {
    let id = parse_id(&id)?;
    let number: i64 = version
        .parse()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such version"))?;
    state
        .documents
        .restore_version(&id, number, caller.user.id)
        .await?;
    Ok(Json(DocumentBody::from(&state.documents.read(&id).await?)))
}
