//! The command line: flags and environment variables, parsed and then resolved with the config
//! file into validated settings before any command starts.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use fermata_schema::Verdict;
use fermata_schema::lint::Severity;
use fermata_schema::migration::Direction;
use fermata_store::ErrorChain;
use tokio_util::sync::CancellationToken;

use crate::config::{Given, Origin, Overrides, Servers, Sources};
use crate::failure::Failure;
use crate::logging::Role;
use crate::{account_commands, backup, logging, repository_files, schema_commands, serve, status};

const AFTER_HELP: &str = "\
Settings come from flags, then FERMATA_* environment variables, then the --config TOML file
(the same names in snake_case, e.g. `listen = \"127.0.0.1:7878\"`), then the defaults.
The writer lease timings are set in the file's [writer_lease] table: ttl (30s), renew_every (10s),
attempt_timeout (5s), abandon_after (6s), safety_deadline (25s) and drain_timeout (3s).
Schema snapshots are set in the file's [schema] table: review_window (24h) and connections (8),
with the tables [schema.source] (the MySQL server), [schema.workspace] (the verification server)
and [schema.package] (repository, base_branch = \"main\", path = \"schemas\").
`serve` logs at info; every other command prints its own progress and result and logs only
warnings and errors. -v raises the level (-v info, -vv debug for a command; -v debug for serve);
a filter in FERMATA_LOG, else RUST_LOG, wins over both (e.g. `info`, `debug`, `fermata=debug`).

Exit codes: 0 stopped cleanly, 1 database or system failure (for `schema check-source`, also a
missing privilege; for `schema verify --exit-code`, drift; for `schema review --fail-on`, a lint
finding at that severity or above), 2 invalid setting or argument, 3 another process holds the
writer lease, 4 the writer lease was lost while serving.";

/// Fermata: durable storage for collaborative documents and MySQL schema snapshots.
#[derive(Debug, Parser)]
#[command(name = "fermata", version, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log more: -v info, -vv debug (for `serve`, which logs at info: -v debug). FERMATA_LOG or
    /// RUST_LOG, when set, wins.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Apply pending migrations, take the writer lease and serve HTTP.
    Serve(ServeArgs),
    /// Apply pending migrations to the application database, then exit.
    Migrate(StorageArgs),
    /// Show the schema, who holds the writer lease, and the latest serving processes.
    Status(StorageArgs),
    /// Write a consistent backup (the database, its encryption keys, the review artifacts kept
    /// on disk) into a new folder DEST, while `serve` runs. See docs/operations.md.
    Backup(BackupArgs),
    /// Restore a backup into the empty data folder or database the storage settings name, apply
    /// newer migrations, and verify every document and stored credential.
    Restore(RestoreArgs),
    /// Verify every document as recovery would, without serving or writing; exits 1 naming
    /// each damaged document.
    Check(StorageArgs),
    /// Manage local accounts and their roles.
    #[command(subcommand)]
    User(UserCommand),
    /// Manage API tokens for programs.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Manage the encryption keys that seal stored credentials.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Schema snapshots of the MySQL source: inventories, refreshes, reviews, verifications, the
    /// registry and operations.
    #[command(subcommand)]
    Schema(SchemaCommand),
    /// Write every document of a repository into a folder: SLUG.md files (children in a folder
    /// named after their parent), their images, and a manifest `import` reads back.
    Export(ExportArgs),
    /// Create or update a repository's documents from a folder `export` wrote, or from a plain
    /// folder of Markdown files. Takes the writer lease: refused while a server serves.
    Import(ImportArgs),
}

/// `fermata backup DEST`.
#[derive(Debug, Args)]
struct BackupArgs {
    #[command(flatten)]
    storage: StorageArgs,
    /// The backup's folder; it must not exist.
    dest: PathBuf,
    #[command(flatten)]
    passphrase: PassphraseArgs,
    /// The pg_dump to run [default: the first on PATH of the server's major version or later,
    /// else the newest under /usr/lib/postgresql].
    #[arg(long, env = "FERMATA_PG_DUMP", value_name = "PATH")]
    pg_dump: Option<PathBuf>,
}

/// `fermata restore SRC`.
#[derive(Debug, Args)]
struct RestoreArgs {
    #[command(flatten)]
    storage: StorageArgs,
    /// The backup's folder.
    src: PathBuf,
    #[command(flatten)]
    passphrase: PassphraseArgs,
    /// Restore over a database that holds data, replacing it: name it (the PostgreSQL
    /// database's name, or the data folder).
    #[arg(long, value_name = "DATABASE")]
    force: Option<String>,
    /// The pg_restore to run [default: found as for pg_dump].
    #[arg(long, env = "FERMATA_PG_RESTORE", value_name = "PATH")]
    pg_restore: Option<PathBuf>,
}

/// Where the passphrase sealing a backup's key file comes from.
#[derive(Debug, Args)]
struct PassphraseArgs {
    /// Seal (backup) or open (restore) the key file with the passphrase in this file's first
    /// line.
    #[arg(long, value_name = "FILE", conflicts_with = "passphrase_stdin")]
    passphrase_file: Option<PathBuf>,
    /// The same, with the passphrase read from standard input's first line.
    #[arg(long)]
    passphrase_stdin: bool,
}

impl PassphraseArgs {
    fn read(&self) -> Result<Option<zeroize::Zeroizing<String>>, Failure> {
        let text = match (&self.passphrase_file, self.passphrase_stdin) {
            (Some(path), _) => std::fs::read_to_string(path).map_err(|error| {
                Failure::config(format!(
                    "cannot read the passphrase file {}: {error}",
                    path.display()
                ))
            })?,
            (None, true) => {
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).map_err(|error| {
                    Failure::config(format!("cannot read the passphrase: {error}"))
                })?;
                line
            }
            (None, false) => return Ok(None),
        };
        let text = zeroize::Zeroizing::new(text);
        let line = text.lines().next().unwrap_or("");
        if line.is_empty() {
            return Err(Failure::config("the passphrase is empty"));
        }
        Ok(Some(zeroize::Zeroizing::new(line.to_owned())))
    }
}

/// `fermata export OWNER/NAME DIR`.
#[derive(Debug, Args)]
struct ExportArgs {
    #[command(flatten)]
    storage: StorageArgs,
    /// The repository, OWNER/NAME.
    repository: String,
    /// The folder to write; it must not exist or be empty.
    dir: PathBuf,
}

/// `fermata import DIR OWNER/NAME`.
#[derive(Debug, Args)]
struct ImportArgs {
    #[command(flatten)]
    storage: StorageArgs,
    /// The folder to read.
    dir: PathBuf,
    /// The repository, OWNER/NAME; created for the user OWNER when it does not exist.
    repository: String,
}

#[derive(Debug, Subcommand)]
enum SchemaCommand {
    /// Discover the databases the snapshot account can see and follow the inventory to its end.
    /// A running server executes it; without one, this command does.
    Inventory {
        #[command(flatten)]
        storage: StorageArgs,
        #[command(flatten)]
        requester: RequesterArgs,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Snapshot databases of an inventory and follow the refresh until it awaits review or ends,
    /// with a progress bar per database. A running server executes it; without one, this
    /// command does.
    Refresh {
        #[command(flatten)]
        storage: StorageArgs,
        #[command(flatten)]
        selection: SelectionArgs,
        /// Also propose removing from the package, in the same reviewed pull request, the
        /// registered databases the inventory no longer lists (`missing`).
        #[arg(long)]
        remove_missing: bool,
    },
    /// Compare databases of an inventory with their merged snapshots in the package and follow
    /// the verification to its end, with a progress bar per database: `unchanged` and `fresh`,
    /// or `changed` and `stale` with the files that differ, or `failed`. A running server
    /// executes it; without one, this command does.
    Verify {
        #[command(flatten)]
        storage: StorageArgs,
        #[command(flatten)]
        selection: SelectionArgs,
        /// Exit 1 when any selected database drifted from its merged snapshot (for CI jobs),
        /// after printing the report.
        #[arg(long)]
        exit_code: bool,
    },
    /// Show the drift a verification found: the unified diff of every file in which a
    /// database's live schema differs from its merged snapshot (kept for `drift_retention`), and
    /// a line per migration script; with --ddl, the scripts themselves.
    Drift {
        #[command(flatten)]
        storage: StorageArgs,
        /// The verification's operation ID.
        id: String,
        /// The system administrator who reads it.
        #[arg(long = "as", value_name = "NAME")]
        actor: String,
        /// Print JSON for scripts.
        #[arg(long, conflicts_with = "ddl")]
        json: bool,
        #[command(flatten)]
        scripts: ScriptArgs,
    },
    /// Publish again an approved refresh whose publication failed, under the same branch,
    /// commit and pull request, and follow it until it ends or fails again. The `--as` user's
    /// password is read from the first line of standard input.
    Publish {
        #[command(flatten)]
        storage: StorageArgs,
        /// The refresh's operation ID.
        id: String,
        /// The system administrator who publishes it.
        #[arg(long = "as", value_name = "NAME")]
        actor: String,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Connect as the snapshot account and report, per kind of object, whether it can read every
    /// object the snapshots need, naming each missing privilege; exit 1 when one is missing.
    CheckSource {
        #[command(flatten)]
        storage: StorageArgs,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Show the package registry at the base branch's head: every registered database with its
    /// merged snapshot, its last verification and its freshness.
    Registry {
        #[command(flatten)]
        storage: StorageArgs,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Show a refresh's review: each changed database, whether it is registered, a line per
    /// migration script, its lint findings, and the unified diff of every file that differs from
    /// its merged snapshot; with --ddl, the scripts themselves.
    Review {
        #[command(flatten)]
        storage: StorageArgs,
        /// The refresh's operation ID.
        id: String,
        /// The system administrator who reads it.
        #[arg(long = "as", value_name = "NAME")]
        actor: String,
        /// Print JSON for scripts (with each database's scripts and lint findings).
        #[arg(long, conflicts_with = "ddl")]
        json: bool,
        /// Exit 1, after printing, when any database's lint findings hold one at this severity
        /// or above (for CI jobs).
        #[arg(long, value_name = "warning|error", value_parser = fail_on)]
        fail_on: Option<Severity>,
        #[command(flatten)]
        scripts: ScriptArgs,
    },
    /// Approve a refresh's review and follow the refresh until it ends. The `--as` user's
    /// password is read from the first line of standard input.
    Approve {
        #[command(flatten)]
        storage: StorageArgs,
        /// The refresh's operation ID.
        id: String,
        /// The system administrator who decides.
        #[arg(long = "as", value_name = "NAME")]
        actor: String,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Reject a refresh's review and follow the refresh until it ends. The `--as` user's
    /// password is read from the first line of standard input.
    Reject {
        #[command(flatten)]
        storage: StorageArgs,
        /// The refresh's operation ID.
        id: String,
        /// The system administrator who decides.
        #[arg(long = "as", value_name = "NAME")]
        actor: String,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// List the latest schema operations, newest first.
    Operations {
        #[command(flatten)]
        storage: StorageArgs,
        /// How many to list.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=500))]
        limit: u32,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Show one operation's report.
    Show {
        #[command(flatten)]
        storage: StorageArgs,
        /// The operation's ID.
        id: String,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Close, without merging, the pull request an operation published (which lifts the block
    /// on new refreshes). The `--as` user's password is read from the first line of standard
    /// input.
    ClosePullRequest {
        #[command(flatten)]
        storage: StorageArgs,
        /// The exact ID of the operation whose pull request is closed.
        id: String,
        /// The system administrator who closes it.
        #[arg(long = "as", value_name = "NAME")]
        actor: String,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Clear the expired lease of an operation whose workflow run is over, marking it failed.
    /// The `--as` user's password is read from the first line of standard input.
    ClearLease {
        #[command(flatten)]
        storage: StorageArgs,
        /// The exact ID of the operation whose lease is cleared, as confirmation.
        id: String,
        /// The system administrator who clears it.
        #[arg(long = "as", value_name = "NAME")]
        actor: String,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
}

/// `--ddl` and what it prints: the migration scripts of a drift or a review.
#[derive(Debug, Args)]
struct ScriptArgs {
    /// Print the migration script of each database instead, one after another as one file for
    /// the `mysql` or `mariadb` client (each script's own `USE` selects its database).
    #[arg(long)]
    ddl: bool,
    /// `undo` (the live schema, or the refresh's candidate, back to the merged snapshot) or
    /// `adopt` (the merged snapshot to the live schema: the migration that made the change)
    /// [default: undo].
    #[arg(long, value_name = "undo|adopt", value_parser = direction, requires = "ddl")]
    direction: Option<Direction>,
    /// Include the statements that lose data (left out otherwise).
    #[arg(long, requires = "ddl")]
    allow_destructive: bool,
    /// Only this database's script, exactly as the verification or the review names it.
    #[arg(long, value_name = "NAME", requires = "ddl")]
    database: Option<String>,
}

impl ScriptArgs {
    /// What `--ddl` asks for; `None` without it.
    fn request(&self) -> Option<schema_commands::ScriptRequest<'_>> {
        self.ddl.then(|| schema_commands::ScriptRequest {
            direction: self.direction.unwrap_or(Direction::Undo),
            allow_destructive: self.allow_destructive,
            database: self.database.as_deref(),
        })
    }
}

/// `--direction`: `undo` or `adopt`.
fn direction(text: &str) -> Result<Direction, String> {
    Direction::parse(text).ok_or_else(|| "the direction is `undo` or `adopt`".to_owned())
}

/// `--fail-on`: `warning` or `error`.
fn fail_on(text: &str) -> Result<Severity, String> {
    match Severity::parse(text) {
        Some(severity @ (Severity::Warning | Severity::Error)) => Ok(severity),
        _ => Err("the severity is `warning` or `error`".to_owned()),
    }
}

/// The databases a refresh or a verification selects from an inventory, and who asks.
#[derive(Debug, Args)]
struct SelectionArgs {
    /// The inventory the databases are selected from.
    #[arg(long, value_name = "ID")]
    inventory: String,
    /// The databases, exactly as the inventory names them.
    #[arg(value_name = "DB", conflicts_with = "all")]
    databases: Vec<String>,
    /// Every database of the inventory, in its order.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    requester: RequesterArgs,
    /// Print the final report as JSON for scripts, without progress bars.
    #[arg(long)]
    json: bool,
}

/// Who starts an operation, and the key that makes repeating the command return it.
#[derive(Debug, Args)]
struct RequesterArgs {
    /// The system administrator the operation is recorded for.
    #[arg(long = "as", value_name = "NAME")]
    actor: String,
    /// A key that makes repeating the command return the same operation.
    #[arg(long, value_name = "KEY")]
    request_key: Option<String>,
}

impl SelectionArgs {
    fn request(&self, remove_missing: bool) -> schema_commands::SelectionRequest<'_> {
        schema_commands::SelectionRequest {
            inventory: &self.inventory,
            selection: if self.all {
                schema_commands::Selection::All
            } else {
                schema_commands::Selection::Named(&self.databases)
            },
            actor: &self.requester.actor,
            request_key: self.requester.request_key.as_deref(),
            remove_missing,
        }
    }
}

impl SchemaCommand {
    /// Whether the command follows an operation and, when no server serves, executes its
    /// workflow runs (which connect to the MySQL servers); the others only read.
    fn executes_runs(&self) -> bool {
        match self {
            SchemaCommand::Inventory { .. }
            | SchemaCommand::Refresh { .. }
            | SchemaCommand::Verify { .. }
            | SchemaCommand::Approve { .. }
            | SchemaCommand::Reject { .. }
            | SchemaCommand::Publish { .. }
            | SchemaCommand::CheckSource { .. } => true,
            SchemaCommand::Registry { .. }
            | SchemaCommand::Review { .. }
            | SchemaCommand::Drift { .. }
            | SchemaCommand::Operations { .. }
            | SchemaCommand::Show { .. }
            | SchemaCommand::ClosePullRequest { .. }
            | SchemaCommand::ClearLease { .. } => false,
        }
    }

    fn format(&self) -> schema_commands::Format {
        let json = match self {
            SchemaCommand::Refresh { selection, .. } | SchemaCommand::Verify { selection, .. } => {
                selection.json
            }
            SchemaCommand::Inventory { json, .. }
            | SchemaCommand::CheckSource { json, .. }
            | SchemaCommand::Registry { json, .. }
            | SchemaCommand::Review { json, .. }
            | SchemaCommand::Drift { json, .. }
            | SchemaCommand::Publish { json, .. }
            | SchemaCommand::Approve { json, .. }
            | SchemaCommand::Reject { json, .. }
            | SchemaCommand::Operations { json, .. }
            | SchemaCommand::Show { json, .. }
            | SchemaCommand::ClosePullRequest { json, .. }
            | SchemaCommand::ClearLease { json, .. } => *json,
        };
        if json {
            schema_commands::Format::Json
        } else {
            schema_commands::Format::Text
        }
    }
}

#[derive(Debug, Subcommand)]
enum UserCommand {
    /// Create a user. Without --password-stdin a password is generated and shown once.
    Add {
        #[command(flatten)]
        storage: StorageArgs,
        /// The login name (a-z, 0-9, '.', '_', '-').
        name: String,
        /// A role to grant (`system_admin`); repeatable.
        #[arg(long = "role", value_name = "ROLE")]
        roles: Vec<String>,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
    },
    /// Set a user's password. Without --password-stdin a new one is generated and shown once.
    Passwd {
        #[command(flatten)]
        storage: StorageArgs,
        name: String,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
    },
    /// Grant or withdraw roles.
    Role {
        #[command(flatten)]
        storage: StorageArgs,
        name: String,
        /// A role to grant; repeatable.
        #[arg(long, value_name = "ROLE")]
        add: Vec<String>,
        /// A role to withdraw; repeatable.
        #[arg(long, value_name = "ROLE")]
        remove: Vec<String>,
    },
    /// List users and their roles.
    List {
        #[command(flatten)]
        storage: StorageArgs,
    },
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Create an API token for a user and print it once on standard output.
    Create {
        #[command(flatten)]
        storage: StorageArgs,
        /// The user the token acts as.
        #[arg(long, value_name = "NAME")]
        user: String,
        /// What the token is for.
        #[arg(long, default_value = "command line")]
        label: String,
        /// `tokens`: the token may also create API tokens and pair machines.
        #[arg(long, value_name = "SCOPE", value_parser = ["tokens"])]
        scope: Option<String>,
    },
    /// List a user's API tokens (never their secrets).
    List {
        #[command(flatten)]
        storage: StorageArgs,
        #[arg(long, value_name = "NAME")]
        user: String,
    },
    /// Revoke an API token by its ID; it stops working at once.
    Revoke {
        #[command(flatten)]
        storage: StorageArgs,
        id: String,
    },
}

#[derive(Debug, Subcommand)]
enum KeysCommand {
    /// Add a key version to the key file and re-encrypt stored credentials under it. A running
    /// server picks the new version up from the file by itself.
    Rotate {
        #[command(flatten)]
        storage: StorageArgs,
    },
    /// Re-encrypt stored credentials under the current key version (after adding a version to
    /// FERMATA_KEYS and restarting).
    Reencrypt {
        #[command(flatten)]
        storage: StorageArgs,
    },
}

impl Command {
    fn storage_args(&self) -> &StorageArgs {
        match self {
            Command::Serve(args) => &args.storage,
            Command::Migrate(storage)
            | Command::Status(storage)
            | Command::Check(storage)
            | Command::Backup(BackupArgs { storage, .. })
            | Command::Restore(RestoreArgs { storage, .. })
            | Command::Export(ExportArgs { storage, .. })
            | Command::Import(ImportArgs { storage, .. })
            | Command::User(
                UserCommand::Add { storage, .. }
                | UserCommand::Passwd { storage, .. }
                | UserCommand::Role { storage, .. }
                | UserCommand::List { storage },
            )
            | Command::Token(
                TokenCommand::Create { storage, .. }
                | TokenCommand::List { storage, .. }
                | TokenCommand::Revoke { storage, .. },
            )
            | Command::Keys(KeysCommand::Rotate { storage } | KeysCommand::Reencrypt { storage })
            | Command::Schema(
                SchemaCommand::Inventory { storage, .. }
                | SchemaCommand::CheckSource { storage, .. }
                | SchemaCommand::Refresh { storage, .. }
                | SchemaCommand::Verify { storage, .. }
                | SchemaCommand::Registry { storage, .. }
                | SchemaCommand::Review { storage, .. }
                | SchemaCommand::Drift { storage, .. }
                | SchemaCommand::Publish { storage, .. }
                | SchemaCommand::Approve { storage, .. }
                | SchemaCommand::Reject { storage, .. }
                | SchemaCommand::Operations { storage, .. }
                | SchemaCommand::Show { storage, .. }
                | SchemaCommand::ClosePullRequest { storage, .. }
                | SchemaCommand::ClearLease { storage, .. },
            ) => storage,
        }
    }
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
    /// The encryption key file [default: keys.toml in the data folder, created on first start].
    /// FERMATA_KEYS=VERSION:BASE64[,...] gives the keys directly instead.
    #[arg(long, env = "FERMATA_KEYS_FILE", value_name = "FILE")]
    keys_file: Option<PathBuf>,
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
    /// Mark cookies Secure: set when users reach the server over HTTPS (directly or through a
    /// proxy that terminates TLS).
    #[arg(long, env = "FERMATA_SECURE_COOKIES")]
    secure_cookies: bool,
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
    // Flags belong to the innermost subcommand (`fermata user add --data-dir ...`).
    let mut sub = &matches;
    while let Some((_, deeper)) = sub.subcommand() {
        sub = deeper;
    }
    match run(&cli.command, sub, cli.verbose) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            if let Some(cause) = std::error::Error::source(&failure) {
                tracing::debug!(error = %ErrorChain(cause), "the command failed");
            }
            eprintln!("fermata: {failure}");
            failure.exit_code()
        }
    }
}

fn run(command: &Command, matches: &ArgMatches, verbose: u8) -> Result<(), Failure> {
    let storage_args = command.storage_args();
    let serve_args = match command {
        Command::Serve(args) => Some(args),
        _ => None,
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
    let invalid = |e: crate::config::ConfigError| Failure::config(e.to_string());

    let runtime = tokio::runtime::Runtime::new()
        .map_err(|error| Failure::runtime(format!("cannot start the async runtime: {error}")))?;
    if let Command::Serve(_) = command {
        let settings = sources.serve().map_err(invalid)?;
        logging::init(log_format, Role::Server, verbose);
        let served = runtime.block_on(async {
            let shutdown = shutdown_on_signals();
            serve::serve(settings, shutdown).await
        });
        // The stop abandoned what missed its deadline. Work on the blocking pool cannot be
        // abandoned (a workflow step's git or file work), and waiting for it would hold the exit
        // as long as it lasts: it ends with the process, as after a crash, and its run resumes
        // from its journal.
        runtime.shutdown_background();
        return served;
    }
    let storage = sources.storage().map_err(invalid)?;
    logging::init(log_format, Role::Command, verbose);
    let report = runtime.block_on(async {
        match command {
            Command::Serve(_) => unreachable!("served above"),
            Command::Migrate(_) => status::migrate(&storage).await,
            Command::Check(_) => backup::check::check(&storage).await,
            Command::Backup(args) => {
                let keys = sources.keys(&storage).map_err(invalid)?;
                let schema = sources.schema(Servers::Leave).map_err(invalid)?;
                let request = backup::BackupRequest {
                    dest: &args.dest,
                    passphrase: args.passphrase.read()?,
                    pg_dump: args.pg_dump.as_deref(),
                    artifacts_in_bucket: schema.artifacts.is_some(),
                };
                backup::backup(&storage, &keys, request).await
            }
            Command::Restore(args) => {
                let keys = sources.keys(&storage).map_err(invalid)?;
                let schema = sources.schema(Servers::Leave).map_err(invalid)?;
                let request = backup::restore::RestoreRequest {
                    src: &args.src,
                    passphrase: args.passphrase.read()?,
                    force: args.force.as_deref(),
                    pg_restore: args.pg_restore.as_deref(),
                    artifacts_in_bucket: schema.artifacts.is_some(),
                };
                backup::restore::restore(&storage, &keys, request).await
            }
            Command::Export(args) => {
                let settings = sources.repository_files().map_err(invalid)?;
                repository_files::export(&settings, &args.repository, &args.dir).await
            }
            Command::Import(args) => {
                let settings = sources.repository_files().map_err(invalid)?;
                repository_files::import(&settings, &args.dir, &args.repository).await
            }
            Command::Status(_) => status::status(&storage).await,
            Command::User(UserCommand::Add {
                name,
                roles,
                password_stdin,
                ..
            }) => account_commands::user_add(&storage, name, roles, *password_stdin).await,
            Command::User(UserCommand::Passwd {
                name,
                password_stdin,
                ..
            }) => account_commands::user_passwd(&storage, name, *password_stdin).await,
            Command::User(UserCommand::Role {
                name, add, remove, ..
            }) => account_commands::user_role(&storage, name, add, remove).await,
            Command::User(UserCommand::List { .. }) => account_commands::user_list(&storage).await,
            Command::Token(TokenCommand::Create {
                user, label, scope, ..
            }) => account_commands::token_create(&storage, user, label, scope.is_some()).await,
            Command::Token(TokenCommand::List { user, .. }) => {
                account_commands::token_list(&storage, user).await
            }
            Command::Token(TokenCommand::Revoke { id, .. }) => {
                account_commands::token_revoke(&storage, id).await
            }
            Command::Keys(KeysCommand::Rotate { .. }) => {
                let source = sources.keys(&storage).map_err(invalid)?;
                account_commands::keys_rotate(&storage, &source).await
            }
            Command::Keys(KeysCommand::Reencrypt { .. }) => {
                let source = sources.keys(&storage).map_err(invalid)?;
                account_commands::keys_reencrypt(&storage, &source).await
            }
            Command::Schema(schema @ SchemaCommand::CheckSource { .. }) => {
                // Needs the source alone: no application database, no keys.
                let settings = sources.schema(Servers::Connect).map_err(invalid)?;
                schema_commands::check_source(&settings, schema.format()).await
            }
            Command::Schema(schema) => {
                let format = schema.format();
                let servers = if schema.executes_runs() {
                    Servers::Connect
                } else {
                    Servers::Leave
                };
                let setup = schema_commands::Setup {
                    schema: sources.schema(servers).map_err(invalid)?,
                    keys: sources.keys(&storage).map_err(invalid)?,
                    storage: storage.clone(),
                };
                match schema {
                    SchemaCommand::CheckSource { .. } => unreachable!("checked above"),
                    SchemaCommand::Inventory { requester, .. } => {
                        schema_commands::inventory(
                            &setup,
                            &requester.actor,
                            requester.request_key.as_deref(),
                            format,
                        )
                        .await
                    }
                    SchemaCommand::Refresh {
                        selection,
                        remove_missing,
                        ..
                    } => {
                        let request = selection.request(*remove_missing);
                        schema_commands::refresh(&setup, &request, format).await
                    }
                    SchemaCommand::Verify {
                        selection,
                        exit_code,
                        ..
                    } => {
                        schema_commands::verify(
                            &setup,
                            &selection.request(false),
                            *exit_code,
                            format,
                        )
                        .await
                    }
                    SchemaCommand::Drift {
                        id, actor, scripts, ..
                    } => schema_commands::drift(&setup, id, actor, format, scripts.request()).await,
                    SchemaCommand::Publish { id, actor, .. } => {
                        schema_commands::publish(&setup, id, actor, format).await
                    }
                    SchemaCommand::Registry { .. } => {
                        schema_commands::registry(&setup, format).await
                    }
                    SchemaCommand::Review {
                        id,
                        actor,
                        fail_on,
                        scripts,
                        ..
                    } => {
                        let shown = schema_commands::ReviewRequest {
                            fail_on: *fail_on,
                            scripts: scripts.request(),
                        };
                        schema_commands::review(&setup, id, actor, format, &shown).await
                    }
                    SchemaCommand::Approve { id, actor, .. } => {
                        schema_commands::decide(&setup, id, actor, Verdict::Approve, format).await
                    }
                    SchemaCommand::Reject { id, actor, .. } => {
                        schema_commands::decide(&setup, id, actor, Verdict::Reject, format).await
                    }
                    SchemaCommand::Operations { limit, .. } => {
                        schema_commands::operations(&setup, *limit, format).await
                    }
                    SchemaCommand::Show { id, .. } => {
                        schema_commands::show(&setup, id, format).await
                    }
                    SchemaCommand::ClearLease { id, actor, .. } => {
                        schema_commands::clear_lease(&setup, id, actor, format).await
                    }
                    SchemaCommand::ClosePullRequest { id, actor, .. } => {
                        schema_commands::close_pull_request(&setup, id, actor, format).await
                    }
                }
            }
        }
    })?;
    print!("{report}");
    Ok(())
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
        keys_file: storage
            .keys_file
            .clone()
            .map(|v| given(matches, "keys_file", "--keys-file", "FERMATA_KEYS_FILE", v)),
        secure_cookies: serve.filter(|args| args.secure_cookies).map(|_| {
            given(
                matches,
                "secure_cookies",
                "--secure-cookies",
                "FERMATA_SECURE_COOKIES",
                true,
            )
        }),
        keys_in_environment: std::env::var_os(crate::config::KEYS_VAR).is_some(),
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

    /// What clap refuses `fermata schema WORDS...` with, if it does.
    fn refused(words: &[&str]) -> Option<clap::error::ErrorKind> {
        let mut all = vec!["fermata", "schema"];
        all.extend(words);
        Cli::try_parse_from(all).err().map(|error| error.kind())
    }

    #[test]
    fn the_script_flags_need_ddl_and_take_only_known_values() {
        use clap::error::ErrorKind;
        for words in [
            &["drift", "ID", "--as", "ada", "--direction", "adopt"][..],
            &["drift", "ID", "--as", "ada", "--allow-destructive"],
            &["drift", "ID", "--as", "ada", "--database", "app"],
            &["review", "ID", "--as", "ada", "--direction", "undo"],
        ] {
            assert_eq!(
                refused(words),
                Some(ErrorKind::MissingRequiredArgument),
                "{words:?}"
            );
        }
        assert_eq!(
            refused(&[
                "drift",
                "ID",
                "--as",
                "ada",
                "--ddl",
                "--direction",
                "sideways"
            ]),
            Some(ErrorKind::ValueValidation)
        );
        assert_eq!(
            refused(&["review", "ID", "--as", "ada", "--fail-on", "off"]),
            Some(ErrorKind::ValueValidation)
        );
        assert_eq!(
            refused(&["drift", "ID", "--as", "ada", "--ddl", "--json"]),
            Some(ErrorKind::ArgumentConflict)
        );
        for words in [
            &["drift", "ID", "--as", "ada", "--ddl"][..],
            &[
                "drift",
                "ID",
                "--as",
                "ada",
                "--ddl",
                "--direction",
                "adopt",
                "--allow-destructive",
                "--database",
                "app",
            ],
            &[
                "review",
                "ID",
                "--as",
                "ada",
                "--json",
                "--fail-on",
                "warning",
            ],
            &["review", "ID", "--as", "ada", "--ddl", "--fail-on", "error"],
        ] {
            assert_eq!(refused(words), None, "{words:?}");
        }
    }
}
