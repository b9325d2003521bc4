//! The process's keyring, reloadable: when an envelope names a key version this process has not
//! loaded (another process rotated the key file), the keyring is read again once before giving up.

use std::sync::{Arc, RwLock};

use fermata_crypto::{Aad, CryptoError, Keyring};
use zeroize::Zeroizing;

/// Reads the keyring again from where it came from; `None` where it cannot change under a
/// running process (keys given by the environment).
pub type Reload = Box<dyn Fn() -> Result<Keyring, String> + Send + Sync>;

/// A shared, reloadable keyring.
pub struct KeyringHandle {
    current: RwLock<Arc<Keyring>>,
    reload: Option<Reload>,
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

    pub fn seal(&self, aad: Aad<'_>, plaintext: &[u8]) -> Vec<u8> {
        self.keyring().seal(aad, plaintext)
    }

    pub fn open(&self, aad: Aad<'_>, envelope: &[u8]) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        match self.keyring().open(aad, envelope) {
            Err(CryptoError::UnknownKeyVersion(version)) => {
                let Some(reload) = &self.reload else {
                    return Err(CryptoError::UnknownKeyVersion(version));
                };
                match reload() {
                    Ok(keyring) => {
                        tracing::info!(versions = ?keyring.versions(), "reloaded the keyring");
                        let keyring = Arc::new(keyring);
                        *self
                            .current
                            .write()
                            .unwrap_or_else(std::sync::PoisonError::into_inner) =
                            Arc::clone(&keyring);
                        keyring.open(aad, envelope)
                    }
                    Err(error) => {
                        tracing::warn!(error = %error, "could not reload the keyring");
                        Err(CryptoError::UnknownKeyVersion(version))
                    }
                }
            }
            other => other,
        }
    }
}
