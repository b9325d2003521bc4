//! The database's defaults, tables, views and sequences (their names; their definitions are
//! read by `sequences`), with the tables' columns, index parts, foreign keys, checks, options
//! and partitions. The first query is the same on both flavors and also reads `VERSION()`, which
//! decides the flavor of the others: MySQL 8 has `STATISTICS.IS_VISIBLE` and `EXPRESSION`,
//! `COLUMNS.SRS_ID`, and checks only through `TABLE_CONSTRAINTS`; MariaDB has
//! `STATISTICS.IGNORED`, `CHECK_CONSTRAINTS.TABLE_NAME` and `LEVEL`, and SRIDs in
//! `GEOMETRY_COLUMNS`.

use std::collections::{BTreeMap, BTreeSet};

use fermata_schema_core::{ErrorCode, ObjectKind, Reason, SafeError, Subject};
use sqlx::mysql::MySqlConnection;

use super::{Reader, by_flavor, refuse, values};
use crate::filter::Filter;
use crate::safe_context::SafeCode;
use crate::snapshot::model::{
    Check, Column, Flavor, ForeignKey, Generated, Index, IndexKind, IndexPart, Partition,
    Partitioning, RowPeriod, Sequence, Subpartition, Table, TableOption, View,
};
use crate::snapshot::normalize::{self, mysql};
use crate::source::DriverContext;

/// The server's version and the database's defaults (the row tagged `schema`; none when the
/// database is gone), with every collation's character set (the rows tagged `collation`): a
/// table's is looked up there by its collation. One small query, run alone first: the version says
/// which flavor the server is, and every other query can then be read at once.
const SCHEMA: &str = "SELECT 'schema', VERSION(), DEFAULT_CHARACTER_SET_NAME, \
     DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ? \
     UNION ALL SELECT 'collation', NULL, CHARACTER_SET_NAME, COLLATION_NAME \
     FROM information_schema.COLLATIONS";
/// The tables, views and sequences, read with the other queries. Neither a join nor a subquery:
/// MariaDB joins two `information_schema` tables by comparing every row of one with every row of
/// the other, so each table's character set is looked up in [`SCHEMA`]'s collations and what a
/// view is comes from [`VIEWS`] (for 2,000 tables the query took 90 ms with the schema joined and
/// the character set in a subquery, 40 ms without; for 20,000 tables and 1,000 views, a join with
/// `VIEWS` took 3 to 4 s where the two scans take 1.1 s).
const TABLES: &str = "SELECT TABLE_NAME, TABLE_TYPE, ENGINE, TABLE_COLLATION, CREATE_OPTIONS, \
     TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? \
     ORDER BY BINARY TABLE_NAME";
/// The names of the tables, views and sequences alone: MariaDB lists them without opening a
/// table (for 20,000 tables 60 ms, where their types took 0.5 s and [`TABLES`] 0.9 s).
pub(super) const NAMES: &str =
    "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?";
/// The type of one table, view or sequence: MariaDB opens that one alone.
const TYPE_OF: &str = "SELECT TABLE_TYPE FROM information_schema.TABLES \
     WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?";
/// The views: name, definition, check option, definer, security. A view's algorithm is not here
/// (MySQL's `VIEWS` has no `ALGORITHM`): it is read from `SHOW CREATE VIEW` on both flavors.
const VIEWS: &str = "SELECT TABLE_NAME, VIEW_DEFINITION, CHECK_OPTION, DEFINER, SECURITY_TYPE \
     FROM information_schema.VIEWS WHERE TABLE_SCHEMA = ? ORDER BY BINARY TABLE_NAME";
/// Columns; the last is MySQL's SRID (MariaDB's are read from `GEOMETRY_COLUMNS`).
const COLUMNS_MARIADB: &str = "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, \
     COLUMN_DEFAULT, EXTRA, CHARACTER_SET_NAME, COLLATION_NAME, COLUMN_COMMENT, \
     GENERATION_EXPRESSION, NULL \
     FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? \
     ORDER BY BINARY TABLE_NAME, ORDINAL_POSITION";
const COLUMNS_MYSQL: &str = "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, \
     COLUMN_DEFAULT, EXTRA, CHARACTER_SET_NAME, COLLATION_NAME, COLUMN_COMMENT, \
     GENERATION_EXPRESSION, CAST(SRS_ID AS CHAR) \
     FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? \
     ORDER BY BINARY TABLE_NAME, ORDINAL_POSITION";
/// Index parts: the last three are MariaDB's `IGNORED`, MySQL's `IS_VISIBLE` and MySQL's
/// functional part `EXPRESSION`, each a constant on the other flavor.
const INDEXES_MARIADB: &str = "SELECT TABLE_NAME, INDEX_NAME, CAST(NON_UNIQUE AS CHAR), \
     COLUMN_NAME, CAST(SUB_PART AS CHAR), INDEX_TYPE, COLLATION, INDEX_COMMENT, IGNORED, 'YES', \
     NULL FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? \
     ORDER BY BINARY TABLE_NAME, BINARY INDEX_NAME, SEQ_IN_INDEX";
const INDEXES_MYSQL: &str = "SELECT TABLE_NAME, INDEX_NAME, CAST(NON_UNIQUE AS CHAR), \
     COLUMN_NAME, CAST(SUB_PART AS CHAR), INDEX_TYPE, COLLATION, INDEX_COMMENT, 'NO', IS_VISIBLE, \
     EXPRESSION FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? \
     ORDER BY BINARY TABLE_NAME, BINARY INDEX_NAME, SEQ_IN_INDEX";
/// Foreign keys' rules: table, name, on delete, on update. Their columns are [`FOREIGN_KEY_COLUMNS`],
/// a query of its own rather than a join, or a union read as one: MariaDB joins two
/// `information_schema` tables by comparing every row of one with every row of the other
/// (seconds for a few thousand keys), and each half opens every table, so as one union of the two
/// scans it was the longest catalog query at 20,000 tables and ended alone on one core (the
/// catalog's queries at once: 1.7 to 1.8 s with the union, 1.3 s with its halves apart).
const FOREIGN_KEY_RULES: &str = "SELECT TABLE_NAME, CONSTRAINT_NAME, DELETE_RULE, UPDATE_RULE \
     FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = ?";
/// Foreign keys' columns, each key's in order: table, name, column, referenced database, table and
/// column.
const FOREIGN_KEY_COLUMNS: &str = "SELECT TABLE_NAME, CONSTRAINT_NAME, COLUMN_NAME, \
     REFERENCED_TABLE_SCHEMA, REFERENCED_TABLE_NAME, REFERENCED_COLUMN_NAME \
     FROM information_schema.KEY_COLUMN_USAGE \
     WHERE TABLE_SCHEMA = ? AND CONSTRAINT_SCHEMA = ? AND REFERENCED_TABLE_NAME IS NOT NULL \
     ORDER BY BINARY TABLE_NAME, BINARY CONSTRAINT_NAME, ORDINAL_POSITION";
/// Checks: table, name, clause, level (`Column` or `Table`), enforced. MySQL's
/// `CHECK_CONSTRAINTS` names no table; `TABLE_CONSTRAINTS` does, and says whether a check is
/// enforced. MySQL prints every check as a table constraint.
const CHECKS_MARIADB: &str = "SELECT TABLE_NAME, CONSTRAINT_NAME, CHECK_CLAUSE, LEVEL, 'YES' \
     FROM information_schema.CHECK_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = ? \
     ORDER BY BINARY TABLE_NAME, BINARY CONSTRAINT_NAME";
const CHECKS_MYSQL: &str = "SELECT tc.TABLE_NAME, tc.CONSTRAINT_NAME, cc.CHECK_CLAUSE, 'Table', \
     tc.ENFORCED FROM information_schema.TABLE_CONSTRAINTS tc \
     JOIN information_schema.CHECK_CONSTRAINTS cc ON cc.CONSTRAINT_SCHEMA = tc.CONSTRAINT_SCHEMA \
      AND cc.CONSTRAINT_NAME = tc.CONSTRAINT_NAME \
     WHERE tc.CONSTRAINT_SCHEMA = ? AND tc.CONSTRAINT_TYPE = 'CHECK' \
     ORDER BY BINARY tc.TABLE_NAME, BINARY tc.CONSTRAINT_NAME";
/// MariaDB's spatial reference systems of spatial columns (its `SHOW CREATE TABLE` does not
/// print `REF_SYSTEM_ID`); read only when a table has a spatial column.
const SRIDS_MARIADB: &str = "SELECT G_TABLE_NAME, G_GEOMETRY_COLUMN, CAST(SRID AS CHAR) \
     FROM information_schema.GEOMETRY_COLUMNS WHERE G_TABLE_SCHEMA = ? AND SRID <> 0";
const PARTITIONS: &str = "SELECT TABLE_NAME, PARTITION_NAME, SUBPARTITION_NAME, PARTITION_METHOD, \
     SUBPARTITION_METHOD, PARTITION_EXPRESSION, SUBPARTITION_EXPRESSION, PARTITION_DESCRIPTION, \
     PARTITION_COMMENT FROM information_schema.PARTITIONS \
     WHERE TABLE_SCHEMA = ? AND PARTITION_NAME IS NOT NULL \
     ORDER BY BINARY TABLE_NAME, PARTITION_ORDINAL_POSITION, SUBPARTITION_ORDINAL_POSITION";

/// Every query the catalog may run on a MySQL server, for the test that checks each column they
/// name against MySQL's own view definitions.
pub(super) const MYSQL_QUERIES: &[&str] = &[
    SCHEMA,
    TABLES,
    NAMES,
    TYPE_OF,
    VIEWS,
    COLUMNS_MYSQL,
    INDEXES_MYSQL,
    FOREIGN_KEY_RULES,
    FOREIGN_KEY_COLUMNS,
    CHECKS_MYSQL,
    PARTITIONS,
];

/// The partitioning methods the model renders.
const PARTITION_METHODS: &[&str] = &[
    "RANGE",
    "LIST",
    "HASH",
    "LINEAR HASH",
    "KEY",
    "LINEAR KEY",
    "RANGE COLUMNS",
    "LIST COLUMNS",
    "SYSTEM_TIME",
];

/// The spatial column types.
const SPATIAL_TYPES: &[&str] = &[
    "geometry",
    "point",
    "linestring",
    "polygon",
    "multipoint",
    "multilinestring",
    "multipolygon",
    "geometrycollection",
    "geomcollection",
];

/// What the tables query finds.
pub(super) struct Relations {
    pub(super) server: Server,
    pub(super) tables: Vec<Table>,
    pub(super) views: Vec<View>,
    /// Named, with their engine and comment; the definitions are read later.
    pub(super) sequences: Vec<Sequence>,
}

/// What a column's `EXTRA` says, read phrase by phrase (MariaDB separates them with `, `, MySQL
/// with a space); `None` when it says something the model does not hold.
#[derive(Debug, Default, PartialEq, Eq)]
struct Extra {
    /// MySQL's mark of an expression default (`CURRENT_TIMESTAMP` among them).
    default_generated: bool,
    auto_increment: bool,
    invisible: bool,
    generated: Option<bool>,
    on_update: Option<String>,
    without_system_versioning: bool,
}

/// A phrase of `EXTRA` and what it sets.
type Phrase = (&'static str, fn(&mut Extra));

fn read_extra(extra: &str) -> Option<Extra> {
    let mut read = Extra::default();
    let mut rest = extra.trim();
    while !rest.is_empty() {
        rest = rest.trim_start_matches([',', ' ']);
        if rest.is_empty() {
            break;
        }
        let phrases: [Phrase; 9] = [
            // MySQL marks expression defaults, whose `COLUMN_DEFAULT` is the bare expression.
            ("DEFAULT_GENERATED", |e| e.default_generated = true),
            ("auto_increment", |e| e.auto_increment = true),
            ("INVISIBLE", |e| e.invisible = true),
            ("VIRTUAL GENERATED", |e| e.generated = Some(false)),
            ("STORED GENERATED", |e| e.generated = Some(true)),
            ("PERSISTENT GENERATED", |e| e.generated = Some(true)),
            ("WITHOUT SYSTEM VERSIONING", |e| {
                e.without_system_versioning = true
            }),
            ("VIRTUAL", |e| e.generated = Some(false)),
            ("STORED", |e| e.generated = Some(true)),
        ];
        if let Some((phrase, apply)) = phrases.iter().find(|(phrase, _)| rest.starts_with(phrase)) {
            apply(&mut read);
            rest = &rest[phrase.len()..];
        } else if let Some(after) = rest.strip_prefix("on update ") {
            let end = after.find([',', ' ']).unwrap_or(after.len());
            read.on_update = Some(after[..end].to_owned());
            rest = &after[end..];
        } else {
            return None;
        }
    }
    Some(read)
}

/// One row of `information_schema.COLUMNS` as the catalog query reads it, every value as the
/// server gives it (MySQL's `SRS_ID` for the SRID; MariaDB's is read from `GEOMETRY_COLUMNS`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ColumnRow {
    pub name: String,
    /// `COLUMN_TYPE`.
    pub column_type: String,
    /// `IS_NULLABLE` = `YES`.
    pub nullable: bool,
    /// `COLUMN_DEFAULT`: an SQL expression on MariaDB (`'x'`, `NULL`, `current_timestamp()`), a
    /// bare value or expression on MySQL (`x`, SQL NULL, `CURRENT_TIMESTAMP`, `rand()`).
    pub default: Option<String>,
    pub extra: String,
    pub charset: Option<String>,
    pub collation: Option<String>,
    pub comment: String,
    pub generation_expression: Option<String>,
    pub srid: Option<u32>,
}

/// The column types MySQL gives no `DEFAULT NULL` when they have no default: their default can
/// only be an expression.
const NO_DEFAULT_NULL: &[&str] = &[
    "tinyblob",
    "blob",
    "mediumblob",
    "longblob",
    "tinytext",
    "text",
    "mediumtext",
    "longtext",
];

/// The column a catalog row of a `flavor` server describes, spelled as that server spells it:
/// MariaDB's `utf8` is written `utf8mb3`, and its defaults are SQL expressions already; MySQL's
/// bare defaults become the SQL `SHOW CREATE TABLE` prints (`'0'`, `b'101'`, `CURRENT_TIMESTAMP`,
/// `(rand())`, `NULL` where MySQL prints `DEFAULT NULL`). `Err` with the reason when the row
/// says something the model cannot hold.
pub fn column_from_catalog(flavor: Flavor, row: ColumnRow) -> Result<Column, Reason> {
    let charset_name = |name: String| match flavor {
        Flavor::Mariadb => mysql::utf8mb3(&name),
        Flavor::Mysql => name,
    };
    let extra = read_extra(&row.extra).ok_or(Reason::ColumnAttribute)?;
    let expression = row
        .generation_expression
        .filter(|expression| !expression.is_empty());
    let (generated, row_period) = match (extra.generated, expression) {
        (Some(true), Some(expression)) if expression == "ROW START" => {
            (None, Some(RowPeriod::Start))
        }
        (Some(true), Some(expression)) if expression == "ROW END" => (None, Some(RowPeriod::End)),
        (Some(stored), Some(expression)) => (Some(Generated { expression, stored }), None),
        (None, _) => (None, None),
        (Some(_), None) => return Err(Reason::ColumnAttribute),
    };
    let column_type = match flavor {
        Flavor::Mariadb => mysql::display_width(&row.column_type),
        Flavor::Mysql => row.column_type,
    };
    let computed = generated.is_some() || row_period.is_some();
    let default = match flavor {
        Flavor::Mariadb => row
            .default
            .filter(|_| !computed)
            .map(|default| mysql::current_timestamp(&default)),
        Flavor::Mysql if computed || extra.auto_increment => None,
        Flavor::Mysql => match (row.default, extra.default_generated) {
            (Some(value), true) if is_current_timestamp(&value) => Some(value),
            (Some(value), true) => Some(format!("({value})")),
            (None, true) => return Err(Reason::ColumnAttribute),
            (Some(value), false) if column_type.starts_with("bit(") => Some(value),
            (Some(value), false) => Some(crate::snapshot::render::literal(&value)),
            (None, false) if row.nullable && !NO_DEFAULT_NULL.contains(&column_type.as_str()) => {
                Some("NULL".to_owned())
            }
            (None, false) => None,
        },
    };
    Ok(Column {
        name: row.name,
        column_type,
        nullable: row.nullable,
        default,
        on_update: extra.on_update.map(|on_update| match flavor {
            Flavor::Mariadb => mysql::current_timestamp(&on_update),
            Flavor::Mysql => on_update,
        }),
        auto_increment: extra.auto_increment,
        invisible: extra.invisible,
        srid: row.srid,
        row_period,
        without_system_versioning: extra.without_system_versioning,
        charset: row.charset.map(charset_name),
        collation: row.collation.map(charset_name),
        generated,
        check: None,
        comment: row.comment,
    })
}

/// `CURRENT_TIMESTAMP` or `CURRENT_TIMESTAMP(n)`, as MySQL writes the default and the
/// `ON UPDATE` of a time column.
fn is_current_timestamp(value: &str) -> bool {
    match value.strip_prefix("CURRENT_TIMESTAMP") {
        Some("") => true,
        Some(rest) => rest
            .strip_prefix('(')
            .and_then(|rest| rest.strip_suffix(')'))
            .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())),
        None => false,
    }
}

/// One row of `information_schema.STATISTICS`: one part of an index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexRow {
    /// `INDEX_NAME`.
    pub name: String,
    pub non_unique: bool,
    /// `COLUMN_NAME`; none for a functional part.
    pub column: Option<String>,
    /// `SUB_PART`.
    pub sub_part: Option<String>,
    pub index_type: String,
    /// `COLLATION`: `A`, `D` or none.
    pub collation: Option<String>,
    pub comment: String,
    /// MariaDB's `IGNORED` = `YES`.
    pub ignored: bool,
    /// MySQL's `IS_VISIBLE` (MariaDB's indexes are all visible).
    pub visible: bool,
    /// MySQL's `EXPRESSION` of a functional part.
    pub expression: Option<String>,
}

/// Adds the part `row` describes to `indexes`, the table's indexes so far in catalog order: to
/// the last index when it is the same one, else as a new index. `Err` with the reason when the
/// row says something the model cannot hold.
pub fn add_index_row(indexes: &mut Vec<Index>, row: IndexRow) -> Result<(), Reason> {
    let kind = match (row.name.as_str(), row.non_unique, row.index_type.as_str()) {
        ("PRIMARY", false, _) => IndexKind::Primary,
        (_, _, "FULLTEXT") => IndexKind::Fulltext,
        (_, _, "SPATIAL") => IndexKind::Spatial,
        (_, false, _) => IndexKind::Unique,
        _ => IndexKind::Key,
    };
    // Whether `USING` is printed (given explicitly, or a MariaDB long unique key kept as a
    // hash) only `SHOW CREATE TABLE` says; it is read from there. Another type (MariaDB's
    // vector indexes) is not in the model.
    if !matches!(
        row.index_type.as_str(),
        "BTREE" | "HASH" | "RTREE" | "FULLTEXT" | "SPATIAL" | ""
    ) {
        return Err(Reason::IndexKind);
    }
    let part = IndexPart {
        column: match (&row.expression, row.column) {
            (Some(_), _) => String::new(),
            (None, Some(column)) => column,
            (None, None) => return Err(Reason::IndexKind),
        },
        expression: row.expression,
        // A spatial index reports the length of its key (32) as a prefix it does not have.
        prefix: match kind {
            IndexKind::Spatial => None,
            _ => row
                .sub_part
                .map(|prefix| prefix.parse().map_err(|_| Reason::IndexKind))
                .transpose()?,
        },
        descending: row.collation.as_deref() == Some("D"),
    };
    match indexes.last_mut().filter(|index| index.name == row.name) {
        Some(index) => index.parts.push(part),
        None => indexes.push(Index {
            name: row.name,
            kind,
            parts: vec![part],
            using: None,
            comment: row.comment,
            ignored: row.ignored,
            invisible: !row.visible,
            without_overlaps: None,
        }),
    }
    Ok(())
}

/// The server's version and flavor, the database's defaults, and every collation's character set.
pub(super) struct Server {
    pub(super) version: String,
    pub(super) flavor: Flavor,
    pub(super) default_charset: String,
    pub(super) default_collation: String,
    /// The character set of each collation, by collation, as the server names them.
    charsets: BTreeMap<String, String>,
}

impl Server {
    /// A character set or collation named as the model names it (MariaDB's `utf8mb3` as
    /// `utf8`).
    fn charset_name(&self, name: String) -> String {
        match self.flavor {
            Flavor::Mariadb => mysql::utf8mb3(&name),
            Flavor::Mysql => name,
        }
    }
}

/// Runs [`SCHEMA`] on the reader's connection; a database that is gone is
/// `DATABASE_NO_LONGER_VISIBLE`.
pub(super) async fn server(reader: &mut Reader<'_>) -> Result<Server, SafeError> {
    let database = reader.database;
    let schema = reader.rows(SCHEMA).await?;
    let mut first = None;
    let mut charsets: BTreeMap<String, String> = BTreeMap::new();
    for row in &schema {
        let v = values(row, database);
        match v.text(0)?.as_str() {
            "schema" => first = Some(row),
            _ => {
                if let Some(charset) = v.optional(2)? {
                    charsets.insert(v.text(3)?, charset);
                }
            }
        }
    }
    let first = values(
        first.ok_or_else(|| {
            SafeError::about(
                ErrorCode::DatabaseNoLongerVisible,
                Subject::Database(database.clone()),
            )
        })?,
        database,
    );
    let version = first.text(1)?;
    let mut server = Server {
        flavor: Flavor::of_version(&version),
        version,
        default_charset: String::new(),
        default_collation: String::new(),
        charsets,
    };
    server.default_charset = server.charset_name(first.text(2)?);
    server.default_collation = server.charset_name(first.text(3)?);
    Ok(server)
}

/// Reads `database`'s tables, views and sequence names. Once [`SCHEMA`] has said which flavor
/// the server is, every other query is read ahead at once over the first connection and
/// `others`, with `also` (the stored programs' queries); the partitions, when a table is
/// partitioned, follow on the first connection.
pub(super) async fn read(
    reader: &mut Reader<'_>,
    others: &mut [MySqlConnection],
    also: &[&'static str],
) -> Result<Relations, SafeError> {
    let database = reader.database;
    let unsupported = || super::unsupported(database);
    let server = server(reader).await?;
    let flavor = server.flavor;
    let checks = by_flavor(flavor, CHECKS_MARIADB, CHECKS_MYSQL);
    let columns = by_flavor(flavor, COLUMNS_MARIADB, COLUMNS_MYSQL);
    let indexes = by_flavor(flavor, INDEXES_MARIADB, INDEXES_MYSQL);
    // The longest first: a connection given two queries gets one of the short ones last.
    let mut ahead = vec![
        indexes,
        FOREIGN_KEY_COLUMNS,
        FOREIGN_KEY_RULES,
        columns,
        TABLES,
        checks,
        VIEWS,
    ];
    ahead.extend_from_slice(also);
    reader.read_ahead(others, &ahead).await?;
    let relations = reader.rows(TABLES).await?;

    // The server prints a view's definition without this database's qualifier; the catalog
    // qualifies every name, so the qualifier is taken off to compare the two.
    let qualifier = format!(
        "{}.",
        crate::snapshot::render::identifier(database.as_str())
    );
    let mut tables: BTreeMap<String, Table> = BTreeMap::new();
    let mut views = Vec::new();
    let mut sequences = Vec::new();
    // Views' and sequences' columns are listed with the tables'; they are not tables' columns.
    let mut not_tables = BTreeSet::new();
    let mut partitioned = false;
    for row in &relations {
        let v = values(row, database);
        let name = v.text(0)?;
        let v = v.about(ObjectKind::Table, &name);
        let system_versioned = match v.text(1)?.as_str() {
            "BASE TABLE" => false,
            "SYSTEM VERSIONED" => true,
            "VIEW" => {
                views.push(name.clone());
                not_tables.insert(name);
                continue;
            }
            "SEQUENCE" => {
                let v = v.about(ObjectKind::Sequence, &name);
                sequences.push(Sequence {
                    name: name.clone(),
                    start: String::new(),
                    minimum: String::new(),
                    maximum: String::new(),
                    increment: String::new(),
                    cache: String::new(),
                    cycle: false,
                    engine: v.text(2)?,
                    comment: v.optional(5)?.unwrap_or_default(),
                });
                not_tables.insert(name);
                continue;
            }
            // Anything else the model does not hold: refuse rather than write a snapshot that
            // leaves it out or says less about it.
            _ => {
                return Err(refuse(
                    database,
                    ObjectKind::Table,
                    &name,
                    Reason::TableType,
                ));
            }
        };
        let printed = normalize::options(&v.optional(4)?.unwrap_or_default()).ok_or_else(|| {
            refuse(
                database,
                ObjectKind::Table,
                &name,
                Reason::UnreadableDefinition,
            )
        })?;
        let mut row_format = None;
        let mut options = Vec::new();
        for option in printed {
            match (option.name.as_str(), option.engine_defined) {
                ("partitioned", false) => partitioned = true,
                ("row_format", false) => row_format = Some(option.value),
                (_, true) => options.push(TableOption {
                    name: option.name,
                    value: option.value,
                    engine_defined: true,
                }),
                (name, false) => options.push(TableOption {
                    name: name.to_ascii_uppercase(),
                    value: option.value,
                    engine_defined: false,
                }),
            }
        }
        options.sort_by_key(|option| {
            crate::snapshot::render::option_rank(&option.name, option.engine_defined)
        });
        let collation = v.text(3)?;
        tables.insert(
            name.clone(),
            Table {
                engine: v.text(2)?,
                charset: server.charset_name(
                    server
                        .charsets
                        .get(&collation)
                        .cloned()
                        .ok_or_else(|| v.unreadable())?,
                ),
                collation: server.charset_name(collation),
                row_format,
                options,
                comment: v.optional(5)?.unwrap_or_default(),
                system_versioned,
                name,
                ..Table::default()
            },
        );
    }

    let views = read_views(reader, &views, &qualifier).await?;

    let mut column_checks: BTreeMap<(String, String), String> = BTreeMap::new();
    for row in reader.rows(checks).await? {
        let v = values(&row, database);
        let table = v.text(0)?;
        let v = v.about(ObjectKind::Table, &table);
        let (name, clause, level) = (v.text(1)?, v.text(2)?, v.text(3)?);
        let not_enforced = v.text(4)? == "NO";
        match level.as_str() {
            "Column" => {
                column_checks.insert((table, name), clause);
            }
            _ => tables
                .get_mut(&table)
                .ok_or_else(unsupported)?
                .checks
                .push(Check {
                    name,
                    clause,
                    not_enforced,
                }),
        }
    }

    let mut spatial = false;
    for row in reader.rows(columns).await? {
        let v = values(&row, database);
        let table_name = v.text(0)?;
        if not_tables.contains(&table_name) {
            continue;
        }
        let v = v.about(ObjectKind::Table, &table_name);
        let refused = |reason| refuse(database, ObjectKind::Table, &table_name, reason);
        let row = ColumnRow {
            name: v.text(1)?,
            column_type: v.text(2)?,
            nullable: v.text(3)? == "YES",
            default: v.optional(4)?,
            extra: v.optional(5)?.unwrap_or_default(),
            charset: v.optional(6)?,
            collation: v.optional(7)?,
            comment: v.optional(8)?.unwrap_or_default(),
            generation_expression: v.optional(9)?,
            srid: v
                .optional(10)?
                .map(|srid| srid.parse::<u32>().or_safe(|| refused(Reason::ColumnType)))
                .transpose()?,
        };
        let mut column = column_from_catalog(flavor, row).map_err(refused)?;
        spatial |= SPATIAL_TYPES.contains(&column.column_type.as_str());
        column.check = column_checks.remove(&(table_name.clone(), column.name.clone()));
        tables
            .get_mut(&table_name)
            .ok_or_else(unsupported)?
            .columns
            .push(column);
    }
    if let Some(((table, _), _)) = column_checks.into_iter().next() {
        return Err(refuse(
            database,
            ObjectKind::Table,
            &table,
            Reason::CheckConstraint,
        ));
    }
    if spatial && flavor == Flavor::Mariadb {
        for (table_name, column_name, srid) in srids(reader).await? {
            let Some(table) = tables.get_mut(&table_name) else {
                continue;
            };
            let column = table
                .columns
                .iter_mut()
                .find(|column| column.name == column_name)
                .ok_or_else(|| {
                    refuse(database, ObjectKind::Table, &table_name, Reason::ColumnType)
                })?;
            column.srid = Some(srid);
        }
    }

    for row in reader.rows(indexes).await? {
        let v = values(&row, database);
        let table_name = v.text(0)?;
        let v = v.about(ObjectKind::Table, &table_name);
        let refused = |reason| refuse(database, ObjectKind::Table, &table_name, reason);
        let table = tables.get_mut(&table_name).ok_or_else(unsupported)?;
        let row = IndexRow {
            name: v.text(1)?,
            non_unique: v.text(2)? != "0",
            column: v.optional(3)?,
            sub_part: v.optional(4)?,
            index_type: v.text(5)?,
            collation: v.optional(6)?,
            comment: v.optional(7)?.unwrap_or_default(),
            ignored: v.optional(8)?.as_deref() == Some("YES"),
            visible: v.optional(9)?.as_deref() != Some("NO"),
            expression: v.optional(10)?,
        };
        add_index_row(&mut table.indexes, row).map_err(refused)?;
    }

    // As in a join, columns without rules and rules without columns are no key.
    let mut rules: BTreeMap<(String, String), (String, String)> = BTreeMap::new();
    for row in reader.rows(FOREIGN_KEY_RULES).await? {
        let v = values(&row, database);
        rules.insert((v.text(0)?, v.text(1)?), (v.text(2)?, v.text(3)?));
    }
    for row in reader.rows(FOREIGN_KEY_COLUMNS).await? {
        let v = values(&row, database);
        let key = (v.text(0)?, v.text(1)?);
        let Some((on_delete, on_update)) = rules.get(&key) else {
            continue;
        };
        let (table_name, name) = key;
        let table = tables.get_mut(&table_name).ok_or_else(unsupported)?;
        let referenced_database = v.text(3)?;
        let (column, referenced_column) = (v.text(2)?, v.text(5)?);
        match table.foreign_keys.last_mut().filter(|key| key.name == name) {
            Some(key) => {
                key.columns.push(column);
                key.referenced_columns.push(referenced_column);
            }
            None => table.foreign_keys.push(ForeignKey {
                name,
                columns: vec![column],
                referenced_database: (referenced_database != database.as_str())
                    .then_some(referenced_database),
                referenced_table: v.text(4)?,
                referenced_columns: vec![referenced_column],
                on_delete: on_delete.clone(),
                on_update: on_update.clone(),
            }),
        }
    }

    if partitioned {
        read_partitions(reader, &mut tables).await?;
    }

    let mut tables: Vec<Table> = tables.into_values().collect();
    for table in &mut tables {
        // Primary first, then by name: the canonical order.
        table.indexes.sort_by(|a, b| {
            (a.kind != IndexKind::Primary, a.name.as_bytes())
                .cmp(&(b.kind != IndexKind::Primary, b.name.as_bytes()))
        });
    }
    Ok(Relations {
        server,
        tables,
        views,
        sequences,
    })
}

/// Whether `table` has a spatial column, whose spatial reference system MariaDB's
/// `SHOW CREATE TABLE` does not print.
pub(super) fn is_spatial(table: &Table) -> bool {
    table
        .columns
        .iter()
        .any(|column| SPATIAL_TYPES.contains(&column.column_type.as_str()))
}

/// MariaDB's spatial reference systems other than 0, from [`SRIDS_MARIADB`]: table, column,
/// SRID.
pub(super) async fn srids(
    reader: &mut Reader<'_>,
) -> Result<Vec<(String, String, u32)>, SafeError> {
    let database = reader.database;
    let mut srids = Vec::new();
    for row in reader.rows(SRIDS_MARIADB).await? {
        let v = values(&row, database);
        let (table_name, column_name) = (v.text(0)?, v.text(1)?);
        let refused = || refuse(database, ObjectKind::Table, &table_name, Reason::ColumnType);
        let srid = v.text(2)?.parse::<u32>().or_safe(refused)?;
        srids.push((table_name, column_name, srid));
    }
    Ok(srids)
}

/// The names of the tables, views and sequences that `filter` keeps, from [`NAMES`] (read ahead
/// by the caller), without the type of each: MariaDB lists the names without opening a table,
/// where their types make it read every table's definition. A name the filter would leave out as
/// a table is kept when it is a view or a sequence, so its type alone is read, with [`TYPE_OF`];
/// a name gone meanwhile is left out.
pub(super) async fn names(
    reader: &mut Reader<'_>,
    filter: &Filter,
) -> Result<BTreeSet<String>, SafeError> {
    let database = reader.database;
    let mut names = BTreeSet::new();
    for row in reader.rows(NAMES).await? {
        let name = values(&row, database).text(0)?;
        if !filter.ignores_table(&name) {
            names.insert(name);
            continue;
        }
        let typed = sqlx::query(TYPE_OF)
            .bind(database.as_str())
            .bind(&name)
            .fetch_optional(&mut *reader.connection)
            .await
            .query_context_about("read the catalog", database)?;
        if let Some(row) = typed {
            let table_type = values(&row, database).text(0)?;
            if !matches!(table_type.as_str(), "BASE TABLE" | "SYSTEM VERSIONED") {
                names.insert(name);
            }
        }
    }
    Ok(names)
}

/// The views the tables query found, `names` in its order, from [`VIEWS`]: each definition
/// without this database's `qualifier`. A view listed there and not here (dropped in between, or
/// not readable) refuses the database, as an unreadable definition does.
async fn read_views(
    reader: &mut Reader<'_>,
    names: &[String],
    qualifier: &str,
) -> Result<Vec<View>, SafeError> {
    let database = reader.database;
    let mut read: BTreeMap<String, View> = BTreeMap::new();
    for row in reader.rows(VIEWS).await? {
        let v = values(&row, database);
        let name = v.text(0)?;
        let v = v.about(ObjectKind::View, &name);
        let view = View {
            name: name.clone(),
            definition: v.text(1)?.replace(qualifier, ""),
            check_option: v.text(2)?,
            definer: v.text(3)?,
            security: v.text(4)?,
            // From `SHOW CREATE VIEW`.
            algorithm: String::new(),
        };
        read.insert(name, view);
    }
    names
        .iter()
        .map(|name| {
            read.remove(name).ok_or_else(|| {
                refuse(
                    database,
                    ObjectKind::View,
                    name,
                    Reason::UnreadableDefinition,
                )
            })
        })
        .collect()
}

/// Reads the partitions of every partitioned table, one row per partition or subpartition.
async fn read_partitions(
    reader: &mut Reader<'_>,
    tables: &mut BTreeMap<String, Table>,
) -> Result<(), SafeError> {
    let database = reader.database;
    let unsupported = || super::unsupported(database);
    for row in reader.rows(PARTITIONS).await? {
        let v = values(&row, database);
        let table_name = v.text(0)?;
        let v = v.about(ObjectKind::Table, &table_name);
        let table = tables.get_mut(&table_name).ok_or_else(unsupported)?;
        let method = v.text(3)?;
        if !PARTITION_METHODS.contains(&method.as_str()) {
            return Err(refuse(
                database,
                ObjectKind::Table,
                &table_name,
                Reason::PartitioningMethod,
            ));
        }
        let system_time = method == "SYSTEM_TIME";
        let partitioning = table.partitioning.get_or_insert_with(|| Partitioning {
            method,
            system_time: None,
            expression: String::new(),
            subpartition_method: None,
            subpartition_expression: None,
            partitions: Vec::new(),
        });
        partitioning.expression = v.text(5)?;
        partitioning.subpartition_method = v.optional(4)?;
        partitioning.subpartition_expression = v.optional(6)?;
        let name = v.text(1)?;
        let comment = v.optional(8)?.unwrap_or_default();
        let partition = match partitioning
            .partitions
            .last_mut()
            .filter(|partition| partition.name == name)
        {
            Some(partition) => partition,
            None => {
                // A system-time partition holds history or the current rows; the bound the
                // catalog gives a history partition follows from the `INTERVAL`.
                let values = match (system_time, v.optional(7)?) {
                    (true, Some(current)) if current == "CURRENT" => Some(current),
                    (true, _) => Some("HISTORY".to_owned()),
                    (false, values) => values,
                };
                partitioning.partitions.push(Partition {
                    name,
                    values,
                    default: false,
                    comment: String::new(),
                    subpartitions: Vec::new(),
                    quoted: false,
                });
                partitioning.partitions.last_mut().ok_or_else(unsupported)?
            }
        };
        // A subpartition's row carries its own comment; a partition's is on its only row.
        match v.optional(2)? {
            Some(subpartition) => partition.subpartitions.push(Subpartition {
                name: subpartition,
                comment,
                quoted: false,
            }),
            None => partition.comment = comment,
        }
    }
    Ok(())
}
