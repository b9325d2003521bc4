//! `GET /search?q=&repository=&archived=1&after=`: the results of a full-text search, as a page
//! for people. The search box of the home page sends its words here, a repository page's box its
//! repository too; the page shows the box again, and below it one page of the documents found,
//! best first: each title links to the document's page, with its repository, when it last
//! changed, and a passage of its text with what matched highlighted (`<mark>`), every piece
//! escaped. "More results" carries the keyset cursor of the search service in `after`.
//!
//! The route's access is a list's (`Access::ListDocuments`), as for the search API: naming a
//! repository the caller may not read answers the "not found" page, exactly as for one that does
//! not exist, and the store decides again in the search's own query what the caller may read.
//! The page shows no count, so nothing of another repository's documents reaches it. Archived
//! documents are searched only when the box asks for them. No words, or words the search
//! refuses (too long, too many, only excluding), are said on the page, answered 200 and 400.
//!
//! The page has no script; like every page it is drawn in the one skeleton of [`crate::view`].
//! The handler reads what it shows into a [`SearchPage`]; [`render`] draws it.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use fermata_store::{
    DocumentScope, ErrorKind, Repository, SearchHit, SearchTerms, StoreError, UnixMillis,
};
use maud::html;
use serde::Deserialize;

use crate::HttpState;
use crate::auth::Authenticated;
use crate::policy::{Access, ListGrant, Routes};
use crate::view::{
    Page, SEARCH_PATH, message_page, place_path, repository_path, search_box, time, unavailable,
};

/// Documents on one page of results.
const PER_PAGE: usize = 20;

pub(crate) fn routes() -> Routes {
    Routes::pages().get(SEARCH_PATH, Access::ListDocuments, search)
}

#[derive(Debug, Default, Deserialize)]
struct SearchParams {
    /// The words, as typed.
    #[serde(default)]
    q: String,
    /// `1` to search the archived documents too.
    archived: Option<String>,
    /// Where the previous page of results stopped.
    after: Option<String>,
}

/// What the search came to.
#[derive(Debug)]
enum Outcome {
    /// No words yet: the box and how to use it.
    Nothing,
    /// The words were refused, and why.
    Refused(String),
    /// A page of results.
    Found {
        hits: Vec<SearchHit>,
        /// The address of the next page, when there is one.
        next: Option<String>,
        /// Whether this page follows another.
        later: bool,
    },
}

/// What the results page shows.
#[derive(Debug)]
struct SearchPage {
    /// The words, as typed.
    query: String,
    /// The repository searched; `None` for every repository of the caller.
    repository: Option<Repository>,
    archived: bool,
    /// The moment the page is drawn for: times are told relative to it.
    now: UnixMillis,
    outcome: Outcome,
}

/// The address of the results of `query` in `repository` (archived ones too when `archived`),
/// from after `cursor`.
fn results_path(
    query: &str,
    repository: Option<&Repository>,
    archived: bool,
    cursor: Option<&str>,
) -> String {
    let mut pairs = vec![("q", query.to_owned())];
    if let Some(repository) = repository {
        pairs.push(("repository", repository.to_string()));
    }
    if archived {
        pairs.push(("archived", "1".to_owned()));
    }
    if let Some(cursor) = cursor {
        pairs.push(("after", cursor.to_owned()));
    }
    format!(
        "{SEARCH_PATH}?{}",
        serde_urlencoded::to_string(&pairs).unwrap_or_default()
    )
}

/// A refusal of the search service, as a sentence.
fn sentence(error: &StoreError) -> String {
    let mut chars = error.message().chars();
    match chars.next() {
        Some(first) => format!("{}{}.", first.to_uppercase(), chars.as_str()),
        None => "This search cannot be run.".to_owned(),
    }
}

async fn search(
    State(state): State<HttpState>,
    grant: ListGrant,
    Authenticated(caller): Authenticated,
    params: Result<Query<SearchParams>, QueryRejection>,
) -> Response {
    let Ok(Query(params)) = params else {
        return message_page(
            StatusCode::BAD_REQUEST,
            "Search not understood",
            "This address is not a search this server understands: search again from the box.",
        );
    };
    let repository = match &grant.scope {
        DocumentScope::Repository(name) => Some(name.clone()),
        DocumentScope::MemberOf(_) => None,
    };
    let archived = params.archived.as_deref() == Some("1");
    let query = params.q.trim();
    let mut page = SearchPage {
        query: params.q.clone(),
        repository,
        archived,
        now: UnixMillis::now(),
        outcome: Outcome::Nothing,
    };
    if query.is_empty() {
        return render(&page).into_response();
    }
    // The words are checked first, so a refusal of the cursor is not taken for one of them.
    if let Err(error) = SearchTerms::parse(query) {
        page.outcome = Outcome::Refused(sentence(&error));
        return (StatusCode::BAD_REQUEST, render(&page)).into_response();
    }
    let found = state
        .documents
        .search(
            &caller.user.id,
            &grant.scope,
            query,
            archived,
            PER_PAGE,
            params.after.as_deref(),
        )
        .await;
    match found {
        Ok(found) => {
            page.outcome = Outcome::Found {
                next: found.next.map(|cursor| {
                    results_path(
                        &page.query,
                        page.repository.as_ref(),
                        archived,
                        Some(&cursor),
                    )
                }),
                hits: found.hits,
                later: params.after.is_some(),
            };
            render(&page).into_response()
        }
        // The words passed; what is left to refuse is a cursor this server did not give.
        Err(error) if error.kind() == ErrorKind::Invalid => message_page(
            StatusCode::BAD_REQUEST,
            "No such page",
            "These results have no such page: search again from the box.",
        ),
        Err(error) => unavailable(error, "the search cannot be run just now"),
    }
}

fn render(page: &SearchPage) -> Page {
    let archived = page.archived;
    let title = match &page.repository {
        Some(repository) => format!("Search in {repository}"),
        None => "Search".to_owned(),
    };
    let body = html! {
        h1 { (title) }
        p.note {
            a href="/" { "Home" } " · " a href="/account" { "Your account" }
            @if let Some(repository) = &page.repository {
                " · " a href=(repository_path(repository)) { (repository.to_string()) }
                @if !page.query.trim().is_empty() {
                    " · " a #search-everywhere href=(results_path(&page.query, None, archived, None)) {
                        "Search all your repositories"
                    }
                }
            }
        }
        (search_box(page.repository.as_ref(), &page.query, Some(archived)))
        @match &page.outcome {
            Outcome::Nothing => {
                p #search-empty { "Type one or more words to search for." }
            }
            Outcome::Refused(why) => {
                p.error role="alert" #search-refused { (why) }
            }
            Outcome::Found { hits, next, later } => {
                h2 { "Results" }
                @if hits.is_empty() {
                    p #no-results {
                        @if *later { "No more documents match." } @else { "No documents match." }
                        @if !archived { " Archived documents are left out unless you include them." }
                    }
                } @else {
                    ol #results {
                        @for hit in hits {
                            li.result {
                                h3 { a href=(place_path(&hit.repository, &hit.slug)) { (hit.title) } }
                                p.note {
                                    "in " a href=(repository_path(&hit.repository)) { (hit.repository.to_string()) }
                                    " · changed " (time(hit.updated_at, page.now))
                                    @if hit.archived_at.is_some() { " · " span.archived-mark { "archived" } }
                                }
                                @if !hit.snippet.is_empty() {
                                    p.snippet {
                                        @for part in &hit.snippet {
                                            @if part.matched { mark { (part.text) } } @else { (part.text) }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                @if let Some(next) = next { p { a #more-results href=(next) rel="next" { "More results" } } }
                @if *later {
                    p { a href=(results_path(&page.query, page.repository.as_ref(), archived, None)) { "Back to the first results" } }
                }
            }
        }
    };
    Page::new(title, body)
}

#[cfg(test)]
mod tests {
    use fermata_store::{ChannelId, Slug, SnippetPart};

    use super::*;

    /// 2023-11-14T22:13:20.123Z.
    const NOW: UnixMillis = UnixMillis(1_700_000_000_123);

    fn hit(title: &str, snippet: &[(&str, bool)]) -> SearchHit {
        SearchHit {
            id: ChannelId::parse("0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13").unwrap(),
            repository: Repository::new("acme/app").unwrap(),
            title: title.to_owned(),
            slug: Slug::new("plan").unwrap(),
            archived_at: None,
            updated_at: UnixMillis(NOW.0 - 5 * 60_000),
            score: 1.0,
            snippet: snippet
                .iter()
                .map(|(text, matched)| SnippetPart {
                    text: (*text).to_owned(),
                    matched: *matched,
                })
                .collect(),
        }
    }

    fn page(repository: Option<&str>, outcome: Outcome) -> SearchPage {
        SearchPage {
            query: "heron \"<b>\"".to_owned(),
            repository: repository.map(|name| Repository::new(name).unwrap()),
            archived: false,
            now: NOW,
            outcome,
        }
    }

    #[test]
    fn a_result_links_its_document_and_highlights_its_snippet_escaped() {
        let found = Outcome::Found {
            hits: vec![hit(
                "Plan <script>",
                &[("A grey ", false), ("<heron>", true), (" & more", false)],
            )],
            next: Some("/search?q=heron&after=1.x".to_owned()),
            later: false,
        };
        let html = render(&page(None, found)).snapshot();
        for expected in [
            "<h3><a href=\"/d/acme/app/plan\">Plan &lt;script&gt;</a></h3>",
            "in <a href=\"/r/acme/app\">acme/app</a>",
            " · changed <time datetime=\"2023-11-14T22:08:20.123Z\" \
             title=\"14 November 2023, 22:08:20 UTC\">5 minutes ago</time>",
            "<p class=\"snippet\">A grey <mark>&lt;heron&gt;</mark> &amp; more</p>",
            "<a id=\"more-results\" href=\"/search?q=heron&amp;after=1.x\" rel=\"next\">",
            "value=\"heron &quot;&lt;b&gt;&quot;\"",
        ] {
            assert!(html.contains(expected), "{expected} is not in {html}");
        }
        for absent in ["<script", "style=", "search-everywhere", "First results"] {
            assert!(!html.contains(absent), "{absent} is in {html}");
        }
    }

    #[test]
    fn nothing_found_says_so_without_a_count_and_a_refusal_says_why() {
        let nothing = Outcome::Found {
            hits: Vec::new(),
            next: None,
            later: false,
        };
        let html = render(&page(Some("acme/app"), nothing)).snapshot();
        assert!(
            html.contains("<p id=\"no-results\">No documents match."),
            "{html}"
        );
        assert!(html.contains("<h1>Search in acme/app</h1>"), "{html}");
        assert!(
            html.contains("id=\"search-everywhere\" href=\"/search?q=heron+%22%3Cb%3E%22\""),
            "{html}"
        );
        assert!(!html.contains("id=\"results\""), "{html}");

        let refused = render(&page(None, Outcome::Refused("Too long.".to_owned()))).snapshot();
        assert!(
            refused
                .contains("<p class=\"error\" id=\"search-refused\" role=\"alert\">Too long.</p>"),
            "{refused}"
        );
        let empty = render(&page(None, Outcome::Nothing)).snapshot();
        assert!(empty.contains("id=\"search-empty\""), "{empty}");
    }

    #[test]
    fn the_next_page_keeps_the_words_the_scope_and_the_archived() {
        let acme = Repository::new("acme/app").unwrap();
        assert_eq!(
            results_path("a b", Some(&acme), true, Some("3ff0.x")),
            "/search?q=a+b&repository=acme%2Fapp&archived=1&after=3ff0.x"
        );
        assert_eq!(results_path("a", None, false, None), "/search?q=a");
        assert_eq!(
            sentence(&StoreError::invalid("a search has at most 300 characters")),
            "A search has at most 300 characters."
        );
    }
}
