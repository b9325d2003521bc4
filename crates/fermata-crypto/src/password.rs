//! Password hashing with argon2id (the OWASP-recommended parameters of the argon2 crate's
//! defaults: 19 MiB, 2 passes, 1 lane), stored as PHC strings.

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

/// The shortest password an account may have.
pub const MIN_PASSWORD_CHARS: usize = 12;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PasswordError {
    #[error("a password needs at least {MIN_PASSWORD_CHARS} characters")]
    TooShort,
    #[error("a password is at most 1024 bytes")]
    TooLong,
}

/// Hashes `password` for storage, after checking its length.
pub fn hash_password(password: &str) -> Result<String, PasswordError> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(PasswordError::TooShort);
    }
    if password.len() > 1024 {
        return Err(PasswordError::TooLong);
    }
    let salt = SaltString::generate(&mut OsRng);
    Ok(Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .expect("argon2id with default parameters hashes any password up to 1 KiB")
        .to_string())
}

/// Whether `password` matches the stored hash. With no stored hash (an unknown account) it still
/// spends the time of one verification, so timing does not tell whether the account exists.
pub fn verify_password(password: &str, stored: Option<&str>) -> bool {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let dummy = DUMMY.get_or_init(|| {
        hash_password("a password nobody has, for timing").expect("a valid dummy password")
    });
    let (phc, real) = match stored {
        Some(phc) => (phc, true),
        None => (dummy.as_str(), false),
    };
    let Ok(parsed) = PasswordHash::new(phc) else {
        return false;
    };
    let matches = Argon2::default()
        .verify_password(password.as_bytes(), &parsed)
        .is_ok();
    matches && real
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_never_hold_the_password() {
        let stored = hash_password("correct horse battery").unwrap();
        assert!(stored.starts_with("$argon2id$"));
        assert!(!stored.contains("correct horse"));
        assert!(verify_password("correct horse battery", Some(&stored)));
        assert!(!verify_password("wrong horse battery", Some(&stored)));
        assert!(!verify_password("correct horse battery", None));
        assert!(!verify_password("correct horse battery", Some("garbage")));
    }

    #[test]
    fn short_passwords_are_refused() {
        assert_eq!(hash_password("short"), Err(PasswordError::TooShort));
    }
}
