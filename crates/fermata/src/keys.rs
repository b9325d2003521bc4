//! Loading and saving the encryption keyring: the data folder's key file (created with mode 0600
//! on first start), a configured key file, or `FERMATA_KEYS`. Key material is never printed.

use std::io::Write;
use std::path::Path;

use fermata_accounts::{KeyringHandle, Reload};
use fermata_crypto::Keyring;

use crate::config::{KEYS_VAR, KeySource, ensure_data_dir};
use crate::failure::Failure;

/// Loads the keyring, creating the default key file when it is missing.
pub(crate) fn load(source: &KeySource) -> Result<Keyring, Failure> {
    match source {
        KeySource::Environment => {
            let spec = zeroize::Zeroizing::new(std::env::var(KEYS_VAR).unwrap_or_default());
            Keyring::from_spec(&spec)
                .map_err(|error| Failure::config(format!("invalid setting `{KEYS_VAR}`: {error}")))
        }
        KeySource::File { path, create } => {
            if *create && !path.exists() {
                let keyring = Keyring::generate();
                if let Some(folder) = path.parent() {
                    ensure_data_dir(folder).map_err(|error| {
                        Failure::runtime(format!("cannot create {}: {error}", folder.display()))
                    })?;
                }
                save(path, &keyring)?;
                // A warning, so that a command (which logs only warnings) shows it too: the
                // operator must act on it.
                tracing::warn!(file = %path.display(), "created a new encryption key file; back it up apart from the database");
                return Ok(keyring);
            }
            read_file(path)
        }
    }
}

/// A reloader for a key file, so a running server picks up a key added by `fermata keys rotate`.
/// `seen` is the file's stamp taken before the keyring in use was read.
fn reloader(source: &KeySource, seen: Option<FileStamp>) -> Option<Reload> {
    match source {
        KeySource::Environment => None,
        KeySource::File { path, .. } => {
            let path = path.clone();
            // Unless forced, the file is read again only when its stamp moves, so sealing a
            // session costs one `stat`, not a parse of the key file.
            let seen = std::sync::Mutex::new(seen);
            Some(Box::new(move |force| {
                let mut seen = seen
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let now = stamp(&path);
                if !force && now.is_some() && *seen == now {
                    return Ok(None);
                }
                let keyring = read_file(&path)?;
                *seen = now;
                Ok(Some(keyring))
            }))
        }
    }
}

/// The keyring behind a handle that reloads it from its file when needed.
pub(crate) fn handle(source: &KeySource) -> Result<KeyringHandle, Failure> {
    // The stamp is taken first: a rotation between it and the read is then seen as a change.
    let seen = match source {
        KeySource::File { path, .. } => stamp(path),
        KeySource::Environment => None,
    };
    let keyring = load(source)?;
    Ok(KeyringHandle::new(keyring, reloader(source, seen)))
}

/// What tells a rewritten key file apart: a save always renames a new file into place, so the
/// inode changes even when the modification time does not.
type FileStamp = (std::time::SystemTime, u64, u64);

fn stamp(path: &Path) -> Option<FileStamp> {
    let metadata = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&metadata);
    #[cfg(not(unix))]
    let inode = 0;
    Some((metadata.modified().ok()?, inode, metadata.len()))
}

fn read_file(path: &Path) -> Result<Keyring, Failure> {
    check_private(path)?;
    let text = zeroize::Zeroizing::new(std::fs::read_to_string(path).map_err(|error| {
        Failure::runtime(format!(
            "cannot read the key file {}: {error}",
            path.display()
        ))
    })?);
    Keyring::from_key_file(&text).map_err(|error| {
        Failure::runtime(format!(
            "the key file {} is invalid: {error}",
            path.display()
        ))
    })
}

/// Refuses a key file that others can read, as ssh refuses a private key.
fn check_private(path: &Path) -> Result<(), Failure> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let metadata = std::fs::metadata(path).map_err(|error| {
            Failure::runtime(format!(
                "cannot read the key file {}: {error}",
                path.display()
            ))
        })?;
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(Failure::runtime(format!(
                "the key file {} can be read by others (mode {mode:o}); run `chmod 600` on it",
                path.display()
            )));
        }
    }
    Ok(())
}

/// Writes the keyring to `path` with mode 0600, atomically: a new file beside it, then a rename.
pub(crate) fn save(path: &Path, keyring: &Keyring) -> Result<(), Failure> {
    let failed = |error: std::io::Error| {
        Failure::runtime(format!(
            "cannot write the key file {}: {error}",
            path.display()
        ))
    };
    // A temporary name of its own for each save, created new (never through an existing file
    // or link), so two saves at once never rename each other's half-written file into place.
    let temporary = path.with_extension(format!("toml.{}.new", uuid::Uuid::new_v4().simple()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&temporary).map_err(failed)?;
    let written = file
        .write_all(keyring.to_key_file().as_bytes())
        .and_then(|()| file.sync_all())
        .and_then(|()| {
            drop(file);
            std::fs::rename(&temporary, path)
        });
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(failed(error));
    }
    // The rename is durable once the folder is synced.
    if let Some(folder) = path
        .parent()
        .and_then(|folder| std::fs::File::open(folder).ok())
    {
        let _ = folder.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reloader_reads_the_file_again_only_after_it_changed() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("keys.toml");
        let mut keyring = Keyring::generate();
        save(&path, &keyring).unwrap();
        let source = KeySource::File {
            path: path.clone(),
            create: false,
        };
        let reload =
            reloader(&source, stamp(&path)).expect("a key file can change under a running server");
        assert!(
            reload(false).unwrap().is_none(),
            "unchanged file is not read again"
        );
        assert!(reload(true).unwrap().is_some(), "a forced reload reads it");

        // A save renames a new file into place, so the change shows even within one clock tick.
        let added = keyring.rotate();
        save(&path, &keyring).unwrap();
        let reloaded = reload(false)
            .unwrap()
            .expect("a rotated file is read again");
        assert_eq!(reloaded.current_version(), added);
        assert!(reload(false).unwrap().is_none());
        let leftovers = std::fs::read_dir(folder.path()).unwrap().count();
        assert_eq!(
            leftovers, 1,
            "no temporary file is left beside the key file"
        );
    }
}
