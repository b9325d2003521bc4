//! Files the tests make: every accepted type through the `image` crate's encoders, and
//! hand-built containers for the hostile cases.

#![allow(dead_code, unreachable_pub)]

use std::io::{Cursor, Write};

use image::codecs::gif::GifEncoder;
use image::{DynamicImage, Frame, ImageFormat, RgbaImage};

/// Pixels that do not compress: each channel from a fixed linear congruential sequence.
pub fn noise(width: u32, height: u32) -> DynamicImage {
    let mut state: u32 = 0x2545_f491;
    let mut next = move || {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (state >> 24) as u8
    };
    let mut image = RgbaImage::new(width, height);
    for pixel in image.pixels_mut() {
        *pixel = image::Rgba([next(), next(), next(), 255]);
    }
    DynamicImage::ImageRgba8(image)
}

/// A smooth picture, small when compressed.
pub fn gradient(width: u32, height: u32) -> DynamicImage {
    DynamicImage::ImageRgba8(RgbaImage::from_fn(width, height, |x, y| {
        image::Rgba([(x % 256) as u8, (y % 256) as u8, 128, 255])
    }))
}

pub fn encode(image: &DynamicImage, format: ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    match format {
        ImageFormat::Jpeg => DynamicImage::ImageRgb8(image.to_rgb8())
            .write_to(&mut out, format)
            .unwrap(),
        ImageFormat::Gif => {
            let mut encoder = GifEncoder::new(&mut out);
            let frames = [image.to_rgba8(), image.fliph().to_rgba8()];
            encoder
                .encode_frames(frames.into_iter().map(Frame::new))
                .unwrap();
        }
        _ => image.write_to(&mut out, format).unwrap(),
    }
    out.into_inner()
}

pub fn png(width: u32, height: u32) -> Vec<u8> {
    encode(&gradient(width, height), ImageFormat::Png)
}

pub fn jpeg(width: u32, height: u32) -> Vec<u8> {
    encode(&gradient(width, height), ImageFormat::Jpeg)
}

pub fn webp(width: u32, height: u32) -> Vec<u8> {
    encode(&gradient(width, height), ImageFormat::WebP)
}

/// An animated GIF of two frames.
pub fn gif(width: u32, height: u32) -> Vec<u8> {
    encode(&gradient(width, height), ImageFormat::Gif)
}

pub fn bmp(width: u32, height: u32) -> Vec<u8> {
    encode(&gradient(width, height), ImageFormat::Bmp)
}

pub fn ico(width: u32, height: u32) -> Vec<u8> {
    encode(&gradient(width, height), ImageFormat::Ico)
}

/// A minimal AVIF container: `ftyp` with AVIF brands, an empty `meta` and a small `mdat`.
pub fn avif() -> Vec<u8> {
    let mut out = Vec::new();
    let ftyp = [b"avif".as_slice(), &[0, 0, 0, 0], b"avif", b"mif1"].concat();
    iso_box(&mut out, b"ftyp", &ftyp);
    iso_box(&mut out, b"meta", &[0, 0, 0, 0]);
    iso_box(&mut out, b"mdat", &[1, 2, 3, 4]);
    out
}

pub fn iso_box(out: &mut Vec<u8>, kind: &[u8; 4], body: &[u8]) {
    out.extend_from_slice(&((body.len() + 8) as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(body);
}

/// CRC-32 as PNG computes it.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFF_u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

pub fn png_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let mut crc_input = kind.to_vec();
    crc_input.extend_from_slice(data);
    out.extend_from_slice(&crc_input);
    out.extend_from_slice(&crc32(&crc_input).to_be_bytes());
}

/// A PNG built by hand: the header for `width`x`height` at `bit_depth` and `color_type`, then
/// `rows` (each with its filter byte) compressed into one `IDAT`, and any `extra` chunks after
/// the header.
pub fn handmade_png(
    width: u32,
    height: u32,
    bit_depth: u8,
    color_type: u8,
    row: &[u8],
    rows: u32,
    extra: &[(&[u8; 4], &[u8])],
) -> Vec<u8> {
    let mut deflate = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    for _ in 0..rows {
        deflate.write_all(row).unwrap();
    }
    let pixel_data = deflate.finish().unwrap();
    let mut chunks = extra.to_vec();
    chunks.push((b"IDAT", &pixel_data));
    png_of_chunks(width, height, [bit_depth, color_type, 0, 0, 0], &chunks)
}

/// The header fields after a PNG's dimensions (bit depth, colour type, compression, filter and
/// interlace methods) of 8-bit RGB, and of the same interlaced.
pub const RGB: [u8; 5] = [8, 2, 0, 0, 0];
pub const RGB_INTERLACED: [u8; 5] = [8, 2, 0, 0, 1];

/// A PNG built by hand from its chunks: the header for `width`x`height` with the fields of
/// `format` ([`RGB`], say), then `chunks` in order (the pixel data among them), then the end.
pub fn png_of_chunks(
    width: u32,
    height: u32,
    format: [u8; 5],
    chunks: &[(&[u8; 4], &[u8])],
) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::new();
    header.extend_from_slice(&width.to_be_bytes());
    header.extend_from_slice(&height.to_be_bytes());
    header.extend_from_slice(&format);
    png_chunk(&mut out, b"IHDR", &header);
    for (kind, data) in chunks {
        png_chunk(&mut out, kind, data);
    }
    png_chunk(&mut out, b"IEND", &[]);
    out
}

/// A zlib stream of zeros that inflates to `len` bytes or a block more, written by hand rather
/// than compressed (compressing a gibibyte would take minutes): one block of fixed Huffman
/// codes, a literal zero then matches of 258 bytes at distance 1, repeated, each 1662 bytes
/// that inflate to 263,676.
pub fn zeros_zlib(len: u64) -> Vec<u8> {
    // 1022 matches of 13 bits bring a block (3 bits of header, 7 of end, and the first one's
    // 8-bit literal) to a whole number of bytes, so blocks can be repeated byte for byte.
    const MATCHES: u64 = 1022;
    let block = |literal: bool, last: bool| {
        let mut bits = Bits::default();
        bits.push(u32::from(last), 1);
        // Fixed Huffman codes.
        bits.push(1, 2);
        if literal {
            bits.code(0x30, 8);
        }
        if !last {
            for _ in 0..MATCHES {
                // Length 258 (code 285), then distance 1 (code 0).
                bits.code(0xC5, 8);
                bits.code(0, 5);
            }
        }
        // End of block.
        bits.code(0, 7);
        bits.finish()
    };
    let first = block(true, false);
    let repeated = block(false, false);
    let repeats = len
        .saturating_sub(1 + 258 * MATCHES)
        .div_ceil(258 * MATCHES);
    let inflated = 1 + 258 * MATCHES * (repeats + 1);
    let mut out = vec![0x78, 0x01];
    out.extend_from_slice(&first);
    for _ in 0..repeats {
        out.extend_from_slice(&repeated);
    }
    out.extend_from_slice(&block(false, true));
    // Adler-32 of zeros: the sum of ones, and the sum of those sums.
    let adler = ((inflated % 65_521) << 16) | 1;
    out.extend_from_slice(&(adler as u32).to_be_bytes());
    out
}

/// Bits packed as deflate packs them: values from their lowest bit, Huffman codes from their
/// highest.
#[derive(Default)]
struct Bits {
    out: Vec<u8>,
    pending: u64,
    count: u32,
}

impl Bits {
    fn push(&mut self, value: u32, count: u32) {
        self.pending |= u64::from(value) << self.count;
        self.count += count;
        while self.count >= 8 {
            self.out.push(self.pending as u8);
            self.pending >>= 8;
            self.count -= 8;
        }
    }

    fn code(&mut self, code: u32, length: u32) {
        self.push(code.reverse_bits() >> (32 - length), length);
    }

    fn finish(mut self) -> Vec<u8> {
        if self.count > 0 {
            self.out.push(self.pending as u8);
        }
        self.out
    }
}

/// `bytes` compressed as a zlib stream.
pub fn zlib(bytes: &[u8]) -> Vec<u8> {
    let mut deflate = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    deflate.write_all(bytes).unwrap();
    deflate.finish().unwrap()
}

/// Dimensions of encoded bytes, decoded again with the `image` crate.
pub fn dimensions(bytes: &[u8]) -> (u32, u32) {
    let image = image::load_from_memory(bytes).unwrap();
    (image.width(), image.height())
}
