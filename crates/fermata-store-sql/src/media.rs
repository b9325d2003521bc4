//! The SQL image and attachment stores (`plan_images`, `chat_attachments`, migration `0010`).
//!
//! Every write is one fenced transaction. Storing an image is an insert that does nothing when
//! the document already holds those bytes; sending files locks their rows (`FOR UPDATE` on
//! PostgreSQL; SQLite's `BEGIN IMMEDIATE` holds the write lock) before the port's
//! [`plan_send`] checks them, and the unique place of a file in its message refuses a racing
//! send the check could not see.

use std::time::Duration;

use async_trait::async_trait;
use fermata_store::attachments::{SendPlan, plan_send, sweep_cutoff, visible_to};
use fermata_store::{
    AttachmentId, AttachmentInfo, AttachmentStore, AttachmentType, ChannelId, Fence, ImageHash,
    ImageInfo, ImageStore, ImageStored, ImageType, MessagePlace, MessageRequestId, NewAttachment,
    NewImage, OriginalFile, StoreError, StoreResult, StoreResultExt, StoredAttachment, StoredImage,
    UserId,
};
use sqlx::AnyConnection;
use sqlx::any::AnyRow;

use crate::SqlStorage;
use crate::dialect::Dialect;
use crate::error::StoreContext;
use crate::row::{column, instant};

/// The columns of an image's row, without its bytes.
const IMAGE_COLUMNS: &str = "channel_id, sha256, image_type, size, stored_by, stored_at";
/// The columns of an attachment's row, without its bytes.
const ATTACHMENT_COLUMNS: &str = "id, channel_id, attachment_type, name, size, original_size, \
     original_width, original_height, uploaded_by, uploaded_at, message_request_id, message_place";

/// The image and attachment statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    insert_image: String,
    image_info: String,
    image: String,
    images_of: String,
    insert_attachment: String,
    attachment: String,
    lock_attachment: String,
    of_message: String,
    attach: String,
    delete_message: String,
    sweep_unsent: String,
}

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        Statements {
            insert_image: dialect.render(
                "INSERT INTO plan_images (channel_id, sha256, image_type, bytes, size, stored_by, stored_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (channel_id, sha256) DO NOTHING",
            ),
            image_info: dialect.render(&format!(
                "SELECT {IMAGE_COLUMNS} FROM plan_images WHERE channel_id = $1 AND sha256 = $2"
            )),
            image: dialect.render(&format!(
                "SELECT {IMAGE_COLUMNS}, bytes FROM plan_images WHERE channel_id = $1 AND sha256 = $2"
            )),
            images_of: dialect.render(&format!(
                "SELECT {IMAGE_COLUMNS} FROM plan_images WHERE channel_id = $1 \
                 ORDER BY stored_at, sha256"
            )),
            insert_attachment: dialect.render(
                "INSERT INTO chat_attachments (id, channel_id, bytes, attachment_type, name, size, \
                     original_size, original_width, original_height, uploaded_by, uploaded_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            ),
            attachment: dialect.render(&format!(
                "SELECT {ATTACHMENT_COLUMNS}, bytes FROM chat_attachments WHERE id = $1"
            )),
            lock_attachment: dialect.render(&format!(
                "SELECT {ATTACHMENT_COLUMNS} FROM chat_attachments WHERE id = $1{{for_update}}"
            )),
            of_message: dialect.render(&format!(
                "SELECT {ATTACHMENT_COLUMNS} FROM chat_attachments \
                 WHERE channel_id = $1 AND message_request_id = $2 ORDER BY message_place"
            )),
            attach: dialect.render(
                "UPDATE chat_attachments SET message_request_id = $2, message_place = $3 \
                 WHERE id = $1 AND message_request_id IS NULL",
            ),
            delete_message: dialect.render(
                "DELETE FROM chat_attachments WHERE channel_id = $1 AND message_request_id = $2",
            ),
            sweep_unsent: dialect.render(
                "DELETE FROM chat_attachments WHERE message_request_id IS NULL AND uploaded_at <= $1",
            ),
        }
    }
}

fn image_info_from(row: &AnyRow, action: &str) -> StoreResult<ImageInfo> {
    Ok(ImageInfo {
        channel: ChannelId(column(row, 0, action)?),
        sha256: ImageHash::parse(&column::<String>(row, 1, action)?)
            .or_corrupt(format!("{action}: a stored image hash is malformed"))?,
        image_type: ImageType::from_stored(&column::<String>(row, 2, action)?)?,
        size: column(row, 3, action)?,
        stored_by: column(row, 4, action)?,
        stored_at: instant(row, 5, action)?,
    })
}

fn attachment_info_from(row: &AnyRow, action: &str) -> StoreResult<AttachmentInfo> {
    let original = match (
        column::<Option<i64>>(row, 5, action)?,
        column::<Option<i64>>(row, 6, action)?,
        column::<Option<i64>>(row, 7, action)?,
    ) {
        (Some(size), Some(width), Some(height)) => Some(OriginalFile {
            size,
            width,
            height,
        }),
        (None, None, None) => None,
        _ => {
            return Err(StoreError::corrupt(format!(
                "{action}: an attachment's original size is partly recorded"
            )));
        }
    };
    let message = match (
        column::<Option<String>>(row, 10, action)?,
        column::<Option<i64>>(row, 11, action)?,
    ) {
        (Some(request_id), Some(place)) => Some(MessagePlace {
            request_id: MessageRequestId::new(request_id).or_corrupt(format!(
                "{action}: a stored message request ID is malformed"
            ))?,
            place,
        }),
        (None, None) => None,
        _ => {
            return Err(StoreError::corrupt(format!(
                "{action}: an attachment's message is partly recorded"
            )));
        }
    };
    Ok(AttachmentInfo {
        id: AttachmentId(column(row, 0, action)?),
        channel: ChannelId(column(row, 1, action)?),
        attachment_type: AttachmentType::from_stored(&column::<String>(row, 2, action)?)?,
        name: column(row, 3, action)?,
        size: column(row, 4, action)?,
        original,
        uploaded_by: UserId(column(row, 8, action)?),
        uploaded_at: instant(row, 9, action)?,
        message,
    })
}

impl SqlStorage {
    fn media_sql(&self) -> &Statements {
        &self.inner.media_sql
    }

    async fn files_of_message(
        &self,
        conn: &mut AnyConnection,
        channel: &ChannelId,
        request_id: &MessageRequestId,
        action: &str,
    ) -> StoreResult<Vec<AttachmentInfo>> {
        let rows = sqlx::query(&self.media_sql().of_message)
            .bind(&channel.0)
            .bind(request_id.as_str())
            .fetch_all(conn)
            .await
            .context(action)?;
        rows.iter()
            .map(|row| attachment_info_from(row, action))
            .collect()
    }
}

#[async_trait]
impl ImageStore for SqlStorage {
    async fn store(&self, fence: &Fence, image: &NewImage) -> StoreResult<ImageStored> {
        let action = "storing an image";
        let sql = self.media_sql();
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        self.require_document(tx.conn(), image.channel(), action)
            .await?;
        let inserted = tx
            .execute(
                sqlx::query(&sql.insert_image)
                    .bind(&image.channel().0)
                    .bind(image.sha256().as_str())
                    .bind(image.image_type().as_str())
                    .bind(image.bytes().to_vec())
                    .bind(image.size())
                    .bind(image.stored_by())
                    .bind(tx.now.0),
                action,
            )
            .await?;
        let row = sqlx::query(&sql.image_info)
            .bind(&image.channel().0)
            .bind(image.sha256().as_str())
            .fetch_one(tx.conn())
            .await
            .context(action)?;
        let info = image_info_from(&row, action)?;
        tx.commit(action).await?;
        Ok(ImageStored {
            info,
            created: inserted == 1,
        })
    }

    async fn image(
        &self,
        channel: &ChannelId,
        sha256: &ImageHash,
    ) -> StoreResult<Option<StoredImage>> {
        let action = "reading an image";
        let row = sqlx::query(&self.media_sql().image)
            .bind(&channel.0)
            .bind(sha256.as_str())
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?;
        row.map(|row| {
            Ok(StoredImage {
                info: image_info_from(&row, action)?,
                bytes: column(&row, 6, action)?,
            })
        })
        .transpose()
    }

    async fn images_of(&self, channel: &ChannelId) -> StoreResult<Vec<ImageInfo>> {
        let action = "listing a document's images";
        let rows = sqlx::query(&self.media_sql().images_of)
            .bind(&channel.0)
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        rows.iter()
            .map(|row| image_info_from(row, action))
            .collect()
    }
}

#[async_trait]
impl AttachmentStore for SqlStorage {
    async fn upload(
        &self,
        fence: &Fence,
        attachment: &NewAttachment,
    ) -> StoreResult<AttachmentInfo> {
        let action = "storing an attachment";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        self.require_document(tx.conn(), attachment.channel(), action)
            .await?;
        let original = attachment.original();
        tx.execute(
            sqlx::query(&self.media_sql().insert_attachment)
                .bind(&attachment.id().0)
                .bind(&attachment.channel().0)
                .bind(attachment.bytes().to_vec())
                .bind(attachment.attachment_type().as_str())
                .bind(attachment.name())
                .bind(attachment.size())
                .bind(original.map(|o| o.size))
                .bind(original.map(|o| o.width))
                .bind(original.map(|o| o.height))
                .bind(&attachment.uploaded_by().0)
                .bind(tx.now.0),
            action,
        )
        .await?;
        let info = attachment.info(tx.now);
        tx.commit(action).await?;
        Ok(info)
    }

    async fn attachment(
        &self,
        id: &AttachmentId,
        reader: &UserId,
    ) -> StoreResult<Option<StoredAttachment>> {
        let action = "reading an attachment";
        let row = sqlx::query(&self.media_sql().attachment)
            .bind(&id.0)
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?;
        let Some(row) = row else { return Ok(None) };
        let info = attachment_info_from(&row, action)?;
        if !visible_to(&info, reader) {
            return Ok(None);
        }
        Ok(Some(StoredAttachment {
            info,
            bytes: column(&row, 12, action)?,
        }))
    }

    async fn send(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        sender: &UserId,
        request_id: &MessageRequestId,
        attachments: &[AttachmentId],
    ) -> StoreResult<Vec<AttachmentInfo>> {
        let action = "sending attachments";
        let sql = self.media_sql();
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        self.require_document(tx.conn(), channel, action).await?;
        let mut found = Vec::with_capacity(attachments.len());
        for id in attachments {
            let row = sqlx::query(&sql.lock_attachment)
                .bind(&id.0)
                .fetch_optional(tx.conn())
                .await
                .context(action)?;
            found.push(
                row.map(|row| attachment_info_from(&row, action))
                    .transpose()?,
            );
        }
        let existing = self
            .files_of_message(tx.conn(), channel, request_id, action)
            .await?;
        let plan = plan_send(
            channel,
            sender,
            request_id,
            attachments,
            &found,
            existing.len(),
        )?;
        if plan == SendPlan::Repeat {
            return Ok(existing);
        }
        for (place, id) in (0_i64..).zip(attachments) {
            tx.execute(
                sqlx::query(&sql.attach)
                    .bind(&id.0)
                    .bind(request_id.as_str())
                    .bind(place),
                action,
            )
            .await?;
        }
        let sent = self
            .files_of_message(tx.conn(), channel, request_id, action)
            .await?;
        tx.commit(action).await?;
        Ok(sent)
    }

    async fn of_message(
        &self,
        channel: &ChannelId,
        request_id: &MessageRequestId,
    ) -> StoreResult<Vec<AttachmentInfo>> {
        let action = "listing a message's attachments";
        let mut conn = self.inner.pool.acquire().await.context(action)?;
        self.files_of_message(&mut conn, channel, request_id, action)
            .await
    }

    async fn delete_message(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        request_id: &MessageRequestId,
    ) -> StoreResult<u64> {
        let action = "removing a message's attachments";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let deleted = tx
            .execute(
                sqlx::query(&self.media_sql().delete_message)
                    .bind(&channel.0)
                    .bind(request_id.as_str()),
                action,
            )
            .await?;
        tx.commit(action).await?;
        Ok(deleted)
    }

    async fn sweep_unsent(&self, fence: &Fence, older_than: Duration) -> StoreResult<u64> {
        let action = "forgetting unsent attachments";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let cutoff = sweep_cutoff(tx.now, older_than);
        let deleted = tx
            .execute(
                sqlx::query(&self.media_sql().sweep_unsent).bind(cutoff.0),
                action,
            )
            .await?;
        tx.commit(action).await?;
        Ok(deleted)
    }
}
