//! A MySQL or MariaDB server table, as `[schema.source]` (the server whose schemas are
//! snapshotted) and `[schema.workspace]` (the verification workspace server) both give one: host,
//! port, account, TLS, and the account's password, read from a file or a named environment
//! variable (never written in the configuration itself). Errors name the setting, never a value
//! that could be the password.

use std::path::{Path, PathBuf};

use fermata_schema::{SourceSettings, TlsMode};
use serde::Deserialize;
use zeroize::Zeroizing;

use super::{ConfigError, Origin};

const DEFAULT_PORT: u16 = 3306;

/// A server table, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileSource {
    host: Option<String>,
    port: Option<u16>,
    user: Option<String>,
    password_file: Option<PathBuf>,
    password_env: Option<String>,
    tls: Option<String>,
    ca_file: Option<PathBuf>,
}

/// The validated server of the table `table` (`schema.source`, say), or none when it is absent.
pub(super) fn source_settings(
    file: Option<&FileSource>,
    table: &str,
    origin: &Origin,
) -> Result<Option<SourceSettings>, ConfigError> {
    let Some(file) = file else {
        return Ok(None);
    };
    let refuse = |key: &str, problem: &str| {
        ConfigError::new(format!("{table}.{key}"), origin.clone(), problem)
    };
    let host = file
        .host
        .clone()
        .filter(|host| !host.trim().is_empty())
        .ok_or_else(|| {
            refuse(
                "host",
                "the MySQL server's host name or address is required",
            )
        })?;
    let user = file
        .user
        .clone()
        .ok_or_else(|| refuse("user", "the snapshot account's name is required"))?;
    let tls = match &file.tls {
        None => TlsMode::default(),
        Some(text) => text
            .parse()
            // Dropped on purpose: the message names every mode.
            .map_err(|_| refuse("tls", &format!("expected {}", TlsMode::NAMES)))?,
    };
    let password = secret(
        file.password_file.as_deref(),
        file.password_env.as_deref(),
        ("password_file", "password_env"),
        &refuse,
    )?;
    let settings = SourceSettings {
        host,
        port: file.port.unwrap_or(DEFAULT_PORT),
        user,
        password,
        tls,
        ca_file: file.ca_file.clone(),
    };
    settings
        .validate()
        .map_err(|problem| ConfigError::new(table, origin.clone(), problem))?;
    Ok(Some(settings))
}

/// A secret given in a file (`keys.0`) or a named environment variable (`keys.1`), never in the
/// configuration itself; exactly one of the two. `refuse` names the key that is wrong.
pub(super) fn secret(
    file: Option<&Path>,
    env: Option<&str>,
    keys: (&str, &str),
    refuse: &dyn Fn(&str, &str) -> ConfigError,
) -> Result<Zeroizing<String>, ConfigError> {
    let (file_key, env_key) = keys;
    match (file, env) {
        (Some(_), Some(_)) => Err(refuse(
            file_key,
            &format!("give `{file_key}` or `{env_key}`, not both"),
        )),
        (None, None) => Err(refuse(
            file_key,
            &format!(
                "give the secret in a file (`{file_key}`) or a named environment variable (`{env_key}`)"
            ),
        )),
        (Some(path), None) => {
            read_password_file(path).map_err(|problem| refuse(file_key, &problem))
        }
        (None, Some(name)) => std::env::var(name)
            .ok()
            .filter(|value| !value.is_empty())
            .map(Zeroizing::new)
            .ok_or_else(|| {
                refuse(
                    env_key,
                    &format!("the environment variable `{name}` is not set or empty"),
                )
            }),
    }
}

/// The password file's content without its final line break. It must not be readable by others.
fn read_password_file(path: &Path) -> Result<Zeroizing<String>, String> {
    use std::io::Read;
    let unreadable = |error: std::io::Error| format!("cannot read {}: {error}", path.display());
    // Opened once: the permissions checked are those of the file that is read.
    let mut file = std::fs::File::open(path).map_err(unreadable)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = file.metadata().map_err(unreadable)?.permissions().mode();
        if mode & 0o077 != 0 {
            return Err(format!(
                "{} can be read by others (mode {:o}); run `chmod 600` on it",
                path.display(),
                mode & 0o777
            ));
        }
    }
    let mut text = Zeroizing::new(String::new());
    // Through the handle whose mode was checked, not the path again.
    #[allow(clippy::verbose_file_reads)]
    file.read_to_string(&mut text).map_err(unreadable)?;
    let password = text.strip_suffix('\n').unwrap_or(&text);
    let password = password.strip_suffix('\r').unwrap_or(password);
    if password.is_empty() {
        return Err(format!("{} is empty", path.display()));
    }
    Ok(Zeroizing::new(password.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `[source]` table of `text` as `[schema.source]`.
    fn parse(text: &str) -> Result<Option<SourceSettings>, ConfigError> {
        let tables: std::collections::BTreeMap<String, FileSource> = toml::from_str(text).unwrap();
        source_settings(tables.get("source"), "schema.source", &Origin::Default)
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
    fn a_source_reads_its_password_from_a_private_file() {
        let folder = tempfile::tempdir().unwrap();
        let path = private_file(folder.path(), "s3cret pass\n");
        let settings = parse(&format!(
            "[source]\nhost = \"db.internal\"\nuser = \"snapshot\"\npassword_file = {path:?}\ntls = \"required\"\n"
        ))
        .unwrap()
        .unwrap();
        assert_eq!(settings.password.as_str(), "s3cret pass");
        assert_eq!((settings.port, settings.tls), (3306, TlsMode::Required));
        assert!(!format!("{settings:?}").contains("s3cret"));
    }

    #[test]
    fn bad_sources_are_refused_by_setting_without_the_password() {
        let folder = tempfile::tempdir().unwrap();
        let path = private_file(folder.path(), "s3cret");
        let base = format!("host = \"h\"\nuser = \"u\"\npassword_file = {path:?}\n");
        for (extra, setting) in [
            ("tls = \"sometimes\"\n", "schema.source.tls"),
            ("tls = \"verify_ca\"\n", "schema.source"),
            ("password_env = \"X\"\n", "schema.source.password_file"),
        ] {
            let error = parse(&format!("[source]\n{base}{extra}")).unwrap_err();
            assert_eq!(error.setting, setting, "{extra}");
            assert!(!error.to_string().contains("s3cret"));
        }
        let error = parse("[source]\nhost = \"h\"\nuser = \"u\"\n").unwrap_err();
        assert_eq!(error.setting, "schema.source.password_file");
        let error = parse(
            "[source]\nhost = \"h\"\nuser = \"u\"\npassword_env = \"FERMATA_TEST_UNSET_PASSWORD\"\n",
        )
        .unwrap_err();
        assert_eq!(error.setting, "schema.source.password_env");
        let error = parse(&format!(
            "[source]\nuser = \"u\"\npassword_file = {path:?}\n"
        ))
        .unwrap_err();
        assert_eq!(error.setting, "schema.source.host");
        assert!(toml::from_str::<FileSource>("password = \"inline\"\n").is_err());
        assert!(parse("").unwrap().is_none());
    }

    #[cfg(unix)]
    #[test]
    fn a_password_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let folder = tempfile::tempdir().unwrap();
        let path = private_file(folder.path(), "s3cret");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = parse(&format!(
            "[source]\nhost = \"h\"\nuser = \"u\"\npassword_file = {path:?}\n"
        ))
        .unwrap_err();
        assert!(error.problem.contains("chmod 600"), "{error}");
    }
}
