//! What the document page's forms do, around the editor: rename (editors), archive, restore and
//! delete (admins), a history session's text shown with a form to restore it (reading it is for
//! every member, restoring it for editors). Each form posts, with the session's CSRF token, to a
//! route of its own under `/documents/{id}` that calls the same service as the documents API and
//! answers with a redirect to the page the person came from; what the services refuse is shown
//! as a page saying why.
//!
//! The pages have no script and run under the document pages' strict policy.

use axum::Form;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use fermata_collab::EditError;
use fermata_crypto::csrf_token;
use fermata_store::{ErrorKind, RepositoryRole, StoreError};
use maud::html;
use serde::Deserialize;

use crate::HttpState;
use crate::document_page::{message_page, page_path, plain_shell, strict_page};
use crate::error::{ApiError, RequestFailure, attach};
use crate::home_page::repository_path;
use crate::policy::{Access, Caller, DocumentGrant, Routes};

/// History sessions the page lists and a session is looked up among.
pub(crate) const HISTORY: usize = 20;

pub(crate) fn routes() -> Routes {
    use RepositoryRole::{Admin, Editor, Viewer};
    let page = |need| Access::Document {
        need,
        client_tokens: false,
    };
    Routes::new()
        .post("/documents/{id}/rename", page(Editor), rename)
        .post("/documents/{id}/archive", page(Admin), archive)
        .post("/documents/{id}/restore", page(Admin), restore)
        .post("/documents/{id}/delete", page(Admin), delete)
        .get("/documents/{id}/history/{version}", page(Viewer), session)
        .post(
            "/documents/{id}/history/{version}/restore",
            page(Editor),
            restore_session,
        )
}

/// A storage failure, or a refusal of the services, as a page.
fn failed(error: StoreError) -> Response {
    let status = match error.kind() {
        ErrorKind::Missing => StatusCode::NOT_FOUND,
        ErrorKind::Invalid | ErrorKind::Conflict => StatusCode::BAD_REQUEST,
        _ => {
            let failure = RequestFailure::new(error);
            return attach(
                ApiError::unavailable("the document cannot be changed just now").into_response(),
                failure,
            );
        }
    };
    message_page(status, "Not done", &format!("{error}."))
}

fn edit_failed(error: EditError) -> Response {
    match error {
        EditError::Store(error) => failed(error),
        other => message_page(StatusCode::BAD_REQUEST, "Not done", &format!("{other}.")),
    }
}

#[derive(Deserialize)]
struct RenameForm {
    title: String,
}

async fn rename(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    Form(form): Form<RenameForm>,
) -> Response {
    match state
        .documents
        .rename(grant.id(), form.title.trim().to_owned(), None)
        .await
    {
        Ok(document) => Redirect::to(&page_path(&document)).into_response(),
        Err(error) => edit_failed(error),
    }
}

async fn archive(State(state): State<HttpState>, grant: DocumentGrant) -> Response {
    match state.documents.archive(grant.id()).await {
        Ok(document) => Redirect::to(&page_path(&document)).into_response(),
        Err(error) => failed(error),
    }
}

async fn restore(State(state): State<HttpState>, grant: DocumentGrant) -> Response {
    match state.documents.restore(grant.id()).await {
        Ok(document) => Redirect::to(&page_path(&document)).into_response(),
        Err(error) => failed(error),
    }
}

async fn delete(State(state): State<HttpState>, grant: DocumentGrant) -> Response {
    match state.documents.delete(grant.id()).await {
        Ok(()) => Redirect::to(&repository_path(&grant.channel.repository)).into_response(),
        Err(error) => failed(error),
    }
}

/// A history session's text, with the form that restores it (the confirmation the page's
/// history links to).
async fn session(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    Path((_, number)): Path<(String, String)>,
) -> Response {
    let missing = || {
        message_page(
            StatusCode::NOT_FOUND,
            "Not found",
            "There is no such session.",
        )
    };
    let Ok(number) = number.parse::<i64>() else {
        return missing();
    };
    let versions = match state.documents.versions(grant.id(), HISTORY).await {
        Ok(versions) => versions,
        Err(error) => return failed(error),
    };
    let Some(version) = versions.into_iter().find(|v| v.number == number) else {
        return missing();
    };
    let document = &grant.channel;
    let csrf = match &grant.caller {
        Caller::User(principal) => principal
            .session()
            .map(|context| csrf_token(&context.secret))
            .unwrap_or_default(),
        Caller::Client(_) => String::new(),
    };
    let title = format!("{} · session {number}", document.title);
    let body = html! {
        h1 { (document.title) ": session " (number) }
        p.note {
            a href=(page_path(document)) { "Back to the document" }
            " · from " (version.started_at.to_string()) " to " (version.ended_at.to_string())
        }
        @if let Some(summary) = version.current_summary() { p { (summary) } }
        h2 { "The text this session left" }
        pre.text #session-text { (version.text) }
        @if grant.role >= RepositoryRole::Editor && document.archived_at.is_none() {
            form method="post" action={ "/documents/" (document.id) "/history/" (number) "/restore" } {
                input type="hidden" name="csrf" value=(csrf);
                p { "Restoring replaces the document's text with this session's, for everyone editing it. The current text stays in the history." }
                button type="submit" #confirm-restore { "Restore this text" }
            }
        }
    };
    strict_page(StatusCode::OK, plain_shell(&title, &body))
}

async fn restore_session(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    Path((_, number)): Path<(String, String)>,
) -> Response {
    let Some(by) = grant.caller.user_id() else {
        return message_page(StatusCode::FORBIDDEN, "Not allowed", "Sign in to restore.");
    };
    let Ok(number) = number.parse::<i64>() else {
        return message_page(
            StatusCode::NOT_FOUND,
            "Not found",
            "There is no such session.",
        );
    };
    match state
        .documents
        .restore_version_at(grant.id(), number, by, None)
        .await
    {
        Ok(document) => Redirect::to(&page_path(&document)).into_response(),
        Err(error) => edit_failed(error),
    }
}
