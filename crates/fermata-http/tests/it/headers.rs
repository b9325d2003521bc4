//! The headers every answer carries, through the router on a real SQLite database: every page
//! with the pages' one Content-Security-Policy (this origin's files and the answer's style nonce,
//! nothing inline), `frame-ancestors 'none'`, `X-Frame-Options`, `nosniff`, `Referrer-Policy` and
//! `no-store`; every secret-bearing and authenticated answer `no-store`; HSTS with secure
//! cookies; the public hosts and origins; every form answered with a redirect; and every error,
//! the framework's own included, a safe JSON error.

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use fermata_collab::WriterFence;
use fermata_crypto::SecretToken;
use fermata_http::HttpState;
use fermata_store::{Role, StoreOptions};
use fermata_store_sql::testing::{ScratchDatabase, ScratchStorage};
use serde_json::json;
use support::{Answer, Caller};

use crate::support;

const PASSWORD: &str = "correct horse battery staple";

struct App {
    state: HttpState,
    ada: Caller,
    _storage: ScratchStorage,
}

impl App {
    async fn new() -> Self {
        let storage = ScratchDatabase::sqlite()
            .open(StoreOptions::default())
            .await;
        let state = support::state(&storage, WriterFence::default());
        state
            .accounts
            .add_user(
                "ada",
                Some(SecretToken::from_given(PASSWORD)),
                [Role::SystemAdmin].into(),
            )
            .await
            .unwrap();
        let ada = support::login(&state, "ada", PASSWORD).await;
        App {
            state,
            ada,
            _storage: storage,
        }
    }

    async fn call(
        &self,
        caller: &Caller,
        method: &str,
        uri: &str,
        body: Option<serde_json::Value>,
    ) -> Answer {
        support::call(&self.state, caller, method, uri, body).await
    }

    async fn page(&self, caller: &Caller, uri: &str) -> Answer {
        let mut request = Request::get(uri).header(header::HOST, "localhost:7878");
        if let Some(cookie) = &caller.cookie {
            request = request.header(header::COOKIE, format!("fermata_session={cookie}"));
        }
        support::send(&self.state, request.body(Body::empty()).unwrap()).await
    }

    async fn form(&self, caller: &Caller, uri: &str, fields: &[(&str, &str)]) -> Answer {
        let mut request = Request::post(uri)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::HOST, "localhost:7878");
        if let Some(cookie) = &caller.cookie {
            request = request.header(header::COOKIE, format!("fermata_session={cookie}"));
        }
        let mut fields = fields.to_vec();
        let csrf = caller.csrf.clone().unwrap_or_default();
        fields.push(("csrf", &csrf));
        let body = serde_urlencoded::to_string(&fields).unwrap();
        support::send(&self.state, request.body(Body::from(body)).unwrap()).await
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &header::HeaderName) -> &'a str {
    headers
        .get(name)
        .map_or("", |value| value.to_str().unwrap())
}

/// The value of every `name` attribute of the `<tag>` elements of a page.
fn attributes<'a>(body: &'a str, tag: &str, name: &str) -> Vec<&'a str> {
    body.split(&format!("<{tag} "))
        .skip(1)
        .filter_map(|element| {
            let element = &element[..element.find('>')?];
            let value = element.split(&format!("{name}=\"")).nth(1)?;
            value.split('"').next()
        })
        .collect()
}

/// What a page must carry.
fn assert_page_headers(uri: &str, answer: &Answer) {
    assert_eq!(answer.status, StatusCode::OK, "{uri}: {}", answer.body);
    let headers = &answer.headers;
    assert!(
        header(headers, &header::CONTENT_TYPE).starts_with("text/html"),
        "{uri}"
    );
    let policy = header(headers, &header::CONTENT_SECURITY_POLICY);
    for part in [
        "default-src 'none'",
        "script-src 'self';",
        "style-src 'self' 'nonce-",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'self'",
    ] {
        assert!(policy.contains(part), "{uri}: {policy}");
    }
    assert!(!policy.contains("unsafe"), "{uri}: {policy}");
    // Nothing inline: every style sheet and script is one of this server's files.
    let body = &answer.body;
    assert!(!body.contains("<style"), "{uri}: {body}");
    assert!(!body.contains(" style=\""), "{uri}: {body}");
    let scripts = attributes(body, "script", "src");
    assert_eq!(
        scripts.len(),
        body.matches("<script").count(),
        "{uri}: {body}"
    );
    let sheets = attributes(body, "link", "href");
    assert!(!sheets.is_empty(), "{uri}: {body}");
    for address in scripts.iter().chain(&sheets) {
        assert!(address.starts_with("/assets/"), "{uri}: {address}");
    }
    assert_eq!(header(headers, &header::X_FRAME_OPTIONS), "DENY", "{uri}");
    assert_eq!(
        header(headers, &header::X_CONTENT_TYPE_OPTIONS),
        "nosniff",
        "{uri}"
    );
    assert_eq!(
        header(headers, &header::REFERRER_POLICY),
        "same-origin",
        "{uri}"
    );
    assert_eq!(header(headers, &header::CACHE_CONTROL), "no-store", "{uri}");
}

#[tokio::test]
async fn every_page_carries_its_policy_and_is_never_stored() {
    let app = App::new().await;
    let nobody = Caller::default();
    assert_page_headers("/login", &app.page(&nobody, "/login").await);
    for uri in ["/account", "/reauth?next=/account", "/admin/schema"] {
        assert_page_headers(uri, &app.page(&app.ada, uri).await);
    }
    // The report page of an operation, here of one that does not exist.
    let report = app
        .page(&app.ada, "/admin/schema/operations/no-such-operation")
        .await;
    assert_eq!(report.status, StatusCode::NOT_FOUND);
    assert_eq!(header(&report.headers, &header::X_FRAME_OPTIONS), "DENY");
    assert_eq!(header(&report.headers, &header::CACHE_CONTROL), "no-store");
    assert!(
        header(&report.headers, &header::CONTENT_SECURITY_POLICY)
            .contains("frame-ancestors 'none'")
    );
    // A page answering a refusal carries them too.
    let bob = {
        app.state
            .accounts
            .add_user(
                "bob",
                Some(SecretToken::from_given(PASSWORD)),
                Default::default(),
            )
            .await
            .unwrap();
        support::login(&app.state, "bob", PASSWORD).await
    };
    let refused = app.page(&bob, "/admin/schema").await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(header(&refused.headers, &header::X_FRAME_OPTIONS), "DENY");
    assert!(
        header(&refused.headers, &header::CONTENT_SECURITY_POLICY)
            .contains("frame-ancestors 'none'")
    );
}

#[tokio::test]
async fn every_secret_bearing_and_authenticated_answer_is_never_stored() {
    let app = App::new().await;
    let ada = &app.ada;
    let login = app
        .call(
            &Caller::default(),
            "POST",
            "/api/v1/session",
            Some(json!({"name": "ada", "password": PASSWORD})),
        )
        .await;
    let token = app
        .call(ada, "POST", "/api/v1/tokens", Some(json!({"label": "ci"})))
        .await;
    assert_eq!(token.status, StatusCode::CREATED);
    let machine = app
        .call(
            ada,
            "POST",
            "/api/v1/machines",
            Some(json!({"name": "laptop"})),
        )
        .await;
    assert_eq!(machine.status, StatusCode::CREATED);
    let machine_id = machine.json()["id"].as_str().unwrap().to_owned();
    let machine_caller = Caller {
        bearer: Some(machine.json()["token"].as_str().unwrap().to_owned()),
        ..Caller::default()
    };
    let reauthorized = app
        .call(
            ada,
            "POST",
            &format!("/api/v1/machines/{machine_id}/reauthorize"),
            None,
        )
        .await;
    let me = app.call(ada, "GET", "/api/v1/me", None).await;
    assert!(me.json()["csrf_token"].is_string());
    let reauth = app
        .call(
            ada,
            "POST",
            "/api/v1/session/reauth",
            Some(json!({"password": PASSWORD})),
        )
        .await;
    let ada = Caller {
        cookie: reauth.session_cookie(),
        csrf: reauth.json()["csrf_token"].as_str().map(str::to_owned),
        bearer: None,
    };
    let user = app
        .call(
            &ada,
            "POST",
            "/api/v1/users",
            Some(json!({"name": "carol"})),
        )
        .await;
    assert_eq!(user.status, StatusCode::CREATED, "{}", user.body);
    let answers = [
        ("POST /api/v1/session", login),
        ("POST /api/v1/tokens", token),
        ("POST /api/v1/machines", machine),
        ("POST /api/v1/machines/{id}/reauthorize", reauthorized),
        ("GET /api/v1/me", me),
        ("POST /api/v1/session/reauth", reauth),
        ("POST /api/v1/users", user),
        (
            "GET /api/v1/tokens",
            app.call(&ada, "GET", "/api/v1/tokens", None).await,
        ),
        (
            "GET /api/v1/session/credentials",
            app.call(&ada, "GET", "/api/v1/session/credentials", None)
                .await,
        ),
        (
            "GET /api/v1/machine",
            app.call(&machine_caller, "GET", "/api/v1/machine", None)
                .await,
        ),
        (
            "GET /api/v1/documents",
            app.call(&ada, "GET", "/api/v1/documents", None).await,
        ),
        (
            "GET /api/v1/nowhere",
            app.call(&ada, "GET", "/api/v1/nowhere", None).await,
        ),
    ];
    for (route, answer) in answers {
        assert_eq!(
            header(&answer.headers, &header::CACHE_CONTROL),
            "no-store",
            "{route}: {}",
            answer.body
        );
        assert_eq!(
            header(&answer.headers, &header::X_CONTENT_TYPE_OPTIONS),
            "nosniff",
            "{route}"
        );
        assert!(
            !answer
                .headers
                .contains_key(header::STRICT_TRANSPORT_SECURITY),
            "{route}"
        );
    }
    // A public answer is left to the caches.
    let health = app.call(&Caller::default(), "GET", "/healthz", None).await;
    assert!(!health.headers.contains_key(header::CACHE_CONTROL));
}

#[tokio::test]
async fn secure_cookies_bring_hsts() {
    let mut app = App::new().await;
    app.state.secure_cookies = true;
    for uri in ["/healthz", "/login", "/api/v1/me"] {
        let answer = app.page(&app.ada, uri).await;
        assert_eq!(
            header(&answer.headers, &header::STRICT_TRANSPORT_SECURITY),
            "max-age=31536000",
            "{uri}"
        );
    }
}

#[tokio::test]
async fn only_the_public_hosts_and_origins_are_answered() {
    let app = App::new().await;
    let request = |host: &str, origin: Option<&str>, uri: &str| {
        let mut request = Request::get(uri).header(header::HOST, host);
        if let Some(origin) = origin {
            request = request.header(header::ORIGIN, origin);
        }
        request
            .header(
                header::COOKIE,
                format!("fermata_session={}", app.ada.cookie.clone().unwrap()),
            )
            .body(Body::empty())
            .unwrap()
    };
    for host in ["localhost:7878", "127.0.0.1:7878", "[::1]:7878"] {
        let answer = support::send(&app.state, request(host, None, "/api/v1/me")).await;
        assert_eq!(answer.status, StatusCode::OK, "{host}");
    }
    // A DNS-rebinding page names its own host.
    let rebound = support::send(&app.state, request("evil.example:7878", None, "/api/v1/me")).await;
    assert_eq!(rebound.status, StatusCode::MISDIRECTED_REQUEST);
    assert_eq!(rebound.code(), "wrong_host");
    let rebound = support::send(&app.state, request("evil.example:7878", None, "/login")).await;
    assert_eq!(rebound.status, StatusCode::MISDIRECTED_REQUEST);
    let cross = support::send(
        &app.state,
        request(
            "localhost:7878",
            Some("http://evil.example:7878"),
            "/api/v1/me",
        ),
    )
    .await;
    assert_eq!(cross.status, StatusCode::FORBIDDEN);
    // Probes answer whatever the host.
    for uri in ["/healthz", "/readyz"] {
        let probe = support::send(&app.state, request("10.9.8.7:7878", None, uri)).await;
        assert_ne!(probe.status, StatusCode::MISDIRECTED_REQUEST, "{uri}");
    }

    // Configured origins are exact.
    let mut state = app.state.clone();
    state.edge.origins =
        fermata_http::edge::PublicOrigins::listed(&["https://fermata.example.com".to_owned()])
            .unwrap();
    let configured = support::send(
        &state,
        request(
            "fermata.example.com",
            Some("https://fermata.example.com"),
            "/api/v1/me",
        ),
    )
    .await;
    assert_eq!(configured.status, StatusCode::OK);
    let local = support::send(&state, request("localhost:7878", None, "/api/v1/me")).await;
    assert_eq!(local.status, StatusCode::MISDIRECTED_REQUEST);
    let downgraded = support::send(
        &state,
        request(
            "fermata.example.com",
            Some("http://fermata.example.com"),
            "/api/v1/me",
        ),
    )
    .await;
    assert_eq!(downgraded.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn every_form_answers_with_a_redirect() {
    let app = App::new().await;
    let ada = &app.ada;
    let machine = app
        .call(
            ada,
            "POST",
            "/api/v1/machines",
            Some(json!({"name": "laptop"})),
        )
        .await;
    let machine_id = machine.json()["id"].as_str().unwrap().to_owned();
    let token = app
        .call(ada, "POST", "/api/v1/tokens", Some(json!({"label": "ci"})))
        .await;
    let token_id = token.json()["id"].as_str().unwrap().to_owned();
    let forms: Vec<(String, Vec<(&str, &str)>)> = vec![
        (
            "/account/credentials".to_owned(),
            vec![("name", "github_token"), ("value", "ghp_x")],
        ),
        ("/account/credentials/clear".to_owned(), vec![]),
        ("/account/tokens".to_owned(), vec![("label", "from a form")]),
        ("/account/tokens".to_owned(), vec![("label", "")]),
        (format!("/account/tokens/{token_id}/revoke"), vec![]),
        ("/account/machines".to_owned(), vec![("name", "desktop")]),
        (
            format!("/account/machines/{machine_id}/reauthorize"),
            vec![],
        ),
        (format!("/account/machines/{machine_id}/revoke"), vec![]),
        (
            "/reauth".to_owned(),
            vec![("password", "wrong password here"), ("next", "/account")],
        ),
        (
            "/reauth".to_owned(),
            vec![("password", PASSWORD), ("next", "/account")],
        ),
    ];
    let mut ada = ada.clone();
    for (uri, fields) in forms {
        let answer = app.form(&ada, &uri, &fields).await;
        assert_eq!(
            answer.status,
            StatusCode::SEE_OTHER,
            "{uri} {fields:?}: {}",
            answer.body
        );
        if let Some(secret) = answer.session_cookie() {
            // Re-authentication gave the session a new secret.
            let me = app
                .call(
                    &Caller {
                        cookie: Some(secret.clone()),
                        ..Caller::default()
                    },
                    "GET",
                    "/api/v1/me",
                    None,
                )
                .await;
            ada = Caller {
                cookie: Some(secret),
                csrf: me.json()["csrf_token"].as_str().map(str::to_owned),
                bearer: None,
            };
        }
    }
    let logout = app.form(&ada, "/logout", &[]).await;
    assert_eq!(logout.status, StatusCode::SEE_OTHER);
    // The login form, with a wrong password: back to the form, the error shown once from a flash.
    let form = app.page(&Caller::default(), "/login").await;
    let csrf = form
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix("fermata_login_csrf="))
        .map(|rest| rest.split(';').next().unwrap().to_owned())
        .unwrap();
    let body = serde_urlencoded::to_string([
        ("name", "ada"),
        ("password", "wrong password"),
        ("csrf", &csrf),
    ])
    .unwrap();
    let request = Request::post("/login")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::COOKIE, format!("fermata_login_csrf={csrf}"))
        .body(Body::from(body))
        .unwrap();
    let failed = support::send(&app.state, request).await;
    assert_eq!(failed.status, StatusCode::SEE_OTHER);
    let flash = failed
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix("fermata_flash="))
        .map(|rest| rest.split(';').next().unwrap().to_owned())
        .unwrap();
    let request = Request::get("/login")
        .header(header::COOKIE, format!("fermata_flash={flash}"))
        .body(Body::empty())
        .unwrap();
    let shown = support::send(&app.state, request).await;
    assert!(
        shown.body.contains("the name or password is wrong"),
        "{}",
        shown.body
    );
}

#[tokio::test]
async fn every_error_is_a_safe_json_error() {
    let app = App::new().await;
    let ada = &app.ada;
    for (method, uri, status) in [
        // A document ID that is not UTF-8 names no document: the policy answers as for any
        // missing one.
        ("GET", "/api/v1/documents/%FF", StatusCode::NOT_FOUND),
        (
            "GET",
            "/api/v1/documents/%FF/images/%FF",
            StatusCode::NOT_FOUND,
        ),
        (
            "GET",
            "/api/v1/documents?limit=many",
            StatusCode::BAD_REQUEST,
        ),
        ("GET", "/api/v1/nowhere", StatusCode::NOT_FOUND),
        ("GET", "/nowhere", StatusCode::NOT_FOUND),
        ("PATCH", "/api/v1/me", StatusCode::METHOD_NOT_ALLOWED),
    ] {
        let answer = app.call(ada, method, uri, None).await;
        assert_eq!(answer.status, status, "{method} {uri}: {}", answer.body);
        assert!(
            header(&answer.headers, &header::CONTENT_TYPE).starts_with("application/json"),
            "{method} {uri}"
        );
        let code = answer.code();
        assert!(
            !answer.body.contains("Invalid URL"),
            "{method} {uri}: {}",
            answer.body
        );
        assert!(!code.is_empty());
    }
    // A form body the handler cannot read.
    let request = Request::post("/account/tokens")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(
            header::COOKIE,
            format!("fermata_session={}", ada.cookie.clone().unwrap()),
        )
        .body(Body::from(format!("csrf={}", ada.csrf.clone().unwrap())))
        .unwrap();
    let answer = support::send(&app.state, request).await;
    assert!(answer.status.is_client_error(), "{}", answer.body);
    assert!(
        header(&answer.headers, &header::CONTENT_TYPE).starts_with("application/json"),
        "{}",
        answer.body
    );
}
