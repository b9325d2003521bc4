//! Shared by the tests that need the MariaDB server the test command provisions
//! (`FERMATA_TEST_MYSQL_URL`, an account that may create databases and users): connecting as its
//! administrator, unique names, quoting, snapshot accounts that see chosen databases only, and the
//! snapshot corpus.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};

use fermata_schema::snapshot::{DatabaseSnapshot, prepare, snapshot};
use fermata_schema::{SourceSettings, TlsMode};
use fermata_store::schema::{DatabaseName, SafeError};
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection};
use sqlx::{ConnectOptions, Executor};
use zeroize::Zeroizing;

pub const MYSQL_URL_VAR: &str = "FERMATA_TEST_MYSQL_URL";
/// The second server, started with `--skip-show-database`.
pub const RESTRICTED_MYSQL_URL_VAR: &str = "FERMATA_TEST_MYSQL_RESTRICTED_URL";

/// The administrator's options on the server `var` names; a test that needs it fails when it is
/// not there.
pub fn admin_options_of(var: &str) -> MySqlConnectOptions {
    let url = std::env::var(var)
        .unwrap_or_else(|_| panic!("{var} is not set; run the tests with scripts/test"));
    url.parse().expect("a MySQL URL")
}

/// The administrator's options on the main test server.
pub fn admin_options() -> MySqlConnectOptions {
    admin_options_of(MYSQL_URL_VAR)
}

pub async fn admin() -> MySqlConnection {
    admin_options()
        .connect()
        .await
        .expect("the test MariaDB answers")
}

/// The administrator of the `--skip-show-database` server.
pub async fn restricted_admin() -> MySqlConnection {
    admin_options_of(RESTRICTED_MYSQL_URL_VAR)
        .connect()
        .await
        .expect("the restricted test MariaDB answers")
}

/// A prefix no other test of this run uses, so tests can share the server.
pub fn unique(tag: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "fm{}{}{tag}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

pub fn quoted(identifier: &str) -> String {
    format!("`{}`", identifier.replace('`', "``"))
}

/// A database name as a GRANT pattern: `_` and `%` are wildcards there.
pub fn grant_pattern(database: &str) -> String {
    quoted(
        &database
            .replace('\\', "\\\\")
            .replace('_', "\\_")
            .replace('%', "\\%"),
    )
}

pub fn settings(user: &str, password: &str) -> SourceSettings {
    settings_on(&admin_options(), user, password)
}

/// Source settings for `user` on the server `admin` reaches.
pub fn settings_on(admin: &MySqlConnectOptions, user: &str, password: &str) -> SourceSettings {
    SourceSettings {
        host: admin.get_host().to_owned(),
        port: admin.get_port(),
        user: user.to_owned(),
        password: Zeroizing::new(password.to_owned()),
        tls: TlsMode::Disabled,
        ca_file: None,
    }
}

/// Creates a snapshot account allowed to read `visible` only.
pub async fn snapshot_account(admin: &mut MySqlConnection, visible: &[String]) -> (String, String) {
    let user = unique("snap");
    create_account(admin, user, visible).await
}

/// Creates a snapshot account with the minimum grants of every kind of object on `visible`
/// (`SELECT`, `SHOW VIEW`, `TRIGGER`, `EVENT`) and `SELECT` on `mysql.proc` for routines.
pub async fn full_snapshot_account(
    admin: &mut MySqlConnection,
    visible: &[String],
) -> (String, String) {
    let (user, password) = snapshot_account(admin, visible).await;
    for database in visible {
        grant(
            admin,
            &format!("TRIGGER, EVENT ON {}.*", grant_pattern(database)),
            &user,
        )
        .await;
    }
    grant(admin, "SELECT ON `mysql`.`proc`", &user).await;
    (user, password)
}

/// `GRANT what TO user`.
pub async fn grant(admin: &mut MySqlConnection, what: &str, user: &str) {
    admin
        .execute(format!("GRANT {what} TO '{user}'@'127.0.0.1'").as_str())
        .await
        .unwrap();
}

/// Creates a snapshot account whose name starts with `prefix`, allowed to read nothing.
pub async fn snapshot_account_named(admin: &mut MySqlConnection, prefix: &str) -> (String, String) {
    create_account(admin, format!("{prefix}{}", unique("")), &[]).await
}

/// The scratch schemas of the server's verification workspaces: a test that looks at every one
/// of them (`workspace.rs`) holds this for writing, and a test whose refreshes verify in a
/// workspace, making and dropping scratch schemas of their own meanwhile, holds it for reading.
pub static SCRATCH_SCHEMAS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// Creates a verification workspace account: everything on scratch schemas (`fermata_ws_...`),
/// nothing elsewhere, as the workspace documentation asks.
pub async fn workspace_account(admin: &mut MySqlConnection) -> (String, String) {
    let (user, password) = create_account(admin, unique("ws"), &[]).await;
    admin
        .execute(format!(r"GRANT ALL ON `fermata\_ws\_%`.* TO '{user}'@'127.0.0.1'").as_str())
        .await
        .unwrap();
    (user, password)
}

async fn create_account(
    admin: &mut MySqlConnection,
    user: String,
    visible: &[String],
) -> (String, String) {
    let password = format!("pw '{user}' \"secret\"");
    admin
        .execute(
            format!(
                "CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{}'",
                password.replace('\\', "\\\\").replace('\'', "\\'")
            )
            .as_str(),
        )
        .await
        .unwrap();
    for database in visible {
        admin
            .execute(
                format!(
                    "GRANT SELECT, SHOW VIEW ON {}.* TO '{user}'@'127.0.0.1'",
                    grant_pattern(database)
                )
                .as_str(),
            )
            .await
            .unwrap();
    }
    (user, password)
}

/// The snapshot corpus, in the order given (each statement runs in the test database): tables
/// with most column, key, constraint, option and partitioning clauses, odd names and reserved
/// words, views (one of them on a view whose name sorts after its own), sequences, procedures and
/// functions (one of each with the same name), triggers (two in a chosen action order) and events.
pub const CORPUS: &[&str] = &[
    "CREATE TABLE `parent` (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, \
        code varchar(20) COLLATE utf8mb4_bin NOT NULL, UNIQUE KEY uc (code)) \
        ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
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
        PRIMARY KEY (`select`), \
        KEY k_name (name(10)), \
        KEY k2 (price DESC, name) COMMENT 'idx', \
        FULLTEXT KEY ft (note), \
        CONSTRAINT fk_p FOREIGN KEY (pid) REFERENCES parent (id) ON DELETE SET NULL ON UPDATE CASCADE, \
        CONSTRAINT chk_price CHECK (price >= 0) \
     ) ENGINE=InnoDB AUTO_INCREMENT=5 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci COMMENT='orders'",
    "CREATE TABLE `We``ird Tåble` (a int NOT NULL, c int CHECK (c > 0), d datetime(3) NULL, \
        e int NOT NULL DEFAULT (a + 1), f int INVISIBLE, g blob, h json, i float(7,3), \
        j double, k bit(3) DEFAULT b'101', l set('x','y') NOT NULL DEFAULT 'x,y', \
        UNIQUE KEY (a), KEY `kk` (c), \
        CONSTRAINT f2 FOREIGN KEY (a) REFERENCES parent(id) ON DELETE NO ACTION, \
        CONSTRAINT f3 FOREIGN KEY (c) REFERENCES parent(id)) \
        ENGINE=InnoDB DEFAULT CHARSET=latin1 ROW_FORMAT=COMPRESSED",
    "CREATE VIEW `cheap orders` AS SELECT `select`, name FROM `order` WHERE price < 10",
    "CREATE ALGORITHM=MERGE SQL SECURITY INVOKER VIEW `Wide` AS SELECT o.name AS x, p.code \
        FROM `order` o JOIN parent p ON p.id = o.pid WITH CASCADED CHECK OPTION",
    "CREATE VIEW `cheap names` AS SELECT name FROM `cheap orders`",
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
    "CREATE TRIGGER first_set BEFORE INSERT ON `order` FOR EACH ROW SET NEW.flag = 1",
    "CREATE TRIGGER `tr.second` BEFORE INSERT ON `order` FOR EACH ROW PRECEDES first_set \
        SET NEW.note = 'x'",
    "CREATE TRIGGER `Audit` AFTER DELETE ON parent FOR EACH ROW \
        BEGIN\n  INSERT INTO `mixed` VALUES (OLD.id);\nEND",
    "CREATE EVENT `nightly` ON SCHEDULE EVERY 1 DAY STARTS '2030-01-01 00:00:00' \
        ENDS '2031-01-01 00:00:00' ON COMPLETION PRESERVE DISABLE COMMENT 'ev' DO DELETE FROM `mixed`",
    "CREATE EVENT once ON SCHEDULE AT '2035-01-01 00:00:00' DO DELETE FROM `mixed`",
    "CREATE EVENT `every 90` ON SCHEDULE EVERY '1:30' HOUR_MINUTE STARTS '2030-01-01 10:00:00' \
        DISABLE ON SLAVE DO BEGIN SELECT 1; END",
];

/// Stored programs created under `ANSI` (which holds `ANSI_QUOTES` and `PIPES_AS_CONCAT`): the
/// server prints a routine's or trigger's head with `"` quotes, and keeps every body as written,
/// where `"x"` names a column or parameter.
pub const ANSI_PROGRAMS: &[&str] = &[
    "CREATE TABLE `t` (a int, `b c` varchar(10))",
    "SET SESSION sql_mode = 'ANSI'",
    "CREATE PROCEDURE \"p \"\"q\"\"\"(IN \"a b\" int, OUT c int) SELECT \"a b\" INTO c",
    "CREATE FUNCTION \"f\"(x int) RETURNS varchar(10) RETURN x || 'y'",
    "CREATE TRIGGER \"t r\" BEFORE INSERT ON \"t\" FOR EACH ROW SET NEW.\"b c\" = 'z'",
    "CREATE EVENT \"e\" ON SCHEDULE AT '2035-01-01 00:00:00' DO DELETE FROM \"t\"",
    "SET SESSION sql_mode = DEFAULT",
];

/// The object kinds captured beyond [`CORPUS`], each as the MariaDB manual writes it: spatial
/// columns with and without a spatial reference system and `SPATIAL` indexes; system-versioned
/// tables, implicit (hidden row start and end) and explicit (named columns, `PERIOD FOR
/// SYSTEM_TIME`, a column `WITHOUT SYSTEM VERSIONING`), partitioned by `SYSTEM_TIME` with
/// `INTERVAL`, `LIMIT` and default partitions; an application-time period with a `WITHOUT
/// OVERLAPS` key; `INET4`, `INET6` and `UUID` columns with defaults; compressed columns; a
/// `DEFAULT` list partition; a long unique key kept as a hash; an invisible generated column.
pub const CAPTURES: &[&str] = &[
    "CREATE TABLE `geo` (id int NOT NULL PRIMARY KEY,         p POINT REF_SYSTEM_ID=4326 NOT NULL COMMENT 'wgs84', g GEOMETRY,         l LINESTRING REF_SYSTEM_ID=3857 DEFAULT NULL, SPATIAL KEY sp (p)) ENGINE=InnoDB",
    "CREATE TABLE `geo myisam` (p POLYGON NOT NULL, SPATIAL KEY (p)) ENGINE=MyISAM",
    "CREATE TABLE versioned (a int, b varchar(10)) WITH SYSTEM VERSIONING",
    "CREATE TABLE `versioned explicit` (id int NOT NULL PRIMARY KEY,         a int WITHOUT SYSTEM VERSIONING COMMENT 'no history',         rs timestamp(6) GENERATED ALWAYS AS ROW START INVISIBLE,         re timestamp(6) GENERATED ALWAYS AS ROW END INVISIBLE,         PERIOD FOR SYSTEM_TIME (rs, re)) WITH SYSTEM VERSIONING COMMENT 'audited'",
    "CREATE TABLE versioned_trx (id int,         rs bigint unsigned GENERATED ALWAYS AS ROW START,         re bigint unsigned GENERATED ALWAYS AS ROW END,         PERIOD FOR SYSTEM_TIME (rs, re)) ENGINE=InnoDB WITH SYSTEM VERSIONING",
    "CREATE TABLE history_interval (a int) WITH SYSTEM VERSIONING         PARTITION BY SYSTEM_TIME INTERVAL 1 MONTH STARTS '2020-01-01 00:00:00'         (PARTITION p0 HISTORY, PARTITION p1 HISTORY COMMENT 'older', PARTITION pcur CURRENT)",
    "CREATE TABLE history_limit (a int) WITH SYSTEM VERSIONING         PARTITION BY SYSTEM_TIME LIMIT 1000 PARTITIONS 3",
    "CREATE TABLE history_default (a int) WITH SYSTEM VERSIONING PARTITION BY SYSTEM_TIME",
    "CREATE TABLE bookings (id int NOT NULL, room int, starts date NOT NULL, ends date NOT NULL,         PERIOD FOR stay (starts, ends), UNIQUE KEY no_double (room, stay WITHOUT OVERLAPS),         KEY by_start (starts))",
    "CREATE TABLE addresses (id int NOT NULL PRIMARY KEY, v4 INET4 NOT NULL DEFAULT '127.0.0.1',         v6 INET6 DEFAULT '::1', u UUID NOT NULL DEFAULT '123e4567-e89b-12d3-a456-426655440000',         u2 UUID INVISIBLE, KEY (v6))",
    "CREATE TABLE squeezed (id int, t text COMPRESSED,         v varchar(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin COMPRESSED NOT NULL DEFAULT 'x',         b blob COMPRESSED)",
    "CREATE TABLE listed (a int, b varchar(5)) PARTITION BY LIST (a)         (PARTITION p0 VALUES IN (0), PARTITION p1 VALUES IN (1,2),         PARTITION `p other` DEFAULT COMMENT 'the rest')",
    "CREATE TABLE listed_columns (a int, b int) PARTITION BY LIST COLUMNS (a, b)         SUBPARTITION BY HASH (b) SUBPARTITIONS 2         (PARTITION p0 VALUES IN ((1,2)), PARTITION pd DEFAULT)",
    "CREATE TABLE long_unique (id int, body blob, UNIQUE KEY body_once (body))",
    "CREATE TABLE hashed (id int, KEY by_id (id) USING HASH) ENGINE=MEMORY",
    "CREATE TABLE invisible_generated (a int, b int GENERATED ALWAYS AS (a + 1) VIRTUAL INVISIBLE)",
];

/// Creates `database` anew (utf8mb4 by default) and runs `statements` in it, leaving `admin` in it.
pub async fn create_database(admin: &mut MySqlConnection, database: &str, statements: &[&str]) {
    admin
        .execute(format!("DROP DATABASE IF EXISTS {}", quoted(database)).as_str())
        .await
        .unwrap();
    admin
        .execute(format!("CREATE DATABASE {} CHARACTER SET utf8mb4", quoted(database)).as_str())
        .await
        .unwrap();
    admin
        .execute(format!("USE {}", quoted(database)).as_str())
        .await
        .unwrap();
    for statement in statements {
        admin.execute(*statement).await.unwrap();
    }
}

/// `count` prepared connections as the administrator.
pub async fn connections(count: usize) -> Vec<MySqlConnection> {
    connections_after(count, None).await
}

/// `count` prepared connections, each having run `first` before it was prepared.
pub async fn connections_after(count: usize, first: Option<&str>) -> Vec<MySqlConnection> {
    let mut all = Vec::new();
    for _ in 0..count {
        let mut connection = admin().await;
        if let Some(first) = first {
            connection.execute(first).await.unwrap();
        }
        prepare(&mut connection).await.unwrap();
        all.push(connection);
    }
    all
}

/// A snapshot of `database` over `count` prepared connections.
pub async fn take(database: &str, count: usize) -> Result<DatabaseSnapshot, SafeError> {
    let mut connections = connections(count).await;
    snapshot(
        &mut connections,
        &DatabaseName::new(database).unwrap(),
        "test",
    )
    .await
}

/// The file at `path` of a snapshot, as text.
pub fn text(files: &BTreeMap<String, Vec<u8>>, path: &str) -> String {
    String::from_utf8(
        files
            .get(path)
            .unwrap_or_else(|| panic!("no {path}"))
            .clone(),
    )
    .unwrap()
}
