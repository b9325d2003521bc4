//! Configuration through the real binary: invalid values are refused before anything starts,
//! with a message naming the setting, and secrets never reach the output or the logs.

use crate::support;

use std::process::Command;

use support::{Fermata, Target, get};

/// `fermata serve` with a fresh data folder, the given environment and arguments.
fn serve_with(env: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String, tempfile::TempDir) {
    let folder = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_fermata"));
    command
        .arg("serve")
        .arg("--data-dir")
        .arg(folder.path().join("data"))
        .args(args)
        .env_remove("FERMATA_DATABASE_URL")
        .env_remove("FERMATA_STORAGE")
        .env_remove("FERMATA_LISTEN")
        .env_remove("HANDOVER")
        .envs(env.iter().copied());
    let output = command.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), text, folder)
}

/// Environment, arguments, and what the refusal must say.
type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str], &'a str);

#[test]
fn invalid_values_are_refused_before_anything_starts() {
    let cases: &[Case<'_>] = &[
        (
            &[("FERMATA_LISTEN", "nowhere")],
            &[],
            "invalid setting `listen` (from FERMATA_LISTEN)",
        ),
        (
            &[],
            &["--listen", "127.0.0.1:99999"],
            "invalid setting `listen` (from --listen)",
        ),
        (
            &[("FERMATA_STORAGE", "mysql")],
            &[],
            "invalid setting `storage` (from FERMATA_STORAGE)",
        ),
        (&[], &["--storage", "memory"], "`memory` is for tests only"),
        (
            &[],
            &["--storage", "postgres"],
            "invalid setting `database_url`",
        ),
        (
            &[("HANDOVER", "later")],
            &[],
            "invalid setting `handover` (from HANDOVER)",
        ),
        (
            &[],
            &["--handover", "later"],
            "invalid setting `handover` (from --handover)",
        ),
        (
            &[("FERMATA_LOG_FORMAT", "xml")],
            &[],
            "invalid setting `log_format`",
        ),
    ];
    for (env, args, expected) in cases {
        let (code, output, folder) = serve_with(env, args);
        assert_eq!(code, Some(2), "{env:?} {args:?}: {output}");
        assert!(output.contains(expected), "{env:?} {args:?}: {output}");
        assert!(
            !folder.path().join("data").exists(),
            "{env:?} {args:?}: the data folder was created before the settings were checked"
        );
    }
}

#[test]
fn a_bad_config_file_is_refused_by_line_without_echoing_it() {
    let folder = tempfile::tempdir().unwrap();
    let config = folder.path().join("fermata.toml");
    std::fs::write(
        &config,
        "storage = \"postgres\"\ndatabase_url = \"postgres://admin:hunter2@db/app\nlisten = 1\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let (code, output, _) = serve_with(&[], &["--config", config]);
    assert_eq!(code, Some(2), "{output}");
    assert!(
        output.contains("is not a valid configuration file at line 2"),
        "{output}"
    );
    assert!(!output.contains("hunter2"), "{output}");

    std::fs::write(
        folder.path().join("fermata.toml"),
        "[writer_lease]\nttl = \"10s\"\n",
    )
    .unwrap();
    let (code, output, _) = serve_with(&[], &["--config", config]);
    assert_eq!(code, Some(2), "{output}");
    assert!(
        output.contains("invalid setting `writer_lease.ttl`"),
        "{output}"
    );
}

#[test]
fn a_bad_schema_source_is_refused_at_start_without_its_password() {
    let folder = tempfile::tempdir().unwrap();
    let config = folder.path().join("fermata.toml");
    std::fs::write(
        &config,
        "[schema.source]\nhost = \"db.internal\"\nuser = \"snapshot\"\npassword_env = \"SNAPSHOT_PASSWORD\"\ntls = \"verify_identity\"\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let (code, output, data) = serve_with(
        &[("SNAPSHOT_PASSWORD", "hunter2-mysql")],
        &["--config", config],
    );
    assert_eq!(code, Some(2), "{output}");
    assert!(
        output.contains("invalid setting `schema.source`"),
        "{output}"
    );
    assert!(output.contains("ca_file"), "{output}");
    assert!(!output.contains("hunter2"), "{output}");
    assert!(!data.path().join("data").exists());

    std::fs::write(
        folder.path().join("fermata.toml"),
        "[schema.source]\nhost = \"db.internal\"\nuser = \"snapshot\"\npassword = \"hunter2-inline\"\n",
    )
    .unwrap();
    let (code, output, _) = serve_with(&[], &["--config", config]);
    assert_eq!(code, Some(2), "{output}");
    assert!(!output.contains("hunter2"), "{output}");
}

#[test]
fn an_unreachable_database_fails_without_showing_its_url() {
    let url = "postgres://fermata:s3cret-pass@127.0.0.1:1/app";
    let (code, output, _) = serve_with(
        &[("FERMATA_DATABASE_URL", url), ("FERMATA_LOG", "debug")],
        &["--storage", "postgres"],
    );
    assert_eq!(code, Some(1), "{output}");
    assert!(
        output.contains("cannot open the application database"),
        "{output}"
    );
    assert!(!output.contains("s3cret-pass"), "{output}");

    let help = Command::new(env!("CARGO_BIN_EXE_fermata"))
        .args(["serve", "--help"])
        .env("FERMATA_DATABASE_URL", url)
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("FERMATA_DATABASE_URL"), "{help}");
    assert!(!help.contains("s3cret-pass"), "{help}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_session_never_logs_the_database_password() {
    // The throwaway server trusts loopback connections, so any password is accepted: the URL
    // carries one anyway, and it must appear nowhere in what the process prints.
    let target = Target::postgres().await;
    let fermata_store_sql::Database::Postgres { url } = target.database() else {
        unreachable!("a PostgreSQL target");
    };
    let secret = "pw-7f3a9c-never-shown";
    let with_password = url.replacen(
        "postgres://postgres@",
        &format!("postgres://postgres:{secret}@"),
        1,
    );
    assert_ne!(&with_password, url);

    let mut command = target.command("serve");
    command
        .args(["--listen", "127.0.0.1:0"])
        .env("FERMATA_DATABASE_URL", &with_password)
        .env("FERMATA_LOG", "trace");
    let mut server = Fermata::spawn(command);
    server.wait_ready().await;
    let address = server.address().await;
    let (status, metrics) = get(address, "/metrics").expect("metrics answer");
    assert_eq!(status, 200);
    assert!(metrics.contains("fermata_writer_lease_held 1"), "{metrics}");
    server.terminate();
    assert_eq!(server.wait_exit().await.code(), Some(0));
    let output = server.output();
    assert!(output.contains("released the writer lease"), "{output}");
    assert!(
        !output.contains(secret),
        "the password was printed:\n{output}"
    );
    assert!(!metrics.contains(secret));
}

#[test]
fn keys_from_the_environment_are_used_and_never_written_or_printed() {
    let key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="; // 32 bytes, base64
    let folder = tempfile::tempdir().unwrap();
    let data = folder.path().join("data");
    let run = |words: &[&str], keys: &str| {
        let output = Command::new(env!("CARGO_BIN_EXE_fermata"))
            .args(words)
            .arg("--data-dir")
            .arg(&data)
            .env("FERMATA_KEYS", keys)
            .env_remove("FERMATA_KEYS_FILE")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.code(), text)
    };

    let (code, output) = run(&["keys", "reencrypt"], &format!("1:{key}"));
    assert_eq!(code, Some(0), "{output}");
    assert!(output.contains("under key version 1"), "{output}");
    let (code, output) = run(&["keys", "rotate"], &format!("1:{key}"));
    assert_eq!(code, Some(2), "{output}");
    assert!(
        output.contains("add a new VERSION:KEY entry there"),
        "{output}"
    );
    assert!(
        !data.join("keys.toml").exists(),
        "a key file was written despite FERMATA_KEYS"
    );

    let (code, output) = run(&["keys", "reencrypt"], "1:not-a-key");
    assert_eq!(code, Some(2), "{output}");
    assert!(
        output.contains("invalid setting `FERMATA_KEYS`"),
        "{output}"
    );
    assert!(!output.contains("not-a-key"), "{output}");
    let (_, output) = run(&["keys", "reencrypt"], &format!("1:{key}"));
    assert!(!output.contains(key), "a key was printed: {output}");
}

#[test]
fn a_key_file_others_can_read_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let folder = tempfile::tempdir().unwrap();
    let data = folder.path().join("data");
    let keys = folder.path().join("keys.toml");
    std::fs::write(
        &keys,
        "[[key]]\nversion = 1\nkey = \"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o644)).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_fermata"))
        .args(["keys", "reencrypt", "--data-dir"])
        .arg(&data)
        .arg("--keys-file")
        .arg(&keys)
        .env_remove("FERMATA_KEYS")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("can be read by others (mode 644)"), "{text}");
    assert!(!text.contains("MDEyMzQ1"), "{text}");
}

/// A bad `[schema]` filter pattern stops a schema command before it connects anywhere, naming
/// the setting and the file it came from.
#[test]
fn a_bad_filter_pattern_is_refused_naming_its_setting() {
    let folder = tempfile::tempdir().unwrap();
    let config = folder.path().join("fermata.toml");
    for (text, setting) in [
        (
            "[schema]\nignore_tables = [\"_*_gho\", \"\"]\n",
            "schema.ignore_tables",
        ),
        (
            "[schema]\nignore_databases = [\"\"]\n",
            "schema.ignore_databases",
        ),
    ] {
        std::fs::write(&config, text).unwrap();
        let output = Command::new(env!("CARGO_BIN_EXE_fermata"))
            .args(["schema", "check-source", "--config"])
            .arg(&config)
            .arg("--data-dir")
            .arg(folder.path().join("data"))
            .env_remove("FERMATA_DATABASE_URL")
            .env_remove("FERMATA_STORAGE")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(output.status.code(), Some(2), "{text}");
        assert!(
            text.contains(&format!("invalid setting `{setting}`")),
            "{text}"
        );
        assert!(text.contains("fermata.toml"), "{text}");
    }
    assert!(!folder.path().join("data").exists());
}
