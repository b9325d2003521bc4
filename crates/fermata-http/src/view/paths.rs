//! The addresses of the pages, built in one place, so a page that links to another and a form
//! that redirects to it cannot disagree.

use fermata_store::{Channel, Repository, Slug};

/// The address of the search results page (see `crate::search_page`).
pub(crate) const SEARCH_PATH: &str = "/search";

/// The canonical address of a document's page.
pub(crate) fn page_path(document: &Channel) -> String {
    place_path(&document.repository, &document.slug)
}

/// The address of the page of the document at `slug` in `repository`.
pub(crate) fn place_path(repository: &Repository, slug: &Slug) -> String {
    format!("/d/{repository}/{slug}")
}

/// The address of a repository's page.
pub(crate) fn repository_path(repository: &Repository) -> String {
    format!("/r/{repository}")
}

/// The address of a document's history session `number`: its diff, its text and the form that
/// restores it.
pub(crate) fn session_path(document: &Channel, number: i64) -> String {
    format!("/documents/{}/history/{number}", document.id)
}

/// The address of the page comparing two of a document's history sessions, without a choice
/// (`?from=A&to=B` picks them).
pub(crate) fn compare_path(document: &Channel) -> String {
    format!("/documents/{}/history/compare", document.id)
}
