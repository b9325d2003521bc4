//! Reading a database's tables from `information_schema` in bulk: one query per category
//! (schema defaults, tables, columns, index parts, foreign keys, checks), each ordered, so the
//! cost does not grow with the number of objects. Every value is read as bytes and decoded as
//! UTF-8; anything that does not fit the model is the permanent `UNSUPPORTED_SCHEMA_OUTPUT`.

use std::collections::BTreeMap;

use fermata_store::schema::{DatabaseName, ErrorCode, SafeError, Subject};
use sqlx::Row;
use sqlx::mysql::{MySqlConnection, MySqlRow};

use super::model::{
    Check, Column, DatabaseModel, ForeignKey, Generated, Index, IndexKind, IndexPart, Table, View,
};
use crate::source::query_error;

const SCHEMA: &str = "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME \
     FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?";
const TABLES: &str = "SELECT TABLE_NAME, TABLE_TYPE, ENGINE, TABLE_COLLATION, CREATE_OPTIONS, \
     TABLE_COMMENT, (SELECT CHARACTER_SET_NAME FROM information_schema.COLLATIONS c \
                     WHERE c.COLLATION_NAME = t.TABLE_COLLATION) \
     FROM information_schema.TABLES t WHERE TABLE_SCHEMA = ? ORDER BY BINARY TABLE_NAME";
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
const VIEWS: &str = "SELECT TABLE_NAME, VIEW_DEFINITION, CHECK_OPTION, DEFINER, SECURITY_TYPE, \
     ALGORITHM FROM information_schema.VIEWS WHERE TABLE_SCHEMA = ? ORDER BY BINARY TABLE_NAME";
/// Routines, triggers and events, which the model does not hold yet: any of them makes the
/// database unsupported rather than snapshotted without them.
const NOT_YET_MODELLED: &str = "SELECT CAST(\
     (SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ?) + \
     (SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?) + \
     (SELECT COUNT(*) FROM information_schema.EVENTS WHERE EVENT_SCHEMA = ?) AS CHAR)";
const CHECKS: &str = "SELECT TABLE_NAME, CONSTRAINT_NAME, CHECK_CLAUSE, LEVEL \
     FROM information_schema.CHECK_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = ? \
     ORDER BY BINARY TABLE_NAME, BINARY CONSTRAINT_NAME";

/// Rows of `sql` for `database`.
async fn rows(
    connection: &mut MySqlConnection,
    sql: &str,
    database: &DatabaseName,
) -> Result<Vec<MySqlRow>, SafeError> {
    sqlx::query(sql)
        .bind(database.as_str())
        .fetch_all(&mut *connection)
        .await
        .map_err(|error| query_error(&error))
}

/// Reads one row of `database`'s catalog as text values, `None` for SQL NULL.
struct Values<'a> {
    row: &'a MySqlRow,
    database: &'a DatabaseName,
}

fn values<'a>(row: &'a MySqlRow, database: &'a DatabaseName) -> Values<'a> {
    Values { row, database }
}

impl Values<'_> {
    fn unsupported(&self) -> SafeError {
        SafeError::about(
            ErrorCode::UnsupportedSchemaOutput,
            Subject::Database(self.database.clone()),
        )
    }

    fn optional(&self, index: usize) -> Result<Option<String>, SafeError> {
        let bytes: Option<Vec<u8>> = self
            .row
            .try_get_unchecked(index)
            .map_err(|_| self.unsupported())?;
        bytes
            .map(|bytes| String::from_utf8(bytes).map_err(|_| self.unsupported()))
            .transpose()
    }

    fn text(&self, index: usize) -> Result<String, SafeError> {
        self.optional(index)?.ok_or_else(|| self.unsupported())
    }
}

/// Reads the model of `database`.
pub(super) async fn read(
    connection: &mut MySqlConnection,
    database: &DatabaseName,
) -> Result<DatabaseModel, SafeError> {
    let unsupported = || {
        SafeError::about(
            ErrorCode::UnsupportedSchemaOutput,
            Subject::Database(database.clone()),
        )
    };
    let schema = rows(connection, SCHEMA, database).await?;
    let schema = schema.first().ok_or_else(|| {
        SafeError::about(
            ErrorCode::DatabaseNoLongerVisible,
            Subject::Database(database.clone()),
        )
    })?;
    let others = sqlx::query(NOT_YET_MODELLED)
        .bind(database.as_str())
        .bind(database.as_str())
        .bind(database.as_str())
        .fetch_one(&mut *connection)
        .await
        .map_err(|error| query_error(&error))?;
    if values(&others, database).text(0)? != "0" {
        return Err(unsupported());
    }
    let (default_charset, default_collation) = (
        values(schema, database).text(0)?,
        values(schema, database).text(1)?,
    );

    let mut tables: BTreeMap<String, Table> = BTreeMap::new();
    // Views' columns are listed with the tables' and belong to the views' definitions.
    let mut view_names = std::collections::BTreeSet::new();
    for row in rows(connection, TABLES, database).await? {
        let v = values(&row, database);
        match v.text(1)?.as_str() {
            "BASE TABLE" => {}
            // Read from `information_schema.VIEWS` below.
            "VIEW" => {
                view_names.insert(v.text(0)?);
                continue;
            }
            // Sequences and system views are not snapshotted yet: refuse rather than write a
            // snapshot that leaves them out.
            _ => return Err(unsupported()),
        }
        let options = v.optional(4)?.unwrap_or_default();
        let row_format = options
            .split_whitespace()
            .find_map(|option| option.strip_prefix("row_format="))
            .map(str::to_owned);
        if options
            .split_whitespace()
            .any(|option| !option.starts_with("row_format="))
        {
            return Err(unsupported());
        }
        let name = v.text(0)?;
        tables.insert(
            name.clone(),
            Table {
                name,
                engine: v.text(2)?,
                collation: v.text(3)?,
                charset: v.text(6)?,
                row_format,
                comment: v.optional(5)?.unwrap_or_default(),
                columns: Vec::new(),
                indexes: Vec::new(),
                foreign_keys: Vec::new(),
                checks: Vec::new(),
            },
        );
    }

    let mut column_checks: BTreeMap<(String, String), String> = BTreeMap::new();
    for row in rows(connection, CHECKS, database).await? {
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

    for row in rows(connection, COLUMNS, database).await? {
        let v = values(&row, database);
        let table_name = v.text(0)?;
        if view_names.contains(&table_name) {
            continue;
        }
        let name = v.text(1)?;
        let extra = v.optional(5)?.unwrap_or_default();
        let generated = match v.optional(9)? {
            Some(expression) if extra.contains("GENERATED") => Some(Generated {
                expression,
                stored: extra.contains("STORED"),
            }),
            _ => None,
        };
        let on_update = extra.strip_prefix("on update ").map(str::to_owned);
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
            column_type: v.text(2)?,
            nullable: v.text(3)? == "YES",
            default: v.optional(4)?.filter(|_| generated.is_none()),
            on_update,
            auto_increment,
            invisible,
            charset: v.optional(6)?,
            collation: v.optional(7)?,
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

    for row in rows(connection, INDEXES, database).await? {
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

    for row in rows(connection, FOREIGN_KEYS, database).await? {
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

    // The server prints a view's definition without this database's qualifier; the catalog
    // qualifies every name, so the qualifier is taken off to compare the two.
    let qualifier = format!("{}.", super::render::identifier(database.as_str()));
    let mut views = Vec::new();
    for row in rows(connection, VIEWS, database).await? {
        let v = values(&row, database);
        views.push(View {
            name: v.text(0)?,
            definition: v.text(1)?.replace(&qualifier, ""),
            check_option: v.text(2)?,
            definer: v.text(3)?,
            security: v.text(4)?,
            algorithm: v.text(5)?,
        });
    }

    let mut tables: Vec<Table> = tables.into_values().collect();
    for table in &mut tables {
        // Primary first, then by name: the canonical order.
        table.indexes.sort_by(|a, b| {
            (a.kind != IndexKind::Primary, a.name.as_bytes())
                .cmp(&(b.kind != IndexKind::Primary, b.name.as_bytes()))
        });
    }
    Ok(DatabaseModel {
        name: database.as_str().to_owned(),
        default_charset,
        default_collation,
        tables,
        views,
    })
}
