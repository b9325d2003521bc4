//! Snapshots against the MariaDB server the test command provisions: a corpus of every object
//! kind (tables with most column, key, constraint, option and partitioning clauses, views,
//! sequences, procedures and functions, triggers, events), odd names and reserved words renders
//! to canonical files that match the server's own definitions (recorded with `insta`; that they
//! rebuild the schema in an empty database is `tests/workspace.rs`'s); the same schema created in another
//! order, with other counters, sequence values and session settings, gives byte-identical files
//! and hash; a snapshot stays within its query budget; a change between a snapshot and its
//! verification is caught as retryable, a verification stays within its own budget; what the model still cannot represent fails the
//! database as unsupported rather than being left out.

use crate::support;

use fermata_schema::snapshot::{DatabaseSnapshot, snapshot, verify_live};
use fermata_store::schema::{DatabaseName, ErrorCode};
use sqlx::Executor;
use sqlx::mysql::MySqlConnection;
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
    "CREATE TABLE `parts by range` (a int NOT NULL, b date NOT NULL) \
        PARTITION BY RANGE (a) (PARTITION p0 VALUES LESS THAN (10) COMMENT 'first', \
        PARTITION `p 1` VALUES LESS THAN MAXVALUE)",
    "CREATE TABLE parts_list (a int, b varchar(5)) PARTITION BY LIST COLUMNS (a, b) \
        (PARTITION p0 VALUES IN ((1,'a'),(2,'b')), PARTITION p1 VALUES IN ((3,'c')))",
    "CREATE TABLE parts_hash (a int) PARTITION BY HASH (a) PARTITIONS 4",
    "CREATE TABLE parts_key (a int PRIMARY KEY) PARTITION BY LINEAR KEY (a) PARTITIONS 3",
    "CREATE TABLE parts_sub (a int, b date) PARTITION BY RANGE (year(b)) \
        SUBPARTITION BY HASH (a) SUBPARTITIONS 2 \
        (PARTITION p0 VALUES LESS THAN (2000), PARTITION p1 VALUES LESS THAN MAXVALUE)",
    "CREATE TABLE parts_named (a int, b date) PARTITION BY RANGE COLUMNS (b) SUBPARTITION BY KEY (a) \
        (PARTITION p0 VALUES LESS THAN ('2000-01-01') (SUBPARTITION s0, SUBPARTITION s1), \
        PARTITION p1 VALUES LESS THAN (MAXVALUE) (SUBPARTITION s2, SUBPARTITION s3))",
    "CREATE TABLE parts_in (a int) PARTITION BY LIST (a) (PARTITION p0 VALUES IN (1,2,NULL), \
        PARTITION p1 VALUES IN (3))",
    "CREATE TABLE `opts` (a int, ts timestamp NOT NULL DEFAULT '2020-01-01 00:00:00', \
        s varchar(5) DEFAULT concat('a','b')) ENGINE=InnoDB ROW_FORMAT=COMPRESSED \
        KEY_BLOCK_SIZE=8 STATS_PERSISTENT=1 STATS_AUTO_RECALC=0 STATS_SAMPLE_PAGES=25 PACK_KEYS=1 \
        CHECKSUM=1 DELAY_KEY_WRITE=1 MAX_ROWS=1000 MIN_ROWS=10 AVG_ROW_LENGTH=100 COMMENT='c'",
    "CREATE TABLE `page.compressed/x` (a int) ENGINE=InnoDB PAGE_COMPRESSED=1 \
        PAGE_COMPRESSION_LEVEL=3 COMMENT='cc' STATS_PERSISTENT=0",
    "CREATE TABLE `.aria` (a int) ENGINE=Aria TRANSACTIONAL=1 PAGE_CHECKSUM=1",
    "CREATE TABLE `Mixed` (a int) ENGINE=MyISAM CHECKSUM=1 DELAY_KEY_WRITE=1 PACK_KEYS=0",
    "CREATE TABLE `mixed` (a int)",
    "CREATE TABLE `a_name_of_sixty_four_characters_which_is_the_longest_mysql_allow` (a int)",
    "CREATE SEQUENCE `seq` START WITH 10 INCREMENT BY 5 MINVALUE 1 MAXVALUE 1000 CACHE 20 CYCLE",
    "CREATE SEQUENCE `Seq Two` NOCACHE COMMENT='seq c'",
    "CREATE PROCEDURE `p q`(IN a int, OUT b varchar(10) CHARSET latin1, INOUT c decimal(5,2)) \
        DETERMINISTIC READS SQL DATA SQL SECURITY INVOKER COMMENT 'it''s a proc' \
        BEGIN\n  SELECT a INTO c;\n  SET b = 'x';\nEND",
    "CREATE PROCEDURE `order`(  in   A   INTEGER ,  b BOOL, `c d` DEC(5,2)) MODIFIES SQL DATA \
        BEGIN UPDATE `order` SET flag = b WHERE `select` = A; END",
    "CREATE FUNCTION `order`(x int) RETURNS varchar(20) CHARSET utf8mb4 COLLATE utf8mb4_bin \
        NO SQL RETURN concat(x, 'é')",
    "CREATE FUNCTION `naïve fn`() RETURNS INTEGER DETERMINISTIC RETURN 1",
    "SELECT NEXTVAL(`seq`), NEXTVAL(`seq`), NEXTVAL(`Seq Two`)",
    "create  trigger `tr.second` before insert on `order` for each row SET NEW.note = 'x'",
    "CREATE DEFINER = CURRENT_USER TRIGGER first_set BEFORE INSERT ON `order` FOR EACH ROW \
        FOLLOWS `tr.second` SET NEW.flag = 1",
    "CREATE TRIGGER `Audit` AFTER DELETE ON parent FOR EACH ROW \
        BEGIN\n  INSERT INTO `mixed` VALUES (OLD.id);\nEND",
    "CREATE EVENT `every 90` ON SCHEDULE EVERY '1:30' HOUR_MINUTE STARTS '2030-01-01 10:00:00' \
        DISABLE ON SLAVE DO BEGIN SELECT 1; END",
    "CREATE EVENT once ON SCHEDULE AT '2035-01-01 00:00:00' DO DELETE FROM `mixed`",
    "CREATE EVENT `nightly` ON SCHEDULE EVERY 1 DAY STARTS '2030-01-01 00:00:00' \
        ENDS '2031-01-01 00:00:00' ON COMPLETION PRESERVE DISABLE COMMENT 'ev' DO DELETE FROM `mixed`",
];

/// Session settings that would change `SHOW CREATE` output, were they left in place.
const ODD_SESSION: &str = "SET SESSION sql_mode = 'ANSI_QUOTES,NO_FIELD_OPTIONS,NO_KEY_OPTIONS,NO_TABLE_OPTIONS', \
     sql_quote_show_create = 0, time_zone = '+09:00', character_set_client = latin1, \
     character_set_results = latin1";

/// Every file of a snapshot but the manifest and the model, each after a header line with its
/// path, for the `insta` snapshot.
fn sql_files(snapshot: &DatabaseSnapshot) -> String {
    snapshot
        .files
        .iter()
        .filter(|(path, _)| path.ends_with(".sql"))
        .map(|(path, content)| format!("-- {path}\n{}", String::from_utf8_lossy(content)))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn drop_database(admin: &mut MySqlConnection, database: &str) {
    admin
        .execute(format!("DROP DATABASE {}", quoted(database)).as_str())
        .await
        .unwrap();
}

#[tokio::test]
async fn the_corpus_snapshots_and_matches_the_server() {
    let mut admin = admin().await;
    // A fixed name, used by this test only, so that the recorded files and hash are stable.
    let database = "fm_corpus_files";
    create_database(&mut admin, database, CORPUS).await;
    let snapshot = take(database, 3).await.unwrap();
    let paths: Vec<&str> = snapshot.files.keys().map(String::as_str).collect();
    for expected in [
        "events/every%2090.sql",
        "routines/function.order.sql",
        "routines/procedure.order.sql",
        "sequences/^seq%20^two.sql",
        "tables/%2Earia.sql",
        "tables/^mixed.sql",
        "tables/mixed.sql",
        "tables/page%2Ecompressed%2Fx.sql",
        "triggers/tr%2Esecond.sql",
        "views/^wide.sql",
    ] {
        assert!(paths.contains(&expected), "no {expected} in {paths:?}");
    }
    assert_eq!(
        text(&snapshot.files, "views/^wide.sql"),
        "CREATE ALGORITHM=MERGE SQL SECURITY INVOKER VIEW `Wide` AS select `o`.`name` AS `x`,\
         `p`.`code` AS `code` from (`order` `o` join `parent` `p` on(`p`.`id` = `o`.`pid`)) \
         WITH CASCADED CHECK OPTION\n"
    );
    let schema_json = text(&snapshot.files, "schema.json");
    assert!(schema_json.contains("\"definer\""), "{schema_json}");
    for (path, content) in snapshot
        .files
        .iter()
        .filter(|(path, _)| path.ends_with(".sql"))
    {
        let content = String::from_utf8_lossy(content);
        assert!(!content.contains("DEFINER="), "{path}: {content}");
        assert!(!content.contains(database), "{path} names its database");
    }
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
    let manifest: serde_json::Value =
        serde_json::from_str(&text(&snapshot.files, "manifest.json")).unwrap();
    assert_eq!(manifest["snapshot_hash"], snapshot.snapshot_hash.as_str());
    assert_eq!(manifest["counts"]["tables"], 16);
    assert_eq!(manifest["counts"]["views"], 3);
    assert_eq!(manifest["counts"]["sequences"], 2);
    assert_eq!(manifest["counts"]["routines"], 4);
    assert_eq!(manifest["counts"]["triggers"], 3);
    assert_eq!(manifest["counts"]["events"], 3);
    insta::assert_snapshot!("corpus_files", sql_files(&snapshot));
    insta::assert_snapshot!("corpus_schema_json", schema_json);
    insta::assert_snapshot!("corpus_manifest", text(&snapshot.files, "manifest.json"));
    drop_database(&mut admin, database).await;
}

/// The objects of a snapshot, each one `SHOW CREATE`.
fn objects(snapshot: &DatabaseSnapshot) -> usize {
    let model = &snapshot.model;
    model.tables.len()
        + model.views.len()
        + model.sequences.len()
        + model.routines.len()
        + model.triggers.len()
        + model.events.len()
}

/// The statements a connection's session has run so far.
async fn questions(connection: &mut MySqlConnection) -> u64 {
    let row = sqlx::query("SHOW SESSION STATUS LIKE 'Questions'")
        .fetch_one(&mut *connection)
        .await
        .unwrap();
    let value: String = sqlx::Row::try_get(&row, 1).unwrap();
    value.parse().unwrap()
}

#[tokio::test]
async fn a_snapshot_costs_at_most_its_objects_plus_fourteen_queries() {
    let mut admin = admin().await;
    let database = unique("budget");
    create_database(&mut admin, &database, CORPUS).await;
    let mut connections = connections(3).await;
    let mut before = Vec::new();
    for connection in &mut connections {
        // Reading the counter is itself a statement: read it twice to know what one costs.
        let first = questions(connection).await;
        before.push((
            questions(connection).await,
            questions(connection).await - first,
        ));
    }
    let taken = snapshot(
        &mut connections,
        &DatabaseName::new(database.clone()).unwrap(),
        "test",
    )
    .await
    .unwrap();
    let mut used = 0;
    for (connection, (count, reading)) in connections.iter_mut().zip(before) {
        used += questions(connection).await - count - reading;
    }
    let objects = u64::try_from(objects(&taken)).unwrap();
    assert!(used >= objects, "{used} queries for {objects} objects");
    assert!(used <= objects + 14, "{used} queries for {objects} objects");
    drop_database(&mut admin, &database).await;
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
    drop_database(&mut admin, &database).await;
}

#[tokio::test]
async fn a_change_between_snapshot_and_verification_is_caught_and_a_retry_passes() {
    let mut admin = admin().await;
    let database = unique("drift");
    create_database(&mut admin, &database, CORPUS).await;
    let name = DatabaseName::new(database.clone()).unwrap();
    let mut candidate = take(&database, 2).await.unwrap();
    let mut verifiers = connections(2).await;
    verify_live(&mut verifiers, &name, &candidate, "test")
        .await
        .unwrap();

    // Someone changes an object after the candidate was taken; each change is caught, and the
    // retry takes a new candidate, which verifies. The verifier reads the tables and views only
    // through their `SHOW CREATE`, so every part of a table's definition is changed once.
    let in_database = format!("ALTER DATABASE {} CHARACTER SET latin1", quoted(&database));
    let changes: &[&[&str]] = &[
        &["ALTER TABLE parent ADD COLUMN added int"],
        &["ALTER TABLE `order` ALTER COLUMN price SET DEFAULT 1.00"],
        &[
            "ALTER TABLE `order` MODIFY `naïve col` char(3) CHARACTER SET latin1 \
            COLLATE latin1_bin NOT NULL DEFAULT ''",
        ],
        &["ALTER TABLE `We``ird Tåble` ADD CONSTRAINT c2 CHECK (a > 1)"],
        &[
            "ALTER TABLE `order` DROP FOREIGN KEY fk_p",
            "ALTER TABLE `order` ADD CONSTRAINT fk_p FOREIGN KEY (pid) REFERENCES parent (id) \
                ON DELETE CASCADE ON UPDATE CASCADE",
        ],
        &["ALTER TABLE `order` ADD KEY k3 (flag)"],
        &["ALTER TABLE parent COMMENT 'now commented'"],
        &["ALTER TABLE parts_hash PARTITION BY HASH (a) PARTITIONS 5"],
        &["ALTER ALGORITHM=TEMPTABLE VIEW `cheap names` AS SELECT name FROM `cheap orders`"],
        &["ALTER SEQUENCE seq INCREMENT BY 7"],
        &["CREATE TABLE `added table` (a int)"],
        &["DROP TABLE `mixed`"],
        &[
            "DROP VIEW `cheap names`",
            "CREATE TABLE `cheap names` (name varchar(100))",
        ],
        &["DROP SEQUENCE `Seq Two`", "CREATE TABLE `Seq Two` (a int)"],
        &["CREATE VIEW `_v_gho` AS SELECT 1 AS one"],
        &[&in_database],
        &[
            "CREATE OR REPLACE PROCEDURE `p q`(IN a int, OUT b varchar(10) CHARSET latin1, \
            INOUT c decimal(5,2)) DETERMINISTIC READS SQL DATA SQL SECURITY INVOKER \
            COMMENT 'it''s a proc' BEGIN SELECT a INTO c; END",
        ],
        // The same function made again under another `sql_mode`, which only the catalog says.
        &[
            "SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'",
            "CREATE OR REPLACE FUNCTION `naïve fn`() RETURNS INTEGER DETERMINISTIC RETURN 1",
            "SET SESSION sql_mode = DEFAULT",
        ],
        &["CREATE OR REPLACE TRIGGER `Audit` AFTER DELETE ON parent FOR EACH ROW SET @deleted = 1"],
        &["DROP TRIGGER first_set"],
        &["ALTER EVENT once ON SCHEDULE AT '2036-01-01 00:00:00'"],
    ];
    for change in changes {
        for statement in *change {
            admin.execute(*statement).await.unwrap();
        }
        let error = verify_live(&mut verifiers, &name, &candidate, "test")
            .await
            .unwrap_err();
        assert_eq!(error.code(), ErrorCode::SchemaChanged, "{change:?}");
        assert!(error.retryable());
        let retried = take(&database, 2)
            .await
            .unwrap_or_else(|error| panic!("{change:?}: {error:?}"));
        assert_ne!(retried.snapshot_hash, candidate.snapshot_hash, "{change:?}");
        verify_live(&mut verifiers, &name, &retried, "test")
            .await
            .unwrap_or_else(|error| panic!("{change:?}: {error:?}"));
        candidate = retried;
    }
    drop_database(&mut admin, &database).await;
}

/// A table the filter leaves out (an online schema change tool's shadow table) may come and go
/// between the snapshot and its verification: it is no change.
#[tokio::test]
async fn a_shadow_table_made_before_the_verification_is_no_change() {
    let mut admin = admin().await;
    let database = unique("shadow");
    create_database(&mut admin, &database, CORPUS).await;
    let name = DatabaseName::new(database.clone()).unwrap();
    let candidate = take(&database, 2).await.unwrap();
    admin
        .execute("CREATE TABLE `_order_gho` (a int)")
        .await
        .unwrap();
    let mut verifiers = connections(2).await;
    verify_live(&mut verifiers, &name, &candidate, "test")
        .await
        .unwrap();
    drop_database(&mut admin, &database).await;
}

/// MariaDB's `SHOW CREATE TABLE` does not print a column's spatial reference system, so the
/// verifier reads them again.
#[tokio::test]
async fn a_spatial_reference_system_changed_before_the_verification_is_caught() {
    let mut admin = admin().await;
    let database = unique("srid");
    create_database(
        &mut admin,
        &database,
        &["CREATE TABLE `geo` (id int NOT NULL PRIMARY KEY, \
            p POINT REF_SYSTEM_ID=4326 NOT NULL, g GEOMETRY) ENGINE=InnoDB"],
    )
    .await;
    let name = DatabaseName::new(database.clone()).unwrap();
    let candidate = take(&database, 2).await.unwrap();
    let mut verifiers = connections(2).await;
    verify_live(&mut verifiers, &name, &candidate, "test")
        .await
        .unwrap();
    for change in [
        "ALTER TABLE geo MODIFY p POINT REF_SYSTEM_ID=3857 NOT NULL",
        "ALTER TABLE geo MODIFY g GEOMETRY REF_SYSTEM_ID=4326",
    ] {
        admin.execute(change).await.unwrap();
        let error = verify_live(&mut verifiers, &name, &candidate, "test")
            .await
            .unwrap_err();
        assert_eq!(error.code(), ErrorCode::SchemaChanged, "{change}");
    }
    drop_database(&mut admin, &database).await;
}

/// The verifier reads each object's `SHOW CREATE` and, of the catalog, the server, the names of
/// the tables, views and sequences, the sequences' settings and the stored programs: six queries
/// beside the objects for the corpus.
#[tokio::test]
async fn a_live_verification_costs_at_most_its_objects_plus_six_queries() {
    let mut admin = admin().await;
    let database = unique("verified");
    create_database(&mut admin, &database, CORPUS).await;
    let name = DatabaseName::new(database.clone()).unwrap();
    let candidate = take(&database, 3).await.unwrap();
    let mut verifiers = connections(3).await;
    let mut before = Vec::new();
    for connection in &mut verifiers {
        let first = questions(connection).await;
        before.push((
            questions(connection).await,
            questions(connection).await - first,
        ));
    }
    verify_live(&mut verifiers, &name, &candidate, "test")
        .await
        .unwrap();
    let mut used = 0;
    for (connection, (count, reading)) in verifiers.iter_mut().zip(before) {
        used += questions(connection).await - count - reading;
    }
    let objects = u64::try_from(objects(&candidate)).unwrap();
    assert!(used >= objects, "{used} queries for {objects} objects");
    assert!(used <= objects + 6, "{used} queries for {objects} objects");
    drop_database(&mut admin, &database).await;
}

/// Every kind of object captured beyond the first corpus snapshots to canonical files that match
/// the server's own definitions (recorded with `insta`; that they rebuild the schema is
/// `workspace.rs`'s `every_captured_kind_rebuilds_in_the_workspace`).
#[tokio::test]
async fn the_captured_kinds_snapshot_and_match_the_server() {
    let mut admin = admin().await;
    let database = "fm_corpus_captures";
    create_database(&mut admin, database, support::CAPTURES).await;
    let snapshot = take(database, 2).await.unwrap();
    let geo = text(&snapshot.files, "tables/geo.sql");
    assert!(
        geo.contains("`p` point REF_SYSTEM_ID=4326 NOT NULL COMMENT 'wgs84'")
            && geo.contains("SPATIAL KEY `sp` (`p`)"),
        "{geo}"
    );
    let bookings = text(&snapshot.files, "tables/bookings.sql");
    assert!(
        bookings.contains("  PERIOD FOR `stay` (`starts`, `ends`),\n")
            && bookings.contains("UNIQUE KEY `no_double` (`room`,`stay` WITHOUT OVERLAPS)"),
        "{bookings}"
    );
    let listed = text(&snapshot.files, "tables/listed.sql");
    assert!(
        listed.contains("PARTITION `p0` VALUES IN (0)")
            && listed.contains("PARTITION `p other` DEFAULT COMMENT = 'the rest'"),
        "{listed}"
    );
    assert!(text(&snapshot.files, "tables/versioned.sql").ends_with(" WITH SYSTEM VERSIONING\n"));
    // The verifier checks every captured kind's text against the snapshot's model again.
    let name = DatabaseName::new(database).unwrap();
    verify_live(&mut connections(2).await, &name, &snapshot, "test")
        .await
        .unwrap();
    insta::assert_snapshot!("captures_files", sql_files(&snapshot));
    insta::assert_snapshot!("captures_schema_json", text(&snapshot.files, "schema.json"));
    drop_database(&mut admin, database).await;
}

/// Stored programs created under `ANSI_QUOTES` snapshot: their heads are read with `"` quotes,
/// their files name them with backticks and keep the bodies as written (applied under the
/// `sql_mode` that `schema.json` keeps; `workspace.rs` rebuilds them), and they verify.
#[tokio::test]
async fn stored_programs_created_under_ansi_quotes_snapshot_and_verify() {
    let mut admin = admin().await;
    let database = unique("ansi");
    create_database(&mut admin, &database, support::ANSI_PROGRAMS).await;
    let snapshot = take(&database, 2).await.unwrap();
    let file = |prefix: &str| {
        let (path, _) = snapshot
            .files
            .iter()
            .find(|(path, _)| path.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} file"));
        text(&snapshot.files, path)
    };
    let procedure = file("routines/procedure.");
    assert!(
        procedure.starts_with("CREATE PROCEDURE `p \"q\"`(IN \"a b\" int, OUT c int)")
            && procedure.contains("SELECT \"a b\" INTO c"),
        "{procedure}"
    );
    assert!(file("routines/function.").contains("RETURN x || 'y'"));
    let trigger = file("triggers/");
    assert!(
        trigger.starts_with("CREATE TRIGGER `t r` BEFORE INSERT ON `t` FOR EACH ROW ")
            && trigger.contains("SET NEW.\"b c\" = 'z'"),
        "{trigger}"
    );
    assert!(
        snapshot
            .model
            .routines
            .iter()
            .all(|routine| routine.sql_mode.contains("ANSI_QUOTES"))
    );
    let name = DatabaseName::new(database.clone()).unwrap();
    verify_live(&mut connections(2).await, &name, &snapshot, "test")
        .await
        .unwrap();
    drop_database(&mut admin, &database).await;
}

/// What is still not captured is refused by name: the database, the object's kind and name, and
/// a fixed reason. A MERGE table's `UNION=(...)` is in no catalog view.
#[tokio::test]
async fn what_is_not_captured_is_refused_by_name() {
    let mut admin = admin().await;
    let database = unique("refused");
    create_database(
        &mut admin,
        &database,
        &[
            "CREATE TABLE part1 (a int) ENGINE=MyISAM",
            "CREATE TABLE `merged` (a int) ENGINE=MRG_MyISAM UNION=(part1) INSERT_METHOD=LAST",
        ],
    )
    .await;
    let error = take(&database, 1).await.unwrap_err();
    assert_eq!(error.code(), ErrorCode::UnsupportedSchemaOutput);
    assert!(!error.retryable());
    assert_eq!(
        error.message(),
        format!(
            "the schema of database `{database}` cannot be captured faithfully: table `merged`: \
             definition the catalog does not describe exactly"
        )
    );
    drop_database(&mut admin, &database).await;
}

/// An account that may read a database's tables but not its views' definitions (no `SHOW VIEW`)
/// is refused with `PERMISSION_DENIED` naming the view, never `UNSUPPORTED_SCHEMA_OUTPUT`.
#[tokio::test]
async fn a_privilege_missing_on_one_kind_names_the_object() {
    let mut admin = admin().await;
    let database = unique("noview");
    create_database(
        &mut admin,
        &database,
        &[
            "CREATE TABLE t (a int)",
            "CREATE TABLE u (b int)",
            "CREATE VIEW `v` AS SELECT a FROM t",
            "CREATE VIEW `w` AS SELECT b FROM u",
        ],
    )
    .await;
    let (user, password) = support::snapshot_account_named(&mut admin, "nv").await;
    admin
        .execute(
            format!(
                "GRANT SELECT ON {}.* TO '{user}'@'127.0.0.1'",
                support::grant_pattern(&database)
            )
            .as_str(),
        )
        .await
        .unwrap();
    let source = support::settings(&user, &password);
    let mut connection = source.connect().await.unwrap();
    fermata_schema::snapshot::prepare(&mut connection)
        .await
        .unwrap();
    let error = snapshot(
        std::slice::from_mut(&mut connection),
        &DatabaseName::new(database.clone()).unwrap(),
        "test",
    )
    .await
    .unwrap_err();
    assert_eq!(error.code(), ErrorCode::PermissionDenied);
    assert!(!error.retryable());
    // The first view refused is named, though its definition was asked for in one request with
    // the tables' and the next view's, and the connection is ready for its next request.
    assert_eq!(
        error.message(),
        format!("the snapshot account lacks a privilege it needs on `{database}`: view `v`")
    );
    let answer: (i32,) = sqlx::query_as("SELECT 1")
        .fetch_one(&mut connection)
        .await
        .unwrap();
    assert_eq!(answer, (1,));
    drop_database(&mut admin, &database).await;
}

/// `CREATE TABLE t000 (a0 ...)` and on, `count` tables each with its own key column.
fn numbered_tables(count: usize) -> Vec<String> {
    (0..count)
        .map(|i| format!("CREATE TABLE t{i:03} (a{i} int NOT NULL, PRIMARY KEY (a{i}))"))
        .collect()
}

fn as_strs(statements: &[String]) -> Vec<&str> {
    statements.iter().map(String::as_str).collect()
}

/// More objects than one request carries are each read and checked, in order, over one
/// connection, a name with a semicolon and a backtick among them; a second snapshot over the
/// same connection reads them again alike.
#[tokio::test]
async fn objects_beyond_one_request_are_each_read_and_checked() {
    let mut admin = admin().await;
    let database = unique("batches");
    let mut statements = numbered_tables(150);
    statements.push("CREATE TABLE `t070;``x` (semi int)".to_owned());
    statements.extend((0..20).map(|i| format!("CREATE VIEW v{i:02} AS SELECT a{i} FROM t{i:03}")));
    create_database(&mut admin, &database, &as_strs(&statements)).await;
    let name = DatabaseName::new(database.clone()).unwrap();
    let mut connections = connections(1).await;
    let first = snapshot(&mut connections, &name, "test").await.unwrap();
    assert_eq!(first.model.tables.len(), 151);
    assert_eq!(first.model.views.len(), 20);
    for i in [0, 63, 64, 127, 128, 149] {
        let table = text(&first.files, &format!("tables/t{i:03}.sql"));
        assert!(
            table.contains(&format!("`a{i}` int(11) NOT NULL")),
            "{table}"
        );
    }
    let odd = first
        .files
        .values()
        .map(|file| String::from_utf8_lossy(file).into_owned())
        .find(|file| file.starts_with("CREATE TABLE `t070;``x`"))
        .expect("the table named with a semicolon has its file");
    assert!(odd.contains("`semi` int(11)"), "{odd}");
    let again = snapshot(&mut connections, &name, "test").await.unwrap();
    assert_eq!(again.snapshot_hash, first.snapshot_hash);
    drop_database(&mut admin, &database).await;
}

/// A proxy on a loopback port before the test server that clears `CLIENT_MULTI_STATEMENTS` from
/// each client's handshake answer, so the server runs one statement to a request, as some servers
/// and proxies do: its port.
async fn one_statement_proxy() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let upstream = support::admin_options();
    let upstream = (upstream.get_host().to_owned(), upstream.get_port());
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let mut server = tokio::net::TcpStream::connect((upstream.0.as_str(), upstream.1))
                .await
                .unwrap();
            tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                let greeting = packet(&mut server).await;
                client.write_all(&greeting).await.unwrap();
                // The answer's payload opens with the client's capabilities, little-endian:
                // `CLIENT_MULTI_STATEMENTS` is bit 16, the lowest bit of their third byte.
                let mut answer = packet(&mut client).await;
                answer[4 + 2] &= !0x01;
                server.write_all(&answer).await.unwrap();
                tokio::io::copy_bidirectional(&mut client, &mut server)
                    .await
                    .ok();
            });
        }
    });
    port
}

/// One protocol packet read from `stream`: its four-byte header (a three-byte length and a
/// sequence number) and its payload.
async fn packet(stream: &mut tokio::net::TcpStream) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut packet = vec![0; 4];
    stream.read_exact(&mut packet).await.unwrap();
    let length = u32::from_le_bytes([packet[0], packet[1], packet[2], 0]);
    packet.resize(4 + usize::try_from(length).unwrap(), 0);
    stream.read_exact(&mut packet[4..]).await.unwrap();
    packet
}

/// A server that runs one statement to a request refuses the first request of several
/// `SHOW CREATE`s as a syntax error; the snapshot then asks for each definition alone, and gets
/// the same snapshot as over a server that runs them all.
#[tokio::test]
async fn a_server_that_runs_one_statement_a_request_is_asked_one_at_a_time() {
    let mut admin = admin().await;
    let database = unique("one_by_one");
    let mut statements = numbered_tables(70);
    statements.push("CREATE VIEW v AS SELECT a1 FROM t001".to_owned());
    create_database(&mut admin, &database, &as_strs(&statements)).await;
    let options = support::admin_options()
        .port(one_statement_proxy().await)
        .ssl_mode(sqlx::mysql::MySqlSslMode::Disabled);
    let mut connection = sqlx::ConnectOptions::connect(&options).await.unwrap();
    let refused = connection.execute("SELECT 1; SELECT 2").await.unwrap_err();
    let refused = refused.as_database_error().unwrap();
    assert_eq!(
        refused
            .downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
            .number(),
        1064
    );
    fermata_schema::snapshot::prepare(&mut connection)
        .await
        .unwrap();
    let name = DatabaseName::new(database.clone()).unwrap();
    let one_by_one = snapshot(std::slice::from_mut(&mut connection), &name, "test")
        .await
        .unwrap();
    assert_eq!(one_by_one.model.tables.len(), 70);
    let direct = take(&database, 1).await.unwrap();
    assert_eq!(one_by_one.snapshot_hash, direct.snapshot_hash);
    drop_database(&mut admin, &database).await;
}

/// A table named like an online schema change tool's shadow table is left out by default, with
/// its trigger; the manifest records the filter (and the hash covers it), and a filter that
/// ignores nothing takes the table in.
#[tokio::test]
async fn shadow_tables_are_ignored_by_default_and_the_manifest_says_so() {
    let mut admin = admin().await;
    let database = unique("ghost");
    create_database(
        &mut admin,
        &database,
        &[
            "CREATE TABLE orders (id int PRIMARY KEY)",
            "CREATE TABLE `_orders_gho` (id int PRIMARY KEY, added int)",
            "CREATE TABLE `_orders_ghc` (id bigint PRIMARY KEY, hint varchar(64))",
            "CREATE TABLE `_orders_new` (id int PRIMARY KEY)",
            "CREATE TRIGGER `pt_osc_ins` AFTER INSERT ON `_orders_new` FOR EACH ROW SET @x = 1",
        ],
    )
    .await;
    let name = DatabaseName::new(database.clone()).unwrap();
    let taken = take(&database, 1).await.unwrap();
    let paths: Vec<&str> = taken.files.keys().map(String::as_str).collect();
    assert_eq!(
        paths,
        ["manifest.json", "schema.json", "tables/orders.sql"],
        "{paths:?}"
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&text(&taken.files, "manifest.json")).unwrap();
    assert_eq!(
        manifest["filter"],
        serde_json::json!({"ignore_tables": ["_*_gho", "_*_ghc", "_*_del", "_*_new", "_*_old"]})
    );
    let everything = fermata_schema::Filter {
        ignore_databases: Vec::new(),
        ignore_tables: Vec::new(),
    };
    let all = fermata_schema::snapshot::snapshot_filtered(
        &mut connections(1).await,
        &name,
        "test",
        &everything,
    )
    .await
    .unwrap();
    assert_eq!(all.model.tables.len(), 4);
    assert_eq!(all.model.triggers.len(), 1);
    assert_ne!(all.snapshot_hash, taken.snapshot_hash);
    drop_database(&mut admin, &database).await;
}
