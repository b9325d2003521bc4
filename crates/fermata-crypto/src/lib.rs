//! Secrets, without IO: the encryption keyring and its authenticated envelopes, random secret
//! tokens and their hashes, CSRF tokens, password hashing, and files sealed with a passphrase.
//!
//! Key material and plaintext secrets live in zeroizing buffers, have a redacted `Debug` and no
//! `Display`. Reading and writing key files is the binary's job; this crate only parses and
//! renders their text.

mod keyring;
mod passphrase;
mod password;
mod token;

pub use keyring::{
    Aad, CryptoError, Detached, KEY_FILE_HEADER, Keyring, NONCE_LEN, Purpose, TAG_LEN,
};
pub use passphrase::{
    MIN_PASSPHRASE_CHARS, SealError, is_sealed, open_with_passphrase, seal_with_passphrase,
};
pub use password::{MIN_PASSWORD_CHARS, PasswordError, hash_password, verify_password};
pub use token::{SecretToken, TokenHash, csrf_token, csrf_tokens_match};
