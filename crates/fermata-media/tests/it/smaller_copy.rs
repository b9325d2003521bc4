//! An image over its store limit is stored as a smaller copy of itself, of the same type, with
//! what the original was; what cannot be made smaller is refused.

use crate::support;

use fermata_media::{
    DecodeLimits, MediaError, MediaType, Original, fit, inspect_attachment, inspect_document_image,
};
use support::*;

#[test]
fn an_image_over_the_limit_becomes_a_smaller_copy_that_fits() {
    let limit = 150_000;
    for (format, media_type) in [
        (image::ImageFormat::Png, MediaType::Png),
        (image::ImageFormat::Jpeg, MediaType::Jpeg),
        (image::ImageFormat::WebP, MediaType::Webp),
        (image::ImageFormat::Bmp, MediaType::Bmp),
    ] {
        let bytes = encode(&noise(600, 400), format);
        assert!(
            bytes.len() > limit,
            "{media_type} must start over the limit"
        );
        let inspected = inspect_document_image(&bytes, DecodeLimits::default()).unwrap();
        let size = bytes.len() as u64;
        let fitted = fit(bytes, inspected, limit, DecodeLimits::default()).unwrap();
        assert!(
            fitted.bytes.len() <= limit,
            "{media_type}: {}",
            fitted.bytes.len()
        );
        assert_eq!(fitted.media_type, media_type, "the copy keeps its type");
        assert_eq!(
            fitted.original,
            Some(Original {
                size,
                width: 600,
                height: 400
            })
        );
        // The copy is itself an image that passes every check, at the dimensions reported.
        let again = inspect_document_image(&fitted.bytes, DecodeLimits::default()).unwrap();
        assert_eq!(again.media_type, media_type);
        assert_eq!(again.dimensions, fitted.dimensions);
        let (width, height) = fitted.dimensions.unwrap();
        assert!(width < 600 && height < 400);
        // Within a pixel of the original's aspect ratio.
        assert!((f64::from(width) / f64::from(height) - 1.5).abs() < 0.02);
    }
}

#[test]
fn an_image_within_the_limit_is_stored_as_it_is() {
    let bytes = png(64, 64);
    let inspected = inspect_attachment(&bytes, DecodeLimits::default()).unwrap();
    let fitted = fit(
        bytes.clone(),
        inspected,
        bytes.len(),
        DecodeLimits::default(),
    )
    .unwrap();
    assert_eq!(fitted.bytes, bytes);
    assert_eq!(fitted.original, None);
}

#[test]
fn text_gifs_and_avif_are_never_copied() {
    let text = b"a long text file\n".repeat(100);
    let animated = gif(64, 64);
    let container = avif();
    for (bytes, inspected) in [
        (
            text.clone(),
            inspect_attachment(&text, DecodeLimits::default()).unwrap(),
        ),
        (
            animated.clone(),
            inspect_attachment(&animated, DecodeLimits::default()).unwrap(),
        ),
        (
            container.clone(),
            inspect_document_image(&container, DecodeLimits::default()).unwrap(),
        ),
    ] {
        let size = bytes.len();
        assert_eq!(
            fit(bytes, inspected, 10, DecodeLimits::default()),
            Err(MediaError::CannotShrink { size, limit: 10 })
        );
    }
}
