//! The refresh, review, verification and registry routes of the schema API, called through the
//! router without a socket, on a real SQLite database: who may call them (401 without a login,
//! 403 without the role, 403 `reauthentication_required` for a decision on a stale session),
//! `no-store` on every answer, a refresh and a verification started from an inventory with their
//! selections checked, the review of an operation with and without a review, the drift script
//! route's refusals (a bad query, a database without a script), and the registry without a
//! package. No worker runs here; the runs stay queued.

use std::time::Duration;

use axum::http::{StatusCode, header};
use fermata_collab::WriterFence;
use fermata_crypto::SecretToken;
use fermata_http::HttpState;
use fermata_schema::{ObjectKind, ObjectSubject, Reason};
use fermata_store::schema::{
    DatabaseName, DatabaseReport, ErrorCode, InventoryId, NewInventory, OperationId,
    OperationState, SafeError, Subject, Transition,
};
use fermata_store::{Role, Storage, StoreOptions};
use fermata_store_sql::testing::{ScratchDatabase, ScratchStorage};
use serde_json::{Value, json};
use support::{Answer, Caller};

use crate::support;

const ADMIN_PASSWORD: &str = "correct horse battery staple";
const MEMBER_PASSWORD: &str = "members have passwords too";

struct App {
    state: HttpState,
    storage: ScratchStorage,
    /// `ada`, a system administrator, with a fresh session.
    ada: Caller,
    /// `bob`, without the role.
    bob: Caller,
    /// An inventory of `app`, `billing` and `crm` (`scratch `1`` left out by the filter), as the
    /// inventory workflow records one.
    inventory: InventoryId,
}

impl App {
    async fn new() -> Self {
        let storage = ScratchDatabase::sqlite()
            .open(StoreOptions::default())
            .await;
        let state = support::state(&storage, WriterFence::default());
        let accounts = &state.accounts;
        let (ada, _) = accounts
            .add_user(
                "ada",
                Some(SecretToken::from_given(ADMIN_PASSWORD)),
                [Role::SystemAdmin].into(),
            )
            .await
            .unwrap();
        accounts
            .add_user(
                "bob",
                Some(SecretToken::from_given(MEMBER_PASSWORD)),
                Default::default(),
            )
            .await
            .unwrap();
        let ada_session = support::login(&state, "ada", ADMIN_PASSWORD).await;
        let bob = support::login(&state, "bob", MEMBER_PASSWORD).await;
        let discovery = support::call(
            &state,
            &ada_session,
            "POST",
            "/api/v1/schema/inventory",
            Some(json!({"request_key": "discover"})),
        )
        .await;
        assert_eq!(discovery.status, StatusCode::ACCEPTED, "{}", discovery.body);
        let inventory = storage
            .schema()
            .record_inventory(&NewInventory {
                id: InventoryId::generate(),
                operation: id_of(&discovery),
                actor: ada.id.clone(),
                server_version: "11.4.2-MariaDB".to_owned(),
                databases: ["app", "billing", "crm"]
                    .into_iter()
                    .map(|name| DatabaseName::new(name).unwrap())
                    .collect(),
                ignored: vec![DatabaseName::new("scratch `1`").unwrap()],
                lifetime: Duration::from_secs(3600),
            })
            .await
            .unwrap();
        App {
            state,
            storage,
            ada: ada_session,
            bob,
            inventory: inventory.id,
        }
    }

    async fn call(&self, caller: &Caller, method: &str, uri: &str, body: Option<Value>) -> Answer {
        let answer = support::call(&self.state, caller, method, uri, body).await;
        assert_eq!(
            answer.headers[header::CACHE_CONTROL],
            "no-store",
            "{method} {uri}"
        );
        answer
    }

    async fn refresh(&self, caller: &Caller, key: &str, databases: &[&str]) -> Answer {
        self.start(caller, "/api/v1/schema/refresh", key, databases)
            .await
    }

    async fn verification(&self, caller: &Caller, key: &str, databases: &[&str]) -> Answer {
        self.start(caller, "/api/v1/schema/verification", key, databases)
            .await
    }

    /// `POST uri` with a selection from the inventory.
    async fn start(&self, caller: &Caller, uri: &str, key: &str, databases: &[&str]) -> Answer {
        let body = json!({
            "request_key": key,
            "inventory": self.inventory.to_string(),
            "databases": databases,
        });
        self.call(caller, "POST", uri, Some(body)).await
    }
}

fn id_of(answer: &Answer) -> OperationId {
    answer.json()["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in: {}", answer.body))
        .parse()
        .unwrap()
}

fn error(answer: &Answer) -> (StatusCode, String) {
    (answer.status, answer.code())
}

#[tokio::test]
async fn refresh_review_verification_and_registry_routes_need_a_system_administrator() {
    let app = App::new().await;
    let some = OperationId::generate();
    let routes = [
        ("POST", "/api/v1/schema/refresh".to_owned()),
        ("POST", "/api/v1/schema/verification".to_owned()),
        ("GET", "/api/v1/schema/registry".to_owned()),
        ("GET", format!("/api/v1/schema/operations/{some}/review")),
        ("POST", format!("/api/v1/schema/operations/{some}/approve")),
        ("POST", format!("/api/v1/schema/operations/{some}/reject")),
    ];
    let body =
        json!({"request_key": "k", "inventory": app.inventory.to_string(), "databases": ["app"]});
    for (method, uri) in &routes {
        let body = (*method == "POST").then(|| body.clone());
        let anonymous = app
            .call(&Caller::default(), method, uri, body.clone())
            .await;
        assert_eq!(
            error(&anonymous),
            (StatusCode::UNAUTHORIZED, "unauthenticated".to_owned()),
            "{method} {uri}"
        );
        let member = app.call(&app.bob, method, uri, body).await;
        assert_eq!(
            error(&member),
            (StatusCode::FORBIDDEN, "forbidden".to_owned()),
            "{method} {uri}"
        );
    }
    // A cookie session without its CSRF token changes nothing.
    let no_csrf = Caller {
        csrf: None,
        ..app.ada.clone()
    };
    let refused = support::call(
        &app.state,
        &no_csrf,
        "POST",
        "/api/v1/schema/refresh",
        Some(body),
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    let listed = app
        .call(&app.ada, "GET", "/api/v1/schema/operations", None)
        .await;
    assert_eq!(
        listed.json().as_array().unwrap().len(),
        1,
        "{}",
        listed.body
    );
}

#[tokio::test]
async fn a_refresh_starts_from_a_checked_selection() {
    let app = App::new().await;
    let empty = app.refresh(&app.ada, "empty", &[]).await;
    assert_eq!(
        error(&empty),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            "EMPTY_SELECTION".to_owned()
        )
    );
    assert_eq!(empty.json()["error"]["stage"], "configuration");
    assert_eq!(empty.json()["error"]["retryable"], false);
    let unknown = app.refresh(&app.ada, "unknown", &["App"]).await;
    assert_eq!(
        error(&unknown),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            "DATABASE_NOT_IN_INVENTORY".to_owned()
        )
    );
    let body =
        json!({"request_key": "nowhere", "inventory": "not-an-inventory", "databases": ["app"]});
    let nowhere = app
        .call(&app.ada, "POST", "/api/v1/schema/refresh", Some(body))
        .await;
    assert_eq!(
        error(&nowhere),
        (StatusCode::NOT_FOUND, "INVENTORY_MISSING".to_owned())
    );

    let started = app.refresh(&app.ada, "refresh-1", &["crm", "app"]).await;
    assert_eq!(started.status, StatusCode::ACCEPTED, "{}", started.body);
    let view = started.json();
    assert_eq!(view["kind"], "refresh");
    assert_eq!(view["state"], "starting", "{view}");
    assert_eq!(view["lease"]["operation_id"], view["id"]);
    let names: Vec<(&str, &str)> = view["databases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|database| {
            (
                database["name"].as_str().unwrap(),
                database["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(names, [("app", "pending"), ("crm", "pending")]);
    assert!(view.get("review").is_none(), "{view}");
    let again = app.refresh(&app.ada, "refresh-1", &["crm", "app"]).await;
    assert_eq!(again.status, StatusCode::ACCEPTED);
    assert_eq!(id_of(&again), id_of(&started));
    let held = app.refresh(&app.ada, "refresh-2", &["billing"]).await;
    assert_eq!(
        error(&held),
        (StatusCode::CONFLICT, "LEASE_HELD".to_owned())
    );
}

#[tokio::test]
async fn a_verification_starts_from_a_checked_selection_and_holds_the_lease() {
    let app = App::new().await;
    let empty = app.verification(&app.ada, "empty", &[]).await;
    assert_eq!(
        error(&empty),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            "EMPTY_SELECTION".to_owned()
        )
    );
    let unknown = app.verification(&app.ada, "unknown", &["nowhere"]).await;
    assert_eq!(
        error(&unknown),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            "DATABASE_NOT_IN_INVENTORY".to_owned()
        )
    );

    let started = app
        .verification(&app.ada, "verify-1", &["crm", "app"])
        .await;
    assert_eq!(started.status, StatusCode::ACCEPTED, "{}", started.body);
    let view = started.json();
    assert_eq!(view["kind"], "verification");
    // Registered now: the start protocol's `start()` is answered and the run waits for a worker.
    assert_eq!(view["state"], "starting", "{view}");
    assert!(view["run_id"].is_string(), "{view}");
    assert_eq!(view["lease"]["operation_id"], view["id"]);
    assert_eq!(view["lease"]["kind"], "verification");
    let names: Vec<&str> = view["databases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|database| database["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["app", "crm"]);
    let again = app
        .verification(&app.ada, "verify-1", &["crm", "app"])
        .await;
    assert_eq!(id_of(&again), id_of(&started));
    for held in [
        app.verification(&app.ada, "verify-2", &["billing"]).await,
        app.refresh(&app.ada, "refresh-1", &["billing"]).await,
    ] {
        assert_eq!(
            error(&held),
            (StatusCode::CONFLICT, "LEASE_HELD".to_owned())
        );
    }

    // The registry needs a package to read, and says so.
    let registry = app
        .call(&app.ada, "GET", "/api/v1/schema/registry", None)
        .await;
    assert_eq!(
        error(&registry),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            "PACKAGE_NOT_CONFIGURED".to_owned()
        )
    );
    assert_eq!(registry.json()["error"]["stage"], "configuration");
}

#[tokio::test]
async fn a_drift_script_is_refused_for_a_bad_query_and_a_database_without_one() {
    let app = App::new().await;
    let started = app.verification(&app.ada, "verify-1", &["app"]).await;
    let id = id_of(&started);
    let script = |query: &str| format!("/api/v1/schema/operations/{id}/drift/ddl{query}");
    let member = app
        .call(&app.bob, "GET", &script("?database=app"), None)
        .await;
    assert_eq!(
        error(&member),
        (StatusCode::FORBIDDEN, "forbidden".to_owned())
    );
    for query in [
        "?database=app&direction=sideways",
        "",
        "?database=app&allow_destructive=maybe",
        "?database=app&extra=1",
    ] {
        let bad = app.call(&app.ada, "GET", &script(query), None).await;
        assert_eq!(
            error(&bad),
            (StatusCode::BAD_REQUEST, "invalid".to_owned()),
            "{query}"
        );
    }
    let nowhere = app
        .call(
            &app.ada,
            "GET",
            &format!(
                "/api/v1/schema/operations/{}/drift/ddl?database=app",
                OperationId::generate()
            ),
            None,
        )
        .await;
    assert_eq!(
        error(&nowhere),
        (StatusCode::NOT_FOUND, "OPERATION_MISSING".to_owned())
    );
    // The verification has found no drift yet: no database has a script.
    let none = app
        .call(
            &app.ada,
            "GET",
            &script("?database=app%20%3C%26%3E&direction=adopt&allow_destructive=true"),
            None,
        )
        .await;
    assert_eq!(
        error(&none),
        (StatusCode::NOT_FOUND, "NO_MIGRATION_SCRIPT".to_owned())
    );
    assert_eq!(none.json()["error"]["stage"], "artifact");
    assert_eq!(
        none.json()["error"]["message"],
        "the drift holds no migration script for database `app <&>`"
    );
}

#[tokio::test]
async fn reviews_are_read_and_decided_only_while_pending_and_decided_on_a_fresh_session() {
    let app = App::new().await;
    let started = app.refresh(&app.ada, "refresh-1", &["app"]).await;
    let id = id_of(&started);
    let review_of = |id: OperationId| format!("/api/v1/schema/operations/{id}/review");
    let approve = format!("/api/v1/schema/operations/{id}/approve");
    let reject = format!("/api/v1/schema/operations/{id}/reject");

    // No review yet: nothing to read or decide.
    let none = app.call(&app.ada, "GET", &review_of(id), None).await;
    assert_eq!(
        error(&none),
        (StatusCode::CONFLICT, "REVIEW_NOT_PENDING".to_owned())
    );
    assert_eq!(none.json()["error"]["stage"], "review");
    let early = app.call(&app.ada, "POST", &approve, None).await;
    assert_eq!(
        error(&early),
        (StatusCode::CONFLICT, "REVIEW_NOT_PENDING".to_owned())
    );
    let missing = app
        .call(&app.ada, "GET", &review_of(OperationId::generate()), None)
        .await;
    assert_eq!(
        error(&missing),
        (StatusCode::NOT_FOUND, "OPERATION_MISSING".to_owned())
    );

    // The refresh reaches its review, as its workflow would take it there.
    let schema = app.storage.schema();
    for (from, to) in [
        (OperationState::Starting, OperationState::Running),
        (OperationState::Running, OperationState::AwaitingReview),
    ] {
        schema
            .transition(id, &Transition::new(from, to))
            .await
            .unwrap()
            .unwrap();
    }
    schema
        .open_review(id, Duration::from_secs(3600))
        .await
        .unwrap();
    let shown = app
        .call(
            &app.ada,
            "GET",
            &format!("/api/v1/schema/operations/{id}"),
            None,
        )
        .await;
    assert_eq!(shown.json()["review"]["state"], "pending", "{}", shown.body);

    // A stale session and an API token cannot decide.
    support::age_sessions(&app.storage).await;
    for uri in [&approve, &reject] {
        let stale = app.call(&app.ada, "POST", uri, None).await;
        assert_eq!(
            error(&stale),
            (
                StatusCode::FORBIDDEN,
                "reauthentication_required".to_owned()
            ),
            "{uri}"
        );
    }
    let token = support::call(
        &app.state,
        &app.ada,
        "POST",
        "/api/v1/tokens",
        Some(json!({"label": "ci"})),
    )
    .await;
    let program = Caller {
        bearer: Some(token.json()["token"].as_str().unwrap().to_owned()),
        ..Caller::default()
    };
    assert_eq!(
        app.call(&program, "POST", &approve, None).await.status,
        StatusCode::FORBIDDEN
    );

    // Fresh again: the decision is recorded once, and a different one after it is refused.
    let ada = support::login(&app.state, "ada", ADMIN_PASSWORD).await;
    let approved = app.call(&ada, "POST", &approve, None).await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.body);
    let view = approved.json();
    assert_eq!(view["id"], id.to_string());
    assert_eq!(view["review"]["state"], "approved", "{view}");
    assert!(view["review"]["decided_at"].is_string(), "{view}");
    let repeated = app.call(&ada, "POST", &approve, None).await;
    assert_eq!(repeated.status, StatusCode::OK, "{}", repeated.body);
    let rejected = app.call(&ada, "POST", &reject, None).await;
    assert_eq!(
        error(&rejected),
        (StatusCode::CONFLICT, "REVIEW_NOT_PENDING".to_owned())
    );
}

#[tokio::test]
async fn an_inventory_shows_what_the_filter_left_out() {
    let app = App::new().await;
    let latest = app
        .call(&app.ada, "GET", "/api/v1/schema/inventory", None)
        .await;
    assert_eq!(latest.status, StatusCode::OK, "{}", latest.body);
    let view = latest.json();
    assert_eq!(view["databases"], json!(["app", "billing", "crm"]));
    assert_eq!(view["ignored"], json!(["scratch `1`"]));
    let operation = view["operation_id"].as_str().unwrap().to_owned();
    let report = app
        .call(
            &app.ada,
            "GET",
            &format!("/api/v1/schema/operations/{operation}"),
            None,
        )
        .await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.body);
    assert_eq!(
        report.json()["inventory"]["ignored"],
        json!(["scratch `1`"])
    );
}

/// A refresh failed by an object the snapshot cannot capture: the operation's error and the
/// database's result name the database, the object's kind and name and the fixed reason, as
/// text and as data.
#[tokio::test]
async fn an_unsupported_object_is_named_in_the_api() {
    let app = App::new().await;
    let started = app.refresh(&app.ada, "refresh-geo", &["app"]).await;
    assert_eq!(started.status, StatusCode::ACCEPTED, "{}", started.body);
    let id = id_of(&started);
    let app_name = DatabaseName::new("app").unwrap();
    let refused = SafeError::about(
        ErrorCode::UnsupportedSchemaOutput,
        Subject::Object(ObjectSubject::named(
            &app_name,
            ObjectKind::Table,
            "ge`o",
            Reason::IndexKind,
        )),
    );
    let schema = app.storage.schema();
    assert!(schema.begin_database(id, &app_name).await.unwrap());
    assert!(
        schema
            .finish_database(
                id,
                &app_name,
                &DatabaseReport::failed(refused.clone(), false)
            )
            .await
            .unwrap()
    );
    let state = schema.operation(id).await.unwrap().unwrap().state;
    schema
        .transition(id, &Transition::fail(state, refused.clone()))
        .await
        .unwrap()
        .unwrap();

    let report = app
        .call(
            &app.ada,
            "GET",
            &format!("/api/v1/schema/operations/{id}"),
            None,
        )
        .await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.body);
    let view = report.json();
    let message =
        "the schema of database `app` cannot be captured faithfully: table `ge``o`: index kind";
    let subject = json!({"kind": "object", "value": {
        "database": "app", "kind": "table", "name": "ge`o", "reason": "index_kind"}});
    for error in [&view["error"], &view["databases"][0]["error"]] {
        assert_eq!(error["code"], "UNSUPPORTED_SCHEMA_OUTPUT", "{view}");
        assert_eq!(error["retryable"], false);
        assert_eq!(error["message"], message, "{view}");
        assert_eq!(error["subject"], subject, "{view}");
    }
    let listed = app
        .call(&app.ada, "GET", "/api/v1/schema/operations", None)
        .await;
    assert!(
        listed.body.contains("table `ge``o`: index kind"),
        "{}",
        listed.body
    );
}
