//! The plans of small models: what each kind of change becomes, in which order, and what is
//! destructive. The live MariaDB corpus (`crates/fermata/tests/it/schema_ddl.rs`) proves the
//! scripts on a server.

use super::*;
use crate::snapshot::model::{Column, IndexKind, Table};
use crate::test_models::{index, model as database, routine};

/// A nullable column of `column_type` whose default is `NULL`.
fn column(name: &str, column_type: &str) -> Column {
    Column {
        nullable: true,
        default: Some("NULL".to_owned()),
        ..crate::test_models::column(name, column_type)
    }
}

/// A table with a primary key on `id`.
fn table(name: &str, columns: Vec<Column>) -> Table {
    crate::test_models::table(
        name,
        columns,
        vec![index("PRIMARY", IndexKind::Primary, &["id"])],
    )
}

/// The `NOT NULL` key column.
fn id() -> Column {
    crate::test_models::column("id", "int(11)")
}

fn sql(script: &Script) -> Vec<&str> {
    script
        .statements
        .iter()
        .map(|s| s.sql.as_str())
        .filter(|s| !s.starts_with("SET "))
        .collect()
}

#[test]
fn the_same_schema_needs_nothing() {
    let model = database(vec![table("a", vec![id()])]);
    let script = plan(&model, &model, Direction::Undo);
    assert!(script.is_empty());
    assert!(script.text("shop", false).contains("Nothing to do"));
}

#[test]
fn columns_are_added_in_place_and_drops_stand_alone_as_destructive() {
    let from = database(vec![table(
        "a",
        vec![id(), column("old", "int(11)"), column("b", "varchar(10)")],
    )]);
    let to = database(vec![table(
        "a",
        vec![id(), column("new", "int(11)"), column("b", "varchar(5)")],
    )]);
    let script = plan(&from, &to, Direction::Undo);
    assert_eq!(
        sql(&script),
        [
            "ALTER TABLE `a`\n  DROP COLUMN `old`,\n  MODIFY COLUMN `b` varchar(5) DEFAULT NULL",
            "ALTER TABLE `a`\n  ADD COLUMN `new` int(11) DEFAULT NULL AFTER `id`",
        ]
    );
    assert_eq!(script.destructive_count(), 1);
    assert_eq!(script.notes.len(), 1, "{:?}", script.notes);
    let shown = script.text("shop", false);
    assert!(!shown.contains("DROP COLUMN"), "{shown}");
    assert!(
        shown.contains("Left out: 1 destructive statement"),
        "{shown}"
    );
    assert!(
        script
            .text("shop", true)
            .contains("-- destructive: drops column `old`")
    );
}

#[test]
fn moved_columns_move_with_after_and_the_rest_stays() {
    let from = database(vec![table(
        "a",
        vec![
            id(),
            column("x", "int(11)"),
            column("y", "int(11)"),
            column("z", "int(11)"),
        ],
    )]);
    let to = database(vec![table(
        "a",
        vec![
            id(),
            column("y", "int(11)"),
            column("z", "int(11)"),
            column("x", "int(11)"),
        ],
    )]);
    let script = plan(&from, &to, Direction::Adopt);
    assert_eq!(
        sql(&script),
        ["ALTER TABLE `a`\n  MODIFY COLUMN `x` int(11) DEFAULT NULL AFTER `z`"]
    );
    assert_eq!(script.destructive_count(), 0);
}

#[test]
fn new_tables_get_their_foreign_keys_last_and_dropped_tables_are_destructive() {
    let mut child = table("child", vec![id(), column("parent", "int(11)")]);
    child.foreign_keys.push(crate::snapshot::model::ForeignKey {
        name: "fk".to_owned(),
        columns: vec!["parent".to_owned()],
        referenced_database: None,
        referenced_table: "parent".to_owned(),
        referenced_columns: vec!["id".to_owned()],
        on_delete: "RESTRICT".to_owned(),
        on_update: "RESTRICT".to_owned(),
    });
    let from = database(vec![table("gone", vec![id()])]);
    let to = database(vec![child, table("parent", vec![id()])]);
    let script = plan(&from, &to, Direction::Undo);
    let statements = sql(&script);
    assert!(statements[0].starts_with("CREATE TABLE `child`"));
    assert!(!statements[0].contains("FOREIGN KEY"));
    assert!(statements[1].starts_with("CREATE TABLE `parent`"));
    assert_eq!(statements[2], "DROP TABLE `gone`");
    assert_eq!(
        statements[3],
        "ALTER TABLE `child`\n  ADD CONSTRAINT `fk` FOREIGN KEY (`parent`) REFERENCES `parent` (`id`)"
    );
    assert!(script.notes[0].contains("rename is never guessed"));
}

#[test]
fn stored_programs_name_their_definer_which_the_workspace_leaves_out() {
    let mut from = database(Vec::new());
    let mut to = database(Vec::new());
    let routine = |body: &str| crate::snapshot::model::Routine {
        body: body.to_owned(),
        sql_mode: "STRICT_TRANS_TABLES".to_owned(),
        ..routine("p", crate::snapshot::model::RoutineKind::Procedure, "app@%")
    };
    from.routines.push(routine("BEGIN SELECT 1; END"));
    to.routines.push(routine("BEGIN SELECT 2; END"));
    let script = plan(&from, &to, Direction::Undo);
    let create = script.statements.iter().find(|s| s.compound).unwrap();
    assert_eq!(
        create.sql,
        "CREATE OR REPLACE DEFINER=`app`@`%` PROCEDURE `p`()\nBEGIN SELECT 2; END"
    );
    assert_eq!(
        create.applied(),
        "CREATE OR REPLACE PROCEDURE `p`()\nBEGIN SELECT 2; END"
    );
    assert!(
        script
            .text("shop", false)
            .contains("DELIMITER ;;\nCREATE OR REPLACE DEFINER")
    );
    // A body that holds the usual delimiter gets another.
    to.routines[0].body = "BEGIN SELECT ';;'; END".to_owned();
    let text = plan(&from, &to, Direction::Undo).text("shop", false);
    assert!(text.contains("DELIMITER $$\nCREATE OR REPLACE"), "{text}");
    assert!(text.contains("END$$\nDELIMITER ;\n"), "{text}");

    from.flavor = Flavor::Mysql;
    to.flavor = Flavor::Mysql;
    let script = plan(&from, &to, Direction::Undo);
    let statements = sql(&script);
    assert_eq!(statements[0], "DROP PROCEDURE IF EXISTS `p`");
    assert!(statements[1].starts_with("CREATE DEFINER=`app`@`%` PROCEDURE `p`()"));
}

#[test]
fn names_and_reasons_in_comments_cannot_end_them() {
    let from = database(vec![table("a", vec![id(), column("old\nx", "int(11)")])]);
    let to = database(vec![table("a", vec![id()])]);
    let mut script = plan(&from, &to, Direction::Undo);
    script.verification = Verification::Failed {
        reason: "differs\nDROP DATABASE shop".to_owned(),
    };
    let shown = script.text("shop\nDROP DATABASE shop; --", true);
    for line in shown.lines() {
        assert!(
            !line.starts_with("DROP DATABASE"),
            "a comment was ended: {shown}"
        );
    }
    assert!(
        shown.contains("`shop\\u{a}DROP DATABASE shop; --`"),
        "{shown}"
    );
    assert!(!shown.contains("\nUSE "), "{shown}");
    assert!(script.text("shop", true).contains("\nUSE `shop`;\n"));
    assert!(
        shown.contains("differs\\u{a}DROP DATABASE shop."),
        "{shown}"
    );
}
