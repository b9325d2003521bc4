//! A backup's manifest, `fermata-backup.json`: what the folder holds and how to check it (the
//! format and its version, the engine, the migrations applied, each file's size and SHA-256), so
//! that a restore refuses what it cannot use before it touches anything.

use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::failure::Failure;

/// The manifest's file name inside a backup folder.
pub(crate) const MANIFEST_FILE: &str = "fermata-backup.json";
/// What every manifest says it is.
const FORMAT: &str = "fermata-backup";
/// The manifest version this release writes; it reads this one only.
const VERSION: u32 = 1;

/// The whole manifest.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Manifest {
    pub format: String,
    pub version: u32,
    /// The release that took it, as `fermata 0.1.0`.
    pub release: String,
    /// `sqlite` or `postgres`.
    pub engine: String,
    /// When the copy's consistent state was taken (RFC 3339, UTC).
    pub taken_at: String,
    /// The migrations the database had applied, by version.
    pub migrations: Vec<i64>,
    /// How many documents there were when the backup started.
    pub documents: usize,
    pub database: FileEntry,
    /// The key file, or why it is not in the backup.
    pub keys: Part<KeysEntry>,
    /// The review artifacts kept on disk, or why they are not in the backup.
    pub artifacts: Part<ArtifactsEntry>,
    /// For PostgreSQL: the major version of the `pg_dump` that wrote the dump, which a
    /// `pg_restore` must match or pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pg_dump_major: Option<u32>,
}

/// A file of the backup, checked before it is used.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileEntry {
    /// Its name inside the backup folder.
    pub file: String,
    pub bytes: u64,
    pub sha256: String,
}

/// A part of the backup that may have been left out, with the reason.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Part<T> {
    Included(T),
    LeftOut { reason: String },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KeysEntry {
    #[serde(flatten)]
    pub file: FileEntry,
    /// Sealed with a passphrase: the restore asks for it.
    pub sealed: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ArtifactsEntry {
    /// The folder's name inside the backup folder.
    pub folder: String,
    pub files: usize,
    pub bytes: u64,
}

impl Manifest {
    pub(crate) fn new(engine: &str) -> Manifest {
        Manifest {
            format: FORMAT.to_owned(),
            version: VERSION,
            release: concat!("fermata ", env!("CARGO_PKG_VERSION")).to_owned(),
            engine: engine.to_owned(),
            taken_at: String::new(),
            migrations: Vec::new(),
            documents: 0,
            database: FileEntry {
                file: String::new(),
                bytes: 0,
                sha256: String::new(),
            },
            keys: Part::LeftOut {
                reason: String::new(),
            },
            artifacts: Part::LeftOut {
                reason: String::new(),
            },
            pg_dump_major: None,
        }
    }

    /// Reads and checks the manifest of the backup folder `folder`.
    pub(crate) fn read(folder: &Path) -> Result<Manifest, Failure> {
        let path = folder.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).map_err(|error| {
            Failure::config(format!(
                "{} is not a Fermata backup: cannot read {MANIFEST_FILE} ({error})",
                folder.display()
            ))
        })?;
        let manifest: Manifest = serde_json::from_str(&text).map_err(|error| {
            Failure::config(format!(
                "{MANIFEST_FILE} in {} does not parse: {error}",
                folder.display()
            ))
        })?;
        if manifest.format != FORMAT {
            return Err(Failure::config(format!(
                "{} is not a Fermata backup (its manifest says {:?})",
                folder.display(),
                manifest.format
            )));
        }
        if manifest.version != VERSION {
            return Err(Failure::config(format!(
                "the backup in {} is of format version {}, which this release ({}) does not \
                 read; restore it with the release that took it ({}) or a later one",
                folder.display(),
                manifest.version,
                concat!("fermata ", env!("CARGO_PKG_VERSION")),
                manifest.release
            )));
        }
        Ok(manifest)
    }

    pub(crate) fn write(&self, folder: &Path) -> Result<(), Failure> {
        let text = serde_json::to_string_pretty(self).expect("a manifest serializes");
        write_synced(&folder.join(MANIFEST_FILE), text.as_bytes())
    }
}

impl FileEntry {
    /// Describes the file `name` inside `folder` as it is now.
    pub(crate) fn of(folder: &Path, name: &str) -> Result<FileEntry, Failure> {
        let (bytes, sha256) = digest(&folder.join(name))?;
        Ok(FileEntry {
            file: name.to_owned(),
            bytes,
            sha256,
        })
    }

    /// Checks the file inside `folder` is the one the manifest describes: a truncated or
    /// changed backup is refused before anything is restored from it.
    pub(crate) fn check(&self, folder: &Path) -> Result<std::path::PathBuf, Failure> {
        if self.file.contains(['/', '\\']) || self.file.starts_with('.') {
            return Err(Failure::config(format!(
                "the backup's manifest names an invalid file {:?}",
                self.file
            )));
        }
        let path = folder.join(&self.file);
        let (bytes, sha256) = digest(&path)?;
        if bytes != self.bytes || sha256 != self.sha256 {
            return Err(Failure::config(format!(
                "{} is not the file the backup wrote ({bytes} bytes, {} expected, or its \
                 SHA-256 differs): the backup is damaged",
                path.display(),
                self.bytes
            )));
        }
        Ok(path)
    }
}

/// The size and SHA-256 (hex) of a file.
fn digest(path: &Path) -> Result<(u64, String), Failure> {
    let unreadable = |error: std::io::Error| {
        Failure::runtime(format!("cannot read {}: {error}", path.display()))
    };
    let mut file = std::fs::File::open(path).map_err(unreadable)?;
    let mut hash = Sha256::new();
    let mut buffer = vec![0u8; 1 << 16];
    let mut bytes = 0u64;
    loop {
        let read = file.read(&mut buffer).map_err(unreadable)?;
        if read == 0 {
            break;
        }
        hash.update(&buffer[..read]);
        bytes += read as u64;
    }
    Ok((bytes, hex::encode(hash.finalize())))
}

/// Writes `bytes` to `path` (a new file) and flushes it to the disk.
pub(crate) fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    use std::io::Write;
    let failed = |error: std::io::Error| {
        Failure::runtime(format!("cannot write {}: {error}", path.display()))
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(failed)?;
    file.write_all(bytes).map_err(failed)?;
    file.sync_all().map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_round_trips_and_a_foreign_one_is_refused() {
        let folder = tempfile::tempdir().unwrap();
        std::fs::write(folder.path().join("database.sqlite"), b"pages").unwrap();
        let mut manifest = Manifest::new("sqlite");
        manifest.database = FileEntry::of(folder.path(), "database.sqlite").unwrap();
        manifest.keys = Part::LeftOut {
            reason: "FERMATA_KEYS".to_owned(),
        };
        manifest.write(folder.path()).unwrap();
        let read = Manifest::read(folder.path()).unwrap();
        assert_eq!(read.engine, "sqlite");
        read.database.check(folder.path()).unwrap();

        std::fs::write(folder.path().join("database.sqlite"), b"page").unwrap();
        let damaged = read.database.check(folder.path()).unwrap_err();
        assert!(
            damaged.message.contains("the backup is damaged"),
            "{damaged}"
        );

        let text = std::fs::read_to_string(folder.path().join(MANIFEST_FILE)).unwrap();
        std::fs::write(
            folder.path().join(MANIFEST_FILE),
            text.replace("\"version\": 1", "\"version\": 2"),
        )
        .unwrap();
        let newer = Manifest::read(folder.path()).unwrap_err();
        assert!(newer.message.contains("format version 2"), "{newer}");
    }
}
