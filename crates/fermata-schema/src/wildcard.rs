//! Name patterns with wildcards, matched against the whole of a name, one character at a time
//! and case-sensitively: the one matcher behind the ignore patterns of `[schema]` ([`filter`])
//! and the database patterns of MySQL grants (`source_check::grants`), each written in its own
//! [`Syntax`].
//!
//! Written here rather than taken from `wildmatch`, which takes any two wildcard characters but
//! has no escape, so it could not read a grant's `\_`; one matcher for both syntaxes keeps them
//! from drifting apart.
//!
//! [`filter`]: crate::filter

/// How a pattern writes its wildcards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syntax {
    /// `*` is any run of characters, `?` one character, every other character itself; nothing
    /// is escaped.
    Glob,
    /// MySQL's, for the database of a grant: `%` is any run of characters, `_` one character,
    /// and `\` makes the next character itself (a `\` at the end is itself).
    Grant,
}

/// One step of a pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    Exact(char),
    One,
    Any,
}

impl Syntax {
    fn pieces(self, pattern: &str) -> Vec<Piece> {
        let mut pieces = Vec::new();
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            pieces.push(match (self, c) {
                (Syntax::Glob, '*') | (Syntax::Grant, '%') => Piece::Any,
                (Syntax::Glob, '?') | (Syntax::Grant, '_') => Piece::One,
                (Syntax::Grant, '\\') => Piece::Exact(chars.next().unwrap_or('\\')),
                (_, c) => Piece::Exact(c),
            });
        }
        pieces
    }

    /// Whether `pattern` matches the whole of `name`.
    pub(crate) fn matches(self, pattern: &str, name: &str) -> bool {
        let pieces = self.pieces(pattern);
        let name: Vec<char> = name.chars().collect();
        // Classic wildcard matching with one backtracking point: the last `Any` met, and where
        // in the name its run ends so far.
        let (mut p, mut n) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while n < name.len() {
            match pieces.get(p) {
                Some(Piece::Any) => {
                    star = Some((p, n));
                    p += 1;
                }
                Some(Piece::One) => {
                    p += 1;
                    n += 1;
                }
                Some(Piece::Exact(c)) if *c == name[n] => {
                    p += 1;
                    n += 1;
                }
                _ => match star {
                    Some((star_p, star_n)) => {
                        p = star_p + 1;
                        n = star_n + 1;
                        star = Some((star_p, star_n + 1));
                    }
                    None => return false,
                },
            }
        }
        pieces[p..].iter().all(|piece| *piece == Piece::Any)
    }

    /// The one name `pattern` matches, when it has no wildcard.
    pub(crate) fn exact_name(self, pattern: &str) -> Option<String> {
        self.pieces(pattern)
            .into_iter()
            .map(|piece| match piece {
                Piece::Exact(c) => Some(c),
                Piece::One | Piece::Any => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Syntax::{Glob, Grant};

    #[test]
    fn patterns_match_whole_names_in_their_syntax() {
        for (syntax, pattern, name, expected) in [
            (Glob, "tmp?_*", "tmp1_x", true),
            // A character is one character, however many bytes it takes.
            (Glob, "tmp?_*", "tmpé_", true),
            (Glob, "tmp?_*", "tmp_x", false),
            (Glob, "_*_gho", "_orders_gho", true),
            (Glob, "_*_gho", "_a_b_gho", true),
            (Glob, "_*_gho", "_orders_gho2", false),
            (Glob, "_*_gho", "x_orders_gho", false),
            (Glob, "*", "", true),
            (Glob, "a*b*c", "aXbYbc", true),
            (Glob, "Orders", "orders", false),
            // Only `*` and `?` are wildcards, and nothing escapes them.
            (Glob, "s%", "shop", false),
            (Glob, "s_op", "shop", false),
            (Glob, "s_op", "s_op", true),
            (Glob, "a\\*", "a\\bc", true),
            (Glob, "a\\*", "a*", false),
            (Grant, "shop", "shop", true),
            (Grant, "shop", "shops", false),
            (Grant, "Shop", "shop", false),
            (Grant, "s%", "shop", true),
            (Grant, "s_op", "shop", true),
            (Grant, "s\\_op", "shop", false),
            (Grant, "s\\_op", "s_op", true),
            (Grant, "fm\\_%", "fm_a", true),
            (Grant, "fm\\_%", "fmxa", false),
            (Grant, "%", "", true),
            (Grant, "a%b%c", "aXbYbc", true),
            (Grant, "s*", "shop", false),
            (Grant, "s?op", "s?op", true),
            (Grant, "a\\\\", "a\\", true),
            (Grant, "a\\", "a\\", true),
        ] {
            assert_eq!(
                syntax.matches(pattern, name),
                expected,
                "{syntax:?} {pattern:?} {name:?}"
            );
        }
    }

    #[test]
    fn an_exact_name_is_a_pattern_without_wildcards() {
        for (syntax, pattern, expected) in [
            (Grant, "shop", Some("shop")),
            (Grant, "s\\_op", Some("s_op")),
            (Grant, "a\\\\", Some("a\\")),
            (Grant, "a\\", Some("a\\")),
            (Grant, "s%", None),
            (Grant, "fm\\_%", None),
            (Grant, "s_op", None),
            (Glob, "s_op", Some("s_op")),
            (Glob, "s?op", None),
        ] {
            assert_eq!(
                syntax.exact_name(pattern).as_deref(),
                expected,
                "{syntax:?} {pattern:?}"
            );
        }
    }
}
