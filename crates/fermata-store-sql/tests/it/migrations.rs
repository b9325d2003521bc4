//! Migrations on SQLite and PostgreSQL: a fresh database migrates, a second run applies nothing,
//! and an applied migration whose file changed is refused as corruption before anything runs.

use fermata_store::{ErrorKind, StoreOptions};
use fermata_store_sql::SqlStorage;
use fermata_store_sql::migrations::embedded;
use fermata_store_sql::testing::ScratchDatabase;
use sqlx::migrate::Migrator;

async fn fresh_database_migrates_once(scratch: ScratchDatabase) {
    let storage = SqlStorage::connect(&scratch.database, StoreOptions::default())
        .await
        .unwrap();
    let all: Vec<String> = embedded(storage.dialect())
        .iter()
        .map(fermata_store_sql::migrations::file_name)
        .collect();
    assert!(all.contains(&"0001_leases.sql".to_owned()), "{all:?}");

    let before = storage.migration_status().await.unwrap();
    assert_eq!(before.applied, Vec::<String>::new());
    assert_eq!(before.pending, all);

    let first = storage.migrate().await.unwrap();
    assert_eq!(
        (first.applied.clone(), first.pending.len()),
        (all.clone(), 0)
    );
    let second = storage.migrate().await.unwrap();
    assert_eq!(second, first, "a second run changed something");
}

async fn edited_applied_migration_is_corruption(scratch: ScratchDatabase) {
    let storage = SqlStorage::connect(&scratch.database, StoreOptions::default())
        .await
        .unwrap();
    let files = crate::earlier_release::all_migrations(storage.dialect());
    let original = Migrator::new(files.path()).await.unwrap();
    storage.migrate_with(&original).await.unwrap();

    // Someone edits the applied file and adds a new one after it.
    let leases = files.path().join("0001_leases.sql");
    let mut text = std::fs::read_to_string(&leases).unwrap();
    text.push_str("\nCREATE TABLE edited_after_release (id INTEGER);\n");
    std::fs::write(&leases, text).unwrap();
    std::fs::write(
        files.path().join("0002_next.sql"),
        "CREATE TABLE never_applied (id INTEGER);\n",
    )
    .unwrap();
    let edited = Migrator::new(files.path()).await.unwrap();

    for error in [
        storage.migration_status_against(&edited).await.unwrap_err(),
        storage.migrate_with(&edited).await.unwrap_err(),
    ] {
        assert_eq!(error.kind(), ErrorKind::Corrupt);
        let message = error.to_string();
        assert!(
            message.contains(&format!("{}/0001_leases.sql", storage.dialect().name())),
            "the message does not name the file: {message}"
        );
    }
    // Nothing ran: the original migrations are still exactly what is recorded.
    let status = storage.migration_status_against(&original).await.unwrap();
    assert_eq!(status.pending, Vec::<String>::new());
}

#[tokio::test]
async fn sqlite_fresh_database_migrates_once() {
    fresh_database_migrates_once(ScratchDatabase::sqlite()).await;
}

#[tokio::test]
async fn postgres_fresh_database_migrates_once() {
    fresh_database_migrates_once(ScratchDatabase::postgres().await).await;
}

#[tokio::test]
async fn sqlite_edited_applied_migration_is_corruption() {
    edited_applied_migration_is_corruption(ScratchDatabase::sqlite()).await;
}

#[tokio::test]
async fn postgres_edited_applied_migration_is_corruption() {
    edited_applied_migration_is_corruption(ScratchDatabase::postgres().await).await;
}
