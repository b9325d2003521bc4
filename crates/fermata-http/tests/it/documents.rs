//! The documents HTTP API, called through the router without a socket, on a real SQLite
//! database: creation (browser and program style), slugs, reads, rewrites, archive, restore,
//! delete, children, pages, refused input, writes without the writer lease, activity history
//! and restoring a session, and the OpenAPI description.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use fermata_collab::WriterFence;
use fermata_crypto::SecretToken;
use fermata_http::HttpState;
use fermata_store::{
    Acquisition, ChannelId, CreationKey, Fence, LeaseName, Repository, Role, Storage, StoreOptions,
    UPDATED_AT_RESOLUTION_MS,
};
use fermata_store_sql::testing::{ScratchDatabase, ScratchStorage};
use fermata_store_testkit::eventually_some;
use fermata_store_testkit::unreliable::{Fault, Faults, UnreliableStorage};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use support::Answer;

use crate::support;

const PASSWORD: &str = "correct horse battery staple";
/// A well-formed document ID no document has.
const UNKNOWN_ID: &str = "0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13";
/// The SHA-256 of no text.
const EMPTY_HASH: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// Every route the documents API serves, with its methods, as the router declares them.
const ROUTES: &[(&str, &[&str])] = &[
    ("/api/v1/documents", &["get", "post"]),
    ("/api/v1/documents/by-slug", &["get"]),
    ("/api/v1/documents/{id}", &["get", "patch", "delete"]),
    ("/api/v1/documents/{id}/text", &["put"]),
    ("/api/v1/documents/{id}/state", &["get"]),
    ("/api/v1/documents/{id}/updates", &["post"]),
    ("/api/v1/documents/{id}/client-tokens", &["post"]),
    ("/api/v1/documents/{id}/archive", &["post"]),
    ("/api/v1/documents/{id}/restore", &["post"]),
    ("/api/v1/documents/{id}/children", &["get"]),
    ("/api/v1/documents/{id}/versions", &["get"]),
    (
        "/api/v1/documents/{id}/versions/{version}/restore",
        &["post"],
    ),
];

struct App {
    state: HttpState,
    fence: WriterFence,
    /// The writer lease's fence, as taken at setup.
    lease: Fence,
    /// An API token of the user `ada`.
    token: String,
    /// The faults of the storage the routes use (a real SQLite store, wrapped).
    faults: Faults,
    _storage: ScratchStorage,
}

/// Reading answers the way these tests need.
trait Read {
    /// The status and error code, for one assertion that shows both.
    fn error(&self) -> (StatusCode, String);
    fn id(&self) -> String;
}

impl Read for Answer {
    fn error(&self) -> (StatusCode, String) {
        (self.status, self.code())
    }

    fn id(&self) -> String {
        self.json()["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no id in: {}", self.body))
            .to_owned()
    }
}

impl App {
    async fn new() -> Self {
        let storage = ScratchDatabase::sqlite()
            .open(StoreOptions::default())
            .await;
        let fence = WriterFence::default();
        let shared: Arc<dyn Storage> = Arc::new(storage.clone());
        let unreliable = UnreliableStorage::new(Arc::clone(&shared));
        let faults = unreliable.faults();
        let state = support::state_on(Arc::new(unreliable), fence.clone());
        let accounts = Arc::clone(&state.accounts);
        let (ada, _) = accounts
            .add_user(
                "ada",
                Some(SecretToken::from_given(PASSWORD)),
                [Role::SystemAdmin].into(),
            )
            .await
            .unwrap();
        let (_, token) = accounts.create_api_token(&ada, "tests").await.unwrap();

        let lease = match shared
            .leases()
            .acquire(
                &LeaseName::WRITER,
                "documents-test",
                Duration::from_secs(3600),
            )
            .await
            .unwrap()
        {
            Acquisition::Granted(lease) => lease.fence(),
            Acquisition::Held(record) => panic!("the writer lease is held: {record:?}"),
        };
        fence.set(Some(lease.clone()));
        App {
            state,
            fence,
            lease,
            token: token.expose().to_owned(),
            faults,
            _storage: storage,
        }
    }

    async fn send(&self, request: Request<Body>) -> Answer {
        support::send(&self.state, request).await
    }

    /// A request with the API token.
    fn request(&self, method: &str, uri: &str) -> axum::http::request::Builder {
        Request::builder()
            .method(method)
            .uri(uri)
            .header(header::AUTHORIZATION, format!("Bearer {}", self.token))
    }

    /// Sends `body`, if any, as JSON with the API token.
    async fn call(&self, method: &str, uri: &str, body: Option<Value>) -> Answer {
        let mut request = self.request(method, uri);
        let body = match body {
            Some(value) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                Body::from(value.to_string())
            }
            None => Body::empty(),
        };
        self.send(request.body(body).unwrap()).await
    }

    /// Sends a raw body with the given content type and the API token.
    async fn raw(&self, method: &str, uri: &str, content_type: &str, body: &str) -> Answer {
        let request = self
            .request(method, uri)
            .header(header::CONTENT_TYPE, content_type)
            .body(Body::from(body.to_owned()))
            .unwrap();
        self.send(request).await
    }

    async fn get(&self, uri: &str) -> Answer {
        self.call("GET", uri, None).await
    }

    async fn document(&self, id: &str) -> Answer {
        self.get(&format!("/api/v1/documents/{id}")).await
    }

    async fn by_slug(&self, repository: &str, slug: &str) -> Answer {
        self.get(&format!(
            "/api/v1/documents/by-slug?repository={repository}&slug={slug}"
        ))
        .await
    }

    /// Creates a document browser style and returns its body.
    async fn create(&self, repository: &str, title: &str) -> Value {
        let answer = self
            .call(
                "POST",
                "/api/v1/documents",
                Some(json!({"repository": repository, "title": title})),
            )
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
        answer.json()
    }

    /// Creates a document program style under an idempotency key.
    async fn create_keyed(&self, key: &str, body: Value) -> Answer {
        let request = self
            .request("POST", "/api/v1/documents")
            .header("idempotency-key", key)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        self.send(request).await
    }

    /// The IDs `GET uri` lists, in order.
    async fn listed(&self, uri: &str) -> Vec<String> {
        let answer = self.get(uri).await;
        assert_eq!(answer.status, StatusCode::OK, "{uri}: {}", answer.body);
        ids(&answer.json()["documents"])
    }

    async fn archive(&self, id: &str) -> Answer {
        self.call("POST", &format!("/api/v1/documents/{id}/archive"), None)
            .await
    }
}

fn ids(documents: &Value) -> Vec<String> {
    documents
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {documents}"))
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .collect()
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn id_of(value: &Value) -> String {
    value["id"].as_str().unwrap().to_owned()
}

/// A request without any credentials.
fn anonymous(method: &str, uri: &str, body: Option<Value>) -> Request<Body> {
    let request = Request::builder().method(method).uri(uri);
    match body {
        Some(value) => request
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(value.to_string())),
        None => request.body(Body::empty()),
    }
    .unwrap()
}

/// A plausible request body for a route and method, so only the missing login can be wrong.
fn plausible_body(path: &str, method: &str) -> Option<Value> {
    match (path, method) {
        ("/api/v1/documents", "post") => Some(json!({"repository": "acme/app", "title": "Plan"})),
        ("/api/v1/documents/{id}", "patch") => Some(json!({"title": "Plan"})),
        ("/api/v1/documents/{id}/text", "put") => Some(json!({"text": "# Plan\n"})),
        _ => None,
    }
}

fn concrete(path: &str, id: &str) -> String {
    let uri = path
        .replace("{id}", id)
        .replace("{version}", "1")
        .replace("{sha256}", EMPTY_HASH)
        .replace("{attachment}", UNKNOWN_ID)
        .replace("{request_id}", "req-1");
    if uri.ends_with("/by-slug") {
        format!("{uri}?repository=acme/app&slug=plan")
    } else {
        uri
    }
}

#[tokio::test]
async fn every_route_refuses_an_unauthenticated_caller_and_accepts_an_api_token() {
    let app = App::new().await;
    let document = app.create("acme/app", "Plan").await;
    let id = id_of(&document);
    for (path, methods) in ROUTES {
        for method in *methods {
            let uri = concrete(path, &id);
            let verb = method.to_uppercase();
            let answer = app
                .send(anonymous(&verb, &uri, plausible_body(path, method)))
                .await;
            assert_eq!(
                answer.error(),
                (StatusCode::UNAUTHORIZED, "unauthenticated".to_owned()),
                "{verb} {uri}"
            );
            assert!(
                answer.headers[header::CONTENT_TYPE]
                    .to_str()
                    .unwrap()
                    .starts_with("application/json"),
                "{verb} {uri}"
            );

            let forged = Request::builder()
                .method(verb.as_str())
                .uri(&uri)
                .header(header::AUTHORIZATION, "Bearer fmta_not-a-real-token")
                .body(Body::empty())
                .unwrap();
            assert_eq!(
                app.send(forged).await.status,
                StatusCode::UNAUTHORIZED,
                "{verb} {uri} with a forged token"
            );
        }
    }
    // Nothing the refused calls carried was applied.
    let still = app.document(&id).await.json();
    assert_eq!(
        (&still["title"], &still["text"], &still["revision"]),
        (&json!("Plan"), &json!(""), &json!(0))
    );
    assert!(still["archived_at"].is_null());
    assert_eq!(app.listed("/api/v1/documents").await, vec![id.clone()]);

    // The API token reaches every route.
    assert_eq!(app.document(&id).await.status, StatusCode::OK);
    assert_eq!(app.by_slug("acme/app", "plan").await.status, StatusCode::OK);
    assert_eq!(
        app.get(&format!("/api/v1/documents/{id}/children"))
            .await
            .status,
        StatusCode::OK
    );
    let renamed = app
        .call(
            "PATCH",
            &format!("/api/v1/documents/{id}"),
            Some(json!({"title": "Plan B"})),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::OK, "{}", renamed.body);
    let rewritten = app
        .call(
            "PUT",
            &format!("/api/v1/documents/{id}/text"),
            Some(json!({"text": "hello\n"})),
        )
        .await;
    assert_eq!(rewritten.status, StatusCode::OK, "{}", rewritten.body);
    assert_eq!(app.archive(&id).await.status, StatusCode::OK);
    assert_eq!(
        app.call("POST", &format!("/api/v1/documents/{id}/restore"), None)
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(app.archive(&id).await.status, StatusCode::OK);
    assert_eq!(
        app.call("DELETE", &format!("/api/v1/documents/{id}"), None)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
}

#[tokio::test]
async fn a_browser_session_writes_documents_only_with_its_csrf_token() {
    let app = App::new().await;
    let login = app
        .send(anonymous(
            "POST",
            "/api/v1/session",
            Some(json!({"name": "ada", "password": PASSWORD})),
        ))
        .await;
    assert_eq!(login.status, StatusCode::OK, "{}", login.body);
    let cookie = login
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix("fermata_session="))
        .map(|rest| rest.split(';').next().unwrap().to_owned())
        .expect("a session cookie");
    let csrf = login.json()["csrf_token"].as_str().unwrap().to_owned();
    let create = |csrf: Option<&str>| {
        let mut request = Request::post("/api/v1/documents")
            .header(header::COOKIE, format!("fermata_session={cookie}"))
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(csrf) = csrf {
            request = request.header("x-csrf-token", csrf);
        }
        request
            .body(Body::from(
                json!({"repository": "acme/app", "title": "From a browser"}).to_string(),
            ))
            .unwrap()
    };
    let refused = app.send(create(None)).await;
    assert_eq!(refused.error(), (StatusCode::FORBIDDEN, "csrf".to_owned()));
    assert!(app.listed("/api/v1/documents").await.is_empty());
    let created = app.send(create(Some(&csrf))).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.json()["slug"], "from-a-browser");
    let read = Request::get(format!("/api/v1/documents/{}", created.id()))
        .header(header::COOKIE, format!("fermata_session={cookie}"))
        .body(Body::empty())
        .unwrap();
    assert_eq!(app.send(read).await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_browser_style_creation_starts_empty_and_refuses_text_without_a_key() {
    let app = App::new().await;
    let answer = app
        .call(
            "POST",
            "/api/v1/documents",
            Some(json!({"repository": "acme/app", "title": "Release plan: Q3"})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    let created = answer.json();
    assert!(ChannelId::parse(created["id"].as_str().unwrap()).is_ok());
    assert_eq!(created["repository"], "acme/app");
    assert_eq!(created["title"], "Release plan: Q3");
    assert_eq!(created["slug"], "release-plan-q3");
    assert_eq!(created["text"], "");
    assert_eq!(created["source_hash"], EMPTY_HASH);
    assert_eq!(created["revision"], 0);
    assert_eq!(created["sequence"], 0);
    assert!(created["parent"].is_null() && created["archived_at"].is_null());
    assert!(created["created_at"].as_str().unwrap().ends_with('Z'));

    let refused = app
        .call(
            "POST",
            "/api/v1/documents",
            Some(json!({"repository": "acme/app", "title": "Other", "text": "# Other\n"})),
        )
        .await;
    assert_eq!(
        refused.error(),
        (StatusCode::BAD_REQUEST, "invalid".to_owned())
    );
    assert!(
        refused.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Idempotency-Key"),
        "{}",
        refused.body
    );
    assert_eq!(
        app.listed("/api/v1/documents").await,
        vec![id_of(&created)],
        "the refused creation made a document"
    );
}

#[tokio::test]
async fn a_program_style_creation_is_idempotent_per_repository() {
    let app = App::new().await;
    let body =
        json!({"repository": "acme/app", "title": "Design notes", "text": "# Design\n\nNotes.\n"});
    let first = app.create_keyed("create-design-1", body.clone()).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let expected = ChannelId::for_creation_key(
        &Repository::new("acme/app").unwrap(),
        &CreationKey::new("create-design-1").unwrap(),
    );
    let document = first.json();
    assert_eq!(document["id"], expected.to_string());
    assert_eq!(document["text"], "# Design\n\nNotes.\n");
    assert_eq!(document["source_hash"], sha256_hex("# Design\n\nNotes.\n"));
    assert_eq!(document["slug"], "design-notes");
    assert_eq!(document["revision"], 0);

    let again = app.create_keyed("create-design-1", body.clone()).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.json(), document, "a repeat changed the document");
    assert_eq!(
        app.listed("/api/v1/documents?repository=acme/app").await,
        vec![expected.to_string()],
        "a repeat made another document"
    );
    assert_eq!(
        app.by_slug("acme/app", "design-notes-2").await.status,
        StatusCode::NOT_FOUND
    );

    // The same key in another repository is another document.
    let elsewhere = app
        .create_keyed(
            "create-design-1",
            json!({"repository": "acme/web", "title": "Design notes", "text": "web\n"}),
        )
        .await;
    assert_eq!(elsewhere.status, StatusCode::CREATED, "{}", elsewhere.body);
    assert_ne!(elsewhere.id(), expected.to_string());
    assert_eq!(
        elsewhere.id(),
        ChannelId::for_creation_key(
            &Repository::new("acme/web").unwrap(),
            &CreationKey::new("create-design-1").unwrap(),
        )
        .to_string()
    );
    assert_eq!(elsewhere.json()["text"], "web\n");
    assert_eq!(elsewhere.json()["slug"], "design-notes");
    assert_eq!(app.listed("/api/v1/documents").await.len(), 2);

    // A key that is not printable ASCII is refused.
    let bad_key = app
        .create_keyed("has space", json!({"repository": "acme/app", "title": "x"}))
        .await;
    assert_eq!(bad_key.status, StatusCode::BAD_REQUEST, "{}", bad_key.body);
}

#[tokio::test]
async fn same_titles_get_suffixed_slugs_and_renamed_slugs_keep_resolving() {
    let app = App::new().await;
    let first = app.create("acme/app", "Plan").await;
    let second = app.create("acme/app", "Plan").await;
    assert_eq!(first["slug"], "plan");
    assert_eq!(second["slug"], "plan-2");
    // Slugs are unique within a repository only.
    assert_eq!(app.create("acme/web", "Plan").await["slug"], "plan");

    for (slug, document) in [("plan", &first), ("plan-2", &second)] {
        let found = app.by_slug("acme/app", slug).await;
        assert_eq!(found.status, StatusCode::OK, "{slug}: {}", found.body);
        assert_eq!(found.json()["id"], document["id"], "{slug}");
        assert_eq!(found.json()["text"], "");
    }

    let id = id_of(&first);
    let renamed = app
        .call(
            "PATCH",
            &format!("/api/v1/documents/{id}"),
            Some(json!({"title": "Roadmap"})),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::OK, "{}", renamed.body);
    let renamed = renamed.json();
    assert_eq!(renamed["id"], id.as_str());
    assert_eq!(renamed["title"], "Roadmap");
    assert_eq!(renamed["slug"], "roadmap");
    assert!(renamed.get("text").is_none(), "a rename answers metadata");

    let canonical = app.by_slug("acme/app", "roadmap").await;
    assert_eq!(canonical.status, StatusCode::OK, "{}", canonical.body);
    assert_eq!(canonical.json()["id"], id.as_str());
    assert_eq!(canonical.json()["slug"], "roadmap");
    let former = app.by_slug("acme/app", "plan").await;
    assert_eq!(former.status, StatusCode::OK, "{}", former.body);
    assert_eq!(former.json()["id"], id.as_str());
    assert_eq!(
        former.json()["slug"],
        "roadmap",
        "the canonical slug is reported"
    );
    assert_eq!(app.document(&id).await.json()["title"], "Roadmap");

    // The former slug still belongs to the renamed document, so a new "Plan" does not take it.
    assert_eq!(app.create("acme/app", "Plan").await["slug"], "plan-3");

    let unknown = app.by_slug("acme/app", "no-such-plan").await;
    assert_eq!(
        unknown.error(),
        (StatusCode::NOT_FOUND, "not_found".to_owned())
    );
    assert_eq!(
        app.by_slug("acme/other", "plan").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.by_slug("acme/app", "Not-A-Slug").await.error(),
        (StatusCode::NOT_FOUND, "not_found".to_owned())
    );
}

#[tokio::test]
async fn a_document_is_read_by_id_and_unknown_or_malformed_ids_are_not_found() {
    let app = App::new().await;
    let created = app
        .create_keyed(
            "read-me",
            json!({"repository": "acme/app", "title": "Readme", "text": "Read me.\n"}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let id = created.id();
    let answer = app.document(&id).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let document = answer.json();
    assert_eq!(document["id"], id.as_str());
    assert_eq!(document["repository"], "acme/app");
    assert_eq!(document["title"], "Readme");
    assert_eq!(document["slug"], "readme");
    assert_eq!(document["text"], "Read me.\n");
    assert_eq!(document["source_hash"], sha256_hex("Read me.\n"));
    for counter in ["revision", "sequence", "epoch"] {
        assert!(document[counter].is_i64(), "{counter}: {document}");
    }
    assert_eq!(document["revision"], 0);
    assert_eq!(document["epoch"], 1);
    assert!(document.get("description").is_none());

    for bad in ["not-a-uuid", UNKNOWN_ID] {
        let answer = app.document(bad).await;
        assert_eq!(
            answer.error(),
            (StatusCode::NOT_FOUND, "not_found".to_owned()),
            "{bad}"
        );
        for (method, suffix, body) in [
            ("PATCH", "", Some(json!({"title": "x"}))),
            ("PUT", "/text", Some(json!({"text": "x"}))),
            ("POST", "/archive", None),
            ("POST", "/restore", None),
            ("DELETE", "", None),
            ("GET", "/children", None),
        ] {
            let answer = app
                .call(method, &format!("/api/v1/documents/{bad}{suffix}"), body)
                .await;
            assert_eq!(
                answer.error(),
                (StatusCode::NOT_FOUND, "not_found".to_owned()),
                "{method} {bad}{suffix}"
            );
        }
    }
}

#[tokio::test]
async fn replacing_the_text_advances_the_revision_and_hashes_the_text() {
    let app = App::new().await;
    let created = app.create("acme/app", "Plan").await;
    let id = id_of(&created);
    let text = "# Plan\n\n- ship it\n- café ☕\n";
    let answer = app
        .call(
            "PUT",
            &format!("/api/v1/documents/{id}/text"),
            Some(json!({"text": text})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let rewritten = answer.json();
    assert_eq!(rewritten["id"], id.as_str());
    assert_eq!(rewritten["text"], text);
    assert_eq!(rewritten["source_hash"], sha256_hex(text));
    assert_eq!(rewritten["revision"], 1);
    assert!(rewritten["sequence"].as_i64().unwrap() > created["sequence"].as_i64().unwrap());
    assert_eq!(rewritten["title"], "Plan", "a rewrite keeps the title");

    let read = app.document(&id).await.json();
    assert_eq!(read["text"], text);
    assert_eq!(read["source_hash"], sha256_hex(text));
    assert_eq!(read["revision"], 1);
    let by_slug = app.by_slug("acme/app", "plan").await.json();
    assert_eq!(by_slug["text"], text);

    let again = app
        .call(
            "PUT",
            &format!("/api/v1/documents/{id}/text"),
            Some(json!({"text": "short\n"})),
        )
        .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.json()["text"], "short\n");
    assert_eq!(again.json()["revision"], 2);
    assert_eq!(app.document(&id).await.json()["text"], "short\n");

    // A program-created document is rewritten the same way.
    let keyed = app
        .create_keyed(
            "k",
            json!({"repository": "acme/app", "title": "Keyed", "text": "one\n"}),
        )
        .await
        .id();
    let answer = app
        .call(
            "PUT",
            &format!("/api/v1/documents/{keyed}/text"),
            Some(json!({"text": "two\n"})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(
        (&answer.json()["text"], &answer.json()["revision"]),
        (&json!("two\n"), &json!(1))
    );
    assert_eq!(app.document(&keyed).await.json()["text"], "two\n");
}

#[tokio::test]
async fn archiving_hides_a_document_from_lists_until_restored() {
    let app = App::new().await;
    let kept = id_of(&app.create("acme/app", "Kept").await);
    let created = app.create("acme/app", "Old plan").await;
    let id = id_of(&created);
    let rewritten = app
        .call(
            "PUT",
            &format!("/api/v1/documents/{id}/text"),
            Some(json!({"text": "old text\n"})),
        )
        .await
        .json();

    let archived = app.archive(&id).await;
    assert_eq!(archived.status, StatusCode::OK, "{}", archived.body);
    let archived = archived.json();
    assert!(archived["archived_at"].is_string(), "{archived}");
    assert_eq!(
        archived["revision"], rewritten["revision"],
        "archiving moves no counter"
    );
    assert_eq!(archived["sequence"], rewritten["sequence"]);
    let repeated = app.archive(&id).await;
    assert_eq!(repeated.status, StatusCode::OK, "{}", repeated.body);
    assert_eq!(
        repeated.json(),
        archived,
        "archiving again changed something"
    );

    assert_eq!(app.listed("/api/v1/documents").await, vec![kept.clone()]);
    assert_eq!(
        app.listed("/api/v1/documents?repository=acme/app").await,
        vec![kept.clone()]
    );
    let everything: BTreeSet<String> = app
        .listed("/api/v1/documents?archived=true")
        .await
        .into_iter()
        .collect();
    assert_eq!(everything, BTreeSet::from([kept.clone(), id.clone()]));

    // Still readable by ID and by slug.
    let read = app.document(&id).await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.body);
    assert_eq!(read.json()["text"], "old text\n");
    assert_eq!(read.json()["archived_at"], archived["archived_at"]);
    let by_slug = app.by_slug("acme/app", "old-plan").await;
    assert_eq!(by_slug.status, StatusCode::OK, "{}", by_slug.body);
    assert_eq!(by_slug.json()["id"], id.as_str());

    // Its text cannot be replaced while archived.
    let refused = app
        .call(
            "PUT",
            &format!("/api/v1/documents/{id}/text"),
            Some(json!({"text": "new text\n"})),
        )
        .await;
    assert!(
        refused.status.is_client_error(),
        "{}: {}",
        refused.status,
        refused.body
    );
    assert!(!refused.code().is_empty(), "{}", refused.body);
    let unchanged = app.document(&id).await.json();
    assert_eq!(unchanged["text"], "old text\n");
    assert_eq!(unchanged["revision"], rewritten["revision"]);

    let restored = app
        .call("POST", &format!("/api/v1/documents/{id}/restore"), None)
        .await;
    assert_eq!(restored.status, StatusCode::OK, "{}", restored.body);
    assert!(restored.json()["archived_at"].is_null());
    assert_eq!(restored.json()["revision"], rewritten["revision"]);
    let restored_again = app
        .call("POST", &format!("/api/v1/documents/{id}/restore"), None)
        .await;
    assert_eq!(restored_again.status, StatusCode::OK);
    assert_eq!(restored_again.json(), restored.json());
    let listed: BTreeSet<String> = app.listed("/api/v1/documents").await.into_iter().collect();
    assert_eq!(listed, BTreeSet::from([kept, id.clone()]));

    let rewrite = app
        .call(
            "PUT",
            &format!("/api/v1/documents/{id}/text"),
            Some(json!({"text": "new text\n"})),
        )
        .await;
    assert_eq!(rewrite.status, StatusCode::OK, "{}", rewrite.body);
    assert_eq!(app.document(&id).await.json()["text"], "new text\n");
}

#[tokio::test]
async fn only_an_archived_childless_document_is_deleted() {
    let app = App::new().await;
    let id = id_of(&app.create("acme/app", "Doomed").await);
    let active = app
        .call("DELETE", &format!("/api/v1/documents/{id}"), None)
        .await;
    assert_eq!(
        active.error(),
        (StatusCode::CONFLICT, "conflict".to_owned())
    );
    assert_eq!(app.document(&id).await.status, StatusCode::OK);

    assert_eq!(app.archive(&id).await.status, StatusCode::OK);
    let deleted = app
        .call("DELETE", &format!("/api/v1/documents/{id}"), None)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.body);
    assert!(deleted.body.is_empty());
    assert_eq!(
        app.document(&id).await.error(),
        (StatusCode::NOT_FOUND, "not_found".to_owned())
    );
    assert_eq!(
        app.by_slug("acme/app", "doomed").await.error(),
        (StatusCode::NOT_FOUND, "not_found".to_owned())
    );
    assert!(
        app.listed("/api/v1/documents?archived=true")
            .await
            .is_empty()
    );
    assert_eq!(
        app.call("DELETE", &format!("/api/v1/documents/{id}"), None)
            .await
            .status,
        StatusCode::NOT_FOUND,
        "deleting twice"
    );
    // Its slug is free again.
    assert_eq!(app.create("acme/app", "Doomed").await["slug"], "doomed");

    // A parent with a child is not deleted, even archived.
    let parent = id_of(&app.create("acme/app", "Parent").await);
    let child = app
        .call(
            "POST",
            "/api/v1/documents",
            Some(json!({"repository": "acme/app", "title": "Child", "parent": parent})),
        )
        .await;
    assert_eq!(child.status, StatusCode::CREATED, "{}", child.body);
    let child = child.id();
    assert_eq!(app.archive(&parent).await.status, StatusCode::OK);
    let refused = app
        .call("DELETE", &format!("/api/v1/documents/{parent}"), None)
        .await;
    assert_eq!(
        refused.error(),
        (StatusCode::CONFLICT, "conflict".to_owned())
    );
    assert_eq!(app.document(&parent).await.status, StatusCode::OK);
    assert_eq!(app.document(&child).await.status, StatusCode::OK);

    // Once the child is gone, the parent goes too.
    assert_eq!(app.archive(&child).await.status, StatusCode::OK);
    assert_eq!(
        app.call("DELETE", &format!("/api/v1/documents/{child}"), None)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.call("DELETE", &format!("/api/v1/documents/{parent}"), None)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(app.document(&parent).await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn children_are_one_level_deep_and_in_the_same_repository() {
    let app = App::new().await;
    let parent = id_of(&app.create("acme/app", "Parent").await);
    let children_uri = format!("/api/v1/documents/{parent}/children");
    let empty = app.get(&children_uri).await;
    assert_eq!(empty.status, StatusCode::OK, "{}", empty.body);
    assert_eq!(empty.json(), json!([]));

    let mut made = Vec::new();
    for title in ["First child", "Second child"] {
        let child = app
            .call(
                "POST",
                "/api/v1/documents",
                Some(json!({"repository": "acme/app", "title": title, "parent": parent})),
            )
            .await;
        assert_eq!(child.status, StatusCode::CREATED, "{}", child.body);
        assert_eq!(child.json()["parent"], parent.as_str());
        made.push(child.id());
    }
    let listed = app.get(&children_uri).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    assert_eq!(ids(&listed.json()), made);
    assert_eq!(listed.json()[0]["parent"], parent.as_str());
    assert!(listed.json()[0].get("text").is_none());

    // A program-created child.
    let keyed = app
        .create_keyed(
            "child-3",
            json!({"repository": "acme/app", "title": "Third", "parent": parent, "text": "3\n"}),
        )
        .await;
    assert_eq!(keyed.status, StatusCode::CREATED, "{}", keyed.body);
    assert_eq!(keyed.json()["parent"], parent.as_str());
    assert_eq!(ids(&app.get(&children_uri).await.json()).len(), 3);

    // An archived child is listed only when asked for.
    assert_eq!(app.archive(&made[0]).await.status, StatusCode::OK);
    assert!(
        !ids(&app.get(&children_uri).await.json()).contains(&made[0]),
        "an archived child is listed"
    );
    assert!(
        ids(&app
            .get(&format!("{children_uri}?archived=true"))
            .await
            .json())
        .contains(&made[0])
    );

    // No grandchildren.
    let grandchild = app
        .call(
            "POST",
            "/api/v1/documents",
            Some(json!({"repository": "acme/app", "title": "Grandchild", "parent": made[1]})),
        )
        .await;
    assert_eq!(
        grandchild.error(),
        (StatusCode::BAD_REQUEST, "invalid".to_owned())
    );
    let keyed_grandchild = app
        .create_keyed(
            "grandchild",
            json!({"repository": "acme/app", "title": "Grandchild", "parent": made[1], "text": "x"}),
        )
        .await;
    assert_eq!(
        keyed_grandchild.error(),
        (StatusCode::BAD_REQUEST, "invalid".to_owned())
    );
    // No parent from another repository.
    let elsewhere = app
        .call(
            "POST",
            "/api/v1/documents",
            Some(json!({"repository": "acme/web", "title": "Stray", "parent": parent})),
        )
        .await;
    assert_eq!(
        elsewhere.error(),
        (StatusCode::BAD_REQUEST, "invalid".to_owned())
    );
    // No parent that does not exist.
    let orphan = app
        .call(
            "POST",
            "/api/v1/documents",
            Some(json!({"repository": "acme/app", "title": "Orphan", "parent": UNKNOWN_ID})),
        )
        .await;
    assert_eq!(
        orphan.error(),
        (StatusCode::BAD_REQUEST, "invalid".to_owned())
    );
    assert!(
        app.listed("/api/v1/documents?repository=acme/web")
            .await
            .is_empty()
    );
    assert!(
        app.get(&format!("/api/v1/documents/{}/children", made[1]))
            .await
            .json()
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        app.listed("/api/v1/documents?repository=acme/app&archived=true")
            .await
            .len(),
        4,
        "a refused child was created"
    );
}

#[tokio::test]
async fn lists_page_through_every_document_newest_first() {
    let app = App::new().await;
    let mut created = Vec::new();
    for n in 1..=5 {
        created.push(id_of(&app.create("acme/pages", &format!("Page {n}")).await));
        // Distinct update times, so "newest first" has one answer.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Another repository's documents are not in this repository's pages.
    app.create("acme/other", "Elsewhere").await;

    let mut seen = Vec::new();
    let mut pages = Vec::new();
    let mut uri = "/api/v1/documents?repository=acme/pages&limit=2".to_owned();
    loop {
        let answer = app.get(&uri).await;
        assert_eq!(answer.status, StatusCode::OK, "{uri}: {}", answer.body);
        let page = answer.json();
        let page_ids = ids(&page["documents"]);
        assert!(page_ids.len() <= 2, "{page}");
        for document in page["documents"].as_array().unwrap() {
            assert_eq!(document["repository"], "acme/pages");
        }
        pages.push(page_ids.len());
        seen.extend(page_ids);
        match page["next_cursor"].as_str() {
            Some(cursor) => {
                assert!(pages.len() < 5, "the pages do not end");
                uri = format!("/api/v1/documents?repository=acme/pages&limit=2&cursor={cursor}");
            }
            None => break,
        }
    }
    assert_eq!(pages, vec![2, 2, 1]);
    let newest_first: Vec<String> = created.iter().rev().cloned().collect();
    assert_eq!(
        seen, newest_first,
        "pages repeat, skip or misorder documents"
    );

    // Without a repository, every document; a limit beyond the count is one page.
    let all = app.get("/api/v1/documents?limit=500").await.json();
    assert_eq!(ids(&all["documents"]).len(), 6);
    assert!(all["next_cursor"].is_null());
    let one = app
        .get("/api/v1/documents?repository=acme/pages&limit=0")
        .await;
    assert_eq!(one.status, StatusCode::OK, "{}", one.body);
    assert_eq!(
        ids(&one.json()["documents"]).len(),
        1,
        "a limit below 1 is 1"
    );

    // Updating a document moves it to the front, once the time it records is a second old
    // (`UPDATED_AT_RESOLUTION_MS`: a commit within the second leaves it where it was).
    tokio::time::sleep(Duration::from_millis(
        u64::try_from(UPDATED_AT_RESOLUTION_MS).unwrap(),
    ))
    .await;
    let oldest = &created[0];
    let rewrite = app
        .call(
            "PUT",
            &format!("/api/v1/documents/{oldest}/text"),
            Some(json!({"text": "touched\n"})),
        )
        .await;
    assert_eq!(rewrite.status, StatusCode::OK, "{}", rewrite.body);
    assert_eq!(
        app.listed("/api/v1/documents?repository=acme/pages&limit=1")
            .await,
        vec![oldest.clone()]
    );

    for cursor in [
        "nonsense",
        "123",
        "abc.0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13",
        "123.not-a-uuid",
    ] {
        let answer = app
            .get(&format!("/api/v1/documents?limit=2&cursor={cursor}"))
            .await;
        assert_eq!(
            answer.error(),
            (StatusCode::BAD_REQUEST, "invalid".to_owned()),
            "{cursor}"
        );
    }
}

#[tokio::test]
async fn bad_input_gets_a_clear_error() {
    let app = App::new().await;
    let id = id_of(&app.create("acme/app", "Plan").await);

    // Not JSON by content type.
    for (method, uri) in [
        ("POST", "/api/v1/documents".to_owned()),
        ("PATCH", format!("/api/v1/documents/{id}")),
        ("PUT", format!("/api/v1/documents/{id}/text")),
    ] {
        let answer = app
            .raw(method, &uri, "text/plain", r#"{"title":"x","text":"x"}"#)
            .await;
        assert_eq!(
            answer.error(),
            (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "json_required".to_owned()
            ),
            "{method} {uri}"
        );
        let untyped = app
            .send(
                app.request(method, &uri)
                    .body(Body::from(r#"{"title":"x"}"#))
                    .unwrap(),
            )
            .await;
        assert_eq!(
            untyped.status,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{method} {uri} without a content type"
        );
    }

    // Malformed JSON: a 400 that does not repeat what was sent.
    let secret = "sekrit-marker-7731";
    for (method, uri) in [
        ("POST", "/api/v1/documents".to_owned()),
        ("PATCH", format!("/api/v1/documents/{id}")),
        ("PUT", format!("/api/v1/documents/{id}/text")),
    ] {
        let answer = app
            .raw(
                method,
                &uri,
                "application/json",
                &format!(r#"{{"title": "{secret}", "text": "{secret}"#),
            )
            .await;
        assert_eq!(
            answer.error(),
            (StatusCode::BAD_REQUEST, "invalid".to_owned()),
            "{method} {uri}"
        );
        assert!(
            !answer.body.contains(secret),
            "{method} {uri} echoed the body: {}",
            answer.body
        );
        assert!(
            !answer.json()["error"]["message"]
                .as_str()
                .unwrap()
                .is_empty()
        );
    }

    // Unknown fields.
    for (method, uri, body) in [
        (
            "POST",
            "/api/v1/documents".to_owned(),
            json!({"repository": "acme/app", "title": "x", "colour": "red"}),
        ),
        (
            "PATCH",
            format!("/api/v1/documents/{id}"),
            json!({"title": "x", "slug": "x"}),
        ),
        (
            "PUT",
            format!("/api/v1/documents/{id}/text"),
            json!({"text": "x", "revision": 3}),
        ),
    ] {
        let answer = app.call(method, &uri, Some(body)).await;
        assert_eq!(
            answer.error(),
            (StatusCode::BAD_REQUEST, "invalid".to_owned()),
            "{method} {uri}"
        );
    }
    // Missing required fields.
    for body in [json!({"title": "x"}), json!({"repository": "acme/app"})] {
        let answer = app.call("POST", "/api/v1/documents", Some(body)).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    }

    // Titles and repositories.
    for title in ["", "   ", "line\nbreak"] {
        let answer = app
            .call(
                "POST",
                "/api/v1/documents",
                Some(json!({"repository": "acme/app", "title": title})),
            )
            .await;
        assert_eq!(
            answer.error(),
            (StatusCode::BAD_REQUEST, "invalid".to_owned()),
            "{title:?}"
        );
        let keyed = app
            .create_keyed(
                "bad-title",
                json!({"repository": "acme/app", "title": title, "text": "x"}),
            )
            .await;
        assert_eq!(keyed.status, StatusCode::BAD_REQUEST, "{title:?}");
        let rename = app
            .call(
                "PATCH",
                &format!("/api/v1/documents/{id}"),
                Some(json!({"title": title})),
            )
            .await;
        assert_eq!(
            rename.error(),
            (StatusCode::BAD_REQUEST, "invalid".to_owned()),
            "rename to {title:?}"
        );
    }
    for repository in ["acme app", "", "acme/app?x"] {
        let answer = app
            .call(
                "POST",
                "/api/v1/documents",
                Some(json!({"repository": repository, "title": "x"})),
            )
            .await;
        assert_eq!(
            answer.error(),
            (StatusCode::BAD_REQUEST, "invalid".to_owned()),
            "{repository:?}"
        );
    }
    let listed = app.get("/api/v1/documents?repository=acme%20app").await;
    assert_eq!(
        listed.error(),
        (StatusCode::BAD_REQUEST, "invalid".to_owned())
    );
    let by_slug = app.by_slug("acme%20app", "plan").await;
    assert_eq!(
        by_slug.error(),
        (StatusCode::BAD_REQUEST, "invalid".to_owned())
    );

    // Nothing was created or changed by any of it.
    assert_eq!(app.listed("/api/v1/documents").await, vec![id.clone()]);
    let document = app.document(&id).await.json();
    assert_eq!(
        (&document["title"], &document["text"], &document["revision"]),
        (&json!("Plan"), &json!(""), &json!(0))
    );
}

#[tokio::test]
async fn writes_without_the_writer_lease_are_refused_and_change_nothing() {
    let app = App::new().await;
    let active = id_of(&app.create("acme/app", "Active").await);
    let rewritten = app
        .call(
            "PUT",
            &format!("/api/v1/documents/{active}/text"),
            Some(json!({"text": "before\n"})),
        )
        .await;
    assert_eq!(rewritten.status, StatusCode::OK, "{}", rewritten.body);
    let archived = id_of(&app.create("acme/app", "Archived").await);
    assert_eq!(app.archive(&archived).await.status, StatusCode::OK);
    let keyed_body = json!({"repository": "acme/app", "title": "Keyed", "text": "k\n"});
    assert_eq!(
        app.create_keyed("existing", keyed_body.clone())
            .await
            .status,
        StatusCode::CREATED
    );
    let before_active = app.document(&active).await.json();
    let before_archived = app.document(&archived).await.json();
    let before_list = app.get("/api/v1/documents?archived=true").await.json();

    app.fence.set(None);
    let attempts: Vec<(&str, String, Option<Value>)> = vec![
        (
            "POST",
            "/api/v1/documents".to_owned(),
            Some(json!({"repository": "acme/app", "title": "New"})),
        ),
        (
            "PATCH",
            format!("/api/v1/documents/{active}"),
            Some(json!({"title": "Renamed"})),
        ),
        (
            "PUT",
            format!("/api/v1/documents/{active}/text"),
            Some(json!({"text": "after\n"})),
        ),
        ("POST", format!("/api/v1/documents/{active}/archive"), None),
        (
            "POST",
            format!("/api/v1/documents/{archived}/restore"),
            None,
        ),
        ("DELETE", format!("/api/v1/documents/{archived}"), None),
    ];
    for (method, uri, body) in attempts {
        let answer = app.call(method, &uri, body).await;
        assert_eq!(
            answer.error(),
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable".to_owned()),
            "{method} {uri}"
        );
    }
    for (key, body) in [
        (
            "new-key",
            json!({"repository": "acme/app", "title": "New", "text": "n\n"}),
        ),
        ("existing", keyed_body.clone()),
    ] {
        let answer = app.create_keyed(key, body).await;
        assert_eq!(
            answer.error(),
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable".to_owned()),
            "keyed creation {key}"
        );
    }

    // Reads still answer, and show that nothing changed.
    let after_active = app.document(&active).await;
    assert_eq!(after_active.status, StatusCode::OK, "{}", after_active.body);
    assert_eq!(after_active.json(), before_active);
    assert_eq!(app.document(&archived).await.json(), before_archived);
    assert_eq!(
        app.get("/api/v1/documents?archived=true").await.json(),
        before_list
    );
    assert_eq!(
        app.by_slug("acme/app", "renamed").await.status,
        StatusCode::NOT_FOUND
    );

    // With the lease back, writes go through again.
    app.fence.set(Some(app.lease.clone()));
    let answer = app
        .call(
            "PUT",
            &format!("/api/v1/documents/{active}/text"),
            Some(json!({"text": "after\n"})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.json()["text"], "after\n");
    assert_eq!(
        answer.json()["revision"],
        before_active["revision"].as_i64().unwrap() + 1
    );
    assert_eq!(app.document(&active).await.json()["text"], "after\n");
}

#[tokio::test]
async fn the_openapi_description_lists_every_documents_route() {
    let app = App::new().await;
    let answer = app
        .send(anonymous("GET", "/api/v1/openapi.json", None))
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    assert!(
        answer.headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let description = answer.json();
    assert!(
        description["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.")),
        "{}",
        description["openapi"]
    );
    let paths = description["paths"]
        .as_object()
        .expect("an object of paths");

    // Every route of the documents and repositories APIs in the route table is described, and
    // everything described there is served.
    let documented = |path: &str| {
        (path.starts_with("/api/v1/documents")
            || path.starts_with("/api/v1/repositories")
            || path == "/api/v1/search")
            && path != "/api/v1/openapi.json"
    };
    let table = fermata_http::route_table();
    for route in table.iter().filter(|route| documented(route.path)) {
        let method = route.method.as_str().to_ascii_lowercase();
        let described = paths
            .get(route.path)
            .and_then(|item| item.get(&method))
            .is_some_and(|op| op["responses"].is_object());
        assert!(
            described,
            "{} {} is not described",
            route.method, route.path
        );
    }
    let methods = ["get", "put", "post", "delete", "patch"];
    for (path, item) in paths {
        assert!(
            documented(path),
            "{path} is described but outside the documented APIs"
        );
        for method in methods.iter().filter(|m| item.get(**m).is_some()) {
            assert!(
                table
                    .iter()
                    .any(|r| r.path == path && r.method.as_str().eq_ignore_ascii_case(method)),
                "{method} {path} is described but not served"
            );
        }
    }
}

#[tokio::test]
async fn malformed_query_parameters_get_a_json_error() {
    let app = App::new().await;
    let id = id_of(&app.create("acme/app", "Plan").await);
    for uri in [
        "/api/v1/documents?limit=two".to_owned(),
        "/api/v1/documents?archived=yes".to_owned(),
        "/api/v1/documents/by-slug?slug=plan".to_owned(),
        format!("/api/v1/documents/{id}/children?archived=1"),
    ] {
        let answer = app.get(&uri).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{uri}");
        let json = serde_json::from_str::<Value>(&answer.body).ok();
        assert!(
            json.as_ref()
                .is_some_and(|json| json["error"]["code"] == "invalid"),
            "{uri}: the error is not the documented JSON error: {:?} {}",
            answer.headers.get(header::CONTENT_TYPE),
            answer.body
        );
    }
}

#[tokio::test]
async fn a_malformed_parent_id_is_bad_input() {
    let app = App::new().await;
    let answer = app
        .call(
            "POST",
            "/api/v1/documents",
            Some(json!({"repository": "acme/app", "title": "Child", "parent": "not-a-uuid"})),
        )
        .await;
    assert_eq!(
        answer.error(),
        (StatusCode::BAD_REQUEST, "invalid".to_owned()),
        "{}",
        answer.body
    );
    assert!(app.listed("/api/v1/documents").await.is_empty());
}

/// Polls a document's history until it lists `count` sessions, and returns them.
async fn sessions(app: &App, id: &str, count: usize) -> Vec<Value> {
    eventually_some(&format!("history listing {count} sessions"), || async {
        let answer = app.get(&format!("/api/v1/documents/{id}/versions")).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        let versions = answer.json()["versions"].as_array().unwrap().clone();
        (versions.len() == count).then_some(versions)
    })
    .await
}

#[tokio::test]
async fn history_lists_sessions_newest_first_and_restores_one_for_the_caller() {
    let app = App::new().await;
    let accounts = &app.state.accounts;
    let (bob, _) = accounts
        .add_user("bob", None, BTreeSet::new())
        .await
        .unwrap();
    let (_, bob_token) = accounts.create_api_token(&bob, "tests").await.unwrap();
    let as_bob = |method: &str, uri: &str, body: Option<Value>| {
        let request = Request::builder().method(method).uri(uri).header(
            header::AUTHORIZATION,
            format!("Bearer {}", bob_token.expose()),
        );
        match body {
            Some(value) => request
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(value.to_string())),
            None => request.body(Body::empty()),
        }
        .unwrap()
    };
    let id = id_of(&app.create("acme/app", "Plan").await);
    let text = format!("/api/v1/documents/{id}/text");
    let joined = app
        .call(
            "PUT",
            "/api/v1/repositories/acme/app/members/bob",
            Some(json!({"role": "editor"})),
        )
        .await;
    assert_eq!(joined.status, StatusCode::OK, "{}", joined.body);
    // Opening a document's history before any edit lists nothing.
    assert!(sessions(&app, &id, 0).await.is_empty());

    app.call("PUT", &text, Some(json!({"text": "# One\n"})))
        .await;
    app.call("PUT", &text, Some(json!({"text": "# One, again\n"})))
        .await;
    sessions(&app, &id, 1).await;
    let by_bob = app
        .send(as_bob("PUT", &text, Some(json!({"text": "# Two\n"}))))
        .await;
    assert_eq!(by_bob.status, StatusCode::OK, "{}", by_bob.body);
    let listed = sessions(&app, &id, 2).await;
    assert_eq!(listed[0]["number"], 2);
    assert_eq!(listed[0]["author"], "bob");
    assert_eq!(listed[0]["text"], "# Two\n");
    assert_eq!(listed[0]["source_hash"], sha256_hex("# Two\n"));
    assert_eq!(listed[0]["revision"], by_bob.json()["revision"]);
    assert!(listed[0]["summary"].is_null());
    assert_eq!(listed[1]["number"], 1);
    assert_eq!(listed[1]["author"], "ada");
    assert_eq!(listed[1]["text"], "# One, again\n");
    assert!(listed[1]["started_at"].as_str().unwrap() <= listed[1]["ended_at"].as_str().unwrap());
    let newest = app
        .get(&format!("/api/v1/documents/{id}/versions?limit=1"))
        .await
        .json();
    assert_eq!(newest["versions"].as_array().unwrap().len(), 1);
    assert_eq!(newest["versions"][0]["number"], 2);

    // Restoring session 1, as ada: the text comes back through the rewrite path, and history
    // credits her with a new session.
    let restored = app
        .call(
            "POST",
            &format!("/api/v1/documents/{id}/versions/1/restore"),
            None,
        )
        .await;
    assert_eq!(restored.status, StatusCode::OK, "{}", restored.body);
    assert_eq!(restored.json()["text"], "# One, again\n");
    assert_eq!(app.document(&id).await.json()["text"], "# One, again\n");
    let listed = sessions(&app, &id, 3).await;
    assert_eq!(listed[0]["author"], "ada");
    assert_eq!(listed[0]["text"], "# One, again\n");

    for bad in ["99", "0", "-1", "one"] {
        let answer = app
            .call(
                "POST",
                &format!("/api/v1/documents/{id}/versions/{bad}/restore"),
                None,
            )
            .await;
        assert_eq!(
            answer.error(),
            (StatusCode::NOT_FOUND, "not_found".to_owned()),
            "{bad}"
        );
    }
    let unknown = app
        .get(&format!("/api/v1/documents/{UNKNOWN_ID}/versions"))
        .await;
    assert_eq!(
        unknown.error(),
        (StatusCode::NOT_FOUND, "not_found".to_owned())
    );
    let malformed = app
        .get(&format!("/api/v1/documents/{id}/versions?limit=many"))
        .await;
    assert_eq!(malformed.status, StatusCode::BAD_REQUEST);

    // A browser session restores only with its CSRF token.
    let login = app
        .send(anonymous(
            "POST",
            "/api/v1/session",
            Some(json!({"name": "ada", "password": PASSWORD})),
        ))
        .await;
    let cookie = login
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix("fermata_session="))
        .map(|rest| rest.split(';').next().unwrap().to_owned())
        .expect("a session cookie");
    let restore = Request::post(format!("/api/v1/documents/{id}/versions/2/restore"))
        .header(header::COOKIE, format!("fermata_session={cookie}"))
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        app.send(restore).await.error(),
        (StatusCode::FORBIDDEN, "csrf".to_owned())
    );
    assert_eq!(app.document(&id).await.json()["text"], "# One, again\n");
}

/// Sends a request with another user's API token.
async fn as_token(
    app: &App,
    token: &str,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Answer {
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {token}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let body = match body {
        Some(value) => {
            request = request.header(header::CONTENT_TYPE, "application/json");
            Body::from(value.to_string())
        }
        None => Body::empty(),
    };
    app.send(request.body(body).unwrap()).await
}

/// A second user, `bob`, an editor of acme/app, with an API token.
async fn editor_bob(app: &App) -> String {
    let accounts = &app.state.accounts;
    let (bob, _) = accounts
        .add_user("bob", None, BTreeSet::new())
        .await
        .unwrap();
    let (_, token) = accounts.create_api_token(&bob, "tests").await.unwrap();
    let joined = app
        .call(
            "PUT",
            "/api/v1/repositories/acme/app/members/bob",
            Some(json!({"role": "editor"})),
        )
        .await;
    assert_eq!(joined.status, StatusCode::OK, "{}", joined.body);
    token.expose().to_owned()
}

#[tokio::test]
async fn a_creation_key_belongs_to_the_caller_that_used_it_first() {
    let app = App::new().await;
    app.create("acme/app", "Seed").await;
    let bob = editor_bob(&app).await;
    let body = json!({"repository": "acme/app", "title": "Daily", "text": "ada's text\n"});
    let first = app.create_keyed("2030-01-01", body.clone()).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let document = first.json();
    let listed = app.listed("/api/v1/documents?repository=acme/app").await;

    // The same caller with another body: 409, nothing changes.
    let other_body = app
        .create_keyed(
            "2030-01-01",
            json!({"repository": "acme/app", "title": "Daily", "text": "another text\n"}),
        )
        .await;
    assert_eq!(
        other_body.error(),
        (StatusCode::CONFLICT, "idempotency_key_reused".to_owned())
    );
    // Another caller with the same key, even the same body: 409, nothing is created.
    let keyed = |key: &'static str, body: Value| {
        let bob = bob.clone();
        let app = &app;
        async move {
            as_token(
                app,
                &bob,
                "POST",
                "/api/v1/documents",
                &[("idempotency-key", key)],
                Some(body),
            )
            .await
        }
    };
    let by_bob = keyed("2030-01-01", body.clone()).await;
    assert_eq!(
        by_bob.error(),
        (StatusCode::CONFLICT, "idempotency_key_in_use".to_owned())
    );
    let read = app.document(&id_of(&document)).await.json();
    assert_eq!(
        (&read["title"], &read["text"], &read["revision"]),
        (&document["title"], &document["text"], &document["revision"])
    );
    assert_eq!(
        app.listed("/api/v1/documents?repository=acme/app").await,
        listed,
        "a refused repeat created a document"
    );

    // Whoever uses a key first owns it: the script that comes later is told, never handed
    // someone else's document.
    let squatted = keyed(
        "2030-01-02",
        json!({"repository": "acme/app", "title": "Daily", "text": "bob's text\n"}),
    )
    .await;
    assert_eq!(squatted.status, StatusCode::CREATED, "{}", squatted.body);
    let late = app
        .create_keyed(
            "2030-01-02",
            json!({"repository": "acme/app", "title": "Daily", "text": "ada's text\n"}),
        )
        .await;
    assert_eq!(
        late.error(),
        (StatusCode::CONFLICT, "idempotency_key_in_use".to_owned())
    );
    assert_eq!(
        app.document(&squatted.id()).await.json()["text"],
        "bob's text\n"
    );
}

#[tokio::test]
async fn reads_carry_the_revision_and_if_match_guards_program_writes() {
    let app = App::new().await;
    let id = id_of(&app.create("acme/app", "Plan").await);
    let read = app.document(&id).await;
    assert_eq!(read.headers[header::ETAG], "\"0\"");
    let text = format!("/api/v1/documents/{id}/text");
    let put = |revision: &'static str, body: &'static str| {
        let app = &app;
        let text = text.clone();
        async move {
            let request = app
                .request("PUT", &text)
                .header(header::IF_MATCH, revision)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(json!({ "text": body }).to_string()))
                .unwrap();
            app.send(request).await
        }
    };
    let first = put("\"0\"", "one\n").await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    assert_eq!(first.headers[header::ETAG], "\"1\"");
    // A stale revision: 412 with the current one, and nothing changes.
    let stale = put("\"0\"", "clobbered\n").await;
    assert_eq!(
        stale.status,
        StatusCode::PRECONDITION_FAILED,
        "{}",
        stale.body
    );
    assert_eq!(stale.json()["error"]["code"], "precondition_failed");
    assert_eq!(stale.json()["current_revision"], 1);
    assert_eq!(stale.headers[header::ETAG], "\"1\"");
    let garbage = put("not-a-tag", "clobbered\n").await;
    assert_eq!(garbage.status, StatusCode::PRECONDITION_FAILED);
    let rename = app
        .send(
            app.request("PATCH", &format!("/api/v1/documents/{id}"))
                .header(header::IF_MATCH, "W/\"0\"")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(json!({"title": "Clobbered"}).to_string()))
                .unwrap(),
        )
        .await;
    assert_eq!(
        rename.status,
        StatusCode::PRECONDITION_FAILED,
        "{}",
        rename.body
    );
    sessions(&app, &id, 1).await;
    let restore = app
        .send(
            app.request(
                "POST",
                &format!("/api/v1/documents/{id}/versions/1/restore"),
            )
            .header(header::IF_MATCH, "\"0\"")
            .body(Body::empty())
            .unwrap(),
        )
        .await;
    assert_eq!(
        restore.status,
        StatusCode::PRECONDITION_FAILED,
        "{}",
        restore.body
    );
    let now = app.document(&id).await.json();
    assert_eq!(
        (&now["title"], &now["text"], &now["revision"]),
        (&json!("Plan"), &json!("one\n"), &json!(1))
    );
    // The current revision, `*`, or no If-Match at all: applied.
    assert_eq!(put("\"1\"", "two\n").await.status, StatusCode::OK);
    assert_eq!(put("*", "three\n").await.status, StatusCode::OK);
    let unguarded = app
        .call("PUT", &text, Some(json!({"text": "four\n"})))
        .await;
    assert_eq!(unguarded.status, StatusCode::OK);
    assert_eq!(unguarded.json()["revision"], 4);
}

#[tokio::test]
async fn the_yjs_routes_read_the_state_and_merge_updates() {
    let app = App::new().await;
    let id = id_of(&app.create("acme/app", "Plan").await);
    app.call(
        "PUT",
        &format!("/api/v1/documents/{id}/text"),
        Some(json!({"text": "hello\n"})),
    )
    .await;
    let state = |query: String| {
        let app = &app;
        let id = id.clone();
        async move {
            app.send(
                app.request("GET", &format!("/api/v1/documents/{id}/state{query}"))
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
        }
    };
    let whole = state(String::new()).await;
    assert_eq!(whole.status, StatusCode::OK);
    assert_eq!(
        whole.headers[header::CONTENT_TYPE],
        "application/octet-stream"
    );
    assert_eq!(whole.headers[header::ETAG], "\"1\"");
    // The body is binary: read it again as bytes.
    let bytes = {
        let response = tower::ServiceExt::oneshot(
            fermata_http::router(app.state.clone()),
            app.request("GET", &format!("/api/v1/documents/{id}/state"))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
        axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap()
            .to_vec()
    };
    let mut copy = fermata_docs::SourceDoc::from_state(&bytes).unwrap();
    assert_eq!(copy.text(), "hello\n");

    // A program's update made on that copy merges; the difference since the copy is just it.
    let update = copy.insert(copy.len(), "world\n").unwrap();
    let merged = app
        .send(
            app.request("POST", &format!("/api/v1/documents/{id}/updates"))
                .header(header::CONTENT_TYPE, "application/octet-stream")
                .body(Body::from(update))
                .unwrap(),
        )
        .await;
    assert_eq!(merged.status, StatusCode::OK, "{}", merged.body);
    assert_eq!(merged.json()["revision"], 2);
    assert_eq!(app.document(&id).await.json()["text"], "hello\nworld\n");
    use base64::Engine as _;
    let vector = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(copy.state_vector());
    let diff = state(format!("?state_vector={vector}")).await;
    assert_eq!(diff.status, StatusCode::OK);
    assert_eq!(
        state("?state_vector=%%%".to_owned()).await.status,
        StatusCode::BAD_REQUEST
    );

    // Undecodable bytes and updates with missing predecessors are refused, changing nothing.
    let mut orphan = fermata_docs::SourceDoc::new();
    orphan.insert(0, "a").unwrap();
    let later = orphan.insert(1, "b").unwrap();
    for (body, code) in [
        (vec![0xff, 0x01, 0x02], "update_undecodable"),
        (later, "update_missing_dependencies"),
    ] {
        let refused = app
            .send(
                app.request("POST", &format!("/api/v1/documents/{id}/updates"))
                    .body(Body::from(body))
                    .unwrap(),
            )
            .await;
        assert_eq!(
            refused.error(),
            (StatusCode::UNPROCESSABLE_ENTITY, code.to_owned())
        );
    }
    let empty = app
        .send(
            app.request("POST", &format!("/api/v1/documents/{id}/updates"))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST);
    assert_eq!(app.document(&id).await.json()["revision"], 2);
}

#[tokio::test]
async fn a_program_write_during_an_outage_answers_503_and_changes_nothing() {
    let app = App::new().await;
    let id = id_of(&app.create("acme/app", "Outage").await);
    let uri = format!("/api/v1/documents/{id}/text");
    let put = |text: &'static str| app.call("PUT", &uri, Some(json!({"text": text})));
    assert_eq!(put("before\n").await.status, StatusCode::OK);
    let readyz = || async {
        let answer = app
            .send(Request::get("/readyz").body(Body::empty()).unwrap())
            .await;
        (answer.status, answer.body)
    };
    assert_eq!(readyz().await.0, StatusCode::OK);

    app.faults.set(
        "collaboration.commit",
        Fault::before(fermata_store::ErrorKind::Unavailable),
    );
    // A new peer's insert depends on nothing the document lacks: it would merge.
    let update = fermata_docs::SourceDoc::new().insert(0, "more\n").unwrap();
    let rewrite = put("during\n").await;
    let merge = app
        .send(
            app.request("POST", &format!("/api/v1/documents/{id}/updates"))
                .header(header::CONTENT_TYPE, "application/octet-stream")
                .body(Body::from(update))
                .unwrap(),
        )
        .await;
    for (what, answer) in [("PUT .../text", &rewrite), ("POST .../updates", &merge)] {
        assert_eq!(
            answer.error(),
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable".to_owned()),
            "{what}: {}",
            answer.body
        );
        assert_eq!(
            answer
                .headers
                .get(header::RETRY_AFTER)
                .map(|v| v.to_str().unwrap()),
            Some("2"),
            "{what}"
        );
    }
    assert_eq!(
        readyz().await,
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "storage_unavailable\n".to_owned()
        )
    );
    app.faults.clear_all();
    let stored = app.document(&id).await.json();
    assert_eq!(
        (&stored["text"], &stored["revision"]),
        (&json!("before\n"), &json!(1)),
        "a refused write left something behind"
    );

    // Once the database takes commits again, so does the server, and it is ready again.
    assert_eq!(put("after\n").await.status, StatusCode::OK);
    assert_eq!(app.document(&id).await.json()["text"], "after\n");
    assert_eq!(readyz().await.0, StatusCode::OK);
}
