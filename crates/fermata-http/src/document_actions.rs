//! What the document page's forms do, around the editor: rename (editors), archive, restore and
//! delete (admins), a history session's page (what it changed against the session before it as
//! a line diff, and the text it left) with a form to restore it (reading it is for every member,
//! restoring it for editors). Each form posts, with the session's CSRF token, to a
//! route of its own under `/documents/{id}` that calls the same service as the documents API and
//! answers with a redirect to the page the person came from; what the services refuse is shown
//! as a page saying why.
//!
//! The pages have no script; like every page they are drawn in the one skeleton of
//! [`crate::view`]. A session's page is read into a [`SessionPage`] and drawn by
//! [`render_session`].

use axum::Form;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use fermata_collab::{EditError, LineDiff};
use fermata_crypto::csrf_token;
use fermata_store::{Channel, ErrorKind, RepositoryRole, StoreError, UnixMillis, Version};
use maud::html;
use serde::Deserialize;

use crate::HttpState;
use crate::error::{ApiError, RequestFailure, attach};
use crate::policy::{Access, Caller, DocumentGrant, Routes};
use crate::view::{DIFF_STYLE, compare_path, diff_table, diff_texts, session_path, unavailable};
use crate::view::{HISTORY, Page, message_page, page_path, repository_path, time};

pub(crate) fn routes() -> Routes {
    use RepositoryRole::{Admin, Editor, Viewer};
    let page = |need| Access::Document {
        need,
        client_tokens: false,
    };
    Routes::pages()
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

/// What a history session's page shows.
#[derive(Debug)]
struct SessionPage {
    document: Channel,
    version: Version,
    /// The session before it, whose text the diff starts from; `None` for the first session.
    previous: Option<i64>,
    /// What the session changed: its text against the previous session's (or an empty one).
    diff: LineDiff,
    /// Whether the caller may restore it: an editor, on a document that is not archived.
    restorable: bool,
    csrf: String,
    /// The moment the page is drawn for: times are told relative to it.
    now: UnixMillis,
}

/// A history session's diff against the session before it and its text, with the form that
/// restores it (the confirmation the page's history links to).
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
    // One more than the page lists: the oldest listed session's predecessor.
    let mut versions = match state.documents.versions(grant.id(), HISTORY + 1).await {
        Ok(versions) => versions,
        Err(error) => return failed(error),
    };
    let Some(at) = versions
        .iter()
        .take(HISTORY)
        .position(|v| v.number == number)
    else {
        return missing();
    };
    let version = versions.swap_remove(at);
    // Sessions are numbered one after another, so the one before is `number - 1`.
    let previous = versions.into_iter().find(|v| v.number == number - 1);
    let before = previous
        .as_ref()
        .map(|v| v.text.clone())
        .unwrap_or_default();
    let diff = match diff_texts(before, version.text.clone()).await {
        Ok(diff) => diff,
        Err(error) => return unavailable(error, "the session cannot be shown just now"),
    };
    let csrf = match &grant.caller {
        Caller::User(principal) => principal
            .session()
            .map(|context| csrf_token(&context.secret))
            .unwrap_or_default(),
        Caller::Client(_) => String::new(),
    };
    let page = SessionPage {
        restorable: grant.role >= RepositoryRole::Editor && grant.channel.archived_at.is_none(),
        document: grant.channel,
        version,
        previous: previous.map(|v| v.number),
        diff,
        csrf,
        now: UnixMillis::now(),
    };
    render_session(&page).into_response()
}

fn render_session(page: &SessionPage) -> Page {
    let document = &page.document;
    let version = &page.version;
    let number = version.number;
    let body = html! {
        h1 { (document.title) ": session " (number) }
        p.note {
            a href=(page_path(document)) { "Back to the document" }
            " · from " (time(version.started_at, page.now)) " to " (time(version.ended_at, page.now))
            @if let Some(previous) = page.previous {
                " · " a #compare-session href={ (compare_path(document)) "?from=" (previous) "&to=" (number) } {
                    "Compare with another session"
                }
            }
        }
        @if let Some(summary) = version.current_summary() { p { (summary) } }
        @match page.previous {
            Some(previous) => { h2 { "Changes since session " (previous) } }
            None => { h2 { "Changes: the first session, from an empty text" } }
        }
        (diff_table(&page.diff, "session-diff"))
        h2 { "The text this session left" }
        pre.text #session-text { (version.text) }
        @if page.restorable {
            form method="post" action={ (session_path(document, number)) "/restore" } {
                input type="hidden" name="csrf" value=(page.csrf);
                p { "Restoring replaces the document's text with this session's, for everyone editing it. The current text stays in the history." }
                button type="submit" #confirm-restore { "Restore this text" }
            }
        }
    };
    Page::new(format!("{} · session {number}", document.title), body).style(DIFF_STYLE)
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

#[cfg(test)]
mod tests {
    use fermata_store::{ChannelId, UnixMillis};
    use fermata_store_testkit::fixtures;

    use super::*;

    fn session_page(restorable: bool) -> SessionPage {
        let id = ChannelId::parse("0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13").unwrap();
        SessionPage {
            document: fixtures::channel(&id.0, "acme/app"),
            version: Version {
                channel: id,
                number: 3,
                author: None,
                text: "# Plan <script>\n".to_owned(),
                revision: 4,
                source_hash: String::new(),
                started_at: UnixMillis(0),
                ended_at: UnixMillis(1),
                summary: None,
            },
            previous: Some(2),
            diff: fermata_collab::line_diff("# Plan\nDrop & go\n", "# Plan <script>\n"),
            restorable,
            csrf: "csrf-token".to_owned(),
            now: UnixMillis(0),
        }
    }

    #[test]
    fn a_session_shows_its_text_and_the_restore_form_only_to_who_may_restore() {
        let html = render_session(&session_page(true)).snapshot();
        for expected in [
            "<title>Plan · session 3 · Fermata</title>",
            "<pre class=\"text\" id=\"session-text\"># Plan &lt;script&gt;\n</pre>",
            "href=\"/d/acme/app/plan\"",
            "action=\"/documents/0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13/history/3/restore\"",
            "value=\"csrf-token\"",
        ] {
            assert!(html.contains(expected), "{expected} is not in {html}");
        }
        let viewer = render_session(&session_page(false)).snapshot();
        assert!(!viewer.contains("confirm-restore"), "{viewer}");
    }

    #[test]
    fn a_session_shows_what_it_changed_against_the_session_before_it() {
        let html = render_session(&session_page(false)).snapshot();
        for expected in [
            "<h2>Changes since session 2</h2>",
            "<table class=\"diff\" id=\"session-diff\">",
            "<del># Plan</del>",
            "<del>Drop &amp; go</del>",
            "<ins># Plan &lt;script&gt;</ins>",
            "href=\"/assets/history.css\"",
            "id=\"compare-session\" \
             href=\"/documents/0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13/history/compare?from=2&amp;to=3\"",
        ] {
            assert!(html.contains(expected), "{expected} is not in {html}");
        }
        assert!(
            html.find("session-diff").unwrap() < html.find("session-text").unwrap(),
            "the diff comes before the whole text: {html}"
        );
        assert!(!html.contains("style=\""), "{html}");

        let mut first = session_page(false);
        first.previous = None;
        first.diff = fermata_collab::line_diff("", &first.version.text);
        let html = render_session(&first).snapshot();
        assert!(
            html.contains("<h2>Changes: the first session, from an empty text</h2>"),
            "{html}"
        );
        assert!(!html.contains("compare-session"), "{html}");
    }
}
