//! The database's defaults, tables, views and sequences (their names; their definitions are
//! read by `sequences`), with the tables' columns, index parts, foreign keys, checks, options
//! and partitions.

use std::collections::{BTreeMap, BTreeSet};

use fermata_schema_core::{DatabaseName, ErrorCode, SafeError, Subject};
use sqlx::mysql::MySqlConnection;

use super::{rows, unsupported, values};
use crate::snapshot::model::{
    Check, Column, ForeignKey, Generated, Index, IndexKind, IndexPart, Partition, Partitioning,
    Sequence, Subpartition, Table, TableOption, View,
};
use crate::snapshot::normalize::{self, mysql};

/// The database's defaults and its tables, views and sequences: the schema's row always comes,
/// with NULL table columns when the database is empty.
const TABLES: &str = "SELECT s.DEFAULT_CHARACTER_SET_NAME, s.DEFAULT_COLLATION_NAME, \
     t.TABLE_NAME, t.TABLE_TYPE, t.ENGINE, t.TABLE_COLLATION, t.CREATE_OPTIONS, t.TABLE_COMMENT, \
     (SELECT CHARACTER_SET_NAME FROM information_schema.COLLATIONS c \
      WHERE c.COLLATION_NAME = t.TABLE_COLLATION), \
     v.VIEW_DEFINITION, v.CHECK_OPTION, v.DEFINER, v.SECURITY_TYPE, v.ALGORITHM \
     FROM information_schema.SCHEMATA s \
     LEFT JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = ? \
     LEFT JOIN information_schema.VIEWS v ON v.TABLE_SCHEMA = ? AND v.TABLE_NAME = t.TABLE_NAME \
     WHERE s.SCHEMA_NAME = ? ORDER BY BINARY t.TABLE_NAME";
const COLUMNS: &str = "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, \
     EXTRA, CHARACTER_SET_NAME, COLLATION_NAME, COLUMN_COMMENT, GENERATION_EXPRESSION \
     FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? \
     ORDER BY BINARY TABLE_NAME, ORDINAL_POSITION";
const INDEXES: &str = "SELECT TABLE_NAME, INDEX_NAME, CAST(NON_UNIQUE AS CHAR), COLUMN_NAME, \
     CAST(SUB_PART AS CHAR), INDEX_TYPE, COLLATION, INDEX_COMMENT, IGNORED \
     FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? \
     ORDER BY BINARY TABLE_NAME, BINARY INDEX_NAME, SEQ_IN_INDEX";
const FOREIGN_KEYS: &str = "SELECT rc.TABLE_NAME, rc.CONSTRAINT_NAME, k.COLUMN_NAME, \
     k.REFERENCED_TABLE_SCHEMA, k.REFERENCED_TABLE_NAME, k.REFERENCED_COLUMN_NAME, \
     rc.DELETE_RULE, rc.UPDATE_RULE \
     FROM information_schema.REFERENTIAL_CONSTRAINTS rc \
     JOIN information_schema.KEY_COLUMN_USAGE k ON k.CONSTRAINT_SCHEMA = rc.CONSTRAINT_SCHEMA \
      AND k.TABLE_NAME = rc.TABLE_NAME AND k.CONSTRAINT_NAME = rc.CONSTRAINT_NAME \
     WHERE rc.CONSTRAINT_SCHEMA = ? \
     ORDER BY BINARY rc.TABLE_NAME, BINARY rc.CONSTRAINT_NAME, k.ORDINAL_POSITION";
const CHECKS: &str = "SELECT TABLE_NAME, CONSTRAINT_NAME, CHECK_CLAUSE, LEVEL \
     FROM information_schema.CHECK_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = ? \
     ORDER BY BINARY TABLE_NAME, BINARY CONSTRAINT_NAME";
const PARTITIONS: &str = "SELECT TABLE_NAME, PARTITION_NAME, SUBPARTITION_NAME, PARTITION_METHOD, \
     SUBPARTITION_METHOD, PARTITION_EXPRESSION, SUBPARTITION_EXPRESSION, PARTITION_DESCRIPTION, \
     PARTITION_COMMENT FROM information_schema.PARTITIONS \
     WHERE TABLE_SCHEMA = ? AND PARTITION_NAME IS NOT NULL \
     ORDER BY BINARY TABLE_NAME, PARTITION_ORDINAL_POSITION, SUBPARTITION_ORDINAL_POSITION";

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
];

/// What the tables query finds.
pub(super) struct Relations {
    pub(super) default_charset: String,
    pub(super) default_collation: String,
    pub(super) tables: Vec<Table>,
    pub(super) views: Vec<View>,
    /// Named, with their engine and comment; the definitions are read later.
    pub(super) sequences: Vec<Sequence>,
}

/// Reads `database`'s tables, views and sequence names.
pub(super) async fn read(
    connection: &mut MySqlConnection,
    database: &DatabaseName,
) -> Result<Relations, SafeError> {
    let unsupported = || unsupported(database);
    let relations = rows(connection, TABLES, database, 3).await?;
    let first = relations.first().ok_or_else(|| {
        SafeError::about(
            ErrorCode::DatabaseNoLongerVisible,
            Subject::Database(database.clone()),
        )
    })?;
    let default_charset = mysql::utf8mb3(&values(first, database).text(0)?);
    let default_collation = mysql::utf8mb3(&values(first, database).text(1)?);

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
        let Some(name) = v.optional(2)? else {
            continue;
        };
        match v.text(3)?.as_str() {
            "BASE TABLE" => {}
            "VIEW" => {
                views.push(View {
                    name: name.clone(),
                    definition: v.text(9)?.replace(&qualifier, ""),
                    check_option: v.text(10)?,
                    definer: v.text(11)?,
                    security: v.text(12)?,
                    algorithm: v.text(13)?,
                });
                not_tables.insert(name);
                continue;
            }
            "SEQUENCE" => {
                sequences.push(Sequence {
                    name: name.clone(),
                    start: String::new(),
                    minimum: String::new(),
                    maximum: String::new(),
                    increment: String::new(),
                    cache: String::new(),
                    cycle: false,
                    engine: v.text(4)?,
                    comment: v.optional(7)?.unwrap_or_default(),
                });
                not_tables.insert(name);
                continue;
            }
            // System-versioned tables and anything else the model does not hold: refuse rather
            // than write a snapshot that leaves them out or says less about them.
            _ => return Err(unsupported()),
        }
        let printed =
            normalize::options(&v.optional(6)?.unwrap_or_default()).ok_or_else(unsupported)?;
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
        tables.insert(
            name.clone(),
            Table {
                name,
                engine: v.text(4)?,
                collation: mysql::utf8mb3(&v.text(5)?),
                charset: mysql::utf8mb3(&v.text(8)?),
                row_format,
                options,
                comment: v.optional(7)?.unwrap_or_default(),
                columns: Vec::new(),
                indexes: Vec::new(),
                foreign_keys: Vec::new(),
                checks: Vec::new(),
                partitioning: None,
            },
        );
    }

    let mut column_checks: BTreeMap<(String, String), String> = BTreeMap::new();
    for row in rows(connection, CHECKS, database, 1).await? {
        let v = values(&row, database);
        let (table, name, clause, level) = (v.text(0)?, v.text(1)?, v.text(2)?, v.text(3)?);
        match level.as_str() {
            "Column" => {
                column_checks.insert((table, name), clause);
            }
            _ => tables
                .get_mut(&table)
                .ok_or_else(unsupported)?
                .checks
                .push(Check { name, clause }),
        }
    }

    for row in rows(connection, COLUMNS, database, 1).await? {
        let v = values(&row, database);
        let table_name = v.text(0)?;
        if not_tables.contains(&table_name) {
            continue;
        }
        let name = v.text(1)?;
        let extra = v.optional(5)?.unwrap_or_default();
        // MySQL 8 marks expression defaults; the default itself says as much.
        let extra = extra
            .strip_prefix("DEFAULT_GENERATED")
            .map_or(extra.as_str(), str::trim_start);
        let generated = match v.optional(9)? {
            Some(expression) if extra.contains("GENERATED") => Some(Generated {
                expression,
                stored: extra.contains("STORED"),
            }),
            _ => None,
        };
        let on_update = extra
            .strip_prefix("on update ")
            .map(mysql::current_timestamp);
        let auto_increment = extra == "auto_increment";
        let invisible = extra == "INVISIBLE";
        if !(extra.is_empty()
            || generated.is_some()
            || on_update.is_some()
            || auto_increment
            || invisible)
        {
            return Err(unsupported());
        }
        let check = column_checks.remove(&(table_name.clone(), name.clone()));
        let column = Column {
            name,
            column_type: mysql::display_width(&v.text(2)?),
            nullable: v.text(3)? == "YES",
            default: v
                .optional(4)?
                .filter(|_| generated.is_none())
                .map(|default| mysql::current_timestamp(&default)),
            on_update,
            auto_increment,
            invisible,
            charset: v.optional(6)?.map(|charset| mysql::utf8mb3(&charset)),
            collation: v.optional(7)?.map(|collation| mysql::utf8mb3(&collation)),
            generated,
            check,
            comment: v.optional(8)?.unwrap_or_default(),
        };
        tables
            .get_mut(&table_name)
            .ok_or_else(unsupported)?
            .columns
            .push(column);
    }
    if !column_checks.is_empty() {
        return Err(unsupported());
    }

    for row in rows(connection, INDEXES, database, 1).await? {
        let v = values(&row, database);
        let table = tables.get_mut(&v.text(0)?).ok_or_else(unsupported)?;
        let name = v.text(1)?;
        let index_type = v.text(5)?;
        let kind = match (name.as_str(), v.text(2)?.as_str(), index_type.as_str()) {
            ("PRIMARY", "0", _) => IndexKind::Primary,
            (_, _, "FULLTEXT") => IndexKind::Fulltext,
            (_, _, "SPATIAL") => IndexKind::Spatial,
            (_, "0", _) => IndexKind::Unique,
            _ => IndexKind::Key,
        };
        let part = IndexPart {
            column: v.text(3)?,
            prefix: v
                .optional(4)?
                .map(|prefix| prefix.parse().map_err(|_| unsupported()))
                .transpose()?,
            descending: v.optional(6)?.as_deref() == Some("D"),
        };
        match table.indexes.last_mut().filter(|index| index.name == name) {
            Some(index) => index.parts.push(part),
            None => table.indexes.push(Index {
                name,
                kind,
                parts: vec![part],
                using: None,
                comment: v.optional(7)?.unwrap_or_default(),
                ignored: v.optional(8)?.as_deref() == Some("YES"),
            }),
        }
    }

    for row in rows(connection, FOREIGN_KEYS, database, 1).await? {
        let v = values(&row, database);
        let table = tables.get_mut(&v.text(0)?).ok_or_else(unsupported)?;
        let name = v.text(1)?;
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
                on_delete: v.text(6)?,
                on_update: v.text(7)?,
            }),
        }
    }

    if partitioned {
        read_partitions(connection, database, &mut tables).await?;
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
        default_charset,
        default_collation,
        tables,
        views,
        sequences,
    })
}

/// Reads the partitions of every partitioned table, one row per partition or subpartition.
async fn read_partitions(
    connection: &mut MySqlConnection,
    database: &DatabaseName,
    tables: &mut BTreeMap<String, Table>,
) -> Result<(), SafeError> {
    let unsupported = || unsupported(database);
    for row in rows(connection, PARTITIONS, database, 1).await? {
        let v = values(&row, database);
        let table = tables.get_mut(&v.text(0)?).ok_or_else(unsupported)?;
        let method = v.text(3)?;
        if !PARTITION_METHODS.contains(&method.as_str()) {
            return Err(unsupported());
        }
        let partitioning = table.partitioning.get_or_insert_with(|| Partitioning {
            method,
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
                partitioning.partitions.push(Partition {
                    name,
                    values: v.optional(7)?,
                    comment: String::new(),
                    subpartitions: Vec::new(),
                });
                partitioning.partitions.last_mut().ok_or_else(unsupported)?
            }
        };
        // A subpartition's row carries its own comment; a partition's is on its only row.
        match v.optional(2)? {
            Some(subpartition) => partition.subpartitions.push(Subpartition {
                name: subpartition,
                comment,
            }),
            None => partition.comment = comment,
        }
    }
    Ok(())
}
