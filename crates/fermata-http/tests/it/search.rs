//! `GET /api/v1/search`, called through the router without a socket, on SQLite and PostgreSQL:
//! a saved edit (a program's text, a Yjs update, a rename) is found by the next request, with
//! its snippet as JSON pieces; pages follow `next_cursor` without duplicates; archived documents
//! only with `archived=true`; and refused searches answer 400, never 500. Who finds what is in
//! the access matrix (`access.rs`).

use std::collections::BTreeSet;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use fermata_collab::WriterFence;
use fermata_http::HttpState;
use fermata_store::{Acquisition, LeaseName, Storage, StoreOptions};
use fermata_store_sql::testing::{ScratchDatabase, ScratchStorage};
use serde_json::{Value, json};

use crate::support::{self, Answer};

struct App {
    state: HttpState,
    /// An API token of `ada`, who owns the repository `ada/notes`.
    token: String,
    ada: fermata_store::UserId,
    _storage: ScratchStorage,
}

impl App {
    async fn new(scratch: ScratchDatabase) -> Self {
        let storage = scratch.open(StoreOptions::default()).await;
        let fence = WriterFence::default();
        let state = support::state(&storage, fence.clone());
        let (ada, _) = state
            .accounts
            .add_user("ada", None, Default::default())
            .await
            .unwrap();
        let (_, token) = state
            .accounts
            .create_api_token(&ada, "tests")
            .await
            .unwrap();
        let Acquisition::Granted(lease) = storage
            .leases()
            .acquire(&LeaseName::WRITER, "search-test", Duration::from_secs(3600))
            .await
            .unwrap()
        else {
            panic!("the writer lease is held");
        };
        fence.set(Some(lease.fence()));
        App {
            state,
            token: token.expose().to_owned(),
            ada: ada.id.clone(),
            _storage: storage,
        }
    }

    async fn call(&self, method: &str, uri: &str, body: Option<(&str, Vec<u8>)>) -> Answer {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::AUTHORIZATION, format!("Bearer {}", self.token));
        let request = match body {
            Some((content_type, bytes)) => request
                .header(header::CONTENT_TYPE, content_type)
                .body(Body::from(bytes)),
            None => request.body(Body::empty()),
        };
        support::send(&self.state, request.unwrap()).await
    }

    async fn json(&self, method: &str, uri: &str, body: Value) -> Answer {
        self.call(
            method,
            uri,
            Some(("application/json", body.to_string().into_bytes())),
        )
        .await
    }

    /// A document of `ada/notes` titled `title`; its ID.
    async fn create(&self, title: &str) -> String {
        let answer = self
            .json(
                "POST",
                "/api/v1/documents",
                json!({"repository": "ada/notes", "title": title}),
            )
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
        answer.json()["id"].as_str().unwrap().to_owned()
    }

    async fn write(&self, id: &str, text: &str) {
        let answer = self
            .json(
                "PUT",
                &format!("/api/v1/documents/{id}/text"),
                json!({"text": text}),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    }

    async fn search(&self, query: &str) -> Answer {
        self.call("GET", &format!("/api/v1/search?{query}"), None)
            .await
    }

    /// The IDs of a successful search's results, in order.
    async fn found(&self, query: &str) -> Vec<String> {
        let answer = self.search(query).await;
        assert_eq!(answer.status, StatusCode::OK, "{query}: {}", answer.body);
        ids(&answer.json())
    }
}

/// Waits until the room sends the client its own update back: the room broadcasts only what it
/// committed.
async fn saved(mut connection: fermata_collab::Connection) {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), connection.outbound.recv())
            .await
            .expect("the room answers")
            .expect("the room keeps the connection");
        if let fermata_collab::Outbound::Message(bytes) = message
            && matches!(
                fermata_collab::protocol::decode(&bytes),
                Ok(fermata_collab::protocol::ClientMessage::Update(update))
                    if !fermata_docs::is_empty_update(&update)
            )
        {
            return;
        }
    }
}

fn ids(body: &Value) -> Vec<String> {
    body["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results in {body}"))
        .iter()
        .map(|hit| hit["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The query string `name=value`, encoded.
fn param(name: &str, value: &str) -> String {
    serde_urlencoded::to_string([(name, value)]).unwrap()
}

async fn a_saved_edit_is_found_by_the_next_request(scratch: ScratchDatabase) {
    let app = App::new(scratch).await;
    let id = app.create("Field notes").await;
    assert_eq!(app.found("q=field").await, std::slice::from_ref(&id));
    assert!(app.found("q=heron").await.is_empty());

    // A program's text, saved through the document's room.
    app.write(&id, "# Birds\n\nA grey <b>heron</b> by the river.\n")
        .await;
    let answer = app.search("q=heron").await;
    assert_eq!(answer.status, StatusCode::OK);
    assert!(
        answer.headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let body = answer.json();
    assert_eq!(ids(&body), std::slice::from_ref(&id));
    let hit = &body["results"][0];
    assert_eq!(hit["title"], "Field notes");
    assert_eq!(hit["repository"], "ada/notes");
    assert_eq!(hit["slug"], "field-notes");
    assert_eq!(hit["archived_at"], Value::Null);
    assert!(hit["score"].as_f64().unwrap() > 0.0);
    let snippet = hit["snippet"].as_array().unwrap();
    let matched: Vec<&str> = snippet
        .iter()
        .filter(|part| part["matched"] == json!(true))
        .map(|part| part["text"].as_str().unwrap())
        .collect();
    assert_eq!(matched, ["heron"], "{snippet:?}");
    let shown: String = snippet
        .iter()
        .map(|part| part["text"].as_str().unwrap())
        .collect();
    assert!(shown.contains("grey") && shown.contains("river"), "{shown}");
    assert_eq!(body["next_cursor"], Value::Null);

    // A Yjs update merged as a live client's would be (one that has seen nothing yet).
    let update = fermata_docs::SourceDoc::new()
        .insert(0, "Kingfisher sighted. ")
        .unwrap();
    let merged = app
        .call(
            "POST",
            &format!("/api/v1/documents/{id}/updates"),
            Some(("application/octet-stream", update)),
        )
        .await;
    assert_eq!(merged.status, StatusCode::OK, "{}", merged.body);
    assert_eq!(app.found("q=kingfisher").await, std::slice::from_ref(&id));

    // A live client's edit, committed in a room's batch without its text: the room indexes it
    // when its writers pause, or at once when a search asks, as this one does right after.
    let connection = app
        .state
        .documents
        .rooms()
        .join(&fermata_store::ChannelId(id.clone()), &app.ada, false)
        .await
        .unwrap();
    let typed = fermata_docs::SourceDoc::new()
        .insert(0, "Cormorant drying its wings. ")
        .unwrap();
    assert!(
        connection
            .receive(fermata_collab::protocol::update(typed))
            .await
    );
    saved(connection).await;
    assert_eq!(app.found("q=cormorant").await, std::slice::from_ref(&id));

    // A rename.
    let renamed = app
        .json(
            "PATCH",
            &format!("/api/v1/documents/{id}"),
            json!({"title": "Estuary log"}),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::OK, "{}", renamed.body);
    assert!(app.found("q=field").await.is_empty());
    assert_eq!(app.found("q=estuary+heron").await, [id]);
}

async fn pages_follow_the_cursor_and_archived_documents_need_asking(scratch: ScratchDatabase) {
    let app = App::new(scratch).await;
    let mut made = Vec::new();
    for n in 0..5 {
        let id = app.create(&format!("Lamp {n}")).await;
        app.write(&id, &"lamp oil ".repeat(n + 1)).await;
        made.push(id);
    }
    let mut paged = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let query = match &cursor {
            Some(cursor) => format!("q=lamp&limit=2&{}", param("cursor", cursor)),
            None => "q=lamp&limit=2".to_owned(),
        };
        let answer = app.search(&query).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        let body = answer.json();
        paged.extend(ids(&body));
        match body["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(paged.len(), 5, "{paged:?}");
    assert_eq!(
        paged.iter().collect::<BTreeSet<_>>(),
        made.iter().collect::<BTreeSet<_>>()
    );
    assert_eq!(paged, app.found("q=lamp&limit=100").await);

    let archived = app
        .call(
            "POST",
            &format!("/api/v1/documents/{}/archive", made[0]),
            None,
        )
        .await;
    assert_eq!(archived.status, StatusCode::OK, "{}", archived.body);
    assert!(!app.found("q=lamp&limit=100").await.contains(&made[0]));
    let with = app.search("q=lamp&archived=true&limit=100").await.json();
    assert!(ids(&with).contains(&made[0]));
    let hit = with["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|hit| hit["id"] == json!(made[0]))
        .unwrap();
    assert!(hit["archived_at"].is_string(), "{hit}");
    let named = app.found("q=lamp&repository=ada/notes&limit=100").await;
    assert_eq!(named.len(), 4);
}

async fn refused_searches_answer_400_and_odd_ones_are_searched(scratch: ScratchDatabase) {
    let app = App::new(scratch).await;
    let id = app.create("Odd").await;
    app.write(&id, "col:word NEAR(a b) 'quoted' 日本語 über\n")
        .await;
    for query in [
        String::new(),
        "q=".to_owned(),
        "q=%20%20".to_owned(),
        param("q", "\"\" !!! -"),
        param("q", "-alone"),
        param("q", "a or -b"),
        format!("q={}", "a".repeat(301)),
        format!("q={}", vec!["w"; 17].join("+")),
        "q=odd&cursor=nonsense".to_owned(),
        "q=odd&cursor=7ff0000000000000.0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13".to_owned(),
        "q=odd&limit=many".to_owned(),
    ] {
        let answer = app.search(&query).await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{query}: {}",
            answer.body
        );
        assert!(
            answer.json()["error"]["message"].is_string(),
            "{}",
            answer.body
        );
        assert!(
            !answer.body.to_lowercase().contains("sql"),
            "{query}: {}",
            answer.body
        );
    }
    for text in [
        "\"unclosed",
        "NEAR(a",
        "col:word",
        "*",
        "a AND NOT b OR c",
        "'; DROP TABLE channels; --",
        "\\",
        "日本語",
        "ÜBER",
        "x\u{0}y",
    ] {
        let answer = app.search(&param("q", text)).await;
        assert!(
            answer.status == StatusCode::OK || answer.status == StatusCode::BAD_REQUEST,
            "{text:?}: {} {}",
            answer.status,
            answer.body
        );
    }
    for text in ["col:word", "NEAR(a", "日本語", "ÜBER", "'quoted'"] {
        assert_eq!(
            app.found(&param("q", text)).await,
            std::slice::from_ref(&id),
            "{text:?}"
        );
    }
    // Out of range limits are brought within range.
    assert_eq!(app.found("q=odd&limit=0").await, std::slice::from_ref(&id));
    assert_eq!(app.found("q=odd&limit=100000").await, [id]);
}

#[tokio::test]
async fn sqlite_a_saved_edit_is_found_by_the_next_request() {
    a_saved_edit_is_found_by_the_next_request(ScratchDatabase::sqlite()).await;
}

#[tokio::test]
async fn postgres_a_saved_edit_is_found_by_the_next_request() {
    a_saved_edit_is_found_by_the_next_request(ScratchDatabase::postgres().await).await;
}

#[tokio::test]
async fn sqlite_pages_follow_the_cursor_and_archived_documents_need_asking() {
    pages_follow_the_cursor_and_archived_documents_need_asking(ScratchDatabase::sqlite()).await;
}

#[tokio::test]
async fn postgres_pages_follow_the_cursor_and_archived_documents_need_asking() {
    pages_follow_the_cursor_and_archived_documents_need_asking(ScratchDatabase::postgres().await)
        .await;
}

#[tokio::test]
async fn sqlite_refused_searches_answer_400_and_odd_ones_are_searched() {
    refused_searches_answer_400_and_odd_ones_are_searched(ScratchDatabase::sqlite()).await;
}

#[tokio::test]
async fn postgres_refused_searches_answer_400_and_odd_ones_are_searched() {
    refused_searches_answer_400_and_odd_ones_are_searched(ScratchDatabase::postgres().await).await;
}
