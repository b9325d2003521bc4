//! The `[media]` table: the byte limits of a document's images and Chat attachments, the size
//! of the thumbnail cache, and what decoding may take (a pixel budget per decode, how many at
//! once, how long one waits, the upload bodies held at once), into [`MediaSettings`].

use serde::Deserialize;

use std::time::Duration;

use fermata_collab::MediaSettings;

use super::table::{Durations, Table};
use super::{ConfigError, Origin};

/// How long a decode waits for its turn.
const DECODE_QUEUE_WAITS: Durations = Durations {
    range: Duration::from_millis(10)..=Duration::from_secs(600),
    shown: "between 10ms and 10m, such as 5s",
};
/// The smallest pixel budget of one decode: 1 MiB.
const MIN_DECODE_BYTES: u64 = 1 << 20;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileMedia {
    /// Nothing larger is accepted; it is refused before decoding.
    max_input_bytes: Option<usize>,
    /// `MAX_STORED_IMAGE_BYTES`: the most an image a tool made is stored as.
    max_stored_image_bytes: Option<usize>,
    /// `CHAT_ATTACHMENT_MAX_BYTES`: the most a Chat attachment is stored as.
    attachment_max_bytes: Option<usize>,
    thumbnail_cache_bytes: Option<usize>,
    /// The pixel budget of one decode.
    max_decode_bytes: Option<u64>,
    decode_concurrency: Option<usize>,
    decode_queue_wait: Option<String>,
    upload_buffer_bytes: Option<usize>,
}

/// The settings, each limit of what is stored at most the input bound.
pub(super) fn media_settings(
    file: Option<&FileMedia>,
    origin: &Origin,
) -> Result<MediaSettings, ConfigError> {
    let defaults = MediaSettings::default();
    let Some(file) = file else {
        return Ok(defaults);
    };
    let table = Table::new("media", origin);
    let settings = MediaSettings {
        max_input_bytes: table
            .count("max_input_bytes", file.max_input_bytes, 1..)?
            .unwrap_or(defaults.max_input_bytes),
        max_stored_image_bytes: table
            .count("max_stored_image_bytes", file.max_stored_image_bytes, 1..)?
            .unwrap_or(defaults.max_stored_image_bytes),
        attachment_bytes: table
            .count("attachment_max_bytes", file.attachment_max_bytes, 1..)?
            .unwrap_or(defaults.attachment_bytes),
        thumbnail_cache_bytes: table
            .count("thumbnail_cache_bytes", file.thumbnail_cache_bytes, 1..)?
            .unwrap_or(defaults.thumbnail_cache_bytes),
        decode: {
            let mut decode = defaults.decode;
            decode.max_alloc = table
                .count(
                    "max_decode_bytes",
                    file.max_decode_bytes,
                    MIN_DECODE_BYTES..,
                )?
                .unwrap_or(defaults.decode.max_alloc);
            decode
        },
        decode_concurrency: table
            .count("decode_concurrency", file.decode_concurrency, 1..)?
            .unwrap_or(defaults.decode_concurrency),
        decode_queue_wait: table
            .duration(
                "decode_queue_wait",
                file.decode_queue_wait.as_deref(),
                &DECODE_QUEUE_WAITS,
            )?
            .unwrap_or(defaults.decode_queue_wait),
        upload_buffer_bytes: table
            .count("upload_buffer_bytes", file.upload_buffer_bytes, 1..)?
            .unwrap_or(defaults.upload_buffer_bytes),
        ..defaults
    };
    if settings.upload_buffer_bytes < settings.max_input_bytes {
        return Err(ConfigError::new(
            "media.upload_buffer_bytes",
            origin.clone(),
            format!(
                "must be at least media.max_input_bytes ({}), or the largest upload never fits",
                settings.max_input_bytes
            ),
        ));
    }
    for (key, limit) in [
        ("max_stored_image_bytes", settings.max_stored_image_bytes),
        ("attachment_max_bytes", settings.attachment_bytes),
        ("max_input_bytes", settings.upload_image_bytes),
    ] {
        if limit > settings.max_input_bytes {
            return Err(ConfigError::new(
                format!("media.{key}"),
                origin.clone(),
                format!(
                    "must be at most media.max_input_bytes ({}), and max_input_bytes at least the 1 MiB of an image upload",
                    settings.max_input_bytes
                ),
            ));
        }
    }
    Ok(settings)
}
