//! What a file is, from its bytes, against hostile files made here: markup under an image's
//! name, polyglots, truncated images, decompression bombs and text that is not plain.

use crate::support;

use fermata_media::{
    DecodeLimits, Inspected, MediaError, MediaType, inspect_attachment, inspect_document_image,
};
use support::*;

fn attachment(bytes: &[u8]) -> Result<Inspected, MediaError> {
    inspect_attachment(bytes, DecodeLimits::default())
}

fn document_image(bytes: &[u8]) -> Result<Inspected, MediaError> {
    inspect_document_image(bytes, DecodeLimits::default())
}

fn kind(result: Result<Inspected, MediaError>) -> MediaType {
    result.unwrap().media_type
}

#[test]
fn every_accepted_type_is_told_from_its_bytes() {
    let cases = [
        (png(40, 30), MediaType::Png),
        (jpeg(40, 30), MediaType::Jpeg),
        (webp(40, 30), MediaType::Webp),
        (gif(40, 30), MediaType::Gif),
        (bmp(40, 30), MediaType::Bmp),
        (ico(40, 30), MediaType::Ico),
    ];
    for (bytes, expected) in &cases {
        let found = document_image(bytes).unwrap();
        assert_eq!(found.media_type, *expected);
        assert_eq!(found.dimensions, Some((40, 30)), "{expected}");
    }
    assert_eq!(
        document_image(&avif()).unwrap(),
        Inspected {
            media_type: MediaType::Avif,
            dimensions: None
        },
        "AVIF is checked as a container and never decoded"
    );
    for (bytes, expected) in &cases[..4] {
        assert_eq!(kind(attachment(bytes)), *expected);
    }
    assert_eq!(kind(attachment(b"plain notes\n")), MediaType::Text);
}

#[test]
fn attachments_take_only_png_jpeg_webp_gif_and_text() {
    for bytes in [bmp(8, 8), ico(8, 8), avif()] {
        assert!(
            matches!(attachment(&bytes), Err(MediaError::Unsupported { .. })),
            "an attachment of a document-only type was accepted"
        );
    }
    // Text that merely begins like another type's signature is text.
    assert_eq!(kind(attachment(b"BMW and ICO notes")), MediaType::Text);
    assert!(matches!(
        document_image(b"plain notes"),
        Err(MediaError::Unsupported { .. })
    ));
    assert!(matches!(
        attachment(b""),
        Err(MediaError::Unsupported { .. })
    ));
    // An ISO media file that is not AVIF (an MP4) is refused.
    let mut mp4 = Vec::new();
    iso_box(
        &mut mp4,
        b"ftyp",
        &[b"mp42".as_slice(), &[0, 0, 0, 0], b"isom"].concat(),
    );
    iso_box(&mut mp4, b"mdat", &[0; 4]);
    assert!(matches!(
        document_image(&mp4),
        Err(MediaError::Unsupported { .. })
    ));
}

#[test]
fn html_and_svg_under_an_image_name_are_refused() {
    let files: [&[u8]; 7] = [
        b"<!DOCTYPE html><html><body><script>alert(1)</script></body></html>",
        b"<html><img src=x onerror=alert(1)>",
        b"<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"alert(1)\"/>",
        b"<?xml version=\"1.0\"?><svg xmlns=\"http://www.w3.org/2000/svg\"></svg>",
        b"\xef\xbb\xbf  \n\t<SVG><script>alert(1)</script></SVG>",
        b"<script>alert(1)</script>",
        b"   <!-- a comment first --><div>x</div>",
    ];
    for file in files {
        assert_eq!(attachment(file), Err(MediaError::Markup), "{file:?}");
        assert_eq!(document_image(file), Err(MediaError::Markup), "{file:?}");
    }
    // Text that has a `<` but does not begin like markup is text.
    assert_eq!(kind(attachment(b"<3 the new plan, a < b")), MediaType::Text);
}

#[test]
fn a_png_that_is_also_a_page_is_refused() {
    let page = b"<html><body><script>alert(document.cookie)</script></body></html>";
    // Markup in a text chunk of an otherwise valid PNG.
    let mut text_chunk = b"Comment\0".to_vec();
    text_chunk.extend_from_slice(page);
    let polyglot = handmade_png(2, 2, 8, 0, &[0, 1, 2], 2, &[(b"tEXt", &text_chunk)]);
    assert_eq!(attachment(&polyglot), Err(MediaError::Markup));
    assert_eq!(document_image(&polyglot), Err(MediaError::Markup));
    // The same PNG without the page is fine, so the page is what was refused.
    let clean = handmade_png(2, 2, 8, 0, &[0, 1, 2], 2, &[]);
    assert_eq!(kind(attachment(&clean)), MediaType::Png);
    // A page after the PNG's end.
    let mut trailing = png(16, 16);
    trailing.extend_from_slice(page);
    assert_eq!(
        attachment(&trailing),
        Err(MediaError::Malformed {
            kind: MediaType::Png
        })
    );
    // A page first with a PNG inside it is markup, whatever follows.
    let mut page_first = page.to_vec();
    page_first.extend_from_slice(&png(4, 4));
    assert!(attachment(&page_first).is_err());
}

#[test]
fn a_gif_with_html_after_its_trailer_is_refused() {
    let mut file = gif(16, 16);
    assert_eq!(kind(attachment(&file)), MediaType::Gif);
    file.extend_from_slice(b"<html><script>alert(1)</script></html>");
    assert_eq!(
        attachment(&file),
        Err(MediaError::Malformed {
            kind: MediaType::Gif
        })
    );
    // Even one stray byte after the trailer.
    let mut stray = gif(16, 16);
    stray.push(0);
    assert!(attachment(&stray).is_err());
}

#[test]
fn truncated_images_are_refused() {
    let files = [
        (png(64, 64), MediaType::Png),
        (jpeg(64, 64), MediaType::Jpeg),
        (gif(64, 64), MediaType::Gif),
        (webp(64, 64), MediaType::Webp),
        (bmp(64, 64), MediaType::Bmp),
        (ico(64, 64), MediaType::Ico),
        (avif(), MediaType::Avif),
    ];
    for (bytes, media_type) in files {
        for cut in [bytes.len() - 1, bytes.len() / 2, 20] {
            let refused = document_image(&bytes[..cut]);
            assert!(
                matches!(refused, Err(MediaError::Malformed { .. })),
                "{media_type} cut to {cut} of {} bytes: {refused:?}",
                bytes.len()
            );
        }
    }
}

#[test]
fn a_png_claiming_huge_dimensions_is_refused_from_its_header() {
    // A few hundred bytes that claim 100000x100000 pixels of RGB.
    let bomb = handmade_png(100_000, 100_000, 8, 2, &[0, 0, 0, 0], 1, &[]);
    assert!(bomb.len() < 200);
    assert_eq!(attachment(&bomb), Err(MediaError::OverDecodeLimits));
    // Within each side's limit, over the memory limit: 16000x16000 RGBA is 1 GB of pixels.
    let wide = handmade_png(16_000, 16_000, 8, 6, &[0, 0, 0, 0, 0], 1, &[]);
    assert_eq!(document_image(&wide), Err(MediaError::OverDecodeLimits));
}

#[test]
fn a_valid_highly_compressible_huge_png_is_refused_not_decoded() {
    // A complete, valid 15000x15000 black image at one bit a pixel: tens of kilobytes that
    // decode to 225 MB of pixels, over the 192 MiB limit.
    let side = 15_000;
    let mut row = vec![0u8; 1 + side as usize / 8];
    row[0] = 0;
    let bomb = handmade_png(side, side, 1, 0, &row, side, &[]);
    assert!(bomb.len() < 512 * 1024, "{} bytes", bomb.len());
    assert_eq!(attachment(&bomb), Err(MediaError::OverDecodeLimits));
    // The same kind of file within the limits decodes.
    let small = handmade_png(800, 800, 1, 0, &[0; 101], 800, &[]);
    assert_eq!(document_image(&small).unwrap().dimensions, Some((800, 800)));
}

#[test]
fn the_hand_made_zlib_bomb_inflates_to_what_it_says() {
    use std::io::Read as _;
    let stream = zeros_zlib(1 << 20);
    let mut inflated = Vec::new();
    flate2::read::ZlibDecoder::new(stream.as_slice())
        .read_to_end(&mut inflated)
        .unwrap();
    assert!(inflated.len() >= 1 << 20 && inflated.len() < (1 << 20) + 263_677);
    assert!(inflated.iter().all(|&b| b == 0));
}

#[test]
fn a_png_whose_pixel_data_inflates_past_its_header_is_refused() {
    // 100 x 100 RGB: 100 rows of 300 bytes and a filter byte each. This pixel data inflates to
    // a gibibyte from under 7 MB.
    let gibibyte = zeros_zlib(1 << 30);
    assert!(gibibyte.len() < 7 << 20, "{} bytes", gibibyte.len());
    let bomb = png_of_chunks(100, 100, RGB, &[(b"IDAT", &gibibyte)]);
    let refused = Err(MediaError::OverInflated {
        part: "pixel data",
        limit: 30_100,
    });
    assert_eq!(document_image(&bomb), refused);
    assert_eq!(attachment(&bomb), refused);
    // Exactly what the header implies decodes; a byte more is refused. Interlaced, the seven
    // passes of 100 x 100 take 30,000 bytes of pixels and 188 filter bytes; at one bit a pixel,
    // three rows of 15 pixels take two bytes and a filter byte each.
    for (width, height, format, exact) in [
        (100, 100, RGB, 30_100),
        (100, 100, RGB_INTERLACED, 30_188),
        (15, 3, [1, 0, 0, 0, 0], 9),
    ] {
        let exact_data = zlib(&vec![0; exact]);
        let fits = png_of_chunks(width, height, format, &[(b"IDAT", &exact_data)]);
        assert_eq!(
            document_image(&fits).map(|found| found.dimensions),
            Ok(Some((width, height))),
            "{format:?}"
        );
        let over_data = zlib(&vec![0; exact + 1]);
        let over = png_of_chunks(width, height, format, &[(b"IDAT", &over_data)]);
        assert_eq!(
            document_image(&over),
            Err(MediaError::OverInflated {
                part: "pixel data",
                limit: exact as u64
            }),
            "{format:?}"
        );
    }
}

#[test]
fn a_png_whose_colour_profile_inflates_past_its_bound_is_refused() {
    let pixels = zlib(&[0; 30_100]);
    let with_profile = |profile: &[u8]| {
        let chunk = [b"icc\0\0".as_slice(), profile].concat();
        png_of_chunks(100, 100, RGB, &[(b"iCCP", &chunk), (b"IDAT", &pixels)])
    };
    // 64 MiB of profile from 400 KB: the decoder would hold all of it.
    let bomb = with_profile(&zeros_zlib(64 << 20));
    assert_eq!(
        document_image(&bomb),
        Err(MediaError::OverInflated {
            part: "colour profile",
            limit: 4 << 20
        })
    );
    // A profile of an ordinary size is kept.
    let ordinary = with_profile(&zlib(&[0; 3144]));
    assert_eq!(
        document_image(&ordinary).map(|found| found.dimensions),
        Ok(Some((100, 100)))
    );
}

#[test]
fn a_png_bomb_inside_an_ico_is_refused() {
    let bomb = png_of_chunks(100, 100, RGB, &[(b"IDAT", &zeros_zlib(64 << 20))]);
    let mut ico = vec![0, 0, 1, 0, 1, 0];
    // Width and height, colours, reserved, planes, bits a pixel, size, offset.
    ico.extend_from_slice(&[100, 100, 0, 0, 1, 0, 32, 0]);
    ico.extend_from_slice(&(bomb.len() as u32).to_le_bytes());
    ico.extend_from_slice(&22u32.to_le_bytes());
    ico.extend_from_slice(&bomb);
    assert_eq!(
        document_image(&ico),
        Err(MediaError::OverInflated {
            part: "pixel data",
            limit: 30_100
        })
    );
}

#[test]
fn text_must_be_utf8_without_control_characters() {
    let refused: [&[u8]; 6] = [
        b"hello\0world",
        // UTF-16 with and without its byte order mark.
        b"\xff\xfeh\0i\0",
        b"h\0i\0",
        // Invalid UTF-8.
        b"caf\xc3(",
        b"\xc0\xaf",
        b"escape \x1b[31m red",
    ];
    for text in refused {
        assert_eq!(attachment(text), Err(MediaError::NotPlainText), "{text:?}");
    }
    for text in [
        "plain\n",
        "\u{feff}with a byte order mark\r\n",
        "tabs\tand\u{c}form feeds",
        "ünïcödé ✓ 日本語",
    ] {
        assert_eq!(
            kind(attachment(text.as_bytes())),
            MediaType::Text,
            "{text:?}"
        );
    }
}
