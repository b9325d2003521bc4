//! No plaintext secret reaches the database or the logs: a scripted session of logins,
//! re-authentication, credential changes, API tokens from the page API and the command line, a
//! document's client token used where it is accepted and where it is refused, machine pairing
//! and re-authorization, a key rotation and a password change, on SQLite and on
//! PostgreSQL (where the server's connection URL holds a password); then every column of every
//! table, and everything the server printed at debug level (warnings and errors with their whole
//! cause chains), is searched for each secret.

use crate::support;

use serde_json::json;
use support::{Target, assert_absent, contains, every_cell, request, session_headers};

/// The password in the PostgreSQL server's connection URL.
const DATABASE_PASSWORD: &str = "db-password-7f3a9c1e";

async fn no_secret_reaches_the_database_or_the_logs(target: Target) {
    let password = "first password, long enough";
    let new_password = "second password, also long";
    let wrong_password = "a wrong guess of the password";
    let github = "gho_session_secret_0123456789";
    let machine_github = "gho_machine_secret_9876543210";

    let (status, out, err) = target.run_with_input(
        &[
            "user",
            "add",
            "ada",
            "--role",
            "system_admin",
            "--password-stdin",
        ],
        &format!("{password}\n"),
    );
    assert!(status.success(), "{out}{err}");
    let mut logs = format!("{out}{err}");

    let mut command = target.command("serve");
    command
        .args(["--listen", "127.0.0.1:0"])
        .env("FERMATA_LOG", "debug");
    // On PostgreSQL the server connects with a password in its URL (the test server trusts
    // loopback connections, so any password is accepted): neither reaches a log line.
    let database_url = match target.database() {
        fermata_store_sql::Database::Postgres { url } => {
            let url = url.replacen('@', &format!(":{DATABASE_PASSWORD}@"), 1);
            command.env("FERMATA_DATABASE_URL", &url);
            Some(url)
        }
        fermata_store_sql::Database::Sqlite { .. } => None,
    };
    let mut server = support::Fermata::spawn(command);
    server.wait_ready().await;
    let address = server.address().await;

    let wrong = request(
        address,
        "POST",
        "/api/v1/session",
        &[],
        Some(&json!({"name": "ada", "password": wrong_password})),
    );
    assert_eq!(wrong.status, 401);
    let login = request(
        address,
        "POST",
        "/api/v1/session",
        &[],
        Some(&json!({"name": "ada", "password": password})),
    );
    assert_eq!(login.status, 200, "{}", login.body);
    let cookie = login.cookie("fermata_session").expect("a session cookie");
    let csrf = login.json()["csrf_token"].as_str().unwrap().to_owned();
    let [c, x] = session_headers(&cookie, &csrf);
    let session = [(c.0, c.1.as_str()), (x.0, x.1.as_str())];

    let reauth = request(
        address,
        "POST",
        "/api/v1/session/reauth",
        &session,
        Some(&json!({"password": password})),
    );
    assert_eq!(reauth.status, 200, "{}", reauth.body);
    // Re-authentication gave the session a new secret and CSRF token.
    let cookie = reauth
        .cookie("fermata_session")
        .expect("a new session cookie");
    let csrf = reauth.json()["csrf_token"].as_str().unwrap().to_owned();
    let [c, x] = session_headers(&cookie, &csrf);
    let session = [(c.0, c.1.as_str()), (x.0, x.1.as_str())];
    let set = request(
        address,
        "PUT",
        "/api/v1/session/credentials",
        &session,
        Some(&json!({"credentials": {"github_token": github}})),
    );
    assert_eq!(set.status, 200, "{}", set.body);
    let token = request(
        address,
        "POST",
        "/api/v1/tokens",
        &session,
        Some(&json!({"label": "ci"})),
    );
    assert_eq!(token.status, 201, "{}", token.body);
    let api_token = token.json()["token"].as_str().unwrap().to_owned();
    let me = request(
        address,
        "GET",
        "/api/v1/me",
        &[("Authorization", &format!("Bearer {api_token}"))],
        None,
    );
    assert_eq!(me.json()["via"], "token");

    // A client token, minted and used where it is accepted and where it is refused.
    let created = request(
        address,
        "POST",
        "/api/v1/documents",
        &[("Authorization", &format!("Bearer {api_token}"))],
        Some(&json!({"repository": "ada/notes", "title": "Notes"})),
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let document = created.json()["id"].as_str().unwrap().to_owned();
    let minted = request(
        address,
        "POST",
        &format!("/api/v1/documents/{document}/client-tokens"),
        &[("Authorization", &format!("Bearer {api_token}"))],
        Some(&json!({"access": "write", "ttl": 600})),
    );
    assert_eq!(minted.status, 201, "{}", minted.body);
    let client_token = minted.json()["token"].as_str().unwrap().to_owned();
    for (method, path, status) in [
        ("GET", format!("/api/v1/documents/{document}"), 200),
        ("PUT", format!("/api/v1/documents/{document}/text"), 401),
        ("GET", "/api/v1/me".to_owned(), 401),
    ] {
        let used = request(
            address,
            method,
            &format!("{path}?token={client_token}"),
            &[],
            Some(&json!({"text": "x"})),
        );
        assert_eq!(used.status, status, "{method} {path}: {}", used.body);
    }

    let (status, cli_token, err) = target.run_with_input(&["token", "create", "--user", "ada"], "");
    assert!(status.success(), "{err}");
    let cli_token = cli_token.trim().to_owned();
    logs.push_str(&err);

    let paired = request(
        address,
        "POST",
        "/api/v1/machines",
        &session,
        Some(&json!({"name": "laptop"})),
    );
    assert_eq!(paired.status, 201, "{}", paired.body);
    let machine_id = paired.json()["id"].as_str().unwrap().to_owned();
    let first_machine_token = paired.json()["token"].as_str().unwrap().to_owned();
    let bearer = format!("Bearer {first_machine_token}");
    let set = request(
        address,
        "PUT",
        "/api/v1/machine/credentials",
        &[("Authorization", &bearer)],
        Some(&json!({"credentials": {"github_token": machine_github}})),
    );
    assert_eq!(set.status, 200, "{}", set.body);
    let renewed = request(
        address,
        "POST",
        &format!("/api/v1/machines/{machine_id}/reauthorize"),
        &session,
        None,
    );
    assert_eq!(renewed.status, 200, "{}", renewed.body);
    let machine_token = renewed.json()["token"].as_str().unwrap().to_owned();

    let (status, out, err) = target.run_with_input(&["keys", "rotate"], "");
    assert!(status.success(), "{out}{err}");
    assert!(
        out.contains("re-encrypted 1 session and 1 machine credentials"),
        "{out}"
    );
    logs.push_str(&out);
    logs.push_str(&err);
    // The running server reads the new key version from the file by itself.
    let names = request(
        address,
        "GET",
        "/api/v1/session/credentials",
        &session,
        None,
    );
    assert_eq!(
        names.json()["names"],
        json!(["github_token"]),
        "{}",
        names.body
    );
    let machine = request(
        address,
        "GET",
        "/api/v1/machine",
        &[("Authorization", &format!("Bearer {machine_token}"))],
        None,
    );
    assert_eq!(
        machine.json()["credentials"],
        json!(["github_token"]),
        "{}",
        machine.body
    );

    let (status, out, err) = target.run_with_input(
        &["user", "passwd", "ada", "--password-stdin"],
        &format!("{new_password}\n"),
    );
    assert!(status.success(), "{out}{err}");
    logs.push_str(&out);
    logs.push_str(&err);
    let second = request(
        address,
        "POST",
        "/api/v1/session",
        &[],
        Some(&json!({"name": "ada", "password": new_password})),
    );
    assert_eq!(second.status, 200, "{}", second.body);
    let second_cookie = second.cookie("fermata_session").unwrap();

    server.terminate();
    assert_eq!(server.wait_exit().await.code(), Some(0));
    logs.push_str(&server.output());

    let key_file = std::fs::read_to_string(target.data_dir().join("keys.toml")).unwrap();
    let keys: Vec<String> = key_file
        .lines()
        .filter_map(|line| line.strip_prefix("key = \""))
        .map(|rest| rest.trim_end_matches('"').to_owned())
        .collect();
    assert_eq!(keys.len(), 2, "{key_file}");

    let mut secrets = vec![
        ("password", password.to_owned()),
        ("new password", new_password.to_owned()),
        ("wrong password", wrong_password.to_owned()),
        ("session cookie", cookie),
        ("second session cookie", second_cookie),
        ("CSRF token", csrf),
        ("API token", api_token),
        ("client token", client_token),
        ("command-line API token", cli_token),
        ("first machine token", first_machine_token),
        ("machine token", machine_token),
        ("session GitHub token", github.to_owned()),
        ("machine GitHub token", machine_github.to_owned()),
    ];
    if let Some(url) = database_url {
        secrets.push(("database password", DATABASE_PASSWORD.to_owned()));
        secrets.push(("database URL", url));
    }
    for (index, key) in keys.into_iter().enumerate() {
        secrets.push((
            if index == 0 {
                "key version 1"
            } else {
                "key version 2"
            },
            key,
        ));
    }
    let cells = every_cell(&target).await;
    // The scan reads real data: the machine's name, which is not secret, is found.
    assert!(
        cells
            .iter()
            .any(|(place, cell)| place == "machines.name" && contains(cell, b"laptop"))
    );
    assert!(
        logs.contains("took the writer lease"),
        "the logs were not captured"
    );
    assert_absent(&secrets, &cells, &logs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_no_secret_reaches_the_database_or_the_logs() {
    no_secret_reaches_the_database_or_the_logs(Target::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_no_secret_reaches_the_database_or_the_logs() {
    no_secret_reaches_the_database_or_the_logs(Target::postgres().await).await;
}
