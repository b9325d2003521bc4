//! The search box and the results page (`GET /search`), called through the router without a
//! socket, on a real SQLite database: a document's words found with its title linked, its
//! snippet highlighted and escaped and its change time told relative to the request; an outsider
//! finding nothing and told nothing, and "not found" for a repository they cannot read exactly as
//! for one that does not exist; empty, too long and only-excluding searches and a forged cursor
//! said on the page, never a 500; "More results" following the keyset cursor to the end without
//! a duplicate; archived documents only when asked for; and the boxes of the home and repository
//! pages sending their words (and the repository) to the results page.

use std::collections::BTreeSet;

use axum::http::{StatusCode, header};
use serde_json::json;

use crate::support::{self, Answer, Caller};

/// The search page tests, whose helpers [`App`] carries.
enum SearchPages {}

/// `ada` administers `ada/notes`, `vic` is a viewer there, `out` is no member.
type App = support::NotesApp<SearchPages>;

impl App {
    async fn new() -> Self {
        App::start("search-pages", &[]).await
    }

    /// A document of `ada/notes` titled `title` holding `text`; its ID.
    async fn create(&self, title: &str, text: &str) -> String {
        let id = self.create_document(title).await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let written = self
            .call(
                &self.ada,
                "PUT",
                &format!("/api/v1/documents/{id}/text"),
                Some(json!({"text": text})),
            )
            .await;
        assert_eq!(written.status, StatusCode::OK, "{}", written.body);
        id
    }

    /// The results page of `query` (already encoded) for `caller`, answered 200 as HTML.
    async fn results(&self, caller: &Caller, query: &str) -> String {
        let answer = self.get(caller, &format!("/search?{query}")).await;
        assert_eq!(answer.status, StatusCode::OK, "{query}: {}", answer.body);
        assert_page(&answer);
        answer.body
    }
}

/// An HTML page under the pages' policy, never cached.
fn assert_page(answer: &Answer) {
    let content_type = answer.headers[header::CONTENT_TYPE].to_str().unwrap();
    assert!(content_type.starts_with("text/html"), "{content_type}");
    assert!(answer.headers.contains_key(header::CONTENT_SECURITY_POLICY));
    assert_eq!(answer.headers[header::CACHE_CONTROL], "no-store");
    assert!(!answer.body.contains("<script"), "{}", answer.body);
    assert!(!answer.body.contains("style=\""), "{}", answer.body);
}

/// The query string `name=value`, encoded.
fn param(name: &str, value: &str) -> String {
    serde_urlencoded::to_string([(name, value)]).unwrap()
}

/// The document pages a results page links, in order.
fn found(body: &str) -> Vec<String> {
    body.split("<li class=\"result\"><h3><a href=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().to_owned())
        .collect()
}

/// The "More results" address of a results page, when it has one.
fn more(body: &str) -> Option<String> {
    let rest = body.split("id=\"more-results\" href=\"").nth(1)?;
    Some(rest.split('"').next()?.replace("&amp;", "&"))
}

#[tokio::test]
async fn a_document_is_found_with_its_title_linked_and_its_snippet_highlighted() {
    let app = App::new().await;
    app.create(
        "Field <notes>",
        "# Birds\n\nA grey heron by the <river> & the reeds.\n",
    )
    .await;
    app.create("Shopping", "Bread, milk.\n").await;

    for caller in [&app.ada, &app.vic] {
        let body = app.results(caller, "q=heron").await;
        assert_eq!(found(&body), ["/d/ada/notes/field-notes"], "{body}");
        for expected in [
            ">Field &lt;notes&gt;</a></h3>",
            "in <a href=\"/r/ada/notes\">ada/notes</a>",
            "<mark>heron</mark>",
            "&lt;river&gt; &amp; the reeds",
            " · changed <time datetime=\"",
            "value=\"heron\"",
        ] {
            assert!(body.contains(expected), "{expected} is not in {body}");
        }
        assert!(!body.contains("Shopping"), "{body}");
        assert!(more(&body).is_none(), "{body}");
    }
    // The same search in the repository, from its box.
    let body = app
        .results(&app.vic, "q=heron&repository=ada%2Fnotes")
        .await;
    assert_eq!(found(&body), ["/d/ada/notes/field-notes"], "{body}");
    assert!(body.contains("<h1>Search in ada/notes</h1>"), "{body}");
    assert!(body.contains("id=\"search-everywhere\""), "{body}");
    let body = app.results(&app.ada, "q=nothing-like-it").await;
    assert!(
        body.contains("<p id=\"no-results\">No documents match."),
        "{body}"
    );
}

#[tokio::test]
async fn an_outsider_finds_nothing_and_is_told_nothing() {
    let app = App::new().await;
    app.create("Field notes", "A grey heron.\n").await;

    let body = app.results(&app.out, "q=heron").await;
    assert!(found(&body).is_empty(), "{body}");
    assert!(
        body.contains("<p id=\"no-results\">No documents match."),
        "{body}"
    );
    for absent in [
        "ada/notes",
        "Field notes",
        "heron</mark>",
        "id=\"results\"",
        "class=\"result\"",
    ] {
        assert!(!body.contains(absent), "{absent} is in {body}");
    }
    // Naming the repository: the same "not found" page as for one that does not exist.
    let named = app
        .get(&app.out, "/search?q=heron&repository=ada%2Fnotes")
        .await;
    let missing = app
        .get(&app.out, "/search?q=heron&repository=ada%2Fnothing")
        .await;
    for answer in [&named, &missing] {
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.body);
        assert_page(answer);
        assert!(
            answer.body.contains("<h1>Not found</h1>"),
            "{}",
            answer.body
        );
    }
    assert_eq!(named.body, missing.body);

    // A visitor is sent to the login form, and back here after it.
    let visitor = app.get(&Caller::default(), "/search?q=heron").await;
    assert_eq!(visitor.status, StatusCode::SEE_OTHER, "{}", visitor.body);
    assert_eq!(
        visitor.headers[header::LOCATION],
        "/login?next=/search%3Fq%3Dheron"
    );
}

#[tokio::test]
async fn empty_long_and_refused_searches_are_said_on_the_page() {
    let app = App::new().await;
    app.create("Field notes", "A grey heron.\n").await;

    for query in ["", "q=", "q=%20%20"] {
        let body = app.results(&app.ada, query).await;
        assert!(body.contains("id=\"search-empty\""), "{query}: {body}");
        assert!(!body.contains("id=\"no-results\""), "{query}: {body}");
    }
    let long = "heron ".repeat(60);
    for (query, why) in [
        (param("q", &long), "A search has at most 300 characters."),
        (param("q", "-heron"), "A search cannot only exclude"),
        (param("q", "\"\" !!! -"), "A search needs at least one word"),
    ] {
        let answer = app.get(&app.ada, &format!("/search?{query}")).await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{query}: {}",
            answer.body
        );
        assert_page(&answer);
        assert!(
            answer.body.contains("id=\"search-refused\""),
            "{}",
            answer.body
        );
        assert!(answer.body.contains(why), "{why} is not in {}", answer.body);
    }
    for cursor in [
        "nonsense",
        "7ff8000000000000.x",
        "3ff0000000000000.not-an-id",
    ] {
        let answer = app
            .get(
                &app.ada,
                &format!("/search?q=heron&{}", param("after", cursor)),
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{cursor}: {}",
            answer.body
        );
        assert_page(&answer);
        assert!(
            answer.body.contains("<h1>No such page</h1>"),
            "{}",
            answer.body
        );
    }
}

#[tokio::test]
async fn more_results_follow_the_cursor_to_the_end_and_archived_ones_need_asking() {
    let app = App::new().await;
    let mut made = Vec::new();
    for n in 0..25 {
        let id = app
            .create(&format!("Lamp {n}"), &"lamp oil ".repeat(n + 1))
            .await;
        made.push(id);
    }
    let mut pages = Vec::new();
    let mut next = Some("/search?q=lamp".to_owned());
    while let Some(address) = next {
        let answer = app.get(&app.ada, &address).await;
        assert_eq!(answer.status, StatusCode::OK, "{address}: {}", answer.body);
        pages.push(found(&answer.body));
        next = more(&answer.body);
        assert!(pages.len() < 5, "the pages never end: {pages:?}");
    }
    assert_eq!(
        pages.iter().map(Vec::len).collect::<Vec<_>>(),
        [20, 5],
        "{pages:?}"
    );
    let every: Vec<&String> = pages.iter().flatten().collect();
    assert_eq!(every.iter().collect::<BTreeSet<_>>().len(), 25, "{every:?}");

    // Archived: left out unless the box asks for it, then marked.
    let archived = app
        .call(
            &app.ada,
            "POST",
            &format!("/api/v1/documents/{}/archive", made[0]),
            None,
        )
        .await;
    assert_eq!(archived.status, StatusCode::OK, "{}", archived.body);
    let slug = archived.json()["slug"].as_str().unwrap().to_owned();
    let place = format!("/d/ada/notes/{slug}");
    let mut current = Vec::new();
    let mut next = Some("/search?q=lamp".to_owned());
    while let Some(address) = next {
        let answer = app.get(&app.ada, &address).await;
        current.extend(found(&answer.body));
        next = more(&answer.body);
    }
    assert_eq!(current.len(), 24, "{current:?}");
    assert!(!current.contains(&place), "{current:?}");
    let body = app
        .results(&app.ada, &format!("{}&archived=1", param("q", "lamp 0")))
        .await;
    assert!(found(&body).contains(&place), "{body}");
    assert!(
        body.contains("<span class=\"archived-mark\">archived</span>"),
        "{body}"
    );
    assert!(
        body.contains(
            "id=\"search-archived\" type=\"checkbox\" name=\"archived\" value=\"1\" checked"
        ),
        "{body}"
    );
}

#[tokio::test]
async fn the_home_and_repository_pages_carry_a_search_box() {
    let app = App::new().await;
    let home = app.get(&app.vic, "/").await;
    assert_eq!(home.status, StatusCode::OK, "{}", home.body);
    assert!(home.body.contains("action=\"/search\""), "{}", home.body);
    assert!(
        home.body
            .contains("id=\"search\" type=\"search\" name=\"q\""),
        "{}",
        home.body
    );
    assert!(!home.body.contains("name=\"repository\""), "{}", home.body);

    let repository = app.get(&app.vic, "/r/ada/notes").await;
    assert_eq!(repository.status, StatusCode::OK, "{}", repository.body);
    assert!(
        repository.body.contains("action=\"/search\""),
        "{}",
        repository.body
    );
    assert!(
        repository
            .body
            .contains("<input type=\"hidden\" name=\"repository\" value=\"ada/notes\">"),
        "{}",
        repository.body
    );
}
