//! Line diffs between two texts of a document, as its history shows them: which lines a session
//! added and removed against the session before it, or between any two sessions. A diff keeps
//! [`CONTEXT_LINES`] unchanged lines around each change and collapses every longer unchanged run
//! into a count, so a small change to a long document stays short.
//!
//! The lines are compared with `similar` (Myers' algorithm). A diff is given [`TIMEOUT`] at
//! most: past it the rest of the texts is compared coarsely (a changed stretch may show as a
//! larger replacement than needed), never wrongly, so a pathological pair of large texts cannot
//! hold the caller for long.

use std::time::Duration;

use similar::{ChangeTag, TextDiff};

/// Unchanged lines kept before and after each change.
pub const CONTEXT_LINES: usize = 3;

/// The longest a diff searches for the smallest set of changes.
const TIMEOUT: Duration = Duration::from_secs(1);

/// The lines two texts differ by, in the order of the texts, with their context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineDiff {
    /// Empty when the texts are the same.
    pub rows: Vec<DiffRow>,
    /// Lines only the new text has.
    pub added: usize,
    /// Lines only the old text has.
    pub removed: usize,
}

impl LineDiff {
    /// Whether the texts have the same lines.
    pub fn is_unchanged(&self) -> bool {
        self.added == 0 && self.removed == 0
    }
}

/// One row of a diff: a line, or a run of unchanged lines left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffRow {
    Line(DiffLine),
    /// This many unchanged lines, not shown.
    Collapsed(usize),
}

/// One line of a diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffLine {
    pub change: LineChange,
    /// Its number in the old text, from 1; `None` for an added line.
    pub old_number: Option<usize>,
    /// Its number in the new text, from 1; `None` for a removed line.
    pub new_number: Option<usize>,
    /// The line without its line ending.
    pub text: String,
    /// The line ends its text without a newline: said, because a line that differs only by
    /// its ending would otherwise show as the same text removed and added.
    pub no_newline: bool,
}

/// What happened to a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineChange {
    /// In both texts: context around a change.
    Unchanged,
    /// Only in the new text.
    Added,
    /// Only in the old text.
    Removed,
}

/// The lines `old` and `new` differ by, with [`CONTEXT_LINES`] of context.
pub fn line_diff(old: &str, new: &str) -> LineDiff {
    let diff = TextDiff::configure().timeout(TIMEOUT).diff_lines(old, new);
    let old_lines = diff.old_slices().len();
    let mut result = LineDiff {
        rows: Vec::new(),
        added: 0,
        removed: 0,
    };
    // The old text's lines up to here are shown or collapsed already.
    let mut covered = 0;
    for group in diff.grouped_ops(CONTEXT_LINES) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let start = first.old_range().start;
        if start > covered {
            result.rows.push(DiffRow::Collapsed(start - covered));
        }
        covered = last.old_range().end;
        for op in &group {
            for change in diff.iter_changes(op) {
                let line = change.value();
                let change_kind = match change.tag() {
                    ChangeTag::Equal => LineChange::Unchanged,
                    ChangeTag::Insert => {
                        result.added += 1;
                        LineChange::Added
                    }
                    ChangeTag::Delete => {
                        result.removed += 1;
                        LineChange::Removed
                    }
                };
                let text = line.strip_suffix('\n').unwrap_or(line);
                result.rows.push(DiffRow::Line(DiffLine {
                    change: change_kind,
                    old_number: change.old_index().map(|index| index + 1),
                    new_number: change.new_index().map(|index| index + 1),
                    text: text.strip_suffix('\r').unwrap_or(text).to_owned(),
                    no_newline: change.missing_newline(),
                }));
            }
        }
    }
    if !result.rows.is_empty() && covered < old_lines {
        result.rows.push(DiffRow::Collapsed(old_lines - covered));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The diff as one line per row: a sign, the old and new numbers, the text; `…N` for a
    /// collapsed run, `$` for a missing newline.
    fn show(diff: &LineDiff) -> Vec<String> {
        diff.rows
            .iter()
            .map(|row| match row {
                DiffRow::Collapsed(lines) => format!("…{lines}"),
                DiffRow::Line(line) => {
                    let sign = match line.change {
                        LineChange::Unchanged => ' ',
                        LineChange::Added => '+',
                        LineChange::Removed => '-',
                    };
                    let number = |n: Option<usize>| n.map_or("-".to_owned(), |n| n.to_string());
                    format!(
                        "{sign}{} {} {}{}",
                        number(line.old_number),
                        number(line.new_number),
                        line.text,
                        if line.no_newline { "$" } else { "" }
                    )
                }
            })
            .collect()
    }

    fn numbered(lines: std::ops::RangeInclusive<usize>) -> String {
        lines.map(|n| format!("line {n}\n")).collect()
    }

    #[test]
    fn the_same_text_has_no_rows() {
        for text in ["", "one\n", "one\ntwo", &numbered(1..=40)] {
            let diff = line_diff(text, text);
            assert!(diff.is_unchanged(), "{text:?}");
            assert_eq!(diff.rows, [], "{text:?}");
        }
    }

    #[test]
    fn a_change_keeps_three_lines_around_it_and_collapses_the_rest() {
        let old = numbered(1..=20);
        let new = old.replace("line 10\n", "line ten\n");
        let diff = line_diff(&old, &new);
        assert_eq!((diff.added, diff.removed), (1, 1));
        assert_eq!(
            show(&diff),
            [
                "…6",
                " 7 7 line 7",
                " 8 8 line 8",
                " 9 9 line 9",
                "-10 - line 10",
                "+- 10 line ten",
                " 11 11 line 11",
                " 12 12 line 12",
                " 13 13 line 13",
                "…7",
            ]
        );
    }

    #[test]
    fn changes_far_apart_are_separate_and_near_ones_share_their_context() {
        let old = numbered(1..=30);
        let new = old
            .replace("line 2\n", "")
            .replace("line 20\n", "line 20\nline 20½\n")
            .replace("line 25\n", "line 25!\n");
        let shown = show(&line_diff(&old, &new));
        assert_eq!(
            shown,
            [
                " 1 1 line 1",
                "-2 - line 2",
                " 3 2 line 3",
                " 4 3 line 4",
                " 5 4 line 5",
                "…12",
                " 18 17 line 18",
                " 19 18 line 19",
                " 20 19 line 20",
                "+- 20 line 20½",
                " 21 21 line 21",
                " 22 22 line 22",
                " 23 23 line 23",
                " 24 24 line 24",
                "-25 - line 25",
                "+- 25 line 25!",
                " 26 26 line 26",
                " 27 27 line 27",
                " 28 28 line 28",
                "…2",
            ]
        );
    }

    #[test]
    fn from_nothing_everything_is_added_and_to_nothing_removed() {
        let added = line_diff("", "# Plan\n\nShip it.");
        assert_eq!((added.added, added.removed), (3, 0));
        assert_eq!(show(&added), ["+- 1 # Plan", "+- 2 ", "+- 3 Ship it.$"]);
        let removed = line_diff("# Plan\n", "");
        assert_eq!((removed.added, removed.removed), (0, 1));
        assert_eq!(show(&removed), ["-1 - # Plan"]);
    }

    #[test]
    fn a_line_that_gains_its_newline_says_so() {
        let diff = line_diff("one\ntwo", "one\ntwo\n");
        assert_eq!(show(&diff), [" 1 1 one", "-2 - two$", "+- 2 two"]);
    }

    #[test]
    fn text_is_kept_as_it_is_without_line_endings() {
        let diff = line_diff("<b>&</b>\r\n", "<b>&amp;</b>\r\n");
        assert_eq!(show(&diff), ["-1 - <b>&</b>", "+- 1 <b>&amp;</b>"]);
    }
}
