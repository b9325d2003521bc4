//! A small tmpfs the test mounts where a database keeps its files, to fill up and free again: a
//! full disk, as real as it gets, without filling the machine's.
//!
//! Mounting needs root, as the tests have in CI; without it the test fails saying so. The file
//! system is unmounted on drop (lazily, should something still hold a file open), so a failed
//! test leaves no mount behind.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted tmpfs; unmounted on drop.
pub struct Tmpfs {
    /// Where it is mounted: an empty folder that existed before.
    mount_point: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`mount`'s syntax: `64m`) at `mount_point`, creating the folder.
    /// Its root is world-traversable, so a server run as another user (PostgreSQL) can use a
    /// folder inside it.
    pub fn mount(mount_point: &Path, size: &str) -> Self {
        std::fs::create_dir_all(mount_point).unwrap();
        let output = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(mount_point)
            .output()
            .expect("run mount");
        assert!(
            output.status.success(),
            "could not mount a tmpfs at {} (the fault tests need root, as CI runs them): {}",
            mount_point.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        Tmpfs {
            mount_point: mount_point.to_owned(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.mount_point
    }

    /// Fills what is left of the file system with a filler file, until a write fails with "no
    /// space left on device"; returns how many bytes it took.
    pub fn fill(&self) -> u64 {
        let mut filler = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.filler())
            .unwrap();
        let chunk = vec![0u8; 1 << 20];
        let mut written = 0u64;
        loop {
            match filler.write(&chunk) {
                Ok(0) => break,
                Ok(count) => written += count as u64,
                Err(error) if error.raw_os_error() == Some(28) => break, // ENOSPC
                Err(error) => panic!("filling {}: {error}", self.mount_point.display()),
            }
        }
        written
    }

    /// Removes the filler file: the space is there again.
    pub fn free(&self) {
        std::fs::remove_file(self.filler()).unwrap();
    }

    fn filler(&self) -> PathBuf {
        self.mount_point.join("filler")
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(&self.mount_point)
            .status()
            .is_ok_and(|status| status.success());
        if !unmounted {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(&self.mount_point)
                .status();
        }
    }
}
