//! Snapshots of a database's schema: the structured model read from `information_schema`
//! (`catalog`), each table's canonical DDL rendered from it ([`render`]) and checked against
//! the server's own `SHOW CREATE TABLE`, and the canonical files that result.
//!
//! Every introspection connection gets fixed session settings first ([`prepare`]): quoted
//! identifiers, and an `sql_mode` without the modes that change `SHOW CREATE` output. The catalog
//! is read with one query per category; `SHOW CREATE TABLE` runs once per table, spread over the
//! connections given. No table is locked. A table whose model does not render to exactly the
//! server's text, or that holds something the model cannot represent, fails the database with
//! the permanent `UNSUPPORTED_SCHEMA_OUTPUT` instead of producing a lossy snapshot.
//!
//! The files of one database: `tables/<name>.sql` (the canonical `CREATE TABLE` and a line
//! break, names encoded by [`crate::names::file_name`]), `schema.json` (the model) and `manifest.json`
//! (object counts, each file's SHA-256, the snapshot hash, the generator and the server). The
//! snapshot hash is the SHA-256 of the canonical JSON of the database name, the counts and the
//! file hashes, so it changes with the schema and never with the server's version or the
//! generator's.
//!
//! Views get `views/<name>.sql`: the canonical `CREATE VIEW` without its definer (the model
//! keeps the definer, so a changed definer changes the snapshot). Tables and views only, for
//! now: a database with sequences, routines, triggers or events is refused as unsupported
//! rather than snapshotted without them.
//!
//! A candidate is verified twice: [`verify_live`] snapshots the source again and requires the
//! same hash; [`verify_in_workspace`] (`workspace.rs`) applies the candidate's files into a
//! scratch schema on a verification workspace server and requires the candidate back from it.

mod catalog;
pub mod model;
pub mod render;
mod workspace;

use std::collections::BTreeMap;

use fermata_store::schema::{DatabaseName, ErrorCode, SafeError, Subject};
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::Executor;
use sqlx::mysql::MySqlConnection;

use crate::names;
use crate::source::query_error;
use model::DatabaseModel;
pub use workspace::verify_in_workspace;

/// The version written into manifests.
pub const GENERATOR: &str = concat!("fermata ", env!("CARGO_PKG_VERSION"));

/// The session settings every introspection connection runs with.
const SESSION: &str = "SET SESSION sql_quote_show_create = 1, sql_mode = 'NO_ENGINE_SUBSTITUTION'";

/// Gives `connection` the fixed introspection settings.
pub async fn prepare(connection: &mut MySqlConnection) -> Result<(), SafeError> {
    connection
        .execute(SESSION)
        .await
        .map(|_| ())
        .map_err(|error| query_error(&error))
}

/// One database's snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseSnapshot {
    pub model: DatabaseModel,
    /// Relative path → content, in path order.
    pub files: BTreeMap<String, Vec<u8>>,
    pub snapshot_hash: String,
}

#[derive(Serialize)]
struct Hashed<'a> {
    database: &'a str,
    counts: &'a BTreeMap<&'static str, usize>,
    files: &'a BTreeMap<String, String>,
}

#[derive(Serialize)]
struct Manifest<'a> {
    format: u32,
    database: &'a str,
    counts: &'a BTreeMap<&'static str, usize>,
    files: &'a BTreeMap<String, String>,
    snapshot_hash: &'a str,
    generator: &'static str,
    server_version: &'a str,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Snapshots `database` over `connections` (prepared with [`prepare`]; at least one), whose
/// server reports `server_version`.
pub async fn snapshot(
    connections: &mut [MySqlConnection],
    database: &DatabaseName,
    server_version: &str,
) -> Result<DatabaseSnapshot, SafeError> {
    let unsupported = || {
        SafeError::about(
            ErrorCode::UnsupportedSchemaOutput,
            Subject::Database(database.clone()),
        )
    };
    let first = connections.first_mut().ok_or_else(unsupported)?;
    let model = catalog::read(first, database).await?;
    let mut objects: Vec<(&str, &str)> = model
        .tables
        .iter()
        .map(|table| ("TABLE", table.name.as_str()))
        .collect();
    objects.extend(model.views.iter().map(|view| ("VIEW", view.name.as_str())));
    let mut texts = show_create_all(connections, database, &objects).await?;
    let view_texts = texts.split_off(model.tables.len());

    let mut files = BTreeMap::new();
    for (table, text) in model.tables.iter().zip(texts) {
        let canonical = render::render_table(table);
        if render::canonical_show_create(&text, table).as_deref() != Some(canonical.as_str()) {
            tracing::warn!(database = %database, "a table's model does not match the server's definition; the database is not snapshotted");
            return Err(unsupported());
        }
        files.insert(
            format!("tables/{}.sql", names::file_name(&table.name)?),
            format!("{canonical}\n").into_bytes(),
        );
    }
    for (view, text) in model.views.iter().zip(view_texts) {
        let canonical = render::render_view(view);
        if render::canonical_show_create_view(&text, database.as_str()).as_deref()
            != Some(canonical.as_str())
        {
            tracing::warn!(database = %database, "a view's model does not match the server's definition; the database is not snapshotted");
            return Err(unsupported());
        }
        files.insert(
            format!("views/{}.sql", names::file_name(&view.name)?),
            format!("{canonical}\n").into_bytes(),
        );
    }
    let schema_json = serde_json::to_string_pretty(&model).map_err(|_| unsupported())?;
    files.insert(
        "schema.json".to_owned(),
        format!("{schema_json}\n").into_bytes(),
    );

    let counts = BTreeMap::from([("tables", model.tables.len()), ("views", model.views.len())]);
    let hashes: BTreeMap<String, String> = files
        .iter()
        .map(|(path, content)| (path.clone(), hex(&Sha256::digest(content))))
        .collect();
    let hashed = serde_json::to_vec(&Hashed {
        database: database.as_str(),
        counts: &counts,
        files: &hashes,
    })
    .map_err(|_| unsupported())?;
    let snapshot_hash = hex(&Sha256::digest(&hashed));
    let manifest = serde_json::to_string_pretty(&Manifest {
        format: 1,
        database: database.as_str(),
        counts: &counts,
        files: &hashes,
        snapshot_hash: &snapshot_hash,
        generator: GENERATOR,
        server_version,
    })
    .map_err(|_| unsupported())?;
    files.insert(
        "manifest.json".to_owned(),
        format!("{manifest}\n").into_bytes(),
    );
    Ok(DatabaseSnapshot {
        model,
        files,
        snapshot_hash,
    })
}

/// The first check of the shared connection verifier: snapshots `candidate`'s database again
/// over `connection` (prepared, and not one the candidate was taken on) and requires the same
/// snapshot hash. A difference means the schema changed meanwhile: the retryable
/// `SCHEMA_CHANGED`, after which a new candidate is taken.
pub async fn verify_live(
    connection: &mut MySqlConnection,
    database: &DatabaseName,
    candidate: &DatabaseSnapshot,
    server_version: &str,
) -> Result<(), SafeError> {
    let live = snapshot(std::slice::from_mut(connection), database, server_version).await?;
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
    objects: &[(&str, &str)],
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
    let sql = format!(
        "SHOW CREATE {kind} {}.{}",
        render::identifier(database.as_str()),
        render::identifier(name)
    );
    let row = sqlx::query(&sql)
        .fetch_one(&mut *connection)
        .await
        .map_err(|error| query_error(&error))?;
    let bytes: Vec<u8> = sqlx::Row::try_get_unchecked(&row, 1).map_err(|_| {
        SafeError::about(
            ErrorCode::UnsupportedSchemaOutput,
            Subject::Database(database.clone()),
        )
    })?;
    String::from_utf8(bytes).map_err(|_| {
        SafeError::about(
            ErrorCode::UnsupportedSchemaOutput,
            Subject::Database(database.clone()),
        )
    })
}
