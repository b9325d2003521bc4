//! Errors as the HTTP surface answers them: a status and a JSON body with a stable code and a
//! safe message; and the one place the real error behind an answer is logged.
//!
//! An answer never carries the real error in its body. The answer carries it in its extensions
//! instead ([`RequestFailure`], put there by [`attach`] or by [`ApiError`]'s `IntoResponse`), and
//! the [`log_failures`] layer around every route logs it once, with its whole cause chain: the
//! operator's log gets the causes, the client gets the safe message.

use std::error::Error as StdError;
use std::sync::Arc;

use axum::Json;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use fermata_accounts::AccountError;
use fermata_store::ErrorChain;
use serde::Serialize;

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub retry_after: Option<u64>,
    /// The real error, for the log; never sent.
    source: Option<RequestFailure>,
}

/// The real error behind an answer: logged once by [`log_failures`], never sent.
#[derive(Debug, Clone)]
pub(crate) struct RequestFailure(Arc<dyn StdError + Send + Sync + 'static>);

impl RequestFailure {
    pub(crate) fn new(error: impl StdError + Send + Sync + 'static) -> Self {
        RequestFailure(Arc::new(error))
    }
}

/// Leaves `error` in `response` for the [`log_failures`] layer.
pub(crate) fn attach(mut response: Response, error: RequestFailure) -> Response {
    response.extensions_mut().insert(error);
    response
}

/// The layer around every route: logs the real error an answer carries, once, with the method,
/// the path (never the query) and the status. A server error is an `error`; a refusal that
/// carries a cause, and a 503 (the database did not answer: an outage, which is not a fault of
/// this server's and is logged as an outage where the work failed), are a `warn`.
pub(crate) async fn log_failures(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    if let Some(RequestFailure(error)) = response.extensions().get::<RequestFailure>() {
        let status = response.status().as_u16();
        match response.status() {
            StatusCode::SERVICE_UNAVAILABLE => {
                tracing::warn!(%method, path, status, error = %ErrorChain(&**error), "request not answered just now");
            }
            code if code.is_server_error() => {
                tracing::error!(%method, path, status, error = %ErrorChain(&**error), "request failed");
            }
            _ => {
                tracing::warn!(%method, path, status, error = %ErrorChain(&**error), "request refused");
            }
        }
    }
    response
}

#[derive(Serialize)]
struct Body<'a> {
    error: Inner<'a>,
}

#[derive(Serialize)]
struct Inner<'a> {
    code: &'a str,
    message: &'a str,
}

/// The `Retry-After` of an answer the database could not give.
const STORAGE_RETRY_AFTER_SECONDS: u64 = 2;

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
            source: None,
        }
    }

    /// 503 `unavailable`: the database did not take the request's work, and nothing of it was
    /// written. `Retry-After` says when to try again: the server takes work again within about
    /// that long of the database answering.
    pub fn unavailable(message: impl Into<String>) -> Self {
        let mut answer = Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message);
        answer.retry_after = Some(STORAGE_RETRY_AFTER_SECONDS);
        answer
    }

    /// Keeps `error` for the log of the [`log_failures`] layer; it is never sent.
    #[must_use]
    pub fn with_source(mut self, error: impl StdError + Send + Sync + 'static) -> Self {
        self.source = Some(RequestFailure::new(error));
        self
    }

    pub fn unauthenticated() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "log in or send an API token",
        )
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub fn reauthentication_required() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "reauthentication_required",
            "enter your password again to continue (POST /api/v1/session/reauth or /reauth)",
        )
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid", message)
    }
}

/// The safe message, with the real error as its source: for a log line written where an
/// `ApiError` is handled instead of answered (a live connection's check), with `ErrorChain`.
impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl StdError for ApiError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_ref()
            .map(|RequestFailure(error)| &**error as &(dyn StdError + 'static))
    }
}

impl From<AccountError> for ApiError {
    fn from(error: AccountError) -> Self {
        let (status, code) = match &error {
            AccountError::Invalid(_) => (StatusCode::BAD_REQUEST, "invalid"),
            AccountError::WrongCredentials => (StatusCode::UNAUTHORIZED, "wrong_credentials"),
            AccountError::Throttled { .. } => (StatusCode::TOO_MANY_REQUESTS, "throttled"),
            AccountError::Busy { .. } => (StatusCode::SERVICE_UNAVAILABLE, "busy"),
            AccountError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            AccountError::NotAllowed(_) => (StatusCode::FORBIDDEN, "forbidden"),
            AccountError::TooMany(_) => (StatusCode::CONFLICT, "too_many"),
            AccountError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            AccountError::Crypto(_) => (StatusCode::INTERNAL_SERVER_ERROR, "undecryptable"),
            AccountError::Store(store) if store.is_retryable() => {
                (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
            }
            AccountError::Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, "storage"),
        };
        let retry_after = match &error {
            AccountError::Throttled { retry_after } | AccountError::Busy { retry_after } => {
                Some(fermata_accounts::retry_after_seconds(*retry_after))
            }
            AccountError::Store(store) if store.is_retryable() => Some(STORAGE_RETRY_AFTER_SECONDS),
            _ => None,
        };
        let mut answer = ApiError::new(status, code, error.to_string());
        answer.retry_after = retry_after;
        // Only a failure of the server is worth the log; a refusal is the client's to read.
        if status.is_server_error() {
            answer = answer.with_source(error);
        }
        answer
    }
}

impl From<fermata_store::StoreError> for ApiError {
    fn from(error: fermata_store::StoreError) -> Self {
        use fermata_store::ErrorKind;
        let (status, code) = match error.kind() {
            ErrorKind::Missing => (StatusCode::NOT_FOUND, "not_found"),
            ErrorKind::Conflict => (StatusCode::CONFLICT, "conflict"),
            ErrorKind::Invalid => (StatusCode::BAD_REQUEST, "invalid"),
            ErrorKind::Fenced | ErrorKind::Unavailable => {
                (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
            }
            ErrorKind::Corrupt => (StatusCode::INTERNAL_SERVER_ERROR, "corrupt"),
        };
        let mut answer = ApiError::new(status, code, error.message().to_owned());
        if status == StatusCode::SERVICE_UNAVAILABLE {
            answer.retry_after = Some(STORAGE_RETRY_AFTER_SECONDS);
        }
        if status.is_server_error() {
            answer.with_source(error)
        } else {
            answer
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            Json(Body {
                error: Inner {
                    code: self.code,
                    message: &self.message,
                },
            }),
        )
            .into_response();
        if let Some(value) = self
            .retry_after
            .and_then(|seconds| HeaderValue::from_str(&seconds.to_string()).ok())
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        match self.source {
            Some(source) => attach(response, source),
            None => response,
        }
    }
}
