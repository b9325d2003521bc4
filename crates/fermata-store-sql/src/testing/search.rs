//! Test seeding of a search row as the upgrade to migration `0018` leaves it: indexed from the
//! document's last checkpoint, possibly behind its journal.

use fermata_store::ChannelId;

use crate::SqlStorage;

/// Indexes `text` as document `id`'s and marks it possibly behind its journal.
pub async fn seed_stale_search_text(storage: &SqlStorage, id: &ChannelId, text: &str) {
    let dialect = storage.dialect();
    sqlx::query(&dialect.render("UPDATE document_search SET body = $2 WHERE channel_id = $1"))
        .bind(&id.0)
        .bind(text)
        .execute(storage.pool())
        .await
        .expect("seed a search row");
    sqlx::query(&dialect.render("UPDATE channels SET search_stale_since = {now} WHERE id = $1"))
        .bind(&id.0)
        .execute(storage.pool())
        .await
        .expect("mark the search row behind");
}
