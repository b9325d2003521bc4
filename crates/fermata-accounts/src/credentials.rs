//! Named secrets a user connected to a session, or a machine holds (`github_token`, ...), and how
//! they are sealed for storage.

use std::collections::BTreeMap;
use std::fmt;

use zeroize::Zeroizing;

use fermata_crypto::Aad;

use crate::KeyringHandle;
use crate::error::AccountError;

/// At most this many named secrets per session or machine.
const MAX_ENTRIES: usize = 16;
/// At most this many bytes per secret.
const MAX_VALUE_BYTES: usize = 8192;

/// Named secrets. `Debug` shows the names only.
#[derive(Default, Clone, PartialEq, Eq)]
pub struct Credentials(BTreeMap<String, Zeroizing<String>>);

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Credentials").field(&self.names()).finish()
    }
}

impl Credentials {
    /// Checks names (`a-z`, `0-9`, `_`, 1 to 64 characters) and values (1 to 8192 bytes).
    pub fn new(entries: BTreeMap<String, String>) -> Result<Self, AccountError> {
        if entries.len() > MAX_ENTRIES {
            return Err(AccountError::Invalid(format!(
                "at most {MAX_ENTRIES} credentials"
            )));
        }
        let mut checked = BTreeMap::new();
        for (name, value) in entries {
            let value = Zeroizing::new(value);
            let name_ok = !name.is_empty()
                && name.len() <= 64
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if !name_ok {
                return Err(AccountError::Invalid(
                    "a credential name has 1 to 64 characters of a-z, 0-9 and '_'".to_owned(),
                ));
            }
            if value.is_empty() || value.len() > MAX_VALUE_BYTES {
                return Err(AccountError::Invalid(format!(
                    "credential `{name}` must have 1 to {MAX_VALUE_BYTES} bytes"
                )));
            }
            checked.insert(name, value);
        }
        Ok(Credentials(checked))
    }

    /// These credentials with `name` set to `value`, checked as `new` checks them.
    pub fn with_entry(&self, name: String, value: String) -> Result<Self, AccountError> {
        let mut entries: BTreeMap<String, String> = self
            .0
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().to_owned()))
            .collect();
        entries.insert(name, value);
        Credentials::new(entries)
    }

    pub fn names(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(|value| value.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The plaintext to seal.
    pub(crate) fn to_plaintext(&self) -> Zeroizing<Vec<u8>> {
        let plain: BTreeMap<&str, &str> = self
            .0
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        Zeroizing::new(serde_json::to_vec(&plain).expect("a map of strings serializes"))
    }

    /// Opens stored credentials (none stored is an empty set).
    pub(crate) fn unseal(
        keys: &KeyringHandle,
        aad: Aad<'_>,
        sealed: Option<&[u8]>,
    ) -> Result<Self, AccountError> {
        match sealed {
            None => Ok(Credentials::default()),
            Some(sealed) => Credentials::from_plaintext(&keys.open(aad, sealed)?),
        }
    }

    /// Reads opened plaintext back.
    pub(crate) fn from_plaintext(plain: &[u8]) -> Result<Self, AccountError> {
        // Dropped on purpose: the parser's error can quote the decrypted plaintext.
        let map: BTreeMap<String, String> = serde_json::from_slice(plain).map_err(|_| {
            AccountError::Invalid("decrypted credentials are not in the expected form".to_owned())
        })?;
        Ok(Credentials(
            map.into_iter()
                .map(|(k, v)| (k, Zeroizing::new(v)))
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values_are_checked_and_hidden() {
        let good = Credentials::new(BTreeMap::from([(
            "github_token".to_owned(),
            "gho_x".to_owned(),
        )]))
        .unwrap();
        assert_eq!(format!("{good:?}"), "Credentials([\"github_token\"])");
        let round = Credentials::from_plaintext(&good.to_plaintext()).unwrap();
        assert_eq!(round, good);
        for (name, value) in [("GitHub", "x"), ("", "x"), ("ok", "")] {
            let entries = BTreeMap::from([(name.to_owned(), value.to_owned())]);
            assert!(Credentials::new(entries).is_err(), "{name:?}={value:?}");
        }
    }
}
