//! The image store (`plan_images`): the images a document holds, one row per document and
//! SHA-256 of the image's bytes, with its type, the bytes, their size, and who stored them and
//! when. Storing the same bytes again in the same document changes nothing.
//!
//! The store keeps bytes; it never decodes them. What may be stored (the type sniffed from the
//! bytes, decoded under limits, within the size the source allows, or a smaller copy) is decided
//! before the store is called, by `fermata-media`.

use std::fmt;

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use crate::channel::ChannelId;
use crate::error::{StoreError, StoreResult};
use crate::lease::Fence;
use crate::time::UnixMillis;

/// The types a document's image may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImageType {
    Png,
    Jpeg,
    Webp,
    Gif,
    Avif,
    Bmp,
    Ico,
}

impl ImageType {
    pub const ALL: [ImageType; 7] = [
        ImageType::Png,
        ImageType::Jpeg,
        ImageType::Webp,
        ImageType::Gif,
        ImageType::Avif,
        ImageType::Bmp,
        ImageType::Ico,
    ];

    /// The name stored in `plan_images.image_type`.
    pub fn as_str(self) -> &'static str {
        match self {
            ImageType::Png => "png",
            ImageType::Jpeg => "jpeg",
            ImageType::Webp => "webp",
            ImageType::Gif => "gif",
            ImageType::Avif => "avif",
            ImageType::Bmp => "bmp",
            ImageType::Ico => "ico",
        }
    }

    /// The type a stored name means; an unknown one is `Corrupt` (the column's check allows
    /// none).
    pub fn from_stored(text: &str) -> StoreResult<Self> {
        ImageType::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
            .ok_or_else(|| StoreError::corrupt("a stored image has an unknown type"))
    }
}

impl fmt::Display for ImageType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The SHA-256 of an image's bytes, as 64 lowercase hexadecimal digits: its address.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ImageHash(String);

impl ImageHash {
    /// The hash of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        ImageHash(hex(&Sha256::digest(bytes)))
    }

    /// A hash given in an address: 64 hexadecimal digits (either case).
    pub fn parse(text: &str) -> StoreResult<Self> {
        if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(ImageHash(text.to_ascii_lowercase()))
        } else {
            Err(StoreError::invalid(
                "an image hash is 64 hexadecimal digits (SHA-256)",
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ImageHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Lowercase hexadecimal.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// Who stored or uploaded something: a user's ID or a named tool, 1 to 200 printable
/// characters.
pub(crate) fn check_actor(text: &str, what: &'static str) -> StoreResult<()> {
    if text.is_empty() || text.chars().count() > 200 || text.chars().any(char::is_control) {
        return Err(StoreError::invalid(what));
    }
    Ok(())
}

/// An image to store. Its hash and size are computed here from the bytes, so they cannot
/// disagree with them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewImage {
    channel: ChannelId,
    sha256: ImageHash,
    image_type: ImageType,
    bytes: Vec<u8>,
    stored_by: String,
}

impl NewImage {
    pub fn new(
        channel: ChannelId,
        image_type: ImageType,
        bytes: Vec<u8>,
        stored_by: impl Into<String>,
    ) -> StoreResult<Self> {
        let stored_by = stored_by.into();
        check_actor(
            &stored_by,
            "who stored an image is 1 to 200 characters without control characters",
        )?;
        if bytes.is_empty() {
            return Err(StoreError::invalid("an image has at least one byte"));
        }
        Ok(NewImage {
            channel,
            sha256: ImageHash::of(&bytes),
            image_type,
            bytes,
            stored_by,
        })
    }

    pub fn channel(&self) -> &ChannelId {
        &self.channel
    }

    pub fn sha256(&self) -> &ImageHash {
        &self.sha256
    }

    pub fn image_type(&self) -> ImageType {
        self.image_type
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn stored_by(&self) -> &str {
        &self.stored_by
    }

    /// The size of the bytes, as stored.
    pub fn size(&self) -> i64 {
        i64::try_from(self.bytes.len()).unwrap_or(i64::MAX)
    }
}

/// A stored image's row, without its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    pub channel: ChannelId,
    pub sha256: ImageHash,
    pub image_type: ImageType,
    /// Always the length of the bytes.
    pub size: i64,
    pub stored_by: String,
    pub stored_at: UnixMillis,
}

/// A stored image with its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredImage {
    pub info: ImageInfo,
    pub bytes: Vec<u8>,
}

/// What storing an image did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageStored {
    pub info: ImageInfo,
    /// False when the document already held these bytes: the earlier row is returned unchanged.
    pub created: bool,
}

/// The image store. Writes are fenced by the writer lease; rows go with the document.
#[async_trait]
pub trait ImageStore: Send + Sync {
    /// Stores an image in its document, once per document and hash: the same bytes again return
    /// the existing row. A document that does not exist is `Missing`.
    async fn store(&self, fence: &Fence, image: &NewImage) -> StoreResult<ImageStored>;

    /// One image of a document, with its bytes.
    async fn image(
        &self,
        channel: &ChannelId,
        sha256: &ImageHash,
    ) -> StoreResult<Option<StoredImage>>;

    /// A document's images, oldest first, without their bytes.
    async fn images_of(&self, channel: &ChannelId) -> StoreResult<Vec<ImageInfo>>;
}
