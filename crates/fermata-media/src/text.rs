//! Plain text: valid UTF-8 without NUL or other control characters (tab, line feed, carriage
//! return and form feed aside), refused when it begins like markup.

use crate::MediaError;

/// Checks `bytes` are plain text.
pub(crate) fn check(bytes: &[u8]) -> Result<(), MediaError> {
    // Dropped on purpose: bytes that are not UTF-8 are not plain text, and that is the answer.
    let text = std::str::from_utf8(bytes).map_err(|_| MediaError::NotPlainText)?;
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    if body
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\u{c}'))
    {
        return Err(MediaError::NotPlainText);
    }
    if begins_like_markup(body) {
        return Err(MediaError::Markup);
    }
    Ok(())
}

/// Whether text begins, after white space, like a tag, a comment, a doctype or an XML
/// declaration: `<` followed by a letter, `!`, `?` or `/`. That is how HTML, SVG and XML
/// documents and scripts begin, and what a browser sniffing a type would look at.
pub(crate) fn begins_like_markup(text: &str) -> bool {
    let mut rest = text.trim_start().chars();
    rest.next() == Some('<')
        && rest
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '!' | '?' | '/'))
}
