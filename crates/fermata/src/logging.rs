//! Log lines on standard error, as text or JSON.
//!
//! `serve` is a server: its log is its output, so it logs at `info`. Every other command prints
//! its own progress and result for people and logs only warnings and errors, so that log lines
//! never interleave with what it prints. `-v` raises either level one step per use (`-v` info,
//! `-vv` debug, `-vvv` trace for a command; `-v` debug, `-vv` trace for `serve`). A filter in
//! `FERMATA_LOG`, else in `RUST_LOG`, wins over both (e.g. `debug` or `fermata_schema=debug`).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// The filter variables, the first set one winning over the level the command chose.
const FILTER_VARS: [&str; 2] = ["FERMATA_LOG", "RUST_LOG"];

/// Who is logging: the server, or a command that prints its own output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Server,
    Command,
}

/// The level `role` logs at with `verbose` uses of `-v`.
fn level(role: Role, verbose: u8) -> &'static str {
    let levels: &[&str] = match role {
        Role::Server => &["info", "debug", "trace"],
        Role::Command => &["warn", "info", "debug", "trace"],
    };
    levels[usize::from(verbose).min(levels.len() - 1)]
}

pub(crate) fn init(format: LogFormat, role: Role, verbose: u8) {
    let filter = FILTER_VARS
        .iter()
        .find_map(|var| EnvFilter::try_from_env(var).ok())
        .unwrap_or_else(|| EnvFilter::new(level(role, verbose)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_log_warnings_and_serve_logs_info_until_asked_for_more() {
        assert_eq!(level(Role::Command, 0), "warn");
        assert_eq!(level(Role::Command, 1), "info");
        assert_eq!(level(Role::Command, 2), "debug");
        assert_eq!(level(Role::Server, 0), "info");
        assert_eq!(level(Role::Server, 1), "debug");
        assert_eq!(level(Role::Server, 9), "trace");
        assert_eq!(level(Role::Command, 9), "trace");
    }
}
