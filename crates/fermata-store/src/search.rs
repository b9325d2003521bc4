//! The search store: full-text search of documents' titles and text, in the engine's own index,
//! kept in the transaction of every commit that changes either; what a search asks for
//! ([`SearchQuery`]), the one query language every adapter accepts ([`SearchTerms`]), and what it
//! finds ([`SearchHit`]), ranked, with a highlighted snippet, in keyset pages.
//!
//! What a reader may find is decided by the adapter in the query itself, from the reader's
//! memberships and roles as stored (see [`SearchStore::search`]), so a search never counts,
//! ranks or quotes a document its reader may not read. The rules and the syntax are in
//! docs/storage.md ("Search").

use async_trait::async_trait;

use crate::channel::{ChannelId, Repository, Slug};
use crate::error::{StoreError, StoreResult};
use crate::lease::Fence;
use crate::time::UnixMillis;
use crate::user::UserId;

/// The longest search, in characters.
pub const MAX_QUERY_CHARS: usize = 300;

/// The most words and phrases one search may name: each is one more look-up in the index.
pub const MAX_TERMS: usize = 16;

/// How much of a document's text is indexed, in characters. PostgreSQL refuses a `tsvector` of a
/// megabyte or more; this many characters stay well below that whatever their words, so no text
/// can make a commit fail for its index. The rest of a longer text is not searchable.
pub const MAX_INDEXED_CHARS: usize = 100_000;

/// The most hits one page shows. A search returns one more at most
/// ([`SearchQuery::most_hits`]), so a caller showing a full page can tell whether another follows.
pub const MAX_SEARCH_PAGE: usize = 100;

/// A parsed search: alternatives, any of which a document may match. Parsed once here, so every
/// adapter reads the same words the same way and user text reaches an engine only as quoted
/// phrases of its own query language, bound as a parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchTerms {
    alternatives: Vec<Alternative>,
}

/// One alternative: every `required` phrase and none of the `excluded` ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alternative {
    /// Never empty.
    pub required: Vec<String>,
    pub excluded: Vec<String>,
}

/// A piece of the search as the user wrote it.
#[derive(Debug, PartialEq, Eq)]
enum Token {
    /// A word or a quoted phrase, excluded when it was written with a leading `-`.
    Term { text: String, excluded: bool },
    /// A bare `or` between two terms.
    Or,
}

impl SearchTerms {
    /// Parses a search: words (a document must hold all of them), `"quoted phrases"` (words in
    /// that order), `-word` or `-"phrase"` (a document must not hold it) and `or` between terms
    /// (either side; `and` binds tighter). Letters are compared without case. A term without a
    /// letter or digit is left out; `"` never reaches a phrase. Refused as invalid: an empty
    /// search, one over [`MAX_QUERY_CHARS`] characters or [`MAX_TERMS`] terms, and an
    /// alternative that only excludes.
    pub fn parse(text: &str) -> StoreResult<Self> {
        if text.chars().count() > MAX_QUERY_CHARS {
            return Err(StoreError::invalid(format!(
                "a search has at most {MAX_QUERY_CHARS} characters"
            )));
        }
        let mut alternatives = Vec::new();
        let mut current = Alternative {
            required: Vec::new(),
            excluded: Vec::new(),
        };
        let mut terms = 0;
        for token in tokens(text) {
            match token {
                Token::Or => {
                    if !current.required.is_empty() || !current.excluded.is_empty() {
                        alternatives.push(std::mem::replace(
                            &mut current,
                            Alternative {
                                required: Vec::new(),
                                excluded: Vec::new(),
                            },
                        ));
                    }
                }
                Token::Term { text, excluded } => {
                    if !text.chars().any(char::is_alphanumeric) {
                        continue;
                    }
                    terms += 1;
                    if excluded {
                        current.excluded.push(text);
                    } else {
                        current.required.push(text);
                    }
                }
            }
        }
        if !current.required.is_empty() || !current.excluded.is_empty() {
            alternatives.push(current);
        }
        if alternatives.is_empty() {
            return Err(StoreError::invalid(
                "a search needs at least one word of letters or digits",
            ));
        }
        if terms > MAX_TERMS {
            return Err(StoreError::invalid(format!(
                "a search names at most {MAX_TERMS} words and phrases"
            )));
        }
        if alternatives.iter().any(|a| a.required.is_empty()) {
            return Err(StoreError::invalid(
                "a search cannot only exclude: name a word to find beside each excluded one",
            ));
        }
        Ok(SearchTerms { alternatives })
    }

    /// The alternatives, in the order they were written; never empty.
    pub fn alternatives(&self) -> &[Alternative] {
        &self.alternatives
    }
}

/// Splits a search into terms and `or`s. A quote runs to the next quote or the end; control
/// characters separate like spaces.
fn tokens(text: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    let separates = |c: char| c.is_whitespace() || c.is_control();
    while let Some(&c) = chars.peek() {
        if separates(c) {
            chars.next();
            continue;
        }
        let excluded = c == '-';
        if excluded {
            chars.next();
        }
        let mut term = String::new();
        let quoted = chars.peek() == Some(&'"');
        if quoted {
            chars.next();
            for c in chars.by_ref() {
                if c == '"' {
                    break;
                }
                term.push(if c.is_control() { ' ' } else { c });
            }
        } else {
            while let Some(&c) = chars.peek() {
                if separates(c) {
                    break;
                }
                chars.next();
                if c != '"' {
                    term.push(c);
                }
            }
        }
        if !quoted && !excluded && term.eq_ignore_ascii_case("or") {
            tokens.push(Token::Or);
        } else {
            tokens.push(Token::Term {
                text: term.trim().to_owned(),
                excluded,
            });
        }
    }
    // An `or` counts only between two terms.
    let mut kept: Vec<Token> = Vec::with_capacity(tokens.len());
    let mut pending_or = false;
    for token in tokens {
        match token {
            Token::Or => pending_or = true,
            term @ Token::Term { .. } => {
                if std::mem::take(&mut pending_or) && !kept.is_empty() {
                    kept.push(Token::Or);
                }
                kept.push(term);
            }
        }
    }
    kept
}

/// What a document's search row holds of its text: at most [`MAX_INDEXED_CHARS`] characters,
/// control characters other than line breaks and tabs turned into spaces (adapters mark
/// highlights with control characters, so none may come from a document).
pub fn indexed_text(text: &str) -> String {
    text.chars()
        .take(MAX_INDEXED_CHARS)
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                ' '
            } else {
                c
            }
        })
        .collect()
}

/// Where a page of hits starts: after this hit in the order of the search, best first, ties by
/// document ID.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchCursor {
    pub score: f64,
    pub id: ChannelId,
}

impl SearchCursor {
    /// Whether a hit of `score` on `id` comes after this cursor.
    pub fn precedes(&self, score: f64, id: &ChannelId) -> bool {
        score < self.score || (score == self.score && id > &self.id)
    }
}

/// A search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchQuery {
    /// Who searches: only what they may read is searched (see [`SearchStore::search`]).
    pub reader: UserId,
    pub terms: SearchTerms,
    /// One repository; `None` for every repository the reader is a member of.
    pub repository: Option<Repository>,
    /// Archived documents are left out unless this is set.
    pub include_archived: bool,
    /// A previous page's last hit.
    pub after: Option<SearchCursor>,
    /// At most this many hits (see [`SearchQuery::most_hits`]).
    pub limit: usize,
}

impl SearchQuery {
    /// How many hits the search returns at most: `limit`, capped at one more than
    /// [`MAX_SEARCH_PAGE`].
    pub fn most_hits(&self) -> usize {
        self.limit.min(MAX_SEARCH_PAGE + 1)
    }
}

/// A piece of a snippet: text as the document has it, marked where it matched the search. The
/// pieces are plain text; whoever shows them escapes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnippetPart {
    pub text: String,
    pub matched: bool,
}

/// A document a search found.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    pub id: ChannelId,
    pub repository: Repository,
    pub title: String,
    pub slug: Slug,
    pub archived_at: Option<UnixMillis>,
    pub updated_at: UnixMillis,
    /// Higher is better. Comparable only between hits of one search on one adapter: each engine
    /// ranks in its own way, and a document's score moves as the other documents change.
    pub score: f64,
    /// A short passage of the text around what matched; empty for a document without text.
    pub snippet: Vec<SnippetPart>,
}

/// The search store. Its index is written by the collaboration store's writes themselves (the
/// text a commit carries, a title, a created document's first text, an epoch replacement), in
/// their transaction, and a deleted document leaves it in its own.
#[async_trait]
pub trait SearchStore: Send + Sync {
    /// A page of the documents that match `query.terms`, best first (ties by ID), after
    /// `query.after`; archived ones only when asked for.
    ///
    /// Only documents the reader may read are searched, decided in the same query from what is
    /// stored: those of the repositories the reader is a member of, and, where the query names
    /// a repository, every document of it for a `system_admin` (the override that the caller
    /// records in the repository's audit before it searches, as for any other use). Anyone else,
    /// a reader no longer stored included, finds nothing: an empty page, never an error or a
    /// count, so a search tells an outsider nothing of a repository, not even that it exists.
    async fn search(&self, query: &SearchQuery) -> StoreResult<Vec<SearchHit>>;

    /// Documents whose indexed text may be behind their journal (an upgrade indexed them from
    /// their last checkpoint), by ID, after `after`, at most `limit`.
    async fn stale_texts(
        &self,
        after: Option<&ChannelId>,
        limit: usize,
    ) -> StoreResult<Vec<ChannelId>>;

    /// Indexes `text` as the text of document `id` at `revision`, fenced, and marks it current;
    /// false (nothing written) when the document is gone or at another revision.
    async fn refresh_text(
        &self,
        fence: &Fence,
        id: &ChannelId,
        revision: i64,
        text: &str,
    ) -> StoreResult<bool>;
}

#[cfg(test)]
mod tests {
    use super::*;

    type Parsed = Vec<(Vec<String>, Vec<String>)>;

    /// Alternatives as written in a case: (required, excluded).
    type Written<'a> = &'a [(&'a [&'a str], &'a [&'a str])];

    fn parsed(text: &str) -> Parsed {
        SearchTerms::parse(text)
            .unwrap()
            .alternatives
            .into_iter()
            .map(|a| (a.required, a.excluded))
            .collect()
    }

    fn expected(alternatives: Written<'_>) -> Parsed {
        let owned = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect();
        alternatives
            .iter()
            .map(|(required, excluded)| (owned(required), owned(excluded)))
            .collect()
    }

    #[test]
    fn searches_parse_into_alternatives_of_phrases() {
        let cases: &[(&str, Written<'_>)] = &[
            ("release plan", &[(&["release", "plan"], &[])]),
            (
                "\"release plan\" -draft",
                &[(&["release plan"], &["draft"])],
            ),
            (
                "alpha beta or gamma -\"old news\"",
                &[(&["alpha", "beta"], &[]), (&["gamma"], &["old news"])],
            ),
            ("or alpha or", &[(&["alpha"], &[])]),
            ("alpha OR OR beta", &[(&["alpha"], &[]), (&["beta"], &[])]),
            ("\"or\"", &[(&["or"], &[])]),
            (
                "café \"unclosed quote",
                &[(&["café", "unclosed quote"], &[])],
            ),
            ("a\"b*c:(d) !!! --", &[(&["ab*c:(d)"], &[])]),
            ("日本語 -x\u{1}y", &[(&["日本語", "y"], &["x"])]),
        ];
        for (text, alternatives) in cases {
            assert_eq!(parsed(text), expected(alternatives), "{text:?}");
        }
    }

    #[test]
    fn empty_long_and_only_excluding_searches_are_refused() {
        for text in ["", "   ", "!!! \"\" -", "or", "-draft", "alpha or -beta"] {
            let error = SearchTerms::parse(text).unwrap_err();
            assert_eq!(error.kind(), crate::ErrorKind::Invalid, "{text:?}");
        }
        assert!(SearchTerms::parse(&"a".repeat(MAX_QUERY_CHARS)).is_ok());
        assert!(SearchTerms::parse(&"a".repeat(MAX_QUERY_CHARS + 1)).is_err());
        let many = vec!["w"; MAX_TERMS + 1].join(" ");
        assert!(SearchTerms::parse(&many).is_err());
    }

    #[test]
    fn indexed_text_is_bounded_and_free_of_control_characters() {
        assert_eq!(indexed_text("a\u{1}b\u{2}c\nd\te\r"), "a b c\nd\te ");
        let long = "é".repeat(MAX_INDEXED_CHARS + 10);
        assert_eq!(indexed_text(&long).chars().count(), MAX_INDEXED_CHARS);
    }

    #[test]
    fn cursors_order_by_score_then_id() {
        let cursor = SearchCursor {
            score: 2.0,
            id: ChannelId("b".to_owned()),
        };
        assert!(cursor.precedes(1.0, &ChannelId("a".to_owned())));
        assert!(cursor.precedes(2.0, &ChannelId("c".to_owned())));
        assert!(!cursor.precedes(2.0, &ChannelId("b".to_owned())));
        assert!(!cursor.precedes(3.0, &ChannelId("z".to_owned())));
    }
}
