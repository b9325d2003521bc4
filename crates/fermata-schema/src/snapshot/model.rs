//! The structured model of a database's schema, as read from `information_schema`: what the
//! canonical files are rendered from and what `schema.json` holds. Names are kept exactly;
//! collections are sorted by the binary order of their names' UTF-8 bytes, except columns, index
//! parts, parameters and partitions, whose order is meaningful.
//!
//! The model keeps what the canonical files leave out because a file must apply as-is in another
//! database: the definers of views, routines, triggers and events, the `sql_mode` each stored
//! program was created under, an event's time zone, and a trigger's action order as a number.

use serde::{Deserialize, Serialize};

/// The server family a model was read from, which decides the spelling of its files: a MySQL
/// source is written in MySQL's own spelling (`int`, `CURRENT_TIMESTAMP`), a MariaDB one in
/// MariaDB's (`int(11)`, `current_timestamp()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flavor {
    #[default]
    Mariadb,
    Mysql,
}

impl Flavor {
    /// The flavor of a server by its `VERSION()` (`10.11.6-MariaDB-log`, `8.0.36`).
    pub fn of_version(version: &str) -> Flavor {
        if version.to_ascii_lowercase().contains("mariadb") {
            Flavor::Mariadb
        } else {
            Flavor::Mysql
        }
    }

    fn is_mariadb(&self) -> bool {
        *self == Flavor::Mariadb
    }
}

/// One database's objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatabaseModel {
    pub name: String,
    /// MariaDB unless said (so models written before MySQL sources were read stay the same).
    #[serde(default, skip_serializing_if = "Flavor::is_mariadb")]
    pub flavor: Flavor,
    pub default_charset: String,
    pub default_collation: String,
    pub tables: Vec<Table>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub views: Vec<View>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sequences: Vec<Sequence>,
    /// Procedures and functions, by kind and then by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routines: Vec<Routine>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<Trigger>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Event>,
}

/// A view. Its canonical file leaves the definer out (whoever applies the file becomes it); the
/// model keeps it, so a changed definer still changes the snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct View {
    pub name: String,
    /// The `SELECT`, as the server prints it, without this database's qualifier.
    pub definition: String,
    pub algorithm: String,
    pub security: String,
    /// `NONE`, `CASCADED` or `LOCAL`.
    pub check_option: String,
    pub definer: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Table {
    pub name: String,
    pub engine: String,
    pub charset: String,
    pub collation: String,
    /// `ROW_FORMAT=...` when it was given explicitly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_format: Option<String>,
    /// The other table options the server keeps (`KEY_BLOCK_SIZE`, `STATS_PERSISTENT`,
    /// `PAGE_COMPRESSED`, ...), in the canonical option order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<TableOption>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub comment: String,
    pub columns: Vec<Column>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub indexes: Vec<Index>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign_keys: Vec<ForeignKey>,
    /// Table-level check constraints (column-level ones belong to their column).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitioning: Option<Partitioning>,
    /// MariaDB's `WITH SYSTEM VERSIONING`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub system_versioned: bool,
    /// `PERIOD FOR SYSTEM_TIME (start, end)`, printed when the table names its row start and end
    /// columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_period: Option<Period>,
    /// An application-time period, `PERIOD FOR name (start, end)` (MariaDB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application_period: Option<Period>,
}

/// A period: its name (`SYSTEM_TIME` for the system one) and its start and end columns.
/// `information_schema` of MariaDB before 11.4 does not describe periods; they are read from
/// `SHOW CREATE TABLE`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Period {
    pub name: String,
    pub start: String,
    pub end: String,
}

/// A table option other than the engine, the character set, the collation, the row format and
/// the comment, as the server prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableOption {
    /// Uppercase (`KEY_BLOCK_SIZE`), or as the engine declares it for an engine-defined option.
    pub name: String,
    /// As printed: `8`, `'1'`, `'Y'`.
    pub value: String,
    /// An option the engine defines (MariaDB's `PAGE_COMPRESSED`, `ENCRYPTED`, ...), which the
    /// server prints with a quoted name.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub engine_defined: bool,
}

/// `PARTITION BY ...`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partitioning {
    /// `RANGE`, `LIST`, `HASH`, `LINEAR HASH`, `KEY`, `LINEAR KEY`, `RANGE COLUMNS`,
    /// `LIST COLUMNS`, or MariaDB's `SYSTEM_TIME`.
    pub method: String,
    /// What follows `PARTITION BY SYSTEM_TIME`, as the server prints it (`INTERVAL 1 MONTH STARTS
    /// TIMESTAMP'2020-01-01 00:00:00'`, `LIMIT 1000`, nothing); read from `SHOW CREATE TABLE`,
    /// which alone says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_time: Option<String>,
    /// The expression or column list, as the server prints it (`year(`b`)`, `` `a`,`b` ``).
    pub expression: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subpartition_method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subpartition_expression: Option<String>,
    /// In their order.
    pub partitions: Vec<Partition>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    pub name: String,
    /// The bound of a `RANGE` partition or the list of a `LIST` one, as the server prints it
    /// (`10`, `MAXVALUE`, `NULL,1,2`, `(1,'a'),(2,'b')`); `HISTORY` or `CURRENT` for a
    /// `SYSTEM_TIME` one; none for `HASH`, `KEY` and a `DEFAULT` list partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<String>,
    /// The `DEFAULT` partition of a `LIST` table, which takes every value no other lists.
    /// `information_schema.PARTITIONS` describes it as it would a partition of `VALUES IN (0)`;
    /// it is read from `SHOW CREATE TABLE`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub default: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub comment: String,
    /// In their order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subpartitions: Vec<Subpartition>,
    /// Whether MySQL prints the name in backquotes. It quotes a partition name that reads as one of
    /// its keywords (`year`, `current`) as well as one that does not read as a name, by a keyword
    /// list the catalog does not expose, so this is read from `SHOW CREATE TABLE`, which alone
    /// says it. Never set for MariaDB, which quotes every name.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub quoted: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subpartition {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub comment: String,
    /// As [`Partition::quoted`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub quoted: bool,
}

/// A MariaDB sequence. Its current value is data, like a table's `AUTO_INCREMENT` counter, and
/// is not part of the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sequence {
    pub name: String,
    pub start: String,
    pub minimum: String,
    pub maximum: String,
    pub increment: String,
    /// 0 for `nocache`.
    pub cache: String,
    pub cycle: bool,
    pub engine: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub comment: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoutineKind {
    Function,
    Procedure,
}

impl RoutineKind {
    /// The keyword of `CREATE` and `SHOW CREATE`.
    pub fn keyword(self) -> &'static str {
        match self {
            RoutineKind::Function => "FUNCTION",
            RoutineKind::Procedure => "PROCEDURE",
        }
    }

    /// The kind of object a routine of this kind is, in errors and subjects.
    pub fn object_kind(self) -> fermata_schema_core::ObjectKind {
        match self {
            RoutineKind::Function => fermata_schema_core::ObjectKind::Function,
            RoutineKind::Procedure => fermata_schema_core::ObjectKind::Procedure,
        }
    }
}

/// A stored procedure or function. Its file leaves the definer out, as a view's does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Routine {
    pub name: String,
    pub kind: RoutineKind,
    /// The parameters as `information_schema.PARAMETERS` describes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<Parameter>,
    /// The parameter list between the parentheses, exactly as the server keeps it (it is not
    /// in `information_schema`; its parameters' modes and names are checked against
    /// [`Routine::parameters`]).
    pub parameter_list: String,
    /// A function's return type (`varchar(5) CHARSET latin1 COLLATE latin1_swedish_ci`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returns: Option<String>,
    pub deterministic: bool,
    /// `CONTAINS SQL`, `NO SQL`, `READS SQL DATA` or `MODIFIES SQL DATA`.
    pub data_access: String,
    /// `DEFINER` or `INVOKER`.
    pub security: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub comment: String,
    /// The body, exactly as the server keeps it.
    pub body: String,
    pub definer: String,
    pub sql_mode: String,
}

/// A parameter of a routine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parameter {
    /// `IN`, `OUT` or `INOUT` for a procedure's parameter; none for a function's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    pub name: String,
    /// The type as the server describes it (`int(11)`, `varchar(10)`).
    #[serde(rename = "type")]
    pub data_type: String,
}

/// A trigger. Its file leaves the definer out and names its place among the table's triggers
/// for the same timing and event with `FOLLOWS` or `PRECEDES` (see `render::program`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trigger {
    pub name: String,
    pub table: String,
    /// `BEFORE` or `AFTER`.
    pub timing: String,
    /// `INSERT`, `UPDATE` or `DELETE`.
    pub event: String,
    /// 1 for the first trigger of its table, timing and event.
    pub action_order: u32,
    /// The statement after `FOR EACH ROW`, exactly as the server keeps it.
    pub body: String,
    pub definer: String,
    pub sql_mode: String,
}

/// A scheduled event. `execute_at`, `starts` and `ends` are absolute times written in the
/// event's own `time_zone`, which the model keeps; nothing depends on the time zone of the
/// session that reads them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub name: String,
    /// `AT` this time, for a one-time event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execute_at: Option<String>,
    /// `EVERY` this interval, for a recurring one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends: Option<String>,
    /// `PRESERVE` or `NOT PRESERVE`.
    pub on_completion: String,
    /// `ENABLE`, `DISABLE` or `DISABLE ON SLAVE`.
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub comment: String,
    /// The statement after `DO`, exactly as the server keeps it.
    pub body: String,
    pub definer: String,
    pub time_zone: String,
    pub sql_mode: String,
}

/// A recurring event's interval: `value` as the server prints it (`1`, `'1:30'`) and its
/// `field` (`DAY`, `HOUR_MINUTE`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interval {
    pub value: String,
    pub field: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    /// The type exactly as the server reports it (`bigint(20) unsigned`, `enum('a','b')`).
    #[serde(rename = "type")]
    pub column_type: String,
    pub nullable: bool,
    /// The default as an SQL expression (`NULL`, `'x'`, `0.00`, `current_timestamp()`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_update: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto_increment: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub invisible: bool,
    /// The spatial reference system of a spatial column (MariaDB's `REF_SYSTEM_ID`, MySQL's
    /// `SRID`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub srid: Option<u32>,
    /// `GENERATED ALWAYS AS ROW START` or `ROW END` of a system-versioned table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_period: Option<RowPeriod>,
    /// MariaDB's `WITHOUT SYSTEM VERSIONING`: the column's changes make no history rows.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub without_system_versioning: bool,
    /// Character set and collation, for character columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charset: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated: Option<Generated>,
    /// A check constraint declared on the column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub comment: String,
}

/// Which end of the system period a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowPeriod {
    Start,
    End,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generated {
    pub expression: String,
    pub stored: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexKind {
    Primary,
    Unique,
    Key,
    Fulltext,
    Spatial,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Index {
    pub name: String,
    pub kind: IndexKind,
    pub parts: Vec<IndexPart>,
    /// `USING HASH` and the like, when the server prints it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub using: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub comment: String,
    /// MariaDB's ignored indexes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignored: bool,
    /// MySQL's invisible indexes (`IS_VISIBLE` = `NO`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub invisible: bool,
    /// The application-time period a unique key ends with, `WITHOUT OVERLAPS` (MariaDB); the
    /// period's columns are not among the parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_overlaps: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexPart {
    /// The column; empty for a functional part.
    pub column: String,
    /// A functional part's expression (MySQL 8's `STATISTICS.EXPRESSION`), as the server prints
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<u32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub descending: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForeignKey {
    pub name: String,
    pub columns: Vec<String>,
    /// The referenced database, when it is not this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub referenced_database: Option<String>,
    pub referenced_table: String,
    pub referenced_columns: Vec<String>,
    pub on_delete: String,
    pub on_update: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub clause: String,
    /// MySQL's `NOT ENFORCED`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_enforced: bool,
}
