//! `SHOW CREATE` output of servers the test command does not start (MySQL 8.0, MariaDB 11.x,
//! MariaDB with an encryption plugin), written after what those servers print, brought into
//! canonical form: each must equal what the model of the same object renders to in its server's
//! spelling. MySQL's own recorded outputs are tested in `mysql_fixtures`. No server is needed.

use fermata_schema::snapshot::model::{
    Column, Flavor, ForeignKey, Index, IndexKind, IndexPart, Parameter, Partition, Partitioning,
    Routine, RoutineKind, Subpartition, Table, TableOption, Trigger,
};
use fermata_schema::snapshot::normalize::{self, mysql};
use fermata_schema::snapshot::render;
use fermata_schema::snapshot::{ColumnRow, column_from_catalog};

fn table(name: &str, charset: &str, collation: &str) -> Table {
    Table {
        name: name.to_owned(),
        engine: "InnoDB".to_owned(),
        charset: charset.to_owned(),
        collation: collation.to_owned(),
        row_format: None,
        options: Vec::new(),
        comment: String::new(),
        columns: Vec::new(),
        indexes: Vec::new(),
        foreign_keys: Vec::new(),
        checks: Vec::new(),
        partitioning: None,
        ..Table::default()
    }
}

fn column(name: &str, column_type: &str, nullable: bool, default: Option<&str>) -> Column {
    Column {
        name: name.to_owned(),
        column_type: column_type.to_owned(),
        nullable,
        default: default.map(str::to_owned),
        on_update: None,
        auto_increment: false,
        invisible: false,
        charset: None,
        collation: None,
        generated: None,
        check: None,
        comment: String::new(),
        ..Column::default()
    }
}

/// A MySQL 8 table keeps MySQL's spelling (`int unsigned`, `COLLATE` alone where the character
/// set is the table's, `utf8` as an older release spells it, `CURRENT_TIMESTAMP`, an expression
/// default in MySQL's parentheses, the partitioning in its version comment with bare names);
/// only the counter goes and foreign keys and options take the canonical order.
#[test]
fn a_mysql_8_table_keeps_mysqls_spelling() {
    let recorded = concat!(
        "CREATE TABLE `orders` (\n",
        "  `id` int unsigned NOT NULL AUTO_INCREMENT,\n",
        "  `customer_id` int NOT NULL,\n",
        "  `code` varchar(20) COLLATE utf8mb4_bin NOT NULL,\n",
        "  `note` varchar(10) CHARACTER SET utf8 COLLATE utf8_general_ci DEFAULT NULL,\n",
        "  `created` timestamp NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,\n",
        "  `f` float DEFAULT ((rand() * rand())),\n",
        "  `flag` tinyint(1) NOT NULL,\n",
        "  PRIMARY KEY (`id`),\n",
        "  KEY `fk_z` (`customer_id`),\n",
        "  CONSTRAINT `fk_z` FOREIGN KEY (`customer_id`) REFERENCES `customers` (`id`),\n",
        "  CONSTRAINT `fk_a` FOREIGN KEY (`customer_id`) REFERENCES `customers` (`id`) ON DELETE CASCADE\n",
        ") ENGINE=InnoDB AUTO_INCREMENT=17 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8 STATS_PERSISTENT=1 COMMENT='orders'\n",
        "/*!50100 PARTITION BY RANGE (`id`)\n",
        "(PARTITION p0 VALUES LESS THAN (100) ENGINE = InnoDB,\n",
        " PARTITION p1 VALUES LESS THAN MAXVALUE ENGINE = InnoDB) */"
    );
    let mut model = table("orders", "utf8mb4", "utf8mb4_0900_ai_ci");
    let catalog = |name: &str,
                   column_type: &str,
                   nullable: bool,
                   default: Option<&str>,
                   extra: &str,
                   collation: Option<(&str, &str)>| {
        column_from_catalog(
            Flavor::Mysql,
            ColumnRow {
                name: name.to_owned(),
                column_type: column_type.to_owned(),
                nullable,
                default: default.map(str::to_owned),
                extra: extra.to_owned(),
                charset: collation.map(|(charset, _)| charset.to_owned()),
                collation: collation.map(|(_, collation)| collation.to_owned()),
                ..ColumnRow::default()
            },
        )
        .unwrap()
    };
    model.columns = vec![
        catalog("id", "int unsigned", false, None, "auto_increment", None),
        catalog("customer_id", "int", false, None, "", None),
        catalog(
            "code",
            "varchar(20)",
            false,
            None,
            "",
            Some(("utf8mb4", "utf8mb4_bin")),
        ),
        catalog(
            "note",
            "varchar(10)",
            true,
            None,
            "",
            Some(("utf8", "utf8_general_ci")),
        ),
        catalog(
            "created",
            "timestamp",
            true,
            Some("CURRENT_TIMESTAMP"),
            "DEFAULT_GENERATED on update CURRENT_TIMESTAMP",
            None,
        ),
        catalog(
            "f",
            "float",
            true,
            Some("(rand() * rand())"),
            "DEFAULT_GENERATED",
            None,
        ),
        catalog("flag", "tinyint(1)", false, None, "", None),
    ];
    let key = |name: &str, column: &str| Index {
        name: name.to_owned(),
        kind: if name == "PRIMARY" {
            IndexKind::Primary
        } else {
            IndexKind::Key
        },
        parts: vec![IndexPart {
            column: column.to_owned(),
            expression: None,
            prefix: None,
            descending: false,
        }],
        using: None,
        comment: String::new(),
        ignored: false,
        invisible: false,
        without_overlaps: None,
    };
    model.indexes = vec![key("PRIMARY", "id"), key("fk_z", "customer_id")];
    let foreign_key = |name: &str, on_delete: &str| ForeignKey {
        name: name.to_owned(),
        columns: vec!["customer_id".to_owned()],
        referenced_database: None,
        referenced_table: "customers".to_owned(),
        referenced_columns: vec!["id".to_owned()],
        on_delete: on_delete.to_owned(),
        on_update: "RESTRICT".to_owned(),
    };
    model.foreign_keys = vec![
        foreign_key("fk_a", "CASCADE"),
        foreign_key("fk_z", "RESTRICT"),
    ];
    model.row_format = Some("COMPRESSED".to_owned());
    model.options = vec![
        TableOption {
            name: "STATS_PERSISTENT".to_owned(),
            value: "1".to_owned(),
            engine_defined: false,
        },
        TableOption {
            name: "KEY_BLOCK_SIZE".to_owned(),
            value: "8".to_owned(),
            engine_defined: false,
        },
    ];
    model.comment = "orders".to_owned();
    let partition = |name: &str, values: &str| Partition {
        name: name.to_owned(),
        values: Some(values.to_owned()),
        default: false,
        comment: String::new(),
        subpartitions: Vec::new(),
        quoted: false,
    };
    model.partitioning = Some(Partitioning {
        method: "RANGE".to_owned(),
        system_time: None,
        expression: "`id`".to_owned(),
        subpartition_method: None,
        subpartition_expression: None,
        partitions: vec![partition("p0", "100"), partition("p1", "MAXVALUE")],
    });
    let canonical = normalize::table(recorded, &model, Flavor::Mysql).unwrap();
    assert_eq!(
        canonical,
        concat!(
            "CREATE TABLE `orders` (\n",
            "  `id` int unsigned NOT NULL AUTO_INCREMENT,\n",
            "  `customer_id` int NOT NULL,\n",
            "  `code` varchar(20) COLLATE utf8mb4_bin NOT NULL,\n",
            "  `note` varchar(10) CHARACTER SET utf8 COLLATE utf8_general_ci DEFAULT NULL,\n",
            "  `created` timestamp NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,\n",
            "  `f` float DEFAULT ((rand() * rand())),\n",
            "  `flag` tinyint(1) NOT NULL,\n",
            "  PRIMARY KEY (`id`),\n",
            "  KEY `fk_z` (`customer_id`),\n",
            "  CONSTRAINT `fk_a` FOREIGN KEY (`customer_id`) REFERENCES `customers` (`id`) ON DELETE CASCADE,\n",
            "  CONSTRAINT `fk_z` FOREIGN KEY (`customer_id`) REFERENCES `customers` (`id`)\n",
            ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci STATS_PERSISTENT=1 ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8 COMMENT='orders'\n",
            "/*!50100 PARTITION BY RANGE (`id`)\n",
            "(PARTITION p0 VALUES LESS THAN (100) ENGINE = InnoDB,\n",
            " PARTITION p1 VALUES LESS THAN MAXVALUE ENGINE = InnoDB) */"
        )
    );
    assert_eq!(canonical, render::render_table(&model, Flavor::Mysql));
    // A collation clause that names another collation than the catalog's is not this column.
    let other = recorded.replace("COLLATE utf8mb4_bin", "COLLATE utf8mb4_general_ci");
    assert_eq!(normalize::table(&other, &model, Flavor::Mysql), None);
}

/// A MariaDB release's catalog values get the same spelling as its text, so the model renders
/// what the normalized text says.
#[test]
fn catalog_values_are_spelled_like_the_text() {
    assert_eq!(mysql::display_width("int"), "int(11)");
    assert_eq!(
        mysql::display_width("bigint unsigned"),
        "bigint(20) unsigned"
    );
    assert_eq!(mysql::display_width("tinyint(1)"), "tinyint(1)");
    assert_eq!(
        mysql::display_width("smallint unsigned zerofill"),
        "smallint(5) unsigned zerofill"
    );
    assert_eq!(mysql::display_width("interval"), "interval");
    assert_eq!(mysql::utf8mb3("utf8"), "utf8mb3");
    assert_eq!(mysql::utf8mb3("utf8_bin"), "utf8mb3_bin");
    assert_eq!(mysql::utf8mb3("utf8mb4_bin"), "utf8mb4_bin");
    assert_eq!(
        mysql::current_timestamp("CURRENT_TIMESTAMP(3)"),
        "current_timestamp(3)"
    );
    for (default, canonical) in [
        ("NULL", "NULL"),
        ("0.00", "0.00"),
        ("'it''s'", "'it''s'"),
        ("b'101'", "b'101'"),
        ("current_timestamp()", "current_timestamp()"),
        ("concat('a','b')", "(concat('a','b'))"),
        ("(`a` + 1)", "(`a` + 1)"),
        ("(1) + (2)", "((1) + (2))"),
    ] {
        assert_eq!(render::canonical_default(default), canonical, "{default}");
    }
}

/// MySQL keeps a string literal's character set introducer in an expression default, in its
/// catalog and in its text alike, so the two meet without any rewriting.
#[test]
fn a_mysql_8_expression_default_keeps_its_introducers() {
    let mut model = table("t", "utf8mb4", "utf8mb4_0900_ai_ci");
    model.columns = vec![
        column_from_catalog(
            Flavor::Mysql,
            ColumnRow {
                name: "c".to_owned(),
                column_type: "varchar(5)".to_owned(),
                nullable: true,
                default: Some("concat(_utf8mb4'x',_utf8mb4'y')".to_owned()),
                extra: "DEFAULT_GENERATED".to_owned(),
                charset: Some("utf8mb4".to_owned()),
                collation: Some("utf8mb4_0900_ai_ci".to_owned()),
                ..ColumnRow::default()
            },
        )
        .unwrap(),
    ];
    let recorded = "CREATE TABLE `t` (\n  `c` varchar(5) DEFAULT (concat(_utf8mb4'x',_utf8mb4'y'))\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci";
    assert_eq!(
        normalize::table(recorded, &model, Flavor::Mysql).unwrap(),
        render::render_table(&model, Flavor::Mysql)
    );
    assert_eq!(render::render_table(&model, Flavor::Mysql), recorded);
}

/// MariaDB 10.5 leaves the default collation out; MariaDB 11.x and releases since November 2022
/// always print it. Engine-defined options (encryption here) keep their quoted names.
#[test]
fn mariadb_releases_meet_on_collate_and_engine_options() {
    let mut model = table("secret", "latin1", "latin1_swedish_ci");
    model.columns = vec![column("a", "int(11)", true, Some("NULL"))];
    model.options = vec![
        TableOption {
            name: "ENCRYPTED".to_owned(),
            value: "YES".to_owned(),
            engine_defined: true,
        },
        TableOption {
            name: "ENCRYPTION_KEY_ID".to_owned(),
            value: "2".to_owned(),
            engine_defined: true,
        },
    ];
    let rendered = render::render_table(&model, Flavor::Mariadb);
    for recorded in [
        "CREATE TABLE `secret` (\n  `a` int(11) DEFAULT NULL\n) ENGINE=InnoDB DEFAULT CHARSET=latin1 `ENCRYPTED`=YES `ENCRYPTION_KEY_ID`=2",
        "CREATE TABLE `secret` (\n  `a` int(11) DEFAULT NULL\n) ENGINE=InnoDB DEFAULT CHARSET=latin1 COLLATE=latin1_swedish_ci `ENCRYPTED`=YES `ENCRYPTION_KEY_ID`=2",
    ] {
        assert_eq!(
            normalize::table(recorded, &model, Flavor::Mariadb).unwrap(),
            rendered
        );
    }
}

#[test]
fn version_comments_keep_their_clauses() {
    assert_eq!(
        mysql::unwrap_version_comments(
            "CREATE DATABASE `d` /*!40100 DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_ai_ci */ /*!80016 DEFAULT ENCRYPTION='N' */"
        ),
        "CREATE DATABASE `d` DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_ai_ci DEFAULT ENCRYPTION='N'"
    );
}

/// MySQL puts the definer after `ALGORITHM=` in a view and after `CREATE` elsewhere, and
/// MariaDB roles have no host; the definer goes wherever it is.
#[test]
fn definers_are_taken_out_wherever_they_are() {
    assert_eq!(
        normalize::view(
            "CREATE ALGORITHM=UNDEFINED DEFINER=`root`@`localhost` SQL SECURITY DEFINER VIEW `v` AS select `d`.`t`.`a` AS `a` from `d`.`t`",
            "d"
        )
        .unwrap(),
        "CREATE ALGORITHM=UNDEFINED SQL SECURITY DEFINER VIEW `v` AS select `t`.`a` AS `a` from `t`"
    );
    assert_eq!(
        normalize::strip_definer("CREATE DEFINER=`app_role` PROCEDURE `p`()\nSELECT 1").unwrap(),
        "CREATE PROCEDURE `p`()\nSELECT 1"
    );
    assert_eq!(
        normalize::event(
            "CREATE DEFINER=`root`@`localhost` EVENT `e` ON SCHEDULE EVERY 1 DAY STARTS '2030-01-01 00:00:00' ON COMPLETION NOT PRESERVE DISABLE ON REPLICA COMMENT 'x' DO DELETE FROM t"
        )
        .unwrap(),
        "CREATE EVENT `e` ON SCHEDULE EVERY 1 DAY STARTS '2030-01-01 00:00:00' ON COMPLETION NOT PRESERVE DISABLE ON SLAVE COMMENT 'x' DO DELETE FROM t"
    );
    let trigger = Trigger {
        name: "ins_sum".to_owned(),
        table: "account".to_owned(),
        timing: "BEFORE".to_owned(),
        event: "INSERT".to_owned(),
        action_order: 1,
        body: "SET @sum = @sum + NEW.amount".to_owned(),
        definer: "root@localhost".to_owned(),
        sql_mode: String::new(),
    };
    assert_eq!(
        normalize::trigger(
            "CREATE DEFINER=`root`@`localhost` TRIGGER `ins_sum` BEFORE INSERT ON `account` FOR EACH ROW SET @sum = @sum + NEW.amount",
            "d",
            ""
        )
        .unwrap(),
        render::render_trigger(&trigger, None)
    );
}

fn routine(kind: RoutineKind, parameters: &[(Option<&str>, &str, &str)]) -> Routine {
    Routine {
        name: "r".to_owned(),
        kind,
        parameters: parameters
            .iter()
            .map(|(mode, name, data_type)| Parameter {
                mode: mode.map(str::to_owned),
                name: (*name).to_owned(),
                data_type: (*data_type).to_owned(),
            })
            .collect(),
        parameter_list: String::new(),
        returns: None,
        deterministic: true,
        data_access: "READS SQL DATA".to_owned(),
        security: "INVOKER".to_owned(),
        comment: "x".to_owned(),
        body: "BEGIN\n  SELECT a;\nEND".to_owned(),
        definer: "root@localhost".to_owned(),
        sql_mode: String::new(),
    }
}

/// MySQL 8 procedures and functions: the definer goes, `RETURNS` keeps MySQL's spelling and a
/// return type's implicit collation is written out; the parameters as written are checked
/// against the catalog's.
#[test]
fn mysql_8_routines_meet_their_models() {
    let mut procedure = routine(
        RoutineKind::Procedure,
        &[(Some("IN"), "a", "int"), (Some("OUT"), "b", "varchar(10)")],
    );
    let text = normalize::routine(
        "CREATE DEFINER=`root`@`localhost` PROCEDURE `r`(IN a INT, out `b` varchar(10))\n    READS SQL DATA\n    DETERMINISTIC\n    SQL SECURITY INVOKER\n    COMMENT 'x'\nBEGIN\n  SELECT a;\nEND",
        &procedure,
        "d",
        Flavor::Mysql,
    )
    .unwrap();
    assert!(normalize::parameters_match(
        &procedure,
        &text.parameter_list
    ));
    procedure.parameter_list = text.parameter_list;
    assert_eq!(text.canonical, render::render_routine(&procedure));

    let mut function = routine(RoutineKind::Function, &[(None, "x", "int")]);
    function.returns = Some("varchar(20) CHARSET utf8mb4 COLLATE utf8mb4_0900_ai_ci".to_owned());
    function.body = "RETURN concat(x, 'a')".to_owned();
    let text = normalize::routine(
        "CREATE DEFINER=`app`@`%` FUNCTION `r`(x int) RETURNS varchar(20) CHARSET utf8mb4\n    READS SQL DATA\n    DETERMINISTIC\n    SQL SECURITY INVOKER\n    COMMENT 'x'\nRETURN concat(x, 'a')",
        &function,
        "d",
        Flavor::Mysql,
    )
    .unwrap();
    assert!(normalize::parameters_match(&function, &text.parameter_list));
    function.parameter_list = text.parameter_list;
    assert_eq!(text.canonical, render::render_routine(&function));

    // A parameter list that does not declare the catalog's parameters is not this routine's.
    assert!(!normalize::parameters_match(&function, "y int"));
    assert!(!normalize::parameters_match(&function, ""));
}

/// Every collation clause MySQL 8.0 and 8.4 print for a column (their `SHOW CREATE TABLE` prints
/// `CHARACTER SET` where the column's collation is not the table's or was given explicitly, and
/// `COLLATE` where the collation is not its character set's default, was given explicitly, or is
/// `utf8mb4_0900_ai_ci` in a table of another collation) meets the one canonical clause of the
/// same column; a clause naming another collation than the catalog's does not.
#[test]
fn every_collation_clause_mysql_prints_meets_the_canonical_one() {
    let mut model = table("t", "utf8mb4", "utf8mb4_bin");
    let text_column = |name: &str, charset: &str, collation: &str| {
        column_from_catalog(
            Flavor::Mysql,
            ColumnRow {
                name: name.to_owned(),
                column_type: "varchar(5)".to_owned(),
                nullable: true,
                charset: Some(charset.to_owned()),
                collation: Some(collation.to_owned()),
                ..ColumnRow::default()
            },
        )
        .unwrap()
    };
    model.columns = vec![
        text_column("same", "utf8mb4", "utf8mb4_bin"),
        text_column("explicit", "utf8mb4", "utf8mb4_bin"),
        text_column("ai", "utf8mb4", "utf8mb4_0900_ai_ci"),
        text_column("general", "utf8mb4", "utf8mb4_general_ci"),
        text_column("latin", "latin1", "latin1_swedish_ci"),
        text_column("cp", "cp1250", "cp1250_general_ci"),
    ];
    let printed = concat!(
        "CREATE TABLE `t` (\n",
        "  `same` varchar(5) COLLATE utf8mb4_bin DEFAULT NULL,\n",
        "  `explicit` varchar(5) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL,\n",
        "  `ai` varchar(5) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_ai_ci DEFAULT NULL,\n",
        "  `general` varchar(5) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci DEFAULT NULL,\n",
        "  `latin` varchar(5) CHARACTER SET latin1 DEFAULT NULL,\n",
        "  `cp` varchar(5) CHARACTER SET cp1250 COLLATE cp1250_general_ci DEFAULT NULL\n",
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
    );
    let canonical = concat!(
        "CREATE TABLE `t` (\n",
        "  `same` varchar(5) DEFAULT NULL,\n",
        "  `explicit` varchar(5) DEFAULT NULL,\n",
        "  `ai` varchar(5) COLLATE utf8mb4_0900_ai_ci DEFAULT NULL,\n",
        "  `general` varchar(5) COLLATE utf8mb4_general_ci DEFAULT NULL,\n",
        "  `latin` varchar(5) CHARACTER SET latin1 COLLATE latin1_swedish_ci DEFAULT NULL,\n",
        "  `cp` varchar(5) CHARACTER SET cp1250 COLLATE cp1250_general_ci DEFAULT NULL\n",
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
    );
    assert_eq!(
        normalize::table(printed, &model, Flavor::Mysql).as_deref(),
        Some(canonical)
    );
    assert_eq!(render::render_table(&model, Flavor::Mysql), canonical);
    // The text describes another column than the catalog's.
    let other = printed.replace("COLLATE utf8mb4_general_ci", "COLLATE utf8mb4_unicode_ci");
    assert_eq!(normalize::table(&other, &model, Flavor::Mysql), None);
    let other = printed.replace("CHARACTER SET latin1", "CHARACTER SET ascii");
    assert_eq!(normalize::table(&other, &model, Flavor::Mysql), None);
}

/// MySQL prints a partition or subpartition name bare unless it reads as one of its keywords
/// or not as a name (all digits, characters outside its unquoted identifiers); which names it
/// quotes is read from the text, so every spelling it prints renders back byte for byte. Names
/// with characters from U+0080 on are bare, as in MySQL's unquoted identifiers. MariaDB quotes
/// every name, and its model records nothing of it.
#[test]
fn mysql_partition_names_keep_the_quotes_mysql_gives_them() {
    let mut model = table("t", "utf8mb4", "utf8mb4_0900_ai_ci");
    model.columns = vec![
        column("id", "int", false, None),
        column("y", "int", false, None),
    ];
    let sub = |name: &str| Subpartition {
        name: name.to_owned(),
        comment: String::new(),
        quoted: false,
    };
    let partition = |name: &str, values: &str, subs: Vec<Subpartition>| Partition {
        name: name.to_owned(),
        values: Some(values.to_owned()),
        default: false,
        comment: String::new(),
        subpartitions: subs,
        quoted: false,
    };
    model.partitioning = Some(Partitioning {
        method: "RANGE".to_owned(),
        system_time: None,
        expression: "`y`".to_owned(),
        subpartition_method: Some("HASH".to_owned()),
        subpartition_expression: Some("`id`".to_owned()),
        partitions: vec![
            partition("current", "2024", vec![sub("s0"), sub("year")]),
            partition("été", "MAXVALUE", vec![sub("s2"), sub("2025")]),
        ],
    });
    let printed = concat!(
        "CREATE TABLE `t` (\n",
        "  `id` int NOT NULL,\n",
        "  `y` int NOT NULL\n",
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci\n",
        "/*!50100 PARTITION BY RANGE (`y`)\n",
        "SUBPARTITION BY HASH (`id`)\n",
        "(PARTITION `current` VALUES LESS THAN (2024)\n",
        " (SUBPARTITION s0 ENGINE = InnoDB,\n",
        "  SUBPARTITION `year` ENGINE = InnoDB),\n",
        " PARTITION été VALUES LESS THAN MAXVALUE\n",
        " (SUBPARTITION s2 ENGINE = InnoDB,\n",
        "  SUBPARTITION `2025` ENGINE = InnoDB)) */"
    );
    let mut mariadb = model.clone();
    normalize::table_facts(printed, &mut model, Flavor::Mysql).unwrap();
    let partitions = &model.partitioning.as_ref().unwrap().partitions;
    assert!(partitions[0].quoted && !partitions[1].quoted);
    assert!(!partitions[0].subpartitions[0].quoted && partitions[0].subpartitions[1].quoted);
    assert_eq!(render::render_table(&model, Flavor::Mysql), printed);
    assert_eq!(
        normalize::table(printed, &model, Flavor::Mysql).as_deref(),
        Some(printed)
    );
    let back: Table = serde_json::from_str(&serde_json::to_string(&model).unwrap()).unwrap();
    assert_eq!(back, model);
    // A release that does not count `current` as a keyword prints it bare, and that spelling
    // meets its own reading too.
    let bare = printed.replace("PARTITION `current`", "PARTITION current");
    let mut other = mariadb.clone();
    normalize::table_facts(&bare, &mut other, Flavor::Mysql).unwrap();
    assert_eq!(render::render_table(&other, Flavor::Mysql), bare);
    // MariaDB's quotes are its spelling of every name, not a fact about the name.
    normalize::table_facts(printed, &mut mariadb, Flavor::Mariadb).unwrap();
    assert!(!serde_json::to_string(&mariadb).unwrap().contains("quoted"));
}
