//! The `[cluster]` table: whether `serve` joins a cluster of processes on one PostgreSQL
//! database, and the address the other members forward requests for its documents to.

use std::net::SocketAddr;

use serde::Deserialize;

use super::{ConfigError, Origin, StorageKind};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileCluster {
    /// Join a cluster instead of serving the database alone.
    enabled: Option<bool>,
    /// The base URL other members reach this process at, such as `http://10.0.0.5:7878`.
    advertise: Option<String>,
}

/// How a member of a cluster serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// The base URL other members forward requests for this process's documents to; `None` for
    /// the address it listens on, once bound.
    pub advertise: Option<String>,
}

/// The cluster settings, `None` when the process serves alone. A cluster needs PostgreSQL; the
/// advertised address defaults to the one the process listens on, unless that is a wildcard no
/// member can reach.
pub(super) fn cluster_settings(
    file: Option<&FileCluster>,
    origin: &Origin,
    storage: StorageKind,
    listen: SocketAddr,
) -> Result<Option<ClusterSettings>, ConfigError> {
    let Some(file) = file.filter(|file| file.enabled == Some(true)) else {
        return Ok(None);
    };
    let problem = |key: &str, text: &str| {
        ConfigError::new(format!("cluster.{key}"), origin.clone(), text.to_owned())
    };
    if storage != StorageKind::Postgres {
        return Err(problem(
            "enabled",
            "a SQLite database is served by one process; a cluster needs `storage = \"postgres\"`",
        ));
    }
    let advertise = match &file.advertise {
        Some(address) => {
            let parsed = url::Url::parse(address).ok().filter(|url| {
                url.scheme() == "http"
                    && url.host().is_some()
                    && url.username().is_empty()
                    && url.password().is_none()
                    && url.path() == "/"
                    && url.query().is_none()
            });
            if parsed.is_none() {
                return Err(problem(
                    "advertise",
                    "expected an http base URL such as http://10.0.0.5:7878, with no path or \
                     credentials (members reach each other over plain HTTP)",
                ));
            }
            Some(address.trim_end_matches('/').to_owned())
        }
        None if listen.ip().is_unspecified() => {
            return Err(problem(
                "advertise",
                "the listening address is a wildcard; give the address other members reach this \
                 process at, such as http://10.0.0.5:7878",
            ));
        }
        None => None,
    };
    Ok(Some(ClusterSettings { advertise }))
}
