//! `GET /`: the signed-in home. It lists the repositories the caller belongs to, with their
//! role, a page at a time (a keyset page, `?after=` the last name shown), and the documents
//! most recently changed in them, with links to the account page and, for a `system_admin`, the
//! schema administrator page. A visitor who is not signed in is sent to the login form.
//!
//! The page has no script and runs under the document pages' strict policy.

use axum::extract::{FromRequestParts, Query, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use fermata_store::{DocumentScope, Repository, Role};
use maud::html;
use serde::Deserialize;

use crate::HttpState;
use crate::auth::{AuthRejection, Authenticated};
use crate::document_page::{page_path, plain_shell, strict_page};
use crate::error::{ApiError, RequestFailure, attach};
use crate::policy::{Access, Routes};

/// Repositories on one page of the home.
const REPOSITORIES_PER_PAGE: usize = 25;
/// Documents under "Recently changed".
const RECENT_DOCUMENTS: usize = 10;

pub(crate) fn routes() -> Routes {
    Routes::new().get("/", Access::Public, home)
}

#[derive(Deserialize)]
struct HomeQuery {
    /// The last repository of the previous page.
    after: Option<String>,
}

/// The address of a repository's page.
pub(crate) fn repository_path(repository: &Repository) -> String {
    format!("/r/{repository}")
}

async fn home(State(state): State<HttpState>, request: Request) -> Response {
    let (mut parts, _) = request.into_parts();
    let caller = match Authenticated::from_request_parts(&mut parts, &state).await {
        Ok(Authenticated(caller)) => caller,
        Err(AuthRejection::Error(error)) => return error.into_response(),
        Err(_) => return Redirect::to("/login").into_response(),
    };
    let Query(query) =
        Query::<HomeQuery>::try_from_uri(&parts.uri).unwrap_or(Query(HomeQuery { after: None }));
    let after = query.after.and_then(|name| Repository::new(name).ok());
    let repositories = state.documents.repositories();
    let gathered = async {
        let mut mine = repositories
            .of_member(&caller.user.id, after.as_ref(), REPOSITORIES_PER_PAGE + 1)
            .await?;
        let more = mine.len() > REPOSITORIES_PER_PAGE;
        mine.truncate(REPOSITORIES_PER_PAGE);
        let recent = state
            .documents
            .list(
                &DocumentScope::MemberOf(caller.user.id.clone()),
                false,
                RECENT_DOCUMENTS,
                None,
            )
            .await?;
        Ok::<_, fermata_store::StoreError>((mine, more, recent.documents))
    };
    let (mine, more, recent) = match gathered.await {
        Ok(gathered) => gathered,
        Err(error) => {
            let failure = RequestFailure::new(error);
            return attach(
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "the home page cannot be read just now",
                )
                .into_response(),
                failure,
            );
        }
    };
    let admin = caller.user.has_role(Role::SystemAdmin);
    let body = html! {
        h1 { "Fermata" }
        nav aria-label="Your places" {
            p { "Signed in as " strong { (caller.user.name) } ". "
                a href="/account" { "Your account" }
                @if admin { " · " a href="/admin/schema" { "Schema administration" } }
            }
        }
        h2 { "Your repositories" }
        @if mine.is_empty() && after.is_none() {
            p.note #no-repositories { "You are not a member of any repository yet. An admin of one can add you; or create one under your name through the API." }
        } @else {
            ul #repositories {
                @for (record, role) in &mine {
                    li { a href=(repository_path(&record.name)) { (record.name.to_string()) } " " span.note { "(" (role.as_str()) ")" } }
                }
            }
            @if more {
                @if let Some((last, _)) = mine.last() {
                    p { a href={ "/?after=" (last.name.to_string()) } rel="next" { "More repositories" } }
                }
            }
            @if after.is_some() { p { a href="/" { "Back to the first repositories" } } }
        }
        h2 { "Recently changed" }
        @if recent.is_empty() {
            p.note { "No documents yet." }
        } @else {
            ul #recent {
                @for document in &recent {
                    li {
                        a href=(page_path(document)) { (document.title) }
                        " " span.note { "in " (document.repository.to_string()) ", " (document.updated_at.to_string()) }
                    }
                }
            }
        }
    };
    strict_page(StatusCode::OK, plain_shell("Home", &body))
}
