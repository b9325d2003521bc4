//! A line diff between two texts of a document, as the history pages draw it: a table of the
//! changed lines with their context, each line with its numbers before and after, a `+` or `−`
//! sign, and the line inside `<ins>` or `<del>` with the change said in words for screen readers,
//! so an added line and a removed one differ by more than their colour; an unchanged stretch left
//! out is a row with its count. The rows carry classes only (`diff-added`, `diff-removed`,
//! `diff-unchanged`, `diff-collapsed`), which `history.css` beside this module colours, in the
//! reader's light or dark scheme. Every line is text, escaped like everything maud draws. The
//! diff itself is `fermata_docs::line_diff`'s, computed off the async threads ([`diff_texts`]).

use fermata_collab::{DiffLine, DiffRow, LineChange, LineDiff, line_diff};
use fermata_store::StoreError;
use maud::{Markup, html};

/// The style sheet of the pages that draw a diff.
pub(crate) const DIFF_STYLE: &str = "history.css";

/// The lines `new` differs from `old` by (`fermata_docs::line_diff`), computed on the blocking
/// pool as the history pages gather: a large document's diff is CPU work.
pub(crate) async fn diff_texts(old: String, new: String) -> Result<LineDiff, StoreError> {
    tokio::task::spawn_blocking(move || line_diff(&old, &new))
        .await
        .map_err(|error| StoreError::unavailable(format!("a diff was not computed: {error}")))
}

/// A diff as a table (or a sentence when nothing changed), with the number of lines added and
/// removed above it.
pub(crate) fn diff_table(diff: &LineDiff, id: &str) -> Markup {
    if diff.is_unchanged() {
        return html! { p.note #(id) { "The text is the same: no line changed." } };
    }
    let lines = |count: usize| if count == 1 { "line" } else { "lines" };
    html! {
        p.diff-counts {
            span.diff-count-added { (diff.added) " " (lines(diff.added)) " added" }
            ", "
            span.diff-count-removed { (diff.removed) " " (lines(diff.removed)) " removed" }
        }
        table.diff #(id) {
            thead {
                tr {
                    th.diff-number scope="col" { "Before" }
                    th.diff-number scope="col" { "After" }
                    th.diff-sign scope="col" { "Change" }
                    th scope="col" { "Line" }
                }
            }
            tbody {
                @for row in &diff.rows {
                    @match row {
                        DiffRow::Collapsed(count) => {
                            tr.diff-collapsed {
                                td colspan="4" { "⋯ " (count) " unchanged " (lines(*count)) }
                            }
                        }
                        DiffRow::Line(line) => { (diff_line(line)) }
                    }
                }
            }
        }
    }
}

fn diff_line(line: &DiffLine) -> Markup {
    // Context lines are not announced as such: only a change is said.
    let (class, sign, said) = match line.change {
        LineChange::Added => ("diff-added", "+", Some("added")),
        LineChange::Removed => ("diff-removed", "−", Some("removed")),
        LineChange::Unchanged => ("diff-unchanged", "", None),
    };
    let ending = html! {
        @if line.no_newline { span.diff-no-newline { " (no newline at the end)" } }
    };
    html! {
        tr class=(class) {
            td.diff-number { @if let Some(n) = line.old_number { (n) } }
            td.diff-number { @if let Some(n) = line.new_number { (n) } }
            td.diff-sign {
                @if let Some(said) = said {
                    span aria-hidden="true" { (sign) }
                    span.visually-hidden { (said) }
                }
            }
            td.diff-text {
                @match line.change {
                    LineChange::Added => { ins { (line.text) } }
                    LineChange::Removed => { del { (line.text) } }
                    LineChange::Unchanged => { span { (line.text) } }
                }
                (ending)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_line_is_marked_by_class_sign_and_element_and_escaped() {
        let html = diff_table(
            &line_diff(
                "# Plan\nKeep <this>\nDrop & go\n",
                "# Plan <script>\nKeep <this>\n",
            ),
            "d",
        )
        .into_string();
        for expected in [
            "<p class=\"diff-counts\"><span class=\"diff-count-added\">1 line added</span>, \
             <span class=\"diff-count-removed\">2 lines removed</span></p>",
            "<table class=\"diff\" id=\"d\">",
            "<tr class=\"diff-removed\"><td class=\"diff-number\">1</td><td class=\"diff-number\"></td>\
             <td class=\"diff-sign\"><span aria-hidden=\"true\">−</span>\
             <span class=\"visually-hidden\">removed</span></td>\
             <td class=\"diff-text\"><del># Plan</del></td></tr>",
            "<tr class=\"diff-added\"><td class=\"diff-number\"></td><td class=\"diff-number\">1</td>\
             <td class=\"diff-sign\"><span aria-hidden=\"true\">+</span>\
             <span class=\"visually-hidden\">added</span></td>\
             <td class=\"diff-text\"><ins># Plan &lt;script&gt;</ins></td></tr>",
            "<tr class=\"diff-unchanged\"><td class=\"diff-number\">2</td><td class=\"diff-number\">2</td>\
             <td class=\"diff-sign\"></td>\
             <td class=\"diff-text\"><span>Keep &lt;this&gt;</span></td></tr>",
            "<del>Drop &amp; go</del>",
        ] {
            assert!(html.contains(expected), "{expected} is not in {html}");
        }
        assert!(!html.contains("style="), "{html}");
        assert!(!html.contains("<script"), "{html}");
    }

    #[test]
    fn unchanged_stretches_are_collapsed_into_a_count() {
        let old: String = (1..=30).map(|n| format!("line {n}\n")).collect();
        let new = old.replace("line 15\n", "line fifteen\n");
        let html = diff_table(&line_diff(&old, &new), "d").into_string();
        assert_eq!(
            html.matches("class=\"diff-collapsed\"").count(),
            2,
            "{html}"
        );
        assert!(html.contains("⋯ 11 unchanged lines"), "{html}");
        assert!(html.contains("⋯ 12 unchanged lines"), "{html}");
        assert_eq!(
            html.matches("class=\"diff-unchanged\"").count(),
            6,
            "{html}"
        );
    }

    #[test]
    fn the_same_text_is_a_sentence_and_a_missing_newline_is_said() {
        let same = diff_table(&line_diff("a\n", "a\n"), "d").into_string();
        assert_eq!(
            same,
            "<p class=\"note\" id=\"d\">The text is the same: no line changed.</p>"
        );
        let ending = diff_table(&line_diff("a", "a\n"), "d").into_string();
        assert!(
            ending.contains(
                "<del>a</del><span class=\"diff-no-newline\"> (no newline at the end)</span>"
            ),
            "{ending}"
        );
    }
}
