//! Full-text search of documents: `GET /api/v1/search?q=&repository=&archived=&limit=&cursor=`,
//! described in `openapi.json`.
//!
//! The route's access is a list's (`Access::ListDocuments`): without `repository` it searches
//! the caller's repositories; naming one, the authorization layer answers 404 to whoever may not
//! read it (exactly as for a repository that does not exist) and records a `system_admin`'s
//! override in its audit before the search runs. The store then decides again, in the search's
//! own query, what the caller may read, so no hit, snippet or count of another repository can
//! reach them. A hit's snippet is a list of plain-text pieces, each marked whether it matched:
//! JSON strings, which a page escapes as it shows them, never markup.

use axum::Json;
use axum::extract::State;
use fermata_store::{SearchHit, SnippetPart};
use serde::{Deserialize, Serialize};

use crate::HttpState;
use crate::auth::Authenticated;
use crate::documents_api::{ApiQuery, ListQuery};
use crate::error::ApiError;
use crate::policy::{Access, ListGrant, Routes};

pub(crate) fn routes() -> Routes {
    Routes::new().get("/api/v1/search", Access::ListDocuments, search)
}

/// What to search for; the rest of the query is a list's ([`ListQuery`]).
#[derive(Deserialize)]
struct SearchText {
    q: String,
}

/// One piece of a snippet.
#[derive(Debug, Serialize)]
struct SnippetView {
    text: String,
    matched: bool,
}

impl From<&SnippetPart> for SnippetView {
    fn from(part: &SnippetPart) -> Self {
        SnippetView {
            text: part.text.clone(),
            matched: part.matched,
        }
    }
}

/// One document found.
#[derive(Debug, Serialize)]
struct HitView {
    id: String,
    repository: String,
    title: String,
    slug: String,
    archived_at: Option<String>,
    updated_at: String,
    score: f64,
    snippet: Vec<SnippetView>,
}

impl From<&SearchHit> for HitView {
    fn from(hit: &SearchHit) -> Self {
        HitView {
            id: hit.id.to_string(),
            repository: hit.repository.to_string(),
            title: hit.title.clone(),
            slug: hit.slug.to_string(),
            archived_at: hit.archived_at.map(|t| t.to_string()),
            updated_at: hit.updated_at.to_string(),
            score: hit.score,
            snippet: hit.snippet.iter().map(SnippetView::from).collect(),
        }
    }
}

#[derive(Serialize)]
struct SearchBody {
    results: Vec<HitView>,
    next_cursor: Option<String>,
}

async fn search(
    State(state): State<HttpState>,
    grant: ListGrant,
    Authenticated(principal): Authenticated,
    ApiQuery(SearchText { q }): ApiQuery<SearchText>,
    ApiQuery(params): ApiQuery<ListQuery>,
) -> Result<Json<SearchBody>, ApiError> {
    let limit = params.limit.unwrap_or(20).clamp(1, 100);
    let page = state
        .documents
        .search(
            &principal.user.id,
            &grant.scope,
            &q,
            params.archived,
            limit,
            params.cursor.as_deref(),
        )
        .await?;
    Ok(Json(SearchBody {
        results: page.hits.iter().map(HitView::from).collect(),
        next_cursor: page.next,
    }))
}
