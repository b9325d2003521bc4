//! Backups, restores and checks through the binary, on SQLite and on PostgreSQL: a backup taken
//! while two real y-websocket clients type restores into a new data folder or database with
//! every line acknowledged before it started, the accounts, and sealed credentials the copied
//! key still opens; what a restore refuses (a used target, a wrong passphrase, a damaged copy);
//! and `fermata check` naming the documents whose journal or checkpoint was damaged.

use crate::support;

use std::path::Path;
use std::time::Duration;

use fermata_store_sql::Database;
use serde_json::json;
use support::{
    Target, Typist, USER_PASSWORD, add_user, create_document, request, session_headers, text_of,
    typed_lines,
};

on_both!(
    a_backup_taken_while_clients_type_restores_everything_acknowledged,
    check_names_each_damaged_document,
);

/// An empty target of the same engine as `target`: a new data folder, a new database.
async fn another_like(target: &Target) -> Target {
    match target.database() {
        Database::Sqlite { .. } => Target::sqlite(),
        Database::Postgres { .. } => Target::postgres().await,
    }
}

/// Runs `fermata WORDS...` against `target`; returns the exit code and everything it printed.
fn run(target: &Target, words: &[&str]) -> (Option<i32>, String) {
    let (status, out, err) = target.run_with_input(words, "");
    (status.code(), format!("{out}{err}"))
}

/// Logs in as ada; returns the session's headers (its cookie and CSRF token).
fn log_in(address: std::net::SocketAddr) -> [(&'static str, String); 2] {
    let login = request(
        address,
        "POST",
        "/api/v1/session",
        &[],
        Some(&json!({"name": "ada", "password": USER_PASSWORD})),
    );
    assert_eq!(login.status, 200, "{}", login.body);
    let cookie = login.cookie("fermata_session").unwrap();
    let csrf = login.json()["csrf_token"].as_str().unwrap().to_owned();
    session_headers(&cookie, &csrf)
}

/// Headers as [`request`] takes them.
fn borrowed<'a>(headers: &'a [(&'static str, String); 2]) -> [(&'static str, &'a str); 2] {
    [
        (headers[0].0, headers[0].1.as_str()),
        (headers[1].0, headers[1].1.as_str()),
    ]
}

async fn a_backup_taken_while_clients_type_restores_everything_acknowledged(target: Target) {
    add_user(&target, "ada", true);
    let (status, token, err) = target.run_with_input(&["token", "create", "--user", "ada"], "");
    assert!(status.success(), "{err}");
    let token = token.trim().to_owned();
    let bearer = format!("Bearer {token}");
    let server = target.serve(&[]);
    server.wait_ready().await;
    let address = server.address().await;

    // A sealed credential: a session's connected GitHub token.
    let session = log_in(address);
    let set = request(
        address,
        "PUT",
        "/api/v1/session/credentials",
        &borrowed(&session),
        Some(&json!({"credentials": {"github_token": "ghp_backup_and_restore"}})),
    );
    assert_eq!(set.status, 200, "{}", set.body);

    let created = create_document(address, &[("Authorization", &bearer)], "ada/notes", "Typed");
    assert_eq!(created.status, 201, "{}", created.body);
    let document = created.json()["id"].as_str().unwrap().to_owned();
    let typists: Vec<Typist> = ["ada-", "bob-"]
        .iter()
        .map(|prefix| {
            Typist::spawn_typing_through(
                address,
                &document,
                &token,
                prefix,
                Duration::from_secs(6),
                support::PATIENCE,
            )
        })
        .collect();
    for typist in &typists {
        typist.event("synced", &mut Vec::new());
    }
    // Both are being stored; what is stored now was acknowledged before the backup started.
    loop {
        let text = text_of(address, &token, &document);
        if typed_lines(&text, "ada-").len() >= 5 && typed_lines(&text, "bob-").len() >= 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let acknowledged = text_of(address, &token, &document);

    let folder = tempfile::tempdir().unwrap();
    let dest = folder.path().join("nightly");
    let passphrase = folder.path().join("passphrase");
    std::fs::write(&passphrase, "a passphrase for the backups\n").unwrap();
    let (dest_arg, passphrase_arg) = (
        dest.to_str().unwrap().to_owned(),
        passphrase.to_str().unwrap().to_owned(),
    );
    let (code, out) = run(
        &target,
        &["backup", &dest_arg, "--passphrase-file", &passphrase_arg],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("backup written to"), "{out}");
    assert!(out.contains("encryption-keys.sealed"), "{out}");
    for typist in &typists {
        typist.event("done", &mut Vec::new());
    }
    let typed_after = text_of(address, &token, &document);
    server.terminate();

    // What the backup holds, and nothing half-written beside it.
    let names: Vec<String> = std::fs::read_dir(folder.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(dest.join("fermata-backup.json").exists());
    let key_copy = std::fs::read_to_string(dest.join("encryption-keys.sealed")).unwrap();
    assert!(key_copy.starts_with("# Fermata encryption key file, sealed"));
    let (code, out) = run(&target, &["backup", &dest_arg]);
    assert_eq!(code, Some(2), "a backup over an existing folder: {out}");
    assert!(out.contains("exists already"), "{out}");

    // Restored into an empty data folder or database: the sealed key wants its passphrase.
    let restored = another_like(&target).await;
    let (code, out) = run(&restored, &["restore", &dest_arg]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("sealed with a passphrase"), "{out}");
    let wrong = folder.path().join("wrong");
    std::fs::write(&wrong, "not the passphrase at all\n").unwrap();
    let (code, out) = run(
        &restored,
        &[
            "restore",
            &dest_arg,
            "--passphrase-file",
            wrong.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("the passphrase is wrong"), "{out}");
    let (code, out) = run(
        &restored,
        &["restore", &dest_arg, "--passphrase-file", &passphrase_arg],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("every one recovers"), "{out}");
    assert!(
        out.contains("stored credentials: 1 open with the restored keys, 0 do not"),
        "{out}"
    );

    // A second restore into the same target is refused: it holds data now.
    let (code, out) = run(
        &restored,
        &["restore", &dest_arg, "--passphrase-file", &passphrase_arg],
    );
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("holds data already") && out.contains("--force"),
        "{out}"
    );

    // The restored server serves the document with every acknowledged line, and the accounts.
    let server = restored.serve(&[]);
    server.wait_ready().await;
    let address = server.address().await;
    let text = text_of(address, &token, &document);
    let kept: std::collections::HashSet<&str> = text.lines().collect();
    let lost: Vec<&str> = acknowledged
        .lines()
        .filter(|line| !kept.contains(line))
        .collect();
    assert!(lost.is_empty(), "acknowledged lines lost: {lost:?}");
    assert!(
        text.lines().all(|line| typed_after.contains(line)),
        "the restored text holds lines never stored: {text:?}"
    );
    let session = log_in(address);
    let me = request(address, "GET", "/api/v1/me", &borrowed(&session), None);
    assert_eq!(me.status, 200, "{}", me.body);
    server.terminate();

    // A damaged copy is refused before anything is written.
    let damaged = another_like(&target).await;
    let copy = std::fs::read_dir(&dest)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| {
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("database.")
        })
        .unwrap();
    let bytes = std::fs::read(&copy).unwrap();
    std::fs::write(&copy, &bytes[..bytes.len() / 2]).unwrap();
    let (code, out) = run(
        &damaged,
        &["restore", &dest_arg, "--passphrase-file", &passphrase_arg],
    );
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("the backup is damaged"), "{out}");
    assert!(!damaged.data_dir().join("fermata.db").exists());
}

/// Serves `target` until `work` is done, then stops the server: gracefully (rooms take their
/// final checkpoint) or with `kill -9` (the journal alone holds what was typed).
async fn serve_and_edit(target: &Target, token: &str, title: &str, graceful: bool) -> String {
    let mut server = target.serve(&[]);
    server.wait_ready().await;
    let address = server.address().await;
    let bearer = format!("Bearer {token}");
    let created = create_document(address, &[("Authorization", &bearer)], "ada/notes", title);
    assert_eq!(created.status, 201, "{}", created.body);
    let document = created.json()["id"].as_str().unwrap().to_owned();
    for round in 0..5 {
        let answer = request(
            address,
            "PUT",
            &format!("/api/v1/documents/{document}/text"),
            &[("Authorization", &bearer)],
            Some(&json!({"text": format!("{title}, round {round}\n")})),
        );
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    if graceful {
        server.terminate();
        server.wait_exit().await;
    } else {
        server.kill();
    }
    document
}

async fn check_names_each_damaged_document(target: Target) {
    add_user(&target, "ada", false);
    let (status, token, err) = target.run_with_input(&["token", "create", "--user", "ada"], "");
    assert!(status.success(), "{err}");
    let token = token.trim().to_owned();
    // The killed server last: its lease stays held until it expires.
    let checkpointed = serve_and_edit(&target, &token, "Checkpointed", true).await;
    let healthy = serve_and_edit(&target, &token, "Healthy", true).await;
    let journaled = serve_and_edit(&target, &token, "Journaled", false).await;

    let (code, out) = run(&target, &["check"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("verified 3 documents: every one recovers"),
        "{out}"
    );

    // A checkpoint cut in half, and a journal row overwritten.
    let (half, journal) = match target.database() {
        Database::Postgres { .. } => (
            "UPDATE channel_snapshots SET state = substring(state from 1 for length(state) / 2) \
             WHERE channel_id = $1",
            "UPDATE channel_updates SET bytes = '\\x00ffffff'::bytea WHERE channel_id = $1",
        ),
        Database::Sqlite { .. } => (
            "UPDATE channel_snapshots SET state = substr(state, 1, length(state) / 2) \
             WHERE channel_id = $1",
            "UPDATE channel_updates SET bytes = x'00ffffff' WHERE channel_id = $1",
        ),
    };
    assert_eq!(
        target
            .count_rows(&format!(
                "channel_snapshots WHERE channel_id = '{checkpointed}'"
            ))
            .await,
        1,
        "the graceful stop took no checkpoint to damage"
    );
    target.execute(half, checkpointed.clone()).await;
    target.execute(journal, journaled.clone()).await;

    let (code, out) = run(&target, &["check"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("verified 3 documents: 2 damaged"), "{out}");
    for (document, slug) in [(&checkpointed, "checkpointed"), (&journaled, "journaled")] {
        let line = out
            .lines()
            .find(|line| line.contains(document.as_str()))
            .unwrap_or_else(|| panic!("{document} is not named: {out}"));
        assert!(line.contains(&format!("ada/notes/{slug}")), "{line}");
    }
    assert!(!out.contains(healthy.as_str()), "{out}");
    assert!(out.contains("2 of 3 documents are damaged"), "{out}");
}

/// On PostgreSQL the backup needs a `pg_dump` that can dump the server: one that is missing or
/// older is named with the way out, and nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_names_the_pg_dump_it_needs() {
    let target = Target::postgres().await;
    let (code, out) = run(&target, &["migrate"]);
    assert_eq!(code, Some(0), "{out}");
    let folder = tempfile::tempdir().unwrap();
    let dest = folder.path().join("backup");
    let old = folder.path().join("pg_dump");
    std::fs::write(&old, "#!/bin/sh\necho 'pg_dump (PostgreSQL) 9.6.24'\n").unwrap();
    std::fs::set_permissions(
        &old,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .unwrap();
    let missing = folder.path().join("no-such-pg_dump");
    for (tool, said) in [
        (&missing, "no pg_dump was found".to_owned()),
        (
            &old,
            format!("only {} (version 9) was found", old.display()),
        ),
    ] {
        let (code, out) = run(
            &target,
            &[
                "backup",
                dest.to_str().unwrap(),
                "--pg-dump",
                tool.to_str().unwrap(),
            ],
        );
        assert_eq!(code, Some(1), "{out}");
        assert!(out.contains(&said), "{out}");
        assert!(
            out.contains("needs pg_dump") && out.contains("--pg-dump"),
            "{out}"
        );
        let left: Vec<_> = std::fs::read_dir(folder.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 1, "a failed backup left {left:?}");
    }
}

/// A backup an earlier release took (its database lacks this release's last migration) is
/// restored and brought up to this release's schema, and verified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_of_an_earlier_schema_is_migrated_on_restore() {
    use sha2::Digest as _;
    let folder = tempfile::tempdir().unwrap();
    // The earlier release's migrations: all but the last.
    let files =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fermata-store-sql/migrations/sqlite");
    let mut names: Vec<String> = std::fs::read_dir(&files)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let last = names.pop().unwrap();
    let earlier = folder.path().join("earlier");
    std::fs::create_dir(&earlier).unwrap();
    for name in &names {
        std::fs::copy(files.join(name), earlier.join(name)).unwrap();
    }
    let backup = folder.path().join("backup");
    std::fs::create_dir(&backup).unwrap();
    let copy = backup.join("database.sqlite");
    let storage = fermata_store_sql::SqlStorage::connect(
        &Database::Sqlite { path: copy.clone() },
        fermata_store::StoreOptions::default(),
    )
    .await
    .unwrap();
    storage
        .migrate_with(
            &sqlx::migrate::Migrator::new(earlier.as_path())
                .await
                .unwrap(),
        )
        .await
        .unwrap();
    storage.close().await;
    let bytes = std::fs::read(&copy).unwrap();
    let manifest = json!({
        "format": "fermata-backup",
        "version": 1,
        "release": "fermata 0.0.9",
        "engine": "sqlite",
        "taken_at": "2026-11-01T00:00:00Z",
        "migrations": [],
        "documents": 0,
        "database": {
            "file": "database.sqlite",
            "bytes": bytes.len(),
            "sha256": hex::encode(sha2::Sha256::digest(&bytes)),
        },
        "keys": {"left_out": {"reason": "the keys came from FERMATA_KEYS"}},
        "artifacts": {"left_out": {"reason": "kept in a bucket"}},
    });
    std::fs::write(
        backup.join("fermata-backup.json"),
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();

    let target = Target::sqlite();
    let (code, out) = run(&target, &["restore", backup.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(&format!("applied migration {last}")), "{out}");
    assert!(
        out.contains("verified 0 documents: every one recovers"),
        "{out}"
    );
    let (code, out) = run(&target, &["status"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("0 pending"), "{out}");
}
