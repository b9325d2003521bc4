//! `GET /r/OWNER/NAME`: a repository's page for its members. Its documents, most recently
//! changed first, a page at a time, with a title filter (`?q=`) and the archived ones on their
//! own (`?archived=1`), all in query parameters; a "New document" form for editors; and, for
//! admins, the members with their roles and forms to add, change and remove them. The forms post
//! to routes of their own (with the session's CSRF token, as every form does) that call the same
//! services as the repositories API, and answer with a redirect.
//!
//! The page has no script and runs under the document pages' strict policy.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use fermata_collab::NamedMember;
use fermata_crypto::csrf_token;
use fermata_store::{Channel, DocumentScope, RepositoryRole, StoreError, UserName};
use maud::html;
use serde::Deserialize;

use crate::HttpState;
use crate::document_page::{self, message_page, page_path, plain_shell, strict_page};
use crate::home_page::repository_path;
use crate::policy::{Access, RepositoryGrant, Routes};

/// Documents on one page of the list.
const PER_PAGE: usize = 50;
/// Documents read from storage at a time while filtering.
const READ_AT_A_TIME: usize = 200;

pub(crate) fn routes() -> Routes {
    use RepositoryRole::{Admin, Editor, Viewer};
    Routes::new()
        .get(
            "/r/{owner}/{name}",
            Access::Repository { need: Viewer },
            repository_page,
        )
        .post(
            "/r/{owner}/{name}/documents",
            Access::Repository { need: Editor },
            new_document,
        )
        .post(
            "/r/{owner}/{name}/members",
            Access::Repository { need: Admin },
            set_member,
        )
        .post(
            "/r/{owner}/{name}/members/{user}/remove",
            Access::Repository { need: Admin },
            remove_member,
        )
}

#[derive(Deserialize, Default)]
struct ListQuery {
    /// Words the title contains, ignoring case.
    #[serde(default)]
    q: String,
    /// `1` for the archived documents.
    #[serde(default)]
    archived: Option<String>,
    /// Where the previous page stopped.
    after: Option<String>,
}

/// A failure to read or change storage, as the page answers it.
fn unavailable(error: StoreError) -> Response {
    document_page::unavailable(error, "the repository cannot be read just now")
}

/// The page's cursor after `document`: the documents list's own.
fn cursor_after(document: &Channel) -> String {
    format!("{}.{}", document.updated_at.0, document.id.0)
}

/// One page of the documents that match: read a storage page at a time until the page is full.
async fn matching(
    state: &HttpState,
    grant: &RepositoryGrant,
    query: &ListQuery,
) -> Result<(Vec<Channel>, Option<String>), StoreError> {
    let archived = query.archived.as_deref() == Some("1");
    let words = query.q.trim().to_lowercase();
    let scope = DocumentScope::Repository(grant.repository.clone());
    let mut shown = Vec::new();
    let mut cursor = query.after.clone();
    loop {
        let page = state
            .documents
            .list(&scope, archived, READ_AT_A_TIME, cursor.as_deref())
            .await?;
        for document in page.documents {
            let wanted = document.archived_at.is_some() == archived
                && (words.is_empty() || document.title.to_lowercase().contains(&words));
            if wanted {
                shown.push(document);
            }
        }
        if shown.len() > PER_PAGE {
            shown.truncate(PER_PAGE);
            let next = shown.last().map(cursor_after);
            return Ok((shown, next));
        }
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok((shown, None)),
        }
    }
}

async fn repository_page(
    State(state): State<HttpState>,
    grant: RepositoryGrant,
    Query(query): Query<ListQuery>,
) -> Response {
    let (documents, next) = match matching(&state, &grant, &query).await {
        Ok(found) => found,
        // A cursor this server did not give.
        Err(error) if error.kind() == fermata_store::ErrorKind::Invalid => {
            return message_page(
                StatusCode::BAD_REQUEST,
                "No such page",
                "This list has no such page: start again from its first page.",
            );
        }
        Err(error) => return unavailable(error),
    };
    let role = grant.standing.role;
    let members: Vec<NamedMember> = if role == RepositoryRole::Admin {
        match state
            .documents
            .repositories()
            .members(&grant.repository)
            .await
        {
            Ok(members) => members,
            Err(error) => return unavailable(error),
        }
    } else {
        Vec::new()
    };
    let csrf = grant
        .principal
        .session()
        .map(|context| csrf_token(&context.secret))
        .unwrap_or_default();
    let here = repository_path(&grant.repository);
    let archived = query.archived.as_deref() == Some("1");
    let name = grant.repository.to_string();
    let next_link = next.map(|cursor| {
        let mut pairs = vec![("after", cursor)];
        if !query.q.is_empty() {
            pairs.push(("q", query.q.clone()));
        }
        if archived {
            pairs.push(("archived", "1".to_owned()));
        }
        format!(
            "{here}?{}",
            serde_urlencoded::to_string(&pairs).unwrap_or_default()
        )
    });
    let body = html! {
        h1 { (name) }
        p.note { a href="/" { "Home" } " · " a href="/account" { "Your account" } " · your role: " (role.as_str()) " · " a #export href={ "/api/v1/repositories/" (name) "/export" } download { "Download as files (.tar.gz)" } }
        @if role >= RepositoryRole::Editor {
            h2 { "New document" }
            form method="post" action={ (here) "/documents" } {
                input type="hidden" name="csrf" value=(csrf);
                label for="new-title" { "Title" }
                input #new-title type="text" name="title" required maxlength="200";
                div { button type="submit" { "Create document" } }
            }
        }
        h2 { @if archived { "Archived documents" } @else { "Documents" } }
        form role="search" method="get" action=(here) {
            label for="filter" { "Titles containing" }
            input #filter type="text" name="q" value=(query.q);
            @if archived { input type="hidden" name="archived" value="1"; }
            div { button type="submit" { "Filter" } }
        }
        p {
            @if archived { a href=(here) #current-view { "Show the current documents" } }
            @else { a href={ (here) "?archived=1" } #archived-view { "Show the archived documents" } }
        }
        @if documents.is_empty() {
            p.note #no-documents { "No documents here." }
        } @else {
            ul #documents {
                @for document in &documents {
                    li {
                        a href=(page_path(document)) { (document.title) }
                        " " span.note { "changed " (document.updated_at.to_string()) }
                    }
                }
            }
        }
        @if let Some(link) = next_link { p { a href=(link) rel="next" { "More documents" } } }
        @if role == RepositoryRole::Admin {
            h2 { "Members" }
            table #members {
                thead { tr { th { "Member" } th { "Role" } th { "" } } }
                tbody {
                    @for named in &members {
                        @let user = named.name.as_ref().map_or_else(|| named.member.user.to_string(), ToString::to_string);
                        tr {
                            td { (user) }
                            td {
                                form.inline method="post" action={ (here) "/members" } {
                                    input type="hidden" name="csrf" value=(csrf);
                                    input type="hidden" name="user" value=(user);
                                    select id={ "role-" (user) } name="role" aria-label={ "Role of " (user) } {
                                        @for option in ["viewer", "editor", "admin"] {
                                            option value=(option) selected[option == named.member.role.as_str()] { (option) }
                                        }
                                    }
                                    " " button type="submit" aria-label={ "Change the role of " (user) } { "Change" }
                                }
                            }
                            td {
                                form.inline method="post" action={ (here) "/members/" (user) "/remove" } {
                                    input type="hidden" name="csrf" value=(csrf);
                                    button type="submit" aria-label={ "Remove " (user) } { "Remove" }
                                }
                            }
                        }
                    }
                }
            }
            h3 { "Add a member" }
            form method="post" action={ (here) "/members" } {
                input type="hidden" name="csrf" value=(csrf);
                label for="member-name" { "User name" }
                input #member-name type="text" name="user" required;
                label for="member-role" { "Role" }
                select #member-role name="role" {
                    option value="viewer" { "viewer" }
                    option value="editor" { "editor" }
                    option value="admin" { "admin" }
                }
                div { button type="submit" { "Add member" } }
            }
        }
    };
    strict_page(StatusCode::OK, plain_shell(&name, &body))
}

/// The answer to a form the services refused: a page saying why, with the way back.
fn refused(here: &str, error: StoreError) -> Response {
    use fermata_store::ErrorKind;
    let status = match error.kind() {
        ErrorKind::Missing => StatusCode::NOT_FOUND,
        ErrorKind::Invalid | ErrorKind::Conflict => StatusCode::BAD_REQUEST,
        _ => return unavailable(error),
    };
    message_page(
        status,
        "Not done",
        &format!("{error}. Go back to {here} and try again."),
    )
}

#[derive(Deserialize)]
struct NewDocumentForm {
    title: String,
}

async fn new_document(
    State(state): State<HttpState>,
    grant: RepositoryGrant,
    Form(form): Form<NewDocumentForm>,
) -> Response {
    let here = repository_path(&grant.repository);
    match state
        .documents
        .create(grant.repository.clone(), form.title, None)
        .await
    {
        Ok(document) => Redirect::to(&page_path(&document)).into_response(),
        Err(error) => refused(&here, error),
    }
}

#[derive(Deserialize)]
struct MemberForm {
    user: String,
    role: String,
}

async fn set_member(
    State(state): State<HttpState>,
    grant: RepositoryGrant,
    Form(form): Form<MemberForm>,
) -> Response {
    let here = repository_path(&grant.repository);
    let (Ok(name), Some(role)) = (
        UserName::new(form.user.trim()),
        RepositoryRole::parse(&form.role),
    ) else {
        return message_page(
            StatusCode::BAD_REQUEST,
            "Not done",
            "Name a user and a role (viewer, editor or admin).",
        );
    };
    match state
        .documents
        .repositories()
        .set_member(&grant.repository, &name, role)
        .await
    {
        Ok(member) => {
            state
                .accounts
                .access_watch()
                .recheck_user(&member.user)
                .await;
            tracing::info!(by = %grant.principal.user.name, repository = %grant.repository, user = %name, role = %role, "set a member's role");
            Redirect::to(&here).into_response()
        }
        Err(error) => refused(&here, error),
    }
}

async fn remove_member(
    State(state): State<HttpState>,
    grant: RepositoryGrant,
    Path((_, _, user)): Path<(String, String, String)>,
) -> Response {
    let here = repository_path(&grant.repository);
    let Ok(name) = UserName::new(&user) else {
        return message_page(
            StatusCode::NOT_FOUND,
            "Not done",
            "There is no such member.",
        );
    };
    match state
        .documents
        .repositories()
        .remove_member(&grant.repository, &name)
        .await
    {
        Ok(true) => {
            if let Ok(user) = state.accounts.user_named(name.as_str()).await {
                state.accounts.access_watch().recheck_user(&user.id).await;
            }
            tracing::info!(by = %grant.principal.user.name, repository = %grant.repository, user = %name, "removed a member");
            Redirect::to(&here).into_response()
        }
        Ok(false) => message_page(
            StatusCode::NOT_FOUND,
            "Not done",
            "There is no such member.",
        ),
        Err(error) => refused(&here, error),
    }
}
