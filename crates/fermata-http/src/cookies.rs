//! The cookies Fermata sets: the login session (HttpOnly, SameSite=Lax, Secure when configured),
//! the login form's double-submit token, and the browser's known-device mark (sealed by the
//! keyring for the account that logged in; it lets the account's owner past a login lock), and the
//! flash a form's answer leaves for the page it redirects to.

use axum_extra::extract::cookie::{Cookie, SameSite};
use fermata_crypto::SecretToken;

use crate::HttpState;
use crate::auth::SESSION_COOKIE;

/// The login form's double-submit cookie.
pub(crate) const LOGIN_CSRF_COOKIE: &str = "fermata_login_csrf";
/// The known-device mark.
pub(crate) const DEVICE_COOKIE: &str = "fermata_device";
/// What a form's answer leaves for the page it redirects to (see `pages`).
pub(crate) const FLASH_COOKIE: &str = "fermata_flash";
/// How long a flash waits for its page.
const FLASH_MAX_AGE_SECONDS: i64 = 300;
/// How long a browser keeps its known-device mark: about a year (browsers cap cookies at 400
/// days).
const DEVICE_MAX_AGE_DAYS: i64 = 365;

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

pub(crate) fn device(state: &HttpState, mark: &str) -> Cookie<'static> {
    Cookie::build((DEVICE_COOKIE, mark.to_owned()))
        .path("/")
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(state.secure_cookies)
        .max_age(cookie::time::Duration::days(DEVICE_MAX_AGE_DAYS))
        .build()
}

/// The known-device mark the browser sent, if any.
pub(crate) fn device_mark(jar: &axum_extra::extract::CookieJar) -> Option<&str> {
    jar.get(DEVICE_COOKIE)
        .map(axum_extra::extract::cookie::Cookie::value)
}

pub(crate) fn flash(state: &HttpState, value: &str) -> Cookie<'static> {
    Cookie::build((FLASH_COOKIE, value.to_owned()))
        .path("/")
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(state.secure_cookies)
        .max_age(cookie::time::Duration::seconds(FLASH_MAX_AGE_SECONDS))
        .build()
}

pub(crate) fn cleared_flash() -> Cookie<'static> {
    Cookie::build((FLASH_COOKIE, "")).path("/").build()
}
