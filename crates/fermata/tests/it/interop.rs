//! Interoperability with the real npm clients (`yjs` + `y-websocket` under Node.js) through
//! `fermata serve`, on SQLite and PostgreSQL: concurrent editing converges, a late client gets the
//! whole document, acknowledged updates survive a restart and `kill -9` (a journal too long for
//! one read of the store included), abusive clients are refused while the room keeps serving, a
//! server that lost its lease acknowledges nothing, and a client's edits reach activity history
//! credited to the user it connected as.
//!
//! Access on live connections: a viewer's typing reaches no other client, no row and no client
//! after a restart, and removing the viewer closes its connection; an open connection is closed
//! within a second of a token revocation, a logout, a password change by `fermata user passwd`
//! (another process) and a member removal, and nothing it sends afterwards is stored; a stale
//! `If-Match` rewrite sent while a client types is refused and loses none of its text, and a
//! program's binary update merges with live typing and everyone converges.

use crate::support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use fermata_store_testkit::eventually_some;
use serde_json::json;
use support::{
    Fermata, Target, Typist, create_document, node, node_spawn, node_wait, request, text_of,
    typed_lines,
};

/// A served target with an API token and one document.
pub(crate) struct Session {
    pub(crate) server: Fermata,
    pub(crate) address: SocketAddr,
    pub(crate) token: String,
    pub(crate) document: String,
}

/// Serves `target` and creates a document titled `title` in `ada/app` with `token`.
pub(crate) async fn start(target: &Target, token: &str, title: &str) -> Session {
    let server = target.serve(&[]);
    server.wait_ready().await;
    let address = server.address().await;
    let bearer = format!("Bearer {token}");
    let created = create_document(address, &[("Authorization", &bearer)], "ada/app", title);
    assert_eq!(created.status, 201, "{}", created.body);
    Session {
        server,
        address,
        token: token.to_owned(),
        document: created.json()["id"].as_str().unwrap().to_owned(),
    }
}

fn client_args(address: SocketAddr, room: &str, token: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "--server".to_owned(),
        format!("ws://{address}/sync"),
        "--room".to_owned(),
        room.to_owned(),
        "--token".to_owned(),
        token.to_owned(),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    args
}

/// Adds a user with a password and an API token, through the command line.
fn user_with_token(target: &Target, name: &str) -> String {
    let (status, out, err) = target.run_with_input(
        &["user", "add", name, "--password-stdin"],
        "a long enough password\n",
    );
    assert!(status.success(), "{out}{err}");
    let (status, out, err) = target.run_with_input(
        &["token", "create", "--user", name, "--scope", "tokens"],
        "",
    );
    assert!(status.success(), "{err}");
    out.trim().to_owned()
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// Gives `user` a role in ada/app (or removes them), as ada.
fn set_member(address: SocketAddr, ada: &str, user: &str, role: Option<&str>) {
    let path = format!("/api/v1/repositories/ada/app/members/{user}");
    let answer = match role {
        Some(role) => request(
            address,
            "PUT",
            &path,
            &[("Authorization", &bearer(ada))],
            Some(&json!({"role": role})),
        ),
        None => request(
            address,
            "DELETE",
            &path,
            &[("Authorization", &bearer(ada))],
            None,
        ),
    };
    assert!(
        answer.status == 200 || answer.status == 204,
        "{}",
        answer.body
    );
}

/// Waits until the stored text holds `needle`.
async fn stored_contains(address: SocketAddr, token: &str, document: &str, needle: &str) {
    eventually_some(&format!("the document to hold {needle:?}"), || async {
        text_of(address, token, document)
            .contains(needle)
            .then_some(())
    })
    .await;
}

async fn concurrent_clients_converge_and_late_clients_get_everything(target: Target) {
    let token = support::api_token(&target);
    let session = start(&target, &token, "Plan").await;
    let a = node_spawn(
        "client.mjs",
        &client_args(
            session.address,
            &session.document,
            &token,
            &[
                "--insert",
                "alpha 1\n",
                "--insert",
                "alpha 2\n",
                "--expect",
                "beta 2",
            ],
        ),
    );
    let b = node_spawn(
        "client.mjs",
        &client_args(
            session.address,
            &session.document,
            &token,
            &[
                "--insert", "beta 1\n", "--insert", "beta 2\n", "--expect", "alpha 2",
            ],
        ),
    );
    let (a_ok, a_out) = node_wait(a);
    let (b_ok, b_out) = node_wait(b);
    assert!(a_ok && b_ok, "{a_out} {b_out}");
    assert_eq!(a_out["text"], b_out["text"], "the clients did not converge");

    // A client that comes later, and by slug, receives the whole document.
    let (ok, late) = node(
        "client.mjs",
        &client_args(
            session.address,
            "ada/app/plan",
            &token,
            &[
                "--expect",
                "alpha 1",
                "--expect",
                "beta 1",
                "--timeout",
                "10000",
            ],
        ),
    );
    assert!(ok, "{late}");
    assert_eq!(late["text"], a_out["text"]);
    assert_eq!(
        json!(text_of(session.address, &token, &session.document)),
        a_out["text"]
    );
    drop(session);
}

async fn acknowledged_updates_survive_a_restart_and_a_kill(target: Target) {
    let token = support::api_token(&target);
    let mut session = start(&target, &token, "Durable").await;
    // An observer only sees what the server committed: updates are broadcast after the commit.
    for (round, line) in ["before restart", "before kill"].iter().enumerate() {
        let writer = node_spawn(
            "client.mjs",
            &client_args(
                session.address,
                &session.document,
                &session.token,
                &["--insert", line, "--linger", "1000"],
            ),
        );
        let (ok, seen) = node(
            "client.mjs",
            &client_args(
                session.address,
                &session.document,
                &session.token,
                &["--expect", line],
            ),
        );
        assert!(ok, "the observer never saw the update: {seen}");
        let (ok, out) = node_wait(writer);
        assert!(ok, "{out}");
        if round == 0 {
            session.server.terminate();
            assert_eq!(session.server.wait_exit().await.code(), Some(0));
        } else {
            session.server.kill();
        }
        let server = target.serve(&["--handover", "wait"]);
        server.wait_ready().await;
        session.address = server.address().await;
        session.server = server;
        let (ok, fresh) = node(
            "client.mjs",
            &client_args(
                session.address,
                &session.document,
                &session.token,
                &[
                    "--expect",
                    "before restart",
                    "--expect",
                    line,
                    "--timeout",
                    "20000",
                ],
            ),
        );
        assert!(
            ok,
            "round {round}: a fresh client did not receive every acknowledged update: {fresh}"
        );
    }
}

/// A journal longer than one read of the store (`fermata_docs::OVERLAP_FROM` updates after the
/// checkpoint), left by a `kill -9`, is recovered while it is read, and a fresh client gets all
/// of it.
async fn a_long_journal_left_by_a_kill_reaches_a_fresh_client(target: Target) {
    const COMMITS: i64 = fermata_docs::OVERLAP_FROM + 200;
    // No checkpoint cuts the journal short while it is written.
    support::configure(
        &target,
        "\n[documents]\ncheckpoint_every_commits = 100000\n",
    );
    let token = support::api_token(&target);
    let mut session = start(&target, &token, "Long journal").await;
    let url = format!(
        "ws://{}/sync/{}?token={token}",
        session.address, session.document
    );
    let (ok, out) = node(
        "commits.mjs",
        &[
            "--url".to_owned(),
            url,
            "--count".to_owned(),
            COMMITS.to_string(),
            "--timeout".to_owned(),
            "180000".to_owned(),
        ],
    );
    assert!(ok && out["committed"] == COMMITS, "{out}");
    session.server.kill();
    let journal = target.count_rows("channel_updates").await;
    assert!(
        journal > fermata_docs::OVERLAP_FROM,
        "the journal holds {journal} updates"
    );
    let server = target.serve(&["--handover", "wait"]);
    server.wait_ready().await;
    session.address = server.address().await;
    session.server = server;
    let expected: String = (1..=COMMITS).map(|n| format!("commit-{n}\n")).collect();
    let (ok, fresh) = node(
        "client.mjs",
        &client_args(
            session.address,
            &session.document,
            &token,
            &[
                "--expect",
                &format!("commit-{COMMITS}\n"),
                "--timeout",
                "30000",
            ],
        ),
    );
    assert!(ok, "a fresh client did not receive the journal: {fresh}");
    assert_eq!(fresh["text"].as_str(), Some(expected.as_str()));
    assert_eq!(
        text_of(session.address, &token, &session.document),
        expected
    );
}

async fn abusive_clients_are_refused_and_the_room_keeps_serving(target: Target) {
    let token = support::api_token(&target);
    let session = start(&target, &token, "Abuse").await;
    let (ok, first) = node(
        "client.mjs",
        &client_args(
            session.address,
            &session.document,
            &token,
            &["--insert", "kept\n"],
        ),
    );
    assert!(ok, "{first}");
    let url = format!(
        "ws://{}/sync/{}?token={token}",
        session.address, session.document
    );
    for (flag, extra, code) in [
        ("--garbage", None, 1008),
        ("--oversized", Some("1200000"), 1009),
        ("--foreign-update", None, 1008),
    ] {
        let mut args = vec!["--url".to_owned(), url.clone(), flag.to_owned()];
        args.extend(extra.map(str::to_owned));
        let (_, out) = node("raw.mjs", &args);
        assert_eq!(out["closed"], json!(code), "{flag}: {out}");
        assert!(
            out["reason"].as_str().is_some_and(|r| !r.is_empty()),
            "{flag}: no reason: {out}"
        );
    }
    // The room still serves, and nothing the abusive clients sent was kept.
    let (ok, after) = node(
        "client.mjs",
        &client_args(
            session.address,
            &session.document,
            &token,
            &["--insert", "still here\n", "--expect", "kept"],
        ),
    );
    assert!(ok, "{after}");
    assert_eq!(
        text_of(session.address, &token, &session.document),
        "kept\nstill here\n"
    );

    // Unauthenticated and unknown rooms are refused at the upgrade.
    let (_, refused) = node(
        "client.mjs",
        &client_args(
            session.address,
            &session.document,
            "fmta_wrong",
            &["--timeout", "3000"],
        ),
    );
    assert_eq!(refused["ok"], false, "{refused}");
    let unknown = "00000000-0000-4000-8000-000000000000";
    let (_, missing) = node(
        "client.mjs",
        &client_args(session.address, unknown, &token, &["--timeout", "3000"]),
    );
    assert_eq!(missing["ok"], false, "{missing}");
}

async fn a_server_that_lost_its_lease_acknowledges_nothing(target: Target) {
    let token = support::api_token(&target);
    let mut old = start(&target, &token, "Handover").await;
    let (ok, out) = node(
        "client.mjs",
        &client_args(
            old.address,
            &old.document,
            &token,
            &["--insert", "acknowledged\n"],
        ),
    );
    assert!(ok, "{out}");

    // The old server freezes (as in a long pause), its lease expires, and a new one takes over.
    let pid = old.server.pid().to_string();
    let store = target.store().await;
    freeze_between_writes(&pid, &store).await;
    let deadline = tokio::time::Instant::now() + support::PATIENCE;
    while !fermata_store::Storage::leases(&store)
        .peek(&fermata_store::LeaseName::WRITER)
        .await
        .unwrap()
        .is_free()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the frozen server's lease never expired"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let new = target.serve(&["--handover", "wait"]);
    new.wait_ready().await;
    let new_address = new.address().await;

    // A client of the old server writes as it wakes up: nothing it sends may be acknowledged.
    let late = node_spawn(
        "client.mjs",
        &client_args(
            old.address,
            &old.document,
            &token,
            &["--insert", "after takeover\n", "--timeout", "8000"],
        ),
    );
    signal(&pid, "-CONT");
    let _ = node_wait(late);
    assert_eq!(
        old.server.wait_exit().await.code(),
        Some(4),
        "{}",
        old.server.output()
    );
    let text = text_of(new_address, &token, &old.document);
    assert_eq!(
        text, "acknowledged\n",
        "an update reached the document after the takeover"
    );
    drop(new);
}

/// Sends `signal` to process `pid`.
fn signal(pid: &str, signal: &str) {
    let sent = std::process::Command::new("kill")
        .args([signal, pid])
        .status()
        .unwrap();
    assert!(sent.success(), "kill {signal} {pid} failed");
}

/// Stops process `pid` at a moment it holds no write transaction. The server writes on its own
/// every half second (the workflow worker's claim); a SQLite process frozen inside one holds the
/// file's write lock, and no other process can write until it wakes, which is SQLite's rule and
/// not the lease loss this test is about. So: stop it, and if a write from here cannot get
/// through, let it run a moment and stop it again.
async fn freeze_between_writes(pid: &str, store: &fermata_store_sql::SqlStorage) {
    let probe = fermata_store::LeaseName::new("test:probe").unwrap();
    for _ in 0..20 {
        signal(pid, "-STOP");
        let wrote = fermata_store::Storage::leases(store)
            .acquire(&probe, "probe", Duration::from_secs(1))
            .await;
        match wrote {
            Ok(_) => return,
            Err(error) if error.kind() == fermata_store::ErrorKind::Unavailable => {
                signal(pid, "-CONT");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(error) => panic!("a probe write failed: {error}"),
        }
    }
    panic!("the server never stopped between two of its writes");
}

async fn a_clients_edits_reach_history_credited_to_its_user(target: Target) {
    let token = support::api_token(&target);
    let session = start(&target, &token, "History").await;
    let (ok, out) = node(
        "client.mjs",
        &client_args(
            session.address,
            &session.document,
            &token,
            &["--insert", "first\n", "--insert", "second\n"],
        ),
    );
    assert!(ok, "{out}");
    // Recorded after acknowledgement, on its own task: poll for it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let versions = loop {
        let answer = request(
            session.address,
            "GET",
            &format!("/api/v1/documents/{}/versions", session.document),
            &[("Authorization", &format!("Bearer {token}"))],
            None,
        );
        assert_eq!(answer.status, 200, "{}", answer.body);
        let versions = answer.json()["versions"].clone();
        if versions[0]["text"] == "first\nsecond\n" {
            break versions;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "history never caught up: {versions}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    // Both edits are one session of the same user, less than ten minutes apart.
    assert_eq!(versions.as_array().unwrap().len(), 1, "{versions}");
    assert_eq!(versions[0]["author"], "ada");
    assert_eq!(
        json!(text_of(session.address, &token, &session.document)),
        versions[0]["text"]
    );
    drop(session);
}

async fn a_viewer_types_and_none_of_it_is_kept_or_shared(target: Target) {
    let ada = support::api_token(&target);
    let mut session = start(&target, &ada, "Shared").await;
    let bob = user_with_token(&target, "bob");
    set_member(session.address, &ada, "bob", Some("viewer"));

    // The viewer types for two seconds while an editor types and listens.
    let viewer = Typist::spawn(session.address, &session.document, &bob, "viewer-", 2500);
    let mut seen = Vec::new();
    viewer.event("synced", &mut seen);
    let (ok, editor) = node(
        "client.mjs",
        &client_args(
            session.address,
            &session.document,
            &ada,
            &["--insert", "editor line\n", "--linger", "1500"],
        ),
    );
    assert!(ok, "{editor}");
    let done = viewer.event("done", &mut seen);
    assert!(done["typed"].as_u64().unwrap() >= 10, "{done}");
    assert!(
        done["text"].as_str().unwrap().contains("viewer-3"),
        "the viewer's own copy holds its typing: {done}"
    );
    assert_eq!(
        done["closed"], false,
        "a viewer's connection stays open: {seen:?}"
    );
    assert!(
        seen.iter().any(|e| e["event"] == "permission-denied"),
        "the viewer was never told it is read-only: {seen:?}"
    );
    let shared = editor["text"].as_str().unwrap();
    assert!(
        !shared.contains("viewer-"),
        "another client received the viewer's text: {shared}"
    );
    let stored = text_of(session.address, &ada, &session.document);
    assert_eq!(stored, "editor line\n");

    // After a restart, a fresh client gets the document without any of it.
    session.server.terminate();
    assert_eq!(session.server.wait_exit().await.code(), Some(0));
    let server = target.serve(&["--handover", "wait"]);
    server.wait_ready().await;
    session.address = server.address().await;
    session.server = server;
    let (ok, fresh) = node(
        "client.mjs",
        &client_args(
            session.address,
            &session.document,
            &ada,
            &["--expect", "editor line", "--timeout", "20000"],
        ),
    );
    assert!(ok, "{fresh}");
    assert_eq!(fresh["text"], "editor line\n");

    // Removing the viewer's membership closes its connection.
    let viewer = Typist::spawn(session.address, &session.document, &bob, "viewer-", 20000);
    let mut seen = Vec::new();
    viewer.event("synced", &mut seen);
    set_member(session.address, &ada, "bob", None);
    let removed = Instant::now();
    let (at, closed) = viewer
        .event_within("closed", Duration::from_secs(1), &mut seen)
        .unwrap_or_else(|| panic!("the viewer's connection stayed open: {seen:?}"));
    assert!(at.duration_since(removed) <= Duration::from_secs(1));
    assert_eq!(closed["code"], 4003, "{closed}");
    assert_eq!(
        text_of(session.address, &ada, &session.document),
        "editor line\n"
    );
}

/// How an open connection's access is taken away.
#[derive(Debug, Clone, Copy)]
enum Revocation {
    TokenRevoked,
    LoggedOut,
    PasswordChanged,
    MemberRemoved,
}

async fn revocations_close_open_connections_within_a_second(target: Target) {
    let ada = support::api_token(&target);
    let session = start(&target, &ada, "Revocations").await;
    let address = session.address;
    let bob = user_with_token(&target, "bob");
    for revocation in [
        Revocation::TokenRevoked,
        Revocation::LoggedOut,
        Revocation::PasswordChanged,
        Revocation::MemberRemoved,
    ] {
        set_member(address, &ada, "bob", Some("editor"));
        let prefix = format!("{revocation:?}-");
        // The credential the connection opens with, and how to take it away.
        let (credential, revoke): (String, Box<dyn Fn()>) = match revocation {
            Revocation::TokenRevoked => {
                let made = request(
                    address,
                    "POST",
                    "/api/v1/tokens",
                    &[("Authorization", &bearer(&bob))],
                    Some(&json!({"label": "typist"})),
                );
                assert_eq!(made.status, 201, "{}", made.body);
                let id = made.json()["id"].as_str().unwrap().to_owned();
                let bob = bob.clone();
                (
                    made.json()["token"].as_str().unwrap().to_owned(),
                    Box::new(move || {
                        let answer = request(
                            address,
                            "DELETE",
                            &format!("/api/v1/tokens/{id}"),
                            &[("Authorization", &bearer(&bob))],
                            None,
                        );
                        assert_eq!(answer.status, 204, "{}", answer.body);
                    }),
                )
            }
            Revocation::LoggedOut | Revocation::PasswordChanged => {
                let login = request(
                    address,
                    "POST",
                    "/api/v1/session",
                    &[],
                    Some(&json!({"name": "bob", "password": "a long enough password"})),
                );
                assert_eq!(login.status, 200, "{}", login.body);
                let secret = login.cookie("fermata_session").expect("a session cookie");
                let csrf = login.json()["csrf_token"].as_str().unwrap().to_owned();
                let cookie = format!("fermata_session={secret}");
                let revoke: Box<dyn Fn()> = if matches!(revocation, Revocation::LoggedOut) {
                    Box::new(move || {
                        let answer = request(
                            address,
                            "DELETE",
                            "/api/v1/session",
                            &[("Cookie", &cookie), ("X-CSRF-Token", &csrf)],
                            None,
                        );
                        assert_eq!(answer.status, 204, "{}", answer.body);
                    })
                } else {
                    let target = &target;
                    let run = move || {
                        let (status, out, err) = target.run_with_input(
                            &["user", "passwd", "bob", "--password-stdin"],
                            "a long enough password\n",
                        );
                        assert!(status.success(), "{out}{err}");
                    };
                    Box::new(run)
                };
                (secret, revoke)
            }
            Revocation::MemberRemoved => (
                bob.clone(),
                Box::new(|| set_member(address, &ada, "bob", None)) as Box<dyn Fn()>,
            ),
        };
        let typist = Typist::spawn(address, &session.document, &credential, &prefix, 30000);
        let mut seen = Vec::new();
        typist.event("synced", &mut seen);
        stored_contains(address, &ada, &session.document, &format!("{prefix}3\n")).await;

        revoke();
        let revoked = Instant::now();
        let (at, closed) = typist
            .event_within("closed", Duration::from_secs(1), &mut seen)
            .unwrap_or_else(|| {
                panic!("{revocation:?}: the connection was still open a second later: {seen:?}")
            });
        assert!(at.duration_since(revoked) <= Duration::from_secs(1));
        assert_eq!(closed["code"], 4003, "{revocation:?}: {closed}");
        let typed_when_closed = closed["typed"].as_u64().unwrap();
        // It goes on typing for a second (y-websocket keeps the edits and tries to reconnect).
        let done = typist.event("done", &mut seen);
        assert!(
            done["typed"].as_u64().unwrap() > typed_when_closed,
            "{done}"
        );
        let stored = text_of(address, &ada, &session.document);
        let kept = typed_lines(&stored, &prefix);
        assert!(
            !kept.is_empty(),
            "{revocation:?}: nothing before the revocation was kept"
        );
        assert!(
            kept.iter().all(|n| *n <= typed_when_closed),
            "{revocation:?}: a line typed after the connection closed (at {typed_when_closed}) was stored: {kept:?}"
        );
    }
}

/// A raw HTTP/1.0 request with a binary body.
fn request_bytes(
    address: SocketAddr,
    method: &str,
    path: &str,
    token: &str,
    body: &[u8],
) -> (u16, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.0\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, body.to_owned())
}

async fn program_writes_never_clobber_live_typing(target: Target) {
    let ada = support::api_token(&target);
    let session = start(&target, &ada, "Program").await;
    let address = session.address;
    let typist = Typist::spawn(address, &session.document, &ada, "live-", 3000);
    let mut seen = Vec::new();
    typist.event("synced", &mut seen);
    stored_contains(address, &ada, &session.document, "live-2\n").await;
    let read = request(
        address,
        "GET",
        &format!("/api/v1/documents/{}", session.document),
        &[("Authorization", &bearer(&ada))],
        None,
    );
    let etag = read
        .headers
        .lines()
        .find_map(|line| {
            line.to_ascii_lowercase()
                .strip_prefix("etag: ")
                .map(str::to_owned)
        })
        .expect("an ETag");
    let read_revision = read.json()["revision"].as_i64().unwrap();
    assert_eq!(etag.trim(), format!("\"{read_revision}\""));
    // The typist goes on: the document moves past what the program read.
    stored_contains(address, &ada, &session.document, "live-6\n").await;
    let stale = request(
        address,
        "PUT",
        &format!("/api/v1/documents/{}/text", session.document),
        &[("Authorization", &bearer(&ada)), ("If-Match", etag.trim())],
        Some(&json!({"text": "the program's idea of the text\n"})),
    );
    assert_eq!(stale.status, 412, "{}", stale.body);
    assert!(stale.json()["current_revision"].as_i64().unwrap() > read_revision);

    // A program's Yjs update, made without reading anything, merges with the typing.
    let update = {
        use yrs::{GetString as _, Text as _, Transact as _};
        let doc = yrs::Doc::new();
        let text = doc.get_or_insert_text("source");
        let mut txn = doc.transact_mut();
        text.insert(&mut txn, 0, "from the program\n");
        let _ = text.get_string(&txn);
        txn.encode_update_v1()
    };
    let (status, body) = request_bytes(
        address,
        "POST",
        &format!("/api/v1/documents/{}/updates", session.document),
        &ada,
        &update,
    );
    assert_eq!(status, 200, "{body}");

    let done = typist.event("done", &mut seen);
    let typed = done["typed"].as_u64().unwrap();
    let client_text = done["text"].as_str().unwrap().to_owned();
    assert!(
        client_text.contains("from the program\n"),
        "the client never got the update: {client_text}"
    );
    // Everything the client typed is kept, and the server converges on the client's text.
    let stored = eventually_some("the server to hold what the client holds", || async {
        let stored = text_of(address, &ada, &session.document);
        (stored == client_text).then_some(stored)
    })
    .await;
    let kept = typed_lines(&stored, "live-");
    assert_eq!(
        kept,
        (1..=typed).collect::<Vec<_>>(),
        "typing was lost: {stored}"
    );
    assert!(!stored.contains("the program's idea"));
    let (ok, fresh) = node(
        "client.mjs",
        &client_args(
            address,
            &session.document,
            &ada,
            &["--expect", "from the program"],
        ),
    );
    assert!(ok, "{fresh}");
    assert_eq!(fresh["text"], json!(stored));
}

/// Mints a client token for `document` as ada.
fn client_token(address: SocketAddr, ada: &str, document: &str, access: &str, ttl: u64) -> String {
    let minted = request(
        address,
        "POST",
        &format!("/api/v1/documents/{document}/client-tokens"),
        &[("Authorization", &bearer(ada))],
        Some(&json!({"access": access, "ttl": ttl})),
    );
    assert_eq!(minted.status, 201, "{}", minted.body);
    minted.json()["token"].as_str().unwrap().to_owned()
}

async fn client_tokens_serve_an_app_with_its_own_sign_in(target: Target) {
    let ada = support::api_token(&target);
    let session = start(&target, &ada, "App").await;
    let address = session.address;
    let document = &session.document;

    // A write token edits live; a read token reads, over HTTP and live, and its typing is dropped.
    let write = client_token(address, &ada, document, "write", 3600);
    let (ok, out) = node(
        "client.mjs",
        &client_args(address, document, &write, &["--insert", "from the app\n"]),
    );
    assert!(ok, "{out}");
    stored_contains(address, &ada, document, "from the app\n").await;
    let read = client_token(address, &ada, document, "read", 3600);
    let over_http = request(
        address,
        "GET",
        &format!("/api/v1/documents/{document}?token={read}"),
        &[],
        None,
    );
    assert_eq!(over_http.status, 200, "{}", over_http.body);
    assert_eq!(over_http.json()["text"], "from the app\n");
    let write_over_http = request(
        address,
        "PUT",
        &format!("/api/v1/documents/{document}/text?token={write}"),
        &[],
        Some(&json!({"text": "replaced\n"})),
    );
    assert_eq!(write_over_http.status, 401, "{}", write_over_http.body);
    let reader = Typist::spawn(address, document, &read, "reader-", 1500);
    let mut seen = Vec::new();
    let synced = reader.event("synced", &mut seen);
    assert_eq!(synced["text"], "from the app\n");
    let done = reader.event("done", &mut seen);
    assert!(done["typed"].as_u64().unwrap() > 5, "{done}");
    assert!(
        seen.iter().any(|e| e["event"] == "permission-denied"),
        "{seen:?}"
    );
    assert_eq!(text_of(address, &ada, document), "from the app\n");

    // A token's expiry closes the connection it opened.
    let brief = client_token(address, &ada, document, "write", 2);
    let typist = Typist::spawn(address, document, &brief, "brief-", 20000);
    let mut seen = Vec::new();
    typist.event("synced", &mut seen);
    let (_, closed) = typist
        .event_within("closed", Duration::from_secs(3), &mut seen)
        .unwrap_or_else(|| panic!("the expired token's connection stayed open: {seen:?}"));
    assert_eq!(closed["code"], 4003, "{closed}");
    let typed_when_closed = closed["typed"].as_u64().unwrap();
    typist.event("done", &mut seen);
    let kept = typed_lines(&text_of(address, &ada, document), "brief-");
    assert!(kept.iter().all(|n| *n <= typed_when_closed), "{kept:?}");
}

on_both!(
    concurrent_clients_converge_and_late_clients_get_everything,
    acknowledged_updates_survive_a_restart_and_a_kill,
    a_long_journal_left_by_a_kill_reaches_a_fresh_client,
    abusive_clients_are_refused_and_the_room_keeps_serving,
    a_server_that_lost_its_lease_acknowledges_nothing,
    a_clients_edits_reach_history_credited_to_its_user,
    a_viewer_types_and_none_of_it_is_kept_or_shared,
    revocations_close_open_connections_within_a_second,
    program_writes_never_clobber_live_typing,
    client_tokens_serve_an_app_with_its_own_sign_in,
);
