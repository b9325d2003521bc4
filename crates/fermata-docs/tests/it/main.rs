//! The integration tests of `fermata-docs`, as one test binary: one module per subject, the
//! shared helpers beside them. One binary links once, where a binary per file linked each.

mod long_journal;
mod recovery_replay;
mod store_history;
mod stored_corruption;

use std::time::Duration;

use fermata_store::{Acquisition, ChannelId, Fence, LeaseName, Storage};
use fermata_store_sql::testing::ScratchStorage;
use fermata_store_testkit::contract::create_document;

/// The writer lease's fence over `store`, and a new document titled `title` in `acme/app`.
async fn new_document(store: &ScratchStorage, title: &str) -> (Fence, ChannelId) {
    let fence = match store
        .leases()
        .acquire(&LeaseName::WRITER, title, Duration::from_secs(3600))
        .await
        .unwrap()
    {
        Acquisition::Granted(lease) => lease.fence(),
        Acquisition::Held(record) => panic!("held by {record:?}"),
    };
    let channel = create_document(store.collaboration(), &fence, title).await;
    (fence, channel.id)
}

/// Runs `sql` on the store's database with document `id` bound as `$1`, as tampering would;
/// returns how many rows it changed.
async fn tamper(store: &ScratchStorage, sql: &str, id: &ChannelId) -> u64 {
    sqlx::query(sql)
        .bind(id.0.clone())
        .execute(store.storage.pool())
        .await
        .unwrap()
        .rows_affected()
}
