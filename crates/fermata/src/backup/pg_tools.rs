//! PostgreSQL's own tools, `pg_dump` and `pg_restore`: finding one of a major version that can
//! handle the server (the one named by the setting, else the first on `PATH`, else the newest
//! under `/usr/lib/postgresql/*/bin`), and running it with the connection's password in the
//! environment, never on a command line other local users can read.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::Command;

use crate::failure::Failure;

/// One of PostgreSQL's programs, found and of a known major version.
#[derive(Debug, Clone)]
pub(crate) struct PgTool {
    pub path: PathBuf,
    pub major: u32,
}

/// Finds `name` (`pg_dump`, `pg_restore`) of major version `at_least` or later. `named` is the
/// operator's choice (a flag or environment variable), used alone when given.
pub(crate) async fn find(
    name: &str,
    named: Option<&Path>,
    at_least: u32,
    setting: &str,
) -> Result<PgTool, Failure> {
    let candidates = match named {
        Some(path) => vec![path.to_owned()],
        None => candidates(name),
    };
    let mut seen = Vec::new();
    for path in candidates {
        let Some(major) = major_version(&path).await else {
            continue;
        };
        if major >= at_least {
            return Ok(PgTool { path, major });
        }
        seen.push(format!("{} (version {major})", path.display()));
    }
    let found = if seen.is_empty() {
        format!("no {name} was found")
    } else {
        format!("only {} was found", seen.join(", "))
    };
    Err(Failure::runtime(format!(
        "{found}, and PostgreSQL {at_least} needs {name} {at_least} or later: install its client \
         tools (Debian: postgresql-client-{at_least}) or name one with {setting}"
    )))
}

/// Where `name` may be: each folder of `PATH`, then PostgreSQL's versioned folders, newest first.
fn candidates(name: &str) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|path| {
            std::env::split_paths(&path)
                .map(|folder| folder.join(name))
                .filter(|path| path.is_file())
                .collect()
        })
        .unwrap_or_default();
    let mut versioned: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let major = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let path = entry.path().join("bin").join(name);
            path.is_file().then_some((major, path))
        })
        .collect();
    versioned.sort_by_key(|(major, _)| std::cmp::Reverse(*major));
    paths.extend(versioned.into_iter().map(|(_, path)| path));
    paths
}

/// The major version `path --version` reports ("pg_dump (PostgreSQL) 15.19" is 15).
async fn major_version(path: &Path) -> Option<u32> {
    let output = Command::new(path)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .await
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text.split_whitespace().last()?;
    version.split(['.', ' ']).next()?.parse().ok()
}

/// A connection URL split for a child process: the URL without its password (for `--dbname`),
/// and the password (for `PGPASSWORD`).
pub(crate) struct Connection {
    pub url: String,
    pub password: Option<zeroize::Zeroizing<String>>,
    /// The database's name, as `--force` must give it.
    pub database: String,
}

impl Connection {
    pub(crate) fn parse(url: &str) -> Result<Connection, Failure> {
        let invalid = || Failure::config("the PostgreSQL connection URL does not parse");
        let mut parsed = url::Url::parse(url).map_err(|_| invalid())?;
        let password = parsed
            .password()
            .map(|password| {
                percent_encoding::percent_decode_str(password)
                    .decode_utf8()
                    .map(|decoded| zeroize::Zeroizing::new(decoded.into_owned()))
                    .map_err(|_| invalid())
            })
            .transpose()?;
        parsed.set_password(None).map_err(|()| invalid())?;
        let database = parsed.path().trim_start_matches('/').to_owned();
        Ok(Connection {
            url: parsed.into(),
            password,
            database,
        })
    }

    /// Runs `tool` with `args` against this connection; its output is kept for the log only
    /// (it may name hosts and users), and the message says how to see it.
    pub(crate) async fn run(
        &self,
        tool: &PgTool,
        args: &[&std::ffi::OsStr],
    ) -> Result<(), Failure> {
        let mut command = Command::new(&tool.path);
        command
            .args(args)
            .arg(format!("--dbname={}", self.url))
            .env("PGCONNECT_TIMEOUT", "10")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        match &self.password {
            Some(password) => command.env("PGPASSWORD", password.as_str()),
            None => command.env_remove("PGPASSWORD"),
        };
        let name = tool
            .path
            .file_name()
            .map_or_else(|| "the tool".into(), |name| name.to_string_lossy());
        let output = command.output().await.map_err(|error| {
            Failure::runtime(format!("cannot run {}: {error}", tool.path.display()))
        })?;
        if output.status.success() {
            return Ok(());
        }
        let said = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        Err(Failure::runtime(format!(
            "{name} failed ({}); run again with -vv to see what it said",
            output.status
        ))
        .with_source(ToolOutput(said)))
    }
}

/// What a PostgreSQL tool wrote to standard error, kept for the debug log.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ToolOutput(String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_leaves_the_url() {
        let connection =
            Connection::parse("postgres://ada:s%40cret@db.internal:5433/fermata?sslmode=require")
                .unwrap();
        assert_eq!(
            connection.url,
            "postgres://ada@db.internal:5433/fermata?sslmode=require"
        );
        assert_eq!(
            connection.password.as_deref().map(String::as_str),
            Some("s@cret")
        );
        assert_eq!(connection.database, "fermata");
        let without = Connection::parse("postgres://postgres@127.0.0.1/postgres").unwrap();
        assert!(without.password.is_none());
        assert!(Connection::parse("not a url").is_err());
    }
}
