//! The `[schema]` table: the MySQL or MariaDB server whose schemas are snapshotted
//! (`[schema.source]`), the verification workspace server (`[schema.workspace]`, the same keys),
//! the package in the target git repository (`[schema.package]`), the S3-compatible bucket for
//! review artifacts (`[schema.artifacts]`; a folder in the data folder without it), when `serve`
//! checks for drift by itself (`[schema.schedule]`), the webhooks events are posted to
//! (`[schema.notify]`), which lint rules check a snapshot and how severely (`[schema.lint]`), and
//! how a refresh runs
//! (`review_window`, `connections`, `publication_wait`) and how long drift diffs are kept
//! (`drift_retention`). Parsed and validated into [`SchemaSettings`] before anything
//! starts; errors name the setting, never a password.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use fermata_forge::github::{GitHub, GitHubSettings, GitHubSettingsError, GitHubToken};
use fermata_schema::artifact::S3Settings;
use fermata_schema::drift::DEFAULT_DRIFT_RETENTION;
use fermata_schema::filter::{Filter, Pattern};
use fermata_schema::lint::{LintSettings, Rule, Severity};
use fermata_schema::package::PackageSettings;
use fermata_schema::refresh_run::{
    DEFAULT_CONNECTIONS, DEFAULT_PUBLICATION_WAIT, DEFAULT_REVIEW_WINDOW,
};
use fermata_schema::{NotifySettings, Schedule, SourceSettings};
use serde::Deserialize;
use zeroize::Zeroizing;

use super::schema_source::{FileSource, secret, source_settings};
use super::table::{Durations, Table};
use super::{ConfigError, Origin};

/// The shortest and longest review window.
const REVIEW_WINDOWS: Durations = Durations {
    range: Duration::from_secs(60)..=Duration::from_secs(30 * 24 * 60 * 60),
    shown: "between 1m and 30d, such as 24h or 3d",
};
/// The shortest and longest drift diff retention.
const DRIFT_RETENTIONS: Durations = Durations {
    range: Duration::from_secs(60 * 60)..=Duration::from_secs(366 * 24 * 60 * 60),
    shown: "between 1h and 366d, such as 30d",
};
/// The shortest and longest a publication may wait for the forge's rate limits in all.
const PUBLICATION_WAITS: Durations = Durations {
    range: Duration::ZERO..=Duration::from_secs(24 * 60 * 60),
    shown: "between 0s and 24h, such as 1h",
};
/// The most introspection connections a database step may open.
const MAX_CONNECTIONS: usize = 64;
/// The longest period of `[schema.schedule] every_hours`: a week.
const MAX_SCHEDULE_HOURS: u64 = 7 * 24;
/// The package's base branch when none is configured.
const DEFAULT_BASE_BRANCH: &str = "main";

/// The `[schema]` table, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileSchema {
    source: Option<FileSource>,
    workspace: Option<FileSource>,
    package: Option<FilePackage>,
    artifacts: Option<FileArtifacts>,
    schedule: Option<FileSchedule>,
    notify: Option<FileNotify>,
    lint: Option<FileLint>,
    review_window: Option<String>,
    /// How long a verification's drift diffs are kept.
    drift_retention: Option<String>,
    /// The longest a publication waits, in all, for the forge's rate limits.
    publication_wait: Option<String>,
    /// Signed, so that a negative number is refused here, naming the setting.
    connections: Option<i64>,
    /// Name patterns of databases an inventory leaves out; none by default.
    ignore_databases: Option<Vec<String>>,
    /// Name patterns of tables snapshots leave out; the online schema change tools' shadow
    /// tables by default (an empty list ignores none).
    ignore_tables: Option<Vec<String>>,
}

/// The `[schema.package]` table, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePackage {
    /// `local` (the default) or `github`.
    forge: Option<String>,
    repository: Option<PathBuf>,
    base_branch: Option<String>,
    path: Option<String>,
    /// For `github`: `OWNER/NAME`, the REST API's URL, and the token's file or variable.
    github_repository: Option<String>,
    api_url: Option<String>,
    token_file: Option<PathBuf>,
    token_env: Option<String>,
}

/// The `[schema.schedule]` table, as written: one of the two keys.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSchedule {
    /// `HH:MM`, in UTC.
    daily_at: Option<String>,
    /// Signed, so that a negative number is refused here, naming the setting.
    every_hours: Option<i64>,
}

/// The `[schema.notify]` table, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileNotify {
    webhooks: Option<Vec<String>>,
    secret_file: Option<PathBuf>,
    secret_env: Option<String>,
}

/// The `[schema.lint]` table, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLint {
    /// The character set the package's character data uses.
    charset: Option<String>,
    /// `user@host` patterns a stored program's definer must match.
    allowed_definers: Option<Vec<String>>,
    rules: Option<FileLintRules>,
}

/// The `[schema.lint.rules]` table, as written: a severity (`off`, `warning`, `error`) by rule
/// ID. Its keys are fields rather than a map's, so an unknown rule ID is refused as any unknown
/// key is, and the refusal lists the known IDs.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileLintRules {
    no_primary_key: Option<String>,
    legacy_charset: Option<String>,
    duplicate_index: Option<String>,
    foreign_key_without_index: Option<String>,
    float_for_money: Option<String>,
    definer_not_allowed: Option<String>,
    zero_date_default: Option<String>,
}

impl FileLintRules {
    /// Each rule with the severity written for it, if any.
    fn given(&self) -> [(Rule, Option<&str>); 7] {
        [
            (Rule::NoPrimaryKey, self.no_primary_key.as_deref()),
            (Rule::LegacyCharset, self.legacy_charset.as_deref()),
            (Rule::DuplicateIndex, self.duplicate_index.as_deref()),
            (
                Rule::ForeignKeyWithoutIndex,
                self.foreign_key_without_index.as_deref(),
            ),
            (Rule::FloatForMoney, self.float_for_money.as_deref()),
            (Rule::DefinerNotAllowed, self.definer_not_allowed.as_deref()),
            (Rule::ZeroDateDefault, self.zero_date_default.as_deref()),
        ]
    }
}

/// The `[schema.artifacts]` table, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileArtifacts {
    endpoint: Option<String>,
    bucket: Option<String>,
    region: Option<String>,
    access_key_id: Option<String>,
    secret_access_key_file: Option<PathBuf>,
    secret_access_key_env: Option<String>,
}

/// Whether a process may connect to the MySQL servers of `[schema.source]` and
/// `[schema.workspace]`, and so needs their passwords.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Servers {
    /// A process that executes workflow runs, which connect to the servers: `serve`, and the
    /// commands that follow an operation and run it when no server serves.
    Connect,
    /// A command that reads only the application database and the package (`schema show`,
    /// `operations`, `registry`, ...). The server tables are still checked as written, but their
    /// passwords are not read, so they need not be available, and the settings leave the
    /// servers out.
    Leave,
}

/// What schema operations work with.
#[derive(Debug, Clone)]
pub struct SchemaSettings {
    /// The server whose schemas are snapshotted; without it inventories and refreshes fail with
    /// `SOURCE_NOT_CONFIGURED`. Left out, though configured, under [`Servers::Leave`].
    pub source: Option<SourceSettings>,
    /// The verification workspace server, validated here for the workspace verifier. Left out,
    /// though configured, under [`Servers::Leave`].
    pub workspace: Option<SourceSettings>,
    /// The target repository; without it refreshes fail with `PACKAGE_NOT_CONFIGURED`.
    pub package: Option<PackageSettings>,
    /// When set, the package is on GitHub, read and published through its REST API, and
    /// `package.repository` is not used.
    pub github: Option<GitHubSettings>,
    /// The bucket of review artifacts; `None` keeps them in the data folder.
    pub artifacts: Option<S3Settings>,
    /// When `serve` runs drift checks by itself; `None`: never.
    pub schedule: Option<Schedule>,
    /// The webhooks events are posted to, and their secret; `None`: none.
    pub notify: Option<NotifySettings>,
    /// Which lint rules check a snapshot, how severely, and what against.
    pub lint: LintSettings,
    /// How long a review stays open before the refresh expires.
    pub review_window: Duration,
    /// How long a verification's drift diffs are kept after it ended.
    pub drift_retention: Duration,
    /// The longest a publication waits, in all, for the forge's rate limits.
    pub publication_wait: Duration,
    /// The most introspection connections a database step opens.
    pub connections: usize,
    /// What inventories and snapshots leave out.
    pub filter: Filter,
}

impl Default for SchemaSettings {
    fn default() -> Self {
        SchemaSettings {
            source: None,
            workspace: None,
            package: None,
            github: None,
            artifacts: None,
            schedule: None,
            notify: None,
            lint: LintSettings::default(),
            review_window: DEFAULT_REVIEW_WINDOW,
            drift_retention: DEFAULT_DRIFT_RETENTION,
            publication_wait: DEFAULT_PUBLICATION_WAIT,
            connections: DEFAULT_CONNECTIONS,
            filter: Filter::default(),
        }
    }
}

/// The validated `[schema]` table (the defaults when it is absent).
pub(super) fn schema_settings(
    file: Option<&FileSchema>,
    origin: &Origin,
    servers: Servers,
) -> Result<SchemaSettings, ConfigError> {
    let Some(file) = file else {
        return Ok(SchemaSettings::default());
    };
    let table = Table::new("schema", origin);
    let review_window = table
        .duration(
            "review_window",
            file.review_window.as_deref(),
            &REVIEW_WINDOWS,
        )?
        .unwrap_or(DEFAULT_REVIEW_WINDOW);
    let drift_retention = table
        .duration(
            "drift_retention",
            file.drift_retention.as_deref(),
            &DRIFT_RETENTIONS,
        )?
        .unwrap_or(DEFAULT_DRIFT_RETENTION);
    let publication_wait = table
        .duration(
            "publication_wait",
            file.publication_wait.as_deref(),
            &PUBLICATION_WAITS,
        )?
        .unwrap_or(DEFAULT_PUBLICATION_WAIT);
    let connections = table
        .count("connections", file.connections, 1..=MAX_CONNECTIONS)?
        .unwrap_or(DEFAULT_CONNECTIONS);
    let patterns = |key: &str, list: &[String]| {
        list.iter()
            .map(|pattern| {
                Pattern::new(pattern.as_str())
                    .map_err(|problem| ConfigError::new(key, origin.clone(), problem))
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let mut filter = Filter::default();
    if let Some(list) = &file.ignore_databases {
        filter.ignore_databases = patterns("schema.ignore_databases", list)?;
    }
    if let Some(list) = &file.ignore_tables {
        filter.ignore_tables = patterns("schema.ignore_tables", list)?;
    }
    let (package, github) = match &file.package {
        None => (None, None),
        Some(package) => {
            let (settings, github) = package_settings(package, origin)?;
            (Some(settings), github)
        }
    };
    Ok(SchemaSettings {
        source: source_settings(file.source.as_ref(), "schema.source", origin, servers)?,
        workspace: source_settings(file.workspace.as_ref(), "schema.workspace", origin, servers)?,
        package,
        github,
        artifacts: file
            .artifacts
            .as_ref()
            .map(|artifacts| artifact_settings(artifacts, origin))
            .transpose()?,
        schedule: file
            .schedule
            .as_ref()
            .map(|schedule| schedule_settings(schedule, file, origin))
            .transpose()?,
        notify: file
            .notify
            .as_ref()
            .map(|notify| notify_settings(notify, origin))
            .transpose()?,
        lint: file
            .lint
            .as_ref()
            .map(|lint| lint_settings(lint, origin))
            .transpose()?
            .unwrap_or_default(),
        review_window,
        drift_retention,
        publication_wait,
        connections,
        filter,
    })
}

/// The validated `[schema.schedule]`: a daily time or a period in whole hours, with the source
/// and the package a check needs.
fn schedule_settings(
    file: &FileSchedule,
    schema: &FileSchema,
    origin: &Origin,
) -> Result<Schedule, ConfigError> {
    let refuse = |key: &str, problem: &str| {
        ConfigError::new(format!("schema.schedule{key}"), origin.clone(), problem)
    };
    if schema.source.is_none() || schema.package.is_none() {
        return Err(refuse(
            "",
            "a scheduled check needs `[schema.source]` and `[schema.package]`",
        ));
    }
    let every_hours = Table::new("schema.schedule", origin).count(
        "every_hours",
        file.every_hours,
        1..=MAX_SCHEDULE_HOURS,
    )?;
    match (&file.daily_at, every_hours) {
        (Some(_), Some(_)) | (None, None) => Err(refuse(
            "",
            "give either `daily_at` (HH:MM in UTC) or `every_hours`",
        )),
        (Some(text), None) => text
            .split_once(':')
            .filter(|(hour, minute)| hour.len() == 2 && minute.len() == 2)
            .and_then(|(hour, minute)| Schedule::daily(hour.parse().ok()?, minute.parse().ok()?))
            .ok_or_else(|| refuse(".daily_at", "expected HH:MM in UTC, from 00:00 to 23:59")),
        (None, Some(hours)) => Ok(Schedule::Every {
            period: Duration::from_secs(hours * 3600),
        }),
    }
}

fn package_settings(
    file: &FilePackage,
    origin: &Origin,
) -> Result<(PackageSettings, Option<GitHubSettings>), ConfigError> {
    let refuse = |key: &str, problem: &str| {
        ConfigError::new(format!("schema.package.{key}"), origin.clone(), problem)
    };
    let on_github = match file.forge.as_deref() {
        None | Some("local") => false,
        Some("github") => true,
        Some(_) => return Err(refuse("forge", "expected local or github")),
    };
    let repository = match (&file.repository, on_github) {
        (Some(repository), false) => repository.clone(),
        (None, false) => {
            return Err(refuse(
                "repository",
                "the path of the target git repository is required",
            ));
        }
        (Some(_), true) => {
            return Err(refuse(
                "repository",
                "a GitHub package names its repository in `github_repository`",
            ));
        }
        (None, true) => PathBuf::new(),
    };
    let settings = PackageSettings {
        repository,
        base_branch: file
            .base_branch
            .clone()
            .unwrap_or_else(|| DEFAULT_BASE_BRANCH.to_owned()),
        path: file
            .path
            .clone()
            .unwrap_or_else(|| PackageSettings::DEFAULT_PATH.to_owned()),
    };
    let checked = if on_github {
        settings.validate_layout()
    } else {
        settings.validate()
    };
    checked.map_err(|problem| ConfigError::new("schema.package", origin.clone(), problem))?;
    if !on_github {
        let github_only = [
            ("github_repository", file.github_repository.is_some()),
            ("api_url", file.api_url.is_some()),
            ("token_file", file.token_file.is_some()),
            ("token_env", file.token_env.is_some()),
        ];
        if let Some((key, _)) = github_only.iter().find(|(_, given)| *given) {
            return Err(refuse(key, "is only read with `forge = \"github\"`"));
        }
        return Ok((settings, None));
    }
    let (owner, name) = file
        .github_repository
        .as_deref()
        .and_then(|full| full.split_once('/'))
        .ok_or_else(|| refuse("github_repository", "give the repository as OWNER/NAME"))?;
    let token = secret(
        file.token_file.as_deref(),
        file.token_env.as_deref(),
        ("token_file", "token_env"),
        &refuse,
    )?;
    let mut github = GitHubSettings::new(owner, name, GitHubToken::new(token.as_str()));
    if let Some(api_url) = &file.api_url {
        github.api_url.clone_from(api_url);
    }
    // Everything the adapter checks (URL, names, token) is checked now, before anything starts.
    GitHub::new(github.clone()).map_err(|error| {
        let key = match error {
            GitHubSettingsError::ApiUrl => "api_url",
            GitHubSettingsError::Name => "github_repository",
            GitHubSettingsError::Token => "token_file",
            GitHubSettingsError::Client(_) => "forge",
        };
        refuse(key, &error.to_string())
    })?;
    Ok((settings, Some(github)))
}

/// The validated `[schema.lint]`: a character set's name, `user@host` definer patterns, and a
/// severity for each rule it names.
fn lint_settings(file: &FileLint, origin: &Origin) -> Result<LintSettings, ConfigError> {
    let refuse = |key: &str, problem: &str| {
        ConfigError::new(format!("schema.lint.{key}"), origin.clone(), problem)
    };
    let mut settings = LintSettings::default();
    if let Some(charset) = &file.charset {
        if charset.is_empty()
            || !charset
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(refuse(
                "charset",
                "expected a character set's name of ASCII letters, digits and `_`, such as utf8mb4",
            ));
        }
        settings.charset.clone_from(charset);
    }
    if let Some(patterns) = &file.allowed_definers {
        if let Some(position) = patterns.iter().position(|pattern| {
            pattern
                .rsplit_once('@')
                .is_none_or(|(user, _)| user.is_empty())
        }) {
            return Err(refuse(
                "allowed_definers",
                &format!(
                    "pattern {} must be `user@host`, with a user, such as `app@%`",
                    position + 1
                ),
            ));
        }
        settings.allowed_definers.clone_from(patterns);
    }
    if let Some(rules) = &file.rules {
        for (rule, given) in rules.given() {
            let Some(text) = given else { continue };
            let severity = Severity::parse(text).ok_or_else(|| {
                refuse(
                    &format!("rules.{}", rule.id()),
                    "expected off, warning or error",
                )
            })?;
            if severity != rule.default_severity() {
                settings.severities.insert(rule, severity);
            }
        }
    }
    Ok(settings)
}

/// The most webhooks `[schema.notify]` may name.
const MAX_WEBHOOKS: usize = 10;
/// The shortest signing secret, in bytes.
const MIN_SECRET_BYTES: usize = 16;

/// The validated `[schema.notify]`: one to [`MAX_WEBHOOKS`] webhook URLs and the signing secret,
/// from a file or an environment variable. Errors never show a URL (it may hold a token).
fn notify_settings(file: &FileNotify, origin: &Origin) -> Result<NotifySettings, ConfigError> {
    let refuse = |key: &str, problem: &str| {
        ConfigError::new(format!("schema.notify.{key}"), origin.clone(), problem)
    };
    let urls = file.webhooks.clone().unwrap_or_default();
    if urls.is_empty() || urls.len() > MAX_WEBHOOKS {
        return Err(refuse(
            "webhooks",
            &format!("give 1 to {MAX_WEBHOOKS} webhook URLs"),
        ));
    }
    if let Some(position) = urls
        .iter()
        .position(|url| !secure_url(url) || url.contains(char::is_whitespace))
    {
        return Err(refuse(
            "webhooks",
            &format!(
                "webhook {} must be an https:// URL (plain http:// only on a loopback address)",
                position + 1
            ),
        ));
    }
    let secret = secret(
        file.secret_file.as_deref(),
        file.secret_env.as_deref(),
        ("secret_file", "secret_env"),
        &refuse,
    )?;
    if secret.len() < MIN_SECRET_BYTES {
        return Err(refuse(
            "secret_file",
            &format!("the signing secret must have at least {MIN_SECRET_BYTES} bytes"),
        ));
    }
    Ok(NotifySettings {
        urls,
        secret: Arc::new(Zeroizing::new(secret.as_bytes().to_vec())),
    })
}

/// Whether `url` is `https://`, or plain `http://` on a loopback address.
fn secure_url(url: &str) -> bool {
    url.starts_with("https://")
        || ["http://127.0.0.1", "http://localhost", "http://[::1]"]
            .iter()
            .any(|prefix| url.starts_with(prefix))
}

fn artifact_settings(file: &FileArtifacts, origin: &Origin) -> Result<S3Settings, ConfigError> {
    let refuse = |key: &str, problem: &str| {
        ConfigError::new(format!("schema.artifacts.{key}"), origin.clone(), problem)
    };
    let required = |key: &str, value: &Option<String>, what: &str| {
        value
            .clone()
            .filter(|value| !value.trim().is_empty())
            .ok_or_else(|| refuse(key, &format!("{what} is required")))
    };
    let endpoint = required("endpoint", &file.endpoint, "the S3 service's URL")?;
    if !secure_url(&endpoint) {
        return Err(refuse(
            "endpoint",
            "must be an https:// URL (plain http:// only on a loopback address)",
        ));
    }
    Ok(S3Settings {
        endpoint,
        bucket: required("bucket", &file.bucket, "the bucket's name")?,
        region: file
            .region
            .clone()
            .unwrap_or_else(|| "us-east-1".to_owned()),
        access_key_id: required("access_key_id", &file.access_key_id, "the access key ID")?,
        secret_access_key: secret(
            file.secret_access_key_file.as_deref(),
            file.secret_access_key_env.as_deref(),
            ("secret_access_key_file", "secret_access_key_env"),
            &refuse,
        )?,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use super::*;

    fn parse(text: &str) -> Result<SchemaSettings, ConfigError> {
        let file: FileSchema = toml::from_str(text).unwrap();
        schema_settings(Some(&file), &Origin::Default, Servers::Connect)
    }

    fn private_file(folder: &Path, content: &str) -> PathBuf {
        let path = folder.join("password");
        std::fs::write(&path, content).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        path
    }

    #[test]
    fn absent_tables_give_the_defaults() {
        let settings = schema_settings(None, &Origin::Default, Servers::Connect).unwrap();
        assert!(settings.source.is_none() && settings.workspace.is_none());
        assert!(settings.package.is_none());
        assert_eq!(settings.review_window, DEFAULT_REVIEW_WINDOW);
        assert_eq!(settings.connections, DEFAULT_CONNECTIONS);
        let empty = parse("").unwrap();
        assert_eq!(
            (empty.review_window, empty.connections),
            (DEFAULT_REVIEW_WINDOW, 8)
        );
    }

    #[test]
    fn the_package_workspace_and_refresh_settings_are_read() {
        let folder = tempfile::tempdir().unwrap();
        let password = private_file(folder.path(), "w0rkspace pass\n");
        let repository = folder.path().join("repo");
        std::fs::create_dir(&repository).unwrap();
        let settings = parse(&format!(
            "review_window = \"3d\"\nconnections = 64\n\
             [package]\nrepository = {repository:?}\n\
             [workspace]\nhost = \"scratch.internal\"\nport = 3307\nuser = \"verifier\"\npassword_file = {password:?}\ntls = \"disabled\"\n"
        ))
        .unwrap();
        assert_eq!(settings.review_window, Duration::from_secs(3 * 24 * 3600));
        assert_eq!(settings.connections, 64);
        assert_eq!(
            settings.package,
            Some(PackageSettings {
                repository,
                base_branch: "main".to_owned(),
                path: "schemas".to_owned(),
            })
        );
        let workspace = settings.workspace.unwrap();
        assert_eq!(
            (
                workspace.host.as_str(),
                workspace.port,
                workspace.user.as_str()
            ),
            ("scratch.internal", 3307, "verifier")
        );
        assert_eq!(workspace.password.as_str(), "w0rkspace pass");
        assert!(settings.source.is_none());

        let chosen = parse(&format!(
            "[package]\nrepository = {:?}\nbase_branch = \"release/schemas\"\npath = \"db/snapshots\"\n",
            folder.path()
        ))
        .unwrap()
        .package
        .unwrap();
        assert_eq!(
            (chosen.base_branch.as_str(), chosen.path.as_str()),
            ("release/schemas", "db/snapshots")
        );
    }

    #[test]
    fn the_filters_take_patterns_and_default_to_the_shadow_tables() {
        let defaults = parse("").unwrap().filter;
        assert!(defaults.ignore_databases.is_empty());
        let shadow: Vec<&str> = defaults.ignore_tables.iter().map(Pattern::as_str).collect();
        assert_eq!(shadow, ["_*_gho", "_*_ghc", "_*_del", "_*_new", "_*_old"]);
        assert!(defaults.ignores_table("_orders_gho"));

        let chosen =
            parse("ignore_databases = [\"scratch_*\", \"tmp?\"]\nignore_tables = [\"bak_*\"]\n")
                .unwrap()
                .filter;
        assert!(chosen.ignores_database("scratch_1") && chosen.ignores_database("tmp1"));
        assert!(!chosen.ignores_database("tmp12"));
        // Setting `ignore_tables` replaces the default list.
        assert!(chosen.ignores_table("bak_orders"));
        assert!(!chosen.ignores_table("_orders_gho"));
        let nothing = parse("ignore_tables = []\n").unwrap().filter;
        assert!(nothing.ignore_tables.is_empty());
        assert!(!nothing.ignores_table("_orders_gho"));
    }

    #[test]
    fn a_bad_pattern_is_refused_naming_its_setting() {
        let long = "x".repeat(257);
        for (text, setting) in [
            (
                "ignore_databases = [\"\"]\n".to_owned(),
                "schema.ignore_databases",
            ),
            (
                format!("ignore_databases = [\"a\", \"{long}\"]\n"),
                "schema.ignore_databases",
            ),
            (
                "ignore_tables = [\"\"]\n".to_owned(),
                "schema.ignore_tables",
            ),
            (
                format!("ignore_tables = [\"{long}\"]\n"),
                "schema.ignore_tables",
            ),
        ] {
            let error = parse(&text).unwrap_err().to_string();
            assert!(
                error.contains(&format!("`{setting}`")) && error.contains("1 to 256 characters"),
                "{text}: {error}"
            );
        }
        // Not a list of strings: the file does not parse, and the error says where.
        assert!(toml::from_str::<FileSchema>("ignore_tables = \"_*_gho\"\n").is_err());
    }

    #[test]
    fn each_bad_value_is_refused_naming_its_setting_without_the_password() {
        let folder = tempfile::tempdir().unwrap();
        let password = private_file(folder.path(), "s3cret-workspace");
        let repository = format!("{:?}", folder.path());
        let workspace = format!("host = \"h\"\nuser = \"u\"\npassword_file = {password:?}\n");
        for (text, setting) in [
            (
                "review_window = \"30s\"\n".to_owned(),
                "schema.review_window",
            ),
            (
                "review_window = \"31d\"\n".to_owned(),
                "schema.review_window",
            ),
            (
                "review_window = \"soon\"\n".to_owned(),
                "schema.review_window",
            ),
            ("connections = 0\n".to_owned(), "schema.connections"),
            ("connections = 65\n".to_owned(), "schema.connections"),
            ("connections = -1\n".to_owned(), "schema.connections"),
            (
                "[package]\nbase_branch = \"main\"\n".to_owned(),
                "schema.package.repository",
            ),
            (
                "[package]\nrepository = \"/nonexistent/fermata/repo\"\n".to_owned(),
                "schema.package",
            ),
            (
                format!("[package]\nrepository = {repository}\nbase_branch = \"two words\"\n"),
                "schema.package",
            ),
            (
                format!("[package]\nrepository = {repository}\npath = \"../outside\"\n"),
                "schema.package",
            ),
            (
                format!("[workspace]\n{workspace}tls = \"sometimes\"\n"),
                "schema.workspace.tls",
            ),
            (
                format!("[workspace]\n{workspace}tls = \"verify_identity\"\n"),
                "schema.workspace",
            ),
            (
                format!("[workspace]\n{workspace}password_env = \"X\"\n"),
                "schema.workspace.password_file",
            ),
            (
                "[workspace]\nhost = \"h\"\npassword_env = \"FERMATA_TEST_UNSET_PASSWORD\"\n"
                    .to_owned(),
                "schema.workspace.user",
            ),
        ] {
            let error = parse(&text).unwrap_err();
            assert_eq!(error.setting, setting, "{text}");
            let shown = format!("{error} {error:?}");
            assert!(!shown.contains("s3cret"), "{shown}");
        }
    }

    #[test]
    fn a_schedule_is_a_daily_time_or_a_period_in_hours_with_a_source_and_a_package() {
        let folder = tempfile::tempdir().unwrap();
        let password = private_file(folder.path(), "s3cret-source");
        let needs = format!(
            "[source]\nhost = \"h\"\nuser = \"u\"\npassword_file = {password:?}\n\
             [package]\nrepository = {:?}\n",
            folder.path()
        );
        let schedule = |table: &str| parse(&format!("{needs}[schedule]\n{table}"));
        assert_eq!(
            schedule("daily_at = \"03:30\"\n").unwrap().schedule,
            Schedule::daily(3, 30)
        );
        assert_eq!(
            schedule("every_hours = 6\n").unwrap().schedule,
            Some(Schedule::Every {
                period: Duration::from_secs(6 * 3600)
            })
        );
        assert_eq!(parse(&needs).unwrap().schedule, None);
        for (table, setting) in [
            ("daily_at = \"3:30\"\n", "schema.schedule.daily_at"),
            ("daily_at = \"24:00\"\n", "schema.schedule.daily_at"),
            ("daily_at = \"noon\"\n", "schema.schedule.daily_at"),
            ("every_hours = 0\n", "schema.schedule.every_hours"),
            ("every_hours = 169\n", "schema.schedule.every_hours"),
            ("every_hours = -6\n", "schema.schedule.every_hours"),
            ("daily_at = \"03:30\"\nevery_hours = 6\n", "schema.schedule"),
            ("", "schema.schedule"),
        ] {
            let error = schedule(table).unwrap_err();
            assert_eq!(error.setting, setting, "{table}");
        }
        let alone = parse("[schedule]\nevery_hours = 6\n").unwrap_err();
        assert_eq!(alone.setting, "schema.schedule");
        assert!(alone.to_string().contains("[schema.source]"), "{alone}");
    }

    #[test]
    fn webhooks_are_secure_urls_with_a_secret_from_a_file_and_errors_never_show_them() {
        let folder = tempfile::tempdir().unwrap();
        let secret = private_file(folder.path(), "0123456789abcdef-signing\n");
        let notify = |table: &str| parse(&format!("[notify]\n{table}"));
        let settings = notify(&format!(
            "webhooks = [\"https://hooks.example.com/t0ken\", \"http://127.0.0.1:9/in\"]\n\
             secret_file = {secret:?}\n"
        ))
        .unwrap()
        .notify
        .unwrap();
        assert_eq!(settings.urls.len(), 2);
        assert_eq!(settings.secret.as_slice(), b"0123456789abcdef-signing");
        assert!(!format!("{settings:?}").contains("t0ken"));
        let short = private_file(folder.path(), "short");
        for (table, setting) in [
            (
                format!("webhooks = []\nsecret_file = {secret:?}\n"),
                "schema.notify.webhooks",
            ),
            (
                format!(
                    "webhooks = [\"http://hooks.example.com/t0ken\"]\nsecret_file = {secret:?}\n"
                ),
                "schema.notify.webhooks",
            ),
            (
                "webhooks = [\"https://hooks.example.com/t0ken\"]\n".to_owned(),
                "schema.notify.secret_file",
            ),
            (
                format!(
                    "webhooks = [\"https://hooks.example.com/t0ken\"]\nsecret_file = {short:?}\n"
                ),
                "schema.notify.secret_file",
            ),
        ] {
            let error = notify(&table).unwrap_err();
            assert_eq!(error.setting, setting, "{table}");
            assert!(!format!("{error} {error:?}").contains("t0ken"), "{error}");
        }
    }

    #[test]
    fn lint_settings_are_read_with_defaults_for_what_is_not_given() {
        assert_eq!(parse("").unwrap().lint, LintSettings::default());
        assert_eq!(parse("[lint]\n").unwrap().lint, LintSettings::default());
        let lint = parse(
            "[lint]\ncharset = \"utf8mb3\"\nallowed_definers = [\"app@%\", \"root@localhost\", \"a@b@%\"]\n\
             [lint.rules]\nno-primary-key = \"error\"\nfloat-for-money = \"off\"\n\
             zero-date-default = \"error\"\n",
        )
        .unwrap()
        .lint;
        assert_eq!(lint.charset, "utf8mb3");
        assert_eq!(lint.allowed_definers, ["app@%", "root@localhost", "a@b@%"]);
        // `zero-date-default` is an error already: only what differs is kept.
        assert_eq!(
            lint.severities,
            BTreeMap::from([
                (Rule::NoPrimaryKey, Severity::Error),
                (Rule::FloatForMoney, Severity::Off),
            ])
        );
        assert_eq!(lint.severity(Rule::ZeroDateDefault), Severity::Error);
        assert_eq!(lint.severity(Rule::DuplicateIndex), Severity::Warning);
    }

    #[test]
    fn every_rule_id_is_a_key_of_the_rules_table() {
        let table: String = Rule::ALL
            .iter()
            .map(|rule| format!("{} = \"off\"\n", rule.id()))
            .collect();
        let lint = parse(&format!("[lint.rules]\n{table}")).unwrap().lint;
        assert_eq!(
            lint.severities,
            Rule::ALL.map(|rule| (rule, Severity::Off)).into()
        );
    }

    #[test]
    fn an_unknown_rule_id_is_refused_listing_the_known_ones() {
        let error =
            toml::from_str::<FileSchema>("[lint.rules]\nno-primary-keys = \"off\"\n").unwrap_err();
        let message = error.message();
        assert!(
            message.contains("unknown field `no-primary-keys`"),
            "{message}"
        );
        for rule in Rule::ALL {
            assert!(message.contains(&format!("`{}`", rule.id())), "{message}");
        }
        // Nor is a rule ID a key of `[schema.lint]` itself.
        assert!(toml::from_str::<FileSchema>("[lint]\nno-primary-key = \"off\"\n").is_err());
    }

    #[test]
    fn a_bad_lint_value_is_refused_naming_its_setting() {
        for (table, setting, problem) in [
            (
                "[lint.rules]\nduplicate-index = \"fatal\"\n",
                "schema.lint.rules.duplicate-index",
                "expected off, warning or error",
            ),
            (
                "[lint.rules]\nno-primary-key = \"Warning\"\n",
                "schema.lint.rules.no-primary-key",
                "expected off, warning or error",
            ),
            (
                "[lint]\nallowed_definers = [\"app@%\", \"root\"]\n",
                "schema.lint.allowed_definers",
                "pattern 2 must be `user@host`",
            ),
            (
                "[lint]\nallowed_definers = [\"@localhost\"]\n",
                "schema.lint.allowed_definers",
                "pattern 1 must be `user@host`",
            ),
            (
                "[lint]\ncharset = \"\"\n",
                "schema.lint.charset",
                "character set's name",
            ),
            (
                "[lint]\ncharset = \"utf8 mb4\"\n",
                "schema.lint.charset",
                "character set's name",
            ),
        ] {
            let error = parse(table).unwrap_err();
            assert_eq!(error.setting, setting, "{table}");
            assert!(error.problem.contains(problem), "{table}: {error}");
        }
        // A severity that is not a string does not parse, and the error says where.
        assert!(toml::from_str::<FileSchema>("[lint.rules]\nno-primary-key = 2\n").is_err());
    }

    #[test]
    fn an_artifact_bucket_reads_its_secret_key_from_a_file_or_the_environment() {
        let folder = tempfile::tempdir().unwrap();
        let key = private_file(folder.path(), "s3cret key\n");
        let settings = parse(&format!(
            "[artifacts]\nendpoint = \"https://s3.eu-west-1.amazonaws.com\"\nbucket = \"reviews\"\n\
             region = \"eu-west-1\"\naccess_key_id = \"AKIDEXAMPLE\"\nsecret_access_key_file = {key:?}\n"
        ))
        .unwrap();
        let bucket = settings.artifacts.unwrap();
        assert_eq!(bucket.bucket, "reviews");
        assert_eq!(bucket.region, "eu-west-1");
        assert_eq!(bucket.secret_access_key.as_str(), "s3cret key");
        assert!(!format!("{bucket:?}").contains("s3cret"));

        let base = "bucket = \"b\"\naccess_key_id = \"id\"\n";
        for (text, setting) in [
            (
                format!("[artifacts]\n{base}secret_access_key_file = {key:?}\n"),
                "schema.artifacts.endpoint",
            ),
            (
                format!(
                    "[artifacts]\nendpoint = \"http://s3.internal\"\n{base}secret_access_key_file = {key:?}\n"
                ),
                "schema.artifacts.endpoint",
            ),
            (
                format!("[artifacts]\nendpoint = \"http://127.0.0.1:9000\"\n{base}"),
                "schema.artifacts.secret_access_key_file",
            ),
            (
                format!(
                    "[artifacts]\nendpoint = \"https://s3\"\n{base}secret_access_key_env = \"FERMATA_TEST_UNSET_SECRET\"\n"
                ),
                "schema.artifacts.secret_access_key_env",
            ),
        ] {
            let error = parse(&text).unwrap_err();
            assert_eq!(error.setting, setting, "{text}");
            assert!(!format!("{error} {error:?}").contains("s3cret"));
        }
    }

    #[test]
    fn a_github_package_reads_its_token_and_names_each_wrong_setting() {
        let folder = tempfile::tempdir().unwrap();
        let token = private_file(folder.path(), "ghp_s3cret\n");
        let settings = parse(&format!(
            "[package]\nforge = \"github\"\ngithub_repository = \"acme/schemas\"\n\
             base_branch = \"trunk\"\ntoken_file = {token:?}\n"
        ))
        .unwrap();
        let github = settings.github.unwrap();
        assert_eq!(
            (github.owner.as_str(), github.repository.as_str()),
            ("acme", "schemas")
        );
        assert_eq!(github.api_url, "https://api.github.com");
        assert_eq!(settings.package.unwrap().base_branch, "trunk");
        assert!(!format!("{github:?}").contains("s3cret"));

        let base = format!("forge = \"github\"\ntoken_file = {token:?}\n");
        for (text, setting) in [
            (
                format!("[package]\n{base}"),
                "schema.package.github_repository",
            ),
            (
                format!("[package]\n{base}github_repository = \"no-slash\"\n"),
                "schema.package.github_repository",
            ),
            (
                format!("[package]\n{base}github_repository = \"acme/bad name\"\n"),
                "schema.package.github_repository",
            ),
            (
                format!(
                    "[package]\n{base}github_repository = \"acme/schemas\"\napi_url = \"ftp://x\"\n"
                ),
                "schema.package.api_url",
            ),
            (
                "[package]\nforge = \"github\"\ngithub_repository = \"acme/schemas\"\n".to_owned(),
                "schema.package.token_file",
            ),
            (
                format!("[package]\n{base}github_repository = \"a/b\"\nrepository = \"/tmp\"\n"),
                "schema.package.repository",
            ),
            (
                "[package]\nforge = \"gitlab\"\n".to_owned(),
                "schema.package.forge",
            ),
            (
                format!(
                    "[package]\nrepository = {:?}\ntoken_env = \"X\"\n",
                    folder.path()
                ),
                "schema.package.token_env",
            ),
        ] {
            let error = parse(&text).unwrap_err();
            assert_eq!(error.setting, setting, "{text}");
            assert!(!format!("{error} {error:?}").contains("s3cret"));
        }
    }
}
