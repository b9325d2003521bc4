//! The migration corpus of changes a demanding DBA throws at it, proven on the MariaDB server the
//! test command provisions exactly as [`crate::migration_corpus`] proves its own: each change
//! drifts a database of its own, built from [`BASE`] (a parent table and a child referring to it
//! twice) and what the change is given besides, and both scripts of each must be verified, the
//! undo script must put the database back through the `mariadb` client, and the destructive
//! statements must be those that lose data. The changes are interactions: several tables changed
//! at once across foreign keys, keys and `AUTO_INCREMENT` moved, columns moved and narrowed,
//! generated columns and their base columns, views over views and functions, definers, trigger
//! order, events in other time zones, sequences, system versioning with explicit row columns,
//! periods, partitions, odd identifiers and table options.

use sqlx::Executor;

use crate::migration_corpus::{Change, given, prove};
use crate::support::admin;

/// What every database starts with.
const BASE: &[&str] = &[
    "CREATE TABLE parent (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, code varchar(10) NOT NULL, \
     KEY k_code (code))",
    "CREATE TABLE child (id int NOT NULL PRIMARY KEY, parent int NOT NULL, code varchar(10), \
     KEY k_parent (parent), KEY k_code (code), \
     CONSTRAINT fk_parent FOREIGN KEY (parent) REFERENCES parent (id), \
     CONSTRAINT fk_code FOREIGN KEY (code) REFERENCES parent (code))",
];

/// The account some changes make the definer of their objects; the administrator runs the undo
/// scripts, which name it again.
const DEFINER: &str = "'fermata_corpus_definer'@'localhost'";

/// The changes, one database each.
const CHANGES: &[Change] = &[
    // Several tables at once, across foreign keys.
    given(
        "parent key retyped while two children refer to it",
        &[
            "CREATE TABLE sibling (id int NOT NULL PRIMARY KEY, parent int, \
           CONSTRAINT fk_sibling FOREIGN KEY (parent) REFERENCES parent (id) ON DELETE CASCADE)",
        ],
        &[
            "ALTER TABLE child DROP FOREIGN KEY fk_parent",
            "ALTER TABLE sibling DROP FOREIGN KEY fk_sibling",
            "ALTER TABLE parent MODIFY id bigint NOT NULL AUTO_INCREMENT",
            "ALTER TABLE child MODIFY parent bigint NOT NULL, ADD CONSTRAINT fk_parent \
             FOREIGN KEY (parent) REFERENCES parent (id)",
            "ALTER TABLE sibling MODIFY parent bigint, ADD CONSTRAINT fk_sibling \
             FOREIGN KEY (parent) REFERENCES parent (id) ON DELETE CASCADE",
        ],
        true,
        false,
    ),
    given(
        "referenced column's collation changed with its child's",
        &[],
        &[
            "ALTER TABLE child DROP FOREIGN KEY fk_code",
            "ALTER TABLE parent MODIFY code varchar(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL",
            "ALTER TABLE child MODIFY code varchar(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, \
             ADD CONSTRAINT fk_code FOREIGN KEY (code) REFERENCES parent (code)",
        ],
        false,
        false,
    ),
    given(
        "child table dropped with its parent",
        &[],
        &["DROP TABLE child", "DROP TABLE parent"],
        false,
        true,
    ),
    given(
        "two tables referring to each other added at once, one to itself too",
        &[],
        &[
            "SET SESSION foreign_key_checks = 0",
            "CREATE TABLE ying (id int NOT NULL PRIMARY KEY, yang int, boss int, KEY k_yang (yang), \
             KEY k_boss (boss), CONSTRAINT fk_yang FOREIGN KEY (yang) REFERENCES yang (id), \
             CONSTRAINT fk_boss FOREIGN KEY (boss) REFERENCES ying (id))",
            "CREATE TABLE yang (id int NOT NULL PRIMARY KEY, ying int, KEY k_ying (ying), \
             CONSTRAINT fk_ying FOREIGN KEY (ying) REFERENCES ying (id))",
        ],
        true,
        false,
    ),
    given(
        "foreign key's index replaced by a wider one",
        &[],
        &["ALTER TABLE child DROP INDEX k_parent, ADD INDEX k_parent_id (parent, id)"],
        false,
        false,
    ),
    given(
        "table replaced by a view of the same name",
        &["CREATE TABLE legacy (id int NOT NULL PRIMARY KEY, code varchar(10))"],
        &[
            "DROP TABLE legacy",
            "CREATE VIEW legacy AS SELECT id, code FROM parent",
        ],
        false,
        true,
    ),
    given(
        "referenced column dropped with the child table",
        &[],
        &["DROP TABLE child", "ALTER TABLE parent DROP COLUMN code"],
        false,
        true,
    ),
    given(
        "referenced key retyped while the child referring to it is dropped",
        &[],
        &[
            "DROP TABLE child",
            "ALTER TABLE parent MODIFY id bigint NOT NULL AUTO_INCREMENT",
        ],
        true,
        true,
    ),
    given(
        "referenced table's index replaced by a wider one",
        &[],
        &["ALTER TABLE parent DROP INDEX k_code, ADD INDEX k_code_id (code, id)"],
        false,
        false,
    ),
    given(
        "database default character set changed with a table that takes it",
        &[],
        &[
            "ALTER DATABASE CHARACTER SET latin1 COLLATE latin1_swedish_ci",
            "CREATE TABLE plain (id int NOT NULL PRIMARY KEY, name varchar(10))",
        ],
        true,
        false,
    ),
    given(
        "foreign key added without an index of its own",
        &["CREATE TABLE orphan (id int NOT NULL PRIMARY KEY, p int)"],
        &["ALTER TABLE orphan ADD CONSTRAINT fk_p FOREIGN KEY (p) REFERENCES parent (id)"],
        false,
        false,
    ),
    given(
        "referenced table renamed",
        &[],
        &["RENAME TABLE parent TO parent2"],
        true,
        true,
    ),
    given(
        "self-referencing key retyped",
        &[
            "CREATE TABLE staff (id int NOT NULL PRIMARY KEY, boss int, \
           CONSTRAINT fk_boss FOREIGN KEY (boss) REFERENCES staff (id))",
        ],
        &[
            "ALTER TABLE staff DROP FOREIGN KEY fk_boss",
            "ALTER TABLE staff MODIFY id bigint NOT NULL, MODIFY boss bigint",
            "ALTER TABLE staff ADD CONSTRAINT fk_boss FOREIGN KEY (boss) REFERENCES staff (id)",
        ],
        true,
        false,
    ),
    given(
        "child moved to MyISAM, its foreign keys dropped",
        &[],
        &[
            "ALTER TABLE child DROP FOREIGN KEY fk_parent, DROP FOREIGN KEY fk_code",
            "ALTER TABLE child ENGINE=MyISAM",
        ],
        false,
        false,
    ),
    // Keys and AUTO_INCREMENT.
    given(
        "AUTO_INCREMENT primary key moved to another column",
        &["CREATE TABLE counter (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, n int)"],
        &[
            "ALTER TABLE counter DROP PRIMARY KEY, MODIFY id int NOT NULL, \
           MODIFY n int NOT NULL AUTO_INCREMENT, ADD PRIMARY KEY (n)",
        ],
        false,
        true,
    ),
    given(
        "primary key dropped, its column kept",
        &["CREATE TABLE loose (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, v int)"],
        &["ALTER TABLE loose MODIFY id int NOT NULL, DROP PRIMARY KEY"],
        false,
        false,
    ),
    given(
        "nullable column made the primary key",
        &["CREATE TABLE keyless (id int NOT NULL, code varchar(10), KEY k_id (id))"],
        &["ALTER TABLE keyless ADD PRIMARY KEY (code)"],
        false,
        true,
    ),
    given(
        "long UNIQUE key on a TEXT column",
        &["CREATE TABLE notes (id int NOT NULL PRIMARY KEY, body text)"],
        &["ALTER TABLE notes ADD UNIQUE KEY u_body (body)"],
        false,
        false,
    ),
    given(
        "AUTO_INCREMENT key column replaced by another",
        &["CREATE TABLE counter (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, n int)"],
        &["ALTER TABLE counter DROP COLUMN id, \
           ADD COLUMN nid bigint NOT NULL AUTO_INCREMENT PRIMARY KEY FIRST"],
        true,
        true,
    ),
    // Columns.
    given(
        "column moved and narrowed",
        &["CREATE TABLE wide (id int NOT NULL PRIMARY KEY, a varchar(50), b int, c int)"],
        &["ALTER TABLE wide MODIFY a varchar(20) AFTER c"],
        false,
        true,
    ),
    given(
        "columns reordered around a narrowed column",
        &["CREATE TABLE wide (id int NOT NULL PRIMARY KEY, n varchar(50), p int, a int, b int)"],
        &[
            "ALTER TABLE wide MODIFY a int AFTER id, MODIFY b int AFTER a, \
           MODIFY n varchar(20) AFTER p",
        ],
        false,
        true,
    ),
    given(
        "column renamed and moved",
        &["CREATE TABLE wide (id int NOT NULL PRIMARY KEY, a varchar(50), b int, c int)"],
        &["ALTER TABLE wide CHANGE c see int FIRST"],
        true,
        true,
    ),
    given(
        "ON UPDATE current_timestamp()",
        &["CREATE TABLE stamped (id int NOT NULL PRIMARY KEY, \
           changed timestamp NOT NULL DEFAULT current_timestamp())"],
        &["ALTER TABLE stamped \
           MODIFY changed timestamp NOT NULL DEFAULT current_timestamp() ON UPDATE current_timestamp(), \
           ADD touched datetime(3) DEFAULT NULL ON UPDATE current_timestamp(3)"],
        true,
        false,
    ),
    given(
        "ENUM and SET values appended",
        &["CREATE TABLE kinds (id int NOT NULL PRIMARY KEY, \
           kind enum('a','b') NOT NULL DEFAULT 'a', flags set('x','y'))"],
        &[
            "ALTER TABLE kinds MODIFY kind enum('a','b','c') NOT NULL DEFAULT 'a', \
           MODIFY flags set('x','y','z')",
        ],
        true,
        false,
    ),
    given(
        "ENUM value removed and SET values reordered",
        &["CREATE TABLE kinds (id int NOT NULL PRIMARY KEY, \
           kind enum('a','b','c') NOT NULL DEFAULT 'a', flags set('x','y'))"],
        &[
            "ALTER TABLE kinds MODIFY kind enum('a','c') NOT NULL DEFAULT 'a', \
           MODIFY flags set('y','x')",
        ],
        false,
        true,
    ),
    given(
        "TEXT and BLOB columns with defaults",
        &["CREATE TABLE notes (id int NOT NULL PRIMARY KEY, body text DEFAULT 'none')"],
        &[
            "ALTER TABLE notes ALTER body SET DEFAULT 'it''s \"empty\"', \
           ADD raw blob DEFAULT 'x', ADD summary tinytext NOT NULL DEFAULT '', \
           ADD tag varchar(20) DEFAULT 'a''b\\c -- d'",
        ],
        true,
        false,
    ),
    given(
        "DECIMAL precision widened and narrowed",
        &[
            "CREATE TABLE money (id int NOT NULL PRIMARY KEY, price decimal(10,2), rate decimal(6,2))",
        ],
        &["ALTER TABLE money MODIFY price decimal(14,4), MODIFY rate decimal(5,3)"],
        true,
        true,
    ),
    given(
        "zerofill dropped and added, unsigned widened to signed",
        &[
            "CREATE TABLE shown (id int NOT NULL PRIMARY KEY, code int(6) unsigned zerofill, \
           n int(10) unsigned, m mediumint(8) unsigned)",
        ],
        &[
            "ALTER TABLE shown MODIFY code int(6) unsigned, MODIFY n int(10) unsigned zerofill, \
           MODIFY m int(11)",
        ],
        true,
        false,
    ),
    given(
        "column character set converted both ways",
        &["CREATE TABLE texts (id int NOT NULL PRIMARY KEY, \
           a varchar(20) CHARACTER SET latin1, b varchar(20) CHARACTER SET utf8mb4)"],
        &[
            "ALTER TABLE texts MODIFY a varchar(20) CHARACTER SET utf8mb4, \
           MODIFY b varchar(20) CHARACTER SET latin1",
        ],
        true,
        true,
    ),
    given(
        "prefix index's column narrowed below the prefix",
        &[
            "CREATE TABLE prefixed (id int NOT NULL PRIMARY KEY, name varchar(100), \
           KEY k_name (name(50)))",
        ],
        &["ALTER TABLE prefixed MODIFY name varchar(30)"],
        false,
        true,
    ),
    given(
        "columns swapped, one narrowed, one made invisible",
        &["CREATE TABLE pair (id int NOT NULL PRIMARY KEY, a varchar(20), b int)"],
        &["ALTER TABLE pair MODIFY b int INVISIBLE AFTER id, MODIFY a varchar(10) AFTER b"],
        false,
        true,
    ),
    given(
        "timestamp default written under another time zone",
        &["CREATE TABLE stamped (id int NOT NULL PRIMARY KEY)"],
        &[
            "SET SESSION time_zone = '+05:30'",
            "ALTER TABLE stamped ADD due timestamp NOT NULL DEFAULT '2030-01-01 00:00:00'",
        ],
        true,
        false,
    ),
    given(
        "UUID, INET6 and INET4 columns, expression defaults",
        &["CREATE TABLE hosts (id int NOT NULL PRIMARY KEY)"],
        &[
            "ALTER TABLE hosts ADD u uuid DEFAULT uuid(), ADD ip inet6, ADD ip4 inet4, \
           ADD seen date DEFAULT curdate(), ADD label varchar(20) DEFAULT concat('h', 1)",
        ],
        true,
        false,
    ),
    given(
        "JSON columns and an indexed virtual column over one",
        &["CREATE TABLE docs (id int NOT NULL PRIMARY KEY, body longtext)"],
        &["ALTER TABLE docs ADD doc json, MODIFY body json, \
           ADD name varchar(50) AS (json_value(doc, '$.name')) VIRTUAL, ADD INDEX k_name (name)"],
        true,
        false,
    ),
    given(
        "BIT flag widened with a new default",
        &["CREATE TABLE flags (id int NOT NULL PRIMARY KEY, f bit(1) NOT NULL DEFAULT b'0')"],
        &["ALTER TABLE flags MODIFY f bit(8) NOT NULL DEFAULT b'101'"],
        true,
        false,
    ),
    given(
        "column whose default reads a column that is dropped",
        &["CREATE TABLE derived (id int NOT NULL PRIMARY KEY, a int, b int DEFAULT (a + 1))"],
        &["ALTER TABLE derived DROP COLUMN a, ALTER b SET DEFAULT 5"],
        false,
        true,
    ),
    given(
        "spatial column given a reference system",
        &[
            "CREATE TABLE places (id int NOT NULL PRIMARY KEY, pos point NOT NULL, \
           SPATIAL KEY sp_pos (pos))",
        ],
        &["ALTER TABLE places MODIFY pos point REF_SYSTEM_ID=4326 NOT NULL"],
        false,
        false,
    ),
    given(
        "column comment with quotes, a backslash and a line break",
        &["CREATE TABLE commented (id int NOT NULL PRIMARY KEY, v int COMMENT 'plain')"],
        &["ALTER TABLE commented MODIFY v int COMMENT 'it''s \"v\"\\nnext \\\\ line; -- not SQL'"],
        false,
        false,
    ),
    // Generated columns.
    given(
        "generated column's base column retyped, an index on the generated column",
        &[
            "CREATE TABLE computed (id int NOT NULL PRIMARY KEY, qty int, \
           qty2 int AS (qty * 2) VIRTUAL, KEY k_qty2 (qty2))",
        ],
        &["ALTER TABLE computed MODIFY qty bigint"],
        true,
        false,
    ),
    given(
        "index on a generated column added",
        &[
            "CREATE TABLE computed (id int NOT NULL PRIMARY KEY, name varchar(20), \
           up varchar(20) AS (upper(name)) VIRTUAL)",
        ],
        &["ALTER TABLE computed ADD INDEX k_up (up)"],
        false,
        false,
    ),
    given(
        "generated column dropped with its base column",
        &[
            "CREATE TABLE computed (id int NOT NULL PRIMARY KEY, qty int, \
           qty2 int AS (qty * 2) VIRTUAL, KEY k_qty2 (qty2))",
        ],
        &["ALTER TABLE computed DROP COLUMN qty2, DROP COLUMN qty"],
        false,
        true,
    ),
    given(
        "generated column moved off a base column that is dropped",
        &[
            "CREATE TABLE computed (id int NOT NULL PRIMARY KEY, a int, b int, \
           s int AS (a + b) STORED)",
        ],
        &["ALTER TABLE computed DROP COLUMN a, MODIFY s int AS (b * 2) STORED"],
        false,
        true,
    ),
    given(
        "column renamed that a generated column and a check read",
        &[
            "CREATE TABLE computed (id int NOT NULL PRIMARY KEY, a int, b int, \
           s int AS (a + b) VIRTUAL, CONSTRAINT c_a CHECK (a >= 0))",
        ],
        &[
            "ALTER TABLE computed DROP CONSTRAINT c_a, CHANGE a a2 int, \
           MODIFY s int AS (a2 + b) VIRTUAL, ADD CONSTRAINT c_a CHECK (a2 >= 0)",
        ],
        true,
        true,
    ),
    given(
        "virtual column made stored, stored one made virtual",
        &[
            "CREATE TABLE computed (id int NOT NULL PRIMARY KEY, qty int, \
           v int AS (qty * 2) VIRTUAL, b int, KEY k_v (v), KEY k_b (b))",
        ],
        &[
            "ALTER TABLE computed DROP COLUMN v, ADD COLUMN v int AS (qty * 2) STORED AFTER qty, \
           DROP COLUMN b, ADD COLUMN b int AS (qty * 3) VIRTUAL",
        ],
        false,
        true,
    ),
    given(
        "two FULLTEXT indexes added",
        &["CREATE TABLE docs (id int NOT NULL PRIMARY KEY, title varchar(200), body text)"],
        &[
            "ALTER TABLE docs ADD FULLTEXT INDEX ft_title (title), ADD FULLTEXT INDEX ft_body (body)",
        ],
        false,
        false,
    ),
    given(
        "descending index with a comment",
        &["CREATE TABLE feed (id int NOT NULL PRIMARY KEY, at datetime)"],
        &["ALTER TABLE feed ADD INDEX k_recent (at DESC, id) COMMENT 'newest ''first'''"],
        false,
        false,
    ),
    given(
        "USING HASH and BTREE indexes on a MEMORY table",
        &["CREATE TABLE cache (id int NOT NULL PRIMARY KEY, k int) ENGINE=MEMORY"],
        &[
            "ALTER TABLE cache ADD INDEX k_hash (k) USING HASH, ADD INDEX k_tree (k, id) USING BTREE",
        ],
        false,
        false,
    ),
    // Views and routines.
    given(
        "view on a view whose base view changes, another dropped",
        &[
            "CREATE VIEW v_base AS SELECT id, code FROM parent",
            "CREATE VIEW v_mid AS SELECT id FROM v_base",
            "CREATE VIEW v_top AS SELECT id FROM v_mid",
        ],
        &[
            "CREATE OR REPLACE VIEW v_base AS SELECT id, code, 1 AS one FROM parent",
            "DROP VIEW v_top",
            "CREATE VIEW v_new AS SELECT one, id FROM v_base",
        ],
        false,
        false,
    ),
    given(
        "view calling a stored function that changes, another added with its function",
        &[
            "CREATE FUNCTION f_tax(x int) RETURNS int DETERMINISTIC RETURN x * 2",
            "CREATE VIEW v_tax AS SELECT f_tax(id) AS t FROM parent",
        ],
        &[
            "CREATE OR REPLACE FUNCTION f_tax(x int) RETURNS bigint DETERMINISTIC RETURN x * 3",
            "CREATE FUNCTION f_new() RETURNS int NO SQL RETURN 7",
            "CREATE VIEW v_new AS SELECT f_new() AS n, t FROM v_tax",
        ],
        false,
        false,
    ),
    given(
        "view options: MERGE, SQL SECURITY INVOKER, CHECK OPTION",
        &["CREATE VIEW v_plain AS SELECT id, code FROM parent WHERE id > 0"],
        &[
            "CREATE ALGORITHM=MERGE SQL SECURITY INVOKER VIEW v_opts AS \
             SELECT id, code FROM parent WHERE id > 10 WITH CASCADED CHECK OPTION",
            "CREATE OR REPLACE SQL SECURITY INVOKER VIEW v_plain AS \
             SELECT id, code FROM parent WHERE id > 0 WITH LOCAL CHECK OPTION",
        ],
        false,
        false,
    ),
    given(
        "view, trigger and event of another definer taken over",
        &[
            "CREATE DEFINER='fermata_corpus_definer'@'localhost' VIEW v_owned AS \
             SELECT id FROM parent",
            "CREATE DEFINER='fermata_corpus_definer'@'localhost' TRIGGER parent_bi BEFORE INSERT \
             ON parent FOR EACH ROW SET NEW.code = upper(NEW.code)",
            "CREATE DEFINER='fermata_corpus_definer'@'localhost' EVENT owned_event \
             ON SCHEDULE EVERY 1 DAY STARTS '2031-01-01 00:00:00' DO SELECT 1",
        ],
        &[
            "CREATE OR REPLACE VIEW v_owned AS SELECT id FROM parent",
            "DROP TRIGGER parent_bi",
            "CREATE TRIGGER parent_bi BEFORE INSERT ON parent FOR EACH ROW \
             SET NEW.code = upper(NEW.code)",
            "CREATE OR REPLACE EVENT owned_event ON SCHEDULE EVERY 1 DAY \
             STARTS '2031-01-01 00:00:00' DO SELECT 1",
        ],
        false,
        false,
    ),
    given(
        "procedure whose body holds the usual delimiters",
        &[],
        &["CREATE PROCEDURE delimited() BEGIN SELECT ';;', '$$'; SELECT '//' AS `;;`; END"],
        false,
        false,
    ),
    given(
        "procedure under NO_BACKSLASH_ESCAPES and a view with a backslash, changed together",
        &["CREATE VIEW v_slash AS SELECT 'a\\\\b' AS s"],
        &[
            "SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'",
            "CREATE PROCEDURE raw_path() SELECT 'c:\\dir' AS p",
            "SET SESSION sql_mode = DEFAULT",
            "CREATE OR REPLACE VIEW v_slash AS SELECT 'a\\\\b' AS s, 'x\\ty' AS t",
        ],
        false,
        false,
    ),
    // Triggers.
    given(
        "three triggers of one group reordered",
        &[
            "CREATE TABLE ordered (id int NOT NULL PRIMARY KEY, a int, b int)",
            "CREATE TRIGGER tr1 BEFORE INSERT ON ordered FOR EACH ROW SET NEW.a = 1",
            "CREATE TRIGGER tr2 BEFORE INSERT ON ordered FOR EACH ROW FOLLOWS tr1 SET NEW.b = 2",
            "CREATE TRIGGER tr3 BEFORE INSERT ON ordered FOR EACH ROW FOLLOWS tr2 SET NEW.a = NEW.a + 3",
        ],
        &[
            "DROP TRIGGER tr3",
            "CREATE TRIGGER tr3 BEFORE INSERT ON ordered FOR EACH ROW PRECEDES tr1 SET NEW.a = NEW.a + 3",
        ],
        false,
        false,
    ),
    given(
        "trigger changed with its table",
        &[
            "CREATE TABLE ledger (id int NOT NULL PRIMARY KEY, amount int)",
            "CREATE TRIGGER ledger_bi BEFORE INSERT ON ledger FOR EACH ROW SET NEW.amount = abs(NEW.amount)",
        ],
        &[
            "ALTER TABLE ledger MODIFY amount bigint, ADD cents bigint",
            "DROP TRIGGER ledger_bi",
            "CREATE TRIGGER ledger_bi BEFORE INSERT ON ledger FOR EACH ROW SET NEW.cents = NEW.amount * 100",
        ],
        true,
        false,
    ),
    given(
        "table with triggers dropped",
        &[
            "CREATE TABLE audited (id int NOT NULL PRIMARY KEY, v int)",
            "CREATE TRIGGER audited_bi BEFORE INSERT ON audited FOR EACH ROW SET NEW.v = 0",
            "CREATE TRIGGER audited_au AFTER UPDATE ON audited FOR EACH ROW SET @changed = NEW.id",
        ],
        &["DROP TABLE audited"],
        false,
        true,
    ),
    given(
        "trigger group: one dropped, one added first",
        &[
            "CREATE TABLE ordered (id int NOT NULL PRIMARY KEY, a int, b int)",
            "CREATE TRIGGER tr1 BEFORE UPDATE ON ordered FOR EACH ROW SET NEW.a = 1",
            "CREATE TRIGGER tr2 BEFORE UPDATE ON ordered FOR EACH ROW FOLLOWS tr1 SET NEW.b = 2",
            "CREATE TRIGGER tr3 BEFORE UPDATE ON ordered FOR EACH ROW FOLLOWS tr2 SET NEW.a = 3",
        ],
        &[
            "DROP TRIGGER tr2",
            "CREATE TRIGGER tr0 BEFORE UPDATE ON ordered FOR EACH ROW PRECEDES tr1 SET NEW.b = 0",
        ],
        false,
        false,
    ),
    // Events.
    given(
        "one-time event, and one preserved with a comment",
        &[],
        &[
            "CREATE EVENT once ON SCHEDULE AT '2035-06-01 12:00:00' DO DELETE FROM child WHERE id < 0",
            "CREATE EVENT kept ON SCHEDULE EVERY 1 HOUR STARTS '2031-01-01 00:00:00' \
             ENDS '2032-01-01 00:00:00' ON COMPLETION PRESERVE DISABLE \
             COMMENT 'it''s kept; -- really' DO SELECT 1",
        ],
        false,
        false,
    ),
    given(
        "event in another time zone",
        &[],
        &[
            "SET SESSION time_zone = '+05:30'",
            "CREATE EVENT ist ON SCHEDULE EVERY 1 DAY STARTS '2031-01-01 09:00:00' DO SELECT 1",
        ],
        false,
        false,
    ),
    given(
        "event moved to another time zone",
        &["CREATE EVENT nightly ON SCHEDULE EVERY 1 DAY STARTS '2031-01-01 02:00:00' DO SELECT 1"],
        &[
            "SET SESSION time_zone = '-08:00'",
            "ALTER EVENT nightly ON SCHEDULE EVERY 2 HOUR STARTS '2031-06-01 00:00:00' DO SELECT 2",
        ],
        false,
        false,
    ),
    // Sequences.
    given(
        "sequence's range narrowed, made CYCLE and NOCACHE",
        &["CREATE SEQUENCE ticket START WITH 1 MINVALUE 1 MAXVALUE 1000 CACHE 10 NOCYCLE"],
        &["ALTER SEQUENCE ticket MINVALUE 100 MAXVALUE 500 START WITH 100 RESTART NOCACHE CYCLE"],
        false,
        true,
    ),
    given(
        "sequence added with a table whose trigger draws from it",
        &[],
        &[
            "CREATE SEQUENCE number START WITH 10 INCREMENT BY 5 MINVALUE 10 MAXVALUE 1000 \
             NOCACHE CYCLE",
            "CREATE TABLE numbered (id int NOT NULL PRIMARY KEY, v int)",
            "CREATE TRIGGER numbered_bi BEFORE INSERT ON numbered FOR EACH ROW \
             SET NEW.id = nextval(number)",
        ],
        true,
        false,
    ),
    given(
        "sequence's comment changed",
        &["CREATE SEQUENCE ticket"],
        &["ALTER TABLE ticket COMMENT = 'numbers; -- for tickets'"],
        true,
        true,
    ),
    // System versioning and periods.
    given(
        "system versioning with explicit row columns added",
        &["CREATE TABLE tracked (id int NOT NULL PRIMARY KEY, v int, u int, UNIQUE KEY u_u (u))"],
        &["ALTER TABLE tracked \
           ADD COLUMN rs timestamp(6) GENERATED ALWAYS AS ROW START, \
           ADD COLUMN re timestamp(6) GENERATED ALWAYS AS ROW END, \
           ADD PERIOD FOR SYSTEM_TIME (rs, re), ADD SYSTEM VERSIONING"],
        true,
        false,
    ),
    given(
        "system versioning with explicit row columns dropped",
        &["CREATE TABLE tracked (id int NOT NULL PRIMARY KEY, v int, \
           rs timestamp(6) GENERATED ALWAYS AS ROW START, \
           re timestamp(6) GENERATED ALWAYS AS ROW END, \
           PERIOD FOR SYSTEM_TIME (rs, re)) WITH SYSTEM VERSIONING"],
        &[
            "SET SESSION system_versioning_alter_history = KEEP",
            "ALTER TABLE tracked DROP SYSTEM VERSIONING, DROP PERIOD FOR SYSTEM_TIME, \
           DROP COLUMN rs, DROP COLUMN re",
        ],
        false,
        true,
    ),
    given(
        "versioned table partitioned by SYSTEM_TIME",
        &["CREATE TABLE kept (id int NOT NULL PRIMARY KEY, v int) WITH SYSTEM VERSIONING"],
        &["ALTER TABLE kept PARTITION BY SYSTEM_TIME LIMIT 1000 \
           (PARTITION p_hist HISTORY, PARTITION p_cur CURRENT)"],
        false,
        false,
    ),
    given(
        "application period with a WITHOUT OVERLAPS key",
        &[
            "CREATE TABLE booking (id int NOT NULL PRIMARY KEY, room int NOT NULL, \
           since date NOT NULL, until date NOT NULL)",
        ],
        &["ALTER TABLE booking ADD PERIOD FOR stay (since, until), \
           ADD UNIQUE KEY u_room (room, stay WITHOUT OVERLAPS)"],
        false,
        false,
    ),
    given(
        "system versioning dropped from a table partitioned by SYSTEM_TIME",
        &[
            "CREATE TABLE kept (id int NOT NULL PRIMARY KEY, v int) WITH SYSTEM VERSIONING \
           PARTITION BY SYSTEM_TIME LIMIT 1000 (PARTITION p_hist HISTORY, PARTITION p_cur CURRENT)",
        ],
        &[
            "ALTER TABLE kept REMOVE PARTITIONING",
            "ALTER TABLE kept DROP SYSTEM VERSIONING",
        ],
        false,
        true,
    ),
    given(
        "versioned table with explicit row columns: key widened, a column dropped",
        &[
            "CREATE TABLE tracked (id int NOT NULL PRIMARY KEY, v int NOT NULL, w int, \
           rs timestamp(6) GENERATED ALWAYS AS ROW START, \
           re timestamp(6) GENERATED ALWAYS AS ROW END, \
           PERIOD FOR SYSTEM_TIME (rs, re)) WITH SYSTEM VERSIONING",
        ],
        &[
            "SET SESSION system_versioning_alter_history = KEEP",
            "ALTER TABLE tracked DROP COLUMN w, DROP PRIMARY KEY, ADD PRIMARY KEY (id, v)",
        ],
        false,
        true,
    ),
    given(
        "bitemporal table gains a WITHOUT OVERLAPS key",
        &[
            "CREATE TABLE booking (id int NOT NULL PRIMARY KEY, room int NOT NULL, \
           since date NOT NULL, until date NOT NULL, PERIOD FOR stay (since, until)) \
           WITH SYSTEM VERSIONING",
        ],
        &[
            "SET SESSION system_versioning_alter_history = KEEP",
            "ALTER TABLE booking ADD UNIQUE KEY u_room (room, stay WITHOUT OVERLAPS)",
        ],
        false,
        false,
    ),
    given(
        "row columns made explicit on a table partitioned by SYSTEM_TIME",
        &[
            "CREATE TABLE tracked (id int NOT NULL PRIMARY KEY, v int) WITH SYSTEM VERSIONING \
           PARTITION BY SYSTEM_TIME LIMIT 100 (PARTITION p_hist HISTORY, PARTITION p_cur CURRENT)",
        ],
        &[
            "SET SESSION system_versioning_alter_history = KEEP",
            "ALTER TABLE tracked REMOVE PARTITIONING",
            "ALTER TABLE tracked DROP SYSTEM VERSIONING",
            "ALTER TABLE tracked ADD COLUMN rs timestamp(6) GENERATED ALWAYS AS ROW START, \
             ADD COLUMN re timestamp(6) GENERATED ALWAYS AS ROW END, \
             ADD PERIOD FOR SYSTEM_TIME (rs, re), ADD SYSTEM VERSIONING",
            "ALTER TABLE tracked PARTITION BY SYSTEM_TIME LIMIT 100 \
             (PARTITION p_hist HISTORY, PARTITION p_cur CURRENT)",
        ],
        true,
        true,
    ),
    // Partitions.
    given(
        "LIST COLUMNS partitions with a DEFAULT partition and comments",
        &[
            "CREATE TABLE regions (id int NOT NULL, region varchar(10) NOT NULL, \
           PRIMARY KEY (id, region))",
        ],
        &["ALTER TABLE regions PARTITION BY LIST COLUMNS (region) \
           (PARTITION p_eu VALUES IN ('de','fr') COMMENT 'Europe, mostly', \
           PARTITION p_other DEFAULT COMMENT 'the rest')"],
        false,
        false,
    ),
    given(
        "LIST with DEFAULT repartitioned by RANGE with named subpartitions",
        &[
            "CREATE TABLE sales (id int NOT NULL, yr int NOT NULL, PRIMARY KEY (id, yr)) \
           PARTITION BY LIST (yr) (PARTITION p1 VALUES IN (2020, 2021), PARTITION pd DEFAULT)",
        ],
        &[
            "ALTER TABLE sales PARTITION BY RANGE (yr) SUBPARTITION BY HASH (id) \
           (PARTITION p0 VALUES LESS THAN (2021) (SUBPARTITION s0 COMMENT 'old', SUBPARTITION s1), \
           PARTITION p1 VALUES LESS THAN MAXVALUE (SUBPARTITION s2, SUBPARTITION s3))",
        ],
        false,
        false,
    ),
    given(
        "partitioning column dropped and the table repartitioned",
        &["CREATE TABLE spread (id int, k int) PARTITION BY HASH (k) PARTITIONS 2"],
        &[
            "ALTER TABLE spread PARTITION BY HASH (id) PARTITIONS 3",
            "ALTER TABLE spread DROP COLUMN k",
        ],
        false,
        true,
    ),
    given(
        "RANGE COLUMNS partitioning column retyped with its bounds",
        &[
            "CREATE TABLE visits (id int NOT NULL, at date NOT NULL, PRIMARY KEY (id, at)) \
           PARTITION BY RANGE COLUMNS (at) (PARTITION p0 VALUES LESS THAN ('2024-01-01'), \
           PARTITION p1 VALUES LESS THAN (MAXVALUE))",
        ],
        &[
            "ALTER TABLE visits REMOVE PARTITIONING",
            "ALTER TABLE visits MODIFY at datetime NOT NULL",
            "ALTER TABLE visits PARTITION BY RANGE COLUMNS (at) \
             (PARTITION p0 VALUES LESS THAN ('2024-01-01 12:00:00'), \
             PARTITION p1 VALUES LESS THAN (MAXVALUE))",
        ],
        true,
        false,
    ),
    // Odd identifiers.
    given(
        "odd names everywhere",
        &[],
        &[
            "CREATE TABLE `we;rd -- /* tab``le */ 'ü' \"q\"` (`order` int NOT NULL PRIMARY KEY, \
             `select` varchar(10), `col -- x; /*` int, KEY `idx ; /* */` (`select`), \
             CONSTRAINT `chk -- ;` CHECK (`order` > 0))",
            "CREATE TABLE `Ünïcödé ✓` (`from` int NOT NULL PRIMARY KEY, `to` int, KEY `k to` (`to`), \
             CONSTRAINT `fk ; --` FOREIGN KEY (`to`) REFERENCES `we;rd -- /* tab``le */ 'ü' \"q\"` (`order`))",
            "CREATE VIEW `v ; -- view` AS SELECT `order`, `select` AS `group` FROM `we;rd -- /* tab``le */ 'ü' \"q\"`",
            "CREATE TRIGGER `tr ``x`` ; --` BEFORE INSERT ON `we;rd -- /* tab``le */ 'ü' \"q\"` \
             FOR EACH ROW SET NEW.`select` = 'a;b -- c'",
            "CREATE PROCEDURE `proc ; /*` () SELECT '*/ ; --' AS `x`",
            "CREATE EVENT `ev -- x` ON SCHEDULE EVERY 1 DAY STARTS '2031-01-01 00:00:00' DO SELECT 1",
            "CREATE SEQUENCE `seq ; x`",
        ],
        true,
        false,
    ),
    given(
        "names 64 characters long",
        &[],
        &[
            "CREATE TABLE t234567890123456789012345678901234567890123456789012345678901234 \
             (c234567890123456789012345678901234567890123456789012345678901234 int NOT NULL PRIMARY KEY, \
             p int NOT NULL, \
             KEY k234567890123456789012345678901234567890123456789012345678901234 (p), \
             CONSTRAINT f234567890123456789012345678901234567890123456789012345678901234 \
             FOREIGN KEY (p) REFERENCES parent (id))",
        ],
        true,
        false,
    ),
    given(
        "reserved words altered",
        &["CREATE TABLE `order` (`select` int NOT NULL PRIMARY KEY, `from` varchar(10))"],
        &[
            "ALTER TABLE `order` ADD COLUMN `where` int AFTER `select`, \
           ADD INDEX `group` (`where`, `from`), MODIFY `from` varchar(20)",
        ],
        true,
        false,
    ),
    given(
        "names of digits and of mixed case",
        &[],
        &[
            "CREATE TABLE `1e5` (`123` int NOT NULL PRIMARY KEY, `0x1F` varchar(5))",
            "CREATE TABLE `MiXed` (`Id` int NOT NULL PRIMARY KEY, `ID2` int, KEY `K_Id2` (`ID2`))",
        ],
        true,
        false,
    ),
    // Table options.
    given(
        "table options changed and removed, comments with quotes and line breaks",
        &[
            "CREATE TABLE tuned (id int NOT NULL PRIMARY KEY) STATS_PERSISTENT=1 CHECKSUM=1 \
             MIN_ROWS=10 MAX_ROWS=1000 COMMENT 'plain'",
            "CREATE TABLE packed (id int NOT NULL PRIMARY KEY)",
            "CREATE TABLE blocks (id int NOT NULL PRIMARY KEY)",
            "CREATE TABLE keyed (id int NOT NULL PRIMARY KEY) ENGINE=MyISAM DELAY_KEY_WRITE=1",
        ],
        &[
            "ALTER TABLE tuned STATS_PERSISTENT=0 CHECKSUM=0 MIN_ROWS=0 MAX_ROWS=0 \
             COMMENT='it''s \"new\"\\nsecond line \\\\ end'",
            "ALTER TABLE packed PAGE_COMPRESSED=1",
            "ALTER TABLE blocks ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8",
            "ALTER TABLE keyed DELAY_KEY_WRITE=0",
        ],
        false,
        false,
    ),
    given(
        "table moved to Aria with its options",
        &["CREATE TABLE crash_safe (id int NOT NULL PRIMARY KEY, v varchar(10))"],
        &["ALTER TABLE crash_safe ENGINE=Aria TRANSACTIONAL=1 PAGE_CHECKSUM=1"],
        false,
        false,
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_demanding_change_gets_undo_and_adopt_scripts_that_the_server_proves() {
    let mut admin = admin().await;
    admin
        .execute(format!("CREATE USER IF NOT EXISTS {DEFINER}").as_str())
        .await
        .unwrap();
    prove(BASE, CHANGES).await;
    admin
        .execute(format!("DROP USER {DEFINER}").as_str())
        .await
        .unwrap();
}
