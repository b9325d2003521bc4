//! Scanning SQL text the way the server's lexer splits it, as far as the normalizations need:
//! quoted identifiers and string literals (so a keyword inside one is never taken for a
//! clause), balanced parentheses, top-level separators, and the tokens of a statement's head.

/// The end (exclusive) of the quoted text that starts at `start` with `` ` ``, `'` or `"`: the
/// quote doubled stands for itself, and in strings a backslash escapes the next character.
pub(crate) fn quoted_end(text: &str, start: usize) -> Option<usize> {
    let escapes = text.as_bytes().get(start) != Some(&b'`');
    quoted_end_with(text, start, escapes)
}

/// [`quoted_end`], where a backslash escapes the next character only when `escapes` (never in an
/// identifier, whatever its quote).
fn quoted_end_with(text: &str, start: usize, escapes: bool) -> Option<usize> {
    let bytes = text.as_bytes();
    let quote = *bytes.get(start)?;
    let mut at = start + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' if escapes => at += 2,
            byte if byte == quote => {
                if bytes.get(at + 1) == Some(&quote) {
                    at += 2;
                } else {
                    return Some(at + 1);
                }
            }
            _ => at += 1,
        }
    }
    None
}

/// The position just after the parenthesis that closes the one at `open`.
pub(crate) fn closing_paren(text: &str, open: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut at = open;
    while at < bytes.len() {
        match bytes[at] {
            b'`' | b'\'' | b'"' => {
                at = quoted_end(text, at)?;
                continue;
            }
            b'(' => depth += 1,
            b')' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(at + 1);
                }
            }
            _ => {}
        }
        at += 1;
    }
    None
}

/// Where `needle` first occurs in `text` outside quotes and parentheses.
pub(crate) fn find_top_level(text: &str, needle: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut at = 0;
    while at < bytes.len() {
        if depth == 0 && text[at..].starts_with(needle) {
            return Some(at);
        }
        match bytes[at] {
            b'`' | b'\'' | b'"' => {
                at = quoted_end(text, at)?;
                continue;
            }
            b'(' => depth += 1,
            b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    None
}

/// `text` split at the commas outside quotes and parentheses; `None` when a quote or a
/// parenthesis is not closed.
pub(crate) fn split_top_level(text: &str) -> Option<Vec<&str>> {
    let bytes = text.as_bytes();
    let (mut parts, mut depth, mut start, mut at) = (Vec::new(), 0usize, 0, 0);
    while at < bytes.len() {
        match bytes[at] {
            b'`' | b'\'' | b'"' => {
                at = quoted_end(text, at)?;
                continue;
            }
            b'(' => depth += 1,
            b')' => depth = depth.checked_sub(1)?,
            b',' if depth == 0 => {
                parts.push(&text[start..at]);
                start = at + 1;
            }
            _ => {}
        }
        at += 1;
    }
    if depth != 0 {
        return None;
    }
    parts.push(&text[start..]);
    Some(parts)
}

/// A token of a statement's head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Token {
    /// A bare word: a keyword, a number or an unquoted identifier, as written.
    Word(String),
    /// A `` `quoted` `` identifier (or `"quoted"`, under `ANSI_QUOTES`), unquoted.
    Quoted(String),
    /// A string literal, as written (quotes included).
    Literal(String),
    /// Any other character.
    Symbol(char),
}

impl Token {
    /// Whether the token is the keyword `word` (in any case).
    pub(crate) fn is(&self, word: &str) -> bool {
        matches!(self, Token::Word(w) if w.eq_ignore_ascii_case(word))
    }

    /// The identifier the token names, quoted or not.
    pub(crate) fn identifier(&self) -> Option<&str> {
        match self {
            Token::Word(word) | Token::Quoted(word) => Some(word),
            _ => None,
        }
    }
}

/// The tokens of a head, read one at a time, skipping white space and comments.
#[derive(Debug)]
pub(crate) struct Tokens<'a> {
    text: &'a str,
    at: usize,
    /// Whether `"` quotes an identifier, as it does in a head printed under `ANSI_QUOTES`.
    ansi_quotes: bool,
}

impl<'a> Tokens<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Tokens {
            text,
            at: 0,
            ansi_quotes: false,
        }
    }

    /// The tokens of a head the server prints under `sql_mode`: a stored program's, which it
    /// prints under the mode the program was created with, so that with `ANSI_QUOTES` (alone or
    /// in `ANSI`) its names and definer are quoted with `"`.
    pub(crate) fn under(text: &'a str, sql_mode: &str) -> Self {
        Tokens {
            ansi_quotes: sql_mode.split(',').any(|mode| mode == "ANSI_QUOTES"),
            ..Tokens::new(text)
        }
    }

    /// What follows the last token read, white space included.
    pub(crate) fn rest(&self) -> &'a str {
        &self.text[self.at..]
    }

    fn skip_space(&mut self) {
        loop {
            let rest = self.rest();
            let trimmed = rest.trim_start();
            self.at += rest.len() - trimmed.len();
            if trimmed.starts_with("/*") && !trimmed.starts_with("/*!") {
                match trimmed.find("*/") {
                    Some(end) => self.at += end + 2,
                    None => return,
                }
            } else if trimmed.starts_with("-- ") || trimmed.starts_with('#') {
                match trimmed.find('\n') {
                    Some(end) => self.at += end + 1,
                    None => self.at = self.text.len(),
                }
            } else {
                return;
            }
        }
    }

    /// The next token, `None` at the end or at an unterminated quote.
    pub(crate) fn next_token(&mut self) -> Option<Token> {
        self.skip_space();
        let rest = self.rest();
        let first = rest.chars().next()?;
        let (token, length) = match first {
            '`' | '\'' | '"' => {
                let identifier = first == '`' || (first == '"' && self.ansi_quotes);
                let end = quoted_end_with(rest, 0, !identifier)?;
                let inner = &rest[1..end - 1];
                let token = if identifier {
                    let doubled = format!("{first}{first}");
                    Token::Quoted(inner.replace(&doubled, &first.to_string()))
                } else {
                    Token::Literal(rest[..end].to_owned())
                };
                (token, end)
            }
            c if c.is_alphanumeric() || c == '_' || c == '$' => {
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
                    .unwrap_or(rest.len());
                (Token::Word(rest[..end].to_owned()), end)
            }
            c => (Token::Symbol(c), c.len_utf8()),
        };
        self.at += length;
        Some(token)
    }

    /// Reads the keywords `words` in order; `None` unless they are there.
    pub(crate) fn expect(&mut self, words: &[&str]) -> Option<()> {
        for word in words {
            self.next_token().filter(|token| token.is(word))?;
        }
        Some(())
    }

    /// Reads an identifier, optionally qualified by `database` (`db.name`), and returns the name.
    pub(crate) fn object_name(&mut self, database: &str) -> Option<String> {
        let first = self.next_token()?.identifier()?.to_owned();
        let saved = self.at;
        if self.next_token() == Some(Token::Symbol('.')) {
            if first != database {
                return None;
            }
            return Some(self.next_token()?.identifier()?.to_owned());
        }
        self.at = saved;
        Some(first)
    }

    /// Skips ` DEFINER = user[@host]` when it comes next.
    pub(crate) fn skip_definer(&mut self) -> Option<()> {
        let saved = self.at;
        if !self.next_token().is_some_and(|token| token.is("DEFINER")) {
            self.at = saved;
            return Some(());
        }
        self.next_token()
            .filter(|token| *token == Token::Symbol('='))?;
        self.user()?;
        let saved = self.at;
        if self.next_token() == Some(Token::Symbol('@')) {
            self.user()?;
        } else {
            self.at = saved;
        }
        Some(())
    }

    /// A user or host name, quoted in any way or bare; `CURRENT_USER` with or without `()`.
    fn user(&mut self) -> Option<()> {
        match self.next_token()? {
            Token::Word(word) if word.eq_ignore_ascii_case("CURRENT_USER") => {
                let saved = self.at;
                if self.next_token() == Some(Token::Symbol('(')) {
                    self.next_token()
                        .filter(|token| *token == Token::Symbol(')'))?;
                } else {
                    self.at = saved;
                }
                Some(())
            }
            Token::Word(_) | Token::Quoted(_) | Token::Literal(_) => Some(()),
            Token::Symbol(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_parentheses_hide_what_they_hold() {
        assert_eq!(quoted_end("'it''s' x", 0), Some(7));
        assert_eq!(quoted_end("'a\\'b' x", 0), Some(6));
        assert_eq!(quoted_end("`a``b` x", 0), Some(6));
        assert_eq!(closing_paren("(a, ')', (b)) c", 0), Some(13));
        assert_eq!(find_top_level("'x, y', (a, b), c", ","), Some(6));
        assert_eq!(
            split_top_level("IN a int, b enum('x,y'), `c,d` dec(5,2)").unwrap(),
            ["IN a int", " b enum('x,y')", " `c,d` dec(5,2)"]
        );
    }

    #[test]
    fn heads_are_read_token_by_token() {
        let mut tokens = Tokens::new("create /* x */ DEFINER=`a`@`%` trigger db.`t``r` rest");
        tokens.expect(&["CREATE"]).unwrap();
        tokens.skip_definer().unwrap();
        tokens.expect(&["TRIGGER"]).unwrap();
        assert_eq!(tokens.object_name("db").as_deref(), Some("t`r"));
        assert_eq!(tokens.rest(), " rest");
    }

    #[test]
    fn under_ansi_quotes_a_double_quote_names_an_identifier() {
        let head = r#"CREATE DEFINER="a"@"%" PROCEDURE "p ""q\" rest"#;
        let mut tokens = Tokens::under(head, "REAL_AS_FLOAT,ANSI_QUOTES,ANSI");
        tokens.expect(&["CREATE"]).unwrap();
        tokens.skip_definer().unwrap();
        tokens.expect(&["PROCEDURE"]).unwrap();
        assert_eq!(tokens.object_name("db").as_deref(), Some(r#"p "q\"#));
        assert_eq!(tokens.rest(), " rest");
        let mut plain = Tokens::under(r#""p" rest"#, "STRICT_TRANS_TABLES");
        assert_eq!(
            plain.next_token(),
            Some(Token::Literal(r#""p""#.to_owned()))
        );
    }
}
