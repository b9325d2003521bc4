//! The cookies Fermata sets: the login session (HttpOnly, SameSite=Lax, Secure when configured)
//! and the login form's double-submit token.

use axum_extra::extract::cookie::{Cookie, SameSite};
use fermata_crypto::SecretToken;

use crate::HttpState;
use crate::auth::SESSION_COOKIE;

/// The login form's double-submit cookie.
pub(crate) const LOGIN_CSRF_COOKIE: &str = "fermata_login_csrf";

pub(crate) fn session(state: &HttpState, secret: &SecretToken) -> Cookie<'static> {
    let max_age = state.accounts.settings().session_ttl;
    Cookie::build((SESSION_COOKIE, secret.expose().to_owned()))
        .path("/")
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(state.secure_cookies)
        .max_age(cookie::time::Duration::seconds(
            i64::try_from(max_age.as_secs()).unwrap_or(i64::MAX),
        ))
        .build()
}

pub(crate) fn cleared_session() -> Cookie<'static> {
    Cookie::build((SESSION_COOKIE, "")).path("/").build()
}

pub(crate) fn login_csrf(state: &HttpState, token: &str) -> Cookie<'static> {
    Cookie::build((LOGIN_CSRF_COOKIE, token.to_owned()))
        .path("/login")
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(state.secure_cookies)
        .build()
}
