//! The plans of small models: what each kind of change becomes, in which order, and what is
//! destructive. The live MariaDB corpora (`tests/it/migration_corpus.rs` and
//! `tests/it/migration_corpus_demanding.rs`) prove the scripts on a server.

use super::*;
use crate::snapshot::model::{
    Column, ForeignKey, Generated, IndexKind, Partition, Partitioning, Period, RowPeriod, Sequence,
    Table, TableOption, View,
};
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

/// A foreign key `name` on `column` referring to `table` (`id`).
fn foreign_key(name: &str, column: &str, table: &str) -> ForeignKey {
    ForeignKey {
        name: name.to_owned(),
        columns: vec![column.to_owned()],
        referenced_database: None,
        referenced_table: table.to_owned(),
        referenced_columns: vec!["id".to_owned()],
        on_delete: "RESTRICT".to_owned(),
        on_update: "RESTRICT".to_owned(),
    }
}

/// A generated column of `column_type` computed by `expression`.
fn generated(name: &str, column_type: &str, expression: &str, stored: bool) -> Column {
    Column {
        generated: Some(Generated {
            expression: expression.to_owned(),
            stored,
        }),
        default: None,
        ..column(name, column_type)
    }
}

/// The statements of `script` that lose data.
fn destructive(script: &Script) -> Vec<&str> {
    script
        .statements
        .iter()
        .filter(|s| s.destructive.is_some())
        .map(|s| s.sql.as_str())
        .collect()
}

#[test]
fn tables_that_refer_to_each_other_lose_a_key_before_they_are_dropped() {
    let mut ying = table("ying", vec![id(), column("yang", "int(11)")]);
    ying.foreign_keys
        .push(foreign_key("fk_yang", "yang", "yang"));
    ying.foreign_keys
        .push(foreign_key("fk_self", "yang", "ying"));
    let mut yang = table("yang", vec![id(), column("ying", "int(11)")]);
    yang.foreign_keys
        .push(foreign_key("fk_ying", "ying", "ying"));
    let from = database(vec![yang, ying]);
    let to = database(vec![]);
    let script = plan(&from, &to, Direction::Adopt);
    // `yang` goes first: the key of `ying` that refers to it goes before; a key of a table to
    // itself is no obstacle.
    assert_eq!(
        sql(&script),
        [
            "ALTER TABLE `ying`\n  DROP FOREIGN KEY `fk_yang`",
            "DROP TABLE `yang`",
            "DROP TABLE `ying`",
        ]
    );
    assert_eq!(destructive(&script).len(), 2);
}

#[test]
fn a_chain_of_dropped_tables_goes_from_its_end_and_a_cycle_after_it_is_cut_once() {
    let refers = |name: &str, to: &str| {
        let mut t = table(name, vec![id(), column("up", "int(11)")]);
        t.foreign_keys
            .push(foreign_key(&format!("fk_{name}"), "up", to));
        t
    };
    // a <- b <- c <- d, and e <-> f.
    let from = database(vec![
        table("a", vec![id()]),
        refers("b", "a"),
        refers("c", "b"),
        refers("d", "c"),
        refers("e", "f"),
        refers("f", "e"),
    ]);
    let script = plan(&from, &database(vec![]), Direction::Adopt);
    assert_eq!(
        sql(&script),
        [
            "ALTER TABLE `f`\n  DROP FOREIGN KEY `fk_f`",
            "DROP TABLE `d`",
            "DROP TABLE `c`",
            "DROP TABLE `b`",
            "DROP TABLE `a`",
            "DROP TABLE `e`",
            "DROP TABLE `f`",
        ]
    );
}

#[test]
fn a_dropped_table_loses_its_keys_to_a_table_that_changes_first() {
    let mut child = table("child", vec![id(), column("parent", "int(11)")]);
    child
        .foreign_keys
        .push(foreign_key("fk_parent", "parent", "parent"));
    let parent = |id_type: &str| table("parent", vec![crate::test_models::column("id", id_type)]);
    let from = database(vec![child, parent("int(11)")]);
    let to = database(vec![parent("bigint(20)")]);
    let script = plan(&from, &to, Direction::Adopt);
    assert_eq!(
        sql(&script),
        [
            "ALTER TABLE `child`\n  DROP FOREIGN KEY `fk_parent`",
            "ALTER TABLE `parent`\n  MODIFY COLUMN `id` bigint(20) NOT NULL",
            "DROP TABLE `child`",
        ]
    );
    // Unchanged, the referenced table keeps the key until its child goes.
    let to = database(vec![parent("int(11)")]);
    assert_eq!(
        sql(&plan(&from, &to, Direction::Adopt)),
        ["DROP TABLE `child`"]
    );
}

#[test]
fn a_narrowed_column_gets_auto_increment_only_with_its_key() {
    let mut auto = id();
    auto.auto_increment = true;
    let from = database(vec![table("a", vec![auto, column("n", "int(11)")])]);
    let mut n = crate::test_models::column("n", "int(11)");
    n.auto_increment = true;
    let mut to_table = table("a", vec![id(), n]);
    to_table.indexes = vec![index("PRIMARY", IndexKind::Primary, &["n"])];
    let to = database(vec![to_table]);
    let script = plan(&from, &to, Direction::Adopt);
    assert_eq!(
        sql(&script),
        [
            "ALTER TABLE `a`\n  MODIFY COLUMN `n` int(11) NOT NULL",
            "ALTER TABLE `a`\n  DROP PRIMARY KEY,\n  MODIFY COLUMN `id` int(11) NOT NULL,\n  \
             MODIFY COLUMN `n` int(11) NOT NULL AUTO_INCREMENT,\n  ADD PRIMARY KEY (`n`)",
        ]
    );
    assert_eq!(destructive(&script), [sql(&script)[0]]);
}

#[test]
fn generated_columns_reading_a_dropped_column_go_before_it() {
    let mut from_table = table(
        "a",
        vec![
            id(),
            column("qty", "int(11)"),
            column("b", "int(11)"),
            generated("twice", "int(11)", "`qty` * 2", false),
            generated("sum", "int(11)", "`qty` + `b`", true),
        ],
    );
    from_table
        .indexes
        .push(index("k_sum", IndexKind::Key, &["sum"]));
    let mut to_table = table(
        "a",
        vec![
            id(),
            column("b", "int(11)"),
            generated("sum", "int(11)", "`b` * 2", true),
        ],
    );
    to_table
        .indexes
        .push(index("k_sum", IndexKind::Key, &["sum"]));
    let script = plan(
        &database(vec![from_table]),
        &database(vec![to_table]),
        Direction::Adopt,
    );
    // The generated columns (and the index on the one that stays) go first, losing nothing; the
    // one that stays is added again once its column is gone, so the script runs without the
    // destructive statement too.
    assert_eq!(
        sql(&script),
        [
            "ALTER TABLE `a`\n  DROP INDEX `k_sum`,\n  DROP COLUMN `twice`,\n  DROP COLUMN `sum`",
            "ALTER TABLE `a`\n  DROP COLUMN `qty`",
            "ALTER TABLE `a`\n  ADD COLUMN `sum` int(11) GENERATED ALWAYS AS (`b` * 2) STORED \
             AFTER `b`,\n  ADD KEY `k_sum` (`sum`)",
        ]
    );
    assert_eq!(
        destructive(&script),
        ["ALTER TABLE `a`\n  DROP COLUMN `qty`"]
    );
}

#[test]
fn a_column_made_or_unmade_virtual_is_dropped_and_added_again() {
    let from = database(vec![table(
        "a",
        vec![
            id(),
            column("qty", "int(11)"),
            generated("v", "int(11)", "`qty` * 2", false),
            column("b", "int(11)"),
        ],
    )]);
    let to = database(vec![table(
        "a",
        vec![
            id(),
            column("qty", "int(11)"),
            generated("v", "int(11)", "`qty` * 2", true),
            generated("b", "int(11)", "`qty` * 3", false),
        ],
    )]);
    let script = plan(&from, &to, Direction::Adopt);
    // The server changes neither in place. Virtual to stored loses nothing; stored to virtual
    // loses the values, in a statement of its own that drops and adds the column at once.
    assert_eq!(
        sql(&script),
        [
            "ALTER TABLE `a`\n  DROP COLUMN `v`",
            "ALTER TABLE `a`\n  DROP COLUMN `b`,\n  \
             ADD COLUMN `b` int(11) GENERATED ALWAYS AS (`qty` * 3) VIRTUAL AFTER `qty`",
            "ALTER TABLE `a`\n  ADD COLUMN `v` int(11) GENERATED ALWAYS AS (`qty` * 2) STORED \
             AFTER `qty`",
        ]
    );
    assert_eq!(destructive(&script), [sql(&script)[1]]);
    // Back: both lose nothing.
    let script = plan(&to, &from, Direction::Undo);
    assert_eq!(script.destructive_count(), 0, "{:?}", sql(&script));
}

#[test]
fn a_default_that_reads_a_dropped_column_goes_before_it() {
    let mut derived = column("b", "int(11)");
    derived.default = Some("`a` + 1".to_owned());
    let from = database(vec![table(
        "t",
        vec![id(), column("a", "int(11)"), derived],
    )]);
    let mut kept = column("b", "int(11)");
    kept.default = Some("5".to_owned());
    let to = database(vec![table("t", vec![id(), kept])]);
    assert_eq!(
        sql(&plan(&from, &to, Direction::Adopt)),
        [
            "ALTER TABLE `t`\n  ALTER COLUMN `b` DROP DEFAULT",
            "ALTER TABLE `t`\n  DROP COLUMN `a`",
            "ALTER TABLE `t`\n  MODIFY COLUMN `b` int(11) DEFAULT 5",
        ]
    );
}

#[test]
fn partitioning_by_a_column_that_goes_is_removed_first() {
    let partitioning = |expression: &str, count: usize| Partitioning {
        method: "HASH".to_owned(),
        system_time: None,
        expression: expression.to_owned(),
        subpartition_method: None,
        subpartition_expression: None,
        partitions: (0..count)
            .map(|n| Partition {
                name: format!("p{n}"),
                values: None,
                default: false,
                comment: String::new(),
                subpartitions: vec![],
                quoted: false,
            })
            .collect(),
    };
    let mut from_table = table("t", vec![id(), column("k", "int(11)")]);
    from_table.partitioning = Some(partitioning("`k`", 2));
    let mut to_table = table("t", vec![id()]);
    to_table.partitioning = Some(partitioning("`id`", 3));
    let script = plan(
        &database(vec![from_table]),
        &database(vec![to_table]),
        Direction::Adopt,
    );
    assert_eq!(
        sql(&script),
        [
            "ALTER TABLE `t`\n  REMOVE PARTITIONING",
            "ALTER TABLE `t`\n  DROP COLUMN `k`",
            "ALTER TABLE `t`\n PARTITION BY HASH (`id`)\nPARTITIONS 3",
        ]
    );
}

/// A table `t` with an `id` primary key and `v`, system-versioned with the named row columns
/// `rs` and `re` (which the server adds to the primary key) when `explicit`.
fn versioned(explicit: bool) -> Table {
    let row = |name: &str, period: RowPeriod| Column {
        row_period: Some(period),
        default: None,
        ..column(name, "timestamp(6)")
    };
    let mut t = table("t", vec![id(), column("v", "int(11)")]);
    t.system_versioned = true;
    if explicit {
        t.columns.push(row("rs", RowPeriod::Start));
        t.columns.push(row("re", RowPeriod::End));
        t.indexes = vec![index("PRIMARY", IndexKind::Primary, &["id", "re"])];
        t.system_period = Some(Period {
            name: "SYSTEM_TIME".to_owned(),
            start: "rs".to_owned(),
            end: "re".to_owned(),
        });
    }
    t
}

#[test]
fn system_versioning_with_named_row_columns_goes_and_comes_with_them() {
    let plain = database(vec![Table {
        system_versioned: false,
        ..versioned(false)
    }]);
    let explicit = database(vec![versioned(true)]);
    // Dropped: the period and its columns go in the same statement; the server takes the row
    // end column out of the primary key itself.
    let script = plan(&explicit, &plain, Direction::Undo);
    assert_eq!(
        sql(&script),
        [
            "ALTER TABLE `t`\n  DROP SYSTEM VERSIONING,\n  DROP PERIOD FOR SYSTEM_TIME,\n  \
          DROP COLUMN `rs`,\n  DROP COLUMN `re`"
        ]
    );
    assert_eq!(script.destructive_count(), 1);
    // Added: the server adds the row end column to the primary key itself.
    let script = plan(&plain, &explicit, Direction::Adopt);
    assert_eq!(
        sql(&script),
        [
            "ALTER TABLE `t`\n  ADD COLUMN `rs` timestamp(6) GENERATED ALWAYS AS ROW START AFTER `v`,\n  \
          ADD COLUMN `re` timestamp(6) GENERATED ALWAYS AS ROW END AFTER `rs`,\n  \
          ADD PERIOD FOR SYSTEM_TIME (`rs`, `re`),\n  ADD SYSTEM VERSIONING"
        ]
    );
    // Row columns named where they were not: versioning is dropped and added again.
    let implicit = database(vec![versioned(false)]);
    let script = plan(&implicit, &explicit, Direction::Adopt);
    assert_eq!(
        sql(&script),
        [
            "ALTER TABLE `t`\n  DROP SYSTEM VERSIONING",
            "ALTER TABLE `t`\n  ADD COLUMN `rs` timestamp(6) GENERATED ALWAYS AS ROW START AFTER `v`,\n  \
             ADD COLUMN `re` timestamp(6) GENERATED ALWAYS AS ROW END AFTER `rs`,\n  \
             ADD PERIOD FOR SYSTEM_TIME (`rs`, `re`),\n  ADD SYSTEM VERSIONING",
        ]
    );
    assert_eq!(script.destructive_count(), 1);
    // Partitioned by SYSTEM_TIME, it is not while versioning is dropped.
    let by_system_time = Partitioning {
        method: "SYSTEM_TIME".to_owned(),
        system_time: Some("LIMIT 100".to_owned()),
        expression: String::new(),
        subpartition_method: None,
        subpartition_expression: None,
        partitions: ["HISTORY", "CURRENT"]
            .iter()
            .enumerate()
            .map(|(n, values)| Partition {
                name: format!("p{n}"),
                values: Some((*values).to_owned()),
                default: false,
                comment: String::new(),
                subpartitions: vec![],
                quoted: false,
            })
            .collect(),
    };
    let partitioned = |mut model: DatabaseModel| {
        model.tables[0].partitioning = Some(by_system_time.clone());
        model
    };
    let statements = plan(
        &partitioned(implicit),
        &partitioned(explicit),
        Direction::Adopt,
    )
    .statements;
    let statements: Vec<&str> = statements
        .iter()
        .map(|s| s.sql.as_str())
        .filter(|s| !s.starts_with("SET "))
        .collect();
    assert_eq!(statements[0], "ALTER TABLE `t`\n  REMOVE PARTITIONING");
    assert_eq!(statements[1], "ALTER TABLE `t`\n  DROP SYSTEM VERSIONING");
    assert!(
        statements[3].starts_with("ALTER TABLE `t`\n PARTITION BY SYSTEM_TIME LIMIT 100"),
        "{statements:?}"
    );
}

#[test]
fn table_options_go_back_to_defaults_the_server_takes() {
    let option = |name: &str, value: &str, engine_defined: bool| TableOption {
        name: name.to_owned(),
        value: value.to_owned(),
        engine_defined,
    };
    let mut from_table = table("t", vec![id()]);
    from_table.indexes = vec![index("PRIMARY", IndexKind::Primary, &["id"])];
    from_table.options = vec![
        option("MIN_ROWS", "10", false),
        option("STATS_PERSISTENT", "1", false),
        option("CHECKSUM", "1", false),
        option("KEY_BLOCK_SIZE", "8", false),
    ];
    let to_table = table("t", vec![id()]);
    // Every index keeps the block size it was built with: they are built again.
    assert_eq!(
        sql(&plan(
            &database(vec![from_table]),
            &database(vec![to_table.clone()]),
            Direction::Undo
        )),
        [
            "ALTER TABLE `t`\n  DROP PRIMARY KEY,\n  ADD PRIMARY KEY (`id`),\n  MIN_ROWS=0,\n  \
          STATS_PERSISTENT=DEFAULT,\n  CHECKSUM=0,\n  KEY_BLOCK_SIZE=0"
        ]
    );
    // With the engine changed, an engine-defined option goes before (the old engine knows it),
    // any other after (the old engine would fill in its own).
    let from_table = Table {
        options: vec![
            option("PAGE_COMPRESSED", "'1'", true),
            option("TRANSACTIONAL", "1", false),
        ],
        ..to_table.clone()
    };
    let to_table = Table {
        engine: "Aria".to_owned(),
        ..to_table
    };
    assert_eq!(
        sql(&plan(
            &database(vec![from_table]),
            &database(vec![to_table]),
            Direction::Undo
        )),
        [
            "ALTER TABLE `t`\n  `PAGE_COMPRESSED`=DEFAULT",
            "ALTER TABLE `t`\n  ENGINE=Aria",
            "ALTER TABLE `t`\n  TRANSACTIONAL=DEFAULT",
        ]
    );
}

#[test]
fn a_narrowed_column_moves_between_columns_that_keep_their_order() {
    let names = |names: &[&str]| -> Vec<Column> {
        names
            .iter()
            .map(|name| match *name {
                "id" => id(),
                "n" => column("n", "varchar(50)"),
                "n20" => column("n", "varchar(20)"),
                other => column(other, "int(11)"),
            })
            .collect()
    };
    let from = database(vec![table("t", names(&["id", "n", "p", "a", "b"]))]);
    let to = database(vec![table("t", names(&["id", "a", "b", "p", "n20"]))]);
    // `a` and `b` keep their order; `p` moves after `b`, and the narrowed `n` after `b` too,
    // before `p` takes its place there: the order comes out as `to`'s.
    assert_eq!(
        sql(&plan(&from, &to, Direction::Adopt)),
        [
            "ALTER TABLE `t`\n  MODIFY COLUMN `n` varchar(20) DEFAULT NULL AFTER `b`",
            "ALTER TABLE `t`\n  MODIFY COLUMN `p` int(11) DEFAULT NULL AFTER `b`",
        ]
    );
}

#[test]
fn views_created_after_a_routine_run_under_the_introspection_mode() {
    let mut from = database(vec![]);
    let view = |definition: &str| View {
        name: "v".to_owned(),
        definition: definition.to_owned(),
        algorithm: "UNDEFINED".to_owned(),
        security: "DEFINER".to_owned(),
        check_option: "NONE".to_owned(),
        definer: "app@%".to_owned(),
    };
    from.views.push(view("select 'a\\\\b' AS `s`"));
    let mut to = from.clone();
    to.views[0] = view("select 'a\\\\b' AS `s`,1 AS `n`");
    to.routines.push(crate::snapshot::model::Routine {
        sql_mode: "NO_BACKSLASH_ESCAPES".to_owned(),
        ..routine("p", crate::snapshot::model::RoutineKind::Procedure, "app@%")
    });
    let script = plan(&from, &to, Direction::Adopt);
    let statements: Vec<&str> = script.statements.iter().map(|s| s.sql.as_str()).collect();
    let view_at = statements
        .iter()
        .position(|s| s.contains(" VIEW `v`"))
        .unwrap();
    assert_eq!(
        statements[view_at - 1],
        "SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION', time_zone = '+00:00'"
    );
    assert!(
        statements[..view_at - 1]
            .iter()
            .any(|s| s.contains("NO_BACKSLASH_ESCAPES"))
    );
}

#[test]
fn a_sequence_whose_range_narrows_restarts_and_says_so() {
    let sequence = |minimum: &str, maximum: &str| Sequence {
        name: "s".to_owned(),
        start: minimum.to_owned(),
        minimum: minimum.to_owned(),
        maximum: maximum.to_owned(),
        increment: "1".to_owned(),
        cache: "0".to_owned(),
        cycle: true,
        engine: "InnoDB".to_owned(),
        comment: String::new(),
    };
    let mut wide = database(vec![]);
    wide.sequences.push(sequence("1", "1000"));
    let mut narrow = database(vec![]);
    narrow.sequences.push(sequence("100", "500"));
    let script = plan(&wide, &narrow, Direction::Adopt);
    assert_eq!(
        destructive(&script),
        [
            "ALTER SEQUENCE `s` INCREMENT BY 1 MINVALUE 100 MAXVALUE 500 START WITH 100 NOCACHE \
          CYCLE RESTART"
        ]
    );
    let script = plan(&narrow, &wide, Direction::Undo);
    assert_eq!(
        sql(&script),
        ["ALTER SEQUENCE `s` INCREMENT BY 1 MINVALUE 1 MAXVALUE 1000 START WITH 1 NOCACHE CYCLE"]
    );
    assert_eq!(script.destructive_count(), 0);
}
