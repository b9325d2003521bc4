//! Schema operations through the real binary, against the MariaDB server the test command
//! provisions: `fermata schema inventory` with no server running (the command runs the workflow
//! itself) and with one (the server runs it), `operations` and `show` with `--json`, and the HTTP
//! API (start an inventory, a repeated request, the no-store status route, a non-administrator
//! refused). A refresh of a whole inventory into a package repository the test creates, followed
//! to its review, its diff shown, then approved; another rejected. Verifications of a package of
//! merged snapshots, one database drifted, with `verify` (and `--exit-code`), `drift` (its
//! migration scripts' summaries, `--ddl` with its flags and usage errors, and its API routes, the
//! script as text among them) and `registry` in text and JSON, and a dropped database reported
//! `missing`. The review shows each database's scripts and lint findings, and `--fail-on` fails
//! on a finding. Then a
//! source whose driver
//! errors carry the account name and the password: neither, nor the driver's text, reaches a
//! stored row, an API answer or a log line. `check-source` with a full snapshot account and a
//! narrowed one. An inventory that lists the databases `ignore_databases` left out, and a refresh
//! whose report names the object it could not capture.

use crate::support;

use crate::git_support;
use crate::mysql;

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::Executor;
use support::{
    Target, add_source, add_user, assert_absent, configure, empty_package, every_cell, request,
    session_headers,
};

const PASSWORD: &str = support::USER_PASSWORD;

/// Adds a `[schema.source]` for `user` and `password` on the test's MariaDB to the target's
/// configuration.
pub(crate) fn configure_source(target: &Target, user: &str, password: &str) {
    let admin = mysql::admin_options();
    add_source(target, admin.get_host(), admin.get_port(), user, password);
}

/// `fermata schema WORDS... --json`: the exit status, the JSON printed and standard error.
fn schema_json(target: &Target, words: &[&str]) -> (bool, Value, String) {
    let mut all = vec!["schema"];
    all.extend(words);
    all.push("--json");
    let output = target.command_words(&all).output().unwrap();
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    let err = String::from_utf8_lossy(&output.stderr).into_owned();
    let value = serde_json::from_str(&out).unwrap_or(Value::Null);
    (output.status.success(), value, format!("{out}{err}"))
}

fn names_with_prefix(view: &Value, prefix: &str) -> Vec<String> {
    view["inventory"]["databases"]
        .as_array()
        .expect("an inventory")
        .iter()
        .filter_map(Value::as_str)
        .filter(|name| name.starts_with(prefix))
        .map(str::to_owned)
        .collect()
}

/// Logs in as `name` and returns the session's cookie and CSRF token.
pub(crate) fn login(address: std::net::SocketAddr, name: &str) -> (String, String) {
    let login = request(
        address,
        "POST",
        "/api/v1/session",
        &[],
        Some(&json!({"name": name, "password": PASSWORD})),
    );
    assert_eq!(login.status, 200, "{}", login.body);
    let cookie = login.cookie("fermata_session").unwrap();
    let csrf = login.json()["csrf_token"].as_str().unwrap().to_owned();
    (cookie, csrf)
}

/// A server on `target`, its address, and the headers of `name`'s session there.
async fn serve_signed_in(
    target: &Target,
    name: &str,
) -> (
    support::Fermata,
    std::net::SocketAddr,
    [(&'static str, String); 2],
) {
    let server = target.serve(&[]);
    server.wait_ready().await;
    let address = server.address().await;
    let (cookie, csrf) = login(address, name);
    (server, address, session_headers(&cookie, &csrf))
}

/// `POST /api/v1/schema/inventory` with `request_key`, as `headers` say.
pub(crate) fn start_inventory(
    address: std::net::SocketAddr,
    headers: &[(&str, &str)],
    request_key: &str,
) -> support::Answer {
    request(
        address,
        "POST",
        "/api/v1/schema/inventory",
        headers,
        Some(&json!({ "request_key": request_key })),
    )
}

/// Polls the status route until the operation ends; returns every answer's body and the last.
pub(crate) fn poll_until_terminal(
    address: std::net::SocketAddr,
    headers: &[(&str, &str)],
    id: &str,
) -> (Vec<String>, Value) {
    let mut bodies = Vec::new();
    for _ in 0..400 {
        let answer = request(
            address,
            "GET",
            &format!("/api/v1/schema/operations/{id}"),
            headers,
            None,
        );
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert!(
            answer
                .headers
                .to_lowercase()
                .contains("cache-control: no-store"),
            "{}",
            answer.headers
        );
        bodies.push(answer.body.clone());
        let view = answer.json();
        if view["terminal"] == true {
            return (bodies, view);
        }
        // A bounded poll (400 tries) from a test thread that has no runtime to yield to.
        #[expect(
            clippy::disallowed_methods,
            reason = "a bounded poll outside any runtime"
        )]
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("operation {id} never ended");
}

#[tokio::test]
async fn inventories_run_from_the_command_line_and_the_api() {
    let mut mariadb = mysql::admin().await;
    let prefix = mysql::unique("e2e");
    let visible: Vec<String> = ["Zeta", "with space", "back`tick", "naïve"]
        .iter()
        .map(|name| format!("{prefix}{name}"))
        .collect();
    let hidden = format!("{prefix}hidden");
    for database in visible.iter().chain([&hidden]) {
        mariadb
            .execute(format!("CREATE DATABASE {}", mysql::quoted(database)).as_str())
            .await
            .unwrap();
    }
    let (user, password) = mysql::snapshot_account(&mut mariadb, &visible).await;
    let mut expected = visible.clone();
    expected.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));

    let target = Target::sqlite();
    configure_source(&target, &user, &password);
    add_user(&target, "ada", true);
    add_user(&target, "bob", false);

    // No server: the command runs the workflow itself and reports the inventory.
    let (ok, view, output) = schema_json(&target, &["inventory", "--as", "ada"]);
    assert!(ok, "{output}");
    assert_eq!(view["state"], "succeeded", "{output}");
    assert_eq!(view["kind"], "inventory");
    assert_eq!(view["actor_name"], "ada");
    assert_eq!(names_with_prefix(&view, &prefix), expected);
    let first = view["id"].as_str().unwrap().to_owned();
    let (ok, _, output) = schema_json(&target, &["inventory", "--as", "bob"]);
    assert!(!ok && output.contains("not a system_admin"), "{output}");

    let (ok, list, output) = schema_json(&target, &["operations"]);
    assert!(ok, "{output}");
    assert_eq!(list[0]["id"], first.as_str());
    let (ok, shown, output) = schema_json(&target, &["show", &first]);
    assert!(ok, "{output}");
    assert_eq!(shown["id"], first.as_str());
    let steps: Vec<_> = shown["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|step| {
            (
                step["key"].as_str().unwrap(),
                step["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            ("bind", "succeeded"),
            ("discover", "succeeded"),
            ("record", "succeeded"),
            ("finish", "succeeded")
        ]
    );

    // With a server: the API starts inventories that the server's worker runs.
    let (server, address, [c, x]) = serve_signed_in(&target, "ada").await;
    let session = [(c.0, c.1.as_str()), (x.0, x.1.as_str())];
    let started = start_inventory(address, &session, "browser-click-1");
    assert_eq!(started.status, 202, "{}", started.body);
    assert!(
        started
            .headers
            .to_lowercase()
            .contains("cache-control: no-store")
    );
    let id = started.json()["id"].as_str().unwrap().to_owned();
    let again = start_inventory(address, &session, "browser-click-1");
    assert_eq!(
        again.json()["id"],
        id.as_str(),
        "a repeated request made a new operation"
    );
    let (_, done) = poll_until_terminal(address, &session, &id);
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(names_with_prefix(&done, &prefix), expected);

    let latest = request(address, "GET", "/api/v1/schema/inventory", &session, None);
    assert_eq!(latest.status, 200);
    assert_eq!(latest.json()["operation_id"], id.as_str());
    let listed = request(address, "GET", "/api/v1/schema/operations", &session, None);
    assert!(
        listed
            .headers
            .to_lowercase()
            .contains("cache-control: no-store")
    );
    assert_eq!(listed.json().as_array().unwrap().len(), 2);
    let missing = request(
        address,
        "GET",
        "/api/v1/schema/operations/not-an-id",
        &session,
        None,
    );
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["error"]["code"], "OPERATION_MISSING");

    // A user without the role, and no one at all, are refused.
    let (bob_cookie, bob_csrf) = login(address, "bob");
    let [c, x] = session_headers(&bob_cookie, &bob_csrf);
    let bob = [(c.0, c.1.as_str()), (x.0, x.1.as_str())];
    for path in [
        "/api/v1/schema/operations",
        &format!("/api/v1/schema/operations/{id}"),
    ] {
        for (who, status) in [(&bob[..], 403), (&[][..], 401)] {
            let refused = request(address, "GET", path, who, None);
            assert_eq!(refused.status, status);
            assert!(
                refused
                    .headers
                    .to_lowercase()
                    .contains("cache-control: no-store")
            );
        }
    }
    let refused = start_inventory(address, &bob, "bob-1");
    assert_eq!(refused.status, 403);

    // The command line, while the server serves, leaves the run to the server.
    let (ok, view, output) = schema_json(&target, &["inventory", "--as", "ada"]);
    assert!(ok, "{output}");
    assert!(output.contains("the serving process runs it"), "{output}");
    assert_eq!(view["state"], "succeeded");

    // Clearing needs a fresh session: this one is fresh, but there is no lease to clear.
    let clear = request(
        address,
        "POST",
        "/api/v1/schema/lease/clear",
        &session,
        Some(&json!({"operation_id": id})),
    );
    assert_eq!(clear.status, 409, "{}", clear.body);
    assert_eq!(clear.json()["error"]["code"], "LEASE_NOT_HELD");

    drop(server);
    for database in visible.iter().chain([&hidden]) {
        mariadb
            .execute(format!("DROP DATABASE {}", mysql::quoted(database)).as_str())
            .await
            .unwrap();
    }
}

/// `fermata schema WORDS... --json` with `ada`'s password on standard input: the exit status,
/// the JSON printed and everything printed.
fn decide_json(target: &Target, words: &[&str]) -> (bool, Value, String) {
    let mut all = vec!["schema"];
    all.extend(words);
    all.extend(["--as", "ada", "--json"]);
    let (status, out, err) = target.run_with_input(&all, &format!("{PASSWORD}\n"));
    let value = serde_json::from_str(&out).unwrap_or(Value::Null);
    (status.success(), value, format!("{out}{err}"))
}

/// The `(name, state, outcome, freshness)` of every database of a report.
fn database_results(view: &Value) -> Vec<(String, String, String, String)> {
    view["databases"]
        .as_array()
        .expect("databases")
        .iter()
        .map(|database| {
            let field = |key: &str| database[key].as_str().unwrap_or_default().to_owned();
            (
                field("name"),
                field("state"),
                field("outcome"),
                field("freshness"),
            )
        })
        .collect()
}

#[tokio::test]
async fn refreshes_are_reviewed_then_approved_or_rejected_from_the_command_line() {
    let mut mariadb = mysql::admin().await;
    let prefix = mysql::unique("rf");
    let databases = [format!("{prefix}app"), format!("{prefix}crm")];
    for database in &databases {
        let quoted = mysql::quoted(database);
        for statement in [
            format!("CREATE DATABASE {quoted} CHARACTER SET utf8mb4"),
            // `price` a double: a `float-for-money` lint warning.
            format!(
                "CREATE TABLE {quoted}.orders (id int NOT NULL, note varchar(20) DEFAULT NULL, \
                 price double DEFAULT NULL, PRIMARY KEY (id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
            ),
            format!("CREATE VIEW {quoted}.recent AS SELECT id FROM {quoted}.orders"),
        ] {
            mariadb.execute(statement.as_str()).await.unwrap();
        }
    }
    let (user, password) = mysql::snapshot_account(&mut mariadb, &databases).await;

    let target = Target::sqlite();
    configure_source(&target, &user, &password);
    let repository = empty_package(&target.config().with_file_name("package"));
    configure(
        &target,
        &format!(
            "\n[schema.package]\nrepository = {}\n",
            Value::String(repository.display().to_string())
        ),
    );
    add_user(&target, "ada", true);
    let (ok, inventory, output) = schema_json(&target, &["inventory", "--as", "ada"]);
    assert!(ok, "{output}");
    let inventory_id = inventory["inventory"]["id"].as_str().unwrap().to_owned();
    assert_eq!(names_with_prefix(&inventory, &prefix), databases);

    // Neither names nor --all: refused before anything starts.
    let (ok, _, output) = schema_json(
        &target,
        &["refresh", "--inventory", &inventory_id, "--as", "ada"],
    );
    assert!(!ok && output.contains("EMPTY_SELECTION"), "{output}");

    let refresh = |key: &str| {
        schema_json(
            &target,
            &[
                "refresh",
                "--inventory",
                &inventory_id,
                "--all",
                "--as",
                "ada",
                "--request-key",
                key,
            ],
        )
    };
    let (ok, awaiting, output) = refresh("refresh-approved");
    assert!(ok, "{output}");
    assert_eq!(awaiting["state"], "awaiting_review", "{output}");
    assert_eq!(awaiting["review"]["state"], "pending", "{awaiting}");
    let expected: Vec<_> = databases
        .iter()
        .map(|name| {
            (
                name.clone(),
                "done".to_owned(),
                "changed".to_owned(),
                "fresh".to_owned(),
            )
        })
        .collect();
    assert_eq!(database_results(&awaiting), expected);
    for database in awaiting["databases"].as_array().unwrap() {
        assert_eq!(database["object_counts"]["tables"], 1, "{database}");
        assert_eq!(database["object_counts"]["views"], 1, "{database}");
        assert_eq!(
            database["snapshot_hash"].as_str().map(str::len),
            Some(64),
            "{database}"
        );
        assert!(database.get("merged_hash").is_none(), "{database}");
    }
    let id = awaiting["id"].as_str().unwrap().to_owned();

    // The review: every file is new, since nothing is merged yet.
    let output = target
        .command_words(&["schema", "review", &id, "--as", "ada"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{text}");
    for database in &databases {
        assert!(
            text.contains(&format!("database {database} (not registered)")),
            "{text}"
        );
    }
    assert!(text.contains("+++ b/tables/orders.sql"), "{text}");
    assert!(text.contains("+CREATE TABLE `orders` ("), "{text}");
    assert!(text.contains("+++ b/views/recent.sql"), "{text}");
    let (ok, review, output) = schema_json(&target, &["review", &id, "--as", "ada"]);
    assert!(ok, "{output}");
    assert_eq!(review["state"], "pending");
    for database in review["databases"].as_array().unwrap() {
        assert_eq!(database["registered"], false);
        let files = database["files"].as_array().unwrap();
        assert!(
            files.iter().all(|file| file["change"] == "added"),
            "{database}"
        );
        let paths: Vec<_> = files.iter().map(|file| file["path"].clone()).collect();
        assert!(paths.contains(&json!("tables/orders.sql")), "{paths:?}");
        // The review notes: the lint finding, and both scripts, unverified without a workspace.
        assert_eq!(database["lint"][0]["rule"], "float-for-money", "{database}");
        assert_eq!(database["lint"][0]["severity"], "warning", "{database}");
        assert_eq!(database["lint"][0]["object"], "column `orders`.`price`");
        let adopt = &database["migration"]["adopt"];
        assert_eq!(adopt["verification"]["state"], "unverified", "{adopt}");
        assert!(
            adopt["text"]
                .as_str()
                .unwrap()
                .contains("CREATE TABLE `orders`"),
            "{adopt}"
        );
        // Undo drops what the package does not have yet: destructive, left out of the text.
        let undo = &database["migration"]["undo"];
        assert!(undo["destructive"].as_u64().unwrap() >= 1, "{undo}");
        assert!(
            !undo["text"].as_str().unwrap().contains("DROP TABLE"),
            "{undo}"
        );
    }
    assert!(
        text.contains(
            "  lint: 1 finding(s)\n    warning  float-for-money  column `orders`.`price`"
        ),
        "{text}"
    );
    assert!(text.contains("  adopt: "), "{text}");

    // For CI jobs: `--fail-on` exits 1 after the review when a finding is that severe.
    let review_words = |extra: &[&str]| {
        let mut words = vec!["schema", "review", &id, "--as", "ada"];
        words.extend(extra);
        target.command_words(&words).output().unwrap()
    };
    let failing = review_words(&["--fail-on", "warning"]);
    let stdout = String::from_utf8_lossy(&failing.stdout);
    let stderr = String::from_utf8_lossy(&failing.stderr);
    assert_eq!(failing.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("float-for-money"), "{stdout}");
    assert!(
        stderr.contains("the lint findings of 2 databases hold one at warning or above"),
        "{stderr}"
    );
    let passing = review_words(&["--json", "--fail-on", "error"]);
    assert!(
        passing.status.success(),
        "{}",
        String::from_utf8_lossy(&passing.stderr)
    );
    // The adopt scripts as one file, and the usage errors.
    let scripts = review_words(&["--ddl", "--direction", "adopt", "--database", &databases[1]]);
    let file = String::from_utf8_lossy(&scripts.stdout);
    assert!(scripts.status.success(), "{file}");
    assert!(
        file.starts_with(&format!(
            "-- adopt: turns the merged snapshot of `{}` into the live schema (MariaDB).\n-- Unverified: no verification workspace is configured",
            databases[1]
        )),
        "{file}"
    );
    assert!(
        file.contains(&format!("\nUSE `{}`;\n", databases[1])),
        "{file}"
    );
    assert!(!file.contains(&databases[0]), "{file}");
    for words in [
        &["--direction", "adopt"][..],
        &["--ddl", "--json"],
        &["--fail-on", "off"],
    ] {
        let refused = review_words(words);
        assert_eq!(refused.status.code(), Some(2), "{words:?}");
    }

    // Approved from the command line, which runs the refresh to its end.
    let (ok, approved, output) = decide_json(&target, &["approve", &id]);
    assert!(ok, "{output}");
    assert_eq!(approved["state"], "succeeded", "{output}");
    assert_eq!(approved["review"]["state"], "approved");
    assert!(approved.get("lease").is_none(), "{approved}");
    // Published as the package's first pull request, from the operation's own branch.
    let head = format!("fermata/refresh-{id}");
    assert_eq!(approved["pull_request"]["number"], 1, "{approved}");
    assert_eq!(approved["pull_request"]["head"], head.as_str());
    assert_eq!(approved["pull_request"]["base"], "main");
    // Its description carries each database's adopt script, collapsed, and the findings.
    let record = std::fs::read(repository.join(".git/fermata/pulls/1.json")).unwrap();
    let record: Value = serde_json::from_slice(&record).unwrap();
    let body = record["body"].as_str().unwrap();
    for database in &databases {
        assert!(
            body.contains(&format!(
                "<details><summary>Migration of <code>{database}</code> (adopt): "
            )),
            "{body}"
        );
        assert!(
            body.contains(&format!(
                "```sql\n-- adopt: turns the merged snapshot of `{database}` into the live schema (MariaDB).\n-- Unverified: no verification workspace is configured"
            )),
            "{body}"
        );
    }
    assert!(
        body.contains(
            "unverified: no verification workspace is configured ([schema.workspace])</summary>"
        ),
        "{body}"
    );
    assert!(
        body.contains("### Lint\n\n- `")
            && body.contains("  - `warning` `float-for-money` column `orders`.`price`: "),
        "{body}"
    );
    // While it is open, another refresh is refused; a real merge lifts the block.
    let (ok, _, output) = refresh("refresh-while-open");
    assert!(!ok && output.contains("PULL_REQUEST_OPEN"), "{output}");
    let merged = std::process::Command::new("git")
        .args(["merge", "--ff-only", "--quiet", &head])
        .current_dir(&repository)
        .status()
        .unwrap();
    assert!(merged.success());
    // With nothing changed since the merge, a refresh publishes nothing.
    let (ok, unchanged, output) = refresh("refresh-unchanged");
    assert!(ok, "{output}");
    assert_eq!(unchanged["state"], "succeeded", "{output}");
    assert!(unchanged.get("pull_request").is_none(), "{unchanged}");

    // A schema change, refreshed again, and rejected.
    mariadb
        .execute(
            format!(
                "ALTER TABLE {}.orders ADD COLUMN added text",
                mysql::quoted(&databases[0])
            )
            .as_str(),
        )
        .await
        .unwrap();
    let (ok, second, output) = refresh("refresh-rejected");
    assert!(ok, "{output}");
    assert_eq!(second["state"], "awaiting_review", "{output}");
    let second_id = second["id"].as_str().unwrap().to_owned();
    // The approved review has its one decision: a different one is refused, the same one
    // answered again.
    let (ok, _, output) = decide_json(&target, &["reject", &id]);
    assert!(!ok && output.contains("REVIEW_NOT_PENDING"), "{output}");
    let (ok, again, output) = decide_json(&target, &["approve", &id]);
    assert!(ok && again["state"] == "succeeded", "{output}");
    let (ok, rejected, output) = decide_json(&target, &["reject", &second_id]);
    assert!(ok, "{output}");
    assert_eq!(rejected["state"], "rejected", "{output}");
    assert_eq!(rejected["error"]["code"], "REVIEW_REJECTED");
    assert_eq!(rejected["review"]["state"], "rejected");
    let (ok, _, output) = schema_json(&target, &["review", &second_id, "--as", "ada"]);
    assert!(!ok, "the rejected artifact is deleted: {output}");

    // Every step folder is gone, and every artifact: the approved one was deleted once it was
    // published, the rejected one once it was rejected.
    let scratch: Vec<_> = std::fs::read_dir(target.data_dir().join("tmp"))
        .unwrap()
        .collect();
    assert!(scratch.is_empty(), "{scratch:?}");
    let artifacts: Vec<_> = match std::fs::read_dir(target.data_dir().join("schema-artifacts")) {
        Ok(entries) => entries
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(error) => panic!("{error}"),
    };
    assert!(artifacts.is_empty(), "{artifacts:?}");

    drop_databases_and_account(&mut mariadb, &databases, &user).await;
}

/// Drops the test's databases and its snapshot account.
async fn drop_databases_and_account(
    mariadb: &mut sqlx::mysql::MySqlConnection,
    databases: &[String],
    user: &str,
) {
    for database in databases {
        mariadb
            .execute(format!("DROP DATABASE {}", mysql::quoted(database)).as_str())
            .await
            .unwrap();
    }
    mariadb
        .execute(format!("DROP USER '{user}'@'127.0.0.1'").as_str())
        .await
        .unwrap();
}

/// `fermata schema WORDS...` for people: the exit status and standard output.
fn schema_text(target: &Target, words: &[&str]) -> (bool, String) {
    let mut all = vec!["schema"];
    all.extend(words);
    let output = target.command_words(&all).output().unwrap();
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    let err = String::from_utf8_lossy(&output.stderr);
    (output.status.success(), format!("{out}{err}"))
}

/// The `(name, freshness, last verification's operation)` of every database of a registry view.
fn registry_entries(view: &Value) -> Vec<(String, String, Option<String>)> {
    view["databases"]
        .as_array()
        .expect("databases")
        .iter()
        .map(|database| {
            (
                database["name"].as_str().unwrap().to_owned(),
                database["freshness"].as_str().unwrap().to_owned(),
                database["last_verification"]["operation_id"]
                    .as_str()
                    .map(str::to_owned),
            )
        })
        .collect()
}

#[tokio::test]
async fn verifications_and_the_registry_from_the_command_line() {
    let mut mariadb = mysql::admin().await;
    let prefix = mysql::unique("vf");
    let [drifting, steady] = [format!("{prefix}app"), format!("{prefix}crm")];
    for database in [&drifting, &steady] {
        mysql::create_database(
            &mut mariadb,
            database,
            &[
                "CREATE TABLE orders (id int NOT NULL PRIMARY KEY, note varchar(20) NULL)",
                "CREATE VIEW recent AS SELECT id FROM orders",
            ],
        )
        .await;
    }
    let (user, password) =
        mysql::snapshot_account(&mut mariadb, &[drifting.clone(), steady.clone()]).await;
    // The package has both merged, as their current schemas.
    let package = git_support::TestRepository::new(true);
    package.commit_package(
        "main",
        &[
            mysql::take(&drifting, 1).await.unwrap(),
            mysql::take(&steady, 1).await.unwrap(),
        ],
    );

    let target = Target::sqlite();
    configure_source(&target, &user, &password);
    configure(
        &target,
        &format!(
            "\n[schema.package]\nrepository = {}\n",
            Value::String(package.path().display().to_string())
        ),
    );
    add_user(&target, "ada", true);

    // Never checked: freshness unknown.
    let (ok, registry, output) = schema_json(&target, &["registry"]);
    assert!(ok, "{output}");
    let mut expected = vec![
        (drifting.clone(), "unknown".to_owned(), None),
        (steady.clone(), "unknown".to_owned(), None),
    ];
    assert_eq!(registry_entries(&registry), expected);
    assert_eq!(
        registry["databases"][0]["merged"]["object_counts"]["tables"],
        1
    );

    let (ok, inventory, output) = schema_json(&target, &["inventory", "--as", "ada"]);
    assert!(ok, "{output}");
    let inventory_id = inventory["inventory"]["id"].as_str().unwrap().to_owned();
    let (ok, _, output) = schema_json(
        &target,
        &["verify", "--inventory", &inventory_id, "--as", "ada"],
    );
    assert!(!ok && output.contains("EMPTY_SELECTION"), "{output}");

    mariadb
        .execute(
            format!(
                "ALTER TABLE {}.orders ADD COLUMN placed date NULL",
                mysql::quoted(&drifting)
            )
            .as_str(),
        )
        .await
        .unwrap();
    let (ok, verified, output) = schema_json(
        &target,
        &[
            "verify",
            "--inventory",
            &inventory_id,
            "--all",
            "--as",
            "ada",
        ],
    );
    assert!(ok, "{output}");
    assert_eq!(verified["kind"], "verification");
    assert_eq!(verified["state"], "succeeded", "{output}");
    assert!(verified.get("lease").is_none(), "{verified}");
    let results = database_results(&verified);
    assert_eq!(
        results,
        [
            (
                drifting.clone(),
                "done".to_owned(),
                "changed".to_owned(),
                "stale".to_owned()
            ),
            (
                steady.clone(),
                "done".to_owned(),
                "unchanged".to_owned(),
                "fresh".to_owned()
            ),
        ]
    );
    assert_eq!(
        verified["databases"][0]["differences"],
        json!([
            {"path": "schema.json", "change": "modified"},
            {"path": "tables/orders.sql", "change": "modified"},
        ])
    );
    assert!(verified["databases"][1].get("differences").is_none());
    let first = verified["id"].as_str().unwrap().to_owned();

    // For people: the differing files under their database, and the registry's freshness.
    let (ok, text) = schema_text(
        &target,
        &[
            "verify",
            "--inventory",
            &inventory_id,
            &steady,
            &drifting,
            "--as",
            "ada",
        ],
    );
    assert!(ok, "{text}");
    assert!(text.contains("kind      verification"), "{text}");
    assert!(text.contains("changed/stale"), "{text}");
    assert!(text.contains("modified  tables/orders.sql"), "{text}");
    assert!(text.contains("unchanged/fresh"), "{text}");
    let (ok, registry, output) = schema_json(&target, &["registry"]);
    assert!(ok, "{output}");
    let second = registry["databases"][0]["last_verification"]["operation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(second, first, "the latest verification is listed");
    expected = vec![
        (drifting.clone(), "stale".to_owned(), Some(second.clone())),
        (steady.clone(), "fresh".to_owned(), Some(second.clone())),
    ];
    assert_eq!(registry_entries(&registry), expected);
    assert_eq!(
        registry["databases"][0]["checked"]["kind"], "verification",
        "{registry}"
    );
    let (ok, text) = schema_text(&target, &["registry"]);
    assert!(ok, "{text}");
    assert!(text.contains("2 database(s)"), "{text}");
    assert!(text.contains(&format!("{drifting}  stale")), "{text}");
    assert!(text.contains(&format!("{steady}  fresh")), "{text}");
    assert!(
        text.contains(&format!("by operation {second}: changed")),
        "{text}"
    );

    // The report keeps the differing files after the command ended.
    let (ok, shown, output) = schema_json(&target, &["show", &first]);
    assert!(ok, "{output}");
    assert_eq!(
        shown["databases"][0]["differences"],
        verified["databases"][0]["differences"]
    );

    // For CI jobs: `--exit-code` fails on drift, after the report, and passes without it.
    let verify_exit_code = |databases: &[&str]| {
        let mut words = vec!["schema", "verify", "--inventory", &inventory_id];
        words.extend(databases);
        words.extend(["--as", "ada", "--exit-code"]);
        target.command_words(&words).output().unwrap()
    };
    let drifted = verify_exit_code(&[&drifting, &steady]);
    let stdout = String::from_utf8_lossy(&drifted.stdout);
    let stderr = String::from_utf8_lossy(&drifted.stderr);
    assert_eq!(drifted.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("changed/stale"), "{stdout}");
    assert!(
        stderr.contains("1 database drifted from its merged snapshot; `fermata schema drift "),
        "{stderr}"
    );
    let steady_only = verify_exit_code(&[&steady]);
    assert!(
        steady_only.status.success(),
        "{}",
        String::from_utf8_lossy(&steady_only.stderr)
    );

    // The drift itself, on request: the unified diff of each differing file.
    let (ok, text) = schema_text(&target, &["drift", &first, "--as", "ada"]);
    assert!(ok, "{text}");
    assert!(
        text.contains(&format!("database {drifting}: 2 file(s) differ")),
        "{text}"
    );
    assert!(
        text.contains("--- a/tables/orders.sql\n+++ b/tables/orders.sql"),
        "{text}"
    );
    assert!(text.contains("\n+  `placed` date DEFAULT NULL"), "{text}");
    let (ok, drift, output) = schema_json(&target, &["drift", &first, "--as", "ada"]);
    assert!(ok, "{output}");
    assert_eq!(
        drift["databases"][0]["database"],
        json!(drifting),
        "{drift}"
    );
    assert_eq!(
        drift["databases"][0]["files"][1]["path"],
        "tables/orders.sql"
    );
    // Its scripts: undo drops the new column (destructive), adopt adds it; no workspace is
    // configured, so neither is verified.
    let undo = &drift["databases"][0]["migration"]["undo"];
    assert_eq!(
        undo["verification"],
        json!({"state": "unverified", "reason": "no verification workspace is configured ([schema.workspace])"})
    );
    assert_eq!(undo["destructive"], 1, "{undo}");
    assert!(
        undo["statements"]
            .as_array()
            .unwrap()
            .iter()
            .any(|statement| statement["destructive"].is_string()
                && statement["sql"]
                    .as_str()
                    .unwrap()
                    .contains("DROP COLUMN `placed`")),
        "{undo}"
    );
    assert!(text.contains("  undo: "), "{text}");
    assert!(
        text.contains("unverified: no verification workspace is configured ([schema.workspace]); 1 destructive left out"),
        "{text}"
    );
    // The scripts themselves, for the client: the destructive statement only when allowed.
    let ddl = |words: &[&str]| {
        let mut all = vec!["schema"];
        all.extend(words);
        let output = target.command_words(&all).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{words:?}: {stderr}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let undo = ddl(&["drift", &first, "--as", "ada", "--ddl"]);
    assert!(
        undo.starts_with(&format!(
            "-- undo: turns the live schema of `{drifting}` into the merged snapshot (MariaDB).\n-- Unverified: "
        )),
        "{undo}"
    );
    assert!(
        undo.contains("-- Left out: 1 destructive statement"),
        "{undo}"
    );
    assert!(undo.contains(&format!("\nUSE `{drifting}`;\n")), "{undo}");
    assert!(!undo.contains("DROP COLUMN"), "{undo}");
    let allowed = ddl(&[
        "drift",
        &first,
        "--as",
        "ada",
        "--ddl",
        "--allow-destructive",
    ]);
    assert!(
        allowed.contains("-- destructive: drops column `placed`"),
        "{allowed}"
    );
    assert!(allowed.contains("DROP COLUMN `placed`;\n"), "{allowed}");
    let adopt_words = [
        "drift",
        &first,
        "--as",
        "ada",
        "--ddl",
        "--direction",
        "adopt",
        "--database",
        &drifting,
    ];
    let adopt = ddl(&adopt_words);
    assert!(adopt.contains("ADD COLUMN `placed` date"), "{adopt}");
    // Refused: a database that did not drift, and the script flags without `--ddl`.
    let (ok, output) = schema_text(
        &target,
        &[
            "drift",
            &first,
            "--as",
            "ada",
            "--ddl",
            "--database",
            &steady,
        ],
    );
    assert!(
        !ok && output.contains("found no drift in a database named"),
        "{output}"
    );
    for flags in [
        &["--allow-destructive"][..],
        &["--direction", "adopt"],
        &["--database", &drifting],
    ] {
        let mut words = vec!["schema", "drift", &first, "--as", "ada"];
        words.extend(flags);
        let refused = target.command_words(&words).output().unwrap();
        assert_eq!(refused.status.code(), Some(2), "{flags:?}");
    }
    // No DDL of it is stored in the application database.
    let cells = every_cell(&target).await;
    assert!(
        !cells
            .iter()
            .any(|(_, bytes)| support::contains(bytes, b"`placed` date")),
        "a drift diff reached the application database"
    );

    // And through the API, for an administrator.
    let (server, address, [c, x]) = serve_signed_in(&target, "ada").await;
    let session = [(c.0, c.1.as_str()), (x.0, x.1.as_str())];
    let answer = request(
        address,
        "GET",
        &format!("/api/v1/schema/operations/{first}/drift"),
        &session,
        None,
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.json()["databases"], drift["databases"]);
    // One script as a file: the same text the command prints.
    let script = |query: &str| {
        request(
            address,
            "GET",
            &format!("/api/v1/schema/operations/{first}/drift/ddl{query}"),
            &session,
            None,
        )
    };
    let answer = script(&format!("?database={drifting}&direction=adopt"));
    assert_eq!(answer.status, 200, "{}", answer.body);
    let headers = answer.headers.to_lowercase();
    assert!(
        headers.contains("content-type: text/plain; charset=utf-8")
            && headers.contains("cache-control: no-store"),
        "{headers}"
    );
    assert_eq!(answer.body, adopt);
    let answer = script(&format!("?database={drifting}&allow_destructive=true"));
    assert_eq!(answer.body, allowed);
    let answer = script(&format!("?database={steady}"));
    assert_eq!(answer.status, 404, "{}", answer.body);
    assert_eq!(answer.json()["error"]["code"], "NO_MIGRATION_SCRIPT");
    let answer = script(&format!("?database={drifting}&direction=sideways"));
    assert_eq!(answer.status, 400, "{}", answer.body);
    // Stopped cleanly, so the commands below run their operations themselves.
    let mut server = server;
    server.terminate();
    server.wait_exit().await;

    // A registered database that is gone from the server is `missing`, not kept fresh.
    mariadb
        .execute(format!("DROP DATABASE {}", mysql::quoted(&steady)).as_str())
        .await
        .unwrap();
    let (ok, _, output) = schema_json(&target, &["inventory", "--as", "ada"]);
    assert!(ok, "{output}");
    let (ok, registry, output) = schema_json(&target, &["registry"]);
    assert!(ok, "{output}");
    assert_eq!(registry["databases"][1]["name"], json!(steady));
    assert_eq!(
        registry["databases"][1]["freshness"], "missing",
        "{registry}"
    );

    drop_databases_and_account(&mut mariadb, &[drifting], &user).await;
}

#[tokio::test]
async fn driver_errors_never_reach_rows_answers_or_logs() {
    let mut mariadb = mysql::admin().await;
    // An account whose name carries a marker: MariaDB repeats the name in its refusal.
    let marker = format!("leakmark{}", std::process::id());
    let (user, password) = mysql::snapshot_account_named(&mut mariadb, &marker).await;
    let wrong = format!("{password} but wrong, with 'quotes' and ; DROP TABLE x");

    let target = Target::sqlite();
    configure_source(&target, &user, &wrong);
    let mut logs = add_user(&target, "ada", true);

    let (ok, view, output) = schema_json(&target, &["inventory", "--as", "ada"]);
    logs.push_str(&output);
    assert!(!ok, "{output}");
    assert_eq!(view["state"], "failed");
    assert_eq!(view["error"]["code"], "AUTHENTICATION_FAILED");
    assert_eq!(view["error"]["stage"], "permission");
    assert_eq!(view["error"]["retryable"], false);

    let mut command = target.command("serve");
    command
        .args(["--listen", "127.0.0.1:0"])
        .env("FERMATA_LOG", "debug");
    let mut server = support::Fermata::spawn(command);
    server.wait_ready().await;
    let address = server.address().await;
    let (cookie, csrf) = login(address, "ada");
    let [c, x] = session_headers(&cookie, &csrf);
    let session = [(c.0, c.1.as_str()), (x.0, x.1.as_str())];
    let started = start_inventory(address, &session, "leak-1");
    assert_eq!(started.status, 202, "{}", started.body);
    let id = started.json()["id"].as_str().unwrap().to_owned();
    let (mut answers, done) = poll_until_terminal(address, &session, &id);
    assert_eq!(done["error"]["code"], "AUTHENTICATION_FAILED");
    answers.push(started.body);
    for path in ["/api/v1/schema/operations", "/api/v1/schema/lease"] {
        answers.push(request(address, "GET", path, &session, None).body);
    }
    server.terminate();
    server.wait_exit().await;
    logs.push_str(&server.output());
    logs.push_str(&answers.join("\n"));
    let cells = every_cell(&target).await;
    let admin = mysql::admin_options();
    let secrets = [
        ("wrong password", wrong.clone()),
        ("account name", marker.clone()),
        ("driver text", "Access denied".to_owned()),
        ("driver text", "using password".to_owned()),
        ("SQL", "SHOW DATABASES".to_owned()),
        ("SQL", "SELECT VERSION".to_owned()),
        ("connection URL", format!("mysql://{user}")),
        (
            "server address",
            format!("{}:{}", admin.get_host(), admin.get_port()),
        ),
    ];
    assert_absent(&secrets, &cells, &logs);
    mariadb
        .execute(format!("DROP USER '{user}'@'127.0.0.1'").as_str())
        .await
        .unwrap();
}

#[tokio::test]
async fn check_source_reports_what_the_snapshot_account_can_read() {
    let mut mariadb = mysql::admin().await;
    let prefix = mysql::unique("check");
    let databases = vec![format!("{prefix}a"), format!("{prefix}b")];
    for database in &databases {
        mariadb
            .execute(format!("CREATE DATABASE {}", mysql::quoted(database)).as_str())
            .await
            .unwrap();
    }
    let (full, full_password) = mysql::full_snapshot_account(&mut mariadb, &databases).await;
    let (narrow, narrow_password) = mysql::snapshot_account(&mut mariadb, &databases).await;

    // The full account: exit 0, every kind readable, in JSON and for people.
    let target = Target::sqlite();
    configure_source(&target, &full, &full_password);
    let (ok, view, output) = schema_json(&target, &["check-source"]);
    assert!(ok, "{output}");
    assert_eq!(view["complete"], true, "{output}");
    assert_eq!(view["flavor"], "mariadb");
    assert_eq!(view["databases"], json!(databases));
    let kinds: Vec<(&str, bool)> = view["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|kind| {
            (
                kind["kind"].as_str().unwrap(),
                kind["readable"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("databases", true),
            ("tables", true),
            ("views", true),
            ("sequences", true),
            ("routines", true),
            ("triggers", true),
            ("events", true),
        ]
    );
    let (ok, text) = schema_text(&target, &["check-source"]);
    assert!(ok, "{text}");
    assert!(text.contains("triggers  readable"), "{text}");
    assert!(!text.contains(&full_password), "{text}");
    // The check opens no application database.
    assert!(!target.data_dir().join("fermata.db").exists());

    // The narrowed account (no routine, trigger or event grants): exit 1 after the report,
    // which names every missing privilege and no secret.
    let target = Target::sqlite();
    configure_source(&target, &narrow, &narrow_password);
    let (ok, view, output) = schema_json(&target, &["check-source"]);
    assert!(!ok, "{output}");
    assert_eq!(view["complete"], false, "{output}");
    let missing: Vec<(String, String)> = view["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|kind| {
            let name = kind["kind"].as_str().unwrap().to_owned();
            kind["missing"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |missing| {
                    (
                        name.clone(),
                        format!(
                            "{} ON {}",
                            missing["privilege"].as_str().unwrap(),
                            missing["on"].as_str().unwrap()
                        ),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let on = |database: &str| format!("{}.*", mysql::quoted(database));
    assert_eq!(
        missing,
        [
            ("routines".to_owned(), "SELECT ON `mysql`.`proc`".to_owned()),
            (
                "triggers".to_owned(),
                format!("TRIGGER ON {}", on(&databases[0]))
            ),
            (
                "triggers".to_owned(),
                format!("TRIGGER ON {}", on(&databases[1]))
            ),
            (
                "events".to_owned(),
                format!("EVENT ON {}", on(&databases[0]))
            ),
            (
                "events".to_owned(),
                format!("EVENT ON {}", on(&databases[1]))
            ),
        ]
    );
    assert!(
        output.contains("the snapshot account lacks 5 privileges it needs"),
        "{output}"
    );
    let (ok, text) = schema_text(&target, &["check-source"]);
    assert!(!ok);
    assert!(
        text.contains(&format!(
            "events    missing EVENT ON {}, EVENT ON {}",
            on(&databases[0]),
            on(&databases[1])
        )),
        "{text}"
    );
    for secret in [&narrow_password, &full_password] {
        assert!(!output.contains(secret.as_str()) && !text.contains(secret.as_str()));
    }
    assert!(!text.contains("PASSWORD"), "{text}");

    drop_databases_and_account(&mut mariadb, &databases, &full).await;
    mariadb
        .execute(format!("DROP USER '{narrow}'@'127.0.0.1'").as_str())
        .await
        .unwrap();
}

#[tokio::test]
async fn an_inventory_shows_what_ignore_databases_left_out() {
    let mut mariadb = mysql::admin().await;
    let prefix = mysql::unique("ign");
    let kept = format!("{prefix}orders");
    let scratch = format!("{prefix}scratch_1");
    for database in [&kept, &scratch] {
        mariadb
            .execute(format!("CREATE DATABASE {}", mysql::quoted(database)).as_str())
            .await
            .unwrap();
    }
    let (user, password) =
        mysql::snapshot_account(&mut mariadb, &[kept.clone(), scratch.clone()]).await;
    let target = Target::sqlite();
    configure(
        &target,
        &format!(
            "\n[schema]\nignore_databases = [{}]\n",
            Value::String(format!("{prefix}scratch_*"))
        ),
    );
    configure_source(&target, &user, &password);
    add_user(&target, "ada", true);

    let (ok, view, output) = schema_json(&target, &["inventory", "--as", "ada"]);
    assert!(ok, "{output}");
    assert_eq!(
        names_with_prefix(&view, &prefix),
        std::slice::from_ref(&kept)
    );
    assert_eq!(
        view["inventory"]["ignored"],
        json!([scratch.clone()]),
        "{output}"
    );
    let id = view["id"].as_str().unwrap().to_owned();
    let (ok, text) = schema_text(&target, &["show", &id]);
    assert!(ok, "{text}");
    assert!(
        text.contains(&format!(
            "  ignored by ignore_databases (1):\n    {scratch}\n"
        )),
        "{text}"
    );

    drop_databases_and_account(&mut mariadb, &[kept, scratch], &user).await;
}

/// A database holding an object the snapshot cannot capture (a MERGE table) fails its refresh,
/// and the command's report names the database, the object and why, for people and in JSON.
#[tokio::test]
async fn an_unsupported_object_is_named_on_the_command_line() {
    let mut mariadb = mysql::admin().await;
    let database = mysql::unique("merge");
    let quoted = mysql::quoted(&database);
    for statement in [
        format!("CREATE DATABASE {quoted}"),
        format!("USE {quoted}"),
        format!("CREATE TABLE {quoted}.part1 (a int) ENGINE=MyISAM"),
        format!(
            "CREATE TABLE {quoted}.`merged` (a int) ENGINE=MRG_MyISAM UNION=(part1) INSERT_METHOD=LAST"
        ),
    ] {
        mariadb.execute(statement.as_str()).await.unwrap();
    }
    let (user, password) =
        mysql::snapshot_account(&mut mariadb, std::slice::from_ref(&database)).await;
    let target = Target::sqlite();
    configure_source(&target, &user, &password);
    let repository = empty_package(&target.config().with_file_name("package"));
    configure(
        &target,
        &format!(
            "\n[schema.package]\nrepository = {}\n",
            Value::String(repository.display().to_string())
        ),
    );
    add_user(&target, "ada", true);
    let (ok, inventory, output) = schema_json(&target, &["inventory", "--as", "ada"]);
    assert!(ok, "{output}");
    let inventory_id = inventory["inventory"]["id"].as_str().unwrap().to_owned();

    let (ok, report, output) = schema_json(
        &target,
        &[
            "refresh",
            "--inventory",
            &inventory_id,
            &database,
            "--as",
            "ada",
        ],
    );
    assert!(!ok, "{output}");
    let named = format!(
        "the schema of database `{database}` cannot be captured faithfully: table `merged`: \
         definition the catalog does not describe exactly"
    );
    assert_eq!(report["state"], "failed", "{output}");
    let error = &report["databases"][0]["error"];
    assert_eq!(error["code"], "UNSUPPORTED_SCHEMA_OUTPUT", "{output}");
    assert_eq!(error["message"], named.as_str(), "{output}");
    assert_eq!(error["subject"]["value"]["name"], "merged", "{output}");
    assert!(
        output.contains(&format!("fermata: {named} (UNSUPPORTED_SCHEMA_OUTPUT)")),
        "{output}"
    );
    let id = report["id"].as_str().unwrap().to_owned();
    let (_, text) = schema_text(&target, &["show", &id]);
    assert!(text.contains(&named), "{text}");

    drop_databases_and_account(&mut mariadb, std::slice::from_ref(&database), &user).await;
}
