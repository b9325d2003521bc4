//! Configuration through the real binary: invalid values are refused before anything starts,
//! with a message naming the setting, and secrets never reach the output or the logs. Commands
//! other than `serve` print their own output with no log lines but warnings unless asked (`-v`,
//! `FERMATA_LOG`, `RUST_LOG`), and the read-only schema commands need no MySQL password.

use crate::support;

use std::io::Write as _;
use std::process::{Command, Output};

use serde_json::Value;
use support::{Fermata, Target, add_user, get};

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

/// Whether `text` holds a log line of `level` (`INFO`, `DEBUG`) in the text log format.
fn has_log_line(text: &str, level: &str) -> bool {
    text.lines()
        .any(|line| line.contains(&format!(" {level} ")))
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn schema_commands_print_their_own_output_without_info_log_lines_unless_asked() {
    let target = Target::sqlite();
    // The first command creates the database and applies every migration, which is logged at
    // info: a command shows none of it.
    let added = add_user(&target, "ada", true);
    assert!(!has_log_line(&added, "INFO"), "{added}");

    // Without a source the inventory's run fails at its `discover` step: the command runs the
    // workflow itself (a worker, steps, the run's end, all logged at info) and prints only its
    // own progress on standard error and the report on standard output.
    let inventory = ["schema", "inventory", "--as", "ada"];
    let output = target.command_words(&inventory).output().unwrap();
    let (out, err) = text(&output);
    assert!(!output.status.success(), "{out}{err}");
    assert!(err.contains("SOURCE_NOT_CONFIGURED"), "{err}");
    assert!(
        err.contains("discover"),
        "the step lines are missing: {err}"
    );
    assert!(out.contains("SOURCE_NOT_CONFIGURED"), "{out}");
    for level in ["INFO", "DEBUG"] {
        assert!(!has_log_line(&out, level), "{out}");
        assert!(!has_log_line(&err, level), "{err}");
    }

    // With --json, standard output is the report alone.
    let output = target
        .command_words(&["schema", "inventory", "--as", "ada", "--json"])
        .output()
        .unwrap();
    let (out, err) = text(&output);
    let report: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(report["state"], "failed", "{out}");
    assert!(!has_log_line(&err, "INFO"), "{err}");

    // -v shows the info lines, on standard error only; -vv the debug ones too.
    let output = target
        .command_words(&["schema", "inventory", "--as", "ada", "--json", "-v"])
        .output()
        .unwrap();
    let (out, err) = text(&output);
    assert!(serde_json::from_str::<Value>(&out).is_ok(), "{out}");
    assert!(has_log_line(&err, "INFO"), "{err}");
    assert!(err.contains("workflow worker started"), "{err}");
    assert!(!has_log_line(&err, "DEBUG"), "{err}");
    let output = target
        .command_words(&["-vv", "schema", "inventory", "--as", "ada", "--json"])
        .output()
        .unwrap();
    let (out, err) = text(&output);
    assert!(serde_json::from_str::<Value>(&out).is_ok(), "{out}");
    assert!(err.contains("step attempt begins"), "{err}");
    assert!(has_log_line(&err, "DEBUG"), "{err}");

    // A filter in the environment wins over the default and over -v: RUST_LOG, then
    // FERMATA_LOG first of all.
    let output = target
        .command_words(&inventory)
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    let (_, err) = text(&output);
    assert!(has_log_line(&err, "INFO"), "{err}");
    let output = target
        .command_words(&inventory)
        .arg("-v")
        .env("RUST_LOG", "info")
        .env("FERMATA_LOG", "warn")
        .output()
        .unwrap();
    let (out, err) = text(&output);
    assert!(!has_log_line(&err, "INFO"), "{err}");
    assert!(out.contains("SOURCE_NOT_CONFIGURED"), "{out}");
}

#[test]
fn read_only_schema_commands_need_no_source_password() {
    let target = Target::sqlite();
    add_user(&target, "ada", true);
    let output = target
        .command_words(&["schema", "inventory", "--as", "ada", "--json"])
        .output()
        .unwrap();
    let (out, err) = text(&output);
    let report: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let id = report["id"].as_str().unwrap().to_owned();

    // Both servers are configured, neither password can be read.
    let unset = "FERMATA_TEST_UNSET_SOURCE_PASSWORD";
    let missing = target.config().with_file_name("no-such-password");
    let mut config = std::fs::OpenOptions::new()
        .append(true)
        .open(target.config())
        .unwrap();
    write!(
        config,
        "\n[schema.source]\nhost = \"db.internal\"\nuser = \"snapshot\"\npassword_env = \"{unset}\"\n\
         \n[schema.workspace]\nhost = \"scratch.internal\"\nuser = \"verifier\"\npassword_file = \"{}\"\n",
        missing.display()
    )
    .unwrap();
    drop(config);
    let run = |words: &[&str]| {
        let output = target
            .command_words(words)
            .env_remove(unset)
            .output()
            .unwrap();
        let (out, err) = text(&output);
        (output.status.code(), out, err)
    };

    let (code, out, err) = run(&["schema", "operations", "--json"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed[0]["id"], id.as_str(), "{out}");
    let (code, out, err) = run(&["schema", "operations"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains(&id), "{out}");
    let (code, out, err) = run(&["schema", "show", &id, "--json"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["id"], id.as_str(), "{out}");
    let (code, out, err) = run(&["schema", "show", &id]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains(&id), "{out}");

    // A command that may connect still needs the password, and says which setting lacks it.
    let (code, out, err) = run(&["schema", "inventory", "--as", "ada"]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(
        err.contains("invalid setting `schema.source.password_env`"),
        "{err}"
    );

    // The tables are still checked as written.
    let mut config = std::fs::OpenOptions::new()
        .append(true)
        .open(target.config())
        .unwrap();
    writeln!(config, "tls = \"sometimes\"").unwrap();
    drop(config);
    let (code, out, err) = run(&["schema", "operations"]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(
        err.contains("invalid setting `schema.workspace.tls`"),
        "{err}"
    );
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
