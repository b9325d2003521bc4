//! Opening the application database from the storage settings, and bringing its schema up to
//! this release before anything else touches it.

use fermata_store::{StoreError, StoreOptions};
use fermata_store_sql::{Database, MigrationStatus, SqlStorage};

use crate::config::{StorageKind, StorageSettings, ensure_data_dir};
use crate::failure::Failure;

/// The SQLite file's name inside the data folder.
pub(crate) const SQLITE_FILE: &str = "fermata.db";

/// Connects to the configured database (creating the data folder for SQLite).
pub(crate) async fn open(settings: &StorageSettings) -> Result<SqlStorage, Failure> {
    let database = match settings.kind {
        StorageKind::Sqlite => {
            ensure_data_dir(&settings.data_dir).map_err(|error| {
                Failure::runtime(format!(
                    "cannot create the data folder {}: {error}",
                    settings.data_dir.display()
                ))
            })?;
            Database::Sqlite {
                path: settings.data_dir.join(SQLITE_FILE),
            }
        }
        StorageKind::Postgres => Database::Postgres {
            url: settings
                .database_url
                .as_ref()
                .map(|url| url.expose().to_owned())
                .unwrap_or_default(),
        },
    };
    SqlStorage::connect(&database, StoreOptions::default())
        .await
        .map_err(|error| Failure::store("cannot open the application database", error))
}

/// Checks the applied migrations (a changed one is corruption and stops everything), then either
/// applies the pending ones or, when `migrate` is off, refuses to go on while any is pending.
pub(crate) async fn prepare_schema(
    storage: &SqlStorage,
    migrate: bool,
) -> Result<MigrationStatus, Failure> {
    let status = storage.migration_status().await.map_err(schema_failure)?;
    if status.pending.is_empty() {
        return Ok(status);
    }
    if !migrate {
        return Err(Failure::runtime(format!(
            "the database schema is behind this release ({} pending: {}); run `fermata migrate` \
             or start without --no-migrate",
            status.pending.len(),
            status.pending.join(", ")
        )));
    }
    let after = storage.migrate().await.map_err(schema_failure)?;
    for file in &status.pending {
        tracing::info!(migration = %file, "applied migration");
    }
    Ok(after)
}

fn schema_failure(error: StoreError) -> Failure {
    Failure::store("the database schema cannot be used", error)
}
