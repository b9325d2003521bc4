//! Interoperability with the real npm clients (`yjs` + `y-websocket` under Node.js) through
//! `fermata serve`, on SQLite and PostgreSQL: concurrent editing converges, a late client gets the
//! whole document, acknowledged updates survive a restart and `kill -9`, abusive clients are
//! refused while the room keeps serving, a server that lost its lease acknowledges nothing, and
//! a client's edits reach activity history credited to the user it connected as.

use crate::support;

use std::net::SocketAddr;

use serde_json::json;
use support::{Fermata, Target, node, node_spawn, node_wait, request};

/// A served target with an API token and one document.
struct Session {
    server: Fermata,
    address: SocketAddr,
    token: String,
    document: String,
}

fn token(target: &Target) -> String {
    let (status, out, err) = target.run_with_input(
        &["user", "add", "ada", "--password-stdin"],
        "a long enough password\n",
    );
    assert!(status.success(), "{out}{err}");
    let (status, out, err) = target.run_with_input(&["token", "create", "--user", "ada"], "");
    assert!(status.success(), "{err}");
    out.trim().to_owned()
}

async fn start(target: &Target, token: &str, title: &str) -> Session {
    let server = target.serve(&[]);
    server.wait_ready().await;
    let address = server.address().await;
    let bearer = format!("Bearer {token}");
    let created = request(
        address,
        "POST",
        "/api/v1/documents",
        &[("Authorization", &bearer)],
        Some(&json!({"repository": "ada/app", "title": title})),
    );
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

fn text_of(address: SocketAddr, token: &str, document: &str) -> String {
    let answer = request(
        address,
        "GET",
        &format!("/api/v1/documents/{document}"),
        &[("Authorization", &format!("Bearer {token}"))],
        None,
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.json()["text"].as_str().unwrap().to_owned()
}

async fn concurrent_clients_converge_and_late_clients_get_everything(target: Target) {
    let token = token(&target);
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
    let token = token(&target);
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

async fn abusive_clients_are_refused_and_the_room_keeps_serving(target: Target) {
    let token = token(&target);
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
    let token = token(&target);
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
    assert!(
        std::process::Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .unwrap()
            .success()
    );
    let store = target.store().await;
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
    assert!(
        std::process::Command::new("kill")
            .args(["-CONT", &pid])
            .status()
            .unwrap()
            .success()
    );
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

async fn a_clients_edits_reach_history_credited_to_its_user(target: Target) {
    let token = token(&target);
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

macro_rules! on_both {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Target::sqlite()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Target::postgres().await).await;
                }
            )*
        }
    };
}

on_both!(
    concurrent_clients_converge_and_late_clients_get_everything,
    acknowledged_updates_survive_a_restart_and_a_kill,
    abusive_clients_are_refused_and_the_room_keeps_serving,
    a_server_that_lost_its_lease_acknowledges_nothing,
    a_clients_edits_reach_history_credited_to_its_user,
);
