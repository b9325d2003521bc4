//! A document's page, for signed-in members of its repository: `GET /d/{id}` by document ID,
//! and `GET /d/OWNER/NAME/SLUG` by its place, where a former slug redirects to the current one.
//! Both are the one route `/d/{*document}`, whose access ([`policy::Access::DocumentPage`])
//! resolves either form and hands the page a [`DocumentGrant`] with the caller's role. The page
//! shows the document's title and the live editor of its MDX source (the bundle built from
//! `web/`, see [`crate::assets`]), which reaches the document over `/sync` with the page's
//! session cookie; a viewer's editor is read-only. Whoever cannot read the document gets the
//! same "not found" page as for a document that does not exist ([`view::as_page`]). The handler
//! reads what the page shows into a [`DocumentPage`]; [`render`] draws it.
//!
//! The page is drawn in the pages' one skeleton under their one Content-Security-Policy (see
//! [`crate::view`]): the editor's script and style sheet are files of this origin, and
//! CodeMirror, which writes its base theme into a `<style>` element at run time, takes the
//! answer's nonce from the editor's `data-style-nonce` attribute. Everything the editor needs is
//! in data attributes of its mount element.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use fermata_accounts::Principal;
use fermata_crypto::csrf_token;
use fermata_store::{Channel, ErrorChain, RepositoryRole, StoreError, UnixMillis, Version};
use maud::{Markup, html};

use crate::HttpState;
use crate::error::ApiError;
use crate::policy::{self, Caller, DocumentGrant, Routes};
use crate::view::{self, HISTORY, Nonce, Page, page_path, time};
use crate::view::{compare_path, session_path};

pub(crate) fn routes() -> Routes {
    Routes::pages().get(
        "/d/{*document}",
        policy::Access::DocumentPage,
        document_page,
    )
}

/// What the page lets the caller do with the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Edit,
    View,
}

impl Access {
    /// An editor or admin edits; a viewer views.
    fn of(role: RepositoryRole) -> Self {
        if role >= RepositoryRole::Editor {
            Access::Edit
        } else {
            Access::View
        }
    }
}

/// What the page shows.
#[derive(Debug)]
struct DocumentPage {
    document: Channel,
    user_name: String,
    /// The caller's user ID: the editor keeps its document in the browser under it (with the
    /// document's ID and Yjs epoch), so another user of the same browser never sends it.
    user_id: String,
    csrf: String,
    access: Access,
    /// Whether the caller administers the repository: archive, restore and delete.
    admin: bool,
    children: Vec<Channel>,
    /// The latest history sessions, newest first.
    history: Vec<Version>,
    /// The moment the page is drawn for: times are told relative to it.
    now: UnixMillis,
}

/// The page: the document's title, the editor's mount (or why there is none), and what is
/// around it.
fn render(page: &DocumentPage, nonce: Nonce) -> Page {
    let document = &page.document;
    let id = document.id.to_string();
    let readonly = page.access == Access::View;
    let body = html! {
        header.document-head {
            h1 #document-title { (document.title) }
            p.note {
                a href=(page_path(document)) { (document.repository.to_string()) " / " (document.slug.to_string()) }
                " · " a href="/" { "Home" }
                " · " a href="/account" { "Your account" }
                @if readonly { " · " span #read-only { "You can read this document, not edit it." } }
            }
        }
        @if document.archived_at.is_some() {
            p.error role="alert" #archived { "This document is archived: restore it to edit it." }
        } @else {
            div #editor data-editor
                data-room=(id)
                data-sync-url="/sync"
                data-images-url={ "/api/v1/documents/" (id) "/images" }
                data-csrf=(page.csrf)
                data-user-name=(page.user_name)
                data-user-id=(page.user_id)
                data-epoch=(document.epoch)
                data-readonly=(if readonly { "true" } else { "false" })
                data-style-nonce=(nonce.as_str()) {
                noscript { p.error { "The editor needs JavaScript." } }
            }
        }
        (around(page))
    };
    Page::new(document.title.as_str(), body)
        .style("editor.css")
        .script("editor.js")
        .body_class("document-page")
        .with_nonce(nonce)
}

/// What is around the editor: rename, archive, restore and delete for those allowed, the
/// children, and the history with a link to each session's page (its diff and text) and, with
/// two sessions or more, to the page comparing any two.
fn around(page: &DocumentPage) -> Markup {
    let document = &page.document;
    let action = |what: &str| format!("/documents/{}/{what}", document.id);
    let archived = document.archived_at.is_some();
    html! {
        section.document-around aria-label="About this document" {
            @if page.access == Access::Edit && !archived {
                h2 { "Rename" }
                form method="post" action=(action("rename")) {
                    input type="hidden" name="csrf" value=(page.csrf);
                    label for="rename-title" { "Title" }
                    input #rename-title type="text" name="title" value=(document.title) required maxlength="200";
                    div { button type="submit" { "Rename" } }
                }
            }
            @if page.admin {
                h2 { "Manage" }
                @if archived {
                    form.inline method="post" action=(action("restore")) {
                        input type="hidden" name="csrf" value=(page.csrf);
                        button type="submit" #restore-document { "Restore" }
                    }
                    " "
                    form.inline method="post" action=(action("delete")) {
                        input type="hidden" name="csrf" value=(page.csrf);
                        button type="submit" #delete-document { "Delete for good" }
                    }
                } @else {
                    p.note { "Archive the document to stop its editing; an archived document can be restored or deleted." }
                    form.inline method="post" action=(action("archive")) {
                        input type="hidden" name="csrf" value=(page.csrf);
                        button type="submit" #archive-document { "Archive" }
                    }
                }
            }
            h2 { "Children" }
            @if page.children.is_empty() {
                p.note { "No child documents." }
            } @else {
                ul #children {
                    @for child in &page.children { li { a href=(page_path(child)) { (child.title) } } }
                }
            }
            h2 { "History" }
            @if page.history.is_empty() {
                p.note { "No editing sessions yet." }
            } @else {
                ol #history reversed {
                    @for version in &page.history {
                        li {
                            a href=(session_path(document, version.number)) {
                                "Session " (version.number)
                            }
                            " " span.note { "ended " (time(version.ended_at, page.now)) }
                            @if let Some(summary) = version.current_summary() { " — " (summary) }
                        }
                    }
                }
                @if page.history.len() > 1 {
                    p { a #compare-sessions href=(compare_path(document)) { "Compare two sessions" } }
                }
            }
        }
    }
}

async fn document_page(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    Path(named): Path<String>,
) -> Response {
    let Caller::User(caller) = &grant.caller else {
        return view::as_page(ApiError::forbidden("a page is for people").into_response());
    };
    // By place with a former slug (or another spelling): the current place.
    if named.contains('/') && named != page_path(&grant.channel).trim_start_matches("/d/") {
        return Redirect::to(&page_path(&grant.channel)).into_response();
    }
    match gather(&state, &grant, caller).await {
        Ok(page) => render(&page, Nonce::new()).into_response(),
        Err(error) => {
            tracing::error!(document = %grant.id(), error = %ErrorChain(&error), "could not read a document's page");
            view::message_page(
                StatusCode::SERVICE_UNAVAILABLE,
                "Document unavailable",
                "The document cannot be read just now. Try again shortly.",
            )
        }
    }
}

/// Reads what the page shows of the granted document to `caller`.
async fn gather(
    state: &HttpState,
    grant: &DocumentGrant,
    caller: &Principal,
) -> Result<DocumentPage, StoreError> {
    let id = grant.id();
    let children = state.documents.children(id, false).await?;
    let history = state.documents.versions(id, HISTORY).await?;
    Ok(DocumentPage {
        access: Access::of(grant.role),
        admin: grant.role == RepositoryRole::Admin,
        children,
        history,
        user_name: caller.user.name.to_string(),
        user_id: caller.user.id.to_string(),
        csrf: caller
            .session()
            .map(|context| csrf_token(&context.secret))
            .unwrap_or_default(),
        document: grant.channel.clone(),
        now: UnixMillis::now(),
    })
}

#[cfg(test)]
mod tests {
    //! The page's markup and policy: everything the editor reads is in data attributes and
    //! escaped, no script or style is inline, and every file it loads is an embedded asset.

    use fermata_store::UnixMillis;
    use fermata_store_testkit::fixtures;

    use super::*;

    fn document(title: &str) -> Channel {
        Channel {
            title: title.to_owned(),
            ..fixtures::channel("0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13", "acme/app")
        }
    }

    fn page(title: &str, access: Access) -> DocumentPage {
        DocumentPage {
            document: document(title),
            user_name: "ada \"<&>\"".to_owned(),
            user_id: "user-1".to_owned(),
            csrf: "csrf-token".to_owned(),
            access,
            admin: false,
            children: Vec::new(),
            history: Vec::new(),
            now: UnixMillis(0),
        }
    }

    #[test]
    fn the_mount_carries_everything_escaped_and_nothing_runs_inline() {
        let nonce = Nonce::new();
        let html = render(&page("Plan <script>", Access::Edit), nonce.clone()).snapshot();
        let style_nonce = format!("data-style-nonce=\"{}\"", nonce.as_str());
        for expected in [
            "data-room=\"0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13\"",
            "data-sync-url=\"/sync\"",
            "data-images-url=\"/api/v1/documents/0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13/images\"",
            "data-csrf=\"csrf-token\"",
            "data-user-name=\"ada &quot;&lt;&amp;&gt;&quot;\"",
            "data-user-id=\"user-1\"",
            "data-epoch=\"1\"",
            "data-readonly=\"false\"",
            &style_nonce,
            "Plan &lt;script&gt;",
            "<body class=\"document-page\">",
        ] {
            assert!(html.contains(expected), "{expected} is not in {html}");
        }
        // Scripts only by address, styles only by link: nothing for the policy to refuse.
        assert_eq!(html.matches("<script").count(), 1, "{html}");
        assert!(html.contains("<script defer src=\"/assets/editor.js\">"));
        assert!(!html.contains("<style"), "{html}");
        assert!(!html.contains("style=\""), "{html}");
        for name in ["page.css", "editor.css"] {
            assert!(html.contains(&format!("href=\"/assets/{name}\"")), "{html}");
        }

        let viewer = render(&page("Plan", Access::View), Nonce::new()).snapshot();
        assert!(viewer.contains("data-readonly=\"true\""), "{viewer}");
    }

    #[test]
    fn an_archived_document_has_no_editor() {
        let mut archived = page("Plan", Access::Edit);
        archived.document.archived_at = Some(UnixMillis(1));
        let html = render(&archived, Nonce::new()).snapshot();
        assert!(html.contains("id=\"archived\""), "{html}");
        assert!(!html.contains("data-editor"), "{html}");
    }

    #[test]
    fn the_page_is_answered_under_the_nonce_its_editor_carries() {
        let nonce = Nonce::new();
        let response = render(&page("Plan", Access::Edit), nonce.clone()).into_response();
        assert_eq!(
            response.headers()[axum::http::header::CONTENT_SECURITY_POLICY],
            view::content_security_policy(&nonce).as_str()
        );
    }

    #[test]
    fn two_sessions_or_more_can_be_compared() {
        let version = |number: i64| Version {
            channel: document("Plan").id,
            number,
            author: None,
            text: String::new(),
            revision: number,
            source_hash: String::new(),
            started_at: UnixMillis(0),
            ended_at: UnixMillis(0),
            summary: None,
        };
        let mut one = page("Plan", Access::View);
        one.history = vec![version(1)];
        let html = render(&one, Nonce::new()).snapshot();
        assert!(!html.contains("compare-sessions"), "{html}");
        let mut two = page("Plan", Access::View);
        two.history = vec![version(2), version(1)];
        let html = render(&two, Nonce::new()).snapshot();
        assert!(
            html.contains(
                "<a id=\"compare-sessions\" \
                 href=\"/documents/0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13/history/compare\">"
            ),
            "{html}"
        );
    }
}
