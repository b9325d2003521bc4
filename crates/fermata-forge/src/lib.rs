//! The forge: where approved schema snapshots are published as one pull request. [`Forge`] is
//! the port; [`local::LocalGit`] is the embedded default (a git repository on disk, with pull
//! requests recorded beside it), and [`github::GitHub`] is the other adapter (a repository on
//! GitHub, through its REST API).
//!
//! Publication must survive a crash between any two of its writes, so every write is
//! idempotent and every adapter answers reads from the forge's current state:
//! [`Forge::create_commit`] of the same [`CommitSpec`] always gives the same commit (fixed
//! author, committer and times, the same parent and tree), [`Forge::create_branch`] succeeds
//! when the branch already points at that commit and refuses when it points elsewhere, and a
//! pull request is looked up by its head branch ([`Forge::find_pull_request`]) before one is
//! opened. Every failure is a [`ForgeError`]: a kind to branch on, fixed words, and the cause
//! for the log; nothing a forge says reaches its `Display`.

mod error;
pub mod github;
pub mod local;

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use error::{ForgeError, ForgeErrorKind};

/// A change of a tree: each listed folder is replaced whole by its files (a folder given no
/// files is removed), then each listed file is written. Paths are relative and `/`-separated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeChange {
    /// Folder path → its new files, by path inside the folder.
    pub folders: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    /// File path → its new content.
    pub files: BTreeMap<String, Vec<u8>>,
}

impl TreeChange {
    /// Every path the change touches (its folders and its files), for the base-moved check.
    pub fn touched_paths(&self) -> Vec<String> {
        self.folders
            .keys()
            .chain(self.files.keys())
            .cloned()
            .collect()
    }
}

/// Who wrote a commit, and when (seconds since the Unix epoch, UTC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    pub name: String,
    pub email: String,
    pub time: i64,
}

/// A commit to create. The same spec always gives the same commit: author and committer are
/// this one signature, with its time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitSpec {
    pub parent: String,
    pub change: TreeChange,
    pub message: String,
    pub signature: Signature,
}

/// A pull request to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequestSpec {
    /// The branch with the change.
    pub head: String,
    /// The branch it is to be merged into.
    pub base: String,
    pub title: String,
    pub body: String,
}

/// Where a pull request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PullState {
    Open,
    Merged,
    Closed,
}

/// A pull request as the forge reports it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    pub number: u64,
    /// Where a person opens it (a web page, or the local repository's record).
    pub url: String,
    pub head: String,
    pub base: String,
    /// The commit the head branch pointed at when it was opened.
    pub head_commit: String,
    pub state: PullState,
}

/// The forge port. Reads name commits by their full ID, so what is read at a reviewed base stays
/// what it was whatever the branches do since.
#[async_trait]
pub trait Forge: Send + Sync + std::fmt::Debug {
    /// The commit `branch` points at, or `None` when there is no such branch.
    async fn branch_head(&self, branch: &str) -> Result<Option<String>, ForgeError>;

    /// Whether any of `paths` (files, or folders and everything in them) differs between the
    /// commits `from` and `to`.
    async fn paths_changed(
        &self,
        from: &str,
        to: &str,
        paths: &[String],
    ) -> Result<bool, ForgeError>;

    /// Creates the commit `spec` describes (or finds it, when it exists) and returns its ID.
    async fn create_commit(&self, spec: &CommitSpec) -> Result<String, ForgeError>;

    /// Creates `branch` at `commit`. A branch that already points at `commit` is success; one
    /// that points elsewhere is a [`ForgeErrorKind::Conflict`].
    async fn create_branch(&self, branch: &str, commit: &str) -> Result<(), ForgeError>;

    /// The pull request whose head is `head`, whatever its state, when there is one.
    async fn find_pull_request(&self, head: &str) -> Result<Option<PullRequest>, ForgeError>;

    /// Opens a pull request. Callers look it up by its head first.
    async fn open_pull_request(&self, spec: &PullRequestSpec) -> Result<PullRequest, ForgeError>;

    /// Pull request `number` as it stands now, or `None` when the forge knows no such number.
    async fn pull_request(&self, number: u64) -> Result<Option<PullRequest>, ForgeError>;

    /// Closes pull request `number` without merging it (closing a closed one changes nothing).
    /// False when the forge knows no such number.
    async fn close_pull_request(&self, number: u64) -> Result<bool, ForgeError>;

    /// Deletes `branch` (the head of a pull request that was closed). False when there is no
    /// such branch.
    async fn delete_branch(&self, branch: &str) -> Result<bool, ForgeError>;

    /// The regular file at `path` in commit `commit` (a full commit ID), or `None` when nothing
    /// is there. A folder, a symbolic link or a submodule at `path`, or a file where one of its
    /// folders should be, is refused.
    async fn read_file(&self, commit: &str, path: &str) -> Result<Option<Vec<u8>>, ForgeError>;

    /// Every file under the folder `path` in commit `commit`, by its path inside the folder, or
    /// `None` when nothing is there. Anything but a folder at `path`, and a symbolic link, a
    /// submodule or a name that is not UTF-8 inside it, is refused.
    async fn read_folder(
        &self,
        commit: &str,
        path: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, ForgeError>;
}
