//! The media service behind the HTTP API: a document's images and the files sent with Chat
//! messages. It ties `fermata-media` (what a file is, smaller copies, thumbnails) to the image
//! and attachment stores, under the writer fence.
//!
//! Every file is bounded twice. [`MediaSettings::max_input_bytes`] bounds what may be sent at
//! all: anything larger is refused before it is decoded. Within that, each source has the
//! limit of what may be stored (1 MiB for `upload_image`, `MAX_STORED_IMAGE_BYTES` for an image
//! a tool made, the attachment limit for a Chat file); an image over it is stored as a smaller
//! copy of itself, so the tables never hold anything larger. Decoding, copying and resizing
//! run on the media service's own decode threads (see `decode_threads`).
//!
//! Memory is bounded per request and in total. Each decode is held to its pixel budget
//! ([`DecodeLimits::max_alloc`], `max_decode_bytes`), which bounds what it costs besides its
//! file (see `fermata_media`'s decode module: under three budgets, about two for common images).
//! At most `decode_concurrency` decodes and thumbnails run at once; one that waits
//! `decode_queue_wait` for its turn is turned away as [`MediaFailure::Busy`]. The bodies of
//! uploads waiting or being decoded are bounded together by `upload_buffer_bytes`, reserved from
//! the size each declares before it is read.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fermata_media::{
    DecodeLimits, Fitted, Inspected, MediaError, MediaType, Served, Thumbnails, Width, fit,
    inspect_attachment, inspect_document_image,
};
use fermata_store::{
    AttachmentId, AttachmentInfo, AttachmentType, ChannelId, ImageHash, ImageInfo, ImageStored,
    ImageType, MessageRequestId, NewAttachment, NewImage, OriginalFile, Storage, StoreError,
    UserId,
};

use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};

use crate::decode_threads::DecodeThreads;
use crate::fence::WriterFence;

/// The limits of what is accepted and stored, and the thumbnail cache's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaSettings {
    /// Nothing larger is accepted from any source; it is refused before it is decoded.
    pub max_input_bytes: usize,
    /// The most an image uploaded with `upload_image` (the HTTP upload) is stored as.
    pub upload_image_bytes: usize,
    /// `MAX_STORED_IMAGE_BYTES`: the most an image a tool made is stored as.
    pub max_stored_image_bytes: usize,
    /// `CHAT_ATTACHMENT_MAX_BYTES`: the most a Chat attachment is stored as.
    pub attachment_bytes: usize,
    /// The bytes of thumbnails kept in memory.
    pub thumbnail_cache_bytes: usize,
    /// The pixel budget and dimensions of one decode (`max_decode_bytes`).
    pub decode: DecodeLimits,
    /// The most decodes (checks of an upload, smaller copies, thumbnails) running at once.
    pub decode_concurrency: usize,
    /// How long a decode waits for its turn before it is turned away.
    pub decode_queue_wait: Duration,
    /// The bytes of upload bodies held at once, while they are read, wait and are decoded; at
    /// least `max_input_bytes`.
    pub upload_buffer_bytes: usize,
}

impl Default for MediaSettings {
    fn default() -> Self {
        MediaSettings {
            max_input_bytes: 32 << 20,
            upload_image_bytes: 1 << 20,
            max_stored_image_bytes: 10 << 20,
            attachment_bytes: 5 << 20,
            thumbnail_cache_bytes: 64 << 20,
            decode: DecodeLimits::default(),
            decode_concurrency: default_decode_concurrency(),
            decode_queue_wait: Duration::from_secs(5),
            upload_buffer_bytes: 128 << 20,
        }
    }
}

/// One decode per core: decoding is CPU work, and more at once only adds memory.
pub fn default_decode_concurrency() -> usize {
    std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
}

/// Where a document's image comes from, which decides how large it may be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageSource {
    /// `upload_image`: a person's upload.
    Upload,
    /// An image a tool made.
    Tool,
}

/// Why a media request failed.
#[derive(Debug, thiserror::Error)]
pub enum MediaFailure {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Refused(#[from] MediaError),
    /// The blocking work panicked or was cancelled.
    #[error("the file could not be processed")]
    Interrupted,
    /// Every decode slot, or the upload buffer, stayed taken for the whole queue wait.
    #[error("the server is busy with other images; try again in a few seconds")]
    Busy { retry_after: Duration },
}

/// Bytes to serve and their type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedFile {
    pub bytes: Vec<u8>,
    pub media_type: MediaType,
}

/// A document's image as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredImageUpload {
    pub stored: ImageStored,
    /// Present when what was stored is a smaller copy of what was sent.
    pub original: Option<OriginalFile>,
}

/// The media service.
#[derive(Debug, Clone)]
pub struct Media {
    storage: Arc<dyn Storage>,
    fence: WriterFence,
    thumbnails: Arc<Thumbnails>,
    settings: MediaSettings,
    /// One permit per decode allowed at once.
    decodes: Arc<Semaphore>,
    /// One permit per byte of upload bodies allowed in memory at once.
    upload_buffer: Arc<Semaphore>,
    /// Decodes and uploads turned away after their whole queue wait, for metrics.
    turned_away: Arc<AtomicU64>,
    /// Where decodes run: one thread per turn.
    decoders: DecodeThreads,
}

/// Bytes of the upload buffer, held while an upload's body is read and handled.
#[derive(Debug)]
pub struct UploadReservation(#[allow(dead_code)] OwnedSemaphorePermit);

impl Media {
    pub fn new(storage: Arc<dyn Storage>, fence: WriterFence, settings: MediaSettings) -> Self {
        Media {
            storage,
            fence,
            thumbnails: Arc::new(Thumbnails::new(
                settings.thumbnail_cache_bytes,
                settings.decode,
            )),
            decodes: Arc::new(Semaphore::new(settings.decode_concurrency.max(1))),
            upload_buffer: Arc::new(Semaphore::new(
                settings
                    .upload_buffer_bytes
                    .max(settings.max_input_bytes)
                    .min(Semaphore::MAX_PERMITS),
            )),
            turned_away: Arc::new(AtomicU64::new(0)),
            decoders: DecodeThreads::start(settings.decode_concurrency),
            settings,
        }
    }

    /// Reserves room for an upload body of `declared` bytes (the input bound when it declares
    /// none, or more), waiting at most the queue wait.
    pub async fn reserve_upload(
        &self,
        declared: Option<usize>,
    ) -> Result<UploadReservation, MediaFailure> {
        let bytes = declared
            .unwrap_or(self.settings.max_input_bytes)
            .clamp(1, self.settings.max_input_bytes);
        let bytes = u32::try_from(bytes).unwrap_or(u32::MAX);
        self.queued(Arc::clone(&self.upload_buffer).acquire_many_owned(bytes))
            .await
            .map(UploadReservation)
    }

    /// Waits for `permit` for at most the queue wait.
    async fn queued(
        &self,
        permit: impl std::future::Future<Output = Result<OwnedSemaphorePermit, AcquireError>>,
    ) -> Result<OwnedSemaphorePermit, MediaFailure> {
        let wait = self.settings.decode_queue_wait;
        match tokio::time::timeout(wait, permit).await {
            Ok(Ok(permit)) => Ok(permit),
            // The semaphores are never closed.
            Ok(Err(_)) => Err(MediaFailure::Interrupted),
            Err(_) => {
                self.turned_away.fetch_add(1, Ordering::Relaxed);
                Err(MediaFailure::Busy {
                    retry_after: wait.max(Duration::from_secs(1)),
                })
            }
        }
    }

    /// How many decodes and uploads were turned away after waiting their whole queue time.
    pub fn turned_away(&self) -> u64 {
        self.turned_away.load(Ordering::Relaxed)
    }

    /// A turn to decode, waiting at most the queue wait.
    async fn decode_turn(&self) -> Result<OwnedSemaphorePermit, MediaFailure> {
        self.queued(Arc::clone(&self.decodes).acquire_owned()).await
    }

    pub fn settings(&self) -> &MediaSettings {
        &self.settings
    }

    /// The thumbnail cache, for its statistics.
    pub fn thumbnails(&self) -> &Thumbnails {
        &self.thumbnails
    }

    /// Stores an image in a document: its type sniffed from the bytes, decoded under limits,
    /// made smaller when over its source's limit; once per document and hash.
    pub async fn store_image(
        &self,
        channel: &ChannelId,
        source: ImageSource,
        stored_by: String,
        bytes: Vec<u8>,
    ) -> Result<StoredImageUpload, MediaFailure> {
        let limit = match source {
            ImageSource::Upload => self.settings.upload_image_bytes,
            ImageSource::Tool => self.settings.max_stored_image_bytes,
        };
        self.require_document(channel).await?;
        let fitted = self.accept(bytes, limit, inspect_document_image).await?;
        let image_type = image_type(fitted.media_type)?;
        let image = NewImage::new(channel.clone(), image_type, fitted.bytes, stored_by)?;
        let fence = self.fence.current()?;
        let stored = self.storage.images().store(&fence, &image).await?;
        Ok(StoredImageUpload {
            stored,
            original: fitted.original.map(original_file),
        })
    }

    /// A document's image, whole or at `width`.
    pub async fn image(
        &self,
        channel: &ChannelId,
        sha256: &ImageHash,
        width: Option<Width>,
    ) -> Result<Option<ServedFile>, MediaFailure> {
        let key = format!("image:{channel}:{sha256}");
        // A thumbnail already made needs only the document to still exist (its images go with
        // it), not the stored bytes.
        if let Some(thumbnail) = width.and_then(|width| self.thumbnails.cached(&key, width)) {
            if self
                .storage
                .collaboration()
                .channel(channel)
                .await?
                .is_none()
            {
                return Ok(None);
            }
            return Ok(Some(ServedFile {
                bytes: thumbnail.bytes.clone(),
                media_type: thumbnail.media_type,
            }));
        }
        let Some(image) = self.storage.images().image(channel, sha256).await? else {
            return Ok(None);
        };
        let media_type = media_type_of_image(image.info.image_type);
        self.serve(key, image.bytes, media_type, width)
            .await
            .map(Some)
    }

    /// A document's images, oldest first, without their bytes.
    pub async fn images_of(&self, channel: &ChannelId) -> Result<Vec<ImageInfo>, StoreError> {
        self.storage.images().images_of(channel).await
    }

    /// Uploads a Chat file. `original` is what the sender's file was where the browser made
    /// the copy; where this server makes it, its own record of the original replaces it.
    pub async fn upload_attachment(
        &self,
        channel: &ChannelId,
        uploader: &UserId,
        name: String,
        bytes: Vec<u8>,
        original: Option<OriginalFile>,
    ) -> Result<AttachmentInfo, MediaFailure> {
        self.require_document(channel).await?;
        let fitted = self
            .accept(bytes, self.settings.attachment_bytes, inspect_attachment)
            .await?;
        let attachment_type = attachment_type(fitted.media_type)?;
        let original = fitted.original.map(original_file).or(original);
        let file = NewAttachment::new(
            channel.clone(),
            attachment_type,
            name,
            fitted.bytes,
            uploader.clone(),
            original,
        )?;
        let fence = self.fence.current()?;
        Ok(self.storage.attachments().upload(&fence, &file).await?)
    }

    /// A Chat file as `reader` may see it, an image whole or at `width` (text is always whole).
    /// Absent when it is not in `channel` or `reader` may not read it yet.
    pub async fn attachment(
        &self,
        channel: &ChannelId,
        id: &AttachmentId,
        reader: &UserId,
        width: Option<Width>,
    ) -> Result<Option<(AttachmentInfo, ServedFile)>, MediaFailure> {
        let Some(file) = self.storage.attachments().attachment(id, reader).await? else {
            return Ok(None);
        };
        if &file.info.channel != channel {
            return Ok(None);
        }
        let media_type = media_type_of_attachment(file.info.attachment_type);
        let key = format!("attachment:{id}");
        let served = self.serve(key, file.bytes, media_type, width).await?;
        Ok(Some((file.info, served)))
    }

    /// Attaches the sender's uploaded files to a message, in order, once.
    pub async fn send(
        &self,
        channel: &ChannelId,
        sender: &UserId,
        request_id: &MessageRequestId,
        attachments: &[AttachmentId],
    ) -> Result<Vec<AttachmentInfo>, StoreError> {
        let fence = self.fence.current()?;
        self.storage
            .attachments()
            .send(&fence, channel, sender, request_id, attachments)
            .await
    }

    /// The files sent with a message.
    pub async fn of_message(
        &self,
        channel: &ChannelId,
        request_id: &MessageRequestId,
    ) -> Result<Vec<AttachmentInfo>, StoreError> {
        self.storage
            .attachments()
            .of_message(channel, request_id)
            .await
    }

    /// Removes the files of a deleted message.
    pub async fn delete_message(
        &self,
        channel: &ChannelId,
        request_id: &MessageRequestId,
    ) -> Result<u64, StoreError> {
        let fence = self.fence.current()?;
        self.storage
            .attachments()
            .delete_message(&fence, channel, request_id)
            .await
    }

    /// Refuses a file for a document that does not exist before any work on it (the store
    /// checks again when it writes).
    async fn require_document(&self, channel: &ChannelId) -> Result<(), StoreError> {
        match self.storage.collaboration().channel(channel).await? {
            Some(_) => Ok(()),
            None => Err(StoreError::missing(format!(
                "document {channel} is unavailable"
            ))),
        }
    }

    /// Checks what `bytes` are and fits them in `store_limit`, refusing anything over the
    /// input bound before it is decoded.
    async fn accept(
        &self,
        bytes: Vec<u8>,
        store_limit: usize,
        inspect: fn(&[u8], DecodeLimits) -> Result<Inspected, MediaError>,
    ) -> Result<Fitted, MediaFailure> {
        if bytes.len() > self.settings.max_input_bytes {
            return Err(MediaError::TooLarge {
                size: bytes.len(),
                limit: self.settings.max_input_bytes,
            }
            .into());
        }
        let limits = self.settings.decode;
        let turn = self.decode_turn().await?;
        let fitted = self
            .decoders
            .run(move || {
                // The turn is held by the work itself: a request that goes away does not free it
                // while its decode still runs.
                let _turn = turn;
                let inspected = inspect(&bytes, limits)?;
                fit(bytes, inspected, store_limit, limits)
            })
            .await
            // Dropped on purpose: the decode pool says only that the work did not finish.
            .map_err(|_| MediaFailure::Interrupted)??;
        Ok(fitted)
    }

    async fn serve(
        &self,
        key: String,
        bytes: Vec<u8>,
        media_type: MediaType,
        width: Option<Width>,
    ) -> Result<ServedFile, MediaFailure> {
        let original = move |bytes| ServedFile { bytes, media_type };
        let Some(width) = width else {
            return Ok(original(bytes));
        };
        if !media_type.is_resizable() {
            return Ok(original(bytes));
        }
        if let Some(thumbnail) = self.thumbnails.cached(&key, width) {
            return Ok(ServedFile {
                bytes: thumbnail.bytes.clone(),
                media_type: thumbnail.media_type,
            });
        }
        let thumbnails = Arc::clone(&self.thumbnails);
        let turn = self.decode_turn().await?;
        self.decoders
            .run(move || {
                let _turn = turn;
                match thumbnails.serve(&key, &bytes, media_type, width)? {
                    Served::Original => Ok(original(bytes)),
                    Served::Thumbnail(thumbnail) => Ok(ServedFile {
                        bytes: thumbnail.bytes.clone(),
                        media_type: thumbnail.media_type,
                    }),
                }
            })
            .await
            // Dropped on purpose: the decode pool says only that the work did not finish.
            .map_err(|_| MediaFailure::Interrupted)?
    }
}

/// What a file was before this server stored a smaller copy of it, as the stores keep it.
fn original_file(made: fermata_media::Original) -> OriginalFile {
    OriginalFile {
        size: i64::try_from(made.size).unwrap_or(i64::MAX),
        width: i64::from(made.width),
        height: i64::from(made.height),
    }
}

fn image_type(media_type: MediaType) -> Result<ImageType, MediaFailure> {
    Ok(match media_type {
        MediaType::Png => ImageType::Png,
        MediaType::Jpeg => ImageType::Jpeg,
        MediaType::Webp => ImageType::Webp,
        MediaType::Gif => ImageType::Gif,
        MediaType::Avif => ImageType::Avif,
        MediaType::Bmp => ImageType::Bmp,
        MediaType::Ico => ImageType::Ico,
        MediaType::Text => {
            return Err(MediaError::Unsupported {
                accepted: "an image",
            }
            .into());
        }
    })
}

fn attachment_type(media_type: MediaType) -> Result<AttachmentType, MediaFailure> {
    Ok(match media_type {
        MediaType::Png => AttachmentType::Png,
        MediaType::Jpeg => AttachmentType::Jpeg,
        MediaType::Webp => AttachmentType::Webp,
        MediaType::Gif => AttachmentType::Gif,
        MediaType::Text => AttachmentType::Text,
        MediaType::Avif | MediaType::Bmp | MediaType::Ico => {
            return Err(MediaError::Unsupported {
                accepted: fermata_media::ATTACHMENT_TYPES,
            }
            .into());
        }
    })
}

pub(crate) fn media_type_of_image(image_type: ImageType) -> MediaType {
    match image_type {
        ImageType::Png => MediaType::Png,
        ImageType::Jpeg => MediaType::Jpeg,
        ImageType::Webp => MediaType::Webp,
        ImageType::Gif => MediaType::Gif,
        ImageType::Avif => MediaType::Avif,
        ImageType::Bmp => MediaType::Bmp,
        ImageType::Ico => MediaType::Ico,
    }
}

fn media_type_of_attachment(attachment_type: AttachmentType) -> MediaType {
    match attachment_type {
        AttachmentType::Png => MediaType::Png,
        AttachmentType::Jpeg => MediaType::Jpeg,
        AttachmentType::Webp => MediaType::Webp,
        AttachmentType::Gif => MediaType::Gif,
        AttachmentType::Text => MediaType::Text,
    }
}
