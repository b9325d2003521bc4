//! `fermata migrate` and `fermata status`: the commands that need only the storage settings.

use std::fmt::Write as _;

use fermata_store::{LeaseName, Storage};

use crate::config::StorageSettings;
use crate::failure::Failure;
use crate::storage;

/// Applies pending migrations and prints what it did.
pub(crate) async fn migrate(settings: &StorageSettings) -> Result<String, Failure> {
    let store = storage::open(settings).await?;
    let before = store
        .migration_status()
        .await
        .map_err(|error| Failure::store("the database schema cannot be used", error))?;
    storage::prepare_schema(&store, true).await?;
    store.close().await;
    let mut out = String::new();
    for file in &before.pending {
        let _ = writeln!(out, "applied {file}");
    }
    let _ = writeln!(
        out,
        "the {} schema is up to date ({} migrations)",
        store.driver(),
        before.applied.len() + before.pending.len()
    );
    Ok(out)
}

/// Reports the schema, the writer lease and the latest tenures.
pub(crate) async fn status(settings: &StorageSettings) -> Result<String, Failure> {
    let store = storage::open(settings).await?;
    let schema = store
        .migration_status()
        .await
        .map_err(|error| Failure::store("the database schema cannot be used", error))?;
    let mut out = String::new();
    let _ = writeln!(out, "storage: {}", store.driver());
    let _ = writeln!(
        out,
        "schema: {} applied, {} pending{}",
        schema.applied.len(),
        schema.pending.len(),
        if schema.pending.is_empty() {
            ""
        } else {
            " (run `fermata migrate`)"
        }
    );
    if !schema.pending.is_empty() && schema.applied.is_empty() {
        store.close().await;
        return Ok(out);
    }
    let peek = store
        .leases()
        .peek(&LeaseName::WRITER)
        .await
        .map_err(|error| Failure::store("cannot read the writer lease", error))?;
    match peek.live_holder() {
        Some(record) => {
            let _ = writeln!(
                out,
                "writer lease: held by {} (token {}) until {}",
                record.holder, record.token, record.expires_at
            );
        }
        None => {
            let _ = writeln!(out, "writer lease: free");
        }
    }
    let tenures = store
        .tenures()
        .recent(&LeaseName::WRITER, 5)
        .await
        .map_err(|error| Failure::store("cannot read the tenures", error))?;
    if !tenures.is_empty() {
        let _ = writeln!(out, "recent tenures:");
    }
    for tenure in tenures {
        let end = match (tenure.end, tenure.ended_at) {
            (None, _) => "open".to_owned(),
            (Some(end), Some(at)) => format!("{} at {at}", end.as_str()),
            (Some(end), None) => format!("{} (crashed or lost the lease)", end.as_str()),
        };
        let _ = writeln!(
            out,
            "  token {}: {} (fermata {}) from {}, {end}",
            tenure.token, tenure.holder, tenure.version, tenure.started_at
        );
    }
    store.close().await;
    Ok(out)
}
