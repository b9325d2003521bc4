//! Each adapter's ordered, checksummed migrations, and the check that runs before any of them.
//!
//! sqlx's migrator applies the files in `migrations/<dialect>/` and records each one's version,
//! description and SHA-384 checksum in `_sqlx_migrations`. Before anything runs, every applied
//! migration is compared with this release's file: a changed file, a migration this release does
//! not know, or one left half-applied is corruption, reported with the file's name, and nothing
//! is applied.

use std::collections::HashMap;

use fermata_store::{StoreError, StoreResult};
use sqlx::migrate::{Migrate, Migration, Migrator};

use crate::dialect::Dialect;
use crate::error::map;

static SQLITE: Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES: Migrator = sqlx::migrate!("./migrations/postgres");

/// The migrations compiled into this release for `dialect`.
pub fn embedded(dialect: Dialect) -> &'static Migrator {
    match dialect {
        Dialect::Sqlite => &SQLITE,
        Dialect::Postgres => &POSTGRES,
    }
}

/// Where a database stands against a set of migrations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationStatus {
    /// File names of the migrations already applied, in order.
    pub applied: Vec<String>,
    /// File names of the migrations still to apply, in order.
    pub pending: Vec<String>,
}

/// The file a migration came from, as `0001_leases.sql`.
pub fn file_name(migration: &Migration) -> String {
    format!(
        "{:04}_{}.sql",
        migration.version,
        migration.description.replace(' ', "_")
    )
}

/// Compares the database's record of applied migrations with `migrator`'s files.
pub(crate) async fn check(
    conn: &mut sqlx::AnyConnection,
    migrator: &Migrator,
    dialect: Dialect,
) -> StoreResult<MigrationStatus> {
    let reading = "reading the applied migrations";
    conn.ensure_migrations_table()
        .await
        .map_err(|e| map_migrate(e, reading))?;
    if let Some(version) = conn
        .dirty_version()
        .await
        .map_err(|e| map_migrate(e, reading))?
    {
        return Err(StoreError::corrupt(format!(
            "migration {version} of the {} schema was interrupted while it was applied; \
             restore the database from a backup",
            dialect.name()
        )));
    }
    let applied = conn
        .list_applied_migrations()
        .await
        .map_err(|e| map_migrate(e, reading))?;
    let known: HashMap<i64, &Migration> = migrator
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
        .map(|m| (m.version, m))
        .collect();
    for record in &applied {
        let Some(migration) = known.get(&record.version) else {
            let description = applied_description(conn, record.version).await;
            return Err(StoreError::corrupt(format!(
                "the database has migration {:04}{} applied, which this release ({}) does not \
                 know: a newer release wrote it. Run that release or a later one; this one \
                 changed nothing",
                record.version,
                description.map_or(String::new(), |d| format!(" ({d})")),
                RELEASE
            )));
        };
        if migration.checksum != record.checksum {
            return Err(StoreError::corrupt(format!(
                "migration file {}/{} was changed after it was applied (its checksum differs \
                 from the one recorded); nothing was run",
                dialect.name(),
                file_name(migration)
            )));
        }
    }
    let done: HashMap<i64, ()> = applied.iter().map(|r| (r.version, ())).collect();
    let mut status = MigrationStatus {
        applied: Vec::new(),
        pending: Vec::new(),
    };
    for migration in migrator
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
    {
        let list = if done.contains_key(&migration.version) {
            &mut status.applied
        } else {
            &mut status.pending
        };
        list.push(file_name(migration));
    }
    Ok(status)
}

/// This release, as the refusal of a newer database names it.
const RELEASE: &str = concat!("fermata ", env!("CARGO_PKG_VERSION"));

/// The description an applied migration was recorded with, to name one this release does not
/// know; `None` when it cannot be read (the refusal stands without it).
async fn applied_description(conn: &mut sqlx::AnyConnection, version: i64) -> Option<String> {
    let description: String =
        sqlx::query_scalar("SELECT description FROM _sqlx_migrations WHERE version = $1")
            .bind(version)
            .fetch_one(conn)
            .await
            .ok()?;
    // Shown to an operator as it was recorded, kept short and printable.
    let printable: String = description
        .chars()
        .filter(|c| !c.is_control())
        .take(80)
        .collect();
    (!printable.is_empty()).then_some(printable)
}

fn map_migrate(error: sqlx::migrate::MigrateError, action: &str) -> StoreError {
    match error {
        sqlx::migrate::MigrateError::Execute(inner) => map(inner, action),
        other => StoreError::corrupt(action.to_owned()).with_source(other),
    }
}

/// Applies `migrator`'s pending migrations after [`check`] passed.
pub(crate) async fn apply(conn: &mut sqlx::AnyConnection, migrator: &Migrator) -> StoreResult<()> {
    migrator
        .run_direct(conn)
        .await
        .map_err(|e| map_migrate(e, "applying migrations"))
}
