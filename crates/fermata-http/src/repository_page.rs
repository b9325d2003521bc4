//! `GET /r/OWNER/NAME`: a repository's page for its members. Its documents, most recently
//! changed first, a page at a time, with a title filter (`?q=`) and the archived ones on their
//! own (`?archived=1`), all in query parameters; a "New document" form for editors; and, for
//! admins, the members with their roles and forms to add, change and remove them. The forms post
//! to routes of their own (with the session's CSRF token, as every form does) that call the same
//! services as the repositories API, and answer with a redirect. Its search box sends words to
//! the results page (`/search`) with the repository, searching the text of its documents.
//!
//! The page has no script; like every page it is drawn in the one skeleton of [`crate::view`].
//! The handler reads what it shows into a [`RepositoryPage`]; [`render`] draws it.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use fermata_collab::NamedMember;
use fermata_crypto::csrf_token;
use fermata_store::{
    Channel, DocumentScope, ErrorKind, Repository, RepositoryRole, StoreError, UnixMillis, UserName,
};
use maud::html;
use serde::Deserialize;

use crate::HttpState;
use crate::policy::{Access, RepositoryGrant, Routes};
use crate::view::{self, Page, message_page, page_path, repository_path, search_box, time};

/// Documents on one page of the list.
const PER_PAGE: usize = 50;
/// Documents read from storage at a time while filtering.
const READ_AT_A_TIME: usize = 200;

pub(crate) fn routes() -> Routes {
    use RepositoryRole::{Admin, Editor, Viewer};
    Routes::pages()
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

#[derive(Debug, Deserialize, Default)]
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

impl ListQuery {
    fn archived(&self) -> bool {
        self.archived.as_deref() == Some("1")
    }
}

/// A failure to read or change storage, as the page answers it.
fn unavailable(error: StoreError) -> Response {
    view::unavailable(error, "the repository cannot be read just now")
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
    let archived = query.archived();
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

/// What a repository's page shows.
#[derive(Debug)]
struct RepositoryPage {
    repository: Repository,
    role: RepositoryRole,
    csrf: String,
    /// The title filter, as typed.
    filter: String,
    /// Whether the list is of the archived documents.
    archived: bool,
    /// One page of the documents that match.
    documents: Vec<Channel>,
    /// The address of the list's next page, when there is one.
    next: Option<String>,
    /// The members with their roles, for an admin; nobody else sees them.
    members: Vec<NamedMember>,
    /// The moment the page is drawn for: times are told relative to it.
    now: UnixMillis,
}

async fn repository_page(
    State(state): State<HttpState>,
    grant: RepositoryGrant,
    Query(query): Query<ListQuery>,
) -> Response {
    let (documents, next) = match matching(&state, &grant, &query).await {
        Ok(found) => found,
        // A cursor this server did not give.
        Err(error) if error.kind() == ErrorKind::Invalid => {
            return message_page(
                StatusCode::BAD_REQUEST,
                "No such page",
                "This list has no such page: start again from its first page.",
            );
        }
        Err(error) => return unavailable(error),
    };
    let role = grant.standing.role;
    let members = if role == RepositoryRole::Admin {
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
    let page = RepositoryPage {
        csrf: grant
            .principal
            .session()
            .map(|context| csrf_token(&context.secret))
            .unwrap_or_default(),
        next: next.map(|cursor| next_page(&grant.repository, &query, cursor)),
        archived: query.archived(),
        filter: query.q,
        repository: grant.repository,
        role,
        documents,
        members,
        now: UnixMillis::now(),
    };
    render(&page).into_response()
}

/// The address of the list's page after `cursor`, with the same filter and view.
fn next_page(repository: &Repository, query: &ListQuery, cursor: String) -> String {
    let mut pairs = vec![("after", cursor)];
    if !query.q.is_empty() {
        pairs.push(("q", query.q.clone()));
    }
    if query.archived() {
        pairs.push(("archived", "1".to_owned()));
    }
    format!(
        "{}?{}",
        repository_path(repository),
        serde_urlencoded::to_string(&pairs).unwrap_or_default()
    )
}

fn render(page: &RepositoryPage) -> Page {
    let here = repository_path(&page.repository);
    let name = page.repository.to_string();
    let role = page.role;
    let archived = page.archived;
    let body = html! {
        h1 { (name) }
        p.note { a href="/" { "Home" } " · " a href="/account" { "Your account" } " · your role: " (role.as_str()) " · " a #export href={ "/api/v1/repositories/" (name) "/export" } download { "Download as files (.tar.gz)" } }
        (search_box(Some(&page.repository), "", None))
        @if role >= RepositoryRole::Editor {
            h2 { "New document" }
            form method="post" action={ (here) "/documents" } {
                input type="hidden" name="csrf" value=(page.csrf);
                label for="new-title" { "Title" }
                input #new-title type="text" name="title" required maxlength="200";
                div { button type="submit" { "Create document" } }
            }
        }
        h2 { @if archived { "Archived documents" } @else { "Documents" } }
        form role="search" method="get" action=(here) {
            label for="filter" { "Titles containing" }
            input #filter type="text" name="q" value=(page.filter);
            @if archived { input type="hidden" name="archived" value="1"; }
            div { button type="submit" { "Filter" } }
        }
        p {
            @if archived { a href=(here) #current-view { "Show the current documents" } }
            @else { a href={ (here) "?archived=1" } #archived-view { "Show the archived documents" } }
        }
        @if page.documents.is_empty() {
            p.note #no-documents { "No documents here." }
        } @else {
            ul #documents {
                @for document in &page.documents {
                    li {
                        a href=(page_path(document)) { (document.title) }
                        " " span.note { "changed " (time(document.updated_at, page.now)) }
                    }
                }
            }
        }
        @if let Some(link) = &page.next { p { a href=(link) rel="next" { "More documents" } } }
        @if role == RepositoryRole::Admin { (members(page, &here)) }
    };
    Page::new(name, body)
}

/// The members with forms to change their role or remove them, and the form to add one.
fn members(page: &RepositoryPage, here: &str) -> maud::Markup {
    let csrf = &page.csrf;
    html! {
        h2 { "Members" }
        table #members {
            thead { tr { th { "Member" } th { "Role" } th { "" } } }
            tbody {
                @for named in &page.members {
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
}

/// The answer to a form the services refused: a page saying why, with the way back.
fn refused(here: &str, error: StoreError) -> Response {
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

#[cfg(test)]
mod tests {
    use fermata_store::{Member, UnixMillis, UserId};

    use super::*;

    fn page(role: RepositoryRole) -> RepositoryPage {
        let repository = Repository::new("acme/app").unwrap();
        RepositoryPage {
            members: vec![NamedMember {
                member: Member {
                    repository: repository.clone(),
                    user: UserId("id-ada".to_owned()),
                    role: RepositoryRole::Editor,
                    added_at: UnixMillis(0),
                },
                name: Some(UserName::new("ada").unwrap()),
            }],
            repository,
            role,
            csrf: "csrf-token".to_owned(),
            filter: "plan <".to_owned(),
            archived: true,
            documents: Vec::new(),
            next: Some("/r/acme/app?after=1.x&archived=1".to_owned()),
            now: UnixMillis(0),
        }
    }

    #[test]
    fn an_admin_gets_the_members_and_a_viewer_only_the_list() {
        let admin = render(&page(RepositoryRole::Admin)).snapshot();
        for expected in [
            "<h2>Archived documents</h2>",
            "value=\"plan &lt;\"",
            "<input type=\"hidden\" name=\"archived\" value=\"1\">",
            "<a id=\"current-view\" href=\"/r/acme/app\">",
            "<p class=\"note\" id=\"no-documents\">",
            "href=\"/r/acme/app?after=1.x&amp;archived=1\" rel=\"next\"",
            "action=\"/r/acme/app/documents\"",
            "<option value=\"editor\" selected>editor</option>",
            "action=\"/r/acme/app/members/ada/remove\"",
            "<input type=\"hidden\" name=\"repository\" value=\"acme/app\">",
            "Search this repository's documents",
        ] {
            assert!(admin.contains(expected), "{expected} is not in {admin}");
        }
        let viewer = render(&page(RepositoryRole::Viewer)).snapshot();
        for absent in ["id=\"members\"", "Create document", "<script"] {
            assert!(!viewer.contains(absent), "{absent} is in {viewer}");
        }
    }

    #[test]
    fn the_next_page_keeps_the_filter_and_the_view() {
        let repository = Repository::new("acme/app").unwrap();
        let query = ListQuery {
            q: "a b".to_owned(),
            archived: Some("1".to_owned()),
            after: None,
        };
        assert_eq!(
            next_page(&repository, &query, "5.id".to_owned()),
            "/r/acme/app?after=5.id&q=a+b&archived=1"
        );
        assert_eq!(
            next_page(&repository, &ListQuery::default(), "5.id".to_owned()),
            "/r/acme/app?after=5.id"
        );
    }
}
