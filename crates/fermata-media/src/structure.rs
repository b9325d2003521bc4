//! Container checks: an image is accepted only when its container is well formed from its
//! first byte to its last, so a truncated file and one with bytes after its end (a GIF with
//! HTML behind its trailer, say) are refused before any decoder sees them.
//!
//! The same walk tells where text can hide, which is all that [`holds_markup`] searches:
//! every byte of the file except its pixel data. Pixel data is, per container:
//! - PNG: the data of `IDAT` chunks (and APNG's `fdAT`); every other chunk is searched whole.
//! - JPEG: the entropy-coded data after each start-of-scan segment; every marker segment
//!   (APPn, COM, tables, frame and scan headers) is searched.
//! - GIF: each image's data sub-blocks; extensions (comment, application, plain text,
//!   graphic control), descriptors and colour tables are searched.
//! - WebP: the data of `VP8 `, `VP8L` and `ALPH` chunks, and of `ANMF` chunks after their
//!   frame header; `EXIF`, `XMP `, `ICCP` and unknown chunks are searched.
//! - BMP: the pixel array, from the header's offset for the size its bitmap header gives; the
//!   headers, the palette and any other bytes are searched.
//! - ICO: each embedded PNG's pixel data by the PNG rule, and each embedded bitmap's colour
//!   and mask arrays; the directory and the bitmaps' headers and palettes are searched.
//! - AVIF: the payload of `mdat` boxes; every other box is searched.
//!
//! A PNG's compressed text chunks (`zTXt`, and `iTXt` whose compression flag is set) are also
//! inflated and their text searched ([`png_compressed_text`]), up to [`MAX_INFLATED_TEXT`]
//! bytes for the whole file: a file whose compressed text inflates to more is refused rather
//! than searched in part. (The PNGs inside an ICO are searched as bytes only.)
//!
//! The same walk bounds what a PNG's compressed chunks inflate to ([`check_inflation`]), so a
//! decompression bomb behind honest dimensions is refused before any decoder inflates it: the
//! pixel data (`IDAT`) to exactly what the header's width, height, bit depth, colour type and
//! interlacing imply, filter bytes included, and the colour profiles (`iCCP`) to
//! [`MAX_INFLATED_PROFILE`]. Each stream is inflated into a small scratch buffer and counted,
//! never kept, and stopped at the first byte over its bound. The same holds for the PNGs inside
//! an ICO. (An APNG's further frames, `fdAT`, are never decoded here and are not inflated.)
//!
//! What the walk does not recognise (a bitmap header it does not know, an ICO entry that is
//! not a whole PNG) has no pixel data, so it is searched whole. Compressed pixel data spells a
//! markup needle by chance about once in 10^9 bytes, so searching it would refuse about one
//! honest 10 MiB photo in a hundred. Markup that a crafted file hides inside its pixel data
//! (a PNG whose deflate blocks are stored, say) is therefore not found; that is the price of
//! not refusing honest photos.

use std::ops::Range;

use crate::{MediaError, MediaType};

const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// What the first bytes claim the file is, from the formats' signatures; `None` for anything
/// else (text among it).
pub(crate) fn claimed_type(bytes: &[u8]) -> Option<MediaType> {
    if bytes.starts_with(PNG_SIGNATURE) {
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

/// Checks the container of a file whose signature claimed `kind` ends exactly at its last byte,
/// and returns where text can hide in it: every byte but the image's compressed or raw pixel
/// data, as ranges in file order for [`holds_markup`].
pub(crate) fn check(bytes: &[u8], kind: MediaType) -> Result<Vec<Range<usize>>, MediaError> {
    let mut pixels = Vec::new();
    let well_formed = match kind {
        MediaType::Png => png(bytes, &mut pixels),
        MediaType::Jpeg => jpeg(bytes, &mut pixels),
        MediaType::Gif => gif(bytes, &mut pixels),
        MediaType::Webp => webp(bytes, &mut pixels),
        MediaType::Avif => {
            avif(bytes, &mut pixels)?;
            Some(())
        }
        MediaType::Bmp => bmp(bytes, &mut pixels),
        MediaType::Ico => ico(bytes, &mut pixels),
        MediaType::Text => Some(()),
    };
    well_formed.ok_or(MediaError::Malformed { kind })?;
    Ok(text_ranges(bytes.len(), pixels))
}

/// The bytes of a file of `len` bytes outside every one of `pixels`: what is not known to be
/// pixel data is where text can hide.
fn text_ranges(len: usize, mut pixels: Vec<Range<usize>>) -> Vec<Range<usize>> {
    pixels.sort_by_key(|range| range.start);
    let mut text = Vec::new();
    let mut at = 0;
    for range in pixels {
        let (start, end) = (range.start.min(len), range.end.min(len));
        if start > at {
            text.push(at..start);
        }
        at = at.max(end);
    }
    if at < len {
        text.push(at..len);
    }
    text
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

fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    let b = bytes.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

/// PNG: the signature, then chunks (length, type, data, CRC) from `IHDR` to `IEND`, which must
/// be the last bytes. The data of `IDAT` (and APNG's `fdAT`) chunks is pixel data.
fn png(bytes: &[u8], pixels: &mut Vec<Range<usize>>) -> Option<()> {
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
        if kind == b"IDAT" || kind == b"fdAT" {
            pixels.push(at + 8..end - 4);
        }
        if kind == b"IEND" {
            return (end == bytes.len()).then_some(());
        }
        at = end;
    }
}

/// The most text a PNG's compressed text chunks may inflate to, all together.
pub(crate) const MAX_INFLATED_TEXT: usize = 2 << 20;

/// The inflated text of a well-formed PNG's `zTXt` chunks and compressed `iTXt` chunks, or
/// `None` when one does not inflate or all of them inflate to more than [`MAX_INFLATED_TEXT`].
pub(crate) fn png_compressed_text(bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    use std::io::Read as _;
    let mut texts = Vec::new();
    let mut budget = MAX_INFLATED_TEXT;
    for chunk in png_chunks(bytes) {
        let (kind, data) = chunk?;
        let compressed = match kind {
            // Keyword, NUL, compression method, compressed text.
            b"zTXt" => {
                let keyword = data.iter().position(|&b| b == 0)?;
                Some(data.get(keyword + 2..)?)
            }
            // Keyword, NUL, compression flag, method, language, NUL, translated keyword, NUL,
            // text (compressed when the flag is 1).
            b"iTXt" => {
                let keyword = data.iter().position(|&b| b == 0)?;
                let flag = *data.get(keyword + 1)?;
                let rest = data.get(keyword + 3..)?;
                let language = rest.iter().position(|&b| b == 0)?;
                let rest = rest.get(language + 1..)?;
                let translated = rest.iter().position(|&b| b == 0)?;
                let text = rest.get(translated + 1..)?;
                (flag == 1).then_some(text)
            }
            _ => None,
        };
        if let Some(compressed) = compressed {
            let mut inflated = Vec::new();
            flate2::read::ZlibDecoder::new(compressed)
                .take(u64::try_from(budget).ok()? + 1)
                .read_to_end(&mut inflated)
                .ok()?;
            budget = budget.checked_sub(inflated.len())?;
            texts.push(inflated);
        }
    }
    Some(texts)
}

/// The chunks of a PNG after its signature, as (type, data), up to its end; `None` for a chunk
/// that does not fit, after which nothing follows.
fn png_chunks(bytes: &[u8]) -> impl Iterator<Item = Option<(&[u8], &[u8])>> {
    let mut at = 8;
    std::iter::from_fn(move || {
        if at >= bytes.len() {
            return None;
        }
        let chunk = (|| {
            let length = usize_of(be32(bytes, at)?)?;
            let kind = bytes.get(at + 4..at + 8)?;
            let data = bytes.get(at + 8..at.checked_add(8)?.checked_add(length)?)?;
            at = at.checked_add(12)?.checked_add(length)?;
            Some((kind, data))
        })();
        if chunk.is_none() {
            at = bytes.len();
        }
        Some(chunk)
    })
}

/// The most the colour profiles (`iCCP` chunks) of one file may inflate to, all together. An
/// ICC profile is a few KiB (sRGB's is 3 KiB, a display's under 1 KiB) and the largest RGB
/// profiles, with lookup tables, well under 1 MiB; unbounded, the decoder would inflate one to
/// as much as the whole pixel budget.
pub(crate) const MAX_INFLATED_PROFILE: u64 = 4 << 20;

/// Deflate's greatest expansion: no Huffman code is shorter than one bit, so a match of at most
/// 258 bytes costs at least two bits (its length and its distance). Compressed data of `n`
/// bytes never inflates to more than `n` times this, so it need not be inflated to be bounded.
const MAX_DEFLATE_RATIO: u64 = 1032;

/// The scratch buffer a stream is inflated into and counted: its bytes are never kept.
const SCRATCH_BYTES: usize = 32 << 10;

/// What the PNGs of one file may still inflate to: pixel data within the decode budget
/// (`max_alloc`, which the decoder checks from the header in any case), profiles within
/// [`MAX_INFLATED_PROFILE`].
struct InflationBudget {
    pixel_bytes: u64,
    profile_bytes: u64,
}

/// Checks that the compressed chunks of a PNG, or of each whole PNG inside an ICO, inflate
/// within their bounds (see the module's comment), before any decoder sees them; other types
/// have none. `max_pixel_bytes` is the decode budget: an image whose header implies more pixel
/// bytes is refused from its header ([`MediaError::OverDecodeLimits`], as the decoder would),
/// so the check never inflates more than a decode may hold. Expects a file [`check`] accepted.
pub(crate) fn check_inflation(
    bytes: &[u8],
    kind: MediaType,
    max_pixel_bytes: u64,
) -> Result<(), MediaError> {
    let mut budget = InflationBudget {
        pixel_bytes: max_pixel_bytes,
        profile_bytes: MAX_INFLATED_PROFILE,
    };
    match kind {
        MediaType::Png => png_inflation(bytes, kind, &mut budget),
        MediaType::Ico => {
            let count = le16(bytes, 4).ok_or(MediaError::Malformed { kind })?;
            for entry in 0..usize::from(count) {
                let data = ico_entry(bytes, entry)
                    .and_then(|range| bytes.get(range))
                    .ok_or(MediaError::Malformed { kind })?;
                if data.starts_with(PNG_SIGNATURE) && png(data, &mut Vec::new()).is_some() {
                    png_inflation(data, kind, &mut budget)?;
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// One PNG's check: its pixel data against its header, its profiles against the budget.
fn png_inflation(
    png: &[u8],
    kind: MediaType,
    budget: &mut InflationBudget,
) -> Result<(), MediaError> {
    let malformed = MediaError::Malformed { kind };
    // The signature, the header chunk's length and type, then its 13 bytes.
    let header = png.get(16..29).ok_or(malformed.clone())?;
    let (pixel_bytes, filter_bytes) = png_image_bytes(header).ok_or(malformed.clone())?;
    budget.pixel_bytes = budget
        .pixel_bytes
        .checked_sub(pixel_bytes)
        .ok_or(MediaError::OverDecodeLimits)?;
    let pixel_data_bound = pixel_bytes + filter_bytes;
    let mut compressed_pixel_data = 0u64;
    for chunk in png_chunks(png) {
        let (chunk_kind, data) = chunk.ok_or(malformed.clone())?;
        if chunk_kind == b"IDAT" {
            compressed_pixel_data += data.len() as u64;
        }
    }
    let mut pixel_data =
        (compressed_pixel_data.saturating_mul(MAX_DEFLATE_RATIO) > pixel_data_bound).then(|| {
            BoundedInflate::new(
                pixel_data_bound,
                MediaError::OverInflated {
                    part: "pixel data",
                    limit: pixel_data_bound,
                },
            )
        });
    let mut scratch = vec![0; SCRATCH_BYTES];
    for chunk in png_chunks(png) {
        let (chunk_kind, data) = chunk.ok_or(malformed.clone())?;
        match (chunk_kind, &mut pixel_data) {
            (b"IDAT", Some(pixel_data)) => pixel_data.feed(data, &mut scratch)?,
            (b"iCCP", _) => {
                // Profile name, NUL, compression method, the compressed profile.
                let name = data.iter().position(|&b| b == 0).ok_or(malformed.clone())?;
                let compressed = data.get(name + 2..).ok_or(malformed.clone())?;
                let mut profile = BoundedInflate::new(
                    budget.profile_bytes,
                    MediaError::OverInflated {
                        part: "colour profile",
                        limit: MAX_INFLATED_PROFILE,
                    },
                );
                profile.feed(compressed, &mut scratch)?;
                budget.profile_bytes -= profile.produced();
            }
            _ => {}
        }
    }
    Ok(())
}

/// What a PNG's pixel data inflates to, from its header (`IHDR`'s 13 bytes): the bytes of its
/// rows and one filter byte before each row (of each pass, when interlaced); `None` for a bit
/// depth, colour type or interlace method PNG does not have.
fn png_image_bytes(header: &[u8]) -> Option<(u64, u64)> {
    let width = u64::from(be32(header, 0)?);
    let height = u64::from(be32(header, 4)?);
    let (depth, colour, interlace) = (header[8], header[9], header[12]);
    let channels = match (colour, depth) {
        (0, 1 | 2 | 4 | 8 | 16) => 1,
        (3, 1 | 2 | 4 | 8) => 1,
        (4, 8 | 16) => 2,
        (2, 8 | 16) => 3,
        (6, 8 | 16) => 4,
        _ => return None,
    };
    let bits_per_pixel = channels * u64::from(depth);
    // Adam7's passes as (first column, first row, column step, row step); without interlacing
    // the image is one pass of every pixel.
    const ADAM7: [(u64, u64, u64, u64); 7] = [
        (0, 0, 8, 8),
        (4, 0, 8, 8),
        (0, 4, 4, 8),
        (2, 0, 4, 4),
        (0, 2, 2, 4),
        (1, 0, 2, 2),
        (0, 1, 1, 2),
    ];
    let passes: &[(u64, u64, u64, u64)] = match interlace {
        0 => &[(0, 0, 1, 1)],
        1 => &ADAM7,
        _ => return None,
    };
    let (mut pixel_bytes, mut filter_bytes) = (0u64, 0u64);
    for &(column, row, column_step, row_step) in passes {
        let columns = width.saturating_sub(column).div_ceil(column_step);
        let rows = height.saturating_sub(row).div_ceil(row_step);
        if columns == 0 || rows == 0 {
            continue;
        }
        let row_bytes = (columns * bits_per_pixel).div_ceil(8);
        pixel_bytes = pixel_bytes.checked_add(rows.checked_mul(row_bytes)?)?;
        filter_bytes += rows;
    }
    Some((pixel_bytes, filter_bytes))
}

/// A zlib stream inflated into a scratch buffer and counted, never kept, and refused as soon as
/// it makes more than its bound: the check costs the inflater's state and the scratch buffer,
/// whatever the stream would inflate to.
struct BoundedInflate {
    inflater: flate2::Decompress,
    bound: u64,
    /// What a stream over its bound is refused with.
    refusal: MediaError,
    /// The stream ended, or is damaged: no decoder inflates past either, so neither does this.
    ended: bool,
}

impl BoundedInflate {
    fn new(bound: u64, refusal: MediaError) -> Self {
        BoundedInflate {
            inflater: flate2::Decompress::new(true),
            bound,
            refusal,
            ended: false,
        }
    }

    /// Inflates the next piece of the stream, and everything it releases, into `scratch`; once
    /// the bound is passed (by exactly one byte: no more is asked of the inflater), the refusal.
    fn feed(&mut self, mut input: &[u8], scratch: &mut [u8]) -> Result<(), MediaError> {
        while !self.ended {
            let (read, made) = (self.inflater.total_in(), self.inflater.total_out());
            // At most one byte over the bound, which is all the refusal needs.
            let room = usize::try_from(self.bound + 1 - made).unwrap_or(usize::MAX);
            let out = scratch.len().min(room);
            let status =
                self.inflater
                    .decompress(input, &mut scratch[..out], flate2::FlushDecompress::None);
            let consumed = (self.inflater.total_in() - read) as usize;
            input = &input[consumed..];
            if self.inflater.total_out() > self.bound {
                return Err(self.refusal.clone());
            }
            match status {
                Ok(flate2::Status::StreamEnd) | Err(_) => self.ended = true,
                Ok(_) if consumed == 0 && self.inflater.total_out() == made => break,
                Ok(_) => {}
            }
        }
        Ok(())
    }

    fn produced(&self) -> u64 {
        self.inflater.total_out()
    }
}

/// Whether any of `texts` (inflated text chunks) holds markup.
pub(crate) fn texts_hold_markup(texts: &[Vec<u8>]) -> bool {
    texts.iter().any(|text| markup_in(text))
}

/// JPEG: one or more streams back to back (a camera's multi-picture file holds its further
/// pictures after the first one's end), each from its start-of-image marker to its
/// end-of-image marker, the last of which must be the last two bytes. Each stream's marker
/// segments chain by their lengths; the entropy-coded data after each start-of-scan segment,
/// up to the next marker that is not a restart marker, is pixel data. Stray bytes before a
/// marker, which decoders skip, are tolerated and are not pixel data.
fn jpeg(bytes: &[u8], pixels: &mut Vec<Range<usize>>) -> Option<()> {
    let mut at = 0;
    while at < bytes.len() {
        if bytes.get(at..at + 2)? != [0xFF, 0xD8] {
            return None;
        }
        at = jpeg_stream(bytes, at + 2, pixels)?;
    }
    (bytes.len() >= 4).then_some(())
}

/// Walks one JPEG stream's segments from just after its start-of-image marker; returns where
/// the stream ends, just after its end-of-image marker.
fn jpeg_stream(bytes: &[u8], mut at: usize, pixels: &mut Vec<Range<usize>>) -> Option<usize> {
    loop {
        while *bytes.get(at)? != 0xFF {
            at += 1;
        }
        // Fill bytes before the marker.
        while *bytes.get(at + 1)? == 0xFF {
            at += 1;
        }
        let marker = *bytes.get(at + 1)?;
        match marker {
            0xD9 => return Some(at + 2),
            // Markers without a length (a stray 0xFF 0x00 is no marker at all).
            0x00 | 0x01 | 0xD0..=0xD7 => {
                at += 2;
                continue;
            }
            _ => {}
        }
        let length = usize::from(be16(bytes, at + 2)?);
        let end = at.checked_add(2)?.checked_add(length)?;
        if length < 2 || end > bytes.len() {
            return None;
        }
        at = end;
        if marker == 0xDA {
            let scan = at;
            loop {
                if *bytes.get(at)? == 0xFF
                    && !matches!(*bytes.get(at + 1)?, 0x00 | 0xD0..=0xD7 | 0xFF)
                {
                    break;
                }
                at += 1;
            }
            pixels.push(scan..at);
        }
    }
}

/// GIF: header, logical screen, the global colour table, then extensions and images as
/// sub-block chains up to the trailer `;`, which must be the last byte. Each image's data
/// sub-blocks (after its LZW minimum code size) are pixel data; extensions (comments,
/// application and plain-text blocks) are not.
fn gif(bytes: &[u8], pixels: &mut Vec<Range<usize>>) -> Option<()> {
    let packed = *bytes.get(10)?;
    let mut at = 13 + color_table(packed);
    loop {
        match *bytes.get(at)? {
            0x3B => return (at + 1 == bytes.len()).then_some(()),
            0x21 => at = sub_blocks(bytes, at + 2)?,
            0x2C => {
                let packed = *bytes.get(at + 9)?;
                // Descriptor, local colour table, LZW minimum code size, then the data.
                let data = at + 10 + color_table(packed) + 1;
                at = sub_blocks(bytes, data)?;
                pixels.push(data..at);
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
/// an even length) that end exactly at its end. The data of `VP8 `, `VP8L` and `ALPH` chunks,
/// and of `ANMF` chunks after their 16-byte frame header, is pixel data; `EXIF`, `XMP `,
/// `ICCP` and unknown chunks are not.
fn webp(bytes: &[u8], pixels: &mut Vec<Range<usize>>) -> Option<()> {
    let riff = usize_of(le32(bytes, 4)?)?;
    if riff.checked_add(8)? != bytes.len() || riff % 2 != 0 {
        return None;
    }
    let mut at = 12;
    let mut chunks = 0;
    while at < bytes.len() {
        let size = usize_of(le32(bytes, at + 4)?)?;
        let data = at + 8;
        let data_end = data.checked_add(size)?;
        match bytes.get(at..at + 4)? {
            b"VP8 " | b"VP8L" | b"ALPH" => pixels.push(data..data_end),
            b"ANMF" => pixels.push((data + 16).min(data_end)..data_end),
            _ => {}
        }
        at = data_end.checked_add(size % 2)?;
        chunks += 1;
    }
    (at == bytes.len() && chunks > 0).then_some(())
}

/// AVIF: ISO boxes that cover the file exactly, the first an `ftyp` naming an AVIF brand, with
/// the image's description (`meta`, or `moov` for a sequence) and its data (`mdat`, whose
/// payload is pixel data). Nothing here decodes AVIF (that needs native libraries), so this is
/// its whole check.
fn avif(bytes: &[u8], pixels: &mut Vec<Range<usize>>) -> Result<(), MediaError> {
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
        let kind = bytes.get(at + 4..at + 8);
        match kind {
            Some(b"meta" | b"moov") => described = true,
            Some(b"mdat") => data = true,
            _ => {}
        }
        let (length, header) = match size {
            0 => (bytes.len() - at, 8),
            1 => {
                let high = be32(bytes, at + 8).ok_or(malformed.clone())?;
                let low = be32(bytes, at + 12).ok_or(malformed.clone())?;
                // Dropped on purpose: a length too large for this machine is a malformed file.
                let length = usize::try_from((u64::from(high) << 32) | u64::from(low))
                    .map_err(|_| malformed.clone())?;
                (length, 16)
            }
            n => (usize_of(n).ok_or(malformed.clone())?, 8),
        };
        if length < header {
            return Err(malformed);
        }
        let end = at.checked_add(length).ok_or(malformed.clone())?;
        if kind == Some(b"mdat") {
            pixels.push(at + header..end);
        }
        at = end;
    }
    if at == bytes.len() && described && data {
        Ok(())
    } else {
        Err(malformed)
    }
}

/// BMP: the file size in its header is the file's size. The pixel array, from the offset the
/// header gives for as many bytes as the bitmap header describes, is pixel data; the headers,
/// the palette and any bytes outside the array are not. A bitmap header not understood here
/// marks no pixel data, so the whole file is scanned.
fn bmp(bytes: &[u8], pixels: &mut Vec<Range<usize>>) -> Option<()> {
    if usize_of(le32(bytes, 2)?)? != bytes.len() {
        return None;
    }
    let offset = le32(bytes, 10).and_then(usize_of);
    let size = bytes.get(14..).and_then(dib_pixel_bytes);
    if let (Some(offset), Some(size)) = (offset, size) {
        pixels.push(offset..offset.saturating_add(size));
    }
    Some(())
}

/// The size of the pixel array a device-independent bitmap header (at the start of `dib`)
/// describes: rows padded to four bytes for uncompressed bitmaps, the header's image size for
/// compressed ones.
fn dib_pixel_bytes(dib: &[u8]) -> Option<usize> {
    let header = le32(dib, 0)?;
    let (width, height, bpp, compression, image_size) = if header == 12 {
        let bpp = le16(dib, 10)?;
        (
            u64::from(le16(dib, 4)?),
            u64::from(le16(dib, 6)?),
            bpp,
            0,
            0,
        )
    } else if header >= 40 {
        let height = le32(dib, 8)? as i32;
        (
            u64::from(le32(dib, 4)?),
            u64::from(height.unsigned_abs()),
            le16(dib, 14)?,
            le32(dib, 16)?,
            le32(dib, 20)?,
        )
    } else {
        return None;
    };
    match compression {
        // Uncompressed, or uncompressed with bit-field masks.
        0 | 3 | 6 => usize::try_from(stride(width, bpp)?.checked_mul(height)?).ok(),
        _ if image_size > 0 => usize_of(image_size),
        _ => None,
    }
}

/// The bytes of one row of `width` pixels at `bpp` bits, padded to four bytes.
fn stride(width: u64, bpp: u16) -> Option<u64> {
    Some(width.checked_mul(u64::from(bpp))?.checked_add(31)? / 32 * 4)
}

/// ICO: a directory of at least one entry, every entry's data inside the file, and the file
/// ending where the last entry's data ends. An entry holding a PNG has that PNG's pixel data
/// (by the PNG rule); an entry holding a bitmap has its colour and mask arrays, after its
/// header and palette. An entry not understood marks no pixel data, so it is scanned whole.
fn ico(bytes: &[u8], pixels: &mut Vec<Range<usize>>) -> Option<()> {
    let count = usize::from(le16(bytes, 4)?);
    if count == 0 {
        return None;
    }
    let mut end = 6 + 16 * count;
    for entry in 0..count {
        let data = ico_entry(bytes, entry)?;
        end = end.max(data.end);
        if let Some(entry_bytes) = bytes.get(data.clone()) {
            pixels.extend(
                ico_entry_pixels(entry_bytes)
                    .into_iter()
                    .map(|range| data.start + range.start..data.start + range.end),
            );
        }
    }
    (end == bytes.len()).then_some(())
}

/// Where the data of an ICO's entry number `entry` is, from its directory: after the directory,
/// though perhaps past the end of the file.
fn ico_entry(bytes: &[u8], entry: usize) -> Option<Range<usize>> {
    let directory_end = 6 + 16 * usize::from(le16(bytes, 4)?);
    let base = 6 + 16 * entry;
    let size = usize_of(le32(bytes, base + 8)?)?;
    let offset = usize_of(le32(bytes, base + 12)?)?;
    (offset >= directory_end).then_some(offset..offset.checked_add(size)?)
}

/// The pixel data of one ICO entry's `data`, relative to its start.
fn ico_entry_pixels(data: &[u8]) -> Vec<Range<usize>> {
    let mut pixels = Vec::new();
    if data.starts_with(PNG_SIGNATURE) {
        if png(data, &mut pixels).is_none() {
            pixels.clear();
        }
        return pixels;
    }
    let masks = || -> Option<Range<usize>> {
        let header = le32(data, 0)?;
        if header < 40 {
            return None;
        }
        let width = u64::from(le32(data, 4)?);
        // The height counts the colour array and the mask array.
        let height = u64::from((le32(data, 8)? as i32).unsigned_abs() / 2);
        let bpp = le16(data, 14)?;
        let compression = le32(data, 16)?;
        let mut colors = u64::from(le32(data, 32)?);
        if colors == 0 && bpp <= 8 {
            colors = 1 << bpp;
        }
        let bit_fields = if compression == 3 && header == 40 {
            12
        } else {
            0
        };
        let start = u64::from(header) + colors * 4 + bit_fields;
        let arrays = (stride(width, bpp)? + stride(width, 1)?).checked_mul(height)?;
        let start = usize::try_from(start).ok()?;
        Some(start..start.saturating_add(usize::try_from(arrays).ok()?))
    };
    pixels.extend(masks());
    pixels
}

/// Markup in the parts of an image where text can hide (a PNG text chunk holding a page, say):
/// each of `text` (from [`check`]) is searched, case-insensitively, for `<html`, `<script`,
/// `<!doctype`, `<iframe`, `<?xml` and `<svg` followed by a space or `>`. Pixel data is never
/// searched: compressed pixels match a needle by chance about once in 10^9 bytes, which would
/// refuse honest photos.
pub(crate) fn holds_markup(bytes: &[u8], text: &[Range<usize>]) -> bool {
    text.iter()
        .any(|range| bytes.get(range.clone()).is_some_and(markup_in))
}

fn markup_in(bytes: &[u8]) -> bool {
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

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn zlib_zeros(len: usize) -> Vec<u8> {
        let mut deflate = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        deflate.write_all(&vec![0; len]).unwrap();
        deflate.finish().unwrap()
    }

    fn refusal() -> MediaError {
        MediaError::OverInflated {
            part: "pixel data",
            limit: 30_100,
        }
    }

    #[test]
    fn an_inflation_stops_one_byte_past_its_bound() {
        // 4 MiB from about 4 KB, fed in chunks as IDAT chunks come.
        let stream = zlib_zeros(4 << 20);
        let mut inflate = BoundedInflate::new(30_100, refusal());
        let mut scratch = vec![0; SCRATCH_BYTES];
        let mut fed = stream.chunks(1000);
        let refused = fed.find_map(|piece| inflate.feed(piece, &mut scratch).err());
        assert_eq!(refused, Some(refusal()));
        assert_eq!(
            inflate.produced(),
            30_101,
            "no more is inflated than it takes"
        );
        assert!(inflate.inflater.total_in() < 1000, "nor read");
    }

    #[test]
    fn an_inflation_within_its_bound_runs_to_the_end_of_its_stream() {
        let stream = zlib_zeros(30_100);
        let trailing = [stream.as_slice(), &zlib_zeros(1 << 20)].concat();
        let mut inflate = BoundedInflate::new(30_100, refusal());
        let mut scratch = vec![0; SCRATCH_BYTES];
        for piece in trailing.chunks(7) {
            inflate.feed(piece, &mut scratch).unwrap();
        }
        assert_eq!(
            inflate.produced(),
            30_100,
            "bytes after its end are not inflated"
        );
    }

    #[test]
    fn what_a_header_implies_counts_each_row_and_each_pass() {
        let header = |width: u32, height: u32, format: [u8; 5]| {
            [&width.to_be_bytes()[..], &height.to_be_bytes(), &format].concat()
        };
        let cases = [
            (header(100, 100, [8, 2, 0, 0, 0]), Some((30_000, 100))),
            (header(100, 100, [8, 2, 0, 0, 1]), Some((30_000, 188))),
            (header(15, 3, [1, 0, 0, 0, 0]), Some((6, 3))),
            (header(3, 1, [16, 6, 0, 0, 0]), Some((24, 1))),
            // A 1 x 1 image interlaced has only the first pass.
            (header(1, 1, [8, 3, 0, 0, 1]), Some((1, 1))),
            (header(1, 1, [16, 3, 0, 0, 0]), None),
            (header(1, 1, [8, 2, 0, 0, 2]), None),
        ];
        for (bytes, implied) in cases {
            assert_eq!(png_image_bytes(&bytes), implied, "{bytes:?}");
        }
    }
}
