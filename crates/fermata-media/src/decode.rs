//! Decoding under limits: the limits go to the decoder before it reads the header, so a file
//! claiming huge dimensions, or one whose pixels would take more memory than allowed (a
//! decompression bomb), is refused from its header and never decoded.
//!
//! `max_alloc` is the pixel budget of one decode, and with it the bound of what one decode can
//! cost: besides the file itself, a decode holds its decoded pixels (at most `max_alloc`) and, to
//! make a smaller copy or a thumbnail, one copy no larger than them (resized by averaging into
//! the target size, with no full-size intermediate) and, where the encoder needs another pixel
//! layout, that copy converted: under `3 × max_alloc` in all, and about `2 × max_alloc` for the
//! common layouts, which encode as they are.

use std::io::Cursor;

use image::{DynamicImage, ImageDecoder, ImageError, ImageReader};

use crate::{MediaError, MediaType};

/// The most a decoder may make of one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    pub max_width: u32,
    pub max_height: u32,
    /// The bytes of decoded pixels (and any other allocation the decoder counts).
    pub max_alloc: u64,
}

impl Default for DecodeLimits {
    /// 16384 pixels each way and 128 MiB of pixels: a 44-megapixel photograph in RGB (or a
    /// 33-megapixel image with transparency) decodes, a bomb does not.
    fn default() -> Self {
        DecodeLimits {
            max_width: 16_384,
            max_height: 16_384,
            max_alloc: 128 << 20,
        }
    }
}

impl DecodeLimits {
    fn to_image(self) -> image::Limits {
        let mut limits = image::Limits::default();
        limits.max_image_width = Some(self.max_width);
        limits.max_image_height = Some(self.max_height);
        limits.max_alloc = Some(self.max_alloc);
        limits
    }
}

/// Decodes `bytes` of `kind` (its first frame, for a GIF) upright: the orientation a JPEG or
/// WebP records is applied.
pub(crate) fn decode(
    bytes: &[u8],
    kind: MediaType,
    limits: DecodeLimits,
) -> Result<DynamicImage, MediaError> {
    let format = kind.image_format().ok_or(MediaError::Malformed { kind })?;
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    reader.limits(limits.to_image());
    let mut decoder = reader.into_decoder().map_err(|e| refusal(&e, kind))?;
    let (width, height) = decoder.dimensions();
    if width > limits.max_width
        || height > limits.max_height
        || decoder.total_bytes() > limits.max_alloc
    {
        return Err(MediaError::OverDecodeLimits);
    }
    if width == 0 || height == 0 {
        return Err(MediaError::Malformed { kind });
    }
    let orientation = decoder
        .orientation()
        .unwrap_or(image::metadata::Orientation::NoTransforms);
    let mut decoded = DynamicImage::from_decoder(decoder).map_err(|e| refusal(&e, kind))?;
    decoded.apply_orientation(orientation);
    Ok(decoded)
}

fn refusal(error: &ImageError, kind: MediaType) -> MediaError {
    match error {
        ImageError::Limits(_) => MediaError::OverDecodeLimits,
        _ => MediaError::Malformed { kind },
    }
}
