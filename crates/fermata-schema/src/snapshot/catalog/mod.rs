//! Reading a database's model from `information_schema` in bulk: one query per category of object
//! (the server's version with the database's defaults and the collations, its tables, views,
//! checks, columns, index parts, foreign keys' rules and their columns, spatial reference systems,
//! partitions, sequence definitions, routines with their parameters, triggers, events), each
//! ordered by the binary order of the names, so the number of queries does not grow with the
//! number of objects: fourteen at most, the spatial, partitions and sequence queries only when
//! the tables query shows a spatial column (on MariaDB), a partitioned table or a sequence. The
//! first query, a small one, runs alone on the first connection; it says which flavor the server
//! is, and the others are then read ahead at once, spread over all the connections (a handful of
//! queries that each make the server open every table, which it does in parallel). Every value is
//! read as bytes and decoded as UTF-8; anything that does not fit the model is the permanent
//! `UNSUPPORTED_SCHEMA_OUTPUT`. The verifier reads again only what the objects' `SHOW CREATE`
//! cannot tell it ([`read_again`]): seven queries at most, and one more for each name the filter
//! would leave out as a table.

mod programs;
mod sequences;
mod tables;

pub use tables::{ColumnRow, IndexRow, add_index_row, column_from_catalog};

/// Every catalog query a MySQL source runs, for the test that checks each column they name.
pub(super) fn mysql_queries() -> Vec<&'static str> {
    tables::MYSQL_QUERIES
        .iter()
        .chain(programs::QUERIES)
        .copied()
        .collect()
}

use std::collections::BTreeSet;

use fermata_schema_core::{
    DatabaseName, ErrorCode, ObjectKind, ObjectSubject, Reason, SafeError, Subject,
};
use sqlx::Row;
use sqlx::mysql::{MySqlConnection, MySqlRow};

use super::model::{DatabaseModel, Flavor, Sequence, Table, View};
use crate::filter::Filter;
use crate::safe_context::SafeCode;
use crate::source::DriverContext;

/// The permanent refusal of `database`, when no one object is at fault.
fn unsupported(database: &DatabaseName) -> SafeError {
    SafeError::about(
        ErrorCode::UnsupportedSchemaOutput,
        Subject::Database(database.clone()),
    )
}

/// The permanent refusal of the object `kind` `name` of `database`, for `reason`.
pub(crate) fn refuse(
    database: &DatabaseName,
    kind: ObjectKind,
    name: &str,
    reason: Reason,
) -> SafeError {
    SafeError::about(
        ErrorCode::UnsupportedSchemaOutput,
        Subject::Object(ObjectSubject::named(database, kind, name, reason)),
    )
}

/// Rows of `sql` with `database` bound to each of its placeholders.
async fn rows(
    connection: &mut MySqlConnection,
    sql: &str,
    database: &DatabaseName,
) -> Result<Vec<MySqlRow>, SafeError> {
    // Every placeholder of a catalog query is the database's name, and none is in a literal.
    let mut query = sqlx::query(sql);
    for _ in sql.matches('?') {
        query = query.bind(database.as_str());
    }
    query
        .fetch_all(&mut *connection)
        .await
        .query_context_about("read the catalog", database)
}

/// Reads one row of `database`'s catalog as text values, `None` for SQL NULL. A value that is
/// missing or not UTF-8 refuses the object the row is about, once it is known.
struct Values<'a> {
    row: &'a MySqlRow,
    database: &'a DatabaseName,
    object: Option<(ObjectKind, &'a str)>,
}

fn values<'a>(row: &'a MySqlRow, database: &'a DatabaseName) -> Values<'a> {
    Values {
        row,
        database,
        object: None,
    }
}

impl<'a> Values<'a> {
    /// The same row, about the object `kind` `name`.
    fn about(&self, kind: ObjectKind, name: &'a str) -> Values<'a> {
        Values {
            row: self.row,
            database: self.database,
            object: Some((kind, name)),
        }
    }

    fn unreadable(&self) -> SafeError {
        match self.object {
            Some((kind, name)) => refuse(self.database, kind, name, Reason::UnreadableDefinition),
            None => unsupported(self.database),
        }
    }

    fn optional(&self, index: usize) -> Result<Option<String>, SafeError> {
        let bytes: Option<Vec<u8>> = self
            .row
            .try_get_unchecked(index)
            .or_unreadable(|| self.unreadable())?;
        bytes
            .map(|bytes| String::from_utf8(bytes).or_safe(|| self.unreadable()))
            .transpose()
    }

    fn text(&self, index: usize) -> Result<String, SafeError> {
        self.optional(index)?.ok_or_else(|| self.unreadable())
    }
}

/// Reads the model of `database` over `connections` (at least one), and the server's
/// `VERSION()`. The first query runs on the first connection; it says which flavor the server is,
/// so the others can then be read ahead at once, each over one of the connections.
pub(super) async fn read(
    connections: &mut [MySqlConnection],
    database: &DatabaseName,
) -> Result<(DatabaseModel, String), SafeError> {
    let (mut reader, others) = Reader::split(connections, database)?;
    let relations = tables::read(&mut reader, others, programs::QUERIES).await?;
    let version = relations.server.version.clone();
    let model = with_programs(
        &mut reader,
        relations.server,
        relations.tables,
        relations.views,
        relations.sequences,
    )
    .await?;
    Ok((model, version))
}

/// The model of the reader's database: `server`'s flavor and defaults, `tables`, `views` and
/// `sequences` (the sequences' settings read here), and the stored programs.
async fn with_programs(
    reader: &mut Reader<'_>,
    server: tables::Server,
    tables: Vec<Table>,
    views: Vec<View>,
    mut sequences: Vec<Sequence>,
) -> Result<DatabaseModel, SafeError> {
    let database = reader.database;
    sequences::read(reader.connection, database, &mut sequences).await?;
    Ok(DatabaseModel {
        name: database.as_str().to_owned(),
        flavor: server.flavor,
        default_charset: server.default_charset,
        default_collation: server.default_collation,
        tables,
        views,
        sequences,
        routines: programs::routines(reader, server.flavor).await?,
        triggers: programs::triggers(reader).await?,
        events: programs::events(reader).await?,
    })
}

/// What the shared connection verifier reads again of `database`, for a `candidate` snapshotted
/// with `filter`, before it checks each object's `SHOW CREATE` against it: the server's version
/// and the database's defaults, the names of the tables, views and sequences, the sequences'
/// settings, MariaDB's spatial reference systems when the candidate has a spatial column, and
/// every stored program, read as [`read`] reads them. The candidate's tables and views stand for
/// the live ones; `None` when the names are not the candidate's.
///
/// Their `SHOW CREATE` is all that needs reading again: the candidate holds no table or view
/// whose model does not render to exactly the server's text (in canonical form), so a live text
/// that still checks against the model is the text the candidate was taken from, and anything
/// the catalog says of a table or view and its text does not (a spatial reference system on
/// MariaDB) is read here. Of the catalog's queries, those of the tables and views make MariaDB
/// open every table; past its table cache they grow faster than the tables.
pub(super) async fn read_again(
    connections: &mut [MySqlConnection],
    database: &DatabaseName,
    candidate: &DatabaseModel,
    filter: &Filter,
) -> Result<Option<DatabaseModel>, SafeError> {
    let (mut reader, others) = Reader::split(connections, database)?;
    let server = tables::server(&mut reader).await?;
    let mut ahead = vec![tables::NAMES];
    ahead.extend_from_slice(programs::QUERIES);
    reader.read_ahead(others, &ahead).await?;
    let live = tables::names(&mut reader, filter).await?;
    let listed = candidate
        .tables
        .iter()
        .map(|table| &table.name)
        .chain(candidate.views.iter().map(|view| &view.name))
        .chain(candidate.sequences.iter().map(|sequence| &sequence.name));
    if !live.iter().eq(listed.collect::<BTreeSet<_>>()) {
        return Ok(None);
    }
    let mut tables = candidate.tables.clone();
    if server.flavor == Flavor::Mariadb && tables.iter().any(tables::is_spatial) {
        for column in tables.iter_mut().flat_map(|table| &mut table.columns) {
            column.srid = None;
        }
        for (table_name, column_name, srid) in tables::srids(&mut reader).await? {
            // The tables are in name order; a column the candidate does not have is left to its
            // table's text.
            let column = tables
                .binary_search_by(|table| table.name.as_str().cmp(&table_name))
                .ok()
                .and_then(|at| {
                    tables[at]
                        .columns
                        .iter_mut()
                        .find(|column| column.name == column_name)
                });
            if let Some(column) = column {
                column.srid = Some(srid);
            }
        }
    }
    let (views, sequences) = (candidate.views.clone(), candidate.sequences.clone());
    with_programs(&mut reader, server, tables, views, sequences)
        .await
        .map(Some)
}

/// The catalog queries of one snapshot: each runs once, on the first connection when it is
/// asked for, unless it was read ahead with others over every connection.
struct Reader<'a> {
    connection: &'a mut MySqlConnection,
    database: &'a DatabaseName,
    /// The rows of the queries read ahead and not yet asked for, by query.
    ahead: Vec<(&'static str, Vec<MySqlRow>)>,
}

impl<'a> Reader<'a> {
    /// A reader of `database` over the first of `connections` (at least one), and the others.
    fn split(
        connections: &'a mut [MySqlConnection],
        database: &'a DatabaseName,
    ) -> Result<(Reader<'a>, &'a mut [MySqlConnection]), SafeError> {
        let (first, others) = connections
            .split_first_mut()
            .ok_or_else(|| unsupported(database))?;
        let reader = Reader {
            connection: first,
            database,
            ahead: Vec::new(),
        };
        Ok((reader, others))
    }

    /// The rows of `sql`, with the database bound to each of its placeholders.
    async fn rows(&mut self, sql: &'static str) -> Result<Vec<MySqlRow>, SafeError> {
        if let Some(at) = self.ahead.iter().position(|(read, _)| *read == sql) {
            return Ok(self.ahead.swap_remove(at).1);
        }
        rows(self.connection, sql, self.database).await
    }

    /// Reads `queries` at once, spread over the first connection and `others`, each connection
    /// running its share one after another.
    async fn read_ahead(
        &mut self,
        others: &mut [MySqlConnection],
        queries: &[&'static str],
    ) -> Result<(), SafeError> {
        let database = self.database;
        let lanes = others.len() + 1;
        let work = std::iter::once(&mut *self.connection)
            .chain(others.iter_mut())
            .enumerate()
            .map(|(lane, connection)| async move {
                let mut read = Vec::new();
                for sql in queries.iter().skip(lane).step_by(lanes) {
                    read.push((*sql, rows(connection, sql, database).await?));
                }
                Ok::<_, SafeError>(read)
            });
        for read in futures::future::join_all(work).await {
            self.ahead.extend(read?);
        }
        Ok(())
    }
}

/// The catalog queries of each flavor: MySQL 8 and MariaDB name some columns differently, or
/// only one of them has them.
fn by_flavor(flavor: Flavor, mariadb: &'static str, mysql: &'static str) -> &'static str {
    match flavor {
        Flavor::Mariadb => mariadb,
        Flavor::Mysql => mysql,
    }
}
