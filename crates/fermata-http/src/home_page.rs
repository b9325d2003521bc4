//! `GET /`: the signed-in home. It lists the repositories the caller belongs to, with their
//! role, a page at a time (a keyset page, `?after=` the last name shown), and the documents
//! most recently changed in them, with links to the account page and, for a `system_admin`, the
//! schema administrator page. A visitor who is not signed in is sent to the login form.
//!
//! Its "New repository" form posts to `POST /r` (with the session's CSRF token, as every form
//! does), which creates a repository as the repositories API does: under the caller's own user
//! name, or under any owner for a `system_admin`, the creator becoming its admin. A created
//! repository answers with a redirect to its page; a name that is invalid, not the caller's to
//! take, or taken answers with the home page again, the form keeping what was typed and saying
//! why beside it.
//!
//! Its search box sends words to the results page (`/search`), searching every repository of
//! the caller.
//!
//! The page has no script; like every page it is drawn in the one skeleton of [`crate::view`].
//! The handler reads what it shows into a [`HomePage`]; [`render`] draws it.

use axum::Form;
use axum::extract::{FromRequestParts, Query, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use fermata_accounts::Principal;
use fermata_collab::may_create;
use fermata_crypto::csrf_token;
use fermata_store::{
    Channel, DocumentScope, ErrorKind, Repository, RepositoryRole, Role, StoreError, UnixMillis,
    User,
};
use maud::html;
use serde::Deserialize;

use crate::HttpState;
use crate::auth::{AuthRejection, Authenticated};
use crate::policy::{Access, Routes};
use crate::view::{Page, page_path, repository_path, search_box, time, unavailable};

/// Repositories on one page of the home.
const REPOSITORIES_PER_PAGE: usize = 25;
/// Documents under "Recently changed".
const RECENT_DOCUMENTS: usize = 10;
/// The longest owner and name the form takes: a user name's limit, and room for a long name
/// within a repository's 200 characters.
const MAX_OWNER: usize = 64;
const MAX_NAME: usize = 100;

pub(crate) fn routes() -> Routes {
    Routes::pages()
        .get("/", Access::Public, home)
        .post("/r", Access::SignedIn, create_repository)
}

#[derive(Deserialize)]
struct HomeQuery {
    /// The last repository of the previous page.
    after: Option<String>,
}

/// The "New repository" form as the page shows it: empty, or what was typed and why it was
/// refused.
#[derive(Debug, Default, Deserialize)]
struct RepositoryForm {
    /// Sent by a `system_admin`'s form only; others create under their own name.
    #[serde(default)]
    owner: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(skip)]
    refused: Option<String>,
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
    home_page(
        &state,
        &caller,
        after.as_ref(),
        StatusCode::OK,
        RepositoryForm::default(),
    )
    .await
}

/// What the home page shows.
#[derive(Debug)]
struct HomePage {
    user: String,
    /// Whether the caller is a `system_admin`: a link to the administrator page, and any owner
    /// in the form.
    admin: bool,
    csrf: String,
    /// The page's repositories of the caller, with their role there.
    repositories: Vec<(Repository, RepositoryRole)>,
    /// Whether more repositories follow.
    more: bool,
    /// The last repository of the previous page, on a page after the first.
    after: Option<Repository>,
    /// The documents most recently changed in the caller's repositories.
    recent: Vec<Channel>,
    form: RepositoryForm,
    /// The moment the page is drawn for: times are told relative to it.
    now: UnixMillis,
}

/// The home page for `caller`, from the repository after `after`, with `form` in it.
async fn home_page(
    state: &HttpState,
    caller: &Principal,
    after: Option<&Repository>,
    status: StatusCode,
    form: RepositoryForm,
) -> Response {
    match gather(state, caller, after, form).await {
        Ok(page) => (status, render(&page)).into_response(),
        Err(error) => unavailable(error, "the home page cannot be read just now"),
    }
}

/// Reads what the home page shows `caller`.
async fn gather(
    state: &HttpState,
    caller: &Principal,
    after: Option<&Repository>,
    form: RepositoryForm,
) -> Result<HomePage, StoreError> {
    let mut repositories = state
        .documents
        .repositories()
        .of_member(&caller.user.id, after, REPOSITORIES_PER_PAGE + 1)
        .await?;
    let more = repositories.len() > REPOSITORIES_PER_PAGE;
    repositories.truncate(REPOSITORIES_PER_PAGE);
    let recent = state
        .documents
        .list(
            &DocumentScope::MemberOf(caller.user.id.clone()),
            false,
            RECENT_DOCUMENTS,
            None,
        )
        .await?;
    Ok(HomePage {
        user: caller.user.name.to_string(),
        admin: caller.user.has_role(Role::SystemAdmin),
        csrf: caller
            .session()
            .map(|context| csrf_token(&context.secret))
            .unwrap_or_default(),
        repositories: repositories
            .into_iter()
            .map(|(record, role)| (record.name, role))
            .collect(),
        more,
        after: after.cloned(),
        recent: recent.documents,
        form,
        now: UnixMillis::now(),
    })
}

fn render(page: &HomePage) -> Page {
    let body = html! {
        h1 { "Fermata" }
        nav aria-label="Your places" {
            p { "Signed in as " strong { (page.user) } ". "
                a href="/account" { "Your account" }
                @if page.admin { " · " a href="/admin/schema" { "Schema administration" } }
            }
        }
        (search_box(None, "", None))
        h2 { "Your repositories" }
        @if page.repositories.is_empty() && page.after.is_none() {
            p.note #no-repositories { "You are not a member of any repository yet. Create one below, or ask an admin of one to add you." }
        } @else {
            ul #repositories {
                @for (name, role) in &page.repositories {
                    li { a href=(repository_path(name)) { (name.to_string()) } " " span.note { "(" (role.as_str()) ")" } }
                }
            }
            @if page.more {
                @if let Some((last, _)) = page.repositories.last() {
                    p { a href={ "/?after=" (last.to_string()) } rel="next" { "More repositories" } }
                }
            }
            @if page.after.is_some() { p { a href="/" { "Back to the first repositories" } } }
        }
        (new_repository_form(page))
        h2 { "Recently changed" }
        @if page.recent.is_empty() {
            p.note { "No documents yet." }
        } @else {
            ul #recent {
                @for document in &page.recent {
                    li {
                        a href=(page_path(document)) { (document.title) }
                        " " span.note { "in " (document.repository.to_string()) ", changed " (time(document.updated_at, page.now)) }
                    }
                }
            }
        }
    };
    Page::new("Home", body)
}

/// The "New repository" form: a name under the caller's own, or, for a `system_admin`, an
/// owner too.
fn new_repository_form(page: &HomePage) -> maud::Markup {
    let user = page.user.as_str();
    let form = &page.form;
    let described = if form.refused.is_some() {
        "repository-rules repository-refused"
    } else {
        "repository-rules"
    };
    html! {
        h2 { "New repository" }
        form method="post" action="/r" {
            input type="hidden" name="csrf" value=(page.csrf);
            @if page.admin {
                label for="repository-owner" { "Owner" }
                input #repository-owner type="text" name="owner" required maxlength=(MAX_OWNER)
                    value=(form.owner.as_deref().unwrap_or(user)) aria-describedby=(described);
            }
            label for="repository-name" { "Name" }
            input #repository-name type="text" name="name" required maxlength=(MAX_NAME)
                value=(form.name) aria-describedby=(described)
                aria-invalid=[form.refused.as_ref().map(|_| "true")];
            p.note #repository-rules {
                @if page.admin { "Under any owner: your name, or a team's, whose members you then add. " }
                @else { "Under your name, as " code { (user) "/name" } ". " }
                "Letters, digits, '.', '_' and '-'. You become its admin."
            }
            @if let Some(why) = &form.refused { p.error role="alert" #repository-refused { (why) } }
            div { button type="submit" { "Create repository" } }
        }
    }
}

/// Whether `text` may be an owner or a name: letters, digits, '.', '_' and '-', not only dots
/// (a path segment of dots is one a browser resolves away), at most `longest` characters.
fn is_part(text: &str, longest: usize) -> bool {
    !text.is_empty()
        && text.len() <= longest
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !text.chars().all(|c| c == '.')
}

/// The repository `user` asks the form for, or the status and the reason it is refused.
fn requested(user: &User, owner: &str, name: &str) -> Result<Repository, (StatusCode, String)> {
    let invalid = |what: String| Err((StatusCode::BAD_REQUEST, what));
    if name.is_empty() {
        return invalid("Give the repository a name.".to_owned());
    }
    if !is_part(name, MAX_NAME) {
        return invalid(format!(
            "A repository's name is 1 to {MAX_NAME} letters, digits, '.', '_' and '-', and not only dots."
        ));
    }
    if !is_part(owner, MAX_OWNER) {
        return invalid(format!(
            "An owner is 1 to {MAX_OWNER} letters, digits, '.', '_' and '-', and not only dots."
        ));
    }
    let Ok(repository) = Repository::new(format!("{owner}/{name}")) else {
        return invalid("That name cannot be used for a repository.".to_owned());
    };
    if !may_create(user, &repository) {
        return Err((
            StatusCode::FORBIDDEN,
            format!(
                "You can create repositories under your own name only, as {}/{name}.",
                user.name
            ),
        ));
    }
    Ok(repository)
}

async fn create_repository(
    State(state): State<HttpState>,
    Authenticated(caller): Authenticated,
    Form(mut form): Form<RepositoryForm>,
) -> Response {
    let user = &caller.user;
    let owner = form
        .owner
        .as_deref()
        .map(str::trim)
        .filter(|owner| !owner.is_empty())
        .unwrap_or(user.name.as_str())
        .to_owned();
    form.name = form.name.trim().to_owned();
    let repository = match requested(user, &owner, &form.name) {
        Ok(repository) => repository,
        Err((status, why)) => {
            form.refused = Some(why);
            return home_page(&state, &caller, None, status, form).await;
        }
    };
    match state
        .documents
        .repositories()
        .create(user, &repository)
        .await
    {
        Ok((record, true)) => {
            tracing::info!(by = %user.name, repository = %record.name, "created a repository");
            return Redirect::to(&repository_path(&record.name)).into_response();
        }
        Ok((_, false)) => {}
        // Another request created it first.
        Err(error) if error.kind() == ErrorKind::Conflict => {}
        Err(error) => return unavailable(error, "the repository cannot be created just now"),
    }
    form.refused = Some(format!("{repository} exists already: choose another name."));
    home_page(&state, &caller, None, StatusCode::CONFLICT, form).await
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use fermata_store::{UnixMillis, UserId, UserName};
    use fermata_store_testkit::fixtures;

    use super::*;

    fn user(name: &str, roles: BTreeSet<Role>) -> User {
        User {
            id: UserId(format!("id-{name}")),
            name: UserName::new(name).unwrap(),
            password_hash: String::new(),
            roles,
            created_at: UnixMillis(0),
            updated_at: UnixMillis(0),
        }
    }

    fn home(admin: bool) -> HomePage {
        HomePage {
            user: "ada".to_owned(),
            admin,
            csrf: "csrf-token".to_owned(),
            repositories: vec![(
                Repository::new("ada/notes").unwrap(),
                RepositoryRole::Viewer,
            )],
            more: true,
            after: None,
            recent: Vec::new(),
            form: RepositoryForm {
                owner: None,
                name: "two <words>".to_owned(),
                refused: Some("Not that name.".to_owned()),
            },
            now: UnixMillis(0),
        }
    }

    #[test]
    fn the_home_links_the_repositories_and_its_form_says_why_a_name_was_refused() {
        let html = render(&home(false)).snapshot();
        for expected in [
            "<a href=\"/r/ada/notes\">ada/notes</a> <span class=\"note\">(viewer)</span>",
            "<a href=\"/?after=ada/notes\" rel=\"next\">",
            "value=\"two &lt;words&gt;\"",
            "aria-invalid=\"true\"",
            "<p class=\"error\" id=\"repository-refused\" role=\"alert\">Not that name.</p>",
            "<code>ada/name</code>",
            "No documents yet.",
            "<form class=\"search\" role=\"search\" aria-label=\"Full-text search\" method=\"get\" action=\"/search\">",
        ] {
            assert!(html.contains(expected), "{expected} is not in {html}");
        }
        for absent in [
            "repository-owner",
            "/admin/schema",
            "<script",
            "name=\"repository\"",
        ] {
            assert!(!html.contains(absent), "{absent} is in {html}");
        }
        let admin = render(&home(true)).snapshot();
        assert!(admin.contains("href=\"/admin/schema\""), "{admin}");
        assert!(admin.contains("id=\"repository-owner\""), "{admin}");
    }

    #[test]
    fn a_recent_document_tells_when_it_changed_relative_to_the_page() {
        let mut page = home(false);
        page.now = UnixMillis(1_700_000_000_000);
        page.recent = vec![Channel {
            updated_at: UnixMillis(1_700_000_000_000 - 30 * 3_600_000),
            ..fixtures::channel("0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13", "ada/notes")
        }];
        let html = render(&page).snapshot();
        let expected = "<a href=\"/d/ada/notes/plan\">Plan</a> <span class=\"note\">in ada/notes, \
            changed <time datetime=\"2023-11-13T16:13:20.000Z\" \
            title=\"13 November 2023, 16:13:20 UTC\">yesterday</time></span>";
        assert!(html.contains(expected), "{expected} is not in {html}");
    }

    #[test]
    fn a_repository_is_asked_for_under_ones_own_name_unless_system_admin() {
        let ada = user("ada", BTreeSet::new());
        let root = user("root", [Role::SystemAdmin].into());
        assert_eq!(
            requested(&ada, "ada", "notes").unwrap().as_str(),
            "ada/notes"
        );
        assert_eq!(
            requested(&root, "acme", "handbook").unwrap().as_str(),
            "acme/handbook"
        );
        assert_eq!(
            requested(&ada, "acme", "handbook").unwrap_err().0,
            StatusCode::FORBIDDEN
        );
        let long = "n".repeat(MAX_NAME + 1);
        for (owner, name) in [
            ("ada", ""),
            ("ada", "two words"),
            ("ada", "a/b"),
            ("ada", ".."),
            ("ada", "."),
            ("ada", "<script>"),
            ("ada", long.as_str()),
            ("", "notes"),
            ("..", "notes"),
        ] {
            let refused = requested(&root, owner, name).unwrap_err();
            assert_eq!(refused.0, StatusCode::BAD_REQUEST, "{owner:?}/{name:?}");
        }
    }
}
