//! Container checks: an image is accepted only when its container is well formed from its
//! first byte to its last, so a truncated file and one with bytes after its end (a GIF with
//! HTML behind its trailer, say) are refused before any decoder sees them.

use crate::{MediaError, MediaType};

/// What the first bytes claim the file is, from the formats' signatures; `None` for anything
/// else (text among it).
pub(crate) fn claimed_type(bytes: &[u8]) -> Option<MediaType> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(MediaType::Png)
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(MediaType::Jpeg)
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some(MediaType::Gif)
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some(MediaType::Webp)
    } else if bytes.len() >= 12 && &bytes[4..8] == b"ftyp" {
        // Any ISO media file claims to be something; only AVIF brands are AVIF, the rest is
        // refused as not accepted.
        Some(MediaType::Avif)
    } else if bytes.starts_with(b"BM") {
        Some(MediaType::Bmp)
    } else if bytes.starts_with(&[0, 0, 1, 0]) {
        Some(MediaType::Ico)
    } else {
        None
    }
}

/// Checks the container of a file whose signature claimed `kind` ends exactly at its last byte.
pub(crate) fn check(bytes: &[u8], kind: MediaType) -> Result<(), MediaError> {
    let well_formed = match kind {
        MediaType::Png => png(bytes),
        MediaType::Jpeg => jpeg(bytes),
        MediaType::Gif => gif(bytes),
        MediaType::Webp => webp(bytes),
        MediaType::Avif => return avif(bytes),
        MediaType::Bmp => bmp(bytes),
        MediaType::Ico => ico(bytes),
        MediaType::Text => Some(()),
    };
    well_formed.ok_or(MediaError::Malformed { kind })
}

fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn le32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn le16(bytes: &[u8], at: usize) -> Option<u16> {
    let b = bytes.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([b[0], b[1]]))
}

fn usize_of(n: u32) -> Option<usize> {
    usize::try_from(n).ok()
}

/// PNG: the signature, then chunks (length, type, data, CRC) from `IHDR` to `IEND`, which must
/// be the last bytes.
fn png(bytes: &[u8]) -> Option<()> {
    let mut at = 8;
    let mut first = true;
    loop {
        let length = usize_of(be32(bytes, at)?)?;
        let kind = bytes.get(at + 4..at + 8)?;
        let end = at.checked_add(12)?.checked_add(length)?;
        if end > bytes.len() || (first && kind != b"IHDR") {
            return None;
        }
        first = false;
        if kind == b"IEND" {
            return (end == bytes.len()).then_some(());
        }
        at = end;
    }
}

/// JPEG: the start-of-image marker and, as its last two bytes, the end-of-image marker. (The
/// segments between are the decoder's to check.)
fn jpeg(bytes: &[u8]) -> Option<()> {
    (bytes.len() >= 4 && bytes.ends_with(&[0xFF, 0xD9])).then_some(())
}

/// GIF: header, logical screen, the global colour table, then extensions and images as
/// sub-block chains up to the trailer `;`, which must be the last byte.
fn gif(bytes: &[u8]) -> Option<()> {
    let packed = *bytes.get(10)?;
    let mut at = 13 + color_table(packed);
    loop {
        match *bytes.get(at)? {
            0x3B => return (at + 1 == bytes.len()).then_some(()),
            0x21 => at = sub_blocks(bytes, at + 2)?,
            0x2C => {
                let packed = *bytes.get(at + 9)?;
                // Descriptor, local colour table, LZW minimum code size, then the data.
                at = sub_blocks(bytes, at + 10 + color_table(packed) + 1)?;
            }
            _ => return None,
        }
    }
}

fn color_table(packed: u8) -> usize {
    if packed & 0x80 == 0 {
        0
    } else {
        3 << ((packed & 0x07) + 1)
    }
}

/// Skips a chain of sub-blocks starting at `at`; returns where the next block begins.
fn sub_blocks(bytes: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let size = usize::from(*bytes.get(at)?);
        at += 1;
        if size == 0 {
            return Some(at);
        }
        at += size;
        if at > bytes.len() {
            return None;
        }
    }
}

/// WebP: a RIFF container whose size covers exactly the file, holding chunks (each padded to
/// an even length) that end exactly at its end.
fn webp(bytes: &[u8]) -> Option<()> {
    let riff = usize_of(le32(bytes, 4)?)?;
    if riff.checked_add(8)? != bytes.len() || riff % 2 != 0 {
        return None;
    }
    let mut at = 12;
    let mut chunks = 0;
    while at < bytes.len() {
        let size = usize_of(le32(bytes, at + 4)?)?;
        at = at
            .checked_add(8)?
            .checked_add(size)?
            .checked_add(size % 2)?;
        chunks += 1;
    }
    (at == bytes.len() && chunks > 0).then_some(())
}

/// AVIF: ISO boxes that cover the file exactly, the first an `ftyp` naming an AVIF brand, with
/// the image's description (`meta`, or `moov` for a sequence) and its data (`mdat`). Nothing
/// here decodes AVIF (that needs native libraries), so this is its whole check.
fn avif(bytes: &[u8]) -> Result<(), MediaError> {
    let malformed = MediaError::Malformed {
        kind: MediaType::Avif,
    };
    let ftyp = usize_of(be32(bytes, 0).ok_or(malformed.clone())?).ok_or(malformed.clone())?;
    let brands = bytes.get(8..ftyp.min(bytes.len())).unwrap_or_default();
    let is_avif = brands
        .chunks(4)
        .enumerate()
        // The minor version (the second word) is not a brand.
        .any(|(index, brand)| index != 1 && matches!(brand, b"avif" | b"avis"));
    if !is_avif {
        return Err(MediaError::Unsupported {
            accepted: crate::sniff::DOCUMENT_IMAGE_TYPES,
        });
    }
    let mut at = 0usize;
    let (mut described, mut data) = (false, false);
    while at < bytes.len() {
        let size = be32(bytes, at).ok_or(malformed.clone())?;
        match bytes.get(at + 4..at + 8) {
            Some(b"meta" | b"moov") => described = true,
            Some(b"mdat") => data = true,
            _ => {}
        }
        let length = match size {
            0 => bytes.len() - at,
            1 => {
                let high = be32(bytes, at + 8).ok_or(malformed.clone())?;
                let low = be32(bytes, at + 12).ok_or(malformed.clone())?;
                usize::try_from((u64::from(high) << 32) | u64::from(low))
                    .map_err(|_| malformed.clone())?
            }
            n => usize_of(n).ok_or(malformed.clone())?,
        };
        if length < 8 {
            return Err(malformed);
        }
        at = at.checked_add(length).ok_or(malformed.clone())?;
    }
    if at == bytes.len() && described && data {
        Ok(())
    } else {
        Err(malformed)
    }
}

/// BMP: the file size in its header is the file's size.
fn bmp(bytes: &[u8]) -> Option<()> {
    (usize_of(le32(bytes, 2)?)? == bytes.len()).then_some(())
}

/// ICO: a directory of at least one entry, every entry's data inside the file, and the file
/// ending where the last entry's data ends.
fn ico(bytes: &[u8]) -> Option<()> {
    let count = usize::from(le16(bytes, 4)?);
    if count == 0 {
        return None;
    }
    let directory_end = 6 + 16 * count;
    let mut end = directory_end;
    for entry in 0..count {
        let base = 6 + 16 * entry;
        let size = usize_of(le32(bytes, base + 8)?)?;
        let offset = usize_of(le32(bytes, base + 12)?)?;
        if offset < directory_end {
            return None;
        }
        end = end.max(offset.checked_add(size)?);
    }
    (end == bytes.len()).then_some(())
}

/// Markup hidden anywhere in an image (a PNG text chunk holding a page, say). Each needle is at
/// least five bytes (`<svg` counts the space or `>` after it), so compressed pixel data matches
/// one by chance about once in 10^10 bytes or less.
pub(crate) fn holds_markup(bytes: &[u8]) -> bool {
    const NEEDLES: [&[u8]; 5] = [b"<html", b"<script", b"<!doctype", b"<iframe", b"<?xml"];
    bytes.iter().enumerate().any(|(at, &byte)| {
        if byte != b'<' {
            return false;
        }
        let rest = &bytes[at..];
        let starts = |needle: &[u8]| {
            rest.len() >= needle.len() && rest[..needle.len()].eq_ignore_ascii_case(needle)
        };
        NEEDLES.iter().any(|needle| starts(needle))
            || (starts(b"<svg") && matches!(rest.get(4), Some(b' ' | b'\t' | b'\n' | b'\r' | b'>')))
    })
}
