//! Opening the application database from the storage settings, and bringing its schema up to
//! this release before anything else touches it.

use std::time::Duration;

use fermata_store::{LeaseName, Storage, StoreError, StoreOptions, WriterFence};
use fermata_store_sql::{Database, MigrationStatus, SqlStorage};

use crate::config::{StorageKind, StorageSettings, ensure_data_dir};
use crate::failure::Failure;

/// The SQLite file's name inside the data folder.
pub(crate) const SQLITE_FILE: &str = "fermata.db";

/// Connects to the configured database (creating the data folder for SQLite), for a command: its
/// writes are not gated by the writer lease (see docs/operations.md, "Commands that write").
pub(crate) async fn open(settings: &StorageSettings) -> Result<SqlStorage, Failure> {
    open_with(settings, StoreOptions::default()).await
}

/// Connects to the configured database for the serving process: every write it makes goes
/// through `fence`, so it writes nothing before it holds the writer lease or after it lost it.
/// Every wait of its pool on the database is bounded by `wait_limit`.
pub(crate) async fn open_gated(
    settings: &StorageSettings,
    fence: WriterFence,
    wait_limit: Duration,
) -> Result<SqlStorage, Failure> {
    let options = StoreOptions {
        writer_fence: Some(fence),
        wait_limit: Some(wait_limit),
        fenced_write_hook: crate::fault::pause_fenced_writes(),
    };
    open_with(settings, options).await
}

async fn open_with(
    settings: &StorageSettings,
    options: StoreOptions,
) -> Result<SqlStorage, Failure> {
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
    SqlStorage::connect(&database, options)
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

/// The schema's state for a command that reads it as this release does and migrates nothing
/// (`backup`, `check`): one with pending migrations is refused, naming `what` could not be done.
pub(crate) async fn require_current_schema(
    storage: &SqlStorage,
    what: &str,
) -> Result<MigrationStatus, Failure> {
    let status = storage.migration_status().await.map_err(schema_failure)?;
    if status.pending.is_empty() {
        return Ok(status);
    }
    Err(Failure::runtime(format!(
        "the database schema is behind this release ({} migrations pending), so it cannot {what}: \
         run `fermata migrate` first, or use the release that serves it",
        status.pending.len()
    )))
}

/// Opens the database for a process that writes under the writer lease (`serve`, `import`):
/// its fence, empty until the lease is taken, and the store whose every write goes through it,
/// with the schema checked, and migrated when `migrate`.
pub(crate) async fn open_fenced(
    settings: &StorageSettings,
    database_wait: Duration,
    migrate: bool,
) -> Result<(WriterFence, SqlStorage), Failure> {
    let fence = WriterFence::default();
    let store = open_gated(settings, fence.clone(), database_wait).await?;
    prepare_schema(&store, migrate).await?;
    Ok((fence, store))
}

fn schema_failure(error: StoreError) -> Failure {
    Failure::store("the database schema cannot be used", error)
}

/// Whether a server serves the database now: a process alone, holding the writer lease, or a
/// cluster, with a live member or a live shard or coordinator lease.
pub(crate) async fn is_served(store: &dyn Storage) -> Result<bool, StoreError> {
    if store
        .leases()
        .peek(&LeaseName::WRITER)
        .await?
        .live_holder()
        .is_some()
    {
        return Ok(true);
    }
    let view = store.cluster().view().await?;
    Ok(!view.members.is_empty() || view.leases.iter().any(|record| record.is_live(view.now)))
}
