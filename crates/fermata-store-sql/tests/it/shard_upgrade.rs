//! The upgrade to shards (migration `0019`) on SQLite and PostgreSQL: documents an earlier release
//! stored get the shard their ID derives (`Shard::of`, computed here in Rust, against the
//! migration's SQL), children their parent's, and the database its fixed shard count.

use fermata_store::{ChannelId, Shard, ShardCount, Storage, StoreOptions};
use fermata_store_sql::SqlStorage;
use fermata_store_sql::testing::ScratchDatabase;
use sqlx::migrate::Migrator;

use crate::earlier_release::migrations_before;

/// Top-level documents whose IDs end in every hex digit at every one of the last four places,
/// and one ID that is not a UUID (shard 0 on both sides).
const TOP_LEVEL: &[&str] = &[
    "0f3a9c2e-7b41-4d0e-8c55-000000000000",
    "0f3a9c2e-7b41-4d0e-8c55-00000000ffff",
    "0f3a9c2e-7b41-4d0e-8c55-0000000089ab",
    "0f3a9c2e-7b41-4d0e-8c55-000000004567",
    "0f3a9c2e-7b41-4d0e-8c55-00000000cdef",
    "0f3a9c2e-7b41-4d0e-8c55-000000000123",
    "not-a-uuid-XYZ",
];

/// A child whose own ID derives another shard than its parent's (`...ffff` is in shard 255).
const CHILD: (&str, &str) = (
    "7c0de111-2222-4333-8444-000000000001",
    "0f3a9c2e-7b41-4d0e-8c55-00000000ffff",
);

async fn earlier_documents_get_the_shard_their_id_or_parent_derives(scratch: ScratchDatabase) {
    let storage = SqlStorage::connect(&scratch.database, StoreOptions::default())
        .await
        .unwrap();
    let earlier = migrations_before(storage.dialect(), "0019");
    storage
        .migrate_with(&Migrator::new(earlier.path()).await.unwrap())
        .await
        .unwrap();
    let insert = "INSERT INTO channels (id, repository, title, slug, parent_id, created_at, \
                  updated_at, revision, sequence, epoch) VALUES ($1, 'ann/app', $2, $2, $3, 1, 1, 0, 0, 1)";
    for (n, id) in TOP_LEVEL.iter().enumerate() {
        sqlx::query(insert)
            .bind(*id)
            .bind(format!("doc-{n}"))
            .bind(None::<String>)
            .execute(storage.pool())
            .await
            .unwrap();
    }
    sqlx::query(insert)
        .bind(CHILD.0)
        .bind("child")
        .bind(Some(CHILD.1))
        .execute(storage.pool())
        .await
        .unwrap();
    storage.migrate().await.unwrap();

    let count = storage.cluster().shard_count().await.unwrap();
    assert_eq!(count, ShardCount::DEFAULT);
    for id in TOP_LEVEL {
        let id = ChannelId((*id).to_owned());
        let stored = storage.collaboration().channel(&id).await.unwrap().unwrap();
        assert_eq!(stored.shard, Shard::of(&id, count), "{id}");
    }
    let child = ChannelId(CHILD.0.to_owned());
    let stored = storage
        .collaboration()
        .channel(&child)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.shard, Shard(255));
    assert_ne!(Shard::of(&child, count), Shard(255));
}

#[tokio::test]
async fn sqlite_earlier_documents_get_the_shard_their_id_or_parent_derives() {
    earlier_documents_get_the_shard_their_id_or_parent_derives(ScratchDatabase::sqlite()).await;
}

#[tokio::test]
async fn postgres_earlier_documents_get_the_shard_their_id_or_parent_derives() {
    earlier_documents_get_the_shard_their_id_or_parent_derives(ScratchDatabase::postgres().await)
        .await;
}
