//! Thumbnails at every width for every decodable type, never wider than the image, GIFs and
//! AVIF whole, and the cache: hit on the second read, bounded by bytes.

use crate::support;

use std::sync::Arc;

use fermata_media::{DecodeLimits, MediaError, MediaType, Served, Thumbnails, WIDTHS, Width};
use support::*;

fn thumbnails() -> Thumbnails {
    Thumbnails::new(64 << 20, DecodeLimits::default())
}

#[test]
fn the_widths_are_slacks_and_no_others() {
    assert_eq!(WIDTHS, [64, 80, 160, 360, 480, 720, 800, 960, 1024]);
    for width in WIDTHS {
        assert_eq!(Width::new(width).unwrap().pixels(), width);
    }
    for width in [0, 1, 63, 100, 400, 1025, 2048] {
        assert_eq!(Width::new(width), Err(MediaError::UnknownWidth));
    }
}

#[test]
fn every_width_of_every_decodable_type_keeps_the_aspect_ratio() {
    let cache = thumbnails();
    let originals = [
        // Wider than the widest thumbnail, so every width is a copy.
        (png(1100, 275), MediaType::Png, (1100, 275)),
        (jpeg(1100, 275), MediaType::Jpeg, (1100, 275)),
        (webp(1100, 275), MediaType::Webp, (1100, 275)),
        (bmp(1100, 275), MediaType::Bmp, (1100, 275)),
        (ico(256, 192), MediaType::Ico, (256, 192)),
    ];
    for (bytes, media_type, (width, height)) in &originals {
        for target in WIDTHS {
            let key = format!("{media_type}");
            let served = cache
                .serve(&key, bytes, *media_type, Width::new(target).unwrap())
                .unwrap();
            if target >= *width {
                assert_eq!(
                    served,
                    Served::Original,
                    "{media_type} at {target}: never wider than the image"
                );
                continue;
            }
            let Served::Thumbnail(thumbnail) = served else {
                panic!("{media_type} at {target}: expected a thumbnail");
            };
            let expected_height =
                (f64::from(*height) * f64::from(target) / f64::from(*width)).round() as u32;
            assert_eq!(
                (thumbnail.width, thumbnail.height),
                (target, expected_height)
            );
            assert_eq!(
                dimensions(&thumbnail.bytes),
                (target, expected_height),
                "{media_type} at {target}"
            );
            let made_as = if *media_type == MediaType::Jpeg {
                MediaType::Jpeg
            } else {
                MediaType::Png
            };
            assert_eq!(thumbnail.media_type, made_as);
            assert_eq!(
                image::guess_format(&thumbnail.bytes).unwrap(),
                if made_as == MediaType::Jpeg {
                    image::ImageFormat::Jpeg
                } else {
                    image::ImageFormat::Png
                }
            );
        }
    }
}

#[test]
fn a_width_over_the_images_own_gets_the_image() {
    let cache = thumbnails();
    let small = png(300, 200);
    for target in [360, 480, 1024] {
        assert_eq!(
            cache
                .serve("small", &small, MediaType::Png, Width::new(target).unwrap())
                .unwrap(),
            Served::Original
        );
    }
    // Exactly the image's width is the image too.
    let exact = png(480, 100);
    assert_eq!(
        cache
            .serve("exact", &exact, MediaType::Png, Width::new(480).unwrap())
            .unwrap(),
        Served::Original
    );
}

#[test]
fn gifs_and_avif_are_always_served_whole() {
    let cache = thumbnails();
    let animated = gif(200, 150);
    for target in WIDTHS {
        let width = Width::new(target).unwrap();
        assert_eq!(
            cache
                .serve("gif", &animated, MediaType::Gif, width)
                .unwrap(),
            Served::Original
        );
        assert_eq!(
            cache
                .serve("avif", &avif(), MediaType::Avif, width)
                .unwrap(),
            Served::Original
        );
    }
    assert_eq!(cache.stats().misses, 0, "nothing was decoded or cached");
}

#[test]
fn the_second_read_is_a_cache_hit() {
    let cache = thumbnails();
    let bytes = png(1000, 500);
    let width = Width::new(160).unwrap();
    let Served::Thumbnail(first) = cache.serve("a", &bytes, MediaType::Png, width).unwrap() else {
        panic!("expected a thumbnail");
    };
    assert_eq!((cache.stats().hits, cache.stats().misses), (0, 1));
    let Served::Thumbnail(second) = cache.serve("a", &bytes, MediaType::Png, width).unwrap() else {
        panic!("expected a thumbnail");
    };
    assert!(Arc::ptr_eq(&first, &second), "the cached copy is served");
    assert_eq!((cache.stats().hits, cache.stats().misses), (1, 1));
    // Another width is another entry.
    cache
        .serve("a", &bytes, MediaType::Png, Width::new(64).unwrap())
        .unwrap();
    assert_eq!(cache.stats().entries, 2);
}

#[test]
fn the_cache_is_bounded_by_bytes() {
    // Each thumbnail of noise at 160 pixels is some 50 kB, so this holds three or four.
    let capacity = 200_000;
    let cache = Thumbnails::new(capacity, DecodeLimits::default());
    let width = Width::new(160).unwrap();
    let mut made = 0;
    for n in 0..12 {
        let bytes = encode(&noise(200 + n, 150), image::ImageFormat::Png);
        let Served::Thumbnail(thumbnail) = cache
            .serve(&format!("image-{n}"), &bytes, MediaType::Png, width)
            .unwrap()
        else {
            panic!("expected a thumbnail");
        };
        made += thumbnail.bytes.len();
        let stats = cache.stats();
        assert!(stats.bytes <= capacity, "{stats:?}");
    }
    assert!(made > capacity, "the case must overfill the cache");
    let stats = cache.stats();
    assert!(stats.entries < 12, "older entries were evicted: {stats:?}");
    // The most recent is still there; the first was evicted and is made again.
    let last = encode(&noise(211, 150), image::ImageFormat::Png);
    cache
        .serve("image-11", &last, MediaType::Png, width)
        .unwrap();
    assert_eq!(cache.stats().hits, 1);
    let first = encode(&noise(200, 150), image::ImageFormat::Png);
    cache
        .serve("image-0", &first, MediaType::Png, width)
        .unwrap();
    assert_eq!(cache.stats().hits, 1, "the evicted entry was a miss");
}
