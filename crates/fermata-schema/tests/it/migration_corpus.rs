//! The migration scripts proven on the MariaDB server the test command provisions. Every change
//! of [`CHANGES`] drifts a database of its own, built from [`BASE`] (tables with a foreign key and
//! a check, range partitions, system versioning, a spatial index, an odd name; a sequence, a view, a
//! function, a procedure, a trigger and an event) and registered in a local git package. One
//! verification, with a workspace account of its own, finds every database drifted and seals both
//! scripts of each, which the workspace must have verified: the undo script run on the live
//! schema gives the merged snapshot, and the adopt script run on the merged snapshot gives the
//! live schema, both byte for byte. Then each undo script, as `Script::text` prints it with its
//! destructive statements, is run on the live database by the `mariadb` client, the way a DBA
//! pipes it; a second verification must find every database unchanged. Destructive statements are
//! checked both ways: a change whose undo (or adopt) loses data has them, shown only when asked;
//! one that loses nothing has none.
//!
//! [`prove`] runs a corpus; [`crate::migration_corpus_demanding`] runs its own through it, each
//! of its changes given objects of its own besides its base.

use crate::support;
use crate::workflow_support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

use fermata_accounts::KeyringHandle;
use fermata_crypto::Keyring;
use fermata_forge::local::LocalGit;
use fermata_schema::artifact::ArtifactStore;
use fermata_schema::drift::DEFAULT_DRIFT_RETENTION;
use fermata_schema::migration::{Script, Statement, Verification};
use fermata_schema::package::{Package, PackageSettings};
use fermata_schema::refresh_run::DEFAULT_CONNECTIONS;
use fermata_schema::{
    DriftDiffs, EngineWorkflows, OperationReport, Operations, SourceSettings, VerificationSettings,
    VerificationWorkflow,
};
use fermata_store::schema::{OperationKind, OperationState, Outcome};
use fermata_store::{Storage, StoreOptions};
use fermata_store_sql::testing::ScratchDatabase;
use fermata_workflow::WorkerSettings;
use sqlx::Executor;
use support::{admin, admin_options, full_snapshot_account, quoted, settings, unique};
use workflow_support::{RecordedPauses, administrator, run_until};

/// What every database starts with.
const BASE: &[&str] = &[
    "CREATE TABLE customer (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, name varchar(50) NOT NULL, \
     email varchar(100) DEFAULT NULL, balance decimal(10,2) NOT NULL DEFAULT 0.00, \
     created timestamp NOT NULL DEFAULT current_timestamp(), KEY k_name (name))",
    "CREATE TABLE orders (id int NOT NULL PRIMARY KEY, customer int NOT NULL, \
     total decimal(12,2) DEFAULT NULL, note text, KEY k_customer (customer), \
     CONSTRAINT fk_customer FOREIGN KEY (customer) REFERENCES customer (id))",
    "CREATE TABLE events_log (id bigint NOT NULL PRIMARY KEY, at datetime NOT NULL, \
     payload varchar(200)) PARTITION BY RANGE (id) \
     (PARTITION p0 VALUES LESS THAN (1000), PARTITION p1 VALUES LESS THAN MAXVALUE)",
    "CREATE TABLE history (id int NOT NULL PRIMARY KEY, v int) WITH SYSTEM VERSIONING",
    "CREATE TABLE places (id int NOT NULL PRIMARY KEY, pos point NOT NULL, SPATIAL KEY sp_pos (pos))",
    "CREATE TABLE `odd name``s ü` (`col ümlaut` int NOT NULL PRIMARY KEY, `select` varchar(10))",
    "CREATE TABLE rates (id int NOT NULL PRIMARY KEY, rate int, CONSTRAINT rate_positive CHECK (rate > 0))",
    "CREATE SEQUENCE seq_orders START WITH 1 INCREMENT BY 1",
    "CREATE VIEW recent AS SELECT id, customer FROM orders WHERE id > 100",
    "CREATE FUNCTION fee(amount decimal(10,2)) RETURNS decimal(10,2) DETERMINISTIC RETURN amount * 0.1",
    "CREATE PROCEDURE touch(IN n int) BEGIN UPDATE customer SET name = name WHERE id = n; SELECT n; END",
    "CREATE TRIGGER orders_bi BEFORE INSERT ON orders FOR EACH ROW SET NEW.total = COALESCE(NEW.total, 0)",
    "CREATE EVENT cleanup ON SCHEDULE EVERY 1 DAY STARTS '2030-01-01 00:00:00' \
     DO DELETE FROM events_log WHERE id < 0",
];

/// One change: what it is, what its database holds besides the base (`given`, in the merged
/// snapshot), the statements that drift it, and whether its undo and its adopt script lose data.
pub(crate) struct Change {
    pub(crate) what: &'static str,
    pub(crate) given: &'static [&'static str],
    pub(crate) statements: &'static [&'static str],
    pub(crate) undo_destructive: bool,
    pub(crate) adopt_destructive: bool,
}

/// A change of the base alone.
const fn change(
    what: &'static str,
    statements: &'static [&'static str],
    undo_destructive: bool,
    adopt_destructive: bool,
) -> Change {
    given(what, &[], statements, undo_destructive, adopt_destructive)
}

/// A change of a database that holds `given` besides the base.
pub(crate) const fn given(
    what: &'static str,
    given: &'static [&'static str],
    statements: &'static [&'static str],
    undo_destructive: bool,
    adopt_destructive: bool,
) -> Change {
    Change {
        what,
        given,
        statements,
        undo_destructive,
        adopt_destructive,
    }
}

/// The changes, one database each.
const CHANGES: &[Change] = &[
    change(
        "column added at the end",
        &["ALTER TABLE customer ADD COLUMN phone varchar(20) NULL"],
        true,
        false,
    ),
    change(
        "column added in the middle",
        &["ALTER TABLE customer ADD COLUMN nick varchar(20) AFTER name"],
        true,
        false,
    ),
    change(
        "column added first",
        &["ALTER TABLE customer ADD COLUMN code char(2) NOT NULL DEFAULT 'xx' FIRST"],
        true,
        false,
    ),
    change(
        "column dropped",
        &["ALTER TABLE customer DROP COLUMN email"],
        false,
        true,
    ),
    change(
        "type widened",
        &["ALTER TABLE customer MODIFY name varchar(100) NOT NULL"],
        true,
        false,
    ),
    change(
        "type narrowed",
        &["ALTER TABLE customer MODIFY email varchar(40)"],
        false,
        true,
    ),
    change(
        "default changed",
        &["ALTER TABLE customer ALTER balance SET DEFAULT 1.00"],
        false,
        false,
    ),
    change(
        "made nullable",
        &["ALTER TABLE customer MODIFY name varchar(50) NULL"],
        true,
        false,
    ),
    change(
        "column moved",
        &["ALTER TABLE customer MODIFY email varchar(100) DEFAULT NULL AFTER id"],
        false,
        false,
    ),
    change(
        "column comment",
        &["ALTER TABLE customer MODIFY email varchar(100) COMMENT 'how to reach them'"],
        false,
        false,
    ),
    change(
        "column character set",
        &["ALTER TABLE customer MODIFY email varchar(100) CHARACTER SET latin1"],
        false,
        true,
    ),
    change(
        "index added",
        &["ALTER TABLE customer ADD INDEX k_email (email)"],
        false,
        false,
    ),
    change(
        "index dropped",
        &["ALTER TABLE customer DROP INDEX k_name"],
        false,
        false,
    ),
    change(
        "index columns changed",
        &["ALTER TABLE customer DROP INDEX k_name, ADD INDEX k_name (name, email)"],
        false,
        false,
    ),
    change(
        "unique key added",
        &["ALTER TABLE customer ADD UNIQUE KEY u_email (email)"],
        false,
        false,
    ),
    change(
        "prefix index added",
        &["ALTER TABLE orders ADD INDEX k_note (note(20))"],
        false,
        false,
    ),
    change(
        "index ignored",
        &["ALTER TABLE customer ALTER INDEX k_name IGNORED"],
        false,
        false,
    ),
    change(
        "primary key changed",
        &["ALTER TABLE orders DROP PRIMARY KEY, ADD PRIMARY KEY (id, customer)"],
        false,
        false,
    ),
    change(
        "foreign key action changed",
        &[
            "ALTER TABLE orders DROP FOREIGN KEY fk_customer",
            "ALTER TABLE orders ADD CONSTRAINT fk_customer FOREIGN KEY (customer) REFERENCES customer (id) ON DELETE CASCADE",
        ],
        false,
        false,
    ),
    change(
        "foreign key dropped",
        &["ALTER TABLE orders DROP FOREIGN KEY fk_customer"],
        false,
        false,
    ),
    change(
        "check added",
        &["ALTER TABLE customer ADD CONSTRAINT chk_balance CHECK (balance >= 0)"],
        false,
        false,
    ),
    change(
        "table comment",
        &["ALTER TABLE customer COMMENT 'the people who order'"],
        false,
        false,
    ),
    change(
        "engine changed",
        &["ALTER TABLE `odd name``s ü` ENGINE=MyISAM"],
        false,
        false,
    ),
    change(
        "row format",
        &["ALTER TABLE customer ROW_FORMAT=COMPACT"],
        false,
        false,
    ),
    change(
        "table default character set",
        &["ALTER TABLE `odd name``s ü` DEFAULT CHARSET=latin1 COLLATE=latin1_swedish_ci"],
        false,
        false,
    ),
    change(
        "partitioning added",
        &["ALTER TABLE `odd name``s ü` PARTITION BY HASH (`col ümlaut`) PARTITIONS 3"],
        false,
        false,
    ),
    change(
        "partitions changed",
        &[
            "ALTER TABLE events_log PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (500), \
         PARTITION p1 VALUES LESS THAN (1000), PARTITION p2 VALUES LESS THAN MAXVALUE)",
        ],
        false,
        false,
    ),
    change(
        "partitioning removed",
        &["ALTER TABLE events_log REMOVE PARTITIONING"],
        false,
        false,
    ),
    change(
        "virtual generated column",
        &["ALTER TABLE orders ADD COLUMN total_cents bigint AS (total * 100) VIRTUAL"],
        false,
        false,
    ),
    change(
        "stored generated column",
        &["ALTER TABLE customer ADD COLUMN name_upper varchar(50) AS (upper(name)) STORED"],
        false,
        false,
    ),
    change(
        "invisible column added",
        &["ALTER TABLE customer ADD COLUMN secret int INVISIBLE"],
        true,
        false,
    ),
    change(
        "column made invisible",
        &["ALTER TABLE customer MODIFY email varchar(100) DEFAULT NULL INVISIBLE"],
        false,
        false,
    ),
    change(
        "system versioning added",
        &["ALTER TABLE `odd name``s ü` ADD SYSTEM VERSIONING"],
        true,
        false,
    ),
    change(
        "system versioning dropped",
        &["ALTER TABLE history DROP SYSTEM VERSIONING"],
        false,
        true,
    ),
    change(
        "versioned table altered",
        &[
            "SET SESSION system_versioning_alter_history = KEEP",
            "ALTER TABLE history ADD COLUMN w int",
        ],
        true,
        false,
    ),
    change(
        "spatial index added",
        &["ALTER TABLE places ADD COLUMN area polygon NOT NULL, ADD SPATIAL INDEX sp_area (area)"],
        true,
        false,
    ),
    change(
        "spatial index dropped",
        &["ALTER TABLE places DROP INDEX sp_pos"],
        false,
        false,
    ),
    change(
        "table added",
        &["CREATE TABLE audit (id bigint NOT NULL PRIMARY KEY, who varchar(30), at datetime(3))"],
        true,
        false,
    ),
    change(
        "table dropped",
        &["DROP TABLE `odd name``s ü`"],
        false,
        true,
    ),
    change(
        "table renamed",
        &["RENAME TABLE places TO spots"],
        true,
        true,
    ),
    change(
        "column renamed",
        &["ALTER TABLE customer RENAME COLUMN email TO mail"],
        true,
        true,
    ),
    change(
        "odd column name",
        &["ALTER TABLE customer ADD COLUMN `weird ``col`` ; name` int"],
        true,
        false,
    ),
    change(
        "view changed",
        &["CREATE OR REPLACE VIEW recent AS SELECT id FROM orders WHERE id > 5"],
        false,
        false,
    ),
    change(
        "view on a view added",
        &["CREATE VIEW big_recent AS SELECT * FROM recent WHERE customer > 1"],
        false,
        false,
    ),
    change("view dropped", &["DROP VIEW recent"], false, false),
    change(
        "function changed",
        &[
            "CREATE OR REPLACE FUNCTION fee(amount decimal(10,2)) RETURNS decimal(10,2) DETERMINISTIC RETURN amount * 0.2",
        ],
        false,
        false,
    ),
    change("procedure dropped", &["DROP PROCEDURE touch"], false, false),
    change(
        "procedure added under its own sql_mode",
        &[
            "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_DATE'",
            "CREATE PROCEDURE `quoted proc`() SELECT id FROM customer",
        ],
        false,
        false,
    ),
    change(
        "trigger changed",
        &[
            "DROP TRIGGER orders_bi",
            "CREATE TRIGGER orders_bi BEFORE INSERT ON orders FOR EACH ROW BEGIN SET NEW.total = 1; SET NEW.note = 'n'; END",
        ],
        false,
        false,
    ),
    change(
        "trigger added before another",
        &[
            "CREATE TRIGGER orders_first BEFORE INSERT ON orders FOR EACH ROW PRECEDES orders_bi SET NEW.note = 'x'",
        ],
        false,
        false,
    ),
    change(
        "event rescheduled",
        &["ALTER EVENT cleanup ON SCHEDULE EVERY 2 DAY STARTS '2031-01-01 00:00:00'"],
        false,
        false,
    ),
    change(
        "event disabled",
        &["ALTER EVENT cleanup DISABLE"],
        false,
        false,
    ),
    change("event dropped", &["DROP EVENT cleanup"], false, false),
    change(
        "sequence changed",
        &["ALTER SEQUENCE seq_orders INCREMENT BY 5 CACHE 10"],
        false,
        false,
    ),
    change(
        "sequence dropped",
        &["DROP SEQUENCE seq_orders"],
        false,
        true,
    ),
    change(
        "database default character set",
        &["ALTER DATABASE CHARACTER SET latin1 COLLATE latin1_swedish_ci"],
        false,
        false,
    ),
    change(
        "application period",
        &[
            "ALTER TABLE customer ADD COLUMN valid_from date NOT NULL DEFAULT '2000-01-01', \
         ADD COLUMN valid_to date NOT NULL DEFAULT '2100-01-01', ADD PERIOD FOR valid (valid_from, valid_to)",
        ],
        true,
        false,
    ),
    change(
        "several changes to one table",
        &[
            "ALTER TABLE customer DROP COLUMN email, ADD COLUMN mail varchar(120) AFTER name, \
           DROP INDEX k_name, ADD INDEX k_mail (mail), \
           MODIFY balance decimal(14,2) NOT NULL DEFAULT 0.00",
        ],
        true,
        true,
    ),
    change(
        "tables added with a foreign key between them",
        &[
            "SET SESSION foreign_key_checks = 0",
            "CREATE TABLE item (id int NOT NULL PRIMARY KEY, cat int, KEY k_cat (cat), \
             CONSTRAINT fk_cat FOREIGN KEY (cat) REFERENCES cat (id))",
            "CREATE TABLE cat (id int NOT NULL PRIMARY KEY)",
        ],
        true,
        false,
    ),
    change(
        "trigger on a new table",
        &[
            "CREATE TABLE ledger (id int NOT NULL PRIMARY KEY, amount int)",
            "CREATE TRIGGER ledger_bi BEFORE INSERT ON ledger FOR EACH ROW SET NEW.amount = ABS(NEW.amount)",
        ],
        true,
        false,
    ),
    change(
        "column check",
        &[
            "ALTER TABLE customer MODIFY balance decimal(10,2) NOT NULL DEFAULT 0.00 CHECK (balance > -100)",
        ],
        false,
        false,
    ),
    change(
        "referenced column and its foreign key widened",
        &[
            "ALTER TABLE orders DROP FOREIGN KEY fk_customer",
            "ALTER TABLE customer MODIFY id bigint NOT NULL AUTO_INCREMENT",
            "ALTER TABLE orders MODIFY customer bigint NOT NULL",
            "ALTER TABLE orders ADD CONSTRAINT fk_customer FOREIGN KEY (customer) REFERENCES customer (id)",
        ],
        true,
        false,
    ),
    change(
        "column dropped with its check",
        &["ALTER TABLE rates DROP CONSTRAINT rate_positive, DROP COLUMN rate"],
        false,
        true,
    ),
];

/// Runs `text` with the `mariadb` client as the test server's administrator; the client's
/// error output when it fails.
fn run_with_client(text: &str) -> Result<(), String> {
    let url = std::env::var(support::MYSQL_URL_VAR).unwrap();
    let credentials = url
        .strip_prefix("mysql://")
        .and_then(|rest| rest.split_once('@'))
        .map(|(credentials, _)| credentials)
        .unwrap();
    let (user, password) = credentials.split_once(':').unwrap();
    let options = admin_options();
    let mut child = Command::new("mariadb")
        .args([
            "--no-defaults",
            "--protocol=TCP",
            "--batch",
            &format!("--host={}", options.get_host()),
            &format!("--port={}", options.get_port()),
            &format!("--user={user}"),
            &format!("--password={password}"),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the mariadb client runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

struct Harness {
    storage: Arc<dyn Storage>,
    artifacts: ArtifactStore,
    operations: Operations,
    worker: fermata_workflow::Worker,
    admin: fermata_schema::Administrator,
}

impl Harness {
    async fn new(source: SourceSettings, workspace: SourceSettings, package: Package) -> Harness {
        let storage: Arc<dyn Storage> = Arc::new(
            ScratchDatabase::sqlite()
                .open(StoreOptions::default())
                .await,
        );
        let admin = administrator(&*storage, "u-admin", "ada").await;
        let artifacts = ArtifactStore::new(
            Arc::new(object_store::memory::InMemory::new()),
            Arc::new(KeyringHandle::new(Keyring::generate(), None)),
        );
        let verification = VerificationWorkflow::new(
            Arc::clone(&storage),
            VerificationSettings {
                source: Some(source.clone()),
                package: Some(package),
                connections: DEFAULT_CONNECTIONS,
                filter: fermata_schema::Filter::default(),
                artifacts: artifacts.clone(),
                workspace: Some(workspace),
            },
        );
        let pauses = Arc::new(RecordedPauses::default());
        let engine = workflow_support::engine(&storage, &pauses, source, verification);
        let workflows = Arc::new(EngineWorkflows::new(engine.clone()));
        Harness {
            operations: Operations::new(Arc::clone(&storage), workflows),
            worker: engine.worker("migration-test-worker", WorkerSettings::default()),
            storage,
            artifacts,
            admin,
        }
    }

    /// Verifies `databases` to the end.
    async fn verify(&self, databases: &[&str]) -> OperationReport {
        let inventory =
            workflow_support::inventory(&self.operations, &self.worker, &self.admin).await;
        let id = workflow_support::start(
            &self.operations,
            &self.admin,
            OperationKind::Verification,
            inventory,
            databases,
        )
        .await;
        let report = run_until(
            &self.operations,
            &self.worker,
            id,
            OperationState::is_terminal,
        )
        .await;
        assert_eq!(report.operation.state, OperationState::Succeeded);
        report
    }
}

/// Whether `text` holds `statement` on lines of its own, ended by `;` or, for a stored program,
/// by the delimiter it is shown between.
fn holds(text: &str, statement: &Statement) -> bool {
    let ends = |rest: &str| {
        rest.starts_with(";\n")
            || (statement.compound
                && rest.split_once('\n').is_some_and(|(delimiter, after)| {
                    !delimiter.is_empty() && after.starts_with("DELIMITER ;\n")
                }))
    };
    text.match_indices(&format!("\n{}", statement.sql))
        .any(|(at, found)| ends(&text[at + found.len()..]))
}

fn destructive_shown_only_when_asked(script: &Script, database: &str) -> Result<(), String> {
    let (hidden, shown) = (script.text(database, false), script.text(database, true));
    for statement in &script.statements {
        let in_hidden = holds(&hidden, statement);
        let in_shown = holds(&shown, statement);
        if !in_shown || (statement.destructive.is_some() == in_hidden) {
            return Err(format!(
                "statement shown wrongly (destructive: {:?}): {}",
                statement.destructive, statement.sql
            ));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_change_gets_undo_and_adopt_scripts_that_the_server_proves() {
    prove(BASE, CHANGES).await;
}

/// Runs `statements` in `database` as the administrator, on a connection of their own so that
/// session settings stay with them; panics naming `what` when one fails.
async fn run_statements(database: &str, statements: &[&str], what: &str) {
    let mut connection = support::admin().await;
    connection
        .execute(format!("USE {}", quoted(database)).as_str())
        .await
        .unwrap();
    for statement in statements {
        connection
            .execute(*statement)
            .await
            .unwrap_or_else(|error| panic!("{what}: {error}"));
    }
}

/// Builds a database per change from `base` and the change's `given`, snapshots them all into a
/// package, drifts each with its change, and proves both scripts of each (see the module
/// documentation).
pub(crate) async fn prove(base: &[&str], changes: &[Change]) {
    let mut admin = admin().await;
    let names: Vec<String> = (0..changes.len())
        .map(|n| unique(&format!("mig{n}")))
        .collect();
    for (name, change) in names.iter().zip(changes) {
        support::create_database(&mut admin, name, base).await;
        run_statements(name, change.given, change.what).await;
    }
    let (user, password) = full_snapshot_account(&mut admin, &names).await;
    // Its scripts are verified in a workspace.
    let _scratch_schemas = support::SCRATCH_SCHEMAS.read().await;
    let (ws_user, ws_password) = support::workspace_account(&mut admin).await;
    let repository = crate::git_support::TestRepository::new(true);
    let package = Package::on(
        &PackageSettings::new(repository.path(), "main"),
        Arc::new(LocalGit::new(repository.path())),
    );
    let mut merged = Vec::new();
    for (name, change) in names.iter().zip(changes) {
        merged.push(
            support::take(name, 1)
                .await
                .unwrap_or_else(|error| panic!("{}: {error:?}", change.what)),
        );
    }
    repository.commit_package("main", &merged);
    let harness = Harness::new(
        settings(&user, &password),
        settings(&ws_user, &ws_password),
        package,
    )
    .await;

    for (name, change) in names.iter().zip(changes) {
        run_statements(name, change.statements, change.what).await;
    }
    let all: Vec<&str> = names.iter().map(String::as_str).collect();
    let report = harness.verify(&all).await;
    let drift = DriftDiffs::new(
        Arc::clone(&harness.storage),
        harness.artifacts.clone(),
        DEFAULT_DRIFT_RETENTION,
    )
    .diff(&harness.admin, report.operation.id)
    .await
    .unwrap();

    let mut failures = Vec::new();
    for (name, change) in names.iter().zip(changes) {
        let result = report
            .databases
            .iter()
            .find(|row| row.database.as_str() == name)
            .and_then(|row| row.report.as_ref());
        if result.map(|r| r.outcome) != Some(Outcome::Changed) {
            failures.push(format!("{}: not drifted: {result:?}", change.what));
            continue;
        }
        let Some(migration) = drift
            .databases
            .iter()
            .find(|database| database.database.as_str() == name)
            .and_then(|database| database.migration.clone())
        else {
            let found = drift
                .databases
                .iter()
                .any(|database| database.database.as_str() == name);
            failures.push(format!(
                "{}: no scripts (drift found: {found})",
                change.what
            ));
            continue;
        };
        for (script, destructive) in [
            (&migration.undo, change.undo_destructive),
            (&migration.adopt, change.adopt_destructive),
        ] {
            let direction = script.direction.as_str();
            if script.verification != Verification::Verified {
                failures.push(format!(
                    "{}: {direction}: {:?}\n{}",
                    change.what,
                    script.verification,
                    script.text(name, true)
                ));
            }
            if (script.destructive_count() > 0) != destructive {
                failures.push(format!(
                    "{}: {direction}: {} destructive statements, expected {}\n{}",
                    change.what,
                    script.destructive_count(),
                    if destructive { "some" } else { "none" },
                    script.text(name, true)
                ));
            }
            if let Err(error) = destructive_shown_only_when_asked(script, name) {
                failures.push(format!("{}: {direction}: {error}", change.what));
            }
        }
        if let Err(error) = run_with_client(&migration.undo.text(name, true)) {
            failures.push(format!(
                "{}: the undo script failed in the client: {error}\n{}",
                change.what,
                migration.undo.text(name, true)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));

    // Every undo script put its database back: nothing drifts any more.
    let report = harness.verify(&all).await;
    let still: Vec<&str> = names
        .iter()
        .zip(changes)
        .filter(|(name, _)| {
            let row = report
                .databases
                .iter()
                .find(|row| row.database.as_str() == *name);
            row.and_then(|row| row.report.as_ref()).map(|r| r.outcome) != Some(Outcome::Unchanged)
        })
        .map(|(_, change)| change.what)
        .collect();
    assert!(
        still.is_empty(),
        "still drifted after the undo script: {still:?}"
    );

    for name in &names {
        admin
            .execute(format!("DROP DATABASE {}", quoted(name)).as_str())
            .await
            .unwrap();
    }
}
