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
            Some(Box::new(move || {
                read_file(&path).map_err(|failure| failure.message)
            }))
        }
    }
}

/// The keyring behind a handle that reloads it from its file when needed.
pub(crate) fn handle(source: &KeySource) -> Result<KeyringHandle, Failure> {
    Ok(KeyringHandle::new(load(source)?, reloader(source)))
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
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
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
