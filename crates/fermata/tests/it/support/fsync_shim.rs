//! The fsync fault shim (`tests/faults/fsync_shim.c`), built for the test and switched by it: a
//! process started with [`FsyncShim::env`] has its `fsync`, `fdatasync` and `sync_file_range`
//! fail with EIO, or sleep first, while the test says so, and pass through otherwise.
//!
//! The shim is compiled at test time with `gcc` into a temporary folder, rather than shipped
//! built, so it matches the machine's C library; without `gcc` the test fails saying so. Its
//! folder is readable by everyone, so a PostgreSQL server run as `postgres` loads the library,
//! reads the control file and appends to the hits file.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use tempfile::TempDir;

/// The built shim with its control and hits files.
pub struct FsyncShim {
    folder: TempDir,
}

impl FsyncShim {
    /// Compiles the shim; starts passing everything through.
    pub fn build() -> Self {
        use std::os::unix::fs::PermissionsExt;
        let folder = tempfile::tempdir().unwrap();
        std::fs::set_permissions(folder.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let source =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/faults/fsync_shim.c");
        let shim = FsyncShim { folder };
        let output = Command::new("gcc")
            .args(["-shared", "-fPIC", "-O2", "-Wall", "-o"])
            .arg(shim.library())
            .arg(&source)
            .arg("-ldl")
            .output()
            .unwrap_or_else(|error| {
                panic!("the fsync fault tests build their shim with gcc (install gcc): {error}")
            });
        assert!(
            output.status.success(),
            "gcc could not build {}: {}",
            source.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        std::fs::write(shim.hits(), "").unwrap();
        std::fs::set_permissions(shim.hits(), std::fs::Permissions::from_mode(0o666)).unwrap();
        shim.set("pass");
        shim
    }

    /// The environment that loads the shim into a process and points it at this test's files.
    pub fn env(&self) -> Vec<(String, OsString)> {
        vec![
            ("LD_PRELOAD".to_owned(), self.library().into_os_string()),
            (
                "FERMATA_FSYNC_CONTROL".to_owned(),
                self.control().into_os_string(),
            ),
            (
                "FERMATA_FSYNC_HITS".to_owned(),
                self.hits().into_os_string(),
            ),
        ]
    }

    /// Every sync fails with EIO from now on.
    pub fn fail(&self) {
        self.set("fail");
    }

    /// Every sync waits `ms` milliseconds first from now on.
    pub fn slow(&self, ms: u64) {
        self.set(&format!("slow {ms}"));
    }

    /// Syncs pass through again.
    pub fn pass(&self) {
        self.set("pass");
    }

    /// How many syncs the shim failed so far.
    pub fn failed_calls(&self) -> usize {
        self.count("fail")
    }

    /// How many syncs the shim slowed so far.
    pub fn slowed_calls(&self) -> usize {
        self.count("slow")
    }

    fn count(&self, what: &str) -> usize {
        std::fs::read_to_string(self.hits())
            .unwrap()
            .lines()
            .filter(|line| *line == what)
            .count()
    }

    /// Replaces the control file in one rename, so the shim never reads it half-written.
    fn set(&self, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        let next = self.folder.path().join("control.next");
        std::fs::write(&next, text).unwrap();
        std::fs::set_permissions(&next, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::rename(&next, self.control()).unwrap();
    }

    fn library(&self) -> PathBuf {
        self.folder.path().join("fsync_shim.so")
    }

    fn control(&self) -> PathBuf {
        self.folder.path().join("control")
    }

    fn hits(&self) -> PathBuf {
        self.folder.path().join("hits")
    }
}
