//! The pages that say why there is nothing to show: a refusal of the authorization layer on a
//! page route, a page saying what went wrong, the page a signed-in user without the
//! `system_admin` role gets on the administrator pages; and a storage failure as a page route
//! answers it.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::html;

use super::Page;
use crate::error::{ApiError, RequestFailure, attach};

/// A page saying why there is nothing to show, with the way home.
pub(crate) fn message_page(status: StatusCode, title: &str, text: &str) -> Response {
    let body = html! {
        h1 { (title) }
        p.error role="alert" { (text) }
        p { a href="/" { "Home" } " · " a href="/account" { "Your account" } }
    };
    (status, Page::new(title, body)).into_response()
}

/// A refusal of the authorization layer on a page route, as a page: "not found" for what the
/// caller cannot read or what does not exist, "not allowed" for what their role does not allow.
/// Anything else (a redirect to the login form, a page already) is left as it is.
pub(crate) fn as_page(refusal: Response) -> Response {
    let json = refusal
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if !json {
        return refusal;
    }
    match refusal.status() {
        StatusCode::NOT_FOUND => message_page(
            StatusCode::NOT_FOUND,
            "Not found",
            "There is nothing at this address, or you are not a member of its repository.",
        ),
        StatusCode::FORBIDDEN => message_page(
            StatusCode::FORBIDDEN,
            "Not allowed",
            "Your role in this repository does not allow this.",
        ),
        _ => refusal,
    }
}

/// The page a signed-in user without the `system_admin` role gets on the administrator pages.
pub(crate) fn needs_system_admin(user: &str) -> Response {
    (StatusCode::FORBIDDEN, needs_system_admin_page(user)).into_response()
}

fn needs_system_admin_page(user: &str) -> Page {
    let body = html! {
        h1 { "Not allowed" }
        p role="alert" { "Signed in as " strong { (user) } ": this page needs the " code { "system_admin" } " role." }
        p { a href="/account" { "Your account" } }
    };
    Page::new("Not allowed", body)
}

/// A failure to read or change storage, as a page route answers it: 503 with `message`, the
/// cause kept for the log only.
pub(crate) fn unavailable(error: fermata_store::StoreError, message: &'static str) -> Response {
    attach(
        ApiError::unavailable(message).into_response(),
        RequestFailure::new(error),
    )
}

#[cfg(test)]
mod tests {
    use axum::body::to_bytes;
    use axum::response::Redirect;

    use super::*;

    async fn body(response: Response) -> String {
        let bytes = to_bytes(response.into_body(), usize::MAX).await.unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_json_refusal_becomes_a_page_and_anything_else_stays() {
        let missing =
            as_page(ApiError::new(StatusCode::NOT_FOUND, "not_found", "x").into_response());
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
        assert!(
            missing
                .headers()
                .contains_key(header::CONTENT_SECURITY_POLICY)
        );
        assert!(body(missing).await.contains("<h1>Not found</h1>"));

        let forbidden = as_page(ApiError::forbidden("x").into_response());
        assert_eq!(forbidden.status(), StatusCode::FORBIDDEN);
        assert!(body(forbidden).await.contains("<h1>Not allowed</h1>"));

        let login = as_page(Redirect::to("/login").into_response());
        assert_eq!(login.status(), StatusCode::SEE_OTHER);
        let unavailable = as_page(ApiError::unavailable("x").into_response());
        assert_eq!(unavailable.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(body(unavailable).await.starts_with('{'));
    }

    #[test]
    fn the_page_without_the_role() {
        let html = needs_system_admin_page("bob <&>").snapshot();
        insta::assert_snapshot!("needs_system_admin", html.replace("><", ">\n<"));
    }
}
