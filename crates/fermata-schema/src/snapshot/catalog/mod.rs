//! Reading a database's model from `information_schema` in bulk: one query per category of
//! object (the database's defaults with its tables and views, checks, columns, index parts,
//! foreign keys, partitions, sequence definitions, routines with their parameters, triggers,
//! events), each ordered by the binary order of the names, so the number of queries does not
//! grow with the number of objects: ten at most, the partitions and sequence queries only when
//! the tables query shows a partitioned table or a sequence. Every value is read as bytes and
//! decoded as UTF-8; anything that does not fit the model is the permanent
//! `UNSUPPORTED_SCHEMA_OUTPUT`.

mod programs;
mod sequences;
mod tables;

use fermata_schema_core::{DatabaseName, ErrorCode, SafeError, Subject};
use sqlx::Row;
use sqlx::mysql::{MySqlConnection, MySqlRow};

use super::model::DatabaseModel;
use crate::source::query_error;

/// The permanent refusal of `database`.
fn unsupported(database: &DatabaseName) -> SafeError {
    SafeError::about(
        ErrorCode::UnsupportedSchemaOutput,
        Subject::Database(database.clone()),
    )
}

/// Rows of `sql` with `database` bound to each of its `binds` placeholders.
async fn rows(
    connection: &mut MySqlConnection,
    sql: &str,
    database: &DatabaseName,
    binds: usize,
) -> Result<Vec<MySqlRow>, SafeError> {
    let mut query = sqlx::query(sql);
    for _ in 0..binds {
        query = query.bind(database.as_str());
    }
    query
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
    fn optional(&self, index: usize) -> Result<Option<String>, SafeError> {
        let bytes: Option<Vec<u8>> = self
            .row
            .try_get_unchecked(index)
            .map_err(|_| unsupported(self.database))?;
        bytes
            .map(|bytes| String::from_utf8(bytes).map_err(|_| unsupported(self.database)))
            .transpose()
    }

    fn text(&self, index: usize) -> Result<String, SafeError> {
        self.optional(index)?
            .ok_or_else(|| unsupported(self.database))
    }
}

/// Reads the model of `database`.
pub(super) async fn read(
    connection: &mut MySqlConnection,
    database: &DatabaseName,
) -> Result<DatabaseModel, SafeError> {
    let relations = tables::read(connection, database).await?;
    let mut sequences = relations.sequences;
    sequences::read(connection, database, &mut sequences).await?;
    Ok(DatabaseModel {
        name: database.as_str().to_owned(),
        default_charset: relations.default_charset,
        default_collation: relations.default_collation,
        tables: relations.tables,
        views: relations.views,
        sequences,
        routines: programs::routines(connection, database).await?,
        triggers: programs::triggers(connection, database).await?,
        events: programs::events(connection, database).await?,
    })
}
