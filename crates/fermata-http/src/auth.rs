//! Who is calling: extractors for an authenticated user (session cookie or API token), a
//! `system_admin`, a *fresh* `system_admin` (password entered within ten minutes), and a paired
//! machine (its own token).
//!
//! A browser page that needs a login redirects to `/login`; an API route answers 401 JSON. A
//! wrong role is 403; a stale session where freshness is required is 403
//! `reauthentication_required`.

use std::net::IpAddr;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum_extra::extract::CookieJar;
use fermata_accounts::{Principal, SessionContext};
use fermata_crypto::SecretToken;
use fermata_store::{Machine, Role};

use crate::HttpState;
use crate::error::ApiError;

/// The cookie that carries a login session's secret.
pub const SESSION_COOKIE: &str = "fermata_session";

/// Why a caller was turned away.
#[derive(Debug)]
pub enum AuthRejection {
    /// Not logged in: a page redirects to the login form, an API answers 401.
    Login {
        api: bool,
        next: String,
    },
    /// A stale session where a fresh one is needed: a page redirects to re-authentication.
    Reauthenticate {
        api: bool,
        next: String,
    },
    Error(ApiError),
}

impl IntoResponse for AuthRejection {
    fn into_response(self) -> Response {
        match self {
            AuthRejection::Login { api: true, .. } => ApiError::unauthenticated().into_response(),
            AuthRejection::Login { api: false, next } => {
                Redirect::to(&format!("/login?next={}", encode_next(&next))).into_response()
            }
            AuthRejection::Reauthenticate { api: true, .. } => {
                ApiError::reauthentication_required().into_response()
            }
            AuthRejection::Reauthenticate { api: false, next } => {
                Redirect::to(&format!("/reauth?next={}", encode_next(&next))).into_response()
            }
            AuthRejection::Error(error) => error.into_response(),
        }
    }
}

pub(crate) fn encode_next(next: &str) -> String {
    let mut out = String::new();
    for byte in next.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'/' | b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn is_api(parts: &Parts) -> bool {
    parts.uri.path().starts_with("/api/")
}

fn next_of(parts: &Parts) -> String {
    parts
        .uri
        .path_and_query()
        .map_or_else(|| "/".to_owned(), |pq| pq.as_str().to_owned())
}

/// The bearer token of the `Authorization` header, if any.
pub fn bearer(parts: &Parts) -> Option<SecretToken> {
    let value = parts.headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let token = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))?;
    Some(SecretToken::from_given(token.trim()))
}

/// The session secret of the cookie, if any.
pub fn session_cookie(parts: &Parts) -> Option<SecretToken> {
    let jar = CookieJar::from_headers(&parts.headers);
    jar.get(SESSION_COOKIE)
        .map(|cookie| SecretToken::from_given(cookie.value()))
}

/// The client's address: the connection's peer, or the client a configured proxy names (see
/// [`crate::client_address`]).
pub fn client_address(parts: &Parts) -> Option<IpAddr> {
    crate::client_address::of(parts)
}

/// A logged-in user, by session cookie or API token.
#[derive(Debug, Clone)]
pub struct Authenticated(pub Principal);

impl Authenticated {
    /// The browser session, for routes that only make sense with one.
    pub fn session(&self) -> Result<&SessionContext, ApiError> {
        self.0.session().ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "session_required",
                "this needs a browser login session",
            )
        })
    }
}

impl FromRequestParts<HttpState> for Authenticated {
    type Rejection = AuthRejection;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &HttpState,
    ) -> Result<Self, Self::Rejection> {
        // The authorization layer authenticated the caller already: once per request.
        if let Some(known) = parts.extensions.get::<Authenticated>() {
            return Ok(known.clone());
        }
        let login = || AuthRejection::Login {
            api: is_api(parts),
            next: next_of(parts),
        };
        let accounts = &state.accounts;
        let principal = if let Some(token) = bearer(parts) {
            accounts.authenticate_api_token(&token).await
        } else if parts.headers.contains_key(header::AUTHORIZATION) {
            // An Authorization header that is not a bearer token authenticates nothing, and the
            // cookie is not consulted in its place.
            return Err(login());
        } else if let Some(secret) = session_cookie(parts) {
            accounts.authenticate_session(&secret).await
        } else {
            return Err(login());
        };
        match principal {
            Ok(Some(principal)) => {
                let known = Authenticated(principal);
                parts.extensions.insert(known.clone());
                Ok(known)
            }
            Ok(None) => Err(login()),
            Err(error) => Err(AuthRejection::Error(error.into())),
        }
    }
}

/// A logged-in `system_admin`.
#[derive(Debug, Clone)]
pub struct SystemAdmin(pub Principal);

impl FromRequestParts<HttpState> for SystemAdmin {
    type Rejection = AuthRejection;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &HttpState,
    ) -> Result<Self, Self::Rejection> {
        let Authenticated(principal) = Authenticated::from_request_parts(parts, state).await?;
        if !principal.user.has_role(Role::SystemAdmin) {
            return Err(AuthRejection::Error(ApiError::forbidden(
                "this needs the system_admin role",
            )));
        }
        Ok(SystemAdmin(principal))
    }
}

/// A `system_admin` whose browser session entered its password within the last ten minutes.
#[derive(Debug, Clone)]
pub struct FreshSystemAdmin(pub Principal);

impl FromRequestParts<HttpState> for FreshSystemAdmin {
    type Rejection = AuthRejection;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &HttpState,
    ) -> Result<Self, Self::Rejection> {
        let SystemAdmin(principal) = SystemAdmin::from_request_parts(parts, state).await?;
        if principal.session().is_none() {
            return Err(AuthRejection::Error(ApiError::forbidden(
                "this needs a fresh browser session; API tokens cannot do it",
            )));
        }
        if !principal.is_fresh() {
            return Err(AuthRejection::Reauthenticate {
                api: is_api(parts),
                next: next_of(parts),
            });
        }
        Ok(FreshSystemAdmin(principal))
    }
}

/// A paired machine, by its own token.
#[derive(Debug, Clone)]
pub struct MachineCaller(pub Machine);

impl FromRequestParts<HttpState> for MachineCaller {
    type Rejection = AuthRejection;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &HttpState,
    ) -> Result<Self, Self::Rejection> {
        let Some(token) = bearer(parts) else {
            return Err(AuthRejection::Error(ApiError::unauthenticated()));
        };
        match state.accounts.authenticate_machine(&token).await {
            Ok(Some(machine)) => Ok(MachineCaller(machine)),
            Ok(None) => Err(AuthRejection::Error(ApiError::unauthenticated())),
            Err(error) => Err(AuthRejection::Error(error.into())),
        }
    }
}
