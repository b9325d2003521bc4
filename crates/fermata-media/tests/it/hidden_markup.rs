//! Markup is looked for where text can hide in an image (metadata chunks, segments and
//! extensions) and never in its pixel data, where compressed bytes spell a needle by chance:
//! each container's metadata with markup is refused, and images whose pixel data holds the
//! bytes `<html` and `<svg ` are accepted.

use crate::support;

use std::io::Write;

use fermata_media::{
    DecodeLimits, Inspected, MediaError, MediaType, inspect_attachment, inspect_document_image,
};
use image::{DynamicImage, ImageFormat, RgbImage};
use support::*;

/// Bytes that a whole-file search for markup finds.
const NEEDLES: &[u8] = b"<html><svg >";

fn attachment(bytes: &[u8]) -> Result<Inspected, MediaError> {
    inspect_attachment(bytes, DecodeLimits::default())
}

fn document_image(bytes: &[u8]) -> Result<Inspected, MediaError> {
    inspect_document_image(bytes, DecodeLimits::default())
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// Asserts `bytes` holds the needles and is accepted as `kind` with `dimensions`.
fn accepted_with_needles(bytes: &[u8], kind: MediaType, dimensions: (u32, u32)) {
    assert!(
        contains(bytes, b"<html") && contains(bytes, b"<svg "),
        "{kind}"
    );
    let found = document_image(bytes).unwrap_or_else(|e| panic!("{kind}: {e}"));
    assert_eq!(found.media_type, kind);
    assert_eq!(found.dimensions, Some(dimensions), "{kind}");
}

fn jpeg_segment(marker: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0xFF, marker];
    out.extend_from_slice(&((payload.len() + 2) as u16).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// `jpeg` with `segment` right after its start-of-image marker.
fn with_segment(jpeg: &[u8], segment: &[u8]) -> Vec<u8> {
    [&jpeg[..2], segment, &jpeg[2..]].concat()
}

fn gif_sub_blocks(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for block in data.chunks(255) {
        out.push(block.len() as u8);
        out.extend_from_slice(block);
    }
    out.push(0);
    out
}

/// `gif` with an extension of `label` holding `data` just before its trailer.
fn with_extension(gif: &[u8], label: u8, header: &[u8], data: &[u8]) -> Vec<u8> {
    let mut out = gif[..gif.len() - 1].to_vec();
    out.extend_from_slice(&[0x21, label]);
    if !header.is_empty() {
        out.push(header.len() as u8);
        out.extend_from_slice(header);
    }
    out.extend_from_slice(&gif_sub_blocks(data));
    out.push(0x3B);
    out
}

fn riff_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(kind);
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(data);
    if data.len() % 2 == 1 {
        out.push(0);
    }
}

/// An extended WebP of `width`x`height`: `VP8X` announcing XMP, the image's own chunks, then
/// an `XMP ` chunk holding `xmp`.
fn webp_with_xmp(width: u32, height: u32, xmp: &[u8]) -> Vec<u8> {
    let simple = webp(width, height);
    let mut vp8x = vec![0x04, 0, 0, 0];
    vp8x.extend_from_slice(&(width - 1).to_le_bytes()[..3]);
    vp8x.extend_from_slice(&(height - 1).to_le_bytes()[..3]);
    let mut body = b"WEBP".to_vec();
    riff_chunk(&mut body, b"VP8X", &vp8x);
    body.extend_from_slice(&simple[12..]);
    riff_chunk(&mut body, b"XMP ", xmp);
    let mut out = b"RIFF".to_vec();
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

fn xmp_packet(inside: &str) -> Vec<u8> {
    format!(
        "<?xpacket begin='' id='W5M0MpCehiHzreSzNTczkc9d'?><x:xmpmeta xmlns:x='adobe:ns:meta/'>\
         <rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'>{inside}</rdf:RDF>\
         </x:xmpmeta><?xpacket end='w'?>"
    )
    .into_bytes()
}

#[test]
fn markup_in_a_png_text_chunk_is_refused() {
    for (kind, text) in [
        (b"tEXt", b"Comment\0<svg onload=alert(1)>".as_slice()),
        (b"iTXt", b"XML:com.adobe.xmp\0\0\0\0\0<?xml version='1.0'?>"),
        (b"zzZz", b"an unknown chunk <SCRIPT>alert(1)</SCRIPT>"),
    ] {
        let file = handmade_png(2, 2, 8, 0, &[0, 1, 2], 2, &[(kind, text)]);
        assert_eq!(attachment(&file), Err(MediaError::Markup), "{kind:?}");
    }
    let clean = handmade_png(2, 2, 8, 0, &[0, 1, 2], 2, &[(b"tEXt", b"Comment\0a < b")]);
    assert_eq!(attachment(&clean).unwrap().media_type, MediaType::Png);
}

#[test]
fn markup_in_a_jpeg_comment_or_app_segment_is_refused() {
    let photo = jpeg(16, 16);
    let comment = with_segment(&photo, &jpeg_segment(0xFE, b"<html><script>x</script>"));
    assert_eq!(attachment(&comment), Err(MediaError::Markup));
    let mut app1 = b"http://ns.adobe.com/xap/1.0/\0".to_vec();
    app1.extend_from_slice(&xmp_packet("<svg xmlns='http://www.w3.org/2000/svg'/>"));
    let xmp = with_segment(&photo, &jpeg_segment(0xE1, &app1));
    assert_eq!(attachment(&xmp), Err(MediaError::Markup));
    // The same segments without markup are fine, so the markup is what was refused.
    let mut app1 = b"http://ns.adobe.com/xap/1.0/\0".to_vec();
    app1.extend_from_slice(&xmp_packet(""));
    let clean = with_segment(&photo, &jpeg_segment(0xE1, &app1));
    let clean = with_segment(&clean, &jpeg_segment(0xFE, b"a photo, 2 < 3"));
    assert_eq!(attachment(&clean).unwrap().media_type, MediaType::Jpeg);
    // Markup in a segment of a later picture of a multi-picture file.
    let two = [photo.as_slice(), &comment].concat();
    assert_eq!(attachment(&two), Err(MediaError::Markup));
}

#[test]
fn a_jpeg_is_one_or_more_whole_streams() {
    let photo = jpeg(16, 16);
    // A multi-picture file: a further picture after the first one's end.
    let two = [photo.as_slice(), &jpeg(8, 8)].concat();
    assert_eq!(attachment(&two).unwrap().dimensions, Some((16, 16)));
    // Anything else after the end, even ending like a JPEG, is refused.
    let trailing = [photo.as_slice(), b"<html></html>\xff\xd9"].concat();
    assert_eq!(
        attachment(&trailing),
        Err(MediaError::Malformed {
            kind: MediaType::Jpeg
        })
    );
    // A segment whose length runs past the end.
    let mut long = with_segment(&photo, &jpeg_segment(0xFE, b"note"));
    long[5] = 0xFF;
    assert!(matches!(
        attachment(&long),
        Err(MediaError::Malformed { .. })
    ));
}

#[test]
fn markup_in_a_gif_extension_is_refused() {
    let picture = gif(16, 16);
    let comment = with_extension(&picture, 0xFE, &[], b"<html><body>hi</body></html>");
    assert_eq!(attachment(&comment), Err(MediaError::Markup));
    let application = with_extension(
        &picture,
        0xFF,
        b"XMP DataXMP",
        &xmp_packet("<iframe src='x'></iframe>"),
    );
    assert_eq!(attachment(&application), Err(MediaError::Markup));
    let plain_text = with_extension(&picture, 0x01, &[0; 12], b"<!DOCTYPE html>");
    assert_eq!(attachment(&plain_text), Err(MediaError::Markup));
    let clean = with_extension(&picture, 0xFE, &[], b"made with care, 1 < 2");
    assert_eq!(attachment(&clean).unwrap().media_type, MediaType::Gif);
}

#[test]
fn markup_in_a_webp_xmp_chunk_is_refused() {
    let clean = webp_with_xmp(16, 16, &xmp_packet(""));
    assert_eq!(attachment(&clean).unwrap().dimensions, Some((16, 16)));
    let hostile = webp_with_xmp(16, 16, &xmp_packet("<script>alert(1)</script>"));
    assert_eq!(attachment(&hostile), Err(MediaError::Markup));
}

#[test]
fn markup_in_an_avif_box_other_than_its_data_is_refused() {
    let mut hostile = Vec::new();
    let ftyp = [b"avif".as_slice(), &[0, 0, 0, 0], b"avif", b"mif1"].concat();
    iso_box(&mut hostile, b"ftyp", &ftyp);
    iso_box(&mut hostile, b"meta", b"<svg onload=alert(1)>");
    iso_box(&mut hostile, b"mdat", &[1, 2, 3, 4]);
    assert_eq!(document_image(&hostile), Err(MediaError::Markup));
    let mut data = Vec::new();
    iso_box(&mut data, b"ftyp", &ftyp);
    iso_box(&mut data, b"meta", &[0, 0, 0, 0]);
    iso_box(&mut data, b"mdat", NEEDLES);
    assert!(contains(&data, b"<html"));
    assert_eq!(document_image(&data).unwrap().media_type, MediaType::Avif);
}

/// A grey PNG whose rows are `NEEDLES`, stored uncompressed (deflate's stored blocks, as an
/// encoder at level 0 writes them), so its `IDAT` holds the needles as they are; and the same
/// rows as the data of a `tEXt` chunk, if `also_as_text`.
fn png_with_needles(channels: u8, also_as_text: bool) -> (Vec<u8>, u32) {
    let width = NEEDLES.len() as u32 / u32::from(channels);
    let color_type = if channels == 4 { 6 } else { 0 };
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::new();
    header.extend_from_slice(&width.to_be_bytes());
    header.extend_from_slice(&width.to_be_bytes());
    header.extend_from_slice(&[8, color_type, 0, 0, 0]);
    png_chunk(&mut out, b"IHDR", &header);
    if also_as_text {
        png_chunk(
            &mut out,
            b"tEXt",
            &[b"Comment\0".as_slice(), NEEDLES].concat(),
        );
    }
    let mut deflate = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::none());
    for _ in 0..width {
        deflate.write_all(&[0]).unwrap();
        deflate.write_all(NEEDLES).unwrap();
    }
    png_chunk(&mut out, b"IDAT", &deflate.finish().unwrap());
    png_chunk(&mut out, b"IEND", &[]);
    (out, width)
}

#[test]
fn a_png_whose_pixel_data_spells_markup_is_accepted() {
    let (file, width) = png_with_needles(1, false);
    accepted_with_needles(&file, MediaType::Png, (width, width));
    assert_eq!(attachment(&file).unwrap().media_type, MediaType::Png);
    // The same bytes in a text chunk are refused.
    let (file, _) = png_with_needles(1, true);
    assert_eq!(attachment(&file), Err(MediaError::Markup));
}

#[test]
fn an_ico_is_scanned_by_its_embedded_pngs() {
    let ico_of = |png: &[u8], side: u8| {
        let mut out = vec![0, 0, 1, 0, 1, 0, side, side, 0, 0, 1, 0, 32, 0];
        out.extend_from_slice(&(png.len() as u32).to_le_bytes());
        out.extend_from_slice(&22u32.to_le_bytes());
        out.extend_from_slice(png);
        out
    };
    let (png, side) = png_with_needles(4, false);
    accepted_with_needles(&ico_of(&png, side as u8), MediaType::Ico, (side, side));
    let (png, side) = png_with_needles(4, true);
    assert_eq!(
        document_image(&ico_of(&png, side as u8)),
        Err(MediaError::Markup)
    );
}

#[test]
fn a_bmp_is_scanned_outside_its_pixel_array() {
    // Four pixels a row, stored blue, green, red: each row's twelve bytes are the needles.
    let pixels = RgbImage::from_fn(4, 4, |x, _| {
        let at = 3 * x as usize;
        image::Rgb([NEEDLES[at + 2], NEEDLES[at + 1], NEEDLES[at]])
    });
    let file = encode(&DynamicImage::ImageRgb8(pixels), ImageFormat::Bmp);
    accepted_with_needles(&file, MediaType::Bmp, (4, 4));
    // Markup after the pixel array, inside the size the header gives, is refused.
    let mut hostile = bmp(4, 4);
    hostile.extend_from_slice(b"<html></html>");
    let size = hostile.len() as u32;
    hostile[2..6].copy_from_slice(&size.to_le_bytes());
    assert_eq!(document_image(&hostile), Err(MediaError::Markup));
}

/// A GIF of `NEEDLES.len()`x`rows` whose every row is `NEEDLES` as palette indices, its LZW
/// data written with a minimum code size of 7: codes are then eight bits wide, so each literal
/// code is the pixel's byte itself (a clear code every hundred codes keeps them eight bits).
fn gif_with_needles(rows: u16) -> Vec<u8> {
    let width = NEEDLES.len() as u16;
    let mut out = b"GIF89a".to_vec();
    out.extend_from_slice(&width.to_le_bytes());
    out.extend_from_slice(&rows.to_le_bytes());
    // A global colour table of 128 entries.
    out.extend_from_slice(&[0xF6, 0, 0]);
    for index in 0..128u8 {
        out.extend_from_slice(&[index * 2; 3]);
    }
    out.push(0x2C);
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&width.to_le_bytes());
    out.extend_from_slice(&rows.to_le_bytes());
    out.extend_from_slice(&[0, 7]);
    let (clear, end) = (0x80, 0x81);
    let mut codes = Vec::new();
    for (at, &index) in NEEDLES
        .iter()
        .cycle()
        .take(NEEDLES.len() * usize::from(rows))
        .enumerate()
    {
        if at % 100 == 0 {
            codes.push(clear);
        }
        codes.push(index);
    }
    codes.push(end);
    out.extend_from_slice(&gif_sub_blocks(&codes));
    out.push(0x3B);
    out
}

#[test]
fn a_gif_whose_image_data_spells_markup_is_accepted() {
    let file = gif_with_needles(20);
    accepted_with_needles(&file, MediaType::Gif, (NEEDLES.len() as u32, 20));
    let decoded = image::load_from_memory(&file).unwrap().to_luma8();
    assert_eq!(
        decoded.get_pixel(0, 0).0,
        [b'<' * 2],
        "the pixels are the needles"
    );
    // The same bytes in a comment are refused.
    let comment = with_extension(&file, 0xFE, &[], NEEDLES);
    assert_eq!(attachment(&comment), Err(MediaError::Markup));
}

/// The bit at `at`, a zero appended when the bits run out.
fn take(bits: &mut Vec<bool>, at: &mut usize) -> bool {
    if *at == bits.len() {
        bits.push(false);
    }
    *at += 1;
    bits[*at - 1]
}

/// A baseline grey JPEG of `side`x`side` whose entropy-coded data begins with the bytes of
/// `NEEDLES`. Its Huffman tables are chosen so that any ASCII bytes decode: DC categories 0 to
/// 2 have the codes `00`, `01`, `10` and category n > 2 the code of n - 1 ones and a zero; the
/// AC end-of-block is `0` and a coefficient of size n (no zero run) is n ones and a zero. The
/// needles are one block after another; zero bits end the block they stop in, then each
/// further block is `000` (DC difference 0, end of block).
fn jpeg_with_needles(side: u16) -> Vec<u8> {
    let mut bits: Vec<bool> = NEEDLES
        .iter()
        .flat_map(|byte| (0..8).rev().map(move |bit| byte >> bit & 1 == 1))
        .collect();
    // Decode the needles' bits to find where they stop, then end that block with zeros.
    let mut blocks = 0;
    let mut at = 0;
    while at < NEEDLES.len() * 8 {
        let category = if take(&mut bits, &mut at) {
            let mut ones = 1;
            while take(&mut bits, &mut at) {
                ones += 1;
            }
            ones + 1
        } else {
            usize::from(take(&mut bits, &mut at))
        };
        assert!(category <= 8);
        for _ in 0..category {
            take(&mut bits, &mut at);
        }
        let mut coefficients = 0;
        while coefficients < 63 {
            let mut size = 0;
            while take(&mut bits, &mut at) {
                size += 1;
            }
            if size == 0 {
                break;
            }
            assert!(size <= 7);
            for _ in 0..size {
                take(&mut bits, &mut at);
            }
            coefficients += 1;
        }
        blocks += 1;
    }
    let total = usize::from(side / 8) * usize::from(side / 8);
    assert!(blocks < total);
    for _ in blocks..total {
        bits.extend([false; 3]);
    }
    while !bits.len().is_multiple_of(8) {
        bits.push(true);
    }
    let mut scan = Vec::new();
    for byte in bits.chunks(8) {
        let byte = byte.iter().fold(0u8, |acc, &bit| acc << 1 | u8::from(bit));
        scan.push(byte);
        if byte == 0xFF {
            scan.push(0);
        }
    }
    assert!(scan.starts_with(NEEDLES));

    let mut out = vec![0xFF, 0xD8];
    out.extend(jpeg_segment(0xDB, &[[0u8].as_slice(), &[1; 64]].concat()));
    let mut frame = vec![8];
    frame.extend_from_slice(&side.to_be_bytes());
    frame.extend_from_slice(&side.to_be_bytes());
    frame.extend_from_slice(&[1, 1, 0x11, 0]);
    out.extend(jpeg_segment(0xC0, &frame));
    let mut dc = vec![0x00, 0, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    dc.extend(0..=8u8);
    out.extend(jpeg_segment(0xC4, &dc));
    let mut ac = vec![0x10, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    ac.extend(0..=7u8);
    out.extend(jpeg_segment(0xC4, &ac));
    out.extend(jpeg_segment(0xDA, &[1, 1, 0x00, 0, 63, 0]));
    out.extend_from_slice(&scan);
    out.extend_from_slice(&[0xFF, 0xD9]);
    out
}

#[test]
fn a_jpeg_whose_scan_data_spells_markup_is_accepted() {
    let file = jpeg_with_needles(64);
    accepted_with_needles(&file, MediaType::Jpeg, (64, 64));
    assert_eq!(attachment(&file).unwrap().media_type, MediaType::Jpeg);
    // The same bytes in a comment are refused.
    let comment = with_segment(&file, &jpeg_segment(0xFE, NEEDLES));
    assert_eq!(attachment(&comment), Err(MediaError::Markup));
}
