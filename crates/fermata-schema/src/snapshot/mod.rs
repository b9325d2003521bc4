//! Snapshots of a database's schema: the structured model read from `information_schema`
//! (`catalog`), each object's canonical DDL rendered from it ([`render`]) and checked against the
//! server's own `SHOW CREATE` brought into canonical form ([`normalize`]), and the canonical files
//! that result.
//!
//! Every introspection connection gets fixed session settings first ([`prepare`]): quoted
//! identifiers, an `sql_mode` without the modes that change `SHOW CREATE` output, `utf8mb4` for
//! everything the server sends, and the time zone `+00:00`, so that nothing read depends on the
//! session that reads it (a `TIMESTAMP` column's literal default is printed in the session's
//! time zone; an event's times are printed in the event's own, which the model keeps). The
//! catalog is read with one query per category of object, fourteen at most (the first on one
//! connection, the others then at once, spread over the connections given); `SHOW CREATE` runs
//! once per object, spread over the connections too and sent 64 statements to a request, so a
//! database costs at most its number of objects plus fourteen statements. Nothing is locked. An
//! object whose model does not render to exactly the server's text, or that holds something the
//! model cannot represent, fails the database with the permanent `UNSUPPORTED_SCHEMA_OUTPUT`
//! instead of producing a lossy snapshot.
//!
//! The files of one database, each object's name encoded by [`crate::names::object_path`]:
//!
//! - `sequences/<name>.sql`, `tables/<name>.sql`, `views/<name>.sql`,
//!   `routines/function.<name>.sql` and `routines/procedure.<name>.sql` (a function and a
//!   procedure may share a name), `triggers/<name>.sql`, `events/<name>.sql`: one canonical
//!   `CREATE` statement each and a line break. A file applies as-is, over the text protocol, in
//!   another, empty database: it names no database for this database's objects, has no
//!   `DEFINER` (whoever applies it becomes the definer) and no `DELIMITER`. Applied folder by
//!   folder in that order, and within a folder in path order, the files rebuild the schema; a
//!   trigger's file says `FOLLOWS` or `PRECEDES` so that path order rebuilds its action order.
//!   Bodies of routines, triggers and events are kept exactly as the server keeps them, with
//!   whatever names they use.
//! - `schema.json`: the model, which also keeps what the files leave out: definers, the
//!   `sql_mode` of each stored program, each event's time zone (its `STARTS`, `ENDS` and `AT`
//!   times are absolute, written in that zone), the triggers' action order.
//! - `manifest.json`: the object counts (`tables`, `views`, `routines`, `triggers`, `events`,
//!   `sequences`), each file's SHA-256, the snapshot hash, the generator and the server.
//!
//! The snapshot hash is the SHA-256 of the canonical JSON of the database name, the counts and
//! the file hashes, so it changes with any object and never with the server's version or the
//! generator's. Counters are not schema: no `AUTO_INCREMENT=` and no sequence's current value.
//!
//! A candidate is verified twice: [`verify_live`] reads the source again, over connections of
//! its own (each object's `SHOW CREATE`, checked against the candidate's model, and the catalog
//! but for the tables' and views' queries), and requires the same hash; [`verify_in_workspace`] (`workspace.rs`) applies the
//! candidate's files into a scratch schema on a verification workspace server and requires the
//! candidate back from it.

mod catalog;
pub mod model;
pub mod normalize;
mod objects;
pub mod render;
mod scan;
mod script_check;
mod workspace;

use std::collections::BTreeMap;

use fermata_schema_core::{DatabaseName, ErrorCode, SafeError, Subject};
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::Executor;
use sqlx::mysql::MySqlConnection;

use crate::filter::Filter;
use crate::names;
use crate::safe_context::SafeCode;
use crate::source::DriverContext;
use model::DatabaseModel;

/// Every catalog query a MySQL source runs (the test of MySQL's view definitions reads them).
pub fn mysql_catalog_queries() -> Vec<&'static str> {
    catalog::mysql_queries()
}
pub use catalog::{ColumnRow, IndexRow, add_index_row, column_from_catalog};
pub use script_check::verify_script;
pub use workspace::verify_in_workspace;

/// The version written into manifests.
pub const GENERATOR: &str = concat!("fermata ", env!("CARGO_PKG_VERSION"));

/// The `sql_mode` and time zone every introspection connection runs with.
pub(crate) const SQL_MODE: &str = "NO_ENGINE_SUBSTITUTION";
pub(crate) const TIME_ZONE: &str = "+00:00";

/// `sql_mode = ..., time_zone = ...`, for a `SET SESSION`.
fn mode_and_zone(sql_mode: &str, time_zone: &str) -> String {
    format!(
        "sql_mode = {}, time_zone = {}",
        render::literal(sql_mode),
        render::literal(time_zone)
    )
}

/// Gives `connection` the fixed introspection settings, in one statement.
pub async fn prepare(connection: &mut MySqlConnection) -> Result<(), SafeError> {
    let session = format!(
        "SET NAMES utf8mb4, SESSION sql_quote_show_create = 1, {}",
        mode_and_zone(SQL_MODE, TIME_ZONE)
    );
    connection
        .execute(session.as_str())
        .await
        .map(|_| ())
        .query_context("prepare the introspection session")
}

/// The `SET SESSION` a DDL file is applied under to rebuild its object as it is: for a stored
/// program, the `sql_mode` it was created with (which the model keeps and the file cannot say)
/// and, for an event, its time zone (its times are written in it); for any other file, the
/// introspection settings. By path, with the statement for the files not named.
pub(super) fn creation_settings(
    model: &DatabaseModel,
) -> Result<(BTreeMap<String, String>, String), SafeError> {
    let mut settings = BTreeMap::new();
    for routine in &model.routines {
        settings.insert(
            routine_path(routine)?,
            set_session(&routine.sql_mode, TIME_ZONE),
        );
    }
    for trigger in &model.triggers {
        settings.insert(
            names::object_path("triggers", None, &trigger.name)?,
            set_session(&trigger.sql_mode, TIME_ZONE),
        );
    }
    for event in &model.events {
        settings.insert(
            names::object_path("events", None, &event.name)?,
            set_session(&event.sql_mode, &event.time_zone),
        );
    }
    Ok((settings, set_session(SQL_MODE, TIME_ZONE)))
}

/// `SET SESSION sql_mode = ..., time_zone = ...`.
pub(crate) fn set_session(sql_mode: &str, time_zone: &str) -> String {
    format!("SET SESSION {}", mode_and_zone(sql_mode, time_zone))
}

/// A routine's file: `routines/function.<name>.sql` or `routines/procedure.<name>.sql`.
fn routine_path(routine: &model::Routine) -> Result<String, SafeError> {
    let prefix = routine.kind.object_kind().name();
    names::object_path("routines", Some(prefix), &routine.name)
}

/// One database's snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseSnapshot {
    pub model: DatabaseModel,
    /// What the snapshot left out; a verification of it snapshots with the same filter.
    pub filter: Filter,
    /// Relative path → content, in path order.
    pub files: BTreeMap<String, Vec<u8>>,
    pub snapshot_hash: String,
}

impl DatabaseSnapshot {
    /// A merged snapshot read back from its files (`schema.json` for the model, `manifest.json`
    /// for the filter and the hash); `None` when its model cannot be read (a snapshot written by
    /// another generator's format).
    pub fn from_files(files: BTreeMap<String, Vec<u8>>) -> Option<DatabaseSnapshot> {
        #[derive(serde::Deserialize)]
        struct Recorded {
            #[serde(default)]
            filter: Option<Filter>,
            #[serde(default)]
            snapshot_hash: String,
        }
        let model: DatabaseModel = serde_json::from_slice(files.get("schema.json")?).ok()?;
        let recorded: Option<Recorded> = files
            .get("manifest.json")
            .and_then(|bytes| serde_json::from_slice(bytes).ok());
        let (filter, snapshot_hash) = match recorded {
            Some(recorded) => (recorded.filter.unwrap_or_default(), recorded.snapshot_hash),
            None => (Filter::default(), String::new()),
        };
        Some(DatabaseSnapshot {
            model,
            filter,
            files,
            snapshot_hash,
        })
    }

    /// A database of `like`'s name, flavour, defaults and filter without any object: where a
    /// database that has no merged snapshot starts from.
    pub fn empty_like(like: &DatabaseSnapshot) -> DatabaseSnapshot {
        // Field by field: cloning `like`'s model would copy every object only to drop it.
        DatabaseSnapshot {
            model: DatabaseModel {
                name: like.model.name.clone(),
                flavor: like.model.flavor,
                default_charset: like.model.default_charset.clone(),
                default_collation: like.model.default_collation.clone(),
                tables: Vec::new(),
                views: Vec::new(),
                sequences: Vec::new(),
                routines: Vec::new(),
                triggers: Vec::new(),
                events: Vec::new(),
            },
            filter: like.filter.clone(),
            files: BTreeMap::new(),
            snapshot_hash: String::new(),
        }
    }
}

#[derive(Serialize)]
struct Hashed<'a> {
    database: &'a str,
    counts: &'a BTreeMap<&'static str, usize>,
    files: &'a BTreeMap<String, String>,
    filter: &'a Filter,
}

#[derive(Serialize)]
struct Manifest<'a> {
    format: u32,
    database: &'a str,
    counts: &'a BTreeMap<&'static str, usize>,
    /// The tables this snapshot left out (see [`crate::filter`]).
    filter: &'a Filter,
    files: &'a BTreeMap<String, String>,
    snapshot_hash: &'a str,
    generator: &'static str,
    server_version: &'a str,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Snapshots `database` over `connections` (prepared with [`prepare`]; at least one), whose
/// server reports `server_version`, with the default filter.
pub async fn snapshot(
    connections: &mut [MySqlConnection],
    database: &DatabaseName,
    server_version: &str,
) -> Result<DatabaseSnapshot, SafeError> {
    snapshot_filtered(connections, database, server_version, &Filter::default()).await
}

/// [`snapshot`], leaving out the tables `filter` ignores, with their triggers.
pub async fn snapshot_filtered(
    connections: &mut [MySqlConnection],
    database: &DatabaseName,
    server_version: &str,
    filter: &Filter,
) -> Result<DatabaseSnapshot, SafeError> {
    // Only the table filter is the snapshot's; databases are left out by the inventory.
    let filter = Filter {
        ignore_databases: Vec::new(),
        ignore_tables: filter.ignore_tables.clone(),
    };
    let (mut model, _version) = catalog::read(connections, database).await?;
    leave_out(&mut model, &filter);
    checked(connections, database, model, filter, server_version).await
}

/// Takes out of `model` the tables `filter` ignores, with their triggers.
fn leave_out(model: &mut DatabaseModel, filter: &Filter) {
    model
        .tables
        .retain(|table| !filter.ignores_table(&table.name));
    model
        .triggers
        .retain(|trigger| !filter.ignores_table(&trigger.table));
}

/// The snapshot of `model`, read from `database` (as `filter` leaves it), once each object's
/// `SHOW CREATE` over `connections` checked against it: its files, manifest and hash.
async fn checked(
    connections: &mut [MySqlConnection],
    database: &DatabaseName,
    mut model: DatabaseModel,
    filter: Filter,
    server_version: &str,
) -> Result<DatabaseSnapshot, SafeError> {
    let unsupported = || {
        SafeError::about(
            ErrorCode::UnsupportedSchemaOutput,
            Subject::Database(database.clone()),
        )
    };
    let mut files = objects::checked_files(connections, database, &mut model).await?;
    let schema_json = serde_json::to_string_pretty(&model).or_safe(unsupported)?;
    files.insert(
        "schema.json".to_owned(),
        format!("{schema_json}\n").into_bytes(),
    );

    let counts = BTreeMap::from([
        ("tables", model.tables.len()),
        ("views", model.views.len()),
        ("routines", model.routines.len()),
        ("triggers", model.triggers.len()),
        ("events", model.events.len()),
        ("sequences", model.sequences.len()),
    ]);
    let hashes: BTreeMap<String, String> = files
        .iter()
        .map(|(path, content)| (path.clone(), hex(&Sha256::digest(content))))
        .collect();
    let hashed = serde_json::to_vec(&Hashed {
        database: database.as_str(),
        counts: &counts,
        files: &hashes,
        filter: &filter,
    })
    .or_safe(unsupported)?;
    let snapshot_hash = hex(&Sha256::digest(&hashed));
    let manifest = serde_json::to_string_pretty(&Manifest {
        format: 1,
        database: database.as_str(),
        counts: &counts,
        filter: &filter,
        files: &hashes,
        snapshot_hash: &snapshot_hash,
        generator: GENERATOR,
        server_version,
    })
    .or_safe(unsupported)?;
    files.insert(
        "manifest.json".to_owned(),
        format!("{manifest}\n").into_bytes(),
    );
    Ok(DatabaseSnapshot {
        model,
        filter,
        files,
        snapshot_hash,
    })
}

/// The first check of the shared connection verifier: reads `candidate`'s database again over
/// `connections` (prepared, at least one, and none the candidate was taken on) and requires the
/// same snapshot hash. The catalog's queries of the tables and views are not run again: every
/// object's `SHOW CREATE` is checked against the candidate's model instead, beside the names of
/// the tables and views and everything else the catalog reads (see `catalog::read_again`). A
/// difference, or a text that no longer checks, means the schema changed meanwhile: the
/// retryable `SCHEMA_CHANGED`, after which a new candidate is taken.
pub async fn verify_live(
    connections: &mut [MySqlConnection],
    database: &DatabaseName,
    candidate: &DatabaseSnapshot,
    server_version: &str,
) -> Result<(), SafeError> {
    let filter = candidate.filter.clone();
    let live = async {
        let read = catalog::read_again(connections, database, &candidate.model, &filter).await?;
        let Some(mut model) = read else {
            return Ok(None);
        };
        leave_out(&mut model, &filter);
        checked(connections, database, model, filter, server_version)
            .await
            .map(Some)
    };
    match live.await {
        Ok(Some(live)) if live.snapshot_hash == candidate.snapshot_hash => Ok(()),
        // The candidate checked against this server; a live object that does not is a change.
        Ok(_) => Err(changed(database)),
        Err(error) if error.code() == ErrorCode::UnsupportedSchemaOutput => Err(changed(database)),
        Err(error) => Err(error),
    }
}

/// `SCHEMA_CHANGED` for `database`, logged.
fn changed(database: &DatabaseName) -> SafeError {
    tracing::info!(database = %database, "the schema changed while it was snapshotted");
    SafeError::about(
        ErrorCode::SchemaChanged,
        Subject::Database(database.clone()),
    )
}
