//! The accounts HTTP surface, called through the router without a socket, on a real SQLite
//! database: who gets in, who is turned away with which status, CSRF, throttling, sessions,
//! tokens, machines and credentials.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use fermata_accounts::AccountError;
use fermata_collab::WriterFence;
use fermata_crypto::SecretToken;
use fermata_http::HttpState;
use fermata_store::{Role, StoreOptions};
use fermata_store_sql::testing::{ScratchDatabase, ScratchStorage};
use serde_json::{Value, json};
use support::{Answer, Caller};

use crate::support;

const ADMIN_PASSWORD: &str = "correct horse battery staple";
const MEMBER_PASSWORD: &str = "members have passwords too";

struct App {
    state: HttpState,
    storage: ScratchStorage,
}

impl App {
    async fn new() -> Self {
        let storage = ScratchDatabase::sqlite()
            .open(StoreOptions::default())
            .await;
        let state = support::state(&storage, WriterFence::default());
        let accounts = &state.accounts;
        accounts
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
        App { state, storage }
    }

    async fn send(&self, request: Request<Body>) -> Answer {
        support::send(&self.state, request).await
    }

    async fn call(&self, caller: &Caller, method: &str, uri: &str, body: Option<Value>) -> Answer {
        support::call(&self.state, caller, method, uri, body).await
    }

    async fn form(&self, caller: &Caller, uri: &str, fields: &[(&str, &str)]) -> Answer {
        let mut request =
            Request::post(uri).header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        if let Some(cookie) = &caller.cookie {
            request = request.header(header::COOKIE, format!("fermata_session={cookie}"));
        }
        let body = serde_urlencoded::to_string(fields).unwrap();
        self.send(request.body(Body::from(body)).unwrap()).await
    }

    /// `GET /account` as `caller`, with a flash cookie when given.
    async fn account_page(&self, caller: &Caller, flash: Option<&str>) -> Answer {
        let mut cookies = format!("fermata_session={}", caller.cookie.as_deref().unwrap());
        if let Some(flash) = flash {
            cookies.push_str(&format!("; fermata_flash={flash}"));
        }
        let request = Request::get("/account")
            .header(header::COOKIE, cookies)
            .body(Body::empty())
            .unwrap();
        self.send(request).await
    }

    /// `GET /metrics` from `peer`, with `token` as a bearer token when given.
    async fn metrics(&self, peer: [u8; 4], token: Option<&str>) -> Answer {
        let mut request = Request::get("/metrics");
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let mut request = request.body(Body::empty()).unwrap();
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(std::net::SocketAddr::from((
                peer, 40000,
            ))));
        self.send(request).await
    }

    async fn login(&self, name: &str, password: &str) -> Caller {
        support::login(&self.state, name, password).await
    }

    async fn age_sessions(&self) {
        support::age_sessions(&self.storage).await;
    }
}

#[tokio::test]
async fn unauthenticated_callers_are_refused_or_sent_to_log_in() {
    let app = App::new().await;
    let nobody = Caller::default();
    for uri in [
        "/api/v1/me",
        "/api/v1/tokens",
        "/api/v1/users",
        "/api/v1/machines",
    ] {
        let answer = app.call(&nobody, "GET", uri, None).await;
        assert_eq!(
            (answer.status, answer.code()),
            (StatusCode::UNAUTHORIZED, "unauthenticated".to_owned()),
            "{uri}"
        );
    }
    let page = app.call(&nobody, "GET", "/account", None).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert_eq!(page.headers[header::LOCATION], "/login?next=/account");

    let forged = Caller {
        cookie: Some("fmts_not-a-real-session".to_owned()),
        ..Caller::default()
    };
    assert_eq!(
        app.call(&forged, "GET", "/api/v1/me", None).await.status,
        StatusCode::UNAUTHORIZED
    );
    let bad_token = Caller {
        bearer: Some("fmta_not-a-real-token".to_owned()),
        ..Caller::default()
    };
    assert_eq!(
        app.call(&bad_token, "GET", "/api/v1/me", None).await.status,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn a_wrong_password_and_an_unknown_name_look_the_same() {
    let app = App::new().await;
    let nobody = Caller::default();
    let wrong = app
        .call(
            &nobody,
            "POST",
            "/api/v1/session",
            Some(json!({"name": "ada", "password": "not the password"})),
        )
        .await;
    let unknown = app
        .call(
            &nobody,
            "POST",
            "/api/v1/session",
            Some(json!({"name": "zed", "password": "not the password"})),
        )
        .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert_eq!((wrong.status, &wrong.body), (unknown.status, &unknown.body));
    assert!(wrong.session_cookie().is_none());
}

#[tokio::test]
async fn failed_logins_lock_an_account_briefly_whether_or_not_it_exists() {
    let app = App::new().await;
    let nobody = Caller::default();
    // Ada's browser logged in before: it holds her known-device mark.
    let earlier = app
        .call(
            &nobody,
            "POST",
            "/api/v1/session",
            Some(json!({"name": "ada", "password": ADMIN_PASSWORD})),
        )
        .await;
    let mark = earlier
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix("fermata_device="))
        .map(|rest| rest.split(';').next().unwrap().to_owned())
        .expect("a known-device mark");
    for name in ["zed", "ada"] {
        for _ in 0..5 {
            let answer = app
                .call(
                    &nobody,
                    "POST",
                    "/api/v1/session",
                    Some(json!({"name": name, "password": "guess guess guess"})),
                )
                .await;
            assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
        }
        let throttled = app
            .call(
                &nobody,
                "POST",
                "/api/v1/session",
                Some(json!({"name": name, "password": ADMIN_PASSWORD})),
            )
            .await;
        assert_eq!(
            throttled.status,
            StatusCode::TOO_MANY_REQUESTS,
            "{name}: {}",
            throttled.body
        );
        let retry_after: u64 = throttled.headers[header::RETRY_AFTER]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(retry_after <= 300, "a lock is short: {retry_after}");
        if name == "zed" {
            // A mark made for another account does not open its lock.
            let request = Request::post("/api/v1/session")
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::COOKIE, format!("fermata_device={mark}"))
                .body(Body::from(
                    json!({"name": "zed", "password": ADMIN_PASSWORD}).to_string(),
                ))
                .unwrap();
            assert_eq!(
                app.send(request).await.status,
                StatusCode::TOO_MANY_REQUESTS
            );
        }
    }
    // Ada's own browser gets through the lock with the right password, which lifts it.
    let request = Request::post("/api/v1/session")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::COOKIE, format!("fermata_device={mark}"))
        .body(Body::from(
            json!({"name": "ada", "password": ADMIN_PASSWORD}).to_string(),
        ))
        .unwrap();
    let known = app.send(request).await;
    assert_eq!(known.status, StatusCode::OK, "{}", known.body);
    app.login("ada", ADMIN_PASSWORD).await;
    // Another account is not affected.
    app.login("bob", MEMBER_PASSWORD).await;
    let metrics = app.metrics([127, 0, 0, 1], None).await.body;
    assert!(
        metrics.contains("fermata_login_failures_total 10"),
        "{metrics}"
    );
    assert!(
        metrics.contains("fermata_limited_total{limit=\"login\"} 3"),
        "{metrics}"
    );
}

#[tokio::test]
async fn roles_and_freshness_are_enforced() {
    let app = App::new().await;
    let bob = app.login("bob", MEMBER_PASSWORD).await;
    let answer = app.call(&bob, "GET", "/api/v1/users", None).await;
    assert_eq!(
        (answer.status, answer.code()),
        (StatusCode::FORBIDDEN, "forbidden".to_owned())
    );

    let ada = app.login("ada", ADMIN_PASSWORD).await;
    assert_eq!(
        app.call(&ada, "GET", "/api/v1/users", None).await.status,
        StatusCode::OK
    );
    let new_user = json!({"name": "carol", "password": "carol has a long password"});
    assert_eq!(
        app.call(&ada, "POST", "/api/v1/users", Some(new_user))
            .await
            .status,
        StatusCode::CREATED
    );

    app.age_sessions().await;
    let stale = app
        .call(&ada, "POST", "/api/v1/users", Some(json!({"name": "dave"})))
        .await;
    assert_eq!(
        (stale.status, stale.code()),
        (
            StatusCode::FORBIDDEN,
            "reauthentication_required".to_owned()
        )
    );
    assert_eq!(
        app.call(&ada, "GET", "/api/v1/me", None).await.json()["fresh"],
        false
    );

    let wrong = app
        .call(
            &ada,
            "POST",
            "/api/v1/session/reauth",
            Some(json!({"password": "nope nope nope"})),
        )
        .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    let before = ada.clone();
    let reauth = app
        .call(
            &ada,
            "POST",
            "/api/v1/session/reauth",
            Some(json!({"password": ADMIN_PASSWORD})),
        )
        .await;
    assert_eq!(reauth.status, StatusCode::OK, "{}", reauth.body);
    assert_eq!(reauth.json()["fresh"], true);
    // Re-authentication rotates the session's secret and with it the CSRF token: the old
    // cookie no longer signs in.
    let ada = Caller {
        cookie: Some(reauth.session_cookie().expect("a new session cookie")),
        csrf: Some(reauth.json()["csrf_token"].as_str().unwrap().to_owned()),
        bearer: None,
    };
    assert_ne!(ada.cookie, before.cookie);
    assert_ne!(ada.csrf, before.csrf);
    assert_eq!(
        app.call(&before, "GET", "/api/v1/me", None).await.status,
        StatusCode::UNAUTHORIZED
    );
    let created = app
        .call(&ada, "POST", "/api/v1/users", Some(json!({"name": "dave"})))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(
        created.json()["password"].as_str().map(str::len),
        Some(43),
        "a generated password is shown once"
    );

    // An API token is never fresh, even an administrator's.
    let token = app
        .call(&ada, "POST", "/api/v1/tokens", Some(json!({"label": "ci"})))
        .await;
    let program = Caller {
        bearer: Some(token.json()["token"].as_str().unwrap().to_owned()),
        ..Caller::default()
    };
    assert_eq!(
        app.call(&program, "GET", "/api/v1/users", None)
            .await
            .status,
        StatusCode::OK
    );
    let refused = app
        .call(
            &program,
            "PUT",
            "/api/v1/users/bob/roles",
            Some(json!({"roles": ["system_admin"]})),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn browser_writes_without_the_csrf_token_are_refused() {
    let app = App::new().await;
    let ada = app.login("ada", ADMIN_PASSWORD).await;
    let without = Caller {
        csrf: None,
        ..ada.clone()
    };
    let answer = app
        .call(
            &without,
            "POST",
            "/api/v1/tokens",
            Some(json!({"label": "x"})),
        )
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (StatusCode::FORBIDDEN, "csrf".to_owned())
    );
    let other = Caller {
        csrf: Some(app.login("bob", MEMBER_PASSWORD).await.csrf.unwrap()),
        ..ada.clone()
    };
    let answer = app
        .call(
            &other,
            "POST",
            "/api/v1/tokens",
            Some(json!({"label": "x"})),
        )
        .await;
    assert_eq!(
        answer.status,
        StatusCode::FORBIDDEN,
        "another session's token was accepted"
    );

    // Pages: a form without its token, with a wrong one, and with the right one.
    let page = app
        .form(&ada, "/account/tokens", &[("label", "from a form")])
        .await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    let page = app
        .form(
            &ada,
            "/account/tokens",
            &[("label", "from a form"), ("csrf", "forged")],
        )
        .await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    let csrf = ada.csrf.clone().unwrap();
    let page = app
        .form(
            &ada,
            "/account/tokens",
            &[("label", "from a form"), ("csrf", &csrf)],
        )
        .await;
    // The form answers with a redirect; the new token waits, sealed, in a flash cookie, and
    // the account page shows it once.
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert_eq!(page.headers[header::LOCATION], "/account");
    let flash = cookie_set(&page, "fermata_flash").expect("a flash cookie");
    assert!(!flash.contains("fmta_"), "the secret is sealed: {flash}");
    let shown = app.account_page(&ada, Some(&flash)).await;
    assert_eq!(shown.status, StatusCode::OK);
    assert!(shown.body.contains("shown only once") && shown.body.contains("fmta_"));
    assert_eq!(
        cookie_set(&shown, "fermata_flash").as_deref(),
        Some(""),
        "shown once"
    );
    let again = app.account_page(&ada, None).await;
    assert!(!again.body.contains("fmta_"));
    // Another session cannot open it.
    let bob = app.login("bob", MEMBER_PASSWORD).await;
    let stolen = app.account_page(&bob, Some(&flash)).await;
    assert!(!stolen.body.contains("fmta_"));
    // A form with two tokens is refused, even when one of them is right.
    let doubled = app
        .form(
            &ada,
            "/account/tokens",
            &[("label", "twice"), ("csrf", &csrf), ("csrf", "forged")],
        )
        .await;
    assert_eq!(doubled.status, StatusCode::FORBIDDEN);
    let doubled = app
        .form(
            &ada,
            "/account/tokens",
            &[("label", "twice"), ("csrf", &csrf), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(doubled.status, StatusCode::FORBIDDEN);

    // A request from another site is refused even with the right token.
    let request = Request::post("/api/v1/tokens")
        .header(header::HOST, "localhost:7878")
        .header(header::ORIGIN, "https://evil.example")
        .header(
            header::COOKIE,
            format!("fermata_session={}", ada.cookie.clone().unwrap()),
        )
        .header("x-csrf-token", &csrf)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(r#"{"label":"x"}"#))
        .unwrap();
    assert_eq!(app.send(request).await.status, StatusCode::FORBIDDEN);

    // The login form needs its own double-submit cookie.
    let login = app
        .form(
            &Caller::default(),
            "/login",
            &[("name", "ada"), ("password", ADMIN_PASSWORD), ("csrf", "x")],
        )
        .await;
    assert_eq!(login.status, StatusCode::SEE_OTHER);
    assert!(
        login.headers[header::LOCATION]
            .to_str()
            .unwrap()
            .starts_with("/login?next=")
    );
    assert!(login.session_cookie().is_none());
}

#[tokio::test]
async fn the_login_form_logs_in_and_logout_ends_the_session() {
    let app = App::new().await;
    let form = app
        .call(&Caller::default(), "GET", "/login?next=/account", None)
        .await;
    assert_eq!(form.status, StatusCode::OK);
    let csrf_cookie = form
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix("fermata_login_csrf="))
        .map(|rest| rest.split(';').next().unwrap().to_owned())
        .unwrap();
    assert!(form.body.contains(&format!("value=\"{csrf_cookie}\"")));
    let body = serde_urlencoded::to_string([
        ("name", "ada"),
        ("password", ADMIN_PASSWORD),
        ("csrf", csrf_cookie.as_str()),
        ("next", "/account"),
    ])
    .unwrap();
    let request = Request::post("/login")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::COOKIE, format!("fermata_login_csrf={csrf_cookie}"))
        .body(Body::from(body))
        .unwrap();
    let answer = app.send(request).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    assert_eq!(answer.headers[header::LOCATION], "/account");
    let set_cookie = answer
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("fermata_session="))
        .unwrap()
        .to_owned();
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(set_cookie.contains(attribute), "{set_cookie}");
    }
    let cookie = answer.session_cookie().unwrap();
    let browser = Caller {
        cookie: Some(cookie),
        ..Caller::default()
    };
    let account = app.call(&browser, "GET", "/account", None).await;
    assert_eq!(account.status, StatusCode::OK);
    assert!(account.body.contains("Signed in as <strong>ada</strong>"));

    let csrf = app.call(&browser, "GET", "/api/v1/me", None).await.json()["csrf_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = app.form(&browser, "/logout", &[("csrf", &csrf)]).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    // The browser clears what the pages stored (the editor's kept edits), not its cookies.
    assert_eq!(out.headers["clear-site-data"], "\"storage\"");
    assert_eq!(
        app.call(&browser, "GET", "/api/v1/me", None).await.status,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn tokens_and_machines_work_until_revoked_and_only_their_owner_revokes_machines() {
    let app = App::new().await;
    let ada = app.login("ada", ADMIN_PASSWORD).await;
    let bob = app.login("bob", MEMBER_PASSWORD).await;

    let token = app
        .call(
            &bob,
            "POST",
            "/api/v1/tokens",
            Some(json!({"label": "script"})),
        )
        .await;
    assert_eq!(token.status, StatusCode::CREATED);
    let token_id = token.json()["id"].as_str().unwrap().to_owned();
    let program = Caller {
        bearer: Some(token.json()["token"].as_str().unwrap().to_owned()),
        ..Caller::default()
    };
    assert_eq!(
        app.call(&program, "GET", "/api/v1/me", None).await.json()["via"],
        "token"
    );
    let listed = app.call(&bob, "GET", "/api/v1/tokens", None).await.json();
    assert!(
        listed[0].get("token").is_none(),
        "a listing shows a secret: {listed}"
    );
    assert_eq!(
        app.call(&bob, "DELETE", &format!("/api/v1/tokens/{token_id}"), None)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.call(&program, "GET", "/api/v1/me", None).await.status,
        StatusCode::UNAUTHORIZED
    );

    let paired = app
        .call(
            &bob,
            "POST",
            "/api/v1/machines",
            Some(json!({"name": "build box"})),
        )
        .await;
    assert_eq!(paired.status, StatusCode::CREATED);
    let machine_id = paired.json()["id"].as_str().unwrap().to_owned();
    let machine = Caller {
        bearer: Some(paired.json()["token"].as_str().unwrap().to_owned()),
        ..Caller::default()
    };
    let set = app
        .call(
            &machine,
            "PUT",
            "/api/v1/machine/credentials",
            Some(json!({"credentials": {"github_token": "gho_machine"}})),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.body);
    let me = app
        .call(&machine, "GET", "/api/v1/machine", None)
        .await
        .json();
    assert_eq!(me["credentials"], json!(["github_token"]));
    assert_eq!(me["name"], "build box");

    // A machine token is not a user's token, and a user's token is not a machine's.
    assert_eq!(
        app.call(&machine, "GET", "/api/v1/me", None).await.status,
        StatusCode::UNAUTHORIZED
    );

    let renewed = app
        .call(
            &bob,
            "POST",
            &format!("/api/v1/machines/{machine_id}/reauthorize"),
            None,
        )
        .await;
    assert_eq!(renewed.status, StatusCode::OK);
    assert_eq!(
        app.call(&machine, "GET", "/api/v1/machine", None)
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );
    let machine = Caller {
        bearer: Some(renewed.json()["token"].as_str().unwrap().to_owned()),
        ..Caller::default()
    };
    assert_eq!(
        app.call(&machine, "GET", "/api/v1/machine", None)
            .await
            .status,
        StatusCode::OK
    );

    // Even an administrator cannot revoke someone else's machine.
    let answer = app
        .call(
            &ada,
            "DELETE",
            &format!("/api/v1/machines/{machine_id}"),
            None,
        )
        .await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.call(&machine, "GET", "/api/v1/machine", None)
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        app.call(
            &bob,
            "DELETE",
            &format!("/api/v1/machines/{machine_id}"),
            None
        )
        .await
        .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.call(&machine, "GET", "/api/v1/machine", None)
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn tampered_credentials_fail_to_decrypt_and_change_nothing() {
    let app = App::new().await;
    let ada = app.login("ada", ADMIN_PASSWORD).await;
    let set = app
        .call(
            &ada,
            "PUT",
            "/api/v1/session/credentials",
            Some(json!({"credentials": {"github_token": "gho_session"}})),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.body);
    let pool = app.storage.storage.pool();
    let before: Vec<u8> =
        sqlx::query_scalar("SELECT credentials FROM web_sessions WHERE credentials IS NOT NULL")
            .fetch_one(pool)
            .await
            .unwrap();
    let mut tampered = before.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 0x01;
    sqlx::query("UPDATE web_sessions SET credentials = $1 WHERE credentials IS NOT NULL")
        .bind(tampered.clone())
        .execute(pool)
        .await
        .unwrap();

    let answer = app
        .call(&ada, "GET", "/api/v1/session/credentials", None)
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "undecryptable".to_owned()
        )
    );
    assert!(
        answer.body.contains("failed authentication"),
        "{}",
        answer.body
    );
    let after: Vec<u8> =
        sqlx::query_scalar("SELECT credentials FROM web_sessions WHERE credentials IS NOT NULL")
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(after, tampered, "reading tampered credentials changed them");

    // The envelope of one session moved onto another session's row does not open there either.
    let bob = app.login("bob", MEMBER_PASSWORD).await;
    sqlx::query("UPDATE web_sessions SET credentials = $1 WHERE credentials IS NULL")
        .bind(before)
        .execute(pool)
        .await
        .unwrap();
    let moved = app
        .call(&bob, "GET", "/api/v1/session/credentials", None)
        .await;
    assert_eq!(moved.code(), "undecryptable");
}

#[tokio::test]
async fn malformed_input_gets_a_clear_error() {
    let app = App::new().await;
    let ada = app.login("ada", ADMIN_PASSWORD).await;
    let answer = app
        .call(
            &ada,
            "PUT",
            "/api/v1/session/credentials",
            Some(json!({"credentials": {"Bad Name": "x"}})),
        )
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (StatusCode::BAD_REQUEST, "invalid".to_owned())
    );
    let answer = app
        .call(&ada, "POST", "/api/v1/tokens", Some(json!({"label": ""})))
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    let answer = app
        .call(
            &ada,
            "POST",
            "/api/v1/users",
            Some(json!({"name": "Eve!", "password": "x"})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    let answer = app
        .call(
            &ada,
            "POST",
            "/api/v1/users",
            Some(json!({"name": "eve", "password": "short"})),
        )
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (StatusCode::BAD_REQUEST, "invalid".to_owned())
    );
    let answer = app
        .call(
            &ada,
            "POST",
            "/api/v1/users",
            Some(json!({"name": "ada", "password": "a long enough password"})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::CONFLICT);
    let request = Request::post("/api/v1/session")
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from("name=ada"))
        .unwrap();
    assert_eq!(
        app.send(request).await.status,
        StatusCode::UNSUPPORTED_MEDIA_TYPE
    );
}

#[tokio::test]
async fn health_readiness_and_metrics_still_answer() {
    let app = App::new().await;
    app.state.readiness.set(fermata_http::Phase::Starting);
    let nobody = Caller::default();
    assert_eq!(
        app.call(&nobody, "GET", "/healthz", None).await.body,
        "ok\n"
    );
    let ready = app.call(&nobody, "GET", "/readyz", None).await;
    assert_eq!(
        (ready.status, ready.body.as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "starting\n")
    );
    app.state.readiness.set(fermata_http::Phase::Serving);
    assert_eq!(
        app.call(&nobody, "GET", "/readyz", None).await.status,
        StatusCode::OK
    );
    app.state.metrics.lease_granted(7, 1_700_000_000_000);
    // By default, only this machine reads the metrics, and never the fencing token.
    let metrics = app.metrics([127, 0, 0, 1], None).await.body;
    for line in [
        "fermata_build_info{version=\"test\"} 1",
        "fermata_writer_lease_held 1",
        "# EOF",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "missing {line:?} in:\n{metrics}"
        );
    }
    assert!(!metrics.contains("writer_lease_token"), "{metrics}");
    assert_eq!(
        app.metrics([203, 0, 113, 5], None).await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        app.call(&nobody, "GET", "/metrics", None).await.status,
        StatusCode::FORBIDDEN,
        "a request with no peer is not this machine"
    );
    // With a scrape token, the scraper that presents it reads everything, from anywhere.
    let mut state = app.state.clone();
    state.edge.metrics = fermata_http::edge::MetricsAccess::Token(Arc::new(
        SecretToken::from_given("a scrape token of some length"),
    ));
    let scraped = App {
        state,
        storage: app.storage.clone(),
    };
    let full = scraped
        .metrics([203, 0, 113, 5], Some("a scrape token of some length"))
        .await;
    assert_eq!(full.status, StatusCode::OK);
    assert!(
        full.body
            .lines()
            .any(|l| l == "fermata_writer_lease_token 7"),
        "{}",
        full.body
    );
    assert!(full.body.ends_with("# EOF\n"), "{}", full.body);
    for token in [None, Some("a wrong token of some length")] {
        assert_eq!(
            scraped.metrics([127, 0, 0, 1], token).await.status,
            StatusCode::UNAUTHORIZED
        );
    }
}

#[tokio::test]
async fn credentials_added_at_once_are_all_kept() {
    let app = App::new().await;
    app.login("ada", ADMIN_PASSWORD).await;
    let session: String = sqlx::query_scalar("SELECT id FROM web_sessions")
        .fetch_one(app.storage.storage.pool())
        .await
        .unwrap();
    let session = fermata_store::SessionId(session);
    let additions: Vec<_> = (0..6)
        .map(|i| {
            let accounts = Arc::clone(&app.state.accounts);
            let session = session.clone();
            tokio::spawn(async move {
                let name = format!("key_{i}");
                let added = accounts
                    .add_session_credential(&session, name.clone(), format!("value {i}"))
                    .await;
                (name, added)
            })
        })
        .collect();
    let mut kept = Vec::new();
    for addition in additions {
        let (name, added) = addition.await.unwrap();
        match added {
            Ok(_) => kept.push(name),
            Err(AccountError::Conflict(_)) => {}
            Err(error) => panic!("adding {name}: {error}"),
        }
    }
    assert!(!kept.is_empty());
    let stored = app
        .state
        .accounts
        .session_credentials(&session)
        .await
        .unwrap();
    for name in &kept {
        assert!(
            stored.get(name).is_some(),
            "{name} was acknowledged and lost"
        );
    }
}

/// The value of the cookie `name` that `answer` set.
fn cookie_set(answer: &Answer, name: &str) -> Option<String> {
    answer
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix(&format!("{name}=")).map(str::to_owned))
        .map(|rest| rest.split(';').next().unwrap_or_default().to_owned())
}

#[tokio::test]
async fn tokens_mint_only_with_their_scope_and_every_user_is_capped() {
    let app = App::new().await;
    let ada = app.login("ada", ADMIN_PASSWORD).await;
    let app = &app;
    let token = |caller: &Caller, body: Value| {
        let caller = caller.clone();
        async move {
            app.call(&caller, "POST", "/api/v1/tokens", Some(body))
                .await
        }
    };
    let plain = token(&ada, json!({"label": "ci"})).await;
    assert_eq!(plain.status, StatusCode::CREATED);
    let program = Caller {
        bearer: Some(plain.json()["token"].as_str().unwrap().to_owned()),
        ..Caller::default()
    };
    // A token without the scope reads and writes as its user, but mints nothing.
    assert_eq!(
        app.call(&program, "GET", "/api/v1/me", None).await.status,
        StatusCode::OK
    );
    for (uri, body) in [
        ("/api/v1/tokens", json!({"label": "more"})),
        ("/api/v1/machines", json!({"name": "more"})),
    ] {
        let refused = app.call(&program, "POST", uri, Some(body)).await;
        assert_eq!(
            (refused.status, refused.code()),
            (StatusCode::FORBIDDEN, "forbidden".to_owned()),
            "{uri}"
        );
    }
    let page = app
        .send(
            Request::post("/account/tokens")
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .header(
                    header::AUTHORIZATION,
                    format!("Bearer {}", program.bearer.clone().unwrap()),
                )
                .body(Body::from("label=through+the+page"))
                .unwrap(),
        )
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert_eq!(
        app.call(&ada, "GET", "/api/v1/tokens", None)
            .await
            .json()
            .as_array()
            .unwrap()
            .len(),
        1,
        "the page made no token either"
    );
    let unknown = token(&ada, json!({"label": "x", "scopes": ["everything"]})).await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);

    // With the scope, it may.
    let issuing = token(&ada, json!({"label": "deploys", "scopes": ["tokens"]})).await;
    assert_eq!(issuing.status, StatusCode::CREATED);
    let secret = issuing.json()["token"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("fmtk_"), "{secret}");
    let deployer = Caller {
        bearer: Some(secret),
        ..Caller::default()
    };
    let minted = token(&deployer, json!({"label": "minted"})).await;
    assert_eq!(minted.status, StatusCode::CREATED, "{}", minted.body);

    // Every user holds a bounded number of tokens and machines.
    let cap = fermata_accounts::AccountSettings::default();
    for n in 3..cap.max_api_tokens {
        let made = token(&deployer, json!({"label": format!("t{n}")})).await;
        assert_eq!(made.status, StatusCode::CREATED, "{n}: {}", made.body);
    }
    let over = token(&deployer, json!({"label": "one too many"})).await;
    assert_eq!(
        (over.status, over.code()),
        (StatusCode::CONFLICT, "too_many".to_owned())
    );
    let id = minted.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(
        app.call(&ada, "DELETE", &format!("/api/v1/tokens/{id}"), None)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        token(&deployer, json!({"label": "in its place"}))
            .await
            .status,
        StatusCode::CREATED
    );
    for n in 0..cap.max_machines {
        let paired = app
            .call(
                &deployer,
                "POST",
                "/api/v1/machines",
                Some(json!({"name": format!("m{n}")})),
            )
            .await;
        assert_eq!(paired.status, StatusCode::CREATED, "{n}: {}", paired.body);
    }
    let over = app
        .call(
            &ada,
            "POST",
            "/api/v1/machines",
            Some(json!({"name": "one too many"})),
        )
        .await;
    assert_eq!(
        (over.status, over.code()),
        (StatusCode::CONFLICT, "too_many".to_owned())
    );
}
