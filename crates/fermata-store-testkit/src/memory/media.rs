//! The memory adapter's image and attachment stores (`plan_images`, `chat_attachments`).

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;

use super::{MemoryStorage, remove_where};
use fermata_store::attachments::{
    AttachmentId, AttachmentInfo, AttachmentStore, MessagePlace, MessageRequestId, NewAttachment,
    SendPlan, StoredAttachment, plan_send, sweep_cutoff, visible_to,
};
use fermata_store::channel::ChannelId;
use fermata_store::error::{StoreError, StoreResult};
use fermata_store::images::{ImageHash, ImageInfo, ImageStore, ImageStored, NewImage, StoredImage};
use fermata_store::lease::Fence;
use fermata_store::user::UserId;

/// The rows of both tables.
#[derive(Debug, Default)]
pub(super) struct Media {
    images: BTreeMap<(ChannelId, ImageHash), StoredImage>,
    attachments: BTreeMap<AttachmentId, StoredAttachment>,
}

impl Media {
    /// Removes a deleted document's rows, as the foreign keys' cascade does.
    pub(super) fn forget_channel(&mut self, id: &ChannelId) {
        self.images.retain(|(channel, _), _| channel != id);
        self.attachments.retain(|_, file| &file.info.channel != id);
    }

    fn of_message(
        &self,
        channel: &ChannelId,
        request_id: &MessageRequestId,
    ) -> Vec<AttachmentInfo> {
        let mut files: Vec<AttachmentInfo> = self
            .attachments
            .values()
            .filter(|file| {
                &file.info.channel == channel
                    && file
                        .info
                        .message
                        .as_ref()
                        .is_some_and(|at| &at.request_id == request_id)
            })
            .map(|file| file.info.clone())
            .collect();
        files.sort_by_key(|file| file.message.as_ref().map(|at| at.place));
        files
    }
}

#[async_trait]
impl ImageStore for MemoryStorage {
    async fn store(&self, fence: &Fence, image: &NewImage) -> StoreResult<ImageStored> {
        self.inner
            .fenced(fence, |state, now| {
                state.documents.require(image.channel())?;
                let key = (image.channel().clone(), image.sha256().clone());
                if let Some(existing) = state.media.images.get(&key) {
                    return Ok(ImageStored {
                        info: existing.info.clone(),
                        created: false,
                    });
                }
                let info = ImageInfo {
                    channel: image.channel().clone(),
                    sha256: image.sha256().clone(),
                    image_type: image.image_type(),
                    size: image.size(),
                    stored_by: image.stored_by().to_owned(),
                    stored_at: now,
                };
                state.media.images.insert(
                    key,
                    StoredImage {
                        info: info.clone(),
                        bytes: image.bytes().to_vec(),
                    },
                );
                Ok(ImageStored {
                    info,
                    created: true,
                })
            })
            .await
    }

    async fn image(
        &self,
        channel: &ChannelId,
        sha256: &ImageHash,
    ) -> StoreResult<Option<StoredImage>> {
        let state = self.inner.state();
        Ok(state
            .media
            .images
            .get(&(channel.clone(), sha256.clone()))
            .cloned())
    }

    async fn images_of(&self, channel: &ChannelId) -> StoreResult<Vec<ImageInfo>> {
        let state = self.inner.state();
        let mut images: Vec<ImageInfo> = state
            .media
            .images
            .iter()
            .filter(|((owner, _), _)| owner == channel)
            .map(|(_, image)| image.info.clone())
            .collect();
        images.sort_by(|a, b| (a.stored_at, &a.sha256).cmp(&(b.stored_at, &b.sha256)));
        Ok(images)
    }
}

#[async_trait]
impl AttachmentStore for MemoryStorage {
    async fn upload(
        &self,
        fence: &Fence,
        attachment: &NewAttachment,
    ) -> StoreResult<AttachmentInfo> {
        self.inner
            .fenced(fence, |state, now| {
                state.documents.require(attachment.channel())?;
                if state.media.attachments.contains_key(attachment.id()) {
                    return Err(StoreError::conflict(format!(
                        "attachment {} already exists",
                        attachment.id()
                    )));
                }
                let info = attachment.info(now);
                state.media.attachments.insert(
                    attachment.id().clone(),
                    StoredAttachment {
                        info: info.clone(),
                        bytes: attachment.bytes().to_vec(),
                    },
                );
                Ok(info)
            })
            .await
    }

    async fn attachment(
        &self,
        id: &AttachmentId,
        reader: &UserId,
    ) -> StoreResult<Option<StoredAttachment>> {
        let state = self.inner.state();
        Ok(state
            .media
            .attachments
            .get(id)
            .filter(|file| visible_to(&file.info, reader))
            .cloned())
    }

    async fn send(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        sender: &UserId,
        request_id: &MessageRequestId,
        attachments: &[AttachmentId],
    ) -> StoreResult<Vec<AttachmentInfo>> {
        self.inner
            .fenced(fence, |state, _now| {
                state.documents.require(channel)?;
                let media = &mut state.media;
                let found: Vec<Option<AttachmentInfo>> = attachments
                    .iter()
                    .map(|id| media.attachments.get(id).map(|file| file.info.clone()))
                    .collect();
                let existing = media.of_message(channel, request_id).len();
                if plan_send(channel, sender, request_id, attachments, &found, existing)?
                    == SendPlan::Attach
                {
                    for (place, id) in (0_i64..).zip(attachments) {
                        if let Some(file) = media.attachments.get_mut(id) {
                            file.info.message = Some(MessagePlace {
                                request_id: request_id.clone(),
                                place,
                            });
                        }
                    }
                }
                Ok(media.of_message(channel, request_id))
            })
            .await
    }

    async fn of_message(
        &self,
        channel: &ChannelId,
        request_id: &MessageRequestId,
    ) -> StoreResult<Vec<AttachmentInfo>> {
        Ok(self.inner.state().media.of_message(channel, request_id))
    }

    async fn delete_message(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        request_id: &MessageRequestId,
    ) -> StoreResult<u64> {
        self.inner
            .fenced(fence, |state, _now| {
                Ok(remove_where(&mut state.media.attachments, |_, file| {
                    &file.info.channel == channel
                        && file
                            .info
                            .message
                            .as_ref()
                            .is_some_and(|at| &at.request_id == request_id)
                }))
            })
            .await
    }

    async fn sweep_unsent(&self, fence: &Fence, older_than: Duration) -> StoreResult<u64> {
        self.inner
            .fenced(fence, |state, now| {
                let cutoff = sweep_cutoff(now, older_than);
                Ok(remove_where(&mut state.media.attachments, |_, file| {
                    file.info.message.is_none() && file.info.uploaded_at <= cutoff
                }))
            })
            .await
    }
}
