//! CSRF protection for every state-changing request a browser can make with its cookie.
//!
//! A request other than GET, HEAD or OPTIONS is refused with 403 when its `Origin` header names
//! another site, and, when it carries the session cookie (and no `Authorization` header), unless
//! it presents the session's CSRF token: in the `X-CSRF-Token` header, or as the `csrf` field of a
//! form. The token is an HMAC of the cookie's secret, so it needs no storage and is useless
//! without the cookie. The login form, which has no session yet, checks its own double-submit
//! cookie.

use axum::body::{Body, to_bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use fermata_crypto::{SecretToken, csrf_tokens_match};

use crate::auth::SESSION_COOKIE;
use crate::error::ApiError;

/// The header programs using a browser session send the token in.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// The form field pages send the token in.
pub const CSRF_FIELD: &str = "csrf";
/// The largest form body read to find the token.
const MAX_FORM_BYTES: usize = 1 << 20;

fn refused(message: &str) -> Response {
    ApiError::new(StatusCode::FORBIDDEN, "csrf", message.to_owned()).into_response()
}

/// Whether `Origin`, when present, names the host the request was sent to.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    origin
        .to_str()
        .ok()
        .and_then(|origin| origin.split_once("://"))
        .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host))
}

fn session_secret(headers: &HeaderMap) -> Option<SecretToken> {
    axum_extra::extract::CookieJar::from_headers(headers)
        .get(SESSION_COOKIE)
        .map(|cookie| SecretToken::from_given(cookie.value()))
}

fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"))
}

/// The middleware.
pub async fn protect(request: Request, next: Next) -> Response {
    if matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) {
        return next.run(request).await;
    }
    if !same_origin(request.headers()) {
        return refused("cross-site request refused");
    }
    // A bearer token is not sent by browsers on their own; only it skips the check (any other
    // Authorization header does not authenticate, and the cookie is then not consulted either).
    if request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("Bearer ") || v.starts_with("bearer "))
    {
        return next.run(request).await;
    }
    // Logging in has its own protection (the form's double-submit cookie; the API takes only
    // JSON, which no cross-site form can send), and must work with a stale cookie in the browser.
    if matches!(request.uri().path(), "/login" | "/api/v1/session")
        && *request.method() == Method::POST
    {
        return next.run(request).await;
    }
    let Some(secret) = session_secret(request.headers()) else {
        return next.run(request).await;
    };
    if let Some(token) = request.headers().get(CSRF_HEADER) {
        let valid = token
            .to_str()
            .is_ok_and(|token| csrf_tokens_match(&secret, token));
        return if valid {
            next.run(request).await
        } else {
            refused("the CSRF token does not match this session")
        };
    }
    if !is_form(request.headers()) {
        return refused("missing CSRF token: send the X-CSRF-Token header");
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = to_bytes(body, MAX_FORM_BYTES).await else {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            "the form is too large",
        )
        .into_response();
    };
    let fields: Vec<(String, String)> = serde_urlencoded::from_bytes(&bytes).unwrap_or_default();
    // Exactly one token: with two, a check and a handler could each read a different one.
    let mut tokens = fields.iter().filter(|(name, _)| name == CSRF_FIELD);
    let valid = match (tokens.next(), tokens.next()) {
        (Some((_, value)), None) => csrf_tokens_match(&secret, value),
        _ => false,
    };
    if !valid {
        return refused("the form needs exactly one CSRF token, and it must match this session");
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}
