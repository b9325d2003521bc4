//! The comparison of two of a document's history sessions, for every member of its repository:
//! `GET /documents/{id}/history/compare?from=A&to=B` shows the lines session B's text differs
//! from session A's by (a line diff, drawn by `view::diff_table`), under a form that picks the
//! two among the sessions the document page lists ([`HISTORY`]); without a choice it compares the
//! newest session with the one before it. A session that is not among them is said above the
//! form (404). A session's own page, its diff against the session before it, is in
//! `document_actions`, beside the form that restores it.
//!
//! The handler gathers the page into a plain struct ([`ComparePage`]), the diff computed on the
//! blocking pool (`view::diff_texts`), and [`render_compare`] draws it. The page has no script.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use fermata_collab::LineDiff;
use fermata_store::{Channel, ErrorKind, RepositoryRole, UnixMillis, Version};
use maud::{Markup, html};
use serde::Deserialize;

use crate::HttpState;
use crate::policy::{Access, DocumentGrant, Routes};
use crate::view::{
    DIFF_STYLE, HISTORY, Page, compare_path, diff_table, diff_texts, message_page, page_path,
    relative_time, session_path, unavailable,
};

pub(crate) fn routes() -> Routes {
    Routes::pages().get(
        "/documents/{id}/history/compare",
        Access::Document {
            need: RepositoryRole::Viewer,
            client_tokens: false,
        },
        compare,
    )
}

/// What the comparison page shows.
#[derive(Debug)]
struct ComparePage {
    document: Channel,
    /// The sessions the form offers, newest first.
    sessions: Vec<SessionChoice>,
    /// The sessions picked (or the newest two by default), and their diff.
    comparison: Option<Comparison>,
    /// What was asked for and is not there, said above the form.
    refusal: Option<String>,
    /// The moment the page is drawn for: the sessions' times are told relative to it.
    now: UnixMillis,
}

/// A session the form offers.
#[derive(Debug)]
struct SessionChoice {
    number: i64,
    ended_at: UnixMillis,
}

/// Two sessions compared: the lines `to`'s text differs from `from`'s by.
#[derive(Debug)]
struct Comparison {
    from: i64,
    to: i64,
    diff: LineDiff,
}

/// The sessions `?from=` and `?to=` name, as given.
#[derive(Debug, Deserialize)]
struct CompareQuery {
    from: Option<String>,
    to: Option<String>,
}

/// Two sessions compared, picked with the page's form; without a choice, the newest session
/// against the one before it.
async fn compare(
    State(state): State<HttpState>,
    grant: DocumentGrant,
    Query(query): Query<CompareQuery>,
) -> Response {
    let versions = match state.documents.versions(grant.id(), HISTORY).await {
        Ok(versions) => versions,
        Err(error) if error.kind() == ErrorKind::Missing => {
            return message_page(
                StatusCode::NOT_FOUND,
                "Not found",
                "There is no such document.",
            );
        }
        Err(error) => {
            return unavailable(error, "the document's history cannot be read just now");
        }
    };
    // A session named by `asked`, or the `default`-th newest (the newest when there is one only).
    let find = |asked: &Option<String>, default: usize| -> Result<Option<&Version>, String> {
        match asked
            .as_deref()
            .map(str::trim)
            .filter(|asked| !asked.is_empty())
        {
            None => Ok(versions.get(default).or(versions.first())),
            Some(asked) => asked
                .parse::<i64>()
                .ok()
                .and_then(|number| versions.iter().find(|v| v.number == number))
                .map(Some)
                .ok_or_else(|| {
                    format!("There is no session {asked} among the latest {HISTORY} sessions.")
                }),
        }
    };
    let (mut comparison, mut refusal) = (None, None);
    match (find(&query.from, 1), find(&query.to, 0)) {
        (Ok(Some(from)), Ok(Some(to))) => {
            match diff_texts(from.text.clone(), to.text.clone()).await {
                Ok(diff) => {
                    comparison = Some(Comparison {
                        from: from.number,
                        to: to.number,
                        diff,
                    });
                }
                Err(error) => {
                    return unavailable(error, "the sessions cannot be compared just now");
                }
            }
        }
        (Err(why), _) | (_, Err(why)) => refusal = Some(why),
        // No session yet: the page says so.
        _ => {}
    }
    let status = if refusal.is_some() {
        StatusCode::NOT_FOUND
    } else {
        StatusCode::OK
    };
    let page = ComparePage {
        document: grant.channel,
        sessions: versions
            .iter()
            .map(|v| SessionChoice {
                number: v.number,
                ended_at: v.ended_at,
            })
            .collect(),
        comparison,
        refusal,
        now: UnixMillis::now(),
    };
    (status, render_compare(&page)).into_response()
}

fn render_compare(page: &ComparePage) -> Page {
    let document = &page.document;
    let picked = |of: fn(&Comparison) -> i64| page.comparison.as_ref().map(of);
    let (from, to) = (picked(|c| c.from), picked(|c| c.to));
    let body = html! {
        h1 { (document.title) ": compare sessions" }
        p.note { a href=(page_path(document)) { "Back to the document" } }
        @if let Some(refusal) = &page.refusal {
            p.error role="alert" #compare-refused { (refusal) }
        }
        @if page.sessions.is_empty() {
            p.note #no-sessions { "No editing sessions yet." }
        } @else {
            form #compare-form method="get" action=(compare_path(document)) {
                div.compare-pick {
                    label for="compare-from" { "From session" }
                    (session_select("compare-from", "from", &page.sessions, from, page.now))
                }
                div.compare-pick {
                    label for="compare-to" { "To session" }
                    (session_select("compare-to", "to", &page.sessions, to, page.now))
                }
                div { button type="submit" { "Compare" } }
            }
        }
        @if let Some(comparison) = &page.comparison {
            h2 { "Changes from session " (comparison.from) " to session " (comparison.to) }
            p.note {
                a href=(session_path(document, comparison.from)) { "Session " (comparison.from) }
                " · "
                a href=(session_path(document, comparison.to)) { "Session " (comparison.to) }
            }
            (diff_table(&comparison.diff, "compare-diff"))
        }
    };
    Page::new(format!("{} · compare sessions", document.title), body).style(DIFF_STYLE)
}

/// A choice of one of `sessions`, `selected` chosen.
fn session_select(
    id: &str,
    name: &str,
    sessions: &[SessionChoice],
    selected: Option<i64>,
    now: UnixMillis,
) -> Markup {
    html! {
        select #(id) name=(name) {
            @for session in sessions {
                option value=(session.number) selected[selected == Some(session.number)] {
                    "Session " (session.number) ", ended " (relative_time(session.ended_at, now))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use fermata_store_testkit::fixtures;

    use super::*;

    const ID: &str = "0b6f3c1e-52a4-4d8e-9c61-7a2f0e9d4b13";
    /// 2023-11-14T22:13:20.123Z.
    const NOW: UnixMillis = UnixMillis(1_700_000_000_123);

    fn document() -> Channel {
        fixtures::channel(ID, "acme/app")
    }

    fn compare_page(comparison: Option<Comparison>, refusal: Option<&str>) -> ComparePage {
        ComparePage {
            document: document(),
            sessions: (1..=3)
                .rev()
                .map(|number| SessionChoice {
                    number,
                    ended_at: UnixMillis(NOW.0 - 60_000 * (4 - number)),
                })
                .collect(),
            comparison,
            refusal: refusal.map(str::to_owned),
            now: NOW,
        }
    }

    #[test]
    fn the_comparison_page_offers_every_listed_session_with_the_picked_ones_selected() {
        let html = render_compare(&compare_page(
            Some(Comparison {
                from: 1,
                to: 3,
                diff: fermata_collab::line_diff("a\n", "b\n"),
            }),
            None,
        ))
        .snapshot();
        for expected in [
            "<title>Plan · compare sessions · Fermata</title>",
            &format!(
                "<form id=\"compare-form\" method=\"get\" action=\"/documents/{ID}/history/compare\">"
            ),
            "<label for=\"compare-from\">From session</label><select id=\"compare-from\" name=\"from\">",
            "<option value=\"1\" selected>Session 1, ended 3 minutes ago</option>",
            "<option value=\"3\">Session 3, ended 1 minute ago</option>",
            "<label for=\"compare-to\">To session</label><select id=\"compare-to\" name=\"to\">",
            "<option value=\"3\" selected>Session 3, ended 1 minute ago</option>",
            "<h2>Changes from session 1 to session 3</h2>",
            "<del>a</del>",
            "<ins>b</ins>",
            &format!("href=\"/documents/{ID}/history/1\""),
        ] {
            assert!(html.contains(expected), "{expected} is not in {html}");
        }
        assert!(!html.contains("compare-refused"), "{html}");
    }

    #[test]
    fn a_session_that_is_not_there_is_said_above_the_form() {
        let html = render_compare(&compare_page(None, Some("There is no session 9."))).snapshot();
        assert!(
            html.contains("<p class=\"error\" id=\"compare-refused\" role=\"alert\">There is no session 9.</p>"),
            "{html}"
        );
        assert!(html.contains("id=\"compare-form\""), "{html}");
        assert!(!html.contains("<table"), "{html}");
    }
}
