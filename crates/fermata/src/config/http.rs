//! The `[http]` table: the HTTP server's timeouts, body rate and connection caps, the proxies
//! whose `X-Forwarded-For` is believed, the public origins and who may read `/metrics`, into
//! [`HttpSettings`]. `docs/limits.md` lists each with its default.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use fermata_crypto::SecretToken;
use fermata_http::ServerLimits;
use fermata_http::client_address::{Network, TrustedProxies};
use fermata_http::edge::{EdgeSettings, MetricsAccess, PublicOrigins};
use serde::Deserialize;

use super::schema_source::secret;
use super::table::{Durations, Table};
use super::{ConfigError, Origin};

/// The server's timeouts.
const TIMEOUTS: Durations = Durations {
    range: Duration::from_millis(100)..=Duration::from_secs(3600),
    shown: "between 100ms and 1h, such as 10s",
};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileHttp {
    header_read_timeout: Option<String>,
    keep_alive_timeout: Option<String>,
    body_min_rate: Option<u64>,
    body_grace: Option<String>,
    max_connections: Option<usize>,
    max_connections_per_peer: Option<usize>,
    trusted_proxies: Option<Vec<String>>,
    public_origins: Option<Vec<String>>,
    metrics: Option<String>,
    metrics_token_file: Option<PathBuf>,
    metrics_token_env: Option<String>,
}

/// What `serve` needs of `[http]`.
#[derive(Debug, Clone, Default)]
pub struct HttpSettings {
    pub limits: ServerLimits,
    /// `None`: the listen address and the forms of localhost.
    pub public_origins: Option<PublicOrigins>,
    /// `None`: loopback only.
    pub metrics_token: Option<Arc<SecretToken>>,
}

impl HttpSettings {
    /// How the router faces the outside, once the listen address is known.
    pub fn edge(&self, listen: SocketAddr) -> EdgeSettings {
        let mut edge = EdgeSettings::local(listen);
        match &self.public_origins {
            Some(origins) => edge.origins = origins.clone(),
            None if listen.ip().is_unspecified() => tracing::warn!(
                listen = %listen,
                "listening on every address, but only localhost names are answered: \
                 set http.public_origins to the addresses people use"
            ),
            None => {}
        }
        if let Some(token) = &self.metrics_token {
            edge.metrics = MetricsAccess::Token(Arc::clone(token));
        }
        edge
    }
}

/// The settings, every duration and count within its bounds.
pub(super) fn http_settings(
    file: Option<&FileHttp>,
    origin: &Origin,
) -> Result<HttpSettings, ConfigError> {
    let defaults = ServerLimits::default();
    let Some(file) = file else {
        return Ok(HttpSettings::default());
    };
    let table = Table::new("http", origin);
    let trusted_proxies = file
        .trusted_proxies
        .iter()
        .flatten()
        .map(|text| {
            text.parse::<Network>().map_err(|problem| {
                ConfigError::new("http.trusted_proxies", origin.clone(), problem)
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Bytes a second.
    let body_min_rate = table
        .count("body_min_rate", file.body_min_rate, 1..)?
        .unwrap_or(defaults.body_min_rate);
    let max_connections = table.count(
        "max_connections",
        file.max_connections,
        fermata_http::HEALTH_RESERVE * 2..,
    )?;
    let public_origins = file
        .public_origins
        .as_deref()
        .map(PublicOrigins::listed)
        .transpose()
        .map_err(|problem| ConfigError::new("http.public_origins", origin.clone(), problem))?;
    let metrics_token = match file.metrics.as_deref() {
        None | Some("loopback") => {
            if file.metrics_token_file.is_some() || file.metrics_token_env.is_some() {
                return Err(ConfigError::new(
                    "http.metrics",
                    origin.clone(),
                    "a scrape token is only read with `metrics = \"token\"`",
                ));
            }
            None
        }
        Some("token") => {
            let refuse = |key: &str, problem: &str| {
                ConfigError::new(format!("http.{key}"), origin.clone(), problem)
            };
            let token = secret(
                file.metrics_token_file.as_deref(),
                file.metrics_token_env.as_deref(),
                ("metrics_token_file", "metrics_token_env"),
                &refuse,
            )?;
            if token.len() < 16 {
                return Err(refuse(
                    "metrics_token_file",
                    "the scrape token must have at least 16 characters",
                ));
            }
            Some(Arc::new(SecretToken::from_given(token.as_str())))
        }
        Some(_) => {
            return Err(ConfigError::new(
                "http.metrics",
                origin.clone(),
                "expected `loopback` or `token`",
            ));
        }
    };
    Ok(HttpSettings {
        public_origins,
        metrics_token,
        limits: ServerLimits {
            header_read_timeout: table
                .duration(
                    "header_read_timeout",
                    file.header_read_timeout.as_deref(),
                    &TIMEOUTS,
                )?
                .unwrap_or(defaults.header_read_timeout),
            keep_alive_timeout: table
                .duration(
                    "keep_alive_timeout",
                    file.keep_alive_timeout.as_deref(),
                    &TIMEOUTS,
                )?
                .unwrap_or(defaults.keep_alive_timeout),
            body_min_rate,
            body_grace: table
                .duration("body_grace", file.body_grace.as_deref(), &TIMEOUTS)?
                .unwrap_or(defaults.body_grace),
            max_connections,
            max_connections_per_peer: table
                .count(
                    "max_connections_per_peer",
                    file.max_connections_per_peer,
                    1..,
                )?
                .unwrap_or(defaults.max_connections_per_peer),
            trusted_proxies: TrustedProxies::new(trusted_proxies),
        },
    })
}
