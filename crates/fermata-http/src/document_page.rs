//! A document's page, for signed-in members of its repository: `GET /d/{id}` by document ID,
//! and `GET /d/OWNER/NAME/SLUG` by its place, where a former slug redirects to the current one.
//! Both are the one route `/d/{*document}`, whose access ([`policy::Access::DocumentPage`])
//! resolves either form and hands the page a [`DocumentGrant`] with the caller's role. The page
//! shows the document's title and the live editor of its MDX source (the bundle built from
//! `web/`, see [`crate::assets`]), which reaches the document over `/sync` with the page's
//! session cookie; a viewer's editor is read-only. Whoever cannot read the document gets the
//! same "not found" page as for a document that does not exist ([`as_page`]).
//!
//! The page runs under a strict Content-Security-Policy: scripts and styles from this origin
//! only, no inline script, connections to this origin only (the WebSocket included), images from
//! this origin or `data:`/`blob:`. The one exception is a per-response nonce for style
//! elements: CodeMirror writes its base theme into a `<style>` element at run time, and takes
//! the nonce from the editor's `data-style-nonce` attribute. Everything the editor needs is in
//! data attributes of its mount element.

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use fermata_crypto::csrf_token;
use fermata_store::{Channel, ErrorChain, RepositoryRole, Version};
use maud::{DOCTYPE, Markup, html};

use crate::HttpState;
use crate::assets;
use crate::policy::{self, Caller, DocumentGrant, Routes};

pub(crate) fn routes() -> Routes {
    Routes::new().get(
        "/d/{*document}",
        policy::Access::DocumentPage,
        document_page,
    )
}

/// The canonical address of a document's page.
pub(crate) fn page_path(document: &Channel) -> String {
    format!("/d/{}/{}", document.repository, document.slug)
}

/// The colours people get in the editor: dark enough for white names on them.
const COLOURS: &[&str] = &[
    "#1f6fb4", "#c0392b", "#1e8449", "#7d3c98", "#a04000", "#117a8b", "#b03a7a", "#5d6d7e",
    "#2e4053", "#7e6b08",
];

/// A user's colour: the same for the same user on every page and in every session.
fn colour_of(user_id: &str) -> &'static str {
    let hash = user_id
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
    let index = usize::try_from(hash % COLOURS.len() as u64).unwrap_or_default();
    COLOURS[index]
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
    user_colour: &'static str,
    csrf: String,
    access: Access,
    /// Whether the caller administers the repository: archive, restore and delete.
    admin: bool,
    children: Vec<Channel>,
    /// The latest history sessions, newest first.
    history: Vec<Version>,
}

/// The policy of a page whose style elements carry `nonce`.
fn content_security_policy(nonce: &str) -> String {
    format!(
        "default-src 'self'; script-src 'self'; style-src 'self' 'nonce-{nonce}'; \
         img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
         form-action 'self'; frame-ancestors 'none'"
    )
}

/// A page with the shared look, the editor's files, and `body` in its main element.
fn shell(title: &str, body: &Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Fermata" }
                link rel="stylesheet" href=(assets::url("page.css"));
                link rel="stylesheet" href=(assets::url("editor.css"));
                script defer src=(assets::url("editor.js")) {}
            }
            body.document-page {
                main { (*body) }
            }
        }
    }
}

fn render(page: &DocumentPage, nonce: &str) -> Markup {
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
                data-user-colour=(page.user_colour)
                data-readonly=(if readonly { "true" } else { "false" })
                data-style-nonce=(nonce) {
                noscript { p.error { "The editor needs JavaScript." } }
            }
        }
        (around(page))
    };
    shell(&document.title, &body)
}

/// What is around the editor: rename, archive, restore and delete for those allowed, the
/// children, and the history with a link to each session's text.
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
                            a href={ "/documents/" (document.id) "/history/" (version.number) } {
                                "Session " (version.number)
                            }
                            " " span.note { "ended " (version.ended_at.to_string()) }
                            @if let Some(summary) = version.current_summary() { " — " (summary) }
                        }
                    }
                }
            }
        }
    }
}

/// A page with the shared look and no script, `body` in its main element.
pub(crate) fn plain_shell(title: &str, body: &Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Fermata" }
                link rel="stylesheet" href=(assets::url("page.css"));
            }
            body { main { (*body) } }
        }
    }
}

/// A page without script as an answer: never cached, under the strict policy.
pub(crate) fn strict_page(status: StatusCode, markup: Markup) -> Response {
    with_headers(status, markup, &uuid::Uuid::new_v4().simple().to_string())
}

/// A page saying why there is no document to show.
pub(crate) fn message_page(status: StatusCode, title: &str, text: &str) -> Response {
    let body = html! {
        h1 { (title) }
        p.error role="alert" { (text) }
        p { a href="/" { "Home" } " · " a href="/account" { "Your account" } }
    };
    strict_page(status, plain_shell(title, &body))
}

/// A failure to read or change storage, as a page answers it: 503 with `message`, the cause kept
/// for the log only.
pub(crate) fn unavailable(error: fermata_store::StoreError, message: &'static str) -> Response {
    let failure = crate::error::RequestFailure::new(error);
    crate::error::attach(
        crate::error::ApiError::unavailable(message).into_response(),
        failure,
    )
}

/// The page's answer: never cached (it carries the CSRF token), under its policy.
fn with_headers(status: StatusCode, markup: Markup, nonce: &str) -> Response {
    let mut response = (status, markup).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if let Ok(policy) = HeaderValue::from_str(&content_security_policy(nonce)) {
        headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    response
}

/// A refusal of the authorization layer on a page route, as a page: "not found" for what the
/// caller cannot read or what does not exist, "not allowed" for what their role does not allow.
/// Anything else (a redirect to the login form, say) is left as it is.
pub(crate) fn as_page(refusal: Response) -> Response {
    let json = refusal
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if !json {
        return refusal;
    }
    match refusal.status() {
        StatusCode::NOT_FOUND => message_page(
            StatusCode::NOT_FOUND,
            "Not found",
            "There is nothing at this address, or you are not a member of its repository.",
        ),
        StatusCode::FORBIDDEN => message_page(
            StatusCode::FORBIDDEN,
            "Not allowed",
            "Your role in this repository does not allow this.",
        ),
        _ => refusal,
    }
}

async fn document_page(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    Path(named): Path<String>,
) -> Response {
    let Caller::User(caller) = &grant.caller else {
        return as_page(crate::error::ApiError::forbidden("a page is for people").into_response());
    };
    // By place with a former slug (or another spelling): the current place.
    if named.contains('/') && named != page_path(&grant.channel).trim_start_matches("/d/") {
        return Redirect::to(&page_path(&grant.channel)).into_response();
    }
    let id = grant.id();
    let (children, history) = match (
        state.documents.children(id, false).await,
        state
            .documents
            .versions(id, crate::document_actions::HISTORY)
            .await,
    ) {
        (Ok(children), Ok(history)) => (children, history),
        (Err(error), _) | (_, Err(error)) => {
            tracing::error!(document = %id, error = %ErrorChain(&error), "could not read a document's page");
            return message_page(
                StatusCode::SERVICE_UNAVAILABLE,
                "Document unavailable",
                "The document cannot be read just now. Try again shortly.",
            );
        }
    };
    let page = DocumentPage {
        access: Access::of(grant.role),
        admin: grant.role == RepositoryRole::Admin,
        children,
        history,
        user_colour: colour_of(&caller.user.id.to_string()),
        user_name: caller.user.name.to_string(),
        csrf: caller
            .session()
            .map(|context| csrf_token(&context.secret))
            .unwrap_or_default(),
        document: grant.channel.clone(),
    };
    // A nonce per answer: 122 random bits, in characters a CSP nonce allows.
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    with_headers(StatusCode::OK, render(&page, &nonce), &nonce)
}

#[cfg(test)]
mod tests {
    //! The page's markup and policy: everything the editor reads is in data attributes and
    //! escaped, no script or style is inline, and every file it loads is an embedded asset.

    use fermata_store::{ChannelId, Repository, Slug, UnixMillis};

    use super::*;

    fn document(title: &str) -> Channel {
        Channel {
            id: ChannelId::parse("0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13").unwrap(),
            repository: Repository::new("acme/app").unwrap(),
            title: title.to_owned(),
            slug: Slug::new("plan").unwrap(),
            parent: None,
            archived_at: None,
            created_at: UnixMillis(0),
            updated_at: UnixMillis(0),
            revision: 1,
            sequence: 1,
            epoch: 1,
            description: None,
        }
    }

    fn page(title: &str, access: Access) -> DocumentPage {
        DocumentPage {
            document: document(title),
            user_name: "ada \"<&>\"".to_owned(),
            user_colour: colour_of("user-1"),
            csrf: "csrf-token".to_owned(),
            access,
            admin: false,
            children: Vec::new(),
            history: Vec::new(),
        }
    }

    #[test]
    fn the_mount_carries_everything_escaped_and_nothing_runs_inline() {
        let html = render(&page("Plan <script>", Access::Edit), "n0nce").into_string();
        for expected in [
            "data-room=\"0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13\"",
            "data-sync-url=\"/sync\"",
            "data-images-url=\"/api/v1/documents/0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13/images\"",
            "data-csrf=\"csrf-token\"",
            "data-user-name=\"ada &quot;&lt;&amp;&gt;&quot;\"",
            "data-readonly=\"false\"",
            "data-style-nonce=\"n0nce\"",
            "Plan &lt;script&gt;",
        ] {
            assert!(html.contains(expected), "{expected} is not in {html}");
        }
        // Scripts only by address, styles only by link: nothing for the policy to refuse.
        assert_eq!(html.matches("<script").count(), 1, "{html}");
        assert!(html.contains(&format!(
            "<script defer src=\"{}\">",
            assets::url("editor.js")
        )));
        assert!(!html.contains("<style"), "{html}");
        assert!(!html.contains("style=\""), "{html}");
        for name in ["page.css", "editor.css"] {
            assert!(html.contains(&format!("href=\"{}\"", assets::url(name))));
        }

        let viewer = render(&page("Plan", Access::View), "n0nce").into_string();
        assert!(viewer.contains("data-readonly=\"true\""), "{viewer}");
    }

    #[test]
    fn an_archived_document_has_no_editor() {
        let mut archived = page("Plan", Access::Edit);
        archived.document.archived_at = Some(UnixMillis(1));
        let html = render(&archived, "n0nce").into_string();
        assert!(html.contains("id=\"archived\""), "{html}");
        assert!(!html.contains("data-editor"), "{html}");
    }

    #[test]
    fn the_policy_allows_this_origin_and_the_nonce_only() {
        let policy = content_security_policy("n0nce");
        for directive in [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self' 'nonce-n0nce'",
            "img-src 'self' data: blob:",
            "connect-src 'self'",
            "object-src 'none'",
            "frame-ancestors 'none'",
        ] {
            assert!(policy.contains(directive), "{directive} is not in {policy}");
        }
        assert!(!policy.contains("unsafe"), "{policy}");
    }

    #[test]
    fn a_user_keeps_one_colour() {
        assert_eq!(colour_of("user-1"), colour_of("user-1"));
        let colours: std::collections::BTreeSet<&str> =
            (0..40).map(|n| colour_of(&format!("user-{n}"))).collect();
        assert!(colours.len() > 5, "{colours:?}");
        for colour in colours {
            assert!(COLOURS.contains(&colour));
        }
    }
}
