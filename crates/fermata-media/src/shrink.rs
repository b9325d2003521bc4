//! The smaller copy of an image too large to store: the same type, re-encoded at a smaller size
//! until it fits, so every reader of the table sees only what it always could (an image of an
//! accepted type within the limit).

use std::io::Cursor;

use image::codecs::jpeg::JpegEncoder;
use image::{DynamicImage, ImageFormat};

use crate::decode::{DecodeLimits, decode};
use crate::{Inspected, MediaError, MediaType};

/// What the sender's file was, when what is stored is a smaller copy of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Original {
    pub size: u64,
    pub width: u32,
    pub height: u32,
}

/// What to store: the file itself when it fits, or a smaller copy and what the file was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fitted {
    pub bytes: Vec<u8>,
    pub media_type: MediaType,
    pub dimensions: Option<(u32, u32)>,
    /// Present only when `bytes` is a smaller copy.
    pub original: Option<Original>,
}

/// How much each further try shrinks both sides.
const STEP: f64 = 0.8;
/// The most re-encodings tried before giving up.
const MAX_TRIES: usize = 12;

/// Makes `bytes` (already inspected) fit in `store_limit` bytes. Text, GIFs (a copy would stop
/// moving) and AVIF (not decodable here) are never copied: over the limit they are refused.
pub fn fit(
    bytes: Vec<u8>,
    inspected: Inspected,
    store_limit: usize,
    limits: DecodeLimits,
) -> Result<Fitted, MediaError> {
    if bytes.len() <= store_limit {
        return Ok(Fitted {
            bytes,
            media_type: inspected.media_type,
            dimensions: inspected.dimensions,
            original: None,
        });
    }
    let cannot = MediaError::CannotShrink {
        size: bytes.len(),
        limit: store_limit,
    };
    let kind = inspected.media_type;
    if !kind.is_resizable() {
        return Err(cannot);
    }
    let image = decode(&bytes, kind, limits)?;
    let (width, height) = (image.width(), image.height());
    let original = Original {
        size: bytes.len() as u64,
        width,
        height,
    };
    // Bytes grow roughly with the area, so the first guess scales both sides by the square root
    // of how much too large the file is, a little under.
    let mut scale = (store_limit as f64 / bytes.len() as f64).sqrt() * 0.95;
    for _ in 0..MAX_TRIES {
        let new_width = ((f64::from(width) * scale).round() as u32).max(1);
        let new_height = ((f64::from(height) * scale).round() as u32).max(1);
        // Averaging into the new size allocates only the copy (see `decode`'s budget).
        let copy = encode(&image.thumbnail_exact(new_width, new_height), kind)?;
        if copy.len() <= store_limit {
            return Ok(Fitted {
                bytes: copy,
                media_type: kind,
                dimensions: Some((new_width, new_height)),
                original: Some(original),
            });
        }
        if new_width == 1 && new_height == 1 {
            break;
        }
        scale *= STEP;
    }
    Err(cannot)
}

/// Encodes `image` as `kind` (JPEG at quality 85, the others lossless), converting its pixels
/// only when the encoder needs another layout.
pub(crate) fn encode(image: &DynamicImage, kind: MediaType) -> Result<Vec<u8>, MediaError> {
    let mut out = Cursor::new(Vec::new());
    let failed = |_| MediaError::Encode { kind };
    match kind {
        MediaType::Jpeg => {
            let mut encoder = JpegEncoder::new_with_quality(&mut out, 85);
            match image {
                DynamicImage::ImageRgb8(rgb) => encoder.encode_image(rgb),
                DynamicImage::ImageLuma8(gray) => encoder.encode_image(gray),
                other => encoder.encode_image(&other.to_rgb8()),
            }
            .map_err(failed)?;
        }
        MediaType::Png => image.write_to(&mut out, ImageFormat::Png).map_err(failed)?,
        MediaType::Webp => write_rgba(image, &mut out, ImageFormat::WebP).map_err(failed)?,
        MediaType::Bmp => write_rgba(image, &mut out, ImageFormat::Bmp).map_err(failed)?,
        MediaType::Ico => write_rgba(image, &mut out, ImageFormat::Ico).map_err(failed)?,
        MediaType::Gif | MediaType::Avif | MediaType::Text => {
            return Err(MediaError::Encode { kind });
        }
    }
    Ok(out.into_inner())
}

/// Writes `image` as RGBA with 8 bits a channel, converting it only when it is not already.
fn write_rgba(
    image: &DynamicImage,
    out: &mut Cursor<Vec<u8>>,
    format: ImageFormat,
) -> Result<(), image::ImageError> {
    match image {
        DynamicImage::ImageRgba8(_) => image.write_to(out, format),
        other => DynamicImage::ImageRgba8(other.to_rgba8()).write_to(out, format),
    }
}
