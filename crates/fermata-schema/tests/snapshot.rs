//! Table snapshots against the MariaDB server the test command provisions: a corpus of tables
//! with most column, key and constraint clauses, odd names and reserved words renders to
//! canonical files that match the server's own definitions; the same schema created in another
//! order, with other counters and session settings, gives byte-identical files and hash; a change
//! between a snapshot and its verification is caught as retryable; what the model cannot
//! represent yet (sequences, triggers, routines, events) fails the database as unsupported
//! rather than being left out.

mod support;

use fermata_schema::snapshot::{snapshot, verify_live};
use fermata_store::schema::{DatabaseName, ErrorCode};
use sqlx::Executor;
use support::{
    CORPUS, admin, connections, connections_after, create_database, quoted, take, text, unique,
};

/// The same schema, created differently: tables in another order, keys added afterwards in
/// another order, other counters.
const REORDERED: &[&str] = &[
    "CREATE TABLE `parent` (id int NOT NULL AUTO_INCREMENT, code varchar(20) COLLATE utf8mb4_bin NOT NULL, \
        PRIMARY KEY (id), UNIQUE KEY uc (code)) ENGINE=InnoDB AUTO_INCREMENT=900 DEFAULT CHARSET=utf8mb4",
    "CREATE TABLE `We``ird Tåble` (a int NOT NULL, c int CHECK (c > 0), d datetime(3) NULL, \
        e int NOT NULL DEFAULT (a + 1), f int INVISIBLE, g blob, h json, i float(7,3), \
        j double, k bit(3) DEFAULT b'101', l set('x','y') NOT NULL DEFAULT 'x,y') \
        ENGINE=InnoDB DEFAULT CHARSET=latin1 ROW_FORMAT=COMPRESSED",
    "ALTER TABLE `We``ird Tåble` ADD CONSTRAINT f3 FOREIGN KEY (c) REFERENCES parent(id), \
        ADD KEY `kk` (c), ADD UNIQUE KEY (a), \
        ADD CONSTRAINT f2 FOREIGN KEY (a) REFERENCES parent(id) ON DELETE NO ACTION",
    "CREATE TABLE `order` ( \
        `select` bigint unsigned NOT NULL AUTO_INCREMENT, \
        name varchar(100) DEFAULT NULL COMMENT 'the name, it''s quoted', \
        price decimal(10,2) NOT NULL DEFAULT 0.00, \
        created timestamp NOT NULL DEFAULT current_timestamp() ON UPDATE current_timestamp(), \
        note text, \
        flag tinyint(1) NOT NULL DEFAULT 1, \
        kind enum('a','b''c') DEFAULT 'a', \
        total int GENERATED ALWAYS AS (price*2) VIRTUAL, \
        stored_total int GENERATED ALWAYS AS (price*3) STORED, \
        pid int, \
        `naïve col` char(3) CHARACTER SET latin1 NOT NULL DEFAULT '', \
        FULLTEXT KEY ft (note), \
        CONSTRAINT chk_price CHECK (price >= 0), \
        KEY k2 (price DESC, name) COMMENT 'idx', \
        PRIMARY KEY (`select`), \
        KEY k_name (name(10)), \
        CONSTRAINT fk_p FOREIGN KEY (pid) REFERENCES parent (id) ON DELETE SET NULL ON UPDATE CASCADE \
     ) ENGINE=InnoDB AUTO_INCREMENT=77777 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci COMMENT='orders'",
    "INSERT INTO `order` (name, price) VALUES ('x', 1.00)",
    "CREATE OR REPLACE VIEW `cheap orders` AS SELECT `select`, name FROM `order` WHERE price < 10",
    "CREATE VIEW `cheap names` AS SELECT name FROM `cheap orders`",
    "CREATE ALGORITHM=MERGE SQL SECURITY INVOKER VIEW `Wide` AS SELECT o.name AS x, p.code \
        FROM `order` o JOIN parent p ON p.id = o.pid WITH CASCADED CHECK OPTION",
];

/// Session settings that would change `SHOW CREATE` output, were they left in place.
const ODD_SESSION: &str = "SET SESSION sql_mode = 'ANSI_QUOTES,NO_FIELD_OPTIONS,NO_KEY_OPTIONS,NO_TABLE_OPTIONS', sql_quote_show_create = 0";

#[tokio::test]
async fn the_corpus_snapshots_and_matches_the_server() {
    let mut admin = admin().await;
    let database = unique("snap");
    create_database(&mut admin, &database, CORPUS).await;
    let snapshot = take(&database, 3).await.unwrap();
    let paths: Vec<&str> = snapshot.files.keys().map(String::as_str).collect();
    assert_eq!(
        paths,
        [
            "manifest.json",
            "schema.json",
            "tables/^we%60ird%20^t%C3%A5ble.sql",
            "tables/order.sql",
            "tables/parent.sql",
            "views/^wide.sql",
            "views/cheap%20names.sql",
            "views/cheap%20orders.sql",
        ]
    );
    assert_eq!(
        text(&snapshot.files, "views/^wide.sql"),
        "CREATE ALGORITHM=MERGE SQL SECURITY INVOKER VIEW `Wide` AS select `o`.`name` AS `x`,\
         `p`.`code` AS `code` from (`order` `o` join `parent` `p` on(`p`.`id` = `o`.`pid`)) \
         WITH CASCADED CHECK OPTION\n"
    );
    let schema_json = text(&snapshot.files, "schema.json");
    assert!(schema_json.contains("\"definer\""), "{schema_json}");
    assert!(!text(&snapshot.files, "views/cheap%20orders.sql").contains("DEFINER="));
    let order = text(&snapshot.files, "tables/order.sql");
    assert!(!order.contains("AUTO_INCREMENT="), "{order}");
    // The primary key first, then the others by name, whatever order the server keeps.
    assert!(
        order.contains(
            "  PRIMARY KEY (`select`),\n  KEY `fk_p` (`pid`),\n  FULLTEXT KEY `ft` (`note`),\n  \
             KEY `k2` (`price` DESC,`name`) COMMENT 'idx',\n  KEY `k_name` (`name`(10)),"
        ),
        "{order}"
    );
    assert!(
        order.ends_with("COLLATE=utf8mb4_unicode_ci COMMENT='orders'\n"),
        "{order}"
    );
    assert_eq!(
        text(&snapshot.files, "tables/parent.sql"),
        "CREATE TABLE `parent` (\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n  \
         `code` varchar(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,\n  \
         PRIMARY KEY (`id`),\n  UNIQUE KEY `uc` (`code`)\n) \
         ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci\n"
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&text(&snapshot.files, "manifest.json")).unwrap();
    assert_eq!(manifest["snapshot_hash"], snapshot.snapshot_hash.as_str());
    assert_eq!(manifest["counts"]["tables"], 3);
    assert_eq!(manifest["counts"]["views"], 3);
    admin
        .execute(format!("DROP DATABASE {}", quoted(&database)).as_str())
        .await
        .unwrap();
}

#[tokio::test]
async fn the_same_schema_made_differently_gives_identical_files() {
    let mut admin = admin().await;
    let database = unique("det");
    create_database(&mut admin, &database, CORPUS).await;
    let first = take(&database, 1).await.unwrap();
    create_database(&mut admin, &database, REORDERED).await;
    let mut odd = connections_after(4, Some(ODD_SESSION)).await;
    let second = snapshot(
        &mut odd,
        &DatabaseName::new(database.clone()).unwrap(),
        "test",
    )
    .await
    .unwrap();
    for (path, content) in &first.files {
        assert_eq!(
            Some(content),
            second.files.get(path),
            "{path} differs:\n{}\n---\n{}",
            String::from_utf8_lossy(content),
            second
                .files
                .get(path)
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .unwrap_or_default()
        );
    }
    assert_eq!(first.files.len(), second.files.len());
    assert_eq!(first.snapshot_hash, second.snapshot_hash);
    admin
        .execute(format!("DROP DATABASE {}", quoted(&database)).as_str())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_change_between_snapshot_and_verification_is_caught_and_a_retry_passes() {
    let mut admin = admin().await;
    let database = unique("drift");
    create_database(&mut admin, &database, CORPUS).await;
    let name = DatabaseName::new(database.clone()).unwrap();
    let candidate = take(&database, 2).await.unwrap();
    let mut verifier = connections(1).await.pop().unwrap();
    verify_live(&mut verifier, &name, &candidate, "test")
        .await
        .unwrap();

    // Someone alters a table after the candidate was taken.
    admin
        .execute("ALTER TABLE parent ADD COLUMN added int")
        .await
        .unwrap();
    let error = verify_live(&mut verifier, &name, &candidate, "test")
        .await
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::SchemaChanged);
    assert!(error.retryable());
    // The retry takes a new candidate, which verifies.
    let retried = take(&database, 2).await.unwrap();
    assert_ne!(retried.snapshot_hash, candidate.snapshot_hash);
    verify_live(&mut verifier, &name, &retried, "test")
        .await
        .unwrap();
    admin
        .execute(format!("DROP DATABASE {}", quoted(&database)).as_str())
        .await
        .unwrap();
}

#[tokio::test]
async fn what_the_model_cannot_hold_is_unsupported() {
    let mut admin = admin().await;
    for extra in [
        "CREATE SEQUENCE s",
        "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1",
        "CREATE PROCEDURE p() SELECT 1",
        "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO SELECT 1",
    ] {
        let database = unique("more");
        create_database(&mut admin, &database, &["CREATE TABLE t (a int)", extra]).await;
        let error = take(&database, 1).await.unwrap_err();
        assert_eq!(error.code(), ErrorCode::UnsupportedSchemaOutput, "{extra}");
        assert!(!error.retryable());
        admin
            .execute(format!("DROP DATABASE {}", quoted(&database)).as_str())
            .await
            .unwrap();
    }
}
