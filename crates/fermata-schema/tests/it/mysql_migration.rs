//! The MySQL spelling of migration scripts, checked against MySQL's own recorded outputs (the
//! `SHOW CREATE TABLE` recordings of `fixtures/mysql/show_create/`, see `mysql_fixtures.rs`). For
//! each recorded table, built into its model as the catalog reader builds it:
//!
//! - created from nothing, the script's `CREATE TABLE` is the recording;
//! - each column added to the table without it is `ADD COLUMN` with the recording's line for that
//!   column (MySQL's `int`, `DEFAULT (expr)`, `/*!80003 SRID n */`, `/*!80023 INVISIBLE */`),
//!   with the character set and collation spelled out as MySQL prints them for a column whose
//!   collation is not the table's; taken away, it is a destructive `DROP COLUMN`;
//! - each key added is `ADD` with the recording's key line (`/*!80000 INVISIBLE */` kept), and
//!   taken away `DROP INDEX` or `DROP PRIMARY KEY`; a key made invisible alone is `ALTER INDEX
//!   ... INVISIBLE`, as `mysql-test/r/invisible_indexes.result` runs it;
//! - each check added is `ADD` with the recording's constraint line (`/*!80016 NOT ENFORCED */`
//!   kept), and taken away MySQL's `DROP CHECK`, as `mysql-test/r/check_constraints.result`
//!   runs it (`ALTER TABLE t1 DROP CHECK ...` at commit
//!   018fcd505e485c10a0510043536950e3ed11d6e7; MariaDB's `DROP CONSTRAINT` is the other
//!   spelling);
//! - partitioning added is `ALTER TABLE` with the recording's `/*!50100 PARTITION BY ... */` (or
//!   `/*!50500`) clause, and taken away `REMOVE PARTITIONING`.

use fermata_schema::migration::{Direction, Script, plan};
use fermata_schema::snapshot::model::{DatabaseModel, Flavor, IndexKind, Table};
use fermata_schema::snapshot::normalize;

use crate::mysql_fixtures::{Fixture, fixtures, model};

fn database(tables: Vec<Table>) -> DatabaseModel {
    DatabaseModel {
        name: "test".to_owned(),
        flavor: Flavor::Mysql,
        default_charset: "utf8mb4".to_owned(),
        default_collation: "utf8mb4_0900_ai_ci".to_owned(),
        tables,
        views: Vec::new(),
        sequences: Vec::new(),
        routines: Vec::new(),
        triggers: Vec::new(),
        events: Vec::new(),
    }
}

/// The script's statements, without the session's `SET`s.
fn statements(script: &Script) -> Vec<&str> {
    script
        .statements
        .iter()
        .map(|statement| statement.sql.as_str())
        .filter(|sql| !sql.starts_with("SET "))
        .collect()
}

/// Each recorded table with its recording (as normalization documents it).
fn recorded_tables() -> Vec<(Fixture, Table, String)> {
    fixtures()
        .into_iter()
        .filter_map(|fixture| {
            let recorded = fixture.text("show create table")?;
            let mut table = model(&fixture);
            normalize::table_facts(&recorded, &mut table, Flavor::Mysql).unwrap();
            let expected = fixture.text("canonical").unwrap_or(recorded);
            Some((fixture, table, expected))
        })
        .collect()
}

/// The recording's line that starts with `head` (trimmed, without its comma).
fn line<'a>(recording: &'a str, head: &str) -> &'a str {
    recording
        .lines()
        .map(|line| line.trim().trim_end_matches(','))
        .find(|line| line.starts_with(head))
        .unwrap_or_else(|| panic!("no line {head} in\n{recording}"))
}

fn adopt(from: &Table, to: &Table) -> Script {
    plan(
        &database(vec![from.clone()]),
        &database(vec![to.clone()]),
        Direction::Adopt,
    )
}

#[test]
fn created_tables_are_the_recordings() {
    for (fixture, table, expected) in recorded_tables() {
        let script = plan(
            &database(Vec::new()),
            &database(vec![table]),
            Direction::Adopt,
        );
        assert_eq!(statements(&script), [expected.as_str()], "{}", fixture.name);
        assert_eq!(script.destructive_count(), 0);
    }
}

#[test]
fn columns_are_added_with_the_recorded_lines_and_dropped_destructively() {
    let mut columns = 0;
    for (fixture, table, expected) in recorded_tables() {
        for (index, column) in table.columns.iter().enumerate() {
            let mut without = table.clone();
            without.columns.remove(index);
            // A key or check on the column goes with it.
            without
                .indexes
                .retain(|key| key.parts.iter().all(|part| part.column != column.name));
            let quoted = format!("`{}`", column.name);
            let mut recorded = line(&expected, &format!("{quoted} ")).to_owned();
            if let (Some(charset), Some(collation)) = (&column.charset, &column.collation)
                && !recorded.contains(" COLLATE ")
            {
                let head = format!("{quoted} {}", column.column_type);
                recorded = recorded.replacen(
                    &head,
                    &format!("{head} CHARACTER SET {charset} COLLATE {collation}"),
                    1,
                );
            }
            let place = match index {
                0 => " FIRST".to_owned(),
                _ => format!(" AFTER `{}`", table.columns[index - 1].name),
            };
            let script = adopt(&without, &table);
            let wanted = format!("ADD COLUMN {recorded}{place}");
            assert!(
                statements(&script).iter().any(|sql| sql.contains(&wanted)),
                "{}: {wanted}\n{:#?}",
                fixture.name,
                statements(&script)
            );
            let back = adopt(&table, &without);
            let dropped = format!("DROP COLUMN {quoted}");
            let statement = back
                .statements
                .iter()
                .find(|statement| statement.sql.contains(&dropped))
                .unwrap_or_else(|| panic!("{}: {dropped}", fixture.name));
            assert_eq!(
                statement.destructive.is_some(),
                column.generated.is_none(),
                "{}: {dropped}",
                fixture.name
            );
            columns += 1;
        }
    }
    assert!(columns >= 30, "{columns}");
}

#[test]
fn keys_checks_and_partitions_use_mysqls_recorded_spelling() {
    let (mut keys, mut checks, mut partitioned, mut invisible) = (0, 0, 0, 0);
    for (fixture, table, expected) in recorded_tables() {
        let name = &fixture.name;
        for (index, key) in table.indexes.iter().enumerate() {
            let mut without = table.clone();
            without.indexes.remove(index);
            let head = match key.kind {
                IndexKind::Primary => "PRIMARY KEY ".to_owned(),
                _ => format!("{} `{}` ", key_word(key.kind), key.name),
            };
            let wanted = format!("ADD {}", line(&expected, &head));
            let script = adopt(&without, &table);
            assert!(
                statements(&script).iter().any(|sql| sql.contains(&wanted)),
                "{name}: {wanted}\n{:#?}",
                statements(&script)
            );
            let dropped = match key.kind {
                IndexKind::Primary => "DROP PRIMARY KEY".to_owned(),
                _ => format!("DROP INDEX `{}`", key.name),
            };
            let back = adopt(&table, &without);
            assert!(
                statements(&back).iter().any(|sql| sql.contains(&dropped)),
                "{name}: {dropped}"
            );
            if key.invisible {
                let mut visible = table.clone();
                visible.indexes[index].invisible = false;
                assert_eq!(
                    statements(&adopt(&visible, &table)),
                    [format!(
                        "ALTER TABLE `{}`\n  ALTER INDEX `{}` INVISIBLE",
                        table.name, key.name
                    )],
                    "{name}"
                );
                invisible += 1;
            }
            keys += 1;
        }
        for (index, check) in table.checks.iter().enumerate() {
            let mut without = table.clone();
            without.checks.remove(index);
            let wanted = format!(
                "ADD {}",
                line(&expected, &format!("CONSTRAINT `{}` CHECK", check.name))
            );
            assert!(
                statements(&adopt(&without, &table))
                    .iter()
                    .any(|sql| sql.contains(&wanted)),
                "{name}: {wanted}"
            );
            let dropped = format!("DROP CHECK `{}`", check.name);
            assert!(
                statements(&adopt(&table, &without))
                    .iter()
                    .any(|sql| sql.contains(&dropped)),
                "{name}: {dropped}"
            );
            checks += 1;
        }
        if table.partitioning.is_some() {
            let without = Table {
                partitioning: None,
                ..table.clone()
            };
            let clause = &expected[expected.find("\n/*!50").unwrap()..];
            assert_eq!(
                statements(&adopt(&without, &table)),
                [format!("ALTER TABLE `{}`{clause}", table.name)],
                "{name}"
            );
            assert_eq!(
                statements(&adopt(&table, &without)),
                [format!(
                    "ALTER TABLE `{}`\n  REMOVE PARTITIONING",
                    table.name
                )],
                "{name}"
            );
            partitioned += 1;
        }
    }
    assert!(keys >= 10 && checks >= 2 && partitioned >= 2 && invisible >= 1);
}

fn key_word(kind: IndexKind) -> &'static str {
    match kind {
        IndexKind::Primary => "PRIMARY KEY",
        IndexKind::Unique => "UNIQUE KEY",
        IndexKind::Key => "KEY",
        IndexKind::Fulltext => "FULLTEXT KEY",
        IndexKind::Spatial => "SPATIAL KEY",
    }
}
