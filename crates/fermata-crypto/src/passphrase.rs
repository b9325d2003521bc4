//! A file sealed with a passphrase, for the key file a backup carries: Argon2id turns the
//! passphrase and a random salt into a 256-bit key, and AES-256-GCM seals the text under it, with
//! the format line as associated data so a sealed file cannot pass for another format.
//!
//! The sealed file is text that says what it is:
//!
//! ```text
//! # Fermata encryption key file, sealed with a passphrase. ...
//! format = "fermata-sealed/1"
//! kdf = "argon2id"
//! memory_kib = 65536
//! iterations = 3
//! parallelism = 1
//! salt = "BASE64"
//! nonce = "BASE64"
//! sealed = "BASE64"
//! ```

use aes_gcm::aead::{Aead, KeyInit, OsRng, Payload};
use aes_gcm::{AeadCore, Aes256Gcm, Key, Nonce};
use argon2::{Algorithm, Argon2, Params, Version};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

/// The format this release writes and reads.
const FORMAT: &str = "fermata-sealed/1";
/// The header every sealed file starts with.
const HEADER: &str = "# Fermata encryption key file, sealed with a passphrase.\n\
    # Restore with `fermata restore` and the same passphrase; without both, the credentials\n\
    # this key sealed cannot be opened.\n";
/// Argon2id's cost: 64 MiB and three passes (the RFC 9106 second recommendation).
const MEMORY_KIB: u32 = 64 * 1024;
const ITERATIONS: u32 = 3;
const PARALLELISM: u32 = 1;
/// The bounds a file may ask for: enough for any sane choice, never a denial of service.
const MAX_MEMORY_KIB: u32 = 1024 * 1024;
const MAX_ITERATIONS: u32 = 64;
/// The shortest passphrase accepted for sealing.
pub const MIN_PASSPHRASE_CHARS: usize = 12;

/// Why a sealed file could not be made or opened. The messages hold no secret.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    #[error("the passphrase is shorter than {MIN_PASSPHRASE_CHARS} characters")]
    ShortPassphrase,
    #[error("this is not a sealed key file of a format this release reads")]
    Format,
    #[error("the passphrase is wrong, or the sealed file was changed")]
    Open,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SealedFile {
    format: String,
    kdf: String,
    memory_kib: u32,
    iterations: u32,
    parallelism: u32,
    salt: String,
    nonce: String,
    sealed: String,
}

/// Seals `plaintext` under `passphrase`; returns the file's text.
pub fn seal_with_passphrase(passphrase: &str, plaintext: &[u8]) -> Result<String, SealError> {
    if passphrase.chars().count() < MIN_PASSPHRASE_CHARS {
        return Err(SealError::ShortPassphrase);
    }
    let mut salt = [0u8; 16];
    OsRng.fill_bytes(&mut salt);
    let key = derive(passphrase, &salt, MEMORY_KIB, ITERATIONS, PARALLELISM)?;
    let cipher = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key.as_slice()));
    let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
    let sealed = cipher
        .encrypt(
            &nonce,
            Payload {
                msg: plaintext,
                aad: FORMAT.as_bytes(),
            },
        )
        .map_err(|_| SealError::Format)?;
    let file = SealedFile {
        format: FORMAT.to_owned(),
        kdf: "argon2id".to_owned(),
        memory_kib: MEMORY_KIB,
        iterations: ITERATIONS,
        parallelism: PARALLELISM,
        salt: STANDARD.encode(salt),
        nonce: STANDARD.encode(nonce),
        sealed: STANDARD.encode(sealed),
    };
    let body = toml::to_string(&file).map_err(|_| SealError::Format)?;
    Ok(format!("{HEADER}{body}"))
}

/// Opens a file [`seal_with_passphrase`] wrote.
pub fn open_with_passphrase(passphrase: &str, text: &str) -> Result<Zeroizing<Vec<u8>>, SealError> {
    let file: SealedFile = toml::from_str(text).map_err(|_| SealError::Format)?;
    if file.format != FORMAT
        || file.kdf != "argon2id"
        || !(8..=MAX_MEMORY_KIB).contains(&file.memory_kib)
        || !(1..=MAX_ITERATIONS).contains(&file.iterations)
        || !(1..=16).contains(&file.parallelism)
    {
        return Err(SealError::Format);
    }
    let decode = |field: &str| STANDARD.decode(field).map_err(|_| SealError::Format);
    let (salt, nonce, sealed) = (
        decode(&file.salt)?,
        decode(&file.nonce)?,
        decode(&file.sealed)?,
    );
    if nonce.len() != 12 || salt.len() < 8 {
        return Err(SealError::Format);
    }
    let key = derive(
        passphrase,
        &salt,
        file.memory_kib,
        file.iterations,
        file.parallelism,
    )?;
    let cipher = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key.as_slice()));
    cipher
        .decrypt(
            Nonce::from_slice(&nonce),
            Payload {
                msg: &sealed,
                aad: FORMAT.as_bytes(),
            },
        )
        .map(Zeroizing::new)
        .map_err(|_| SealError::Open)
}

/// Whether `text` looks like a sealed file (its format line), to tell it from a plain key file.
pub fn is_sealed(text: &str) -> bool {
    text.lines()
        .any(|line| line.trim() == format!("format = \"{FORMAT}\""))
}

fn derive(
    passphrase: &str,
    salt: &[u8],
    memory_kib: u32,
    iterations: u32,
    parallelism: u32,
) -> Result<Zeroizing<[u8; 32]>, SealError> {
    let params = Params::new(memory_kib, iterations, parallelism, Some(32))
        .map_err(|_| SealError::Format)?;
    let mut key = Zeroizing::new([0u8; 32]);
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password_into(passphrase.as_bytes(), salt, key.as_mut_slice())
        .map_err(|_| SealError::Format)?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSPHRASE: &str = "correct horse battery staple";

    #[test]
    fn a_sealed_file_opens_with_its_passphrase_only() {
        let text = seal_with_passphrase(PASSPHRASE, b"version = 1\n").unwrap();
        assert!(text.starts_with("# Fermata encryption key file, sealed"));
        assert!(is_sealed(&text));
        assert_eq!(
            open_with_passphrase(PASSPHRASE, &text).unwrap().as_slice(),
            b"version = 1\n"
        );
        assert_eq!(
            open_with_passphrase("another passphrase", &text),
            Err(SealError::Open)
        );
    }

    #[test]
    fn a_changed_or_foreign_file_is_refused() {
        let text = seal_with_passphrase(PASSPHRASE, b"secret").unwrap();
        let changed = text.replace("iterations = 3", "iterations = 4");
        assert_eq!(
            open_with_passphrase(PASSPHRASE, &changed),
            Err(SealError::Open)
        );
        let huge = text.replace("memory_kib = 65536", "memory_kib = 99999999");
        assert_eq!(
            open_with_passphrase(PASSPHRASE, &huge),
            Err(SealError::Format)
        );
        assert_eq!(
            open_with_passphrase(PASSPHRASE, "[keys]\n1 = \"abc\"\n"),
            Err(SealError::Format)
        );
        assert!(!is_sealed("[keys]\n"));
    }

    #[test]
    fn a_short_passphrase_is_refused() {
        assert_eq!(
            seal_with_passphrase("short", b"x"),
            Err(SealError::ShortPassphrase)
        );
    }
}
