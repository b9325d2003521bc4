//! `fermata migrate` and `fermata status`: the commands that need only the storage settings.

use std::fmt::Write as _;

use fermata_store::{ClusterView, LeaseName, ShardCount, Storage};

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

/// Reports a cluster's live members, with the shards each holds, the coordinator, how many shards
/// are held and how many by the member placement gives them; nothing for a database no cluster
/// ever served.
fn cluster_section(out: &mut String, view: &ClusterView, count: ShardCount) {
    if view.members.is_empty() && view.leases.is_empty() {
        return;
    }
    let live: Vec<_> = view
        .leases
        .iter()
        .filter(|record| record.is_live(view.now))
        .collect();
    let _ = writeln!(out, "cluster: {} live members", view.members.len());
    for member in &view.members {
        let shards = live
            .iter()
            .filter(|record| record.name.shard().is_some() && record.holder == member.lease.holder)
            .count();
        let coordinator = live.iter().any(|record| {
            record.name == LeaseName::COORDINATOR && record.holder == member.lease.holder
        });
        let _ = writeln!(
            out,
            "  {} at {} (fermata {}): {shards} shards{}",
            member.lease.holder,
            member.announcement.address,
            member.announcement.version,
            if coordinator { ", coordinator" } else { "" }
        );
    }
    let held = live
        .iter()
        .filter(|record| record.name.shard().is_some())
        .count();
    let _ = writeln!(out, "  shards held: {held} of {}", count.get());
    // Below the count while shards wait to be handed over to the member placement gives them.
    let _ = writeln!(
        out,
        "  shards in place: {} of {} (held by the member placement gives them)",
        view.shards_in_place(count),
        count.get()
    );
}

/// Reports the schema, the writer lease, a cluster's members and the latest tenures.
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
    let view = store
        .cluster()
        .view()
        .await
        .map_err(|error| Failure::store("cannot read the cluster", error))?;
    let count = store
        .cluster()
        .shard_count()
        .await
        .map_err(|error| Failure::store("cannot read the shard count", error))?;
    cluster_section(&mut out, &view, count);
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
