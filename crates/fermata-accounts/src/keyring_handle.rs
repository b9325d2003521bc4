//! The process's keyring, reloadable: before sealing, and when an envelope names a key version
//! this process has not loaded, the keyring is read again if its source changed (another process
//! rotated the key file), so new credentials are sealed with the newest key.

use std::error::Error as StdError;
use std::sync::{Arc, Mutex, RwLock};

use fermata_crypto::{Aad, CryptoError, Detached, Keyring};
use fermata_store::ErrorChain;
use zeroize::Zeroizing;

/// Reads the keyring again from where it came from when that changed since the last read, or
/// always when `force` is set (`Ok(None)` when it did not change). Absent where keys cannot
/// change under a running process (keys given by the environment).
pub type Reload =
    Box<dyn Fn(bool) -> Result<Option<Keyring>, Box<dyn StdError + Send + Sync>> + Send + Sync>;

/// A shared, reloadable keyring.
pub struct KeyringHandle {
    current: RwLock<Arc<Keyring>>,
    reload: Option<Reload>,
    /// Held across a reload and the swap, so an older read never replaces a newer one.
    reloading: Mutex<()>,
}

impl std::fmt::Debug for KeyringHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyringHandle")
            .field("keyring", &*self.keyring())
            .field("reloadable", &self.reload.is_some())
            .finish()
    }
}

impl KeyringHandle {
    pub fn new(keyring: Keyring, reload: Option<Reload>) -> Self {
        KeyringHandle {
            current: RwLock::new(Arc::new(keyring)),
            reload,
            reloading: Mutex::new(()),
        }
    }

    pub fn keyring(&self) -> Arc<Keyring> {
        Arc::clone(
            &self
                .current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Reads the keyring again if its source changed (or, with `force`, in any case).
    fn refresh(&self, force: bool) {
        let Some(reload) = &self.reload else { return };
        let _reloading = self
            .reloading
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match reload(force) {
            Ok(Some(keyring)) => {
                tracing::info!(versions = ?keyring.versions(), "reloaded the keyring");
                *self
                    .current
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(keyring);
            }
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(error = %ErrorChain(&*error), "could not reload the keyring")
            }
        }
    }

    pub fn seal(&self, aad: Aad<'_>, plaintext: &[u8]) -> Vec<u8> {
        self.refresh(false);
        self.keyring().seal(aad, plaintext)
    }

    /// [`Keyring::seal_in_place`] under the current key.
    pub fn seal_in_place(&self, aad: Aad<'_>, buffer: &mut [u8]) -> Detached {
        self.refresh(false);
        self.keyring().seal_in_place(aad, buffer)
    }

    pub fn open(&self, aad: Aad<'_>, envelope: &[u8]) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        match self.keyring().open(aad, envelope) {
            Err(CryptoError::UnknownKeyVersion(_)) if self.reload.is_some() => {
                self.refresh(true);
                self.keyring().open(aad, envelope)
            }
            other => other,
        }
    }
}
