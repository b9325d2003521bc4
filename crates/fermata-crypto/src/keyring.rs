//! The keyring: AES-256-GCM keys by version, and the envelopes they seal.
//!
//! An envelope is `[format 1][key version, 4 bytes big-endian][nonce, 12 bytes][ciphertext and
//! 16-byte tag]`. Every encryption draws a fresh random 96-bit nonce. The additional authenticated
//! data binds the envelope to its header, its purpose and the row it belongs to, so a credential
//! sealed for one session does not open for another, nor as a machine's.

use std::collections::BTreeMap;
use std::fmt;

use aes_gcm::aead::{Aead, AeadInPlace, KeyInit, OsRng, Payload};
use aes_gcm::{AeadCore, Aes256Gcm, Key, Nonce};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

const FORMAT: u8 = 1;
/// The envelope's nonce and tag lengths, in bytes.
pub const NONCE_LEN: usize = 12;
pub const TAG_LEN: usize = 16;
const HEADER_LEN: usize = 1 + 4 + NONCE_LEN;

/// The first lines of a key file.
pub const KEY_FILE_HEADER: &str = "\
# Fermata encryption keys. Keep this file secret (mode 0600) and back it up apart from the
# database: without it, stored credentials cannot be decrypted. The highest version encrypts;
# every version listed still decrypts.
";

/// What a sealed value is for; part of its authenticated data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Credentials a user connected to a login session (e.g. a GitHub token).
    SessionCredentials,
    /// A paired machine's own credentials.
    MachineCredentials,
    /// A schema operation's encrypted review artifact.
    SchemaReviewArtifact,
    /// A document-scoped client token: the grant it carries, sealed so it is neither read nor
    /// forged without the keys, and no row is kept for it.
    ClientToken,
    /// A browser's mark that it logged in to an account before (the row is the user's ID).
    KnownDevice,
    /// A new secret kept in a cookie until the page shows it once (the row is the session's ID).
    ShownOnce,
}

impl Purpose {
    fn as_str(self) -> &'static str {
        match self {
            Purpose::SessionCredentials => "session-credentials",
            Purpose::MachineCredentials => "machine-credentials",
            Purpose::SchemaReviewArtifact => "schema-review-artifact",
            Purpose::ClientToken => "client-token",
            Purpose::KnownDevice => "known-device",
            Purpose::ShownOnce => "shown-once",
        }
    }
}

/// The context an envelope is bound to: its purpose and the ID of the row that holds it.
#[derive(Debug, Clone, Copy)]
pub struct Aad<'a> {
    pub purpose: Purpose,
    pub row: &'a str,
}

impl Aad<'_> {
    fn bytes(&self, header: &[u8]) -> Vec<u8> {
        let mut aad = Vec::with_capacity(header.len() + 64);
        aad.extend_from_slice(b"fermata\0");
        aad.extend_from_slice(&header[..5]);
        aad.extend_from_slice(self.purpose.as_str().as_bytes());
        aad.push(0);
        aad.extend_from_slice(self.row.as_bytes());
        aad
    }
}

/// What [`Keyring::seal_in_place`] returns beside the ciphertext: the envelope's other parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detached {
    pub key_version: u32,
    pub nonce: [u8; NONCE_LEN],
    pub tag: [u8; TAG_LEN],
}

/// Why an envelope did not open, or a keyring could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CryptoError {
    #[error("the encrypted value is malformed")]
    Malformed,
    #[error("the encrypted value was sealed with key version {0}, which is not loaded")]
    UnknownKeyVersion(u32),
    #[error(
        "the encrypted value failed authentication: it was altered, moved from another row or \
         purpose, or sealed with a different key"
    )]
    Rejected,
    #[error("the keyring is invalid: {0}")]
    InvalidKeyring(&'static str),
}

/// A 256-bit key, wiped from memory when dropped.
struct KeyBytes(Zeroizing<[u8; 32]>);

/// Every loaded key version; the highest is current.
pub struct Keyring {
    keys: BTreeMap<u32, KeyBytes>,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring")
            .field("versions", &self.keys.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    key: Vec<KeyFileEntry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFileEntry {
    version: u32,
    key: String,
}

impl Keyring {
    /// A keyring with one new random key, version 1.
    pub fn generate() -> Self {
        let mut keyring = Keyring {
            keys: BTreeMap::new(),
        };
        keyring.keys.insert(1, random_key());
        keyring
    }

    /// Adds a new random key one version above the current one, which becomes current.
    pub fn rotate(&mut self) -> u32 {
        let version = self.current_version() + 1;
        self.keys.insert(version, random_key());
        version
    }

    pub fn current_version(&self) -> u32 {
        self.keys.keys().next_back().copied().unwrap_or(0)
    }

    pub fn versions(&self) -> Vec<u32> {
        self.keys.keys().copied().collect()
    }

    /// Seals `plaintext` for `aad` under the current key.
    pub fn seal(&self, aad: Aad<'_>, plaintext: &[u8]) -> Vec<u8> {
        let mut envelope = Vec::with_capacity(HEADER_LEN + plaintext.len() + TAG_LEN);
        envelope.resize(HEADER_LEN, 0);
        envelope.extend_from_slice(plaintext);
        let detached = self.seal_in_place(aad, &mut envelope[HEADER_LEN..]);
        envelope[0] = FORMAT;
        envelope[1..5].copy_from_slice(&detached.key_version.to_be_bytes());
        envelope[5..HEADER_LEN].copy_from_slice(&detached.nonce);
        envelope.extend_from_slice(&detached.tag);
        envelope
    }

    /// Seals `buffer` for `aad` under the current key in place: the buffer becomes the
    /// ciphertext, and the rest of the envelope is returned. Nothing is copied, so a large value
    /// (a review artifact) costs one pass of the cipher; [`Keyring::seal`] is the same with the
    /// envelope joined.
    pub fn seal_in_place(&self, aad: Aad<'_>, buffer: &mut [u8]) -> Detached {
        let key_version = self.current_version();
        let key = &self.keys[&key_version];
        let cipher = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key.0.as_slice()));
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let mut header = [FORMAT, 0, 0, 0, 0];
        header[1..].copy_from_slice(&key_version.to_be_bytes());
        let aad = aad.bytes(&header);
        let tag = cipher
            .encrypt_in_place_detached(&nonce, &aad, buffer)
            .expect("AES-GCM encryption of an in-memory buffer cannot fail");
        Detached {
            key_version,
            nonce: nonce.into(),
            tag: tag.into(),
        }
    }

    /// Opens an envelope sealed for `aad`.
    pub fn open(&self, aad: Aad<'_>, envelope: &[u8]) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        let version = Self::envelope_version(envelope)?;
        let key = self
            .keys
            .get(&version)
            .ok_or(CryptoError::UnknownKeyVersion(version))?;
        let cipher = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key.0.as_slice()));
        let nonce = Nonce::from_slice(&envelope[5..HEADER_LEN]);
        let aad = aad.bytes(envelope);
        cipher
            .decrypt(
                nonce,
                Payload {
                    msg: &envelope[HEADER_LEN..],
                    aad: &aad,
                },
            )
            .map(Zeroizing::new)
            // Dropped on purpose: AES-GCM says only that the envelope was refused.
            .map_err(|_| CryptoError::Rejected)
    }

    /// The key version an envelope names.
    pub fn envelope_version(envelope: &[u8]) -> Result<u32, CryptoError> {
        if envelope.len() < HEADER_LEN + TAG_LEN || envelope[0] != FORMAT {
            return Err(CryptoError::Malformed);
        }
        let mut version = [0; 4];
        version.copy_from_slice(&envelope[1..5]);
        Ok(u32::from_be_bytes(version))
    }

    /// Reads a key file's text.
    pub fn from_key_file(text: &str) -> Result<Self, CryptoError> {
        // Dropped here and below on purpose: the parsers' errors can quote the keys.
        let file: KeyFile = toml::from_str(text)
            .map_err(|_| CryptoError::InvalidKeyring("the key file does not parse"))?;
        Self::from_entries(file.key.into_iter().map(|entry| (entry.version, entry.key)))
    }

    /// Reads keys given as `VERSION:BASE64[,VERSION:BASE64...]` (an environment variable or a
    /// secret file for production).
    pub fn from_spec(spec: &str) -> Result<Self, CryptoError> {
        let mut entries = Vec::new();
        for part in spec
            .split([',', '\n'])
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let (version, key) = part
                .split_once(':')
                .ok_or(CryptoError::InvalidKeyring("each key is VERSION:BASE64"))?;
            let version = version
                .trim()
                .parse()
                .map_err(|_| CryptoError::InvalidKeyring("a key version is not a number"))?;
            entries.push((version, key.trim().to_owned()));
        }
        Self::from_entries(entries)
    }

    fn from_entries(entries: impl IntoIterator<Item = (u32, String)>) -> Result<Self, CryptoError> {
        let mut keys = BTreeMap::new();
        for (version, encoded) in entries {
            let encoded = Zeroizing::new(encoded);
            if version == 0 {
                return Err(CryptoError::InvalidKeyring("key versions start at 1"));
            }
            let bytes = Zeroizing::new(
                STANDARD
                    .decode(encoded.as_bytes())
                    .map_err(|_| CryptoError::InvalidKeyring("a key is not base64"))?,
            );
            let mut key = Zeroizing::new([0u8; 32]);
            if bytes.len() != key.len() {
                return Err(CryptoError::InvalidKeyring("a key is not 32 bytes"));
            }
            key.copy_from_slice(&bytes);
            if keys.insert(version, KeyBytes(key)).is_some() {
                return Err(CryptoError::InvalidKeyring("a key version appears twice"));
            }
        }
        if keys.is_empty() {
            return Err(CryptoError::InvalidKeyring("no key is given"));
        }
        Ok(Keyring { keys })
    }

    /// The key file's text. It holds the keys: write it only to a file of mode 0600.
    pub fn to_key_file(&self) -> Zeroizing<String> {
        let mut text = Zeroizing::new(String::from(KEY_FILE_HEADER));
        for (version, key) in &self.keys {
            let encoded = Zeroizing::new(STANDARD.encode(key.0.as_slice()));
            text.push_str(&format!(
                "\n[[key]]\nversion = {version}\nkey = \"{}\"\n",
                *encoded
            ));
        }
        text
    }
}

fn random_key() -> KeyBytes {
    let mut key = Zeroizing::new([0u8; 32]);
    OsRng.fill_bytes(key.as_mut_slice());
    KeyBytes(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(row: &str) -> Aad<'_> {
        Aad {
            purpose: Purpose::SessionCredentials,
            row,
        }
    }

    #[test]
    fn seals_and_opens_with_a_fresh_nonce_each_time() {
        let keyring = Keyring::generate();
        let first = keyring.seal(session("s1"), b"gho_token");
        let second = keyring.seal(session("s1"), b"gho_token");
        assert_ne!(first, second, "two encryptions shared a nonce");
        assert_eq!(
            &**keyring.open(session("s1"), &first).unwrap(),
            b"gho_token"
        );
        assert_eq!(Keyring::envelope_version(&first), Ok(1));
    }

    #[test]
    fn a_seal_in_place_joined_is_an_envelope() {
        let mut keyring = Keyring::generate();
        keyring.rotate();
        let mut buffer = b"a large artifact".to_vec();
        let detached = keyring.seal_in_place(session("s1"), &mut buffer);
        assert_ne!(buffer, b"a large artifact", "the buffer was not encrypted");
        assert_eq!(detached.key_version, 2);
        let mut envelope = vec![FORMAT];
        envelope.extend_from_slice(&detached.key_version.to_be_bytes());
        envelope.extend_from_slice(&detached.nonce);
        envelope.extend_from_slice(&buffer);
        envelope.extend_from_slice(&detached.tag);
        assert_eq!(
            &**keyring.open(session("s1"), &envelope).unwrap(),
            b"a large artifact"
        );
        assert!(keyring.open(session("s2"), &envelope).is_err());
    }

    #[test]
    fn a_flipped_bit_anywhere_is_rejected() {
        let keyring = Keyring::generate();
        let envelope = keyring.seal(session("s1"), b"gho_token");
        for index in 0..envelope.len() {
            let mut tampered = envelope.clone();
            tampered[index] ^= 0x01;
            let error = keyring.open(session("s1"), &tampered).unwrap_err();
            assert!(
                matches!(
                    error,
                    CryptoError::Rejected
                        | CryptoError::Malformed
                        | CryptoError::UnknownKeyVersion(_)
                ),
                "byte {index}: {error:?}"
            );
        }
    }

    #[test]
    fn an_envelope_moved_to_another_row_or_purpose_is_rejected() {
        let keyring = Keyring::generate();
        let envelope = keyring.seal(session("s1"), b"gho_token");
        assert_eq!(
            keyring.open(session("s2"), &envelope).unwrap_err(),
            CryptoError::Rejected
        );
        let machine = Aad {
            purpose: Purpose::MachineCredentials,
            row: "s1",
        };
        assert_eq!(
            keyring.open(machine, &envelope).unwrap_err(),
            CryptoError::Rejected
        );
    }

    #[test]
    fn old_versions_still_open_after_rotation() {
        let mut keyring = Keyring::generate();
        let old = keyring.seal(session("s1"), b"old");
        assert_eq!(keyring.rotate(), 2);
        let new = keyring.seal(session("s1"), b"new");
        assert_eq!(Keyring::envelope_version(&new), Ok(2));
        assert_eq!(&**keyring.open(session("s1"), &old).unwrap(), b"old");

        let reloaded = Keyring::from_key_file(&keyring.to_key_file()).unwrap();
        assert_eq!(reloaded.versions(), [1, 2]);
        assert_eq!(&**reloaded.open(session("s1"), &old).unwrap(), b"old");
    }

    #[test]
    fn a_wrong_key_version_is_named() {
        let mut keyring = Keyring::generate();
        keyring.rotate();
        let envelope = keyring.seal(session("s1"), b"x");
        let version_one_only = Keyring::from_spec(&format!(
            "1:{}",
            STANDARD.encode(keyring.keys[&1].0.as_slice())
        ))
        .unwrap();
        assert_eq!(
            version_one_only.open(session("s1"), &envelope).unwrap_err(),
            CryptoError::UnknownKeyVersion(2)
        );
        let other = Keyring::generate();
        let mut relabeled = other.seal(session("s1"), b"x");
        relabeled[1..5].copy_from_slice(&1u32.to_be_bytes());
        assert_eq!(
            keyring.open(session("s1"), &relabeled).unwrap_err(),
            CryptoError::Rejected
        );
    }

    #[test]
    fn key_files_and_specs_round_trip_and_are_checked() {
        let mut keyring = Keyring::generate();
        keyring.rotate();
        let text = keyring.to_key_file();
        assert!(text.starts_with(KEY_FILE_HEADER));
        let again = Keyring::from_key_file(&text).unwrap();
        let envelope = keyring.seal(session("s1"), b"x");
        assert_eq!(&**again.open(session("s1"), &envelope).unwrap(), b"x");

        for bad in [
            "",
            "1",
            "x:AAAA",
            "1:not base64!",
            "1:AAAA",
            "0:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        ] {
            assert!(Keyring::from_spec(bad).is_err(), "{bad:?} was accepted");
        }
        let debug = format!("{keyring:?}");
        assert_eq!(debug, "Keyring { versions: [1, 2] }");
    }
}
