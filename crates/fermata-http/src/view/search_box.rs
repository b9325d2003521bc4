//! The search box: a plain GET form to the results page, on the home page (every repository of
//! the caller), on a repository's page (that repository, named in a hidden field the
//! authorization layer checks like any other list's), and atop the results themselves, where it
//! also offers the archived documents. It needs no script: Enter in the box sends it.

use fermata_store::Repository;
use fermata_store::search::MAX_QUERY_CHARS;
use maud::{Markup, html};

use super::SEARCH_PATH;

/// The search box holding `query`, searching `repository` or, without one, every repository of
/// the caller; with a box to tick for the archived documents when `archived` is given (ticked
/// when it is true).
pub(crate) fn search_box(
    repository: Option<&Repository>,
    query: &str,
    archived: Option<bool>,
) -> Markup {
    html! {
        form.search role="search" aria-label="Full-text search" method="get" action=(SEARCH_PATH) {
            label for="search" {
                @if repository.is_some() { "Search this repository's documents" }
                @else { "Search your documents" }
            }
            div.search-row {
                input #search type="search" name="q" value=(query) maxlength=(MAX_QUERY_CHARS)
                    autocomplete="off" aria-describedby="search-hint";
                button type="submit" { "Search" }
            }
            @if let Some(repository) = repository {
                input type="hidden" name="repository" value=(repository.to_string());
            }
            @if let Some(ticked) = archived {
                label.check {
                    input #search-archived type="checkbox" name="archived" value="1" checked[ticked];
                    " Include archived documents"
                }
            }
            p.note #search-hint {
                "Titles and text. All the words must be in a document; "
                code { "\"a phrase\"" } " in quotes, " code { "-word" } " to leave out, "
                code { "or" } " between alternatives."
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_box_sends_its_words_and_scope_by_get() {
        let acme = Repository::new("acme/app").unwrap();
        let html = search_box(Some(&acme), "plan \"<b>\"", Some(true)).into_string();
        for expected in [
            "<form class=\"search\" role=\"search\" aria-label=\"Full-text search\" method=\"get\" action=\"/search\">",
            "name=\"q\" value=\"plan &quot;&lt;b&gt;&quot;\" maxlength=\"300\"",
            "<input type=\"hidden\" name=\"repository\" value=\"acme/app\">",
            "name=\"archived\" value=\"1\" checked>",
            "Search this repository's documents",
        ] {
            assert!(html.contains(expected), "{expected} is not in {html}");
        }
        let everywhere = search_box(None, "", None).into_string();
        for absent in ["name=\"repository\"", "name=\"archived\""] {
            assert!(!everywhere.contains(absent), "{absent} is in {everywhere}");
        }
        assert!(everywhere.contains("Search your documents"), "{everywhere}");
    }
}
