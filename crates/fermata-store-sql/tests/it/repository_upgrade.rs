//! The upgrade to repositories as records (migration `0011`) on SQLite and PostgreSQL: a
//! database as the release before it left it is seeded with plain statements, migrated, and
//! checked. Every repository a document names becomes a row; the user named as its owner becomes
//! admin; other authors in its activity history become editors; nobody else is a member; and the
//! access generation starts at zero and moves with a logout.

use fermata_store::{Repository, RepositoryRole, Storage, StoreOptions, UserId};
use fermata_store_sql::testing::ScratchDatabase;

use crate::earlier_release::migrations_before;
use fermata_store_sql::SqlStorage;
use sqlx::migrate::Migrator;

/// What an earlier release stored: four users (one a system_admin), documents in a repository
/// its owner's user has (with history by two authors), in one whose owner is no user (with
/// history by one), and in one whose name is not `OWNER/NAME`; and one login session.
const SEED: &[&str] = &[
    "INSERT INTO users (id, name, password_hash, created_at, updated_at) VALUES \
     ('u-ann', 'ann', 'h', 1, 1), ('u-bob', 'bob', 'h', 1, 1), ('u-cy', 'cy', 'h', 1, 1), \
     ('u-root', 'root', 'h', 1, 1)",
    "INSERT INTO user_roles (user_id, role) VALUES ('u-root', 'system_admin')",
    "INSERT INTO channels (id, repository, title, slug, created_at, updated_at, revision, sequence, epoch) VALUES \
     ('c-1', 'ann/app', 'One', 'one', 10, 10, 0, 0, 1), \
     ('c-2', 'ann/app', 'Two', 'two', 20, 20, 0, 0, 1), \
     ('c-3', 'acme/site', 'Three', 'three', 30, 30, 0, 0, 1), \
     ('c-4', 'loose', 'Four', 'four', 40, 40, 0, 0, 1)",
    "INSERT INTO document_versions (channel_id, number, author_id, canonical_text, revision, source_hash, started_at, ended_at) VALUES \
     ('c-1', 1, 'u-ann', 'a', 1, 'h', 11, 11), \
     ('c-1', 2, 'u-bob', 'b', 2, 'h', 12, 12), \
     ('c-2', 1, 'u-bob', 'c', 1, 'h', 21, 21), \
     ('c-2', 2, NULL, 'd', 2, 'h', 22, 22), \
     ('c-3', 1, 'u-cy', 'e', 1, 'h', 31, 31), \
     ('c-3', 2, 'u-gone', 'f', 2, 'h', 32, 32)",
    "INSERT INTO web_sessions (id, user_id, secret_hash, created_at, expires_at, authenticated_at, revision) VALUES \
     ('s-1', 'u-bob', NULL, 1, 99999999999999, 1, 0)",
];

async fn an_earlier_database_upgrades_without_locking_anyone_out(scratch: ScratchDatabase) {
    let storage = SqlStorage::connect(&scratch.database, StoreOptions::default())
        .await
        .unwrap();
    let earlier = migrations_before(storage.dialect(), "0011");
    storage
        .migrate_with(&Migrator::new(earlier.path()).await.unwrap())
        .await
        .unwrap();
    for statement in SEED {
        sqlx::query(statement)
            .execute(storage.pool())
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    let status = storage.migrate().await.unwrap();
    assert!(status.pending.is_empty());
    assert!(status.applied.contains(&"0011_repositories.sql".to_owned()));

    let store = storage.repositories();
    let mut names = Vec::new();
    for record in store.all_repositories(None, 100).await.unwrap() {
        assert_eq!(record.created_by, None, "{}", record.name);
        names.push((record.name.to_string(), record.created_at.0));
    }
    assert_eq!(
        names,
        [
            ("acme/site".to_owned(), 30),
            ("ann/app".to_owned(), 10),
            ("loose".to_owned(), 40)
        ]
    );
    let members = |name: &str| {
        let name = Repository::new(name).unwrap();
        async move {
            store
                .members(&name)
                .await
                .unwrap()
                .into_iter()
                .map(|m| (m.user.0, m.role))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        members("ann/app").await,
        [
            ("u-ann".to_owned(), RepositoryRole::Admin),
            ("u-bob".to_owned(), RepositoryRole::Editor)
        ],
        "the owner is admin, the other author an editor, and nobody else a member"
    );
    assert_eq!(
        members("acme/site").await,
        [("u-cy".to_owned(), RepositoryRole::Editor)],
        "no user is named acme, and an author who is no user is left out"
    );
    assert_eq!(members("loose").await, []);
    let root = UserId("u-root".to_owned());
    for name in ["ann/app", "acme/site", "loose"] {
        let name = Repository::new(name).unwrap();
        assert_eq!(store.role_of(&name, &root).await.unwrap(), None);
    }

    assert_eq!(store.access_generation().await.unwrap(), 0);
    assert!(
        storage
            .sessions()
            .delete_session(&fermata_store::SessionId("s-1".to_owned()))
            .await
            .unwrap()
    );
    assert_eq!(store.access_generation().await.unwrap(), 1);
}

#[tokio::test]
async fn sqlite_an_earlier_database_upgrades_without_locking_anyone_out() {
    an_earlier_database_upgrades_without_locking_anyone_out(ScratchDatabase::sqlite()).await;
}

#[tokio::test]
async fn postgres_an_earlier_database_upgrades_without_locking_anyone_out() {
    an_earlier_database_upgrades_without_locking_anyone_out(ScratchDatabase::postgres().await)
        .await;
}
