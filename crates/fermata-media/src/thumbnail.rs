//! Thumbnails at Slack's widths, made from the stored image the first time they are read and
//! kept in a cache in memory bounded by bytes: nothing about them is stored, so a restart only
//! makes them again.
//!
//! A width not in [`WIDTHS`] is refused ([`MediaError::UnknownWidth`]) rather than rounded, so
//! every address names one of nine copies and the cache cannot be filled with arbitrary sizes.
//! A width at or over the image's own is answered with the image itself; a GIF (which must keep
//! moving) and an AVIF (which this crate cannot decode without native libraries) are always
//! served whole. A thumbnail of a JPEG is a JPEG; of any other type a PNG.

use std::sync::{Arc, Mutex};

use lru::LruCache;

use crate::decode::{DecodeLimits, decode};
use crate::shrink::encode;
use crate::{MediaError, MediaType};

/// The widths a thumbnail is made at, in pixels.
pub const WIDTHS: [u32; 9] = [64, 80, 160, 360, 480, 720, 800, 960, 1024];

/// One of [`WIDTHS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Width(u32);

impl Width {
    pub fn new(pixels: u32) -> Result<Self, MediaError> {
        if WIDTHS.contains(&pixels) {
            Ok(Width(pixels))
        } else {
            Err(MediaError::UnknownWidth)
        }
    }

    pub fn pixels(self) -> u32 {
        self.0
    }
}

/// A thumbnail as served.
#[derive(Debug, PartialEq, Eq)]
pub struct Thumbnail {
    pub bytes: Vec<u8>,
    pub media_type: MediaType,
    pub width: u32,
    pub height: u32,
}

/// What a read at a width gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Served {
    /// The stored bytes, as they are.
    Original,
    Thumbnail(Arc<Thumbnail>),
}

/// How the cache stands, for tests and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    pub entries: usize,
    pub bytes: usize,
    pub capacity: usize,
    pub hits: u64,
    pub misses: u64,
}

/// What an "image itself" answer costs in the cache: its key and a marker.
const MARKER_BYTES: usize = 64;

/// The thumbnail cache. Keys are the caller's names for stored bytes that never change under
/// that name (a document image's hash, an attachment's ID).
#[derive(Debug)]
pub struct Thumbnails {
    cache: Mutex<Cache>,
    limits: DecodeLimits,
}

#[derive(Debug)]
struct Cache {
    entries: LruCache<(String, Width), Served>,
    stats: CacheStats,
}

impl Thumbnails {
    /// A cache holding at most `capacity` bytes of thumbnails.
    pub fn new(capacity: usize, limits: DecodeLimits) -> Self {
        Thumbnails {
            cache: Mutex::new(Cache {
                entries: LruCache::unbounded(),
                stats: CacheStats {
                    capacity,
                    ..CacheStats::default()
                },
            }),
            limits,
        }
    }

    /// The copy of `bytes` (of `media_type`, stored under `key`) at `width`.
    pub fn serve(
        &self,
        key: &str,
        bytes: &[u8],
        media_type: MediaType,
        width: Width,
    ) -> Result<Served, MediaError> {
        if !media_type.is_resizable() {
            return Ok(Served::Original);
        }
        let entry = (key.to_owned(), width);
        if let Some(served) = self.lock().lookup(&entry, true) {
            return Ok(served);
        }
        let served = make(bytes, media_type, width, self.limits)?;
        self.lock().insert(entry, served.clone());
        Ok(served)
    }

    /// The copy at `width` of what is stored under `key`, when the cache holds it: a read that
    /// finds one needs no stored bytes and no turn to decode. Counted as a hit when found; a
    /// miss is counted by the [`Self::serve`] that follows.
    pub fn cached(&self, key: &str, width: Width) -> Option<Arc<Thumbnail>> {
        match self.lock().lookup(&(key.to_owned(), width), false)? {
            Served::Thumbnail(thumbnail) => Some(thumbnail),
            Served::Original => None,
        }
    }

    pub fn stats(&self) -> CacheStats {
        self.lock().stats
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        // The cache holds only copies; after a panic elsewhere it is still consistent enough.
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Cache {
    fn lookup(&mut self, entry: &(String, Width), count_miss: bool) -> Option<Served> {
        let found = self.entries.get(entry).cloned();
        if found.is_some() {
            self.stats.hits += 1;
        } else if count_miss {
            self.stats.misses += 1;
        }
        found
    }

    fn insert(&mut self, entry: (String, Width), served: Served) {
        let weight = weight_of(&entry, &served);
        if weight > self.stats.capacity {
            return;
        }
        if let Some(old) = self.entries.peek(&entry) {
            self.stats.bytes -= weight_of(&entry, old);
        }
        self.stats.bytes += weight;
        self.entries.put(entry, served);
        while self.stats.bytes > self.stats.capacity {
            let Some((key, evicted)) = self.entries.pop_lru() else {
                break;
            };
            self.stats.bytes -= weight_of(&key, &evicted);
        }
        self.stats.entries = self.entries.len();
    }
}

fn weight_of(entry: &(String, Width), served: &Served) -> usize {
    entry.0.len()
        + match served {
            Served::Original => MARKER_BYTES,
            Served::Thumbnail(thumbnail) => thumbnail.bytes.len() + MARKER_BYTES,
        }
}

/// Makes the copy at `width`, or says the image itself is the answer.
fn make(
    bytes: &[u8],
    media_type: MediaType,
    width: Width,
    limits: DecodeLimits,
) -> Result<Served, MediaError> {
    let image = decode(bytes, media_type, limits)?;
    let target = width.pixels();
    if image.width() <= target {
        return Ok(Served::Original);
    }
    let height = ((u64::from(image.height()) * u64::from(target) + u64::from(image.width()) / 2)
        / u64::from(image.width()))
    .max(1);
    let height = u32::try_from(height).unwrap_or(u32::MAX);
    // Averaging into the target size allocates only the thumbnail; a filtered resize would first
    // make a floating-point copy as wide as the original.
    let resized = image.thumbnail_exact(target, height);
    let kind = if media_type == MediaType::Jpeg {
        MediaType::Jpeg
    } else {
        MediaType::Png
    };
    Ok(Served::Thumbnail(Arc::new(Thumbnail {
        bytes: encode(&resized, kind)?,
        media_type: kind,
        width: target,
        height,
    })))
}
