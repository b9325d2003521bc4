//! One writer for real, with the real binary on SQLite and on PostgreSQL: a standby answers only
//! health, readiness and metrics (no login, token, document created or written, over HTTP or a
//! live `/sync` connection), and serves all of them once it takes over; a
//! holder frozen inside a fenced write is taken over within the bound the lease timings give, and
//! writes nothing once it is continued; a start whose reset fails does not serve.

use crate::support;

use std::time::Duration;

use fermata::writer_lease::LeaseTimings;
use fermata_store::{
    LeaseName, NewSession, NewUser, Role, SecretHash, SessionId, Storage, TenureEnd, UserId,
    UserName,
};
use serde_json::json;
use sqlx::{Connection, Executor};
use support::{
    Answer, Target, USER_PASSWORD, add_user, create_document, request, session_headers, text_of,
    wait_for_file,
};
use tokio::time::Instant;

/// The lease timings of the tests' config file (`support::FAST_LEASE`).
fn fast_timings() -> LeaseTimings {
    LeaseTimings {
        ttl: Duration::from_secs(3),
        renew_every: Duration::from_secs(1),
        attempt_timeout: Duration::from_millis(400),
        abandon_after: Duration::from_millis(500),
        safety_deadline: Duration::from_secs(2),
        drain_timeout: Duration::from_millis(500),
    }
}

/// What a successor needs beyond the bound to be ready: start its tenure, run the startup reset
/// and be seen ready by the test's polling, on a machine busy with other tests.
const READY_ALLOWANCE: Duration = Duration::from_secs(2);

/// Logs `ada` in at `address`.
fn login(address: std::net::SocketAddr) -> Answer {
    request(
        address,
        "POST",
        "/api/v1/session",
        &[],
        Some(&json!({"name": "ada", "password": USER_PASSWORD})),
    )
}

fn header(answer: &Answer, name: &str) -> Option<String> {
    answer.headers.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name)
            .then(|| value.trim().to_owned())
    })
}

fn assert_not_serving(answer: &Answer, what: &str) {
    assert_eq!(answer.status, 503, "{what}: {}", answer.body);
    assert_eq!(answer.json()["error"]["code"], "not_serving", "{what}");
    let retry: u64 = header(answer, "retry-after")
        .unwrap_or_else(|| panic!("{what}: no Retry-After in {}", answer.headers))
        .parse()
        .unwrap();
    assert!(retry >= 1, "{what}: Retry-After {retry}");
    assert_eq!(
        answer.cookie("fermata_session"),
        None,
        "{what} set a cookie"
    );
}

/// `PUT /api/v1/documents/{document}/text` with the API token `token`.
fn put_text(address: std::net::SocketAddr, token: &str, document: &str, text: &str) -> Answer {
    request(
        address,
        "PUT",
        &format!("/api/v1/documents/{document}/text"),
        &[("Authorization", &format!("Bearer {token}"))],
        Some(&json!({ "text": text })),
    )
}

/// The WebSocket upgrade a Yjs client sends to `/sync` for `document`.
fn sync_upgrade(address: std::net::SocketAddr, token: &str, document: &str) -> Answer {
    request(
        address,
        "GET",
        &format!("/sync/{document}?token={token}"),
        &[
            ("Connection", "Upgrade"),
            ("Upgrade", "websocket"),
            ("Sec-WebSocket-Version", "13"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ],
        None,
    )
}

async fn a_standby_serves_nothing_until_it_takes_over(target: Target) {
    add_user(&target, "ada", true);
    // A program's token, made on the command line (commands write without the lease).
    let (status, token, err) = target.run_with_input(&["token", "create", "--user", "ada"], "");
    assert!(status.success(), "{err}");
    let token = token.trim().to_owned();
    let mut holder = target.serve(&[]);
    holder.wait_ready().await;
    let at_holder = holder.address().await;
    let session = login(at_holder);
    assert_eq!(session.status, 200, "{}", session.body);
    let cookie = session.cookie("fermata_session").unwrap();
    let csrf = session.json()["csrf_token"].as_str().unwrap().to_owned();
    let [c, x] = session_headers(&cookie, &csrf);
    let headers = [(c.0, c.1.as_str()), (x.0, x.1.as_str())];
    let created = create_document(at_holder, &headers, "acme/app", "Kept");
    assert_eq!(created.status, 201, "{}", created.body);
    let kept = created.json()["id"].as_str().unwrap().to_owned();
    let written = put_text(at_holder, &token, &kept, "written by the holder\n");
    assert_eq!(written.status, 200, "{}", written.body);

    let mut standby = target.serve(&["--handover", "wait"]);
    standby
        .wait_for_output("waiting for the writer lease to be released")
        .await;
    let at_standby = standby.address().await;
    assert_not_serving(&login(at_standby), "a login");
    let token_request = request(
        at_standby,
        "POST",
        "/api/v1/tokens",
        &headers,
        Some(&json!({"label": "ci"})),
    );
    assert_not_serving(&token_request, "a token");
    let document = create_document(at_standby, &headers, "acme/app", "Plan");
    assert_not_serving(&document, "a document");
    assert_not_serving(
        &put_text(at_standby, &token, &kept, "written by the standby\n"),
        "a document's text",
    );
    assert_not_serving(
        &sync_upgrade(at_standby, &token, &kept),
        "a live connection",
    );
    let logout = request(at_standby, "DELETE", "/api/v1/session", &headers, None);
    assert_not_serving(&logout, "a logout");
    let read = request(at_standby, "GET", "/api/v1/me", &headers, None);
    assert_not_serving(&read, "a read");
    // Health, readiness and metrics still answer.
    assert_eq!(
        support::get(at_standby, "/healthz"),
        Some((200, "ok\n".to_owned()))
    );
    assert_eq!(
        support::get(at_standby, "/readyz"),
        Some((503, "waiting for the writer lease\n".to_owned()))
    );
    let metrics = support::get(at_standby, "/metrics").unwrap();
    assert_eq!(metrics.0, 200);
    assert!(
        metrics.1.contains("fermata_writer_lease_held 0"),
        "{}",
        metrics.1
    );

    // The holder still has the session the standby was asked to end, no token but the
    // program's, one document, and its text as the holder wrote it.
    let tokens = request(at_holder, "GET", "/api/v1/tokens", &headers, None);
    assert_eq!(tokens.status, 200, "{}", tokens.body);
    assert_eq!(
        tokens.json().as_array().map(Vec::len),
        Some(1),
        "{}",
        tokens.body
    );
    assert_eq!(text_of(at_holder, &token, &kept), "written by the holder\n");
    assert_eq!(target.count_rows("channels").await, 1);

    holder.terminate();
    assert_eq!(
        holder.wait_exit().await.code(),
        Some(0),
        "{}",
        holder.output()
    );
    standby.wait_ready().await;

    // Once it has taken over, it serves all of it.
    let session = login(at_standby);
    assert_eq!(session.status, 200, "{}", session.body);
    let cookie = session.cookie("fermata_session").unwrap();
    let csrf = session.json()["csrf_token"].as_str().unwrap().to_owned();
    let [c, x] = session_headers(&cookie, &csrf);
    let headers = [(c.0, c.1.as_str()), (x.0, x.1.as_str())];
    let token_request = request(
        at_standby,
        "POST",
        "/api/v1/tokens",
        &headers,
        Some(&json!({"label": "ci"})),
    );
    assert_eq!(token_request.status, 201, "{}", token_request.body);
    let document = create_document(at_standby, &headers, "acme/app", "Plan");
    assert_eq!(document.status, 201, "{}", document.body);
    let written = put_text(at_standby, &token, &kept, "written after the takeover\n");
    assert_eq!(written.status, 200, "{}", written.body);
    // A real Yjs client edits over `/sync`, and the edit is stored.
    let (ok, client) = support::node(
        "client.mjs",
        &[
            "--server".to_owned(),
            format!("ws://{at_standby}/sync"),
            "--room".to_owned(),
            kept.clone(),
            "--token".to_owned(),
            token.clone(),
            "--insert".to_owned(),
            "typed live\n".to_owned(),
            "--linger".to_owned(),
            "500".to_owned(),
        ],
    );
    assert!(ok, "{client}");
    wait_for_text(at_standby, &token, &kept, "typed live").await;
    standby.terminate();
    assert_eq!(standby.wait_exit().await.code(), Some(0));
}

/// Waits, with a bound, until the stored text of `document` holds `needle`.
async fn wait_for_text(address: std::net::SocketAddr, token: &str, document: &str, needle: &str) {
    let deadline = Instant::now() + support::PATIENCE;
    loop {
        let text = text_of(address, token, document);
        if text.contains(needle) {
            return;
        }
        assert!(Instant::now() < deadline, "{needle:?} never stored: {text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn a_frozen_holder_is_taken_over_within_the_bound_and_writes_nothing_after(target: Target) {
    add_user(&target, "ada", true);
    let marker = target.data_dir().join("pause-fenced-writes");
    let entered = target.data_dir().join("pause-fenced-writes.entered");
    let mut holder = target.serve_with_env(
        &[],
        &[("FERMATA_TEST_PAUSE_FENCED_WRITES", marker.as_os_str())],
    );
    holder.wait_ready().await;
    let at_holder = holder.address().await;
    let session = login(at_holder);
    assert_eq!(session.status, 200, "{}", session.body);
    let cookie = session.cookie("fermata_session").unwrap();
    let csrf = session.json()["csrf_token"].as_str().unwrap().to_owned();
    let mut standby = target.serve(&["--handover", "wait"]);
    standby
        .wait_for_output("waiting for the writer lease to be released")
        .await;

    // From now on the holder's fenced writes pause inside their locks; a token request makes one.
    std::fs::write(&marker, b"").unwrap();
    let writer = std::thread::spawn(move || {
        let [c, x] = session_headers(&cookie, &csrf);
        let headers = [(c.0, c.1.as_str()), (x.0, x.1.as_str())];
        let body = json!({"label": "written by a frozen holder"});
        std::panic::catch_unwind(|| {
            request(at_holder, "POST", "/api/v1/tokens", &headers, Some(&body)).status
        })
    });
    wait_for_file(&entered).await;
    let frozen_at = Instant::now();
    holder.signal("STOP");
    // When it is continued, the paused write goes on, on a session the database has ended.
    std::fs::remove_file(&marker).unwrap();

    standby.wait_ready().await;
    let took = frozen_at.elapsed();
    let timings = fast_timings();
    let bound = timings.ttl + timings.takeover_bound();
    assert!(
        took <= bound + READY_ALLOWANCE,
        "the successor served {took:?} after the holder froze; the bound is {bound:?} \
         (+{READY_ALLOWANCE:?} to start):\n{}",
        standby.output()
    );

    holder.signal("CONT");
    let status = holder.wait_exit().await;
    assert_eq!(status.code(), Some(4), "{}", holder.output());
    if let Ok(Ok(status)) = writer.join() {
        assert_ne!(status, 201, "the frozen holder's token was written");
    }
    assert_eq!(target.count_rows("api_tokens").await, 0);
    let store = target.store().await;
    let tenures = store
        .tenures()
        .recent(&LeaseName::WRITER, 10)
        .await
        .unwrap();
    let ends: Vec<_> = tenures.iter().map(|t| (t.token.0, t.end)).collect();
    assert_eq!(ends, [(2, None), (1, Some(TenureEnd::Superseded))]);
    standby.terminate();
    assert_eq!(standby.wait_exit().await.code(), Some(0));
}

/// Makes the database refuse to delete any session, so the startup reset fails.
async fn refuse_session_deletes(target: &Target) {
    match target.database() {
        fermata_store_sql::Database::Postgres { url } => {
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            conn.execute(
                "CREATE FUNCTION refuse_session_delete() RETURNS trigger LANGUAGE plpgsql AS \
                 $$ BEGIN RAISE EXCEPTION 'injected: sessions cannot be deleted'; END $$",
            )
            .await
            .unwrap();
            conn.execute(
                "CREATE TRIGGER refuse_session_delete BEFORE DELETE ON web_sessions \
                 FOR EACH ROW EXECUTE FUNCTION refuse_session_delete()",
            )
            .await
            .unwrap();
        }
        fermata_store_sql::Database::Sqlite { path } => {
            let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
            let mut conn = sqlx::SqliteConnection::connect_with(&options)
                .await
                .unwrap();
            conn.execute(
                "CREATE TRIGGER refuse_session_delete BEFORE DELETE ON web_sessions \
                 BEGIN SELECT RAISE(ABORT, 'injected: sessions cannot be deleted'); END",
            )
            .await
            .unwrap();
        }
    }
}

async fn a_failed_startup_reset_stops_the_start(target: Target) {
    let (status, output) = target.run("migrate");
    assert!(status.success(), "{output}");
    let store = target.store().await;
    let user = store
        .users()
        .create_user(&NewUser {
            id: UserId("u1".to_owned()),
            name: UserName::new("ada").unwrap(),
            password_hash: "$argon2id$placeholder".to_owned(),
            roles: [Role::SystemAdmin].into(),
        })
        .await
        .unwrap();
    store
        .sessions()
        .create_session(&NewSession {
            id: SessionId("expiring".to_owned()),
            user: user.id,
            secret_hash: Some(SecretHash([2; 32])),
            ttl: Duration::from_millis(1),
            credentials: None,
            verified_password_hash: None,
        })
        .await
        .unwrap();
    refuse_session_deletes(&target).await;

    let mut server = target.serve(&[]);
    let status = server.wait_exit().await;
    let output = server.output();
    assert_eq!(status.code(), Some(1), "{output}");
    assert!(
        output.contains(
            "the startup reset could not remove sessions and reset Planner owners; not serving"
        ),
        "{output}"
    );
    // The operator's log has the database's own words.
    assert!(
        output.contains("injected: sessions cannot be deleted"),
        "{output}"
    );
    assert!(
        !output.contains("took the writer lease; serving"),
        "{output}"
    );
    assert_eq!(target.count_rows("web_sessions").await, 1);
    let peek = store.leases().peek(&LeaseName::WRITER).await.unwrap();
    assert!(peek.is_free(), "the lease was kept: {peek:?}");
}

on_both!(
    a_standby_serves_nothing_until_it_takes_over,
    a_failed_startup_reset_stops_the_start,
);

/// Freezing a holder inside a fenced write is a PostgreSQL matter: a frozen SQLite holder keeps
/// the file's write lock, which no setting of another process can take from it.
mod postgres_only {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_frozen_holder_is_taken_over_within_the_bound_and_writes_nothing_after() {
        super::a_frozen_holder_is_taken_over_within_the_bound_and_writes_nothing_after(
            super::Target::postgres().await,
        )
        .await;
    }
}
