//! What every request is checked for and every answer carries, in one middleware around the
//! whole router.
//!
//! - **Hosts.** A request must name one of the server's public hosts in `Host`, and an `Origin`,
//!   when sent, must be one of its public origins: a page on another host (a DNS-rebinding page
//!   that resolves its own name to this server included) is refused with 421, a cross-origin
//!   request with 403. Without `public_origins` the public hosts are the listen address and the
//!   forms of localhost, on any port. `/healthz` and `/readyz` answer whatever the host (load
//!   balancers probe by address), and so does `/metrics` for a scraper that presents its token.
//! - **Caching.** Every answer to a request that carries credentials (the session cookie or an
//!   `Authorization` header), every answer that sets a cookie and every page is `no-store`.
//! - **Pages.** An HTML answer gets the pages' one Content-Security-Policy (see `crate::view`)
//!   unless it brings it already, `X-Frame-Options: DENY` and `Referrer-Policy: same-origin`.
//!   Every answer gets `X-Content-Type-Options: nosniff`, and `Strict-Transport-Security` with
//!   `--secure-cookies`.
//! - **Errors.** An error answer that is not already JSON or a page (the framework's own
//!   rejections, an unknown route, a wrong method) becomes a safe JSON error with a fixed message
//!   for its status: nothing the framework wrote reaches the client.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use fermata_crypto::SecretToken;

use crate::HttpState;
use crate::auth::SESSION_COOKIE;
use crate::error::ApiError;
use crate::view::{Nonce, content_security_policy};

/// How the router faces the outside: its public origins and who may read `/metrics`.
#[derive(Debug, Clone)]
pub struct EdgeSettings {
    pub origins: PublicOrigins,
    pub metrics: MetricsAccess,
}

impl EdgeSettings {
    /// Local defaults for a server listening on `listen`: its address and localhost, and
    /// `/metrics` for loopback only.
    pub fn local(listen: SocketAddr) -> Self {
        EdgeSettings {
            origins: PublicOrigins::local(listen.ip()),
            metrics: MetricsAccess::Loopback,
        }
    }
}

/// Who may read `/metrics`.
#[derive(Clone)]
pub enum MetricsAccess {
    /// Connections from this machine (the peer itself, never a proxy's word), without the
    /// writer lease's fencing token.
    Loopback,
    /// A scraper presenting this token as a bearer token, from anywhere, with everything.
    Token(Arc<SecretToken>),
}

impl std::fmt::Debug for MetricsAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MetricsAccess::Loopback => f.write_str("Loopback"),
            MetricsAccess::Token(_) => f.write_str("Token(<redacted>)"),
        }
    }
}

impl MetricsAccess {
    /// Whether `headers` carry the scrape token.
    pub(crate) fn token_presented(&self, headers: &HeaderMap) -> bool {
        let MetricsAccess::Token(expected) = self else {
            return false;
        };
        let Some(given) = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
        else {
            return false;
        };
        // Compared by hash, so the time taken tells nothing about the token.
        SecretToken::from_given(given.trim()).hash() == expected.hash()
    }
}

/// One public origin: scheme, host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PublicOrigin {
    https: bool,
    host: String,
    port: u16,
}

/// The origins the server is reached at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicOrigins(Origins);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Origins {
    /// Configured: exactly these.
    Listed(Vec<PublicOrigin>),
    /// The default: these host names (the listen address and localhost), any port and scheme.
    Local(Vec<String>),
}

impl PublicOrigins {
    /// The listen address and the forms of localhost.
    pub fn local(listen: IpAddr) -> Self {
        let mut hosts = vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "[::1]".to_owned(),
        ];
        if !listen.is_unspecified() {
            let shown = match listen {
                IpAddr::V4(v4) => v4.to_string(),
                IpAddr::V6(v6) => format!("[{v6}]"),
            };
            if !hosts.contains(&shown) {
                hosts.push(shown);
            }
        }
        PublicOrigins(Origins::Local(hosts))
    }

    /// Origins such as `https://fermata.example.com` or `http://10.0.0.5:7878`.
    pub fn listed(origins: &[String]) -> Result<Self, String> {
        if origins.is_empty() {
            return Err("give at least one origin, such as https://fermata.example.com".to_owned());
        }
        origins
            .iter()
            .map(|text| {
                parse_origin(text).ok_or_else(|| {
                    format!(
                        "`{text}` is not an origin such as https://fermata.example.com or http://10.0.0.5:7878 (a scheme, a host and at most a port)"
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|list| PublicOrigins(Origins::Listed(list)))
    }

    /// Whether `Host: host` names this server.
    fn allows_host(&self, host: &str) -> bool {
        let Some((name, port)) = split_host(host) else {
            return false;
        };
        match &self.0 {
            Origins::Local(names) => names.iter().any(|known| known.eq_ignore_ascii_case(&name)),
            Origins::Listed(origins) => origins.iter().any(|origin| {
                origin.host.eq_ignore_ascii_case(&name)
                    && port.unwrap_or(if origin.https { 443 } else { 80 }) == origin.port
            }),
        }
    }

    /// Whether `Origin: origin` is one of the server's.
    fn allows_origin(&self, origin: &str) -> bool {
        let Some(parsed) = parse_origin(origin) else {
            return false;
        };
        match &self.0 {
            Origins::Local(names) => names
                .iter()
                .any(|known| known.eq_ignore_ascii_case(&parsed.host)),
            Origins::Listed(origins) => origins.contains(&parsed),
        }
    }
}

/// `scheme://host[:port]`, lowercased, the port filled in.
fn parse_origin(text: &str) -> Option<PublicOrigin> {
    let (scheme, rest) = text.trim().split_once("://")?;
    let https = match scheme.to_ascii_lowercase().as_str() {
        "https" => true,
        "http" => false,
        _ => return None,
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = split_host(rest)?;
    Some(PublicOrigin {
        https,
        host,
        port: port.unwrap_or(if https { 443 } else { 80 }),
    })
}

/// A `Host` value as a lowercase host name (IPv6 in brackets) and its port, if given.
fn split_host(text: &str) -> Option<(String, Option<u16>)> {
    if text.is_empty()
        || text
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "/?#@\\".contains(c))
    {
        return None;
    }
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        inside.parse::<std::net::Ipv6Addr>().ok()?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':')?),
        };
        (format!("[{}]", inside.to_ascii_lowercase()), port)
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host.to_ascii_lowercase(), Some(port)),
            None => (text.to_ascii_lowercase(), None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        None => None,
        Some(port) => Some(port.parse::<u16>().ok()?),
    };
    Some((host, port))
}

/// The routes that answer whatever the host.
fn answers_any_host(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz")
}

/// The middleware.
pub(crate) async fn guard(
    State(state): State<HttpState>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let path = request.uri().path();
    let scraper = path == "/metrics" && state.edge.metrics.token_presented(headers);
    if !answers_any_host(path) && !scraper {
        if let Some(host) = headers.get(header::HOST)
            && !host
                .to_str()
                .is_ok_and(|host| state.edge.origins.allows_host(host))
        {
            return finish(
                &state,
                false,
                ApiError::new(
                    StatusCode::MISDIRECTED_REQUEST,
                    "wrong_host",
                    "this server does not answer for that host",
                )
                .into_response(),
                true,
            );
        }
        if let Some(origin) = headers.get(header::ORIGIN)
            && !origin
                .to_str()
                .is_ok_and(|origin| state.edge.origins.allows_origin(origin))
        {
            return finish(
                &state,
                false,
                ApiError::new(StatusCode::FORBIDDEN, "csrf", "cross-site request refused")
                    .into_response(),
                true,
            );
        }
    }
    let credentials = carries_credentials(headers);
    let plain_probe = answers_any_host(path);
    let response = next.run(request).await;
    if plain_probe {
        // A probe's answer is its plain text, whatever its status.
        return finish(&state, credentials, response, false);
    }
    finish(&state, credentials, response, true)
}

/// Whether a request carries the session cookie or an `Authorization` header.
fn carries_credentials(headers: &HeaderMap) -> bool {
    headers.contains_key(header::AUTHORIZATION)
        || axum_extra::extract::CookieJar::from_headers(headers)
            .get(SESSION_COOKIE)
            .is_some()
}

/// The headers every answer gets, and a safe error for one that would leak framework text.
fn finish(
    state: &HttpState,
    credentials: bool,
    response: Response,
    make_errors_safe: bool,
) -> Response {
    let mut response = if make_errors_safe {
        safe_errors(response)
    } else {
        response
    };
    let is_page = content_type_starts(&response, "text/html");
    let headers = response.headers_mut();
    if credentials || is_page || headers.contains_key(header::SET_COOKIE) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if is_page {
        if !headers.contains_key(header::CONTENT_SECURITY_POLICY)
            && let Ok(policy) = HeaderValue::from_str(&content_security_policy(&Nonce::new()))
        {
            headers.insert(header::CONTENT_SECURITY_POLICY, policy);
        }
        headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        headers.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        );
    }
    if state.secure_cookies {
        headers.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000"),
        );
    }
    response
}

fn content_type_starts(response: &Response, prefix: &str) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with(prefix))
}

/// An error answer that is neither JSON nor a page, as a safe JSON error for its status; its
/// other headers (`Retry-After`, `Allow`, `Connection`) are kept.
fn safe_errors(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error())
        || content_type_starts(&response, "application/json")
        || content_type_starts(&response, "text/html")
    {
        return response;
    }
    let (code, message) = match status {
        StatusCode::BAD_REQUEST => ("invalid", "the request is malformed"),
        StatusCode::UNAUTHORIZED => ("unauthenticated", "log in or send an API token"),
        StatusCode::FORBIDDEN => ("forbidden", "this is not allowed"),
        StatusCode::NOT_FOUND => ("not_found", "there is nothing at this address"),
        StatusCode::METHOD_NOT_ALLOWED => (
            "method_not_allowed",
            "this address does not take that method",
        ),
        StatusCode::REQUEST_TIMEOUT => ("timeout", "the request took too long to arrive"),
        StatusCode::PAYLOAD_TOO_LARGE => ("too_large", "the request is too large"),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (
            "unsupported_type",
            "the request body is not of a type this address takes",
        ),
        StatusCode::UNPROCESSABLE_ENTITY => {
            ("invalid", "the request body is not what this address takes")
        }
        StatusCode::TOO_MANY_REQUESTS => ("throttled", "too many requests; try again later"),
        StatusCode::SERVICE_UNAVAILABLE => (
            "unavailable",
            "the server cannot answer just now; try again shortly",
        ),
        status if status.is_client_error() => ("invalid", "the request was refused"),
        _ => ("internal", "the server failed to answer"),
    };
    let (mut parts, _) = response.into_parts();
    parts.headers.remove(header::CONTENT_TYPE);
    parts.headers.remove(header::CONTENT_LENGTH);
    let safe = ApiError::new(status, code, message).into_response();
    let (safe_parts, body) = safe.into_parts();
    parts.headers.extend(safe_parts.headers);
    Response::from_parts(parts, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_origins_are_the_listen_address_and_localhost() {
        let local = PublicOrigins::local("127.0.0.1".parse().unwrap());
        for host in ["127.0.0.1:7878", "localhost", "LOCALHOST:80", "[::1]:7878"] {
            assert!(local.allows_host(host), "{host}");
        }
        for host in [
            "evil.example:7878",
            "127.0.0.1.evil.example",
            "",
            "a b",
            "localhost:x",
        ] {
            assert!(!local.allows_host(host), "{host}");
        }
        assert!(local.allows_origin("http://localhost:7878"));
        assert!(!local.allows_origin("http://evil.example:7878"));
        assert!(!local.allows_origin("null"));
        let lan = PublicOrigins::local("10.0.0.5".parse().unwrap());
        assert!(lan.allows_host("10.0.0.5:7878"));
        let any = PublicOrigins::local("0.0.0.0".parse().unwrap());
        assert!(!any.allows_host("0.0.0.0:7878"));
    }

    #[test]
    fn listed_origins_are_exact() {
        let listed = PublicOrigins::listed(&[
            "https://fermata.example.com".to_owned(),
            "http://10.0.0.5:7878".to_owned(),
        ])
        .unwrap();
        assert!(listed.allows_host("fermata.example.com"));
        assert!(listed.allows_host("fermata.example.com:443"));
        assert!(!listed.allows_host("fermata.example.com:8443"));
        assert!(listed.allows_host("10.0.0.5:7878"));
        assert!(!listed.allows_host("localhost"));
        assert!(listed.allows_origin("https://fermata.example.com"));
        assert!(!listed.allows_origin("http://fermata.example.com"));
        assert!(!listed.allows_origin("https://evil.example"));
        assert!(PublicOrigins::listed(&["fermata.example.com".to_owned()]).is_err());
        assert!(PublicOrigins::listed(&["https://x.example/path".to_owned()]).is_err());
        assert!(PublicOrigins::listed(&[]).is_err());
    }
}
