//! What a file is, from its bytes: the two entry points, one for Chat attachments and one for
//! a document's images, each with its own list of accepted types.

use crate::decode::{DecodeLimits, decode};
use crate::{MediaError, MediaType, structure, text};

/// The types a Chat attachment may be, as errors name them.
pub const ATTACHMENT_TYPES: &str = "PNG, JPEG, WebP, GIF or plain text";
pub(crate) const DOCUMENT_IMAGE_TYPES: &str = "PNG, JPEG, WebP, GIF, AVIF, BMP or ICO";

/// What a file was found to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inspected {
    pub media_type: MediaType,
    /// Width and height in pixels, upright; `None` for text and for AVIF (never decoded here).
    pub dimensions: Option<(u32, u32)>,
}

/// A Chat attachment: a PNG, JPEG, WebP or GIF image, or plain text; never HTML or SVG.
pub fn inspect_attachment(bytes: &[u8], limits: DecodeLimits) -> Result<Inspected, MediaError> {
    match structure::claimed_type(bytes) {
        Some(kind @ (MediaType::Png | MediaType::Jpeg | MediaType::Webp | MediaType::Gif)) => {
            inspect_image(bytes, kind, limits)
        }
        // A real AVIF, BMP or ICO is refused by name; text that merely begins like one
        // ("BMW ...") is text.
        Some(kind) if structure::check(bytes, kind).is_ok() => Err(MediaError::Unsupported {
            accepted: ATTACHMENT_TYPES,
        }),
        _ if bytes.is_empty() => Err(MediaError::Unsupported {
            accepted: ATTACHMENT_TYPES,
        }),
        _ => {
            text::check(bytes)?;
            Ok(Inspected {
                media_type: MediaType::Text,
                dimensions: None,
            })
        }
    }
}

/// One of a document's images: PNG, JPEG, WebP, GIF, AVIF, BMP or ICO.
pub fn inspect_document_image(bytes: &[u8], limits: DecodeLimits) -> Result<Inspected, MediaError> {
    match structure::claimed_type(bytes) {
        Some(kind) => inspect_image(bytes, kind, limits),
        None => {
            let looks_like_markup = std::str::from_utf8(bytes)
                .map(|t| text::begins_like_markup(t.strip_prefix('\u{feff}').unwrap_or(t)))
                .unwrap_or(false);
            Err(if looks_like_markup {
                MediaError::Markup
            } else {
                MediaError::Unsupported {
                    accepted: DOCUMENT_IMAGE_TYPES,
                }
            })
        }
    }
}

/// The whole check of a file whose signature claims `kind`: its container, no markup in the
/// parts of it where text can hide (everything but its pixel data), a PNG's compressed chunks
/// within their bounds, and (for every type but AVIF) a full decode under `limits`.
fn inspect_image(
    bytes: &[u8],
    kind: MediaType,
    limits: DecodeLimits,
) -> Result<Inspected, MediaError> {
    let text = structure::check(bytes, kind)?;
    if structure::holds_markup(bytes, &text) {
        return Err(MediaError::Markup);
    }
    if kind == MediaType::Png {
        let inflated =
            structure::png_compressed_text(bytes).ok_or(MediaError::Malformed { kind })?;
        if structure::texts_hold_markup(&inflated) {
            return Err(MediaError::Markup);
        }
    }
    structure::check_inflation(bytes, kind, limits.max_alloc)?;
    if kind == MediaType::Avif {
        return Ok(Inspected {
            media_type: kind,
            dimensions: None,
        });
    }
    let decoded = decode(bytes, kind, limits)?;
    Ok(Inspected {
        media_type: kind,
        dimensions: Some((decoded.width(), decoded.height())),
    })
}
