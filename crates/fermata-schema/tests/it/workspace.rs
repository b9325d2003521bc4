//! The verification workspace against the MariaDB server the test command provisions, which is
//! the source and the workspace at once (the workspace account may touch scratch schemas only):
//! the snapshot corpus rebuilds there and verifies; a foreign key to another database verifies
//! without that database once the account has `REFERENCES`; tampered candidates, and candidates whose DDL does not apply, fail with
//! the permanent `VERIFICATION_FAILED`; leftovers of killed runs are swept and young scratch
//! schemas kept; an unreachable workspace, an account without grants and a workspace of another
//! release keep their own errors. After every verification, whatever its outcome, and after a
//! cancelled one, no scratch schema is left.

use crate::support;

use std::time::{Duration, Instant};

use fermata_schema::snapshot::model::{DatabaseModel, Table};
use fermata_schema::snapshot::{DatabaseSnapshot, verify_in_workspace};
use fermata_schema::{SourceSettings, discover};
use fermata_store::schema::{DatabaseName, ErrorCode, ErrorStage, Subject};
use sqlx::mysql::MySqlConnection;
use sqlx::{Executor, Row};
use support::{
    CORPUS, admin, create_database, quoted, settings, snapshot_account, take, text, unique,
    workspace_account,
};

/// How long a condition is polled for before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

struct Setup {
    admin: MySqlConnection,
    workspace: SourceSettings,
    /// The server's `VERSION()`, as the candidates' source reports it.
    version: String,
}

async fn setup() -> Setup {
    let mut admin = admin().await;
    let (user, password) = workspace_account(&mut admin).await;
    let version = discover(&mut admin).await.unwrap().server_version;
    Setup {
        admin,
        workspace: settings(&user, &password),
        version,
    }
}

/// The scratch schemas on the server, by name.
async fn scratch_schemas(admin: &mut MySqlConnection) -> Vec<String> {
    let rows = admin
        .fetch_all(r"SHOW DATABASES LIKE 'fermata\_ws\_%'")
        .await
        .unwrap();
    let mut names: Vec<String> = rows
        .iter()
        .map(|row| String::from_utf8(row.try_get_unchecked(0).unwrap()).unwrap())
        .collect();
    names.sort();
    names
}

async fn no_scratch_schema_is_left(admin: &mut MySqlConnection) {
    assert_eq!(scratch_schemas(admin).await, Vec::<String>::new());
}

/// A new database made of `statements`, and its snapshot.
async fn candidate(admin: &mut MySqlConnection, statements: &[&str]) -> (String, DatabaseSnapshot) {
    let database = unique("ws");
    create_database(admin, &database, statements).await;
    let candidate = take(&database, 2).await.unwrap();
    (database, candidate)
}

async fn drop_database(admin: &mut MySqlConnection, database: &str) {
    admin
        .execute(format!("DROP DATABASE {}", quoted(database)).as_str())
        .await
        .unwrap();
}

/// `path` of `candidate` with `from` replaced by `to`, once.
fn edit(candidate: &mut DatabaseSnapshot, path: &str, from: &str, to: &str) {
    let content = text(&candidate.files, path);
    assert!(content.contains(from), "{path} has no {from:?}: {content}");
    candidate
        .files
        .insert(path.to_owned(), content.replacen(from, to, 1).into_bytes());
}

fn table<'a>(model: &'a mut DatabaseModel, name: &str) -> &'a mut Table {
    model
        .tables
        .iter_mut()
        .find(|table| table.name == name)
        .unwrap()
}

/// Every kind captured beyond the first corpus (spatial, system-versioned, periods, MariaDB's
/// own types, compressed columns, `DEFAULT` list partitions) rebuilds from its files: the
/// scratch schema gives back the same model and the same files, table by table.
#[tokio::test]
async fn every_captured_kind_rebuilds_in_the_workspace() {
    // The test looks at every scratch schema of the server.
    let _one = support::SCRATCH_SCHEMAS.write().await;
    let mut setup = setup().await;
    let (database, candidate) = candidate(&mut setup.admin, support::CAPTURES).await;
    assert_eq!(candidate.model.tables.len(), support::CAPTURES.len());
    verify_in_workspace(&setup.workspace, &candidate, &setup.version)
        .await
        .unwrap();
    no_scratch_schema_is_left(&mut setup.admin).await;
    drop_database(&mut setup.admin, &database).await;
}

#[tokio::test]
async fn stored_programs_created_under_ansi_quotes_rebuild_in_the_workspace() {
    // The test looks at every scratch schema of the server.
    let _one = support::SCRATCH_SCHEMAS.write().await;
    let mut setup = setup().await;
    let (database, candidate) = candidate(&mut setup.admin, support::ANSI_PROGRAMS).await;
    assert_eq!(candidate.model.routines.len(), 2);
    verify_in_workspace(&setup.workspace, &candidate, &setup.version)
        .await
        .unwrap();
    no_scratch_schema_is_left(&mut setup.admin).await;
    drop_database(&mut setup.admin, &database).await;
}

#[tokio::test]
async fn the_corpus_rebuilds_in_the_workspace_and_its_scratch_schema_is_dropped() {
    // The test looks at every scratch schema of the server.
    let _one = support::SCRATCH_SCHEMAS.write().await;
    let mut setup = setup().await;
    let (database, candidate) = candidate(&mut setup.admin, CORPUS).await;
    // The views' definer is the administrator here and the workspace account there.
    assert!(
        candidate
            .model
            .views
            .iter()
            .all(|view| view.definer.starts_with("fermata@"))
    );
    verify_in_workspace(&setup.workspace, &candidate, &setup.version)
        .await
        .unwrap();
    no_scratch_schema_is_left(&mut setup.admin).await;
    drop_database(&mut setup.admin, &database).await;
}

#[tokio::test]
async fn a_foreign_key_to_another_database_needs_references_but_not_that_database() {
    // The test looks at every scratch schema of the server.
    let _one = support::SCRATCH_SCHEMAS.write().await;
    let mut setup = setup().await;
    let other = unique("ref");
    create_database(
        &mut setup.admin,
        &other,
        &["CREATE TABLE t (id int PRIMARY KEY)"],
    )
    .await;
    let reference = format!(
        "CREATE TABLE c (id int PRIMARY KEY, o int, \
         CONSTRAINT fo FOREIGN KEY (o) REFERENCES {}.t (id))",
        quoted(&other)
    );
    let (database, candidate) = candidate(&mut setup.admin, &[reference.as_str()]).await;
    assert_eq!(
        candidate.model.tables[0].foreign_keys[0]
            .referenced_database
            .as_deref(),
        Some(other.as_str())
    );
    // The workspace has no such database.
    setup
        .admin
        .execute(
            format!(
                "SET SESSION foreign_key_checks = 0; DROP DATABASE {}",
                quoted(&other)
            )
            .as_str(),
        )
        .await
        .unwrap();
    // The server checks the REFERENCES privilege on the referenced table, existing or not.
    let error = verify_in_workspace(&setup.workspace, &candidate, &setup.version)
        .await
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::PermissionDenied);
    assert!(!error.retryable());
    no_scratch_schema_is_left(&mut setup.admin).await;
    setup
        .admin
        .execute(
            format!(
                "GRANT REFERENCES ON *.* TO '{}'@'127.0.0.1'",
                setup.workspace.user
            )
            .as_str(),
        )
        .await
        .unwrap();
    verify_in_workspace(&setup.workspace, &candidate, &setup.version)
        .await
        .unwrap();
    no_scratch_schema_is_left(&mut setup.admin).await;
    drop_database(&mut setup.admin, &database).await;
}

/// A way to make a candidate disagree with itself.
type Tamper = fn(&mut DatabaseSnapshot);

/// The corpus's candidate, changed by each case in turn, fails verification with the permanent
/// `VERIFICATION_FAILED` naming its database, and leaves no scratch schema.
async fn each_fails_verification(cases: &[(&str, Tamper)]) {
    // The test looks at every scratch schema of the server.
    let _one = support::SCRATCH_SCHEMAS.write().await;
    let mut setup = setup().await;
    let (database, candidate) = candidate(&mut setup.admin, CORPUS).await;
    for (case, tamper) in cases {
        let mut changed = candidate.clone();
        tamper(&mut changed);
        let error = verify_in_workspace(&setup.workspace, &changed, &setup.version)
            .await
            .unwrap_err();
        assert_eq!(error.code(), ErrorCode::VerificationFailed, "{case}");
        assert_eq!(error.stage(), ErrorStage::Verification, "{case}");
        assert!(!error.retryable(), "{case}");
        assert_eq!(
            error.subject(),
            Some(&Subject::Database(DatabaseName::new(&database).unwrap())),
            "{case}"
        );
        no_scratch_schema_is_left(&mut setup.admin).await;
    }
    drop_database(&mut setup.admin, &database).await;
}

#[tokio::test]
async fn a_tampered_candidate_fails_verification() {
    each_fails_verification(&[
        ("a column dropped from a table's file", |candidate| {
            edit(
                candidate,
                "tables/order.sql",
                "  `flag` tinyint(1) NOT NULL DEFAULT 1,\n",
                "",
            );
        }),
        ("another definition in a view's file", |candidate| {
            edit(candidate, "views/cheap%20orders.sql", "< 10", "< 20");
        }),
        ("the same table, spelled otherwise", |candidate| {
            edit(
                candidate,
                "tables/parent.sql",
                ") ENGINE=InnoDB",
                ")  ENGINE=InnoDB",
            );
        }),
        ("a table option the model cannot hold", |candidate| {
            edit(
                candidate,
                "tables/parent.sql",
                ") ENGINE=InnoDB",
                ") ENGINE=InnoDB MAX_ROWS=10",
            );
        }),
        ("a view's file missing", |candidate| {
            candidate.files.remove("views/^wide.sql");
        }),
        ("a table comment in the model only", |candidate| {
            table(&mut candidate.model, "parent").comment = "changed".to_owned();
        }),
    ])
    .await;
}

#[tokio::test]
async fn a_candidate_whose_ddl_does_not_apply_fails_verification() {
    each_fails_verification(&[
        ("a syntax error", |candidate| {
            edit(
                candidate,
                "tables/parent.sql",
                "CREATE TABLE",
                "CREATE TABEL",
            );
        }),
        ("two statements in one file", |candidate| {
            edit(
                candidate,
                "views/^wide.sql",
                " CHECK OPTION\n",
                " CHECK OPTION; CREATE TABLE `extra` (a int)\n",
            );
        }),
        ("a view on a view no file creates", |candidate| {
            candidate.files.insert(
                "views/lonely.sql".to_owned(),
                b"CREATE VIEW `lonely` AS SELECT * FROM `missing`\n".to_vec(),
            );
        }),
        ("a DDL file outside the known folders", |candidate| {
            candidate.files.insert(
                "indexes/extra.sql".to_owned(),
                b"CREATE INDEX i ON parent (code)\n".to_vec(),
            );
        }),
        (
            "a default collation the workspace does not have",
            |candidate| {
                candidate.model.default_collation = "utf8mb4_nonexistent_ci".to_owned();
            },
        ),
    ])
    .await;
}

#[tokio::test]
async fn leftovers_of_killed_runs_are_swept_and_young_scratch_schemas_kept() {
    // The test looks at every scratch schema of the server.
    let _one = support::SCRATCH_SCHEMAS.write().await;
    let mut setup = setup().await;
    let now: u64 = String::from_utf8(
        setup
            .admin
            .fetch_one("SELECT CAST(UNIX_TIMESTAMP() AS CHAR)")
            .await
            .unwrap()
            .try_get_unchecked(0)
            .unwrap(),
    )
    .unwrap()
    .parse()
    .unwrap();
    let random = "0123456789abcdef0123456789abcdef";
    // Killed two hours ago, with a table in it; begun a minute ago by a concurrent verification;
    // and a database that only looks like a scratch schema.
    let killed = format!("fermata_ws_{}_{random}", now - 2 * 3600);
    let concurrent = format!("fermata_ws_{}_{random}", now - 60);
    let lookalike = "fermata_ws_reports".to_owned();
    for name in [&killed, &concurrent, &lookalike] {
        setup
            .admin
            .execute(format!("CREATE DATABASE {}", quoted(name)).as_str())
            .await
            .unwrap();
    }
    setup
        .admin
        .execute(format!("CREATE TABLE {}.t (a int)", quoted(&killed)).as_str())
        .await
        .unwrap();

    let (database, candidate) = candidate(&mut setup.admin, &["CREATE TABLE t (a int)"]).await;
    verify_in_workspace(&setup.workspace, &candidate, &setup.version)
        .await
        .unwrap();
    let mut kept = vec![concurrent.clone(), lookalike.clone()];
    kept.sort();
    assert_eq!(scratch_schemas(&mut setup.admin).await, kept);

    for name in [&concurrent, &lookalike, &database] {
        drop_database(&mut setup.admin, name).await;
    }
}

#[tokio::test]
async fn a_cancelled_verification_still_drops_its_scratch_schema() {
    // The test looks at every scratch schema of the server.
    let _one = support::SCRATCH_SCHEMAS.write().await;
    let mut setup = setup().await;
    let (database, mut candidate) = candidate(&mut setup.admin, &["CREATE TABLE t (a int)"]).await;
    // Enough work that the verification is still applying files when it is cancelled.
    for index in 0..300 {
        candidate.files.insert(
            format!("tables/more{index}.sql"),
            format!("CREATE TABLE `more{index}` (a int, b varchar(10), KEY (b))\n").into_bytes(),
        );
    }
    let verification = verify_in_workspace(&setup.workspace, &candidate, &setup.version);
    let admin = &mut setup.admin;
    let started = Instant::now();
    tokio::select! {
        result = verification => panic!("the verification ended before it was cancelled: {result:?}"),
        () = async {
            while scratch_schemas(admin).await.is_empty() {
                assert!(started.elapsed() < PATIENCE, "no scratch schema appeared");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        } => {}
    }
    // The verification's future is dropped: its guard drops the scratch schema in a task.
    let cancelled = Instant::now();
    while !scratch_schemas(&mut setup.admin).await.is_empty() {
        assert!(
            cancelled.elapsed() < PATIENCE,
            "the scratch schema was left"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop_database(&mut setup.admin, &database).await;
}

#[tokio::test]
async fn workspace_problems_keep_their_own_errors() {
    // The test looks at every scratch schema of the server.
    let _one = support::SCRATCH_SCHEMAS.write().await;
    let mut setup = setup().await;
    let (database, candidate) = candidate(&mut setup.admin, &["CREATE TABLE t (a int)"]).await;

    // Nothing listens on the port.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let unreachable = SourceSettings {
        port: closed,
        ..setup.workspace.clone()
    };
    let error = verify_in_workspace(&unreachable, &candidate, &setup.version)
        .await
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::ConnectionRefused);
    assert_eq!(error.stage(), ErrorStage::Connection);
    assert!(error.retryable());

    // An account that may not create scratch schemas.
    let (user, password) = snapshot_account(&mut setup.admin, &[]).await;
    let error = verify_in_workspace(&settings(&user, &password), &candidate, &setup.version)
        .await
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::PermissionDenied);
    assert!(!error.retryable());

    // A source of another release: the workspace would print some definitions differently.
    let error = verify_in_workspace(&setup.workspace, &candidate, "8.0.36")
        .await
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidSourceConfiguration);
    assert!(!error.retryable());

    no_scratch_schema_is_left(&mut setup.admin).await;
    drop_database(&mut setup.admin, &database).await;
}
