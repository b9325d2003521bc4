//! Errors as the HTTP surface answers them: a status and a JSON body with a stable code and a
//! safe message. The full error is logged once here, never sent.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use fermata_accounts::AccountError;
use serde::Serialize;

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub retry_after: Option<u64>,
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

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
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
        if status.is_server_error() {
            let cause = std::error::Error::source(&error).map(ToString::to_string);
            tracing::error!(error = %error, cause = cause.as_deref().unwrap_or(""), "request failed");
        }
        let retry_after = match &error {
            AccountError::Throttled { retry_after } | AccountError::Busy { retry_after } => {
                Some(retry_after.as_secs().max(1))
            }
            _ => None,
        };
        ApiError {
            status,
            code,
            message: error.to_string(),
            retry_after,
        }
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
        if status.is_server_error() {
            let cause = std::error::Error::source(&error).map(ToString::to_string);
            tracing::error!(error = %error, cause = cause.as_deref().unwrap_or(""), "request failed");
        }
        ApiError::new(status, code, error.message().to_owned())
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
        response
    }
}
