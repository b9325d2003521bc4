//! The image and attachment tables hold their rules even against statements from outside the
//! stores: only the listed types (never HTML or SVG), a size that is the length of the bytes, a
//! message named whole or not at all, and an original's size only for an image. On SQLite and
//! PostgreSQL alike.

use std::time::Duration;

use fermata_store::{
    Acquisition, ChannelId, LeaseName, NewChannel, Repository, Storage, StoreOptions,
};
use fermata_store_sql::testing::{ScratchDatabase, ScratchStorage};

async fn document(store: &ScratchStorage) -> ChannelId {
    let name = LeaseName::new("fermata:writer").unwrap();
    let Acquisition::Granted(lease) = store
        .leases()
        .acquire(&name, "test", Duration::from_secs(300))
        .await
        .unwrap()
    else {
        panic!("the lease is free in a new database");
    };
    let id = ChannelId::random();
    store
        .collaboration()
        .create_channel(
            &lease.fence(),
            &NewChannel {
                id: id.clone(),
                repository: Repository::new("acme/app").unwrap(),
                title: "Plan".to_owned(),
                parent: None,
            },
        )
        .await
        .unwrap();
    id
}

async fn image(store: &ScratchStorage, channel: &ChannelId, image_type: &str, size: i64) -> bool {
    sqlx::query(
        "INSERT INTO plan_images (channel_id, sha256, image_type, bytes, size, stored_by, stored_at) \
         VALUES ($1, $2, $3, $4, $5, 'test', 0)",
    )
    .bind(channel.0.clone())
    .bind(format!("{size:064}"))
    .bind(image_type.to_owned())
    .bind(b"1234".to_vec())
    .bind(size)
    .execute(store.storage.pool())
    .await
    .is_ok()
}

async fn attachment(
    store: &ScratchStorage,
    channel: &ChannelId,
    attachment_type: &str,
    size: i64,
    original: Option<i64>,
    request_id: Option<&str>,
    place: Option<i64>,
) -> bool {
    sqlx::query(
        "INSERT INTO chat_attachments (id, channel_id, bytes, attachment_type, name, size, \
             original_size, original_width, original_height, uploaded_by, uploaded_at, \
             message_request_id, message_place) \
         VALUES ($1, $2, $3, $4, 'f', $5, $6, $6, $6, 'alice', 0, $7, $8)",
    )
    // Any unique text serves as the ID here.
    .bind(ChannelId::random().0)
    .bind(channel.0.clone())
    .bind(b"1234".to_vec())
    .bind(attachment_type.to_owned())
    .bind(size)
    .bind(original)
    .bind(request_id.map(str::to_owned))
    .bind(place)
    .execute(store.storage.pool())
    .await
    .is_ok()
}

async fn tables_refuse_rows_outside_their_rules(scratch: ScratchDatabase) {
    let store = scratch.open(StoreOptions::default()).await;
    let channel = document(&store).await;

    for listed in ["png", "jpeg", "webp", "gif", "avif", "bmp", "ico"] {
        assert!(
            image(&store, &channel, listed, 4).await,
            "{listed} was refused"
        );
        sqlx::query("DELETE FROM plan_images")
            .execute(store.storage.pool())
            .await
            .unwrap();
    }
    for unlisted in ["svg", "html", "text", "tiff", "PNG"] {
        assert!(
            !image(&store, &channel, unlisted, 4).await,
            "{unlisted} was stored"
        );
    }
    assert!(
        !image(&store, &channel, "png", 5).await,
        "a size that is not the length"
    );

    for listed in ["png", "jpeg", "webp", "gif", "text"] {
        assert!(
            attachment(&store, &channel, listed, 4, None, None, None).await,
            "{listed} was refused"
        );
    }
    for unlisted in ["svg", "html", "avif", "bmp", "ico"] {
        assert!(
            !attachment(&store, &channel, unlisted, 4, None, None, None).await,
            "{unlisted} was stored"
        );
    }
    assert!(!attachment(&store, &channel, "png", 3, None, None, None).await);
    assert!(attachment(&store, &channel, "png", 4, Some(10), None, None).await);
    assert!(
        !attachment(&store, &channel, "text", 4, Some(10), None, None).await,
        "text is never a smaller copy"
    );
    assert!(!attachment(&store, &channel, "png", 4, Some(0), None, None).await);
    assert!(!attachment(&store, &channel, "png", 4, None, Some("req"), None).await);
    assert!(!attachment(&store, &channel, "png", 4, None, None, Some(0)).await);
    assert!(attachment(&store, &channel, "png", 4, None, Some("req"), Some(0)).await);
    assert!(
        !attachment(&store, &channel, "gif", 4, None, Some("req"), Some(0)).await,
        "two files at one place of a message"
    );
    // Not a document: the foreign key refuses it.
    assert!(!image(&store, &ChannelId::random(), "png", 4).await);
}

#[tokio::test]
async fn sqlite_tables_refuse_rows_outside_their_rules() {
    tables_refuse_rows_outside_their_rules(ScratchDatabase::sqlite()).await;
}

#[tokio::test]
async fn postgres_tables_refuse_rows_outside_their_rules() {
    tables_refuse_rows_outside_their_rules(ScratchDatabase::postgres().await).await;
}
