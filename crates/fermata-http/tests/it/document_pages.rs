//! The pages for documents, called through the router without a socket, on a real SQLite database:
//! a document's page by ID and by `OWNER/NAME/SLUG`, a former slug redirected to the current one,
//! its children linked, a viewer's read-only editor, and the "not found" page for outsiders, for
//! missing documents and for unknown slugs alike; and the signed-in home with its repositories, a
//! page at a time, recent documents, and its form that creates a repository; a history session's
//! diff against the one before it, and any two sessions compared.

use axum::http::{StatusCode, header};
use fermata_store::Role;
use serde_json::{Value, json};

use crate::support::{self, Answer, Caller};

/// The document page tests, whose helpers [`App`] carries.
enum DocumentPages {}

/// `ada` administers `ada/notes`, `vic` is a viewer there, `out` is no member, `root` is a
/// `system_admin`.
type App = support::NotesApp<DocumentPages>;

impl App {
    async fn new() -> Self {
        App::start("pages-test", &[("root", [Role::SystemAdmin].into())]).await
    }

    /// Creates a document in `ada/notes` as ada and returns its body.
    async fn create(&self, title: &str) -> Value {
        self.create_document(title).await
    }
}

fn location(answer: &Answer) -> &str {
    answer
        .headers
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("no Location: {} {}", answer.status, answer.body))
}

fn assert_not_found_page(answer: &Answer) {
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.body);
    let content_type = answer.headers[header::CONTENT_TYPE].to_str().unwrap();
    assert!(content_type.starts_with("text/html"), "{content_type}");
    assert!(
        answer.body.contains("<h1>Not found</h1>"),
        "{}",
        answer.body
    );
    assert!(!answer.body.contains("data-editor"), "{}", answer.body);
}

#[tokio::test]
async fn a_document_page_is_found_by_id_and_by_place_and_a_former_slug_redirects() {
    let app = App::new().await;
    let created = app.create("Plan").await;
    let id = created["id"].as_str().unwrap();
    assert_eq!(created["slug"], "plan");

    for uri in [format!("/d/{id}"), "/d/ada/notes/plan".to_owned()] {
        let page = app.get(&app.ada, &uri).await;
        assert_eq!(page.status, StatusCode::OK, "{uri}: {}", page.body);
        assert!(
            page.body.contains(&format!("data-room=\"{id}\"")),
            "{}",
            page.body
        );
        assert!(
            page.body.contains("data-readonly=\"false\""),
            "{}",
            page.body
        );
        assert!(
            page.body.contains("href=\"/d/ada/notes/plan\""),
            "{}",
            page.body
        );
        assert!(page.headers.contains_key(header::CONTENT_SECURITY_POLICY));
    }

    let renamed = app
        .call(
            &app.ada,
            "PATCH",
            &format!("/api/v1/documents/{id}"),
            Some(json!({"title": "Road map"})),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::OK, "{}", renamed.body);
    let slug = renamed.json()["slug"].as_str().unwrap().to_owned();
    assert_ne!(slug, "plan");
    let current = format!("/d/ada/notes/{slug}");

    let former = app.get(&app.ada, "/d/ada/notes/plan").await;
    assert_eq!(former.status, StatusCode::SEE_OTHER, "{}", former.body);
    assert_eq!(location(&former), current);
    let page = app.get(&app.ada, &current).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("Road map"), "{}", page.body);
    // A viewer is redirected the same way; an outsider learns nothing of the former slug.
    let former = app.get(&app.vic, "/d/ada/notes/plan").await;
    assert_eq!(location(&former), current);
    assert_not_found_page(&app.get(&app.out, "/d/ada/notes/plan").await);
}

#[tokio::test]
async fn a_document_page_links_its_children_and_leaves_out_archived_ones() {
    let app = App::new().await;
    let parent = app.create("Handbook").await;
    let parent_id = parent["id"].as_str().unwrap();
    let mut children = Vec::new();
    for title in ["Onboarding", "Old policy"] {
        let child = app
            .call(
                &app.ada,
                "POST",
                "/api/v1/documents",
                Some(json!({"repository": "ada/notes", "title": title, "parent": parent_id})),
            )
            .await;
        assert_eq!(child.status, StatusCode::CREATED, "{}", child.body);
        children.push(child.json());
    }
    let archived = app
        .call(
            &app.ada,
            "POST",
            &format!(
                "/api/v1/documents/{}/archive",
                children[1]["id"].as_str().unwrap()
            ),
            None,
        )
        .await;
    assert_eq!(archived.status, StatusCode::OK, "{}", archived.body);

    // Every member sees the children with links to their pages, the archived one left out.
    let page = app.get(&app.vic, "/d/ada/notes/handbook").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let listed = page
        .body
        .split("<ul id=\"children\">")
        .nth(1)
        .and_then(|rest| rest.split("</ul>").next())
        .unwrap_or_else(|| panic!("no children list: {}", page.body));
    assert!(
        listed.contains("<a href=\"/d/ada/notes/onboarding\">Onboarding</a>"),
        "{listed}"
    );
    assert!(!listed.contains("Old policy"), "{listed}");
    let child = app.get(&app.vic, "/d/ada/notes/onboarding").await;
    assert_eq!(child.status, StatusCode::OK, "{}", child.body);
    assert!(child.body.contains("No child documents."), "{}", child.body);
}

#[tokio::test]
async fn a_viewer_member_gets_the_read_only_editor() {
    let app = App::new().await;
    let created = app.create("Shared").await;
    let id = created["id"].as_str().unwrap();
    for uri in [format!("/d/{id}"), "/d/ada/notes/shared".to_owned()] {
        let page = app.get(&app.vic, &uri).await;
        assert_eq!(page.status, StatusCode::OK, "{uri}: {}", page.body);
        assert!(
            page.body.contains("data-readonly=\"true\""),
            "{}",
            page.body
        );
        assert!(page.body.contains("id=\"read-only\""), "{}", page.body);
    }
}

#[tokio::test]
async fn outsiders_missing_documents_and_unknown_slugs_get_the_not_found_page() {
    let app = App::new().await;
    let created = app.create("Private").await;
    let id = created["id"].as_str().unwrap();
    for uri in [
        format!("/d/{id}"),
        "/d/ada/notes/private".to_owned(),
        "/d/ada/notes".to_owned(),
    ] {
        assert_not_found_page(&app.get(&app.out, &uri).await);
    }
    for uri in [
        "/d/0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13",
        "/d/ada/notes/no-such-slug",
        "/d/ada/elsewhere/private",
        "/d/not-an-id",
    ] {
        assert_not_found_page(&app.get(&app.ada, uri).await);
    }
    // A visitor who is not signed in is sent to the login form, and back afterwards.
    let visitor = app.get(&Caller::default(), "/d/ada/notes/private").await;
    assert_eq!(visitor.status, StatusCode::SEE_OTHER, "{}", visitor.body);
    assert_eq!(location(&visitor), "/login?next=/d/ada/notes/private");
}

#[tokio::test]
async fn home_lists_the_callers_repositories_and_recent_documents() {
    let app = App::new().await;
    app.create("Minutes").await;
    let home = app.get(&app.vic, "/").await;
    assert_eq!(home.status, StatusCode::OK, "{}", home.body);
    assert!(home.headers.contains_key(header::CONTENT_SECURITY_POLICY));
    assert!(!home.body.contains("<script"), "{}", home.body);
    for expected in [
        "href=\"/r/ada/notes\"",
        "(viewer)",
        "href=\"/d/ada/notes/minutes\"",
        "href=\"/account\"",
    ] {
        assert!(home.body.contains(expected), "{expected}: {}", home.body);
    }
    // Only a system_admin is shown the schema page.
    assert!(!home.body.contains("/admin/schema"), "{}", home.body);
    let root = support::login(&app.state, "root", support::PAGES_PASSWORD).await;
    let home = app.get(&root, "/").await;
    assert!(
        home.body.contains("href=\"/admin/schema\""),
        "{}",
        home.body
    );
    assert!(
        home.body.contains("id=\"no-repositories\""),
        "{}",
        home.body
    );

    // An outsider sees none of ada's; a visitor is sent to the login form.
    let home = app.get(&app.out, "/").await;
    assert!(!home.body.contains("ada/notes"), "{}", home.body);
    let visitor = app.get(&Caller::default(), "/").await;
    assert_eq!(visitor.status, StatusCode::SEE_OTHER);
    assert_eq!(location(&visitor), "/login");
}

#[tokio::test]
async fn home_pages_through_many_repositories() {
    let app = App::new().await;
    for n in 0..30 {
        let name = format!("ada/r{n:02}");
        let made = app
            .call(
                &app.ada,
                "POST",
                "/api/v1/repositories",
                Some(json!({"name": name})),
            )
            .await;
        assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    }
    // The API refuses what no page could reach, as the form does.
    for name in ["ada/..", "./notes", "ada/."] {
        let refused = app
            .call(
                &app.ada,
                "POST",
                "/api/v1/repositories",
                Some(json!({"name": name})),
            )
            .await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{name}: {}",
            refused.body
        );
    }
    let first = app.get(&app.ada, "/").await;
    assert!(
        first.body.contains("href=\"/r/ada/notes\""),
        "{}",
        first.body
    );
    assert!(
        !first.body.contains("href=\"/r/ada/r29\""),
        "{}",
        first.body
    );
    let next = first
        .body
        .split("href=\"/?after=")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no next page: {}", first.body))
        .to_owned();
    let second = app.get(&app.ada, &format!("/?after={next}")).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.body);
    assert!(
        second.body.contains("href=\"/r/ada/r29\""),
        "{}",
        second.body
    );
    assert!(
        !second.body.contains("href=\"/r/ada/notes\""),
        "{}",
        second.body
    );
    assert!(!second.body.contains("?after="), "{}", second.body);
}

/// Posts a form as `caller`, with the session's CSRF token, as the page's forms do.
async fn post_form(app: &App, caller: &Caller, uri: &str, fields: &[(&str, &str)]) -> Answer {
    let mut pairs: Vec<(&str, &str)> = fields.to_vec();
    let csrf = caller.csrf.clone().unwrap_or_default();
    pairs.push(("csrf", &csrf));
    let body = serde_urlencoded::to_string(&pairs).unwrap();
    let mut request = axum::http::Request::builder()
        .method("POST")
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    if let Some(cookie) = &caller.cookie {
        request = request.header(header::COOKIE, format!("fermata_session={cookie}"));
    }
    support::send(
        &app.state,
        request.body(axum::body::Body::from(body)).unwrap(),
    )
    .await
}

#[tokio::test]
async fn a_repository_is_created_from_the_home_page() {
    let app = App::new().await;
    let home = app.get(&app.out, "/").await;
    assert!(home.body.contains("action=\"/r\""), "{}", home.body);
    // Only a system_admin names the owner.
    assert!(
        !home.body.contains("id=\"repository-owner\""),
        "{}",
        home.body
    );

    // Created under the caller's name: its page, with the caller as its admin.
    let made = post_form(&app, &app.out, "/r", &[("name", " Plans_2.0 ")]).await;
    assert_eq!(made.status, StatusCode::SEE_OTHER, "{}", made.body);
    assert_eq!(location(&made), "/r/out/Plans_2.0");
    let page = app.get(&app.out, "/r/out/Plans_2.0").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("your role: admin"), "{}", page.body);
    assert!(page.body.contains("id=\"members\""), "{}", page.body);

    let second = post_form(&app, &app.out, "/r", &[("name", "notes")]).await;
    assert_eq!(second.status, StatusCode::SEE_OTHER, "{}", second.body);

    // Taken, invalid, or under another name: the home page again, saying why beside the form
    // and keeping what was typed; nothing is created.
    for (fields, status, why) in [
        (
            vec![("name", "Plans_2.0")],
            StatusCode::CONFLICT,
            "out/Plans_2.0 exists already: choose another name.",
        ),
        (
            vec![("name", "notes")],
            StatusCode::CONFLICT,
            "out/notes exists already",
        ),
        (
            vec![("name", "")],
            StatusCode::BAD_REQUEST,
            "Give the repository a name.",
        ),
        (
            vec![("name", "two <words>")],
            StatusCode::BAD_REQUEST,
            "A repository's name is 1 to 100 letters",
        ),
        (
            vec![("name", "..")],
            StatusCode::BAD_REQUEST,
            "not only dots",
        ),
        (
            vec![("owner", "ada"), ("name", "mine")],
            StatusCode::FORBIDDEN,
            "under your own name only",
        ),
    ] {
        let refused = post_form(&app, &app.out, "/r", &fields).await;
        assert_eq!(refused.status, status, "{fields:?}: {}", refused.body);
        assert!(
            refused.body.contains("id=\"repository-refused\""),
            "{}",
            refused.body
        );
        assert!(refused.body.contains(why), "{why}: {}", refused.body);
        assert!(
            refused.body.contains("aria-invalid=\"true\""),
            "{}",
            refused.body
        );
        let typed = fields.iter().find(|(field, _)| *field == "name").unwrap().1;
        let kept = typed.replace('<', "&lt;").replace('>', "&gt;");
        assert!(
            refused.body.contains(&format!("value=\"{kept}\"")),
            "{kept}: {}",
            refused.body
        );
        assert!(!refused.body.contains("<words>"), "{}", refused.body);
    }
    assert_not_found_page(&app.get(&app.ada, "/r/ada/mine").await);
    let listed = app
        .call(&app.out, "GET", "/api/v1/repositories", None)
        .await;
    let listed_json = listed.json();
    let names: Vec<&str> = listed_json["repositories"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(names, ["out/Plans_2.0", "out/notes"], "{}", listed.body);

    // A system_admin names any owner, for a team.
    let root = support::login(&app.state, "root", support::PAGES_PASSWORD).await;
    let home = app.get(&root, "/").await;
    assert!(
        home.body.contains("id=\"repository-owner\""),
        "{}",
        home.body
    );
    let made = post_form(
        &app,
        &root,
        "/r",
        &[("owner", "acme"), ("name", "handbook")],
    )
    .await;
    assert_eq!(made.status, StatusCode::SEE_OTHER, "{}", made.body);
    assert_eq!(location(&made), "/r/acme/handbook");

    // Without the CSRF token, or signed out, nothing is made.
    let mut forged = app.out.clone();
    forged.csrf = Some("forged".to_owned());
    let refused = post_form(&app, &forged, "/r", &[("name", "forged")]).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    let visitor = post_form(&app, &Caller::default(), "/r", &[("name", "visitor")]).await;
    assert_eq!(visitor.status, StatusCode::SEE_OTHER, "{}", visitor.body);
    assert!(
        location(&visitor).starts_with("/login"),
        "{}",
        location(&visitor)
    );
    assert_not_found_page(&app.get(&app.out, "/r/out/forged").await);
}

#[tokio::test]
async fn a_repository_page_lists_filters_and_creates_documents() {
    let app = App::new().await;
    for title in ["Alpha plan", "Beta notes", "Old plan"] {
        app.create(title).await;
    }
    let old = app.get(&app.ada, "/d/ada/notes/old-plan").await;
    assert_eq!(old.status, StatusCode::OK, "{}", old.body);
    let listed = app
        .call(
            &app.ada,
            "GET",
            "/api/v1/documents?repository=ada/notes",
            None,
        )
        .await;
    let old_id = listed.json()["documents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["title"] == "Old plan")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let archived = app
        .call(
            &app.ada,
            "POST",
            &format!("/api/v1/documents/{old_id}/archive"),
            None,
        )
        .await;
    assert_eq!(archived.status, StatusCode::OK, "{}", archived.body);

    let page = app.get(&app.vic, "/r/ada/notes").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(!page.body.contains("<script"), "{}", page.body);
    // Newest first; the archived one only in the archived view; a viewer gets no forms.
    let beta = page.body.find("Beta notes").unwrap();
    let alpha = page.body.find("Alpha plan").unwrap();
    assert!(beta < alpha, "{}", page.body);
    assert!(!page.body.contains("Old plan"), "{}", page.body);
    assert!(!page.body.contains("Create document"), "{}", page.body);
    assert!(!page.body.contains("id=\"members\""), "{}", page.body);
    let filtered = app.get(&app.vic, "/r/ada/notes?q=PLAN").await;
    assert!(filtered.body.contains("Alpha plan"), "{}", filtered.body);
    assert!(!filtered.body.contains("Beta notes"), "{}", filtered.body);
    let archive_view = app.get(&app.vic, "/r/ada/notes?archived=1").await;
    assert!(
        archive_view.body.contains("href=\"/d/ada/notes/old-plan\""),
        "{}",
        archive_view.body
    );
    assert!(
        !archive_view.body.contains("Alpha plan"),
        "{}",
        archive_view.body
    );

    // A viewer may not create; an editor's form answers with the new document's page.
    let refused = post_form(
        &app,
        &app.vic,
        "/r/ada/notes/documents",
        &[("title", "Nope")],
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(
        refused.body.contains("<h1>Not allowed</h1>"),
        "{}",
        refused.body
    );
    let made = post_form(
        &app,
        &app.ada,
        "/r/ada/notes/documents",
        &[("title", "Fresh start")],
    )
    .await;
    assert_eq!(made.status, StatusCode::SEE_OTHER, "{}", made.body);
    assert_eq!(location(&made), "/d/ada/notes/fresh-start");
    // Without the CSRF token the form is refused.
    let mut forged = app.ada.clone();
    forged.csrf = Some("forged".to_owned());
    let forged = post_form(
        &app,
        &forged,
        "/r/ada/notes/documents",
        &[("title", "Forged")],
    )
    .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "{}", forged.body);

    // A page cursor this server did not give is the caller's mistake.
    let bad = app.get(&app.vic, "/r/ada/notes?after=nonsense").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);

    // Outsiders and unknown repositories get the not-found page.
    assert_not_found_page(&app.get(&app.out, "/r/ada/notes").await);
    assert_not_found_page(&app.get(&app.ada, "/r/ada/none").await);
    let refused = post_form(
        &app,
        &app.out,
        "/r/ada/notes/documents",
        &[("title", "Nope")],
    )
    .await;
    assert_not_found_page(&refused);
}

#[tokio::test]
async fn an_admin_manages_members_from_the_repository_page() {
    let app = App::new().await;
    let page = app.get(&app.ada, "/r/ada/notes").await;
    assert!(page.body.contains("id=\"members\""), "{}", page.body);
    assert!(
        page.body
            .contains("action=\"/r/ada/notes/members/vic/remove\""),
        "{}",
        page.body
    );

    let added = post_form(
        &app,
        &app.ada,
        "/r/ada/notes/members",
        &[("user", "out"), ("role", "editor")],
    )
    .await;
    assert_eq!(added.status, StatusCode::SEE_OTHER, "{}", added.body);
    assert_eq!(location(&added), "/r/ada/notes");
    let members = app
        .get(&app.ada, "/api/v1/repositories/ada/notes/members")
        .await
        .json();
    assert!(
        members["members"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["user"] == "out" && m["role"] == "editor"),
        "{members}"
    );
    assert_eq!(
        app.get(&app.out, "/r/ada/notes").await.status,
        StatusCode::OK
    );

    let changed = post_form(
        &app,
        &app.ada,
        "/r/ada/notes/members",
        &[("user", "out"), ("role", "viewer")],
    )
    .await;
    assert_eq!(changed.status, StatusCode::SEE_OTHER, "{}", changed.body);
    let removed = post_form(&app, &app.ada, "/r/ada/notes/members/out/remove", &[]).await;
    assert_eq!(removed.status, StatusCode::SEE_OTHER, "{}", removed.body);
    assert_not_found_page(&app.get(&app.out, "/r/ada/notes").await);

    let unknown = post_form(
        &app,
        &app.ada,
        "/r/ada/notes/members",
        &[("user", "nobody"), ("role", "viewer")],
    )
    .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.body);
    // A viewer may not manage members.
    let refused = post_form(
        &app,
        &app.vic,
        "/r/ada/notes/members",
        &[("user", "out"), ("role", "admin")],
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
}

/// The document's stored text, read by ada.
async fn stored_text(app: &App, id: &str) -> String {
    let answer = app.get(&app.ada, &format!("/api/v1/documents/{id}")).await;
    answer.json()["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_document_is_renamed_archived_restored_and_deleted_from_its_page() {
    let app = App::new().await;
    let created = app.create("Draft").await;
    let id = created["id"].as_str().unwrap();
    let page = app.get(&app.ada, "/d/ada/notes/draft").await;
    for expected in [
        format!("action=\"/documents/{id}/rename\""),
        format!("action=\"/documents/{id}/archive\""),
    ] {
        assert!(page.body.contains(&expected), "{expected}: {}", page.body);
    }
    // A viewer is offered none of it, and is refused if they post anyway.
    let seen = app.get(&app.vic, "/d/ada/notes/draft").await;
    assert!(!seen.body.contains("/rename\""), "{}", seen.body);
    assert!(!seen.body.contains("/archive\""), "{}", seen.body);
    let refused = post_form(
        &app,
        &app.vic,
        &format!("/documents/{id}/rename"),
        &[("title", "Mine")],
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(
        refused.body.contains("<h1>Not allowed</h1>"),
        "{}",
        refused.body
    );
    assert_not_found_page(
        &post_form(&app, &app.out, &format!("/documents/{id}/archive"), &[]).await,
    );

    let renamed = post_form(
        &app,
        &app.ada,
        &format!("/documents/{id}/rename"),
        &[("title", "Final")],
    )
    .await;
    assert_eq!(renamed.status, StatusCode::SEE_OTHER, "{}", renamed.body);
    assert_eq!(location(&renamed), "/d/ada/notes/final");

    let archived = post_form(&app, &app.ada, &format!("/documents/{id}/archive"), &[]).await;
    assert_eq!(location(&archived), "/d/ada/notes/final");
    let page = app.get(&app.ada, "/d/ada/notes/final").await;
    assert!(page.body.contains("id=\"archived\""), "{}", page.body);
    assert!(
        page.body
            .contains(&format!("action=\"/documents/{id}/restore\"")),
        "{}",
        page.body
    );
    let restored = post_form(&app, &app.ada, &format!("/documents/{id}/restore"), &[]).await;
    assert_eq!(restored.status, StatusCode::SEE_OTHER, "{}", restored.body);
    let page = app.get(&app.ada, "/d/ada/notes/final").await;
    assert!(page.body.contains("data-editor"), "{}", page.body);

    // Only an archived document is deleted.
    let kept = post_form(&app, &app.ada, &format!("/documents/{id}/delete"), &[]).await;
    assert_eq!(kept.status, StatusCode::BAD_REQUEST, "{}", kept.body);
    post_form(&app, &app.ada, &format!("/documents/{id}/archive"), &[]).await;
    let page = app.get(&app.ada, "/d/ada/notes/final").await;
    assert!(
        page.body
            .contains(&format!("action=\"/documents/{id}/delete\"")),
        "{}",
        page.body
    );
    let deleted = post_form(&app, &app.ada, &format!("/documents/{id}/delete"), &[]).await;
    assert_eq!(deleted.status, StatusCode::SEE_OTHER, "{}", deleted.body);
    assert_eq!(location(&deleted), "/r/ada/notes");
    assert_not_found_page(&app.get(&app.ada, &format!("/d/{id}")).await);
}

#[tokio::test]
async fn a_history_session_is_shown_and_restored_from_the_pages() {
    let app = App::new().await;
    let parent = app.create("Parent").await;
    let id = parent["id"].as_str().unwrap();
    let child = app
        .call(
            &app.ada,
            "POST",
            "/api/v1/documents",
            Some(json!({"repository": "ada/notes", "title": "Kid", "parent": id})),
        )
        .await;
    assert_eq!(child.status, StatusCode::CREATED, "{}", child.body);
    let text = format!("/api/v1/documents/{id}/text");
    let one = app
        .call(&app.ada, "PUT", &text, Some(json!({"text": "# One\n"})))
        .await;
    assert_eq!(one.status, StatusCode::OK, "{}", one.body);
    // Another author's edit starts another session.
    let root = support::login(&app.state, "root", support::PAGES_PASSWORD).await;
    let two = app
        .call(&root, "PUT", &text, Some(json!({"text": "# Two\n"})))
        .await;
    assert_eq!(two.status, StatusCode::OK, "{}", two.body);
    let page = fermata_store_testkit::eventually_some("two sessions on the page", || async {
        let page = app.get(&app.ada, &format!("/d/{id}")).await;
        page.body
            .contains(&format!("href=\"/documents/{id}/history/2\""))
            .then_some(page)
    })
    .await;
    assert!(
        page.body
            .contains(&format!("href=\"/documents/{id}/history/1\"")),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("href=\"/d/ada/notes/kid\""),
        "{}",
        page.body
    );

    // A viewer reads a session's text, with no way to restore it.
    let seen = app
        .get(&app.vic, &format!("/documents/{id}/history/1"))
        .await;
    assert_eq!(seen.status, StatusCode::OK, "{}", seen.body);
    assert!(seen.body.contains("# One"), "{}", seen.body);
    assert!(!seen.body.contains("confirm-restore"), "{}", seen.body);
    assert_not_found_page(
        &app.get(&app.out, &format!("/documents/{id}/history/1"))
            .await,
    );
    let none = app
        .get(&app.ada, &format!("/documents/{id}/history/9"))
        .await;
    assert_eq!(none.status, StatusCode::NOT_FOUND, "{}", none.body);

    // The confirmation page's form restores it.
    let confirm = app
        .get(&app.ada, &format!("/documents/{id}/history/1"))
        .await;
    let action = format!("/documents/{id}/history/1/restore");
    assert!(
        confirm.body.contains(&format!("action=\"{action}\"")),
        "{}",
        confirm.body
    );
    let restored = post_form(&app, &app.ada, &action, &[]).await;
    assert_eq!(restored.status, StatusCode::SEE_OTHER, "{}", restored.body);
    assert_eq!(location(&restored), "/d/ada/notes/parent");
    assert_eq!(stored_text(&app, id).await, "# One\n");
}

#[tokio::test]
async fn a_session_shows_its_diff_and_any_two_sessions_are_compared() {
    let app = App::new().await;
    let created = app.create("Diffs").await;
    let id = created["id"].as_str().unwrap();
    let text = format!("/api/v1/documents/{id}/text");
    let root = support::login(&app.state, "root", support::PAGES_PASSWORD).await;
    // Each write by another author than the last starts a session: three in all.
    for (caller, body) in [
        (&app.ada, "# One\nkept\n"),
        (&root, "# Two\nkept\n"),
        (&app.ada, "# Two\nkept\nmore <b>&</b>\n"),
    ] {
        let written = app
            .call(caller, "PUT", &text, Some(json!({ "text": body })))
            .await;
        assert_eq!(written.status, StatusCode::OK, "{}", written.body);
    }
    let page = fermata_store_testkit::eventually_some("three sessions on the page", || async {
        let page = app.get(&app.vic, &format!("/d/{id}")).await;
        page.body
            .contains(&format!("href=\"/documents/{id}/history/3\""))
            .then_some(page)
    })
    .await;
    let compare = format!("/documents/{id}/history/compare");
    assert!(
        page.body.contains(&format!("href=\"{compare}\"")),
        "{}",
        page.body
    );

    // A session's page: what it changed against the one before, for a viewer too.
    let second = app
        .get(&app.vic, &format!("/documents/{id}/history/2"))
        .await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.body);
    for expected in [
        "<h2>Changes since session 1</h2>",
        "<del># One</del>",
        "<ins># Two</ins>",
        "<span>kept</span>",
        ">1 line added<",
        ">1 line removed<",
        "id=\"session-text\"",
    ] {
        assert!(
            second.body.contains(expected),
            "{expected}: {}",
            second.body
        );
    }
    let first = app
        .get(&app.vic, &format!("/documents/{id}/history/1"))
        .await;
    assert!(
        first.body.contains("the first session") && first.body.contains("<ins># One</ins>"),
        "{}",
        first.body
    );

    // Any two compared, either way round; by default the newest against the one before.
    let picked = app.get(&app.vic, &format!("{compare}?from=1&to=3")).await;
    assert_eq!(picked.status, StatusCode::OK, "{}", picked.body);
    for expected in [
        "<h2>Changes from session 1 to session 3</h2>",
        "<del># One</del>",
        "<ins># Two</ins>",
        "<ins>more &lt;b&gt;&amp;&lt;/b&gt;</ins>",
        "<option value=\"1\" selected>",
        "<option value=\"3\" selected>",
    ] {
        assert!(
            picked.body.contains(expected),
            "{expected}: {}",
            picked.body
        );
    }
    let backwards = app.get(&app.vic, &format!("{compare}?from=3&to=1")).await;
    assert!(
        backwards
            .body
            .contains("<del>more &lt;b&gt;&amp;&lt;/b&gt;</del>"),
        "{}",
        backwards.body
    );
    let default = app.get(&app.vic, &compare).await;
    assert_eq!(default.status, StatusCode::OK, "{}", default.body);
    assert!(
        default
            .body
            .contains("<h2>Changes from session 2 to session 3</h2>"),
        "{}",
        default.body
    );

    // A session that is not there is said above the form; outsiders learn nothing.
    for asked in ["?from=9&to=3", "?from=one&to=3", "?from=1&to=-1"] {
        let refused = app.get(&app.vic, &format!("{compare}{asked}")).await;
        assert_eq!(
            refused.status,
            StatusCode::NOT_FOUND,
            "{asked}: {}",
            refused.body
        );
        assert!(
            refused.body.contains("id=\"compare-refused\"")
                && refused.body.contains("id=\"compare-form\""),
            "{asked}: {}",
            refused.body
        );
    }
    assert_not_found_page(&app.get(&app.out, &compare).await);
}
