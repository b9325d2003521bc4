//! The schema administrator page through the router, on a real SQLite database: who may see it
//! (a redirect to the login form without a session, the 403 page without the role), the forms'
//! CSRF check, POST-redirect-GET with the flash shown once, an empty selection refused next to
//! its button, a wrong ID refused by the clear action, publishing again and closing a pull
//! request refused for an operation without either, a stale session sent to re-authenticate
//! before a decision, publishing again or closing, and a report page for an operation; the databases an inventory left out,
//! and a refresh failed by an unsupported object, named on the page. No worker runs here.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use fermata_collab::WriterFence;
use fermata_crypto::SecretToken;
use fermata_http::HttpState;
use fermata_schema::{ObjectKind, ObjectSubject, Reason};
use fermata_store::schema::{
    DatabaseName, DatabaseReport, ErrorCode, InventoryId, NewInventory, OperationId, OperationKind,
    SafeError, Subject, Transition,
};
use fermata_store::{Role, Storage, StoreOptions};
use fermata_store_sql::testing::{ScratchDatabase, ScratchStorage};
use support::{Answer, Caller};

use crate::support;

const PASSWORD: &str = "correct horse battery staple";

struct App {
    state: HttpState,
    storage: ScratchStorage,
    ada: Caller,
    bob: Caller,
}

impl App {
    async fn new() -> Self {
        let storage = ScratchDatabase::sqlite()
            .open(StoreOptions::default())
            .await;
        let state = support::state(&storage, WriterFence::default());
        for (name, roles) in [
            ("ada", [Role::SystemAdmin].into()),
            ("bob", Default::default()),
        ] {
            state
                .accounts
                .add_user(name, Some(SecretToken::from_given(PASSWORD)), roles)
                .await
                .unwrap();
        }
        let ada = support::login(&state, "ada", PASSWORD).await;
        let bob = support::login(&state, "bob", PASSWORD).await;
        App {
            state,
            storage,
            ada,
            bob,
        }
    }

    async fn get(&self, caller: &Caller, uri: &str, flash: Option<&str>) -> Answer {
        let mut request = Request::builder().method("GET").uri(uri);
        let mut cookies = Vec::new();
        if let Some(cookie) = &caller.cookie {
            cookies.push(format!("fermata_session={cookie}"));
        }
        if let Some(flash) = flash {
            cookies.push(flash.to_owned());
        }
        if !cookies.is_empty() {
            request = request.header(header::COOKIE, cookies.join("; "));
        }
        support::send(&self.state, request.body(Body::empty()).unwrap()).await
    }

    /// Posts `fields` as a form, with the caller's CSRF token unless `csrf` is false.
    async fn post(
        &self,
        caller: &Caller,
        uri: &str,
        fields: &[(&str, &str)],
        csrf: bool,
    ) -> Answer {
        let mut all: Vec<(&str, &str)> = fields.to_vec();
        if csrf {
            all.push(("csrf", caller.csrf.as_deref().unwrap()));
        }
        let body = serde_urlencoded::to_string(&all).unwrap();
        let request = Request::builder()
            .method("POST")
            .uri(uri)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(
                header::COOKIE,
                format!("fermata_session={}", caller.cookie.as_deref().unwrap()),
            )
            .body(Body::from(body))
            .unwrap();
        support::send(&self.state, request).await
    }
}

/// The flash cookie a redirect set, as a `name=value` pair to send back.
fn flash_of(answer: &Answer) -> String {
    answer
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("fermata_admin_flash="))
        .map(|v| v.split(';').next().unwrap().to_owned())
        .unwrap_or_else(|| panic!("no flash cookie: {:?}", answer.headers))
}

fn location(answer: &Answer) -> &str {
    answer.headers[header::LOCATION].to_str().unwrap()
}

#[tokio::test]
async fn only_a_system_administrator_sees_the_page() {
    let app = App::new().await;
    let anonymous = app.get(&Caller::default(), "/admin/schema", None).await;
    assert_eq!(anonymous.status, StatusCode::SEE_OTHER);
    assert_eq!(location(&anonymous), "/login?next=/admin/schema");

    let bob = app.get(&app.bob, "/admin/schema", None).await;
    assert_eq!(bob.status, StatusCode::FORBIDDEN);
    assert!(
        bob.body
            .contains("needs the <code>system_admin</code> role"),
        "{}",
        bob.body
    );
    let bob_posts = app
        .post(
            &app.bob,
            "/admin/schema/inventory",
            &[("request_key", "k")],
            true,
        )
        .await;
    assert_eq!(bob_posts.status, StatusCode::FORBIDDEN);

    let ada = app.get(&app.ada, "/admin/schema", None).await;
    assert_eq!(ada.status, StatusCode::OK, "{}", ada.body);
    assert_eq!(ada.headers[header::CACHE_CONTROL], "no-store");
    assert!(ada.body.contains("No inventory yet."), "{}", ada.body);
    assert!(
        ada.body.contains("no MySQL source is configured"),
        "{}",
        ada.body
    );
    assert!(
        ada.body.contains("No operation holds the lease."),
        "{}",
        ada.body
    );
}

#[tokio::test]
async fn forms_need_the_csrf_token_and_redirect_with_a_flash_shown_once() {
    let app = App::new().await;
    let forged = app
        .post(
            &app.ada,
            "/admin/schema/inventory",
            &[("request_key", "k1")],
            false,
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);

    let started = app
        .post(
            &app.ada,
            "/admin/schema/inventory",
            &[("request_key", "k1")],
            true,
        )
        .await;
    assert_eq!(started.status, StatusCode::SEE_OTHER, "{}", started.body);
    let to = location(&started).to_owned();
    assert!(to.starts_with("/admin/schema?operation="), "{to}");
    let flash = flash_of(&started);
    let page = app.get(&app.ada, &to, Some(&flash)).await;
    assert!(page.body.contains("Discovery started."), "{}", page.body);
    assert!(
        page.body.contains("data-state=\"starting\"")
            || page.body.contains("data-state=\"running\""),
        "{}",
        page.body
    );
    // The page removes the cookie: reloading shows the notice no more.
    assert!(
        page.headers
            .get_all(header::SET_COOKIE)
            .iter()
            .any(|v| v.to_str().unwrap().starts_with("fermata_admin_flash=;")),
        "{:?}",
        page.headers
    );
    let again = app.get(&app.ada, &to, None).await;
    assert!(!again.body.contains("Discovery started."));

    // A report page for the operation, and a missing one.
    let id = to.rsplit('=').next().unwrap();
    let report = app
        .get(&app.ada, &format!("/admin/schema/operations/{id}"), None)
        .await;
    assert_eq!(report.status, StatusCode::OK);
    assert!(report.body.contains(id));
    let missing = app
        .get(&app.ada, "/admin/schema/operations/not-an-id", None)
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn refusals_show_the_safe_error_next_to_their_control() {
    let app = App::new().await;
    let started = app
        .post(
            &app.ada,
            "/admin/schema/inventory",
            &[("request_key", "k1")],
            true,
        )
        .await;
    let operation: OperationId = location(&started)
        .rsplit('=')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let ada = app.state.accounts.user_named("ada").await.unwrap();
    let inventory = app
        .storage
        .schema()
        .record_inventory(&NewInventory {
            id: InventoryId::generate(),
            operation,
            actor: ada.id,
            server_version: "11.4.2-MariaDB".to_owned(),
            databases: vec![DatabaseName::new("app").unwrap()],
            ignored: Vec::new(),
            lifetime: Duration::from_secs(3600),
        })
        .await
        .unwrap();
    let page = app.get(&app.ada, "/admin/schema", None).await;
    assert!(
        page.body.contains("name=\"databases\" value=\"app\""),
        "{}",
        page.body
    );
    let empty = app
        .post(
            &app.ada,
            "/admin/schema/start",
            &[
                ("request_key", "k2"),
                ("inventory", &inventory.id.to_string()),
                ("action", "refresh"),
            ],
            true,
        )
        .await;
    assert_eq!(empty.status, StatusCode::SEE_OTHER);
    let page = app
        .get(&app.ada, "/admin/schema", Some(&flash_of(&empty)))
        .await;
    assert!(
        page.body
            .contains("id=\"error-start\">select at least one database<"),
        "{}",
        page.body
    );

    let wrong = app
        .post(
            &app.ada,
            "/admin/schema/lease/clear",
            &[("operation_id", "WRONG")],
            true,
        )
        .await;
    assert_eq!(wrong.status, StatusCode::SEE_OTHER);
    let page = app
        .get(&app.ada, "/admin/schema", Some(&flash_of(&wrong)))
        .await;
    assert!(page.body.contains("id=\"error-lease\""), "{}", page.body);

    // Publishing again and closing a pull request are refused for an operation without either,
    // next to the publication controls; an inventory has no drift page.
    let publish = app
        .post(
            &app.ada,
            &format!("/admin/schema/operations/{operation}/publish"),
            &[],
            true,
        )
        .await;
    assert_eq!(publish.status, StatusCode::SEE_OTHER);
    let page = app
        .get(&app.ada, "/admin/schema", Some(&flash_of(&publish)))
        .await;
    assert!(
        page.body.contains(&format!(
            "id=\"error-publication\">operation {operation} has no failed publication to publish again<"
        )),
        "{}",
        page.body
    );
    let close = app
        .post(
            &app.ada,
            &format!("/admin/schema/operations/{operation}/close-pull-request"),
            &[],
            true,
        )
        .await;
    let page = app
        .get(&app.ada, "/admin/schema", Some(&flash_of(&close)))
        .await;
    assert!(
        page.body.contains(&format!(
            "id=\"error-publication\">operation {operation} has no pull request on the forge<"
        )),
        "{}",
        page.body
    );
    let drift = app
        .get(
            &app.ada,
            &format!("/admin/schema/operations/{operation}/drift"),
            None,
        )
        .await;
    assert_eq!(drift.status, StatusCode::NOT_FOUND);

    // A stale session is sent to confirm its password, then back to the page.
    support::age_sessions(&app.storage).await;
    let id = "0b6f3c1e-5a2d-4c8e-9f10-2a3b4c5d6e7f";
    let stale = app
        .post(
            &app.ada,
            &format!("/admin/schema/operations/{id}/approve"),
            &[],
            true,
        )
        .await;
    assert_eq!(stale.status, StatusCode::SEE_OTHER);
    assert_eq!(
        location(&stale),
        format!("/reauth?next=/admin/schema%3Foperation%3D{id}")
    );
    for action in ["publish", "close-pull-request"] {
        let stale = app
            .post(
                &app.ada,
                &format!("/admin/schema/operations/{id}/{action}"),
                &[],
                true,
            )
            .await;
        assert_eq!(stale.status, StatusCode::SEE_OTHER, "{action}");
        assert_eq!(location(&stale), "/reauth?next=/admin/schema", "{action}");
    }
}

/// The page lists the databases the inventory's filter left out, and a refresh failed by an
/// object the snapshot cannot capture names it on the operation's report: the database, the
/// object's kind and name, and the fixed reason.
#[tokio::test]
async fn ignored_databases_and_an_unsupported_object_are_named_on_the_page() {
    let app = App::new().await;
    let started = app
        .post(
            &app.ada,
            "/admin/schema/inventory",
            &[("request_key", "discover")],
            true,
        )
        .await;
    let discovery: OperationId = location(&started)
        .rsplit('=')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let ada = app.state.accounts.user_named("ada").await.unwrap();
    let schema = app.storage.schema();
    let inventory = schema
        .record_inventory(&NewInventory {
            id: InventoryId::generate(),
            operation: discovery,
            actor: ada.id,
            server_version: "11.4.2-MariaDB".to_owned(),
            databases: vec![DatabaseName::new("app").unwrap()],
            ignored: vec![DatabaseName::new("scratch<1>").unwrap()],
            lifetime: Duration::from_secs(3600),
        })
        .await
        .unwrap();
    let page = app.get(&app.ada, "/admin/schema", None).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains("id=\"inventory-ignored\""),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("<code>scratch&lt;1&gt;</code>"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("value=\"scratch"), "{}", page.body);
    let report = app
        .get(
            &app.ada,
            &format!("/admin/schema/operations/{discovery}"),
            None,
        )
        .await;
    assert!(
        report.body.contains("id=\"ignored-databases\""),
        "{}",
        report.body
    );

    // A refresh of `app` failed by its spatial index.
    let refresh = app
        .post(
            &app.ada,
            "/admin/schema/start",
            &[
                ("request_key", "refresh-geo"),
                ("inventory", &inventory.id.to_string()),
                ("action", "refresh"),
                ("databases", "app"),
            ],
            true,
        )
        .await;
    assert_eq!(refresh.status, StatusCode::SEE_OTHER);
    let operation = schema
        .recent_operations(10)
        .await
        .unwrap()
        .into_iter()
        .find(|operation| operation.kind == OperationKind::Refresh)
        .unwrap();
    let app_name = DatabaseName::new("app").unwrap();
    let refused = SafeError::about(
        ErrorCode::UnsupportedSchemaOutput,
        Subject::Object(ObjectSubject::named(
            &app_name,
            ObjectKind::Table,
            "geo",
            Reason::IndexKind,
        )),
    );
    assert!(
        schema
            .begin_database(operation.id, &app_name)
            .await
            .unwrap()
    );
    assert!(
        schema
            .finish_database(
                operation.id,
                &app_name,
                &DatabaseReport::failed(refused.clone(), false)
            )
            .await
            .unwrap()
    );
    schema
        .transition(operation.id, &Transition::fail(operation.state, refused))
        .await
        .unwrap()
        .unwrap();
    let report = app
        .get(
            &app.ada,
            &format!("/admin/schema/operations/{}", operation.id),
            None,
        )
        .await;
    assert_eq!(report.status, StatusCode::OK);
    let named =
        "the schema of database `app` cannot be captured faithfully: table `geo`: index kind";
    assert!(
        report.body.matches(named).count() >= 2,
        "the operation and the database row both name the object: {}",
        report.body
    );
}
