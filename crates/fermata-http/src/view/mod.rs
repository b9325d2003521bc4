//! What every page for people shares, and nothing that decides access or reads storage: the one
//! skeleton every HTML answer is drawn in, under the one Content-Security-Policy ([`Page`]); the
//! addresses pages link to and redirect to; the pages that say why there is nothing to show
//! (the authorization layer's refusals among them); times told relative to the request's own
//! ([`time()`]); the search box the home, repository and results pages carry; and the style
//! sheets, `page.css` for every page and `admin.css` for the administrator pages, files beside
//! this module that `crate::assets` serves. Both follow the reader's light or dark preference.
//! The history pages share the diff table ([`diff_table`]) and its style sheet, `history.css`.
//!
//! This is the leaf of the view layer. The page modules (each a handler that checks nothing the
//! route table did not and gathers its page's data into a plain struct, and a function that draws
//! that struct) import it and never one another; it imports no page module and no part of the
//! policy, so the policy shows its refusals as pages without depending on any page.

mod diff;
mod page;
mod paths;
mod refusals;
mod search_box;
mod time;

pub(crate) use diff::{DIFF_STYLE, diff_table, diff_texts};
pub(crate) use page::{Nonce, Page, content_security_policy};
pub(crate) use paths::{SEARCH_PATH, page_path, place_path, repository_path};
pub(crate) use paths::{compare_path, session_path};
pub(crate) use refusals::{as_page, message_page, needs_system_admin, unavailable};
pub(crate) use search_box::search_box;
pub(crate) use time::relative as relative_time;
pub(crate) use time::{time, time_text};

/// History sessions the document page lists, and among which a session's page finds its
/// session: one number, so every session the page links to has a page.
pub(crate) const HISTORY: usize = 20;
