//! Images and text files, without IO: what a file is, told from its bytes alone; decoding under
//! limits fixed before the decoder starts; the smaller copy of an image too large to store; and
//! thumbnails at fixed widths, kept in a bounded cache in memory.
//!
//! Nothing here trusts a file's name or the type a sender claims. A file is refused unless its
//! bytes are wholly one of the accepted types: an image must be well formed to its last byte,
//! hold no markup (HTML, SVG, XML, script) in the parts of its container where text can hide
//! (metadata chunks, segments, extensions and boxes: every byte but its pixel data, which is
//! never searched), inflate its compressed chunks within bounds set by its header (a PNG's),
//! and decode under [`DecodeLimits`]; and plain text must be UTF-8 without
//! control characters that does not begin like markup. Everything is CPU work; callers run it
//! on a blocking thread.

mod decode;
mod shrink;
mod sniff;
mod structure;
mod text;
mod thumbnail;

pub use decode::DecodeLimits;
pub use shrink::{Fitted, Original, fit};
pub use sniff::{ATTACHMENT_TYPES, Inspected, inspect_attachment, inspect_document_image};
pub use thumbnail::{CacheStats, Served, Thumbnail, Thumbnails, WIDTHS, Width};

use std::fmt;

/// A type Fermata stores, as sniffed from the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MediaType {
    Png,
    Jpeg,
    Webp,
    Gif,
    Avif,
    Bmp,
    Ico,
    /// Plain UTF-8 text (attachments only).
    Text,
}

impl MediaType {
    /// The short name stored in the database and shown in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            MediaType::Png => "png",
            MediaType::Jpeg => "jpeg",
            MediaType::Webp => "webp",
            MediaType::Gif => "gif",
            MediaType::Avif => "avif",
            MediaType::Bmp => "bmp",
            MediaType::Ico => "ico",
            MediaType::Text => "text",
        }
    }

    /// The `Content-Type` the bytes are served with.
    pub fn content_type(self) -> &'static str {
        match self {
            MediaType::Png => "image/png",
            MediaType::Jpeg => "image/jpeg",
            MediaType::Webp => "image/webp",
            MediaType::Gif => "image/gif",
            MediaType::Avif => "image/avif",
            MediaType::Bmp => "image/bmp",
            MediaType::Ico => "image/vnd.microsoft.icon",
            MediaType::Text => "text/plain; charset=utf-8",
        }
    }

    /// Whether this crate decodes it (AVIF would need native libraries; text is not an image).
    pub fn is_decodable_image(self) -> bool {
        self.image_format().is_some()
    }

    /// Whether a smaller copy or a thumbnail of it can be made: a decodable image but a GIF,
    /// which is always served and kept whole so it keeps moving.
    pub fn is_resizable(self) -> bool {
        self.is_decodable_image() && self != MediaType::Gif
    }

    fn image_format(self) -> Option<image::ImageFormat> {
        match self {
            MediaType::Png => Some(image::ImageFormat::Png),
            MediaType::Jpeg => Some(image::ImageFormat::Jpeg),
            MediaType::Webp => Some(image::ImageFormat::WebP),
            MediaType::Gif => Some(image::ImageFormat::Gif),
            MediaType::Bmp => Some(image::ImageFormat::Bmp),
            MediaType::Ico => Some(image::ImageFormat::Ico),
            MediaType::Avif | MediaType::Text => None,
        }
    }
}

impl fmt::Display for MediaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a file was refused. Messages are fixed words and numbers, safe to show to the sender.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MediaError {
    /// Larger than the bound of what may be sent at all; refused before any decoding.
    #[error("the file is {size} bytes, over the limit of {limit} bytes")]
    TooLarge { size: usize, limit: usize },
    /// Not one of the accepted types (HTML and SVG never are).
    #[error("the file is not one of the accepted types ({accepted})")]
    Unsupported { accepted: &'static str },
    /// Markup (HTML, SVG, XML, script), as a whole or hidden in an image's metadata (any part
    /// of its container but its pixel data).
    #[error("the file holds markup, which is never accepted")]
    Markup,
    /// It begins like an accepted image but is not one to its end: truncated, damaged, or with
    /// bytes after its end.
    #[error("the {kind} image is truncated or malformed")]
    Malformed { kind: MediaType },
    /// Its dimensions or the memory decoding it would take are over the decode limits: refused
    /// from its header, before its pixels are decoded.
    #[error("the image is larger than the decode limits allow")]
    OverDecodeLimits,
    /// A PNG (or a PNG inside an ICO) whose compressed data inflates past its bound, a
    /// decompression bomb behind honest dimensions: its pixel data to more than its header's
    /// dimensions imply, or its colour profiles to more than 4 MiB. Refused before any decoder
    /// inflates it, at the first byte over the bound.
    #[error("the image's {part} inflates to more than its bound of {limit} bytes")]
    OverInflated { part: &'static str, limit: u64 },
    /// Text that is not valid UTF-8 or holds NUL or other control characters.
    #[error("the text is not valid UTF-8 without control characters")]
    NotPlainText,
    /// Too large to store and of a kind no smaller copy is made of (text, GIF, AVIF), or no copy
    /// fits.
    #[error(
        "the file is {size} bytes, over the {limit} bytes that can be stored, and no smaller copy of it fits"
    )]
    CannotShrink { size: usize, limit: usize },
    /// A thumbnail width that is not one of [`WIDTHS`].
    #[error("a width is one of 64, 80, 160, 360, 480, 720, 800, 960 or 1024")]
    UnknownWidth,
    /// Encoding a copy failed (should not happen for an image that decoded).
    #[error("the {kind} image could not be re-encoded")]
    Encode { kind: MediaType },
}
