//! Configuration: read from a TOML file, `FERMATA_*` environment variables and flags (flags win,
//! then the environment, then the file, then the defaults), and validated into plain values
//! before anything starts. Every error names the setting and where its value came from, and never
//! repeats a secret.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::writer_lease::LeaseTimings;

mod cluster;
mod http;
mod media;
mod schema;
mod schema_source;
mod table;

pub use cluster::ClusterSettings;
pub use http::HttpSettings;
pub use schema::{SchemaSettings, Servers};
use table::{Durations, Table};

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Flag(&'static str),
    Env(&'static str),
    File(PathBuf),
    Default,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Flag(flag) => write!(f, "from {flag}"),
            Origin::Env(var) => write!(f, "from {var}"),
            Origin::File(path) => write!(f, "from {}", path.display()),
            Origin::Default => f.write_str("default"),
        }
    }
}

/// A setting that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid setting `{setting}` ({origin}): {problem}")]
pub struct ConfigError {
    pub setting: String,
    pub origin: Origin,
    pub problem: String,
}

impl ConfigError {
    fn new(setting: impl Into<String>, origin: Origin, problem: impl Into<String>) -> Self {
        ConfigError {
            setting: setting.into(),
            origin,
            problem: problem.into(),
        }
    }
}

/// A connection URL that may hold a password: no `Display`, and `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretUrl(String);

impl SecretUrl {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretUrl(<redacted>)")
    }
}

/// Which application database adapter serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageKind {
    Sqlite,
    Postgres,
}

/// What `serve` does when another process holds the writer lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handover {
    /// Refuse to start, naming the holder.
    Refuse,
    /// Wait for the holder to release the lease (or for it to expire), then take over.
    Wait,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// The settings every command needs: where the application database is.
#[derive(Debug, Clone)]
pub struct StorageSettings {
    pub kind: StorageKind,
    /// The data folder: the SQLite file lives here, and later the key file and scratch space.
    pub data_dir: PathBuf,
    /// Only for `postgres`.
    pub database_url: Option<SecretUrl>,
}

/// Everything `serve` needs.
#[derive(Debug, Clone)]
pub struct ServeSettings {
    pub storage: StorageSettings,
    pub listen: SocketAddr,
    pub handover: Handover,
    /// Apply pending migrations before serving (otherwise refuse to serve while any is pending).
    pub migrate: bool,
    pub lease: LeaseTimings,
    pub keys: KeySource,
    /// Mark cookies `Secure` (serve over TLS, or behind a proxy that terminates it).
    pub secure_cookies: bool,
    /// How long a login session lives.
    pub session_ttl: Duration,
    /// The most unrevoked API tokens and paired machines one user holds, and the most password
    /// checks at once (`[accounts]`).
    pub max_api_tokens: usize,
    pub max_machines: usize,
    pub password_concurrency: usize,
    /// Live collaboration: batching, checkpoints, idle rooms and limits.
    pub collab: fermata_collab::CollabSettings,
    /// Schema operations: the source, the verification workspace, the package and the refresh
    /// settings (`[schema]`).
    pub schema: SchemaSettings,
    /// A document's images and Chat attachments: byte limits and the thumbnail cache
    /// (`[media]`).
    pub media: fermata_collab::MediaSettings,
    /// The HTTP server's timeouts, body rate and connection caps, and the trusted proxies
    /// (`[http]`).
    pub http: HttpSettings,
    /// A member of a cluster's settings (`[cluster]`); `None` for a process that serves alone.
    pub cluster: Option<ClusterSettings>,
}

/// What `export` and `import` need: the database, the writer lease's timings (an import holds
/// the lease) and the limits of documents and images (`[documents]`, `[media]`).
#[derive(Debug, Clone)]
pub struct RepositoryFileSettings {
    pub storage: StorageSettings,
    pub lease: LeaseTimings,
    pub collab: fermata_collab::CollabSettings,
    pub media: fermata_collab::MediaSettings,
}

impl ServeSettings {
    /// What the account layer is given.
    pub fn account_settings(&self) -> fermata_accounts::AccountSettings {
        fermata_accounts::AccountSettings {
            session_ttl: self.session_ttl,
            max_api_tokens: self.max_api_tokens,
            max_machines: self.max_machines,
            password_concurrency: self.password_concurrency,
        }
    }
}

/// Where the encryption keys come from. They never live in the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A key file; `create` when it is the data folder's default file, made on first start.
    File { path: PathBuf, create: bool },
    /// `FERMATA_KEYS`: `VERSION:BASE64[,VERSION:BASE64...]`, for production secrets.
    Environment,
}

/// The environment variable that gives the keys directly.
pub const KEYS_VAR: &str = "FERMATA_KEYS";
/// The key file's name inside the data folder.
pub const DEFAULT_KEY_FILE: &str = "keys.toml";
const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);
const SESSION_TTLS: Durations = Durations {
    range: Duration::from_secs(60)..=Duration::from_secs(366 * 24 * 3600),
    shown: "between 1m and 366d, such as 7d or 12h",
};
/// The writer lease's timings: any length but zero (`LeaseTimings::check` relates them).
const LEASE_DURATIONS: Durations = Durations {
    range: Duration::from_nanos(1)..=Duration::MAX,
    shown: "above zero, such as 10s or 500ms",
};
/// The `[documents]` durations: any length (a zero batch window sends each update at once).
const DOCUMENT_DURATIONS: Durations = Durations {
    range: Duration::ZERO..=Duration::MAX,
    shown: "such as 10ms or 30s",
};

pub const DEFAULT_DATA_DIR: &str = "./fermata-data";
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7878";

/// The TOML file, as written. Unknown keys are refused so a typo is not silently ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    data_dir: Option<PathBuf>,
    listen: Option<String>,
    storage: Option<String>,
    database_url: Option<String>,
    handover: Option<String>,
    migrate: Option<bool>,
    log_format: Option<String>,
    keys_file: Option<PathBuf>,
    secure_cookies: Option<bool>,
    session_ttl: Option<String>,
    writer_lease: Option<FileLeaseTimings>,
    documents: Option<FileDocuments>,
    schema: Option<schema::FileSchema>,
    media: Option<media::FileMedia>,
    http: Option<http::FileHttp>,
    accounts: Option<FileAccounts>,
    cluster: Option<cluster::FileCluster>,
}

/// The `[accounts]` table: caps per user.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileAccounts {
    max_api_tokens: Option<usize>,
    max_machines: Option<usize>,
    password_concurrency: Option<usize>,
}

/// The `[documents]` table: live collaboration settings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDocuments {
    batch_window: Option<String>,
    max_batch: Option<usize>,
    checkpoint_every_commits: Option<usize>,
    checkpoint_every_bytes: Option<usize>,
    idle_close: Option<String>,
    max_message_bytes: Option<usize>,
    max_document_bytes: Option<usize>,
    max_clients_per_room: Option<usize>,
    max_connections_per_member: Option<usize>,
    presence_per_second: Option<u32>,
    presence_burst: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLeaseTimings {
    ttl: Option<String>,
    renew_every: Option<String>,
    attempt_timeout: Option<String>,
    abandon_after: Option<String>,
    safety_deadline: Option<String>,
    drain_timeout: Option<String>,
}

/// A value from the flags or the environment, with its origin.
#[derive(Debug, Clone)]
pub struct Given<T> {
    pub value: T,
    pub origin: Origin,
}

/// The values given by flags or environment variables, before the file and defaults fill in.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub data_dir: Option<Given<PathBuf>>,
    pub storage: Option<Given<String>>,
    pub database_url: Option<Given<String>>,
    pub listen: Option<Given<String>>,
    pub handover: Option<Given<String>>,
    pub no_migrate: bool,
    pub log_format: Option<Given<String>>,
    pub keys_file: Option<Given<PathBuf>>,
    pub secure_cookies: Option<Given<bool>>,
    /// Whether `FERMATA_KEYS` is set (its value is read only when the keys are loaded).
    pub keys_in_environment: bool,
}

/// A loaded configuration file (or none).
#[derive(Debug, Default)]
pub struct Sources {
    file: FileConfig,
    file_path: Option<PathBuf>,
    overrides: Overrides,
}

impl Sources {
    /// Reads `config` when given. A file that does not parse is refused with its line, never
    /// with its text (it may hold a password).
    pub fn load(
        config: Option<&Given<PathBuf>>,
        overrides: Overrides,
    ) -> Result<Self, ConfigError> {
        let Some(config) = config else {
            return Ok(Sources {
                overrides,
                ..Sources::default()
            });
        };
        let path = &config.value;
        let text = std::fs::read_to_string(path).map_err(|error| {
            ConfigError::new(
                "config",
                config.origin.clone(),
                format!("cannot read {}: {error}", path.display()),
            )
        })?;
        let file: FileConfig = toml::from_str(&text).map_err(|error| {
            let line = error
                .span()
                .map(|span| text[..span.start].matches('\n').count() + 1)
                .map_or_else(String::new, |line| format!(" at line {line}"));
            ConfigError::new(
                "config",
                config.origin.clone(),
                format!(
                    "{} is not a valid configuration file{line}: {}",
                    path.display(),
                    error.message()
                ),
            )
        })?;
        Ok(Sources {
            file,
            file_path: Some(path.clone()),
            overrides,
        })
    }

    fn file_origin(&self) -> Origin {
        self.file_path.clone().map_or(Origin::Default, Origin::File)
    }

    /// The flag or environment value, else the file's, else nothing.
    fn pick<T: Clone>(&self, given: Option<&Given<T>>, file: Option<&T>) -> Option<Given<T>> {
        given.cloned().or_else(|| {
            file.map(|value| Given {
                value: value.clone(),
                origin: self.file_origin(),
            })
        })
    }

    /// The storage settings alone: all that `migrate` and `status` need.
    pub fn storage(&self) -> Result<StorageSettings, ConfigError> {
        let storage = self
            .pick(self.overrides.storage.as_ref(), self.file.storage.as_ref())
            .unwrap_or(Given {
                value: "sqlite".to_owned(),
                origin: Origin::Default,
            });
        let kind = match storage.value.as_str() {
            "sqlite" => StorageKind::Sqlite,
            "postgres" => StorageKind::Postgres,
            "memory" => {
                return Err(ConfigError::new(
                    "storage",
                    storage.origin,
                    "`memory` is for tests only and cannot serve; use `sqlite` or `postgres`",
                ));
            }
            _ => {
                return Err(ConfigError::new(
                    "storage",
                    storage.origin,
                    "expected `sqlite` or `postgres`",
                ));
            }
        };
        let data_dir = self
            .pick(
                self.overrides.data_dir.as_ref(),
                self.file.data_dir.as_ref(),
            )
            .unwrap_or(Given {
                value: PathBuf::from(DEFAULT_DATA_DIR),
                origin: Origin::Default,
            });
        if data_dir.value.as_os_str().is_empty() {
            return Err(ConfigError::new(
                "data_dir",
                data_dir.origin,
                "must not be empty",
            ));
        }
        let url = self.pick(
            self.overrides.database_url.as_ref(),
            self.file.database_url.as_ref(),
        );
        let database_url = match (kind, url) {
            (StorageKind::Postgres, None) => {
                return Err(ConfigError::new(
                    "database_url",
                    Origin::Default,
                    "storage `postgres` needs a connection URL (--database-url or FERMATA_DATABASE_URL)",
                ));
            }
            (StorageKind::Postgres, Some(url)) => Some(check_postgres_url(url)?),
            (StorageKind::Sqlite, Some(url)) => {
                return Err(ConfigError::new(
                    "database_url",
                    url.origin,
                    "storage `sqlite` keeps its database in the data folder and takes no URL",
                ));
            }
            (StorageKind::Sqlite, None) => None,
        };
        Ok(StorageSettings {
            kind,
            data_dir: data_dir.value,
            database_url,
        })
    }

    /// Every setting `serve` needs.
    pub fn serve(&self) -> Result<ServeSettings, ConfigError> {
        let storage = self.storage()?;
        let listen = self
            .pick(self.overrides.listen.as_ref(), self.file.listen.as_ref())
            .unwrap_or(Given {
                value: DEFAULT_LISTEN.to_owned(),
                origin: Origin::Default,
            });
        // Dropped on purpose: the message names the setting, where its value came from and the
        // form it takes.
        let listen_addr = listen.value.parse::<SocketAddr>().map_err(|_| {
            ConfigError::new(
                "listen",
                listen.origin.clone(),
                format!(
                    "`{}` is not an address such as {DEFAULT_LISTEN}",
                    listen.value
                ),
            )
        })?;
        let handover = self
            .pick(
                self.overrides.handover.as_ref(),
                self.file.handover.as_ref(),
            )
            .unwrap_or(Given {
                value: "refuse".to_owned(),
                origin: Origin::Default,
            });
        let handover_mode = match handover.value.as_str() {
            "refuse" => Handover::Refuse,
            "wait" => Handover::Wait,
            _ => {
                return Err(ConfigError::new(
                    "handover",
                    handover.origin,
                    "expected `refuse` or `wait`",
                ));
            }
        };
        let migrate = !self.overrides.no_migrate && self.file.migrate.unwrap_or(true);
        let secure_cookies = self
            .pick(
                self.overrides.secure_cookies.as_ref(),
                self.file.secure_cookies.as_ref(),
            )
            .is_some_and(|given| given.value);
        let origin = self.file_origin();
        let session_ttl = Table::new("", &origin)
            .duration(
                "session_ttl",
                self.file.session_ttl.as_deref(),
                &SESSION_TTLS,
            )?
            .unwrap_or(DEFAULT_SESSION_TTL);
        let account_defaults = fermata_accounts::AccountSettings::default();
        let given = self.file.accounts.as_ref();
        let accounts = Table::new("accounts", &origin);
        let max_api_tokens = accounts
            .count("max_api_tokens", given.and_then(|a| a.max_api_tokens), 1..)?
            .unwrap_or(account_defaults.max_api_tokens);
        let max_machines = accounts
            .count("max_machines", given.and_then(|a| a.max_machines), 1..)?
            .unwrap_or(account_defaults.max_machines);
        let password_concurrency = accounts
            .count(
                "password_concurrency",
                given.and_then(|a| a.password_concurrency),
                1..,
            )?
            .unwrap_or(account_defaults.password_concurrency);
        let lease = self.lease_timings()?;
        let cluster = cluster::cluster_settings(
            self.file.cluster.as_ref(),
            &origin,
            storage.kind,
            listen_addr,
        )?;
        Ok(ServeSettings {
            cluster,
            max_api_tokens,
            max_machines,
            password_concurrency,
            keys: self.keys(&storage)?,
            storage,
            listen: listen_addr,
            handover: handover_mode,
            migrate,
            lease,
            secure_cookies,
            session_ttl,
            collab: self
                .collab_settings()?
                .with_database_wait(lease.database_wait()),
            schema: self.schema(Servers::Connect)?,
            media: media::media_settings(self.file.media.as_ref(), &self.file_origin())?,
            http: http::http_settings(self.file.http.as_ref(), &self.file_origin())?,
        })
    }

    /// Every setting `export` and `import` need.
    pub fn repository_files(&self) -> Result<RepositoryFileSettings, ConfigError> {
        let lease = self.lease_timings()?;
        Ok(RepositoryFileSettings {
            storage: self.storage()?,
            lease,
            collab: self
                .collab_settings()?
                .with_database_wait(lease.database_wait()),
            media: media::media_settings(self.file.media.as_ref(), &self.file_origin())?,
        })
    }

    /// The `[schema]` table: source, workspace, package and refresh settings; the servers'
    /// passwords are read only when the process may connect to them.
    pub fn schema(&self, servers: Servers) -> Result<SchemaSettings, ConfigError> {
        schema::schema_settings(self.file.schema.as_ref(), &self.file_origin(), servers)
    }

    fn collab_settings(&self) -> Result<fermata_collab::CollabSettings, ConfigError> {
        let defaults = fermata_collab::CollabSettings::default();
        let Some(file) = &self.file.documents else {
            return Ok(defaults);
        };
        let origin = self.file_origin();
        let table = Table::new("documents", &origin);
        Ok(fermata_collab::CollabSettings {
            batch_window: table
                .duration(
                    "batch_window",
                    file.batch_window.as_deref(),
                    &DOCUMENT_DURATIONS,
                )?
                .unwrap_or(defaults.batch_window),
            max_batch: table
                .count("max_batch", file.max_batch, 1..)?
                .unwrap_or(defaults.max_batch),
            checkpoint_every_commits: table
                .count(
                    "checkpoint_every_commits",
                    file.checkpoint_every_commits,
                    1..,
                )?
                .unwrap_or(defaults.checkpoint_every_commits),
            checkpoint_every_bytes: table
                .count("checkpoint_every_bytes", file.checkpoint_every_bytes, 1..)?
                .unwrap_or(defaults.checkpoint_every_bytes),
            idle_close: table
                .duration(
                    "idle_close",
                    file.idle_close.as_deref(),
                    &DOCUMENT_DURATIONS,
                )?
                .unwrap_or(defaults.idle_close),
            max_message_bytes: table
                .count("max_message_bytes", file.max_message_bytes, 1..)?
                .unwrap_or(defaults.max_message_bytes),
            max_document_bytes: table
                .count("max_document_bytes", file.max_document_bytes, 1..)?
                .unwrap_or(defaults.max_document_bytes),
            max_clients_per_room: table
                .count("max_clients_per_room", file.max_clients_per_room, 1..)?
                .unwrap_or(defaults.max_clients_per_room),
            max_connections_per_member: table
                .count(
                    "max_connections_per_member",
                    file.max_connections_per_member,
                    1..,
                )?
                .unwrap_or(defaults.max_connections_per_member),
            presence_per_second: table
                .count("presence_per_second", file.presence_per_second, 1..)?
                .unwrap_or(defaults.presence_per_second),
            presence_burst: table
                .count("presence_burst", file.presence_burst, 1..)?
                .unwrap_or(defaults.presence_burst),
            commit_patience: defaults.commit_patience,
        })
    }

    /// Where the encryption keys come from: `FERMATA_KEYS`, else the configured key file, else
    /// the data folder's own key file, created on first start.
    pub fn keys(&self, storage: &StorageSettings) -> Result<KeySource, ConfigError> {
        let file = self.pick(
            self.overrides.keys_file.as_ref(),
            self.file.keys_file.as_ref(),
        );
        if self.overrides.keys_in_environment {
            if let Some(file) = file {
                return Err(ConfigError::new(
                    "keys_file",
                    file.origin,
                    format!("give the keys either in {KEYS_VAR} or in a key file, not both"),
                ));
            }
            return Ok(KeySource::Environment);
        }
        Ok(match file {
            Some(file) => KeySource::File {
                path: file.value,
                create: false,
            },
            None => KeySource::File {
                path: storage.data_dir.join(DEFAULT_KEY_FILE),
                create: true,
            },
        })
    }

    /// The log format, checked before logging starts.
    pub fn log_format(&self) -> Result<LogFormat, ConfigError> {
        let format = self
            .pick(
                self.overrides.log_format.as_ref(),
                self.file.log_format.as_ref(),
            )
            .unwrap_or(Given {
                value: "text".to_owned(),
                origin: Origin::Default,
            });
        match format.value.as_str() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(ConfigError::new(
                "log_format",
                format.origin,
                "expected `text` or `json`",
            )),
        }
    }

    fn lease_timings(&self) -> Result<LeaseTimings, ConfigError> {
        let defaults = LeaseTimings::default();
        let Some(file) = &self.file.writer_lease else {
            return Ok(defaults);
        };
        let origin = self.file_origin();
        let table = Table::new("writer_lease", &origin);
        let timings = LeaseTimings {
            ttl: table
                .duration("ttl", file.ttl.as_deref(), &LEASE_DURATIONS)?
                .unwrap_or(defaults.ttl),
            renew_every: table
                .duration("renew_every", file.renew_every.as_deref(), &LEASE_DURATIONS)?
                .unwrap_or(defaults.renew_every),
            attempt_timeout: table
                .duration(
                    "attempt_timeout",
                    file.attempt_timeout.as_deref(),
                    &LEASE_DURATIONS,
                )?
                .unwrap_or(defaults.attempt_timeout),
            abandon_after: table
                .duration(
                    "abandon_after",
                    file.abandon_after.as_deref(),
                    &LEASE_DURATIONS,
                )?
                .unwrap_or(defaults.abandon_after),
            safety_deadline: table
                .duration(
                    "safety_deadline",
                    file.safety_deadline.as_deref(),
                    &LEASE_DURATIONS,
                )?
                .unwrap_or(defaults.safety_deadline),
            drain_timeout: table
                .duration(
                    "drain_timeout",
                    file.drain_timeout.as_deref(),
                    &LEASE_DURATIONS,
                )?
                .unwrap_or(defaults.drain_timeout),
        };
        timings.check().map_err(|(key, problem)| {
            ConfigError::new(format!("writer_lease.{key}"), origin, problem)
        })?;
        Ok(timings)
    }
}

/// Checks the form of a PostgreSQL URL without ever repeating it.
fn check_postgres_url(url: Given<String>) -> Result<SecretUrl, ConfigError> {
    let value = url.value;
    let scheme_ok = value.starts_with("postgres://") || value.starts_with("postgresql://");
    let has_host = value
        .split_once("://")
        .is_some_and(|(_, rest)| !rest.is_empty() && !rest.starts_with('/'));
    if !scheme_ok || !has_host {
        return Err(ConfigError::new(
            "database_url",
            url.origin,
            "expected a URL such as postgres://USER:PASSWORD@HOST:5432/DATABASE (the value is not shown)",
        ));
    }
    Ok(SecretUrl(value))
}

/// The data folder, created private to its owner when absent.
pub fn ensure_data_dir(path: &Path) -> std::io::Result<()> {
    if path.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given<T>(value: T, origin: Origin) -> Option<Given<T>> {
        Some(Given { value, origin })
    }

    fn from_file(text: &str) -> Result<Sources, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fermata.toml");
        std::fs::write(&path, text).unwrap();
        Sources::load(
            Some(&Given {
                value: path,
                origin: Origin::Flag("--config"),
            }),
            Overrides::default(),
        )
    }

    #[test]
    fn defaults_serve_sqlite_on_loopback() {
        let settings = Sources::default().serve().unwrap();
        assert_eq!(settings.storage.kind, StorageKind::Sqlite);
        assert_eq!(settings.storage.data_dir, PathBuf::from(DEFAULT_DATA_DIR));
        assert_eq!(settings.listen, DEFAULT_LISTEN.parse().unwrap());
        assert_eq!(settings.handover, Handover::Refuse);
        assert!(settings.migrate);
        assert_eq!(settings.lease, LeaseTimings::default());
        assert_eq!(
            settings.keys,
            KeySource::File {
                path: PathBuf::from(DEFAULT_DATA_DIR).join(DEFAULT_KEY_FILE),
                create: true
            }
        );
        assert!(!settings.secure_cookies);
        assert_eq!(settings.session_ttl, DEFAULT_SESSION_TTL);
        assert_eq!(settings.media, fermata_collab::MediaSettings::default());
    }

    #[test]
    fn media_limits_are_read_and_bounded_by_the_input_limit() {
        let settings = from_file(
            "[media]\nmax_stored_image_bytes = 2097152\nattachment_max_bytes = 1048576\n",
        )
        .unwrap()
        .serve()
        .unwrap();
        assert_eq!(settings.media.max_stored_image_bytes, 2 << 20);
        assert_eq!(settings.media.attachment_bytes, 1 << 20);
        assert_eq!(settings.media.upload_image_bytes, 1 << 20);
        let decoding = from_file(
            "[media]\nmax_decode_bytes = 67108864\ndecode_concurrency = 3\ndecode_queue_wait = \"2s\"\n",
        )
        .unwrap()
        .serve()
        .unwrap()
        .media;
        assert_eq!(decoding.decode.max_alloc, 64 << 20);
        assert_eq!(decoding.decode_concurrency, 3);
        assert_eq!(decoding.decode_queue_wait, Duration::from_secs(2));
        for (text, key) in [
            (
                "[media]\nmax_stored_image_bytes = 0\n",
                "media.max_stored_image_bytes",
            ),
            (
                "[media]\nmax_decode_bytes = 1000\n",
                "media.max_decode_bytes",
            ),
            (
                "[media]\ndecode_concurrency = 0\n",
                "media.decode_concurrency",
            ),
            (
                "[media]\ndecode_queue_wait = \"forever\"\n",
                "media.decode_queue_wait",
            ),
            (
                "[media]\nupload_buffer_bytes = 1048576\n",
                "media.upload_buffer_bytes",
            ),
            (
                "[media]\nmax_input_bytes = 2097152\nmax_stored_image_bytes = 1048576\nattachment_max_bytes = 4194304\n",
                "media.attachment_max_bytes",
            ),
            (
                "[media]\nmax_input_bytes = 4096\nmax_stored_image_bytes = 4096\nattachment_max_bytes = 4096\n",
                "media.max_input_bytes",
            ),
        ] {
            let error = from_file(text).unwrap().serve().unwrap_err();
            assert_eq!(error.setting, key, "{text}");
        }
    }

    #[test]
    fn http_limits_are_read_and_checked() {
        let settings = from_file(
            "[http]\nheader_read_timeout = \"5s\"\nmax_connections_per_peer = 16\n\
             trusted_proxies = [\"10.0.0.0/8\", \"::1\"]\n",
        )
        .unwrap()
        .serve()
        .unwrap();
        let limits = settings.http.limits;
        assert_eq!(limits.header_read_timeout, Duration::from_secs(5));
        assert_eq!(limits.max_connections_per_peer, 16);
        assert!(limits.trusted_proxies.contains("10.2.3.4".parse().unwrap()));
        assert!(!limits.trusted_proxies.contains("11.2.3.4".parse().unwrap()));
        assert_eq!(
            limits.keep_alive_timeout,
            fermata_http::ServerLimits::default().keep_alive_timeout
        );
        for (text, key) in [
            (
                "[http]\nheader_read_timeout = \"1ms\"\n",
                "http.header_read_timeout",
            ),
            ("[http]\nbody_min_rate = 0\n", "http.body_min_rate"),
            ("[http]\nmax_connections = 10\n", "http.max_connections"),
            (
                "[http]\nmax_connections_per_peer = 0\n",
                "http.max_connections_per_peer",
            ),
            (
                "[http]\ntrusted_proxies = [\"proxy.example\"]\n",
                "http.trusted_proxies",
            ),
        ] {
            let error = from_file(text).unwrap().serve().unwrap_err();
            assert_eq!(error.setting, key, "{text}");
        }
    }

    #[test]
    fn keys_come_from_one_place() {
        let both = Sources {
            overrides: Overrides {
                keys_file: given(
                    PathBuf::from("/run/secrets/keys"),
                    Origin::Flag("--keys-file"),
                ),
                keys_in_environment: true,
                ..Overrides::default()
            },
            ..Sources::default()
        };
        let error = both.serve().unwrap_err();
        assert_eq!(error.setting, "keys_file");
        let environment = Sources {
            overrides: Overrides {
                keys_in_environment: true,
                ..Overrides::default()
            },
            ..Sources::default()
        };
        assert_eq!(environment.serve().unwrap().keys, KeySource::Environment);
    }

    #[test]
    fn flags_and_environment_win_over_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fermata.toml");
        std::fs::write(&path, "listen = \"127.0.0.1:1\"\nhandover = \"wait\"\n").unwrap();
        let overrides = Overrides {
            listen: given("127.0.0.1:2".to_owned(), Origin::Env("FERMATA_LISTEN")),
            ..Overrides::default()
        };
        let config = Given {
            value: path,
            origin: Origin::Flag("--config"),
        };
        let settings = Sources::load(Some(&config), overrides)
            .unwrap()
            .serve()
            .unwrap();
        assert_eq!(settings.listen, "127.0.0.1:2".parse().unwrap());
        assert_eq!(settings.handover, Handover::Wait);
    }

    #[test]
    fn errors_name_the_setting_and_its_origin() {
        let overrides = Overrides {
            listen: given("nowhere".to_owned(), Origin::Env("FERMATA_LISTEN")),
            ..Overrides::default()
        };
        let sources = Sources {
            overrides,
            ..Sources::default()
        };
        assert_eq!(
            sources.serve().unwrap_err().to_string(),
            "invalid setting `listen` (from FERMATA_LISTEN): `nowhere` is not an address such as 127.0.0.1:7878"
        );
    }

    #[test]
    fn the_url_is_never_repeated() {
        let secret = "postgres-but-wrong://admin:hunter2@db/app";
        let sources = Sources {
            overrides: Overrides {
                storage: given("postgres".to_owned(), Origin::Flag("--storage")),
                database_url: given(secret.to_owned(), Origin::Env("FERMATA_DATABASE_URL")),
                ..Overrides::default()
            },
            ..Sources::default()
        };
        let error = sources.storage().unwrap_err();
        let shown = format!("{error} {error:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(
            shown.contains("`database_url` (from FERMATA_DATABASE_URL)"),
            "{shown}"
        );
    }

    #[test]
    fn unknown_keys_and_bad_timings_are_refused() {
        let error = from_file("lisen = \"127.0.0.1:1\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("at line 1") && error.contains("unknown field `lisen`"),
            "{error}"
        );

        let error = from_file("[writer_lease]\nttl = \"20s\"\n")
            .unwrap()
            .serve()
            .unwrap_err();
        assert_eq!(error.setting, "writer_lease.ttl");

        let error = from_file("[writer_lease]\nrenew_every = \"ten\"\n")
            .unwrap()
            .serve()
            .unwrap_err();
        assert_eq!(error.setting, "writer_lease.renew_every");
    }

    #[test]
    fn memory_cannot_serve() {
        let error = from_file("storage = \"memory\"\n")
            .unwrap()
            .storage()
            .unwrap_err();
        assert!(error.to_string().contains("for tests only"), "{error}");
    }
}
