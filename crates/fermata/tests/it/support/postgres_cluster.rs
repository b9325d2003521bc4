//! A throwaway PostgreSQL cluster of one test's own, which the test may stop, kill and restart.
//!
//! The scratch server `scripts/test` starts is shared by every test running at the same time, so
//! a test that takes its database away needs a cluster nobody else uses: `initdb` into a
//! temporary folder (or a folder the test chose, such as a small tmpfs), a free loopback port,
//! and `pg_ctl` for every change, run as the `postgres` user when the tests run as root (the
//! server refuses to run as root), as `scripts/lib/servers.sh` does. Unlike the shared server it
//! runs with PostgreSQL's durable defaults (`fsync`, `synchronous_commit`): a test that kills the
//! server checks what a commit that was acknowledged left behind.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tempfile::TempDir;
use tokio::time::Instant;

use super::PATIENCE;

/// How `pg_ctl` stops the server: `fast` ends the sessions and checkpoints, `immediate` kills
/// every process of the server at once, as a crash does, and the next start recovers.
#[derive(Debug, Clone, Copy)]
pub enum StopMode {
    Fast,
    Immediate,
}

impl StopMode {
    fn as_str(self) -> &'static str {
        match self {
            StopMode::Fast => "fast",
            StopMode::Immediate => "immediate",
        }
    }
}

/// A running PostgreSQL cluster, stopped (`immediate`) and removed on drop.
pub struct PgCluster {
    /// The log, the socket and, unless the test chose another place, the data folder.
    root: TempDir,
    /// The data folder (`-D`).
    data: PathBuf,
    /// The folder of the newest installed PostgreSQL's programs.
    bin: PathBuf,
    port: u16,
    /// The environment of the server's processes (the fsync shim's `LD_PRELOAD`, say).
    env: Vec<(String, OsString)>,
}

impl PgCluster {
    /// A new cluster with its data folder in its own temporary folder.
    pub fn start() -> Self {
        PgCluster::start_with(None, Vec::new())
    }

    /// A new cluster whose data folder is `data` (an empty or missing folder, on a file system
    /// the test controls) when given, whose server processes run with `env` added.
    pub fn start_with(data: Option<PathBuf>, env: Vec<(String, OsString)>) -> Self {
        let bin = postgres_bin();
        let root = tempfile::tempdir().unwrap();
        let data = data.unwrap_or_else(|| root.path().join("data"));
        std::fs::create_dir_all(&data).unwrap();
        give_to_postgres(root.path());
        give_to_postgres(&data);
        let cluster = PgCluster {
            root,
            data,
            bin,
            port: free_port(),
            env,
        };
        let initdb = as_postgres(&cluster.bin.join("initdb"), &[])
            .arg("-D")
            .arg(&cluster.data)
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8"])
            .args(["--locale=C.UTF-8", "--no-sync"])
            .output()
            .unwrap();
        assert!(
            initdb.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&initdb.stdout),
            String::from_utf8_lossy(&initdb.stderr)
        );
        cluster.pg_ctl(&["start"]);
        cluster
    }

    /// The URL of the `postgres` database, straight to the server.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// `pg_ctl stop -m MODE`, waiting until the server is gone.
    pub fn stop(&self, mode: StopMode) {
        self.pg_ctl(&["stop", "-m", mode.as_str()]);
    }

    /// `pg_ctl start`, waiting until the server accepts connections (after crash recovery).
    pub fn start_again(&self) {
        self.pg_ctl(&["start"]);
    }

    /// `pg_ctl restart -m MODE`, waiting until the new server accepts connections.
    pub fn restart(&self, mode: StopMode) {
        self.pg_ctl(&["restart", "-m", mode.as_str()]);
    }

    /// Whether the server accepts connections now (`pg_isready`).
    pub fn is_accepting(&self) -> bool {
        Command::new(self.bin.join("pg_isready"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-t", "2"])
            .output()
            .unwrap()
            .status
            .success()
    }

    /// Whether the server is running (`pg_ctl status`), accepting connections or not (in crash
    /// recovery, say).
    pub fn is_running(&self) -> bool {
        as_postgres(&self.bin.join("pg_ctl"), &[])
            .arg("-D")
            .arg(&self.data)
            .arg("status")
            .output()
            .unwrap()
            .status
            .success()
    }

    /// Waits, with a bound, until the server accepts connections; false when it never did, or
    /// stopped running meanwhile (a server whose crash recovery failed shuts down).
    pub async fn wait_accepting(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.is_accepting() {
                return true;
            }
            if !self.is_running() {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// The server's log, to quote in a failure or a report.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.root.path().join("server.log")).unwrap_or_default()
    }

    /// Runs `pg_ctl ACTION...` on this cluster with its options, and fails with its output and
    /// the server's log when it fails.
    fn pg_ctl(&self, action: &[&str]) {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c max_connections=100",
            self.port,
            self.root.path().display()
        );
        let output = as_postgres(&self.bin.join("pg_ctl"), &self.env)
            .arg("-D")
            .arg(&self.data)
            .arg("-l")
            .arg(self.root.path().join("server.log"))
            .args(["-w", "-t", &PATIENCE.as_secs().to_string(), "-o", &options])
            .args(action)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "pg_ctl {action:?} failed: {}{}\nserver log:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            self.log()
        );
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let _ = as_postgres(&self.bin.join("pg_ctl"), &[])
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}

/// The newest installed PostgreSQL's program folder, `/usr/lib/postgresql/VERSION/bin`, as
/// `scripts/lib/servers.sh` finds it; fails loudly when there is none.
fn postgres_bin() -> PathBuf {
    let installed = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("pg_ctl").exists().then_some((version, bin))
        })
        .max();
    installed
        .map(|(_, bin)| bin)
        .expect("no PostgreSQL under /usr/lib/postgresql: install postgresql, or run scripts/test")
}

/// Whether this process runs as root, as CI does.
pub fn running_as_root() -> bool {
    let output = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&output.stdout).trim() == "0"
}

/// Hands `path` to the `postgres` user when we are root, so the server can use it.
fn give_to_postgres(path: &Path) {
    if running_as_root() {
        let status = Command::new("chown")
            .arg("postgres:postgres")
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success(), "chown postgres {}", path.display());
    }
}

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `program` run as the `postgres` user when the tests run as root (through `runuser` and
/// `env`, so `env` reaches it whatever `runuser` keeps), as ourselves otherwise.
fn as_postgres(program: &Path, env: &[(String, OsString)]) -> Command {
    let mut command = if running_as_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--", "env"]);
        command
    } else {
        Command::new("env")
    };
    for (name, value) in env {
        let mut pair = OsString::from(format!("{name}="));
        pair.push(value);
        command.arg(pair);
    }
    command.arg(program);
    command
}
