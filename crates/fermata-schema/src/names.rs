//! The reversible encoding of database and object names into safe file names, used for the
//! package's database folders and for the snapshot files inside them.
//!
//! MySQL names may hold any character but NUL, while file names on the systems that check out a
//! package may not, and macOS and Windows fold case. The rule, byte by byte over the UTF-8 name:
//!
//! - lowercase ASCII letters, digits, `_` and `-` are kept;
//! - an uppercase ASCII letter is written as `^` followed by its lowercase, so names that differ
//!   only in case never collide on a case-insensitive file system;
//! - every other byte (`.`, space, `%`, `^`, `/`, controls and each byte of a non-ASCII
//!   character) is written as `%XX` with uppercase hexadecimal digits.
//!
//! | name       | encoded          |
//! |------------|------------------|
//! | `orders`   | `orders`         |
//! | `Orders`   | `^orders`        |
//! | `my table` | `my%20table`     |
//! | `naïve`    | `na%C3%AFve`     |
//! | `v1.2`     | `v1%2E2`         |
//! | `50%^`     | `50%25%5E`       |
//!
//! An encoded name therefore holds only `[a-z0-9_%^-]` and, right after each `%`, two of
//! `[0-9A-F]`; it is never `.` or `..`, and is empty only for the empty name. Each name has exactly one encoding and [`decode`] accepts nothing else
//! (no lowercase hex digits, no `%XX` for a byte that is written plainly), so the mapping is a
//! bijection between names and their encodings.
//!
//! A file name may have at most [`MAX_FILE_NAME_BYTES`] bytes. An ASCII name of MySQL's 64
//! characters always fits, but a non-ASCII character costs 6 to 12 bytes (`é` is `%C3%A9`), so a
//! long non-ASCII name may not: [`file_name`] refuses it as an invalid identifier rather than
//! shorten it. A snapshot file's name ([`object_path`]) is the encoded name with `.sql` after it
//! and, for routines, `function.` or `procedure.` before it, so that a function and a procedure
//! of the same name do not collide; the limit holds for the whole file name. The encoding never
//! writes a `.`, so the first `.` ends the prefix and the last one starts the suffix. Windows also reserves a few device names (`con`, `aux`, `nul`, ...); the rule keeps
//! them as they are, so a package holding such a name cannot be checked out there.

use fermata_schema_core::{ErrorCode, SafeError};

/// The longest file name the common file systems accept, in bytes.
pub const MAX_FILE_NAME_BYTES: usize = 255;

const HEX_DIGITS: &[u8; 16] = b"0123456789ABCDEF";

/// Whether `encode` writes the byte as it is.
fn is_kept(byte: u8) -> bool {
    matches!(byte, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-')
}

/// Encodes a name by the rule of the module documentation. Never fails; see [`file_name`] for the
/// length limit.
pub fn encode(name: &str) -> String {
    let mut encoded = String::with_capacity(name.len());
    for &byte in name.as_bytes() {
        if is_kept(byte) {
            encoded.push(char::from(byte));
        } else if byte.is_ascii_uppercase() {
            encoded.push('^');
            encoded.push(char::from(byte.to_ascii_lowercase()));
        } else {
            encoded.push('%');
            encoded.push(char::from(HEX_DIGITS[usize::from(byte >> 4)]));
            encoded.push(char::from(HEX_DIGITS[usize::from(byte & 0x0F)]));
        }
    }
    encoded
}

/// The value of an uppercase hexadecimal digit.
fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

/// Decodes an encoded name; `None` for any text [`encode`] could not have produced.
pub fn decode(encoded: &str) -> Option<String> {
    let mut bytes = encoded.bytes();
    let mut name = Vec::with_capacity(encoded.len());
    while let Some(byte) = bytes.next() {
        match byte {
            _ if is_kept(byte) => name.push(byte),
            b'^' => match bytes.next() {
                Some(lower @ b'a'..=b'z') => name.push(lower.to_ascii_uppercase()),
                _ => return None,
            },
            b'%' => {
                let high = hex_value(bytes.next()?)?;
                let low = hex_value(bytes.next()?)?;
                let value = (high << 4) | low;
                // These bytes have a shorter encoding of their own.
                if is_kept(value) || value.is_ascii_uppercase() {
                    return None;
                }
                name.push(value);
            }
            _ => return None,
        }
    }
    String::from_utf8(name).ok()
}

/// Encodes a name for use as a file or folder name: refuses, as an invalid identifier, the empty
/// name and a name whose encoding is longer than [`MAX_FILE_NAME_BYTES`].
pub fn file_name(name: &str) -> Result<String, SafeError> {
    let encoded = encode(name);
    if encoded.is_empty() || encoded.len() > MAX_FILE_NAME_BYTES {
        return Err(SafeError::new(ErrorCode::InvalidIdentifier));
    }
    Ok(encoded)
}

/// The path of an object's snapshot file: `<folder>/<prefix>.<encoded name>.sql`, or
/// `<folder>/<encoded name>.sql` without a prefix. Refuses, as an invalid identifier, the empty
/// name and a name whose file name would be longer than [`MAX_FILE_NAME_BYTES`].
pub fn object_path(folder: &str, prefix: Option<&str>, name: &str) -> Result<String, SafeError> {
    let encoded = file_name(name)?;
    let file = match prefix {
        Some(prefix) => format!("{prefix}.{encoded}.sql"),
        None => format!("{encoded}.sql"),
    };
    if file.len() > MAX_FILE_NAME_BYTES {
        return Err(SafeError::new(ErrorCode::InvalidIdentifier));
    }
    Ok(format!("{folder}/{file}"))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn documented_examples() {
        for (name, encoded) in [
            ("orders", "orders"),
            ("Orders", "^orders"),
            ("my table", "my%20table"),
            ("naïve", "na%C3%AFve"),
            ("v1.2", "v1%2E2"),
            ("50%^", "50%25%5E"),
            (".", "%2E"),
            ("..", "%2E%2E"),
            ("a/b\\c", "a%2Fb%5Cc"),
            ("É", "%C3%89"),
            ("snake_case-name", "snake_case-name"),
            ("", ""),
        ] {
            assert_eq!(encode(name), encoded, "{name:?}");
            assert_eq!(decode(encoded).as_deref(), Some(name), "{encoded:?}");
        }
    }

    #[test]
    fn decode_refuses_what_encode_never_writes() {
        for text in [
            "Orders",   // uppercase letters are written with `^`
            "^",        // `^` needs a letter
            "^1",       // ... a lowercase letter
            "^^a",      // ... not another `^`
            "%",        // `%` needs two digits
            "%2",       // ... both of them
            "%2e",      // ... uppercase ones
            "%GG",      // ... hexadecimal ones
            "%61",      // `a` is written as it is
            "%41",      // `A` is written as `^a`
            "%5F",      // `_` is written as it is
            "%C3",      // a lone byte of a two-byte character is not UTF-8
            "my table", // a space is written as `%20`
            "a.b",      // a dot is written as `%2E`
            "é",        // non-ASCII is written byte by byte
        ] {
            assert_eq!(decode(text), None, "{text:?}");
        }
    }

    #[test]
    fn file_names_have_a_length_limit() {
        let longest_ascii = "A".repeat(64);
        assert_eq!(file_name(&longest_ascii).unwrap().len(), 128);
        let fits = "é".repeat(42);
        assert_eq!(file_name(&fits).unwrap().len(), 252);
        for refused in [String::new(), "é".repeat(43), "日".repeat(29)] {
            let error = file_name(&refused).unwrap_err();
            assert_eq!(error.code(), ErrorCode::InvalidIdentifier, "{refused:?}");
        }
    }

    #[test]
    fn object_paths_keep_kinds_apart_and_the_limit() {
        assert_eq!(
            object_path("routines", Some("function"), "Do it").unwrap(),
            "routines/function.^do%20it.sql"
        );
        assert_eq!(
            object_path("tables", None, "t.1").unwrap(),
            "tables/t%2E1.sql"
        );
        // 252 encoded bytes fit a folder name, not a file name with `.sql` after them.
        let error = object_path("tables", None, &"é".repeat(42)).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidIdentifier);
    }

    /// `[a-z0-9_^-]`, and `%` followed by two uppercase hexadecimal digits.
    fn is_safe(encoded: &str) -> bool {
        let mut bytes = encoded.bytes();
        while let Some(byte) = bytes.next() {
            let safe = match byte {
                b'%' => (0..2).all(|_| {
                    bytes
                        .next()
                        .is_some_and(|digit| matches!(digit, b'0'..=b'9' | b'A'..=b'F'))
                }),
                _ => matches!(byte, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'^' | b'-'),
            };
            if !safe {
                return false;
            }
        }
        true
    }

    proptest! {
        #[test]
        fn decode_reverses_encode(name in any::<String>()) {
            prop_assert_eq!(decode(&encode(&name)), Some(name));
        }

        #[test]
        fn encoded_names_are_safe_file_names(name in any::<String>()) {
            let encoded = encode(&name);
            prop_assert!(is_safe(&encoded), "{:?} encodes to {:?}", name, encoded);
            if !name.is_empty() {
                prop_assert!(!encoded.is_empty() && encoded != "." && encoded != "..");
            }
        }

        #[test]
        fn names_differing_in_case_never_collide_when_case_is_folded(
            left in "[a-zA-Z0-9 ._]{1,12}",
            right in "[a-zA-Z0-9 ._]{1,12}",
        ) {
            if left != right {
                prop_assert_ne!(
                    encode(&left).to_ascii_lowercase(),
                    encode(&right).to_ascii_lowercase()
                );
            }
        }

        #[test]
        fn every_decodable_text_is_the_one_encoding_of_its_name(
            text in "[a-z0-9_^%A-F-]{0,16}",
        ) {
            if let Some(name) = decode(&text) {
                prop_assert_eq!(encode(&name), text);
            }
        }
    }
}
