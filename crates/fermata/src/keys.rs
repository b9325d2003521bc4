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
                tracing::info!(file = %path.display(), "created a new encryption key file; back it up apart from the database");
                return Ok(keyring);
            }
            read_file(path)
        }
    }
}

/// A reloader for a key file, so a running server picks up a key added by `fermata keys rotate`.
pub(crate) fn reloader(source: &KeySource) -> Option<Reload> {
    match source {
        KeySource::Environment => None,
        KeySource::File { path, .. } => {
            let path = path.clone();
            // The file is read again only when its modification time moves, so sealing a
            // session costs one `stat`, not a parse of the key file.
            let seen = std::sync::Mutex::new(modified(&path));
            Some(Box::new(move || {
                let now = modified(&path);
                let mut seen = seen
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if now.is_some() && *seen == now {
                    return Ok(None);
                }
                let keyring = read_file(&path).map_err(|failure| failure.message)?;
                *seen = now;
                Ok(Some(keyring))
            }))
        }
    }
}

/// The keyring behind a handle that reloads it from its file when needed.
pub(crate) fn handle(source: &KeySource) -> Result<KeyringHandle, Failure> {
    Ok(KeyringHandle::new(load(source)?, reloader(source)))
}

fn modified(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path)
        .and_then(|metadata| metadata.modified())
        .ok()
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
    let temporary = path.with_extension("toml.new");
    // A leftover temporary file (or a link planted in its place) is never written through: it
    // is removed and the file is created anew, so the mode below always applies.
    match std::fs::remove_file(&temporary) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(failed(error)),
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&temporary).map_err(failed)?;
    file.write_all(keyring.to_key_file().as_bytes())
        .map_err(failed)?;
    file.sync_all().map_err(failed)?;
    drop(file);
    std::fs::rename(&temporary, path).map_err(failed)?;
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
        let reload = reloader(&source).expect("a key file can change under a running server");
        assert!(
            reload().unwrap().is_none(),
            "unchanged file is not read again"
        );

        std::thread::sleep(std::time::Duration::from_millis(20));
        let added = keyring.rotate();
        save(&path, &keyring).unwrap();
        let reloaded = reload().unwrap().expect("a rotated file is read again");
        assert_eq!(reloaded.current_version(), added);
        assert!(reload().unwrap().is_none());
    }
}
