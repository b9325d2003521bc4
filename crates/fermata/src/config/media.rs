//! The `[media]` table: the byte limits of a document's images and Chat attachments, and the
//! size of the thumbnail cache, into [`MediaSettings`].

use serde::Deserialize;

use fermata_collab::MediaSettings;

use super::{ConfigError, Origin};

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
    let positive = |key: &str, value: Option<usize>, default: usize| match value {
        None => Ok(default),
        Some(0) => Err(ConfigError::new(
            format!("media.{key}"),
            origin.clone(),
            "must be more than zero",
        )),
        Some(n) => Ok(n),
    };
    let settings = MediaSettings {
        max_input_bytes: positive(
            "max_input_bytes",
            file.max_input_bytes,
            defaults.max_input_bytes,
        )?,
        max_stored_image_bytes: positive(
            "max_stored_image_bytes",
            file.max_stored_image_bytes,
            defaults.max_stored_image_bytes,
        )?,
        attachment_bytes: positive(
            "attachment_max_bytes",
            file.attachment_max_bytes,
            defaults.attachment_bytes,
        )?,
        thumbnail_cache_bytes: positive(
            "thumbnail_cache_bytes",
            file.thumbnail_cache_bytes,
            defaults.thumbnail_cache_bytes,
        )?,
        ..defaults
    };
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
