//! The command line: flags and environment variables, parsed and then resolved with the config
//! file into validated settings before any command starts.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::config::{Given, Origin, Overrides, Sources};
use crate::failure::Failure;
use crate::{logging, serve, status};

const AFTER_HELP: &str = "\
Settings come from flags, then FERMATA_* environment variables, then the --config TOML file
(the same names in snake_case, e.g. `listen = \"127.0.0.1:7878\"`), then the defaults.
The writer lease timings are set in the file's [writer_lease] table: ttl (30s), renew_every (10s),
attempt_timeout (5s), abandon_after (6s), safety_deadline (25s) and drain_timeout (3s).
Log verbosity follows FERMATA_LOG (e.g. `info`, `debug`, `fermata=debug`).

Exit codes: 0 stopped cleanly, 1 database or system failure, 2 invalid setting or argument,
3 another process holds the writer lease, 4 the writer lease was lost while serving.";

/// Fermata: durable storage for collaborative documents and MySQL schema snapshots.
#[derive(Debug, Parser)]
#[command(name = "fermata", version, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Apply pending migrations, take the writer lease and serve HTTP.
    Serve(ServeArgs),
    /// Apply pending migrations to the application database, then exit.
    Migrate(StorageArgs),
    /// Show the schema, who holds the writer lease, and the latest serving processes.
    Status(StorageArgs),
}

#[derive(Debug, Args)]
struct StorageArgs {
    /// A TOML configuration file.
    #[arg(long, env = "FERMATA_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// The data folder; the SQLite database is `fermata.db` inside it [default: ./fermata-data].
    #[arg(long, env = "FERMATA_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// The application database adapter: `sqlite` (embedded, the default) or `postgres`.
    #[arg(long, env = "FERMATA_STORAGE", value_name = "sqlite|postgres")]
    storage: Option<String>,
    /// PostgreSQL connection URL, for `--storage postgres`. Never logged; prefer the environment
    /// variable or the config file, since flags are visible to other local users.
    #[arg(
        long,
        env = "FERMATA_DATABASE_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    database_url: Option<String>,
    /// Log lines as `text` (default) or `json`, on standard error.
    #[arg(long, env = "FERMATA_LOG_FORMAT", value_name = "text|json")]
    log_format: Option<String>,
}

#[derive(Debug, Args)]
struct ServeArgs {
    #[command(flatten)]
    storage: StorageArgs,
    /// The HTTP address to listen on [default: 127.0.0.1:7878].
    #[arg(long, env = "FERMATA_LISTEN", value_name = "ADDR")]
    listen: Option<String>,
    /// When another process holds the writer lease: `refuse` to start (default), or `wait` for
    /// it to be released and take over. HANDOVER=wait is also understood.
    #[arg(long, env = "FERMATA_HANDOVER", value_name = "refuse|wait")]
    handover: Option<String>,
    /// Do not apply pending migrations; refuse to serve while any is pending.
    #[arg(long)]
    no_migrate: bool,
}

/// Parses `args`, runs the command, and returns the process exit code.
pub fn main_with(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let matches = match Cli::command().try_get_matches_from(args) {
        Ok(matches) => matches,
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2));
        }
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(2);
        }
    };
    let sub = matches.subcommand().map(|(_, sub)| sub).unwrap_or(&matches);
    match run(&cli.command, sub) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("fermata: {failure}");
            failure.exit_code()
        }
    }
}

fn run(command: &Command, matches: &ArgMatches) -> Result<(), Failure> {
    let (storage_args, serve_args) = match command {
        Command::Serve(args) => (&args.storage, Some(args)),
        Command::Migrate(args) | Command::Status(args) => (args, None),
    };
    let overrides = overrides(matches, storage_args, serve_args);
    let config = storage_args
        .config
        .clone()
        .map(|path| given(matches, "config", "--config", "FERMATA_CONFIG", path));
    let sources =
        Sources::load(config.as_ref(), overrides).map_err(|e| Failure::config(e.to_string()))?;
    let log_format = sources
        .log_format()
        .map_err(|e| Failure::config(e.to_string()))?;

    let runtime = tokio::runtime::Runtime::new()
        .map_err(|error| Failure::runtime(format!("cannot start the async runtime: {error}")))?;
    match command {
        Command::Serve(_) => {
            let settings = sources
                .serve()
                .map_err(|e| Failure::config(e.to_string()))?;
            logging::init(log_format);
            runtime.block_on(async {
                let shutdown = shutdown_on_signals();
                serve::serve(settings, shutdown).await
            })
        }
        Command::Migrate(_) => {
            let settings = sources
                .storage()
                .map_err(|e| Failure::config(e.to_string()))?;
            logging::init(log_format);
            let report = runtime.block_on(status::migrate(&settings))?;
            print!("{report}");
            Ok(())
        }
        Command::Status(_) => {
            let settings = sources
                .storage()
                .map_err(|e| Failure::config(e.to_string()))?;
            logging::init(log_format);
            let report = runtime.block_on(status::status(&settings))?;
            print!("{report}");
            Ok(())
        }
    }
}

/// Where clap found `id`'s value.
fn given<T>(
    matches: &ArgMatches,
    id: &str,
    flag: &'static str,
    env: &'static str,
    value: T,
) -> Given<T> {
    let origin = match matches.value_source(id) {
        Some(ValueSource::EnvVariable) => Origin::Env(env),
        _ => Origin::Flag(flag),
    };
    Given { value, origin }
}

fn overrides(matches: &ArgMatches, storage: &StorageArgs, serve: Option<&ServeArgs>) -> Overrides {
    let handover = serve
        .and_then(|args| args.handover.clone())
        .map(|value| given(matches, "handover", "--handover", "FERMATA_HANDOVER", value));
    // HANDOVER=wait is the short form operators' deploy scripts use.
    let handover = handover.or_else(|| {
        serve
            .and(std::env::var("HANDOVER").ok())
            .map(|value| Given {
                value,
                origin: Origin::Env("HANDOVER"),
            })
    });
    Overrides {
        data_dir: storage
            .data_dir
            .clone()
            .map(|v| given(matches, "data_dir", "--data-dir", "FERMATA_DATA_DIR", v)),
        storage: storage
            .storage
            .clone()
            .map(|v| given(matches, "storage", "--storage", "FERMATA_STORAGE", v)),
        database_url: storage.database_url.clone().map(|v| {
            given(
                matches,
                "database_url",
                "--database-url",
                "FERMATA_DATABASE_URL",
                v,
            )
        }),
        listen: serve
            .and_then(|args| args.listen.clone())
            .map(|v| given(matches, "listen", "--listen", "FERMATA_LISTEN", v)),
        handover,
        no_migrate: serve.is_some_and(|args| args.no_migrate),
        log_format: storage.log_format.clone().map(|v| {
            given(
                matches,
                "log_format",
                "--log-format",
                "FERMATA_LOG_FORMAT",
                v,
            )
        }),
    }
}

/// A token cancelled on Ctrl-C or SIGTERM.
fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let terminate = async {
                match term.as_mut() {
                    Some(term) => {
                        term.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = ctrl_c => {}
                () = terminate => {}
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        tracing::info!("stop requested; draining");
        cancel.cancel();
    });
    token
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
