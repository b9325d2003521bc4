//! The upgrade to search (migration `0018`) on SQLite and PostgreSQL: a database as the release
//! before it left it is seeded with plain statements, migrated, and searched. Every document is
//! indexed with its title and its last checkpoint's text; one whose journal went on after that
//! checkpoint, or that has journal and no checkpoint, is listed as stale until its text is
//! refreshed; and on SQLite the FTS5 index agrees with its rows.

use fermata_store::{
    Acquisition, ChannelId, LeaseName, SearchQuery, SearchTerms, Storage, StoreOptions, UserId,
};
use fermata_store_sql::testing::ScratchDatabase;

use crate::earlier_release::migrations_before;
use fermata_store_sql::{Dialect, SqlStorage};
use sqlx::migrate::Migrator;

/// What an earlier release stored: a user who administers `ann/app`, and four documents there:
/// one checkpointed at its last commit (c-1), one whose journal went on after its checkpoint
/// (c-2), one never opened (c-3), and one with a journal and no checkpoint (c-4).
const SEED: &[&str] = &[
    "INSERT INTO users (id, name, password_hash, created_at, updated_at) VALUES \
     ('u-ann', 'ann', 'h', 1, 1)",
    "INSERT INTO repositories (name, created_at, created_by, fencing_token) VALUES \
     ('ann/app', 1, 'u-ann', 0)",
    "INSERT INTO repository_members (repository, user_id, role, added_at, fencing_token) VALUES \
     ('ann/app', 'u-ann', 'admin', 1, 0)",
    "INSERT INTO channels (id, repository, title, slug, created_at, updated_at, revision, sequence, epoch) VALUES \
     ('c-1', 'ann/app', 'Harbor plan', 'harbor-plan', 10, 10, 2, 2, 1), \
     ('c-2', 'ann/app', 'Lagoon notes', 'lagoon-notes', 20, 20, 3, 3, 1), \
     ('c-3', 'ann/app', 'Empty atoll', 'empty-atoll', 30, 30, 0, 0, 1), \
     ('c-4', 'ann/app', 'Fresh reef', 'fresh-reef', 40, 40, 2, 2, 1)",
];

/// The checkpoints: (document, through sequence, text).
const CHECKPOINTS: &[(&str, i64, &str)] = &[
    ("c-1", 2, "The harbor opens at dawn."),
    ("c-2", 1, "The lagoon \u{1}before\u{2} the storm."),
];

async fn an_earlier_database_is_indexed_from_its_checkpoints(scratch: ScratchDatabase) {
    let storage = SqlStorage::connect(&scratch.database, StoreOptions::default())
        .await
        .unwrap();
    let earlier = migrations_before(storage.dialect(), "0018");
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
    for (channel, through, text) in CHECKPOINTS {
        sqlx::query(
            "INSERT INTO channel_snapshots (channel_id, epoch, generation, through_sequence, \
             revision, canonical_text, source_hash, state, created_at) \
             VALUES ($1, 1, 1, $2, $2, $3, 'h', $4, 1)",
        )
        .bind(*channel)
        .bind(*through)
        .bind(*text)
        .bind(vec![0_u8])
        .execute(storage.pool())
        .await
        .unwrap();
    }
    let status = storage.migrate().await.unwrap();
    assert!(status.pending.is_empty());
    assert!(
        status
            .applied
            .contains(&"0018_document_search.sql".to_owned())
    );

    let search = |text: &str| {
        let storage = storage.clone();
        let query = SearchQuery {
            reader: UserId("u-ann".to_owned()),
            terms: SearchTerms::parse(text).unwrap(),
            repository: None,
            include_archived: false,
            after: None,
            limit: 10,
        };
        async move {
            let hits = storage.search().search(&query).await.unwrap();
            hits.into_iter().map(|hit| hit.id.0).collect::<Vec<_>>()
        }
    };
    assert_eq!(search("harbor dawn").await, ["c-1"]);
    assert_eq!(search("lagoon storm").await, ["c-2"]);
    assert_eq!(search("before").await, ["c-2"], "the markers became spaces");
    assert_eq!(search("atoll").await, ["c-3"]);
    assert_eq!(search("reef").await, ["c-4"]);
    let marked = storage
        .search()
        .search(&SearchQuery {
            reader: UserId("u-ann".to_owned()),
            terms: SearchTerms::parse("storm").unwrap(),
            repository: None,
            include_archived: false,
            after: None,
            limit: 10,
        })
        .await
        .unwrap();
    assert!(
        marked[0]
            .snippet
            .iter()
            .all(|part| part.matched == (part.text == "storm")),
        "{:?}",
        marked[0].snippet
    );

    // The documents whose text may be behind their journal are listed, and stay listed until
    // their text is refreshed at their revision.
    let stale = storage.search().stale_texts(None, 10).await.unwrap();
    assert_eq!(
        stale,
        [ChannelId("c-2".to_owned()), ChannelId("c-4".to_owned())]
    );
    let fence = match storage
        .leases()
        .acquire(
            &LeaseName::WRITER,
            "upgrade-test",
            std::time::Duration::from_secs(60),
        )
        .await
        .unwrap()
    {
        Acquisition::Granted(lease) => lease.fence(),
        Acquisition::Held(record) => panic!("the lease is held by {}", record.holder),
    };
    assert!(
        storage
            .search()
            .refresh_text(
                &fence,
                &ChannelId("c-2".to_owned()),
                3,
                "The lagoon after the storm."
            )
            .await
            .unwrap()
    );
    assert_eq!(
        storage.search().stale_texts(None, 10).await.unwrap(),
        [ChannelId("c-4".to_owned())]
    );
    assert_eq!(search("after").await, ["c-2"]);
    assert!(search("before").await.is_empty());

    if storage.dialect() == Dialect::Sqlite {
        sqlx::query(
            "INSERT INTO document_search_index (document_search_index, rank) \
             VALUES ('integrity-check', 1)",
        )
        .execute(storage.pool())
        .await
        .expect("the FTS5 index agrees with its rows");
    }
}

#[tokio::test]
async fn sqlite_an_earlier_database_is_indexed_from_its_checkpoints() {
    an_earlier_database_is_indexed_from_its_checkpoints(ScratchDatabase::sqlite()).await;
}

#[tokio::test]
async fn postgres_an_earlier_database_is_indexed_from_its_checkpoints() {
    an_earlier_database_is_indexed_from_its_checkpoints(ScratchDatabase::postgres().await).await;
}

/// On SQLite, the FTS5 index follows its rows through commits, renames, epoch replacements and
/// deletions: its integrity check compares it with them.
#[tokio::test]
async fn sqlite_the_index_agrees_with_its_rows_after_every_kind_of_write() {
    use fermata_store::{Commit, NewCheckpoint, OperationId};
    use fermata_store_testkit::contract::create_document;

    let store = ScratchDatabase::sqlite()
        .open(StoreOptions::default())
        .await;
    let fence = match store
        .leases()
        .acquire(
            &LeaseName::WRITER,
            "index-test",
            std::time::Duration::from_secs(60),
        )
        .await
        .unwrap()
    {
        Acquisition::Granted(lease) => lease.fence(),
        Acquisition::Held(record) => panic!("the lease is held by {}", record.holder),
    };
    let collaboration = store.collaboration();
    for n in 0..5 {
        let channel = create_document(collaboration, &fence, &format!("Doc {n}")).await;
        let mut revision = channel.revision;
        for (round, text) in ["one two", "two three", "three four"].iter().enumerate() {
            let committed = collaboration
                .commit(
                    &fence,
                    &Commit {
                        channel: channel.id.clone(),
                        operation: OperationId::new(format!("op-{round}")).unwrap(),
                        expected_revision: revision,
                        update: Some(vec![1]),
                        sidecar: None,
                        events: Vec::new(),
                        title: (round == 1).then(|| format!("Renamed {n}")),
                        text: Some(format!("{text} {n}")),
                    },
                )
                .await
                .unwrap();
            revision = committed.revision;
        }
        if n % 2 == 0 {
            collaboration
                .replace_epoch(
                    &fence,
                    &channel.id,
                    revision,
                    &NewCheckpoint {
                        epoch: channel.epoch + 1,
                        through_sequence: 0,
                        revision: 0,
                        canonical_text: "replaced".to_owned(),
                        source_hash: "h".to_owned(),
                        state: vec![2],
                        sidecar: None,
                    },
                )
                .await
                .unwrap();
        }
        if n % 3 == 0 {
            collaboration.archive(&fence, &channel.id).await.unwrap();
            collaboration
                .delete_archived(&fence, &channel.id)
                .await
                .unwrap();
        }
    }
    sqlx::query(
        "INSERT INTO document_search_index (document_search_index, rank) \
         VALUES ('integrity-check', 1)",
    )
    .execute(store.storage.pool())
    .await
    .expect("the FTS5 index agrees with its rows");
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM document_search")
        .fetch_one(store.storage.pool())
        .await
        .unwrap();
    assert_eq!(rows, 3, "the deleted documents' rows went with them");
}
