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
//! catalog is read with one query per category of object, thirteen at most (the first on one
//! connection, the others then at once, spread over the connections given); `SHOW CREATE` runs
//! once per object, spread over the connections too, so a database costs at most its number of
//! objects plus thirteen queries. Nothing is locked. An object whose model does not render to
//! exactly the server's text, or that holds something the model cannot represent, fails the
//! database with the permanent `UNSUPPORTED_SCHEMA_OUTPUT` instead of producing a lossy snapshot.
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
//! A candidate is verified twice: [`verify_live`] snapshots the source again, over connections
//! of its own, and requires the same hash; [`verify_in_workspace`] (`workspace.rs`) applies the
//! candidate's files into a scratch schema on a verification workspace server and requires the
//! candidate back from it.

mod catalog;
pub mod model;
pub mod normalize;
pub mod render;
mod scan;
mod script_check;
mod workspace;

use std::collections::BTreeMap;

use fermata_schema_core::{
    DatabaseName, ErrorCode, ObjectKind, ObjectSubject, Reason, SafeError, Subject,
};
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::Executor;
use sqlx::mysql::MySqlConnection;

use crate::filter::Filter;
use crate::names;
use crate::safe_context::{SafeCode, caused};
use crate::source::{DriverContext, DriverFailure, mysql_error_number, query_code};
use catalog::refuse;
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
    let prefix = match routine.kind {
        model::RoutineKind::Function => "function",
        model::RoutineKind::Procedure => "procedure",
    };
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
        DatabaseSnapshot {
            model: DatabaseModel {
                tables: Vec::new(),
                views: Vec::new(),
                sequences: Vec::new(),
                routines: Vec::new(),
                triggers: Vec::new(),
                events: Vec::new(),
                ..like.model.clone()
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
    let unsupported = || {
        SafeError::about(
            ErrorCode::UnsupportedSchemaOutput,
            Subject::Database(database.clone()),
        )
    };
    let (mut model, _version) = catalog::read(connections, database).await?;
    model
        .tables
        .retain(|table| !filter.ignores_table(&table.name));
    model
        .triggers
        .retain(|trigger| !filter.ignores_table(&trigger.table));
    let texts = show_create_all(connections, database, &show_create_requests(&model)).await?;
    let mut files = checked_files(&mut model, database, texts)?;
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

/// The `SHOW CREATE` statement kind and name of every object, in the order [`checked_files`]
/// takes their texts.
fn show_create_requests(model: &DatabaseModel) -> Vec<(&'static str, String)> {
    let named = |kind: &'static str, name: &String| (kind, name.clone());
    model
        .tables
        .iter()
        .map(|table| named("TABLE", &table.name))
        .chain(model.views.iter().map(|view| named("VIEW", &view.name)))
        .chain(
            model
                .sequences
                .iter()
                .map(|sequence| named("SEQUENCE", &sequence.name)),
        )
        .chain(
            model
                .routines
                .iter()
                .map(|routine| named(routine.kind.keyword(), &routine.name)),
        )
        .chain(
            model
                .triggers
                .iter()
                .map(|trigger| named("TRIGGER", &trigger.name)),
        )
        .chain(model.events.iter().map(|event| named("EVENT", &event.name)))
        .collect()
}

/// The canonical file of every object, each checked against the server's text (given in the
/// order of [`show_create_requests`]). What only the text says is read from it first: routines'
/// parameter lists, views' algorithms, tables' periods, `WITHOUT OVERLAPS`, `DEFAULT` list
/// partitions and system-time partitioning clauses. An object that does not check is refused by
/// name.
fn checked_files(
    model: &mut DatabaseModel,
    database: &DatabaseName,
    texts: Vec<String>,
) -> Result<BTreeMap<String, Vec<u8>>, SafeError> {
    let unsupported = || {
        SafeError::about(
            ErrorCode::UnsupportedSchemaOutput,
            Subject::Database(database.clone()),
        )
    };
    // The model must render to exactly the server's canonical text.
    let check = |kind: ObjectKind, name: &str, server: Option<String>, canonical: &str| {
        if server.as_deref() == Some(canonical) {
            Ok(())
        } else {
            tracing::warn!(database = %database, kind = kind.name(), "an object's model does not match the server's definition; the database is not snapshotted");
            Err(refuse(database, kind, name, Reason::DefinitionMismatch))
        }
    };
    let file = |canonical: &str| format!("{canonical}\n").into_bytes();
    let mut texts = texts.into_iter();
    let mut next = || texts.next().ok_or_else(unsupported);
    let mut files = BTreeMap::new();
    let flavor = model.flavor;
    for table in &mut model.tables {
        let text = next()?;
        normalize::table_facts(&text, table, flavor)
            .map_err(|reason| refuse(database, ObjectKind::Table, &table.name, reason))?;
        let canonical = render::render_table(table, flavor);
        check(
            ObjectKind::Table,
            &table.name,
            normalize::table(&text, table, flavor),
            &canonical,
        )?;
        files.insert(
            names::object_path("tables", None, &table.name)?,
            file(&canonical),
        );
    }
    for view in &mut model.views {
        let text = next()?;
        view.algorithm = normalize::view_algorithm(&text).ok_or_else(|| {
            refuse(
                database,
                ObjectKind::View,
                &view.name,
                Reason::UnreadableDefinition,
            )
        })?;
        let canonical = render::render_view(view);
        check(
            ObjectKind::View,
            &view.name,
            normalize::view(&text, database.as_str()),
            &canonical,
        )?;
        files.insert(
            names::object_path("views", None, &view.name)?,
            file(&canonical),
        );
    }
    for sequence in &model.sequences {
        let canonical = render::render_sequence(sequence);
        check(
            ObjectKind::Sequence,
            &sequence.name,
            normalize::sequence(&next()?),
            &canonical,
        )?;
        files.insert(
            names::object_path("sequences", None, &sequence.name)?,
            file(&canonical),
        );
    }
    for routine in &mut model.routines {
        let kind = routine_object_kind(routine.kind);
        let text = normalize::routine(&next()?, routine, database.as_str(), flavor)
            .filter(|text| normalize::parameters_match(routine, &text.parameter_list))
            .ok_or_else(|| refuse(database, kind, &routine.name, Reason::DefinitionMismatch))?;
        routine.parameter_list = text.parameter_list;
        let canonical = render::render_routine(routine);
        check(kind, &routine.name, Some(text.canonical), &canonical)?;
        files.insert(routine_path(routine)?, file(&canonical));
    }
    let order = render::trigger_order(&model.triggers);
    for trigger in &model.triggers {
        let canonical = render::render_trigger(trigger, None);
        check(
            ObjectKind::Trigger,
            &trigger.name,
            normalize::trigger(&next()?, database.as_str()),
            &canonical,
        )?;
        let applied = render::render_trigger(trigger, order.get(&trigger.name).map(String::as_str));
        files.insert(
            names::object_path("triggers", None, &trigger.name)?,
            file(&applied),
        );
    }
    for event in &model.events {
        let canonical = render::render_event(event);
        check(
            ObjectKind::Event,
            &event.name,
            normalize::event(&next()?),
            &canonical,
        )?;
        files.insert(
            names::object_path("events", None, &event.name)?,
            file(&canonical),
        );
    }
    Ok(files)
}

fn routine_object_kind(kind: model::RoutineKind) -> ObjectKind {
    match kind {
        model::RoutineKind::Function => ObjectKind::Function,
        model::RoutineKind::Procedure => ObjectKind::Procedure,
    }
}

/// The first check of the shared connection verifier: snapshots `candidate`'s database again
/// over `connections` (prepared, at least one, and none the candidate was taken on) and requires
/// the same snapshot hash. A difference means the schema changed meanwhile: the retryable
/// `SCHEMA_CHANGED`, after which a new candidate is taken.
pub async fn verify_live(
    connections: &mut [MySqlConnection],
    database: &DatabaseName,
    candidate: &DatabaseSnapshot,
    server_version: &str,
) -> Result<(), SafeError> {
    let live = snapshot_filtered(connections, database, server_version, &candidate.filter).await?;
    if live.snapshot_hash == candidate.snapshot_hash {
        Ok(())
    } else {
        tracing::info!(database = %database, "the schema changed while it was snapshotted");
        Err(SafeError::about(
            ErrorCode::SchemaChanged,
            Subject::Database(database.clone()),
        ))
    }
}

/// `SHOW CREATE <kind>` of every object, in the objects' order, spread over the connections.
async fn show_create_all(
    connections: &mut [MySqlConnection],
    database: &DatabaseName,
    objects: &[(&'static str, String)],
) -> Result<Vec<String>, SafeError> {
    let share = objects.len().div_ceil(connections.len().max(1)).max(1);
    let chunks = objects.chunks(share);
    let work = connections
        .iter_mut()
        .zip(chunks)
        .map(|(connection, chunk)| async move {
            let mut texts = Vec::with_capacity(chunk.len());
            for (kind, name) in chunk {
                texts.push(show_create(connection, database, kind, name).await?);
            }
            Ok::<_, SafeError>(texts)
        });
    let mut all = Vec::with_capacity(objects.len());
    for texts in futures::future::join_all(work).await {
        all.extend(texts?);
    }
    Ok(all)
}

async fn show_create(
    connection: &mut MySqlConnection,
    database: &DatabaseName,
    kind: &str,
    name: &str,
) -> Result<String, SafeError> {
    let object_kind = match kind {
        "VIEW" => ObjectKind::View,
        "SEQUENCE" => ObjectKind::Sequence,
        "FUNCTION" => ObjectKind::Function,
        "PROCEDURE" => ObjectKind::Procedure,
        "TRIGGER" => ObjectKind::Trigger,
        "EVENT" => ObjectKind::Event,
        _ => ObjectKind::Table,
    };
    let sql = format!(
        "SHOW CREATE {kind} {}.{}",
        render::identifier(database.as_str()),
        render::identifier(name)
    );
    // The text protocol: one round trip, and no prepared statement for the server to
    // invalidate when the object changes.
    let row = connection
        .fetch_one(sql.as_str())
        .await
        .map_err(|error| show_create_error(&error, database, object_kind, name))?;
    // The statement's column: after the name, and for stored programs after the `sql_mode`
    // (and an event's time zone) they were created with.
    let column = match kind {
        "PROCEDURE" | "FUNCTION" | "TRIGGER" => 2,
        "EVENT" => 3,
        _ => 1,
    };
    let unreadable = || refuse(database, object_kind, name, Reason::UnreadableDefinition);
    // NULL when the account may not read a routine's definition.
    let bytes: Option<Vec<u8>> =
        sqlx::Row::try_get_unchecked(&row, column).or_unreadable(unreadable)?;
    let bytes = bytes.ok_or_else(|| denied(database, object_kind, name))?;
    String::from_utf8(bytes).or_safe(unreadable)
}

/// `PERMISSION_DENIED` naming the object `kind` `name` the account may not read.
fn denied(database: &DatabaseName, kind: ObjectKind, name: &str) -> SafeError {
    let mut object = ObjectSubject::kind(database, kind);
    object.name = fermata_schema_core::ObjectName::new(name).ok();
    SafeError::about(ErrorCode::PermissionDenied, Subject::Object(object))
}

/// What a failed `SHOW CREATE` means: an object dropped since the catalog listed it is a schema
/// change (retried); a privilege the account lacks for this kind of object names the object;
/// anything else is the server error's own code. The driver's failure is kept as the cause.
fn show_create_error(
    error: &sqlx::Error,
    database: &DatabaseName,
    kind: ObjectKind,
    name: &str,
) -> SafeError {
    let safe_error = match mysql_error_number(error) {
        // ER_NO_SUCH_TABLE, ER_SP_DOES_NOT_EXIST, ER_TRG_DOES_NOT_EXIST,
        // ER_EVENT_DOES_NOT_EXIST, MariaDB's ER_UNKNOWN_SEQUENCES
        Some(1146 | 1305 | 1360 | 1539 | 4091) => SafeError::about(
            ErrorCode::SchemaChanged,
            Subject::Database(database.clone()),
        ),
        // ER_BAD_DB_ERROR
        Some(1049) => SafeError::about(
            ErrorCode::DatabaseNoLongerVisible,
            Subject::Database(database.clone()),
        ),
        _ => match query_code(error) {
            ErrorCode::PermissionDenied => denied(database, kind, name),
            code => SafeError::about(code, Subject::Database(database.clone())),
        },
    };
    caused(
        safe_error,
        "show an object's definition",
        DriverFailure::of(error),
    )
}
