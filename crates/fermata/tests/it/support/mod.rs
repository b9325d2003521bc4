//! Running the real `fermata` binary against a real database, and watching what it does; and
//! whether what a browser shows of its pages fits a phone's screen.

#![allow(dead_code, unreachable_pub)] // each test file uses its own part of this module

pub mod browser;
pub mod fsync_shim;
pub mod postgres_cluster;
pub mod proxy;
pub mod tmpfs;

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fermata_store::StoreOptions;
use fermata_store_sql::testing::ScratchDatabase;
use fermata_store_sql::{Database, SqlStorage};
use sqlx::{Connection, Row};
use tempfile::TempDir;
use tokio::time::Instant;

/// The longest a test waits for the binary to do something.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Writer lease timings short enough for tests, and consistent with the rules.
const FAST_LEASE: &str = "[writer_lease]\n\
    ttl = \"3s\"\nrenew_every = \"1s\"\nattempt_timeout = \"400ms\"\n\
    abandon_after = \"500ms\"\nsafety_deadline = \"2s\"\ndrain_timeout = \"500ms\"\n";

/// The environment variables that configure fermata, cleared so the caller's do not leak in.
const SETTINGS_VARS: &[&str] = &[
    "FERMATA_CONFIG",
    "FERMATA_DATA_DIR",
    "FERMATA_STORAGE",
    "FERMATA_DATABASE_URL",
    "FERMATA_LISTEN",
    "FERMATA_HANDOVER",
    "FERMATA_LOG_FORMAT",
    "FERMATA_LOG",
    "RUST_LOG",
    "HANDOVER",
];

/// A database for the binary to serve, with a config file of fast lease timings.
pub struct Target {
    folder: TempDir,
    database: Database,
    _scratch: Option<ScratchDatabase>,
}

impl Target {
    pub fn sqlite() -> Self {
        let folder = tempfile::tempdir().unwrap();
        let database = Database::Sqlite {
            path: folder.path().join("data").join("fermata.db"),
        };
        Target::with(folder, database, None)
    }

    pub async fn postgres() -> Self {
        let scratch = ScratchDatabase::postgres().await;
        let database = scratch.database.clone();
        Target::with(tempfile::tempdir().unwrap(), database, Some(scratch))
    }

    /// A PostgreSQL database the test runs itself (its own cluster, or a proxy in front of
    /// one), at `url`, rather than a scratch database on the shared server.
    pub fn postgres_at(url: String) -> Self {
        Target::with(
            tempfile::tempdir().unwrap(),
            Database::Postgres { url },
            None,
        )
    }

    fn with(folder: TempDir, database: Database, scratch: Option<ScratchDatabase>) -> Self {
        std::fs::write(folder.path().join("fermata.toml"), FAST_LEASE).unwrap();
        Target {
            folder,
            database,
            _scratch: scratch,
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.folder.path().join("data")
    }

    pub fn config(&self) -> PathBuf {
        self.folder.path().join("fermata.toml")
    }

    /// Replaces the whole configuration file with `text` (a `[writer_lease]` table of other
    /// timings, or nothing for the defaults).
    pub fn replace_config(&self, text: &str) {
        std::fs::write(self.config(), text).unwrap();
    }

    pub fn database(&self) -> &Database {
        &self.database
    }

    /// A `fermata` command aimed at this database.
    pub fn command(&self, subcommand: &str) -> Command {
        self.command_words(&[subcommand])
    }

    /// `fermata WORDS...` aimed at this database (the settings follow the words, so nested
    /// subcommands such as `user add NAME` take them).
    pub fn command_words(&self, words: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_fermata"));
        command.args(words);
        for var in SETTINGS_VARS {
            command.env_remove(var);
        }
        command.arg("--config").arg(self.config());
        // The data folder holds the SQLite file and, for both engines, the key file.
        command.arg("--data-dir").arg(self.data_dir());
        if let Database::Postgres { url } = &self.database {
            command.args(["--storage", "postgres"]);
            command.env("FERMATA_DATABASE_URL", url);
        }
        command
    }

    /// `fermata serve` on a free loopback port, with `extra` arguments.
    pub fn serve(&self, extra: &[&str]) -> Fermata {
        let mut command = self.command("serve");
        command.args(["--listen", "127.0.0.1:0"]).args(extra);
        Fermata::spawn(command)
    }

    /// `fermata serve` as [`Target::serve`] does, with `env` set.
    pub fn serve_with_env(&self, extra: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Fermata {
        let mut command = self.command("serve");
        command.args(["--listen", "127.0.0.1:0"]).args(extra);
        for (name, value) in env {
            command.env(name, value);
        }
        Fermata::spawn(command)
    }

    /// `fermata serve` listening on `listen` (the address a process before it served on, where
    /// the clients reconnect), with `extra` arguments and `env` set.
    pub fn serve_at(
        &self,
        listen: SocketAddr,
        extra: &[&str],
        env: &[(String, OsString)],
    ) -> Fermata {
        let mut command = self.command("serve");
        command
            .args(["--listen", &listen.to_string()])
            .args(extra)
            .envs(env.iter().map(|(name, value)| (name, value)));
        Fermata::spawn(command)
    }

    /// How many rows `table` holds, read with a plain query.
    pub async fn count_rows(&self, table: &str) -> i64 {
        let sql = format!("SELECT COUNT(*) FROM {table}");
        match &self.database {
            Database::Postgres { url } => {
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::query_scalar(&sql).fetch_one(&mut conn).await.unwrap()
            }
            Database::Sqlite { path } => {
                let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
                let mut conn = sqlx::SqliteConnection::connect_with(&options)
                    .await
                    .unwrap();
                sqlx::query_scalar(&sql).fetch_one(&mut conn).await.unwrap()
            }
        }
    }

    /// Runs `sql` on the target's database with a plain connection, `param` bound to `$1`: to
    /// damage or prepare rows behind the server's back.
    pub async fn execute<P>(&self, sql: &str, param: P)
    where
        P: for<'q> sqlx::Encode<'q, sqlx::Postgres>
            + sqlx::Type<sqlx::Postgres>
            + for<'q> sqlx::Encode<'q, sqlx::Sqlite>
            + sqlx::Type<sqlx::Sqlite>
            + Send
            + 'static,
    {
        match &self.database {
            Database::Postgres { url } => {
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::query(sql)
                    .bind(param)
                    .execute(&mut conn)
                    .await
                    .unwrap();
            }
            Database::Sqlite { path } => {
                let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
                let mut conn = sqlx::SqliteConnection::connect_with(&options)
                    .await
                    .unwrap();
                sqlx::query(sql)
                    .bind(param)
                    .execute(&mut conn)
                    .await
                    .unwrap();
            }
        }
    }

    /// Runs a short command to the end.
    pub fn run(&self, subcommand: &str) -> (ExitStatus, String) {
        let output = self.command(subcommand).output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status, text)
    }

    /// Runs `words` (a subcommand and its arguments) with `input` on its standard input;
    /// returns its exit status, its standard output and its standard error.
    pub fn run_with_input(&self, words: &[&str], input: &str) -> (ExitStatus, String, String) {
        let mut child = self
            .command_words(words)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        (
            output.status,
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// The same database, opened by the test to look at or to write under an old token.
    pub async fn store(&self) -> SqlStorage {
        SqlStorage::connect(&self.database, StoreOptions::default())
            .await
            .unwrap()
    }
}

/// A running `fermata` process whose output is collected as it comes.
pub struct Fermata {
    child: Child,
    output: Arc<Mutex<String>>,
}

impl Fermata {
    pub fn spawn(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let output = Arc::new(Mutex::new(String::new()));
        collect(child.stdout.take().unwrap(), Arc::clone(&output));
        collect(child.stderr.take().unwrap(), Arc::clone(&output));
        Fermata { child, output }
    }

    pub fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    pub async fn wait_for_output(&self, needle: &str) {
        let deadline = Instant::now() + PATIENCE;
        while !self.output().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "gave up waiting for {needle:?} in:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// The address from the `listening` log line.
    pub async fn address(&self) -> SocketAddr {
        self.wait_for_output(" listening ").await;
        let output = self.output();
        let start = output.find("listen=").expect("a listen field") + "listen=".len();
        let end = output[start..]
            .find(char::is_whitespace)
            .map_or(output.len(), |i| start + i);
        output[start..end].parse().unwrap()
    }

    /// `GET /readyz`: status code and body, or `None` when nothing answers.
    pub async fn readyz(&self) -> Option<(u16, String)> {
        get(self.address().await, "/readyz")
    }

    pub async fn wait_ready(&self) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some((200, _)) = self.readyz().await {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "never became ready:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub async fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the readers drain what the process wrote last.
                tokio::time::sleep(Duration::from_millis(50)).await;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "did not exit:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// A graceful stop, as a service manager asks for one.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Sends `signal` (`STOP`, `CONT`, ...) to the process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// `kill -9`: no chance to release anything.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Fermata {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn collect(stream: impl Read + Send + 'static, into: Arc<Mutex<String>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            let mut output = into.lock().unwrap();
            output.push_str(&line);
            output.push('\n');
        }
    });
}

/// An HTTP answer: status, raw header lines and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: String,
    pub body: String,
}

impl Answer {
    /// The value of the cookie `name` that the answer set.
    pub fn cookie(&self, name: &str) -> Option<String> {
        self.headers.lines().find_map(|line| {
            let value = line
                .strip_prefix("set-cookie: ")
                .or_else(|| line.strip_prefix("Set-Cookie: "))?;
            let value = value.strip_prefix(name)?.strip_prefix('=')?;
            Some(value.split(';').next().unwrap_or_default().to_owned())
        })
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("not JSON: {}", self.body))
    }
}

/// `GET path` with a bearer token, answered 200; the body's bytes (an archive, a Yjs state),
/// which [`Answer`] would not keep as they are.
pub fn get_bytes(address: SocketAddr, path: &str, token: &str) -> Vec<u8> {
    let mut stream = TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let split = answer
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .expect("an HTTP answer");
    let head = String::from_utf8_lossy(&answer[..split]).into_owned();
    assert_eq!(head.get(9..12), Some("200"), "{head}");
    answer[split + 4..].to_vec()
}

/// A bare HTTP/1.0 request with a JSON body, so the tests need no HTTP client.
pub fn request(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    json: Option<&serde_json::Value>,
) -> Answer {
    try_request(address, method, path, headers, json).unwrap()
}

/// [`request`], returning the failure to connect, or to read an answer within 30 seconds, or a
/// connection closed without one, instead of failing the test: for a server that may be gone
/// or stuck.
pub fn try_request(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    json: Option<&serde_json::Value>,
) -> std::io::Result<Answer> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let body = json.map(ToString::to_string).unwrap_or_default();
    let mut head = format!(
        "{method} {path} HTTP/1.0\r\nHost: {address}\r\nContent-Length: {}\r\n",
        body.len()
    );
    if json.is_some() {
        head.push_str("Content-Type: application/json\r\n");
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    if response.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the connection closed without an answer",
        ));
    }
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    Ok(Answer {
        status: head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        headers: head.replace("\r\n", "\n"),
        body: body.to_owned(),
    })
}

/// A bare HTTP/1.0 GET, so the tests need no HTTP client.
pub fn get(address: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
    Some((status, body))
}

/// The folder of the locked npm clients.
fn interop_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop")
}

/// Runs one of the npm interop scripts and returns its exit status and the JSON line it printed.
/// Fails loudly when Node.js or the clients are missing: run the tests with `scripts/test`.
pub fn node(script: &str, args: &[String]) -> (bool, serde_json::Value) {
    let dir = interop_dir();
    assert!(
        dir.join("node_modules/yjs").is_dir(),
        "the npm interop clients are not installed: run the tests with scripts/test"
    );
    let output = Command::new("node")
        .arg(dir.join(script))
        .args(args)
        .output()
        .expect("run node (install Node.js, or run scripts/test)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let value = serde_json::from_str(line).unwrap_or_else(|_| {
        panic!(
            "{script} printed no JSON: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.success(), value)
}

/// Starts an interop script in the background, for clients that run side by side.
pub fn node_spawn(script: &str, args: &[String]) -> std::process::Child {
    Command::new("node")
        .arg(interop_dir().join(script))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run node")
}

/// Waits for a background script and returns what `node` would.
pub fn node_wait(child: std::process::Child) -> (bool, serde_json::Value) {
    let output = child.wait_with_output().expect("wait for node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let value =
        serde_json::from_str(line).unwrap_or_else(|_| panic!("no JSON from node: {stdout}"));
    (output.status.success(), value)
}

/// Every table cell of the database, as bytes.
pub async fn every_cell(target: &Target) -> Vec<(String, Vec<u8>)> {
    let mut cells = Vec::new();
    match target.database() {
        fermata_store_sql::Database::Sqlite { path } => {
            let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
            let mut conn = sqlx::SqliteConnection::connect_with(&options)
                .await
                .unwrap();
            let tables: Vec<String> =
                sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table'")
                    .fetch_all(&mut conn)
                    .await
                    .unwrap();
            for table in tables {
                let columns: Vec<String> = sqlx::query(&format!("PRAGMA table_info(\"{table}\")"))
                    .fetch_all(&mut conn)
                    .await
                    .unwrap()
                    .iter()
                    .map(|row| row.get::<String, _>("name"))
                    .collect();
                for column in columns {
                    let values: Vec<Option<Vec<u8>>> = sqlx::query_scalar(&format!(
                        "SELECT CAST(\"{column}\" AS BLOB) FROM \"{table}\""
                    ))
                    .fetch_all(&mut conn)
                    .await
                    .unwrap();
                    cells.extend(
                        values
                            .into_iter()
                            .flatten()
                            .map(|v| (format!("{table}.{column}"), v)),
                    );
                }
            }
        }
        fermata_store_sql::Database::Postgres { url } => {
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            let columns: Vec<(String, String, String)> = sqlx::query_as(
                "SELECT table_name::text, column_name::text, data_type::text \
                 FROM information_schema.columns WHERE table_schema = 'public'",
            )
            .fetch_all(&mut conn)
            .await
            .unwrap();
            for (table, column, kind) in columns {
                let sql = if kind == "bytea" {
                    format!("SELECT \"{column}\" FROM \"{table}\"")
                } else {
                    format!(
                        "SELECT convert_to(CAST(\"{column}\" AS TEXT), 'UTF8') FROM \"{table}\""
                    )
                };
                let values: Vec<Option<Vec<u8>>> =
                    sqlx::query_scalar(&sql).fetch_all(&mut conn).await.unwrap();
                cells.extend(
                    values
                        .into_iter()
                        .flatten()
                        .map(|v| (format!("{table}.{column}"), v)),
                );
            }
        }
    }
    assert!(
        cells.len() > 20,
        "the scan found almost nothing: {} cells",
        cells.len()
    );
    cells
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// Fails naming the place when any secret, as text or in hex, is in any cell or log.
pub fn assert_absent(secrets: &[(&str, String)], cells: &[(String, Vec<u8>)], logs: &str) {
    for (what, secret) in secrets {
        assert!(secret.len() >= 8, "{what} is too short to search for");
        let forms = [
            secret.as_bytes().to_vec(),
            hex(secret.as_bytes()).into_bytes(),
        ];
        for (place, cell) in cells {
            for form in &forms {
                assert!(!contains(cell, form), "the {what} is stored in {place}");
            }
        }
        assert!(
            !logs.contains(secret.as_str()),
            "the {what} appears in the logs"
        );
    }
}

pub fn session_headers<'a>(cookie: &'a str, csrf: &'a str) -> [(&'static str, String); 2] {
    [
        ("Cookie", format!("fermata_session={cookie}")),
        ("X-CSRF-Token", csrf.to_owned()),
    ]
}

/// The password the schema tests give the users they add.
pub const USER_PASSWORD: &str = "ada's long password";

/// Adds user `name` with [`USER_PASSWORD`] (a `system_admin` when `admin`) through the binary, and
/// returns what it printed.
pub fn add_user(target: &Target, name: &str, admin: bool) -> String {
    let mut words = vec!["user", "add", name, "--password-stdin"];
    if admin {
        words.extend(["--role", "system_admin"]);
    }
    let (status, out, err) = target.run_with_input(&words, &format!("{USER_PASSWORD}\n"));
    assert!(status.success(), "{out}{err}");
    format!("{out}{err}")
}

/// Appends `text` to the target's configuration.
pub fn configure(target: &Target, text: &str) {
    let mut config = std::fs::OpenOptions::new()
        .append(true)
        .open(target.config())
        .unwrap();
    config.write_all(text.as_bytes()).unwrap();
}

/// Adds a `[schema.source]` on `host`:`port` for `user` (TLS off, as the throwaway servers run)
/// to the target's configuration, with `password` in a file beside it that only its owner reads.
pub fn add_source(target: &Target, host: &str, port: u16, user: &str, password: &str) {
    use std::os::unix::fs::PermissionsExt;
    let password_file = target.config().with_file_name("mysql-password");
    std::fs::write(&password_file, format!("{password}\n")).unwrap();
    std::fs::set_permissions(&password_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let quoted = |text: &str| serde_json::Value::from(text).to_string();
    configure(
        target,
        &format!(
            "\n[schema.source]\nhost = {}\nport = {port}\nuser = {}\npassword_file = {}\n\
             tls = \"disabled\"\n",
            quoted(host),
            quoted(user),
            quoted(&password_file.display().to_string()),
        ),
    );
}

/// A git repository at `path` whose branch `main` has one empty commit: a package with nothing
/// merged yet.
pub fn empty_package(path: &std::path::Path) -> PathBuf {
    let mut options = git2::RepositoryInitOptions::new();
    options.initial_head("main");
    let repository = git2::Repository::init_opts(path, &options).unwrap();
    let signature = git2::Signature::now("Fermata tests", "tests@fermata.invalid").unwrap();
    let tree = repository
        .find_tree(repository.index().unwrap().write_tree().unwrap())
        .unwrap();
    repository
        .commit(
            Some("HEAD"),
            &signature,
            &signature,
            "An empty package",
            &tree,
            &[],
        )
        .unwrap();
    path.to_owned()
}

/// `POST /api/v1/documents`: a document titled `title` in `repository`, created as `headers` say
/// (a session's cookie and CSRF token, or a bearer token).
pub fn create_document(
    address: SocketAddr,
    headers: &[(&str, &str)],
    repository: &str,
    title: &str,
) -> Answer {
    request(
        address,
        "POST",
        "/api/v1/documents",
        headers,
        Some(&serde_json::json!({"repository": repository, "title": title})),
    )
}

/// The text of `document` as the API gives it, read with the API token `token`.
pub fn text_of(address: SocketAddr, token: &str, document: &str) -> String {
    browser::stored_document(address, token, document)["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A `typist.mjs` client, and the events it printed with when they arrived.
pub struct Typist {
    child: Child,
    events: std::sync::mpsc::Receiver<(std::time::Instant, serde_json::Value)>,
}

impl Typist {
    pub fn spawn(
        address: SocketAddr,
        room: &str,
        token: &str,
        prefix: &str,
        timeout_ms: u64,
    ) -> Self {
        Typist::start(
            address,
            room,
            token,
            prefix,
            &["--timeout", &timeout_ms.to_string()],
        )
    }

    /// A typist that types for `typing` from its first sync whatever happens to its connection
    /// (`--duration`), then waits until it has been connected and synced for a second, within
    /// `timeout` of its start, and reports what it typed and the other typists' lines it saw.
    pub fn spawn_typing_through(
        address: SocketAddr,
        room: &str,
        token: &str,
        prefix: &str,
        typing: Duration,
        timeout: Duration,
    ) -> Self {
        Typist::start(
            address,
            room,
            token,
            prefix,
            &[
                "--duration",
                &typing.as_millis().to_string(),
                "--timeout",
                &timeout.as_millis().to_string(),
            ],
        )
    }

    fn start(address: SocketAddr, room: &str, token: &str, prefix: &str, extra: &[&str]) -> Self {
        let mut child = Command::new("node")
            .arg(interop_dir().join("typist.mjs"))
            .args(["--server", &format!("ws://{address}/sync"), "--room", room])
            .args(["--token", token, "--prefix", prefix])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run node (install Node.js, or run scripts/test)");
        let stdout = child.stdout.take().unwrap();
        let (send, events) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(event) = serde_json::from_str::<serde_json::Value>(&line)
                    && send.send((std::time::Instant::now(), event)).is_err()
                {
                    return;
                }
            }
        });
        Typist { child, events }
    }

    /// The next event named `name` within `within`, skipping others (which `seen` collects).
    pub fn event_within(
        &self,
        name: &str,
        within: Duration,
        seen: &mut Vec<serde_json::Value>,
    ) -> Option<(std::time::Instant, serde_json::Value)> {
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            let (at, event) = self.events.recv_timeout(left).ok()?;
            if event["event"] == name {
                return Some((at, event));
            }
            seen.push(event);
        }
    }

    pub fn event(&self, name: &str, seen: &mut Vec<serde_json::Value>) -> serde_json::Value {
        self.event_within(name, PATIENCE, seen)
            .unwrap_or_else(|| panic!("the typist never reported {name}: {seen:?}"))
            .1
    }

    /// `kill -9`, as a browser tab dies: nothing it holds reaches the server any more. Returns
    /// every event it reported and nobody read yet.
    pub fn kill(mut self) -> Vec<serde_json::Value> {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        // The reader ends at the end of the output, which the kill brought.
        let mut events = Vec::new();
        while let Ok((_, event)) = self.events.recv_timeout(PATIENCE) {
            events.push(event);
        }
        events
    }
}

impl Drop for Typist {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The numbers of the lines `prefix` typed that `text` holds.
pub fn typed_lines(text: &str, prefix: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|line| line.strip_prefix(prefix)?.parse().ok())
        .collect()
}

/// Waits, with a bound, until `path` exists.
pub async fn wait_for_file(path: &std::path::Path) {
    let deadline = Instant::now() + PATIENCE;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The viewport width, in CSS pixels, of the narrowest phones in use: every page must fit it.
pub const PHONE_WIDTH: u64 = 375;

/// Narrows a browser's viewport to [`PHONE_WIDTH`], making up for any frame around it.
pub async fn narrow_to_phone(client: &fantoccini::Client) {
    let viewport = || async {
        client
            .execute("return window.innerWidth;", Vec::new())
            .await
            .unwrap()
            .as_u64()
            .unwrap()
    };
    let width = u32::try_from(PHONE_WIDTH).unwrap();
    client.set_window_size(width, 812).await.unwrap();
    let shown = viewport().await;
    if shown != PHONE_WIDTH {
        let frame = u32::try_from(shown.abs_diff(PHONE_WIDTH)).unwrap();
        client.set_window_size(width + frame, 812).await.unwrap();
    }
    assert_eq!(
        viewport().await,
        PHONE_WIDTH,
        "the viewport is not phone-wide"
    );
}

/// What is wider than the viewport: the page's scroll width and the first few elements that
/// stick out of it other than inside a scroll container.
const OVERFLOW: &str = "
    const page = document.documentElement;
    const width = page.clientWidth;
    const scrolled = element => {
      for (let up = element.parentElement; up && up !== page; up = up.parentElement) {
        if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(up).overflowX)) return true;
      }
      return false;
    };
    const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
      (typeof e.className === 'string' && e.className ? '.' + e.className.trim().split(/\\s+/).join('.') : '');
    const wide = Array.from(document.body.querySelectorAll('*'))
      .filter(e => e.getBoundingClientRect().right > width + 0.5 && !scrolled(e))
      .slice(0, 8).map(name);
    return { width, scroll_width: page.scrollWidth, wide };";

/// Asserts that nothing on the page the browser shows is wider than its viewport: the page
/// never scrolls sideways.
pub async fn assert_fits_the_viewport(client: &fantoccini::Client, what: &str) {
    let measured = client.execute(OVERFLOW, Vec::new()).await.unwrap();
    let width = measured["width"].as_u64().unwrap();
    let scroll_width = measured["scroll_width"].as_u64().unwrap();
    assert!(
        scroll_width <= width && measured["wide"] == serde_json::json!([]),
        "{what} is wider than the viewport: {measured}"
    );
}

/// Adds the user `ada` and an API token for her, through the command line.
pub fn api_token(target: &Target) -> String {
    let (status, out, err) = target.run_with_input(
        &["user", "add", "ada", "--password-stdin"],
        "a long enough password\n",
    );
    assert!(status.success(), "{out}{err}");
    let (status, out, err) = target.run_with_input(&["token", "create", "--user", "ada"], "");
    assert!(status.success(), "{err}");
    out.trim().to_owned()
}

/// Creates a document titled `title` in `ada/app`; returns its ID.
pub fn create(address: SocketAddr, token: &str, title: &str) -> String {
    let bearer = format!("Bearer {token}");
    let created = create_document(address, &[("Authorization", &bearer)], "ada/app", title);
    assert_eq!(created.status, 201, "{}", created.body);
    created.json()["id"].as_str().unwrap().to_owned()
}

/// The stored text of `document`, or `None` when the server does not answer 200.
pub fn try_text_of(address: SocketAddr, token: &str, document: &str) -> Option<String> {
    let answer = try_request(
        address,
        "GET",
        &format!("/api/v1/documents/{document}"),
        &[("Authorization", &format!("Bearer {token}"))],
        None,
    )
    .ok()?;
    (answer.status == 200).then(|| answer.json()["text"].as_str().unwrap().to_owned())
}

/// The last lines of a log, for a failure message.
pub fn tail(output: &str) -> String {
    let lines: Vec<&str> = output.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}
