//! The embedded forge: a git repository on disk (bare or with a work tree), written with libgit2
//! and never through a work tree or an index, so neither kind is disturbed.
//!
//! Branches and commits are the repository's own. A pull request is a record Fermata keeps
//! beside the repository's objects, one JSON file per number in `<git folder>/fermata/pulls/`
//! (number, title, description, head, base, head commit, closed), written whole to a temporary
//! file and renamed, so a crash leaves the old record or the new one. Its state is read from the
//! repository every time: merged when its head commit is reachable from the base branch's head,
//! closed when its head branch no longer exists or it was closed
//! ([`Forge::close_pull_request`]), open
//! otherwise. Every git failure is the retryable `GITHUB_FAILED`, logged with fixed words only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use fermata_store::schema::{ErrorCode, SafeError};
use git2::build::TreeUpdateBuilder;
use git2::{BranchType, ErrorCode as GitErrorCode, FileMode, Oid, Repository, Time};
use serde::{Deserialize, Serialize};
use tracing::warn;

use crate::{CommitSpec, Forge, PullRequest, PullRequestSpec, PullState};

/// The folder inside the git folder that holds the pull-request records.
const PULLS_FOLDER: &str = "fermata/pulls";

/// A local git repository as a forge. Each call opens the repository afresh on a blocking
/// thread, so the value holds no libgit2 handle and can be shared between tasks.
#[derive(Debug, Clone)]
pub struct LocalGit {
    repository: PathBuf,
}

/// One pull-request record, as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PullRecord {
    number: u64,
    title: String,
    body: String,
    head: String,
    base: String,
    head_commit: String,
    closed: bool,
}

impl LocalGit {
    /// The repository at `repository` (its work tree or its git folder).
    pub fn new(repository: impl Into<PathBuf>) -> Self {
        LocalGit {
            repository: repository.into(),
        }
    }

    /// Checks that the repository opens (at exactly that path, never one above it).
    pub async fn check(&self) -> Result<(), SafeError> {
        let repository = self.repository.clone();
        blocking(move || open(&repository).map(drop)).await
    }
}

#[async_trait]
impl Forge for LocalGit {
    async fn branch_head(&self, branch: &str) -> Result<Option<String>, SafeError> {
        let repository = self.repository.clone();
        let branch = branch.to_owned();
        blocking(move || {
            let repo = open(&repository)?;
            Ok(branch_commit(&repo, &branch)?.map(|oid| oid.to_string()))
        })
        .await
    }

    async fn paths_changed(
        &self,
        from: &str,
        to: &str,
        paths: &[String],
    ) -> Result<bool, SafeError> {
        let repository = self.repository.clone();
        let (from, to) = (from.to_owned(), to.to_owned());
        let paths = paths.to_vec();
        blocking(move || {
            let repo = open(&repository)?;
            let before = commit_tree(&repo, &from)?;
            let after = commit_tree(&repo, &to)?;
            for path in &paths {
                let entry = |tree: &git2::Tree<'_>| {
                    tree.get_path(Path::new(path))
                        .ok()
                        .map(|entry| (entry.id(), entry.filemode()))
                };
                if entry(&before) != entry(&after) {
                    return Ok(true);
                }
            }
            Ok(false)
        })
        .await
    }

    async fn create_commit(&self, spec: &CommitSpec) -> Result<String, SafeError> {
        let repository = self.repository.clone();
        let spec = spec.clone();
        blocking(move || {
            let repo = open(&repository)?;
            let parent = repo
                .find_commit(parse_oid(&spec.parent)?)
                .map_err(|error| failed(&error, "find the parent commit"))?;
            let base = parent
                .tree()
                .map_err(|error| failed(&error, "read the parent's tree"))?;
            let mut update = TreeUpdateBuilder::new();
            for (folder, files) in &spec.change.folders {
                if files.is_empty() {
                    if base.get_path(Path::new(folder)).is_ok() {
                        update.remove(folder.as_str());
                    }
                } else {
                    let tree = write_tree(&repo, files)?;
                    update.upsert(folder.as_str(), tree, FileMode::Tree);
                }
            }
            for (path, content) in &spec.change.files {
                let blob = repo
                    .blob(content)
                    .map_err(|error| failed(&error, "write a blob"))?;
                update.upsert(path.as_str(), blob, FileMode::Blob);
            }
            let tree_id = update
                .create_updated(&repo, &base)
                .map_err(|error| failed(&error, "write the commit's tree"))?;
            let tree = repo
                .find_tree(tree_id)
                .map_err(|error| failed(&error, "read the commit's tree"))?;
            let signature = git2::Signature::new(
                &spec.signature.name,
                &spec.signature.email,
                &Time::new(spec.signature.time, 0),
            )
            .map_err(|error| failed(&error, "make the commit's signature"))?;
            let commit = repo
                .commit(
                    None,
                    &signature,
                    &signature,
                    &spec.message,
                    &tree,
                    &[&parent],
                )
                .map_err(|error| failed(&error, "write the commit"))?;
            Ok(commit.to_string())
        })
        .await
    }

    async fn create_branch(&self, branch: &str, commit: &str) -> Result<(), SafeError> {
        let repository = self.repository.clone();
        let (branch, commit) = (branch.to_owned(), commit.to_owned());
        blocking(move || {
            let repo = open(&repository)?;
            let target = parse_oid(&commit)?;
            match branch_commit(&repo, &branch)? {
                Some(existing) if existing == target => Ok(()),
                Some(_) => {
                    warn!("the publication branch exists and points at another commit");
                    Err(SafeError::new(ErrorCode::PublicationConflict))
                }
                None => {
                    let commit = repo
                        .find_commit(target)
                        .map_err(|error| failed(&error, "find the branch's commit"))?;
                    repo.branch(&branch, &commit, false)
                        .map_err(|error| failed(&error, "create the branch"))?;
                    Ok(())
                }
            }
        })
        .await
    }

    async fn find_pull_request(&self, head: &str) -> Result<Option<PullRequest>, SafeError> {
        let repository = self.repository.clone();
        let head = head.to_owned();
        blocking(move || {
            let repo = open(&repository)?;
            let found = read_records(&repo)?
                .into_iter()
                .filter(|record| record.head == head)
                .max_by_key(|record| record.number);
            found.map(|record| pull_request(&repo, &record)).transpose()
        })
        .await
    }

    async fn open_pull_request(&self, spec: &PullRequestSpec) -> Result<PullRequest, SafeError> {
        let repository = self.repository.clone();
        let spec = spec.clone();
        blocking(move || {
            let repo = open(&repository)?;
            let head_commit = branch_commit(&repo, &spec.head)?.ok_or_else(|| {
                warn!("a pull request was asked for a head branch that does not exist");
                SafeError::new(ErrorCode::GithubFailed)
            })?;
            if branch_commit(&repo, &spec.base)?.is_none() {
                warn!("a pull request was asked for a base branch that does not exist");
                return Err(SafeError::new(ErrorCode::GithubFailed));
            }
            let number = read_records(&repo)?
                .iter()
                .map(|record| record.number)
                .max()
                .unwrap_or(0)
                + 1;
            let record = PullRecord {
                number,
                title: spec.title,
                body: spec.body,
                head: spec.head,
                base: spec.base,
                head_commit: head_commit.to_string(),
                closed: false,
            };
            write_record(&repo, &record)?;
            pull_request(&repo, &record)
        })
        .await
    }

    async fn pull_request(&self, number: u64) -> Result<Option<PullRequest>, SafeError> {
        let repository = self.repository.clone();
        blocking(move || {
            let repo = open(&repository)?;
            read_records(&repo)?
                .into_iter()
                .find(|record| record.number == number)
                .map(|record| pull_request(&repo, &record))
                .transpose()
        })
        .await
    }

    async fn close_pull_request(&self, number: u64) -> Result<bool, SafeError> {
        let repository = self.repository.clone();
        blocking(move || {
            let repo = open(&repository)?;
            let Some(mut record) = read_records(&repo)?
                .into_iter()
                .find(|record| record.number == number)
            else {
                return Ok(false);
            };
            record.closed = true;
            write_record(&repo, &record)?;
            Ok(true)
        })
        .await
    }

    async fn read_file(&self, commit: &str, path: &str) -> Result<Option<Vec<u8>>, SafeError> {
        let repository = self.repository.clone();
        let (commit, path) = (commit.to_owned(), path.to_owned());
        blocking(move || {
            let repo = open(&repository)?;
            let root = commit_tree(&repo, &commit)?;
            let Some(entry) = entry_at(&root, &path)? else {
                return Ok(None);
            };
            if !is_regular_file(entry.filemode()) {
                warn!("a package path names something other than a regular file");
                return Err(SafeError::new(ErrorCode::GithubFailed));
            }
            let blob = repo
                .find_blob(entry.id())
                .map_err(|error| failed(&error, "read a file"))?;
            Ok(Some(blob.content().to_vec()))
        })
        .await
    }

    async fn read_folder(
        &self,
        commit: &str,
        path: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, SafeError> {
        let repository = self.repository.clone();
        let (commit, path) = (commit.to_owned(), path.to_owned());
        blocking(move || {
            let repo = open(&repository)?;
            let root = commit_tree(&repo, &commit)?;
            let Some(entry) = entry_at(&root, &path)? else {
                return Ok(None);
            };
            if entry.filemode() != i32::from(FileMode::Tree) {
                warn!("a package path names something other than a folder");
                return Err(SafeError::new(ErrorCode::GithubFailed));
            }
            let tree = repo
                .find_tree(entry.id())
                .map_err(|error| failed(&error, "read a folder"))?;
            let mut files = BTreeMap::new();
            read_tree(&repo, &tree, "", &mut files)?;
            Ok(Some(files))
        })
        .await
    }
}

/// The entry at `path` (`/`-separated) below `root`: `None` when a component is missing;
/// refused when a component before the last is not a folder.
fn entry_at(
    root: &git2::Tree<'_>,
    path: &str,
) -> Result<Option<git2::TreeEntry<'static>>, SafeError> {
    match root.get_path(Path::new(path)) {
        Ok(entry) => Ok(Some(entry)),
        Err(error) if error.code() == GitErrorCode::NotFound => {
            // libgit2 also says "not found" when a component is a file: tell the two apart.
            let mut components: Vec<&str> = path.split('/').collect();
            components.pop();
            let mut walked = String::new();
            for component in components {
                if !walked.is_empty() {
                    walked.push('/');
                }
                walked.push_str(component);
                match root.get_path(Path::new(&walked)) {
                    Ok(entry) if entry.filemode() != i32::from(FileMode::Tree) => {
                        warn!("a package path runs through something other than a folder");
                        return Err(SafeError::new(ErrorCode::GithubFailed));
                    }
                    Ok(_) => {}
                    Err(_) => return Ok(None),
                }
            }
            Ok(None)
        }
        Err(error) => Err(failed(&error, "look up a path")),
    }
}

fn is_regular_file(mode: i32) -> bool {
    mode == i32::from(FileMode::Blob) || mode == i32::from(FileMode::BlobExecutable)
}

/// Adds every file under `tree` to `files`, keyed by `prefix` and its path below.
fn read_tree(
    repo: &Repository,
    tree: &git2::Tree<'_>,
    prefix: &str,
    files: &mut BTreeMap<String, Vec<u8>>,
) -> Result<(), SafeError> {
    for entry in tree {
        let Ok(name) = std::str::from_utf8(entry.name_bytes()) else {
            warn!("a package folder holds a name that is not UTF-8");
            return Err(SafeError::new(ErrorCode::GithubFailed));
        };
        let path = format!("{prefix}{name}");
        let mode = entry.filemode();
        if mode == i32::from(FileMode::Tree) {
            let subtree = repo
                .find_tree(entry.id())
                .map_err(|error| failed(&error, "read a folder"))?;
            read_tree(repo, &subtree, &format!("{path}/"), files)?;
        } else if is_regular_file(mode) {
            let blob = repo
                .find_blob(entry.id())
                .map_err(|error| failed(&error, "read a file"))?;
            files.insert(path, blob.content().to_vec());
        } else {
            warn!("a package folder holds a symbolic link or a submodule");
            return Err(SafeError::new(ErrorCode::GithubFailed));
        }
    }
    Ok(())
}

/// The pull request a record describes, with its state read from the repository now.
fn pull_request(repo: &Repository, record: &PullRecord) -> Result<PullRequest, SafeError> {
    let head_commit = parse_oid(&record.head_commit)?;
    let merged = match branch_commit(repo, &record.base)? {
        Some(base) => {
            base == head_commit
                || repo
                    .graph_descendant_of(base, head_commit)
                    .map_err(|error| failed(&error, "compare the base and head commits"))?
        }
        None => false,
    };
    let state = if merged {
        PullState::Merged
    } else if record.closed || branch_commit(repo, &record.head)?.is_none() {
        PullState::Closed
    } else {
        PullState::Open
    };
    Ok(PullRequest {
        number: record.number,
        url: format!(
            "file://{}",
            record_path(repo, record.number).to_string_lossy()
        ),
        head: record.head.clone(),
        base: record.base.clone(),
        head_commit: record.head_commit.clone(),
        state,
    })
}

fn record_path(repo: &Repository, number: u64) -> PathBuf {
    repo.path()
        .join(PULLS_FOLDER)
        .join(format!("{number}.json"))
}

fn read_records(repo: &Repository) -> Result<Vec<PullRecord>, SafeError> {
    let folder = repo.path().join(PULLS_FOLDER);
    let entries = match std::fs::read_dir(&folder) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(_) => return Err(io_failed("list the pull-request records")),
    };
    let mut records = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|_| io_failed("list the pull-request records"))?
            .path();
        if path.extension().is_none_or(|extension| extension != "json") {
            continue;
        }
        let bytes = std::fs::read(&path).map_err(|_| io_failed("read a pull-request record"))?;
        let record: PullRecord = serde_json::from_slice(&bytes).map_err(|_| {
            warn!("a pull-request record does not parse");
            SafeError::new(ErrorCode::GithubFailed)
        })?;
        records.push(record);
    }
    Ok(records)
}

/// Writes a record whole: a temporary file in the same folder, synced, then renamed over.
fn write_record(repo: &Repository, record: &PullRecord) -> Result<(), SafeError> {
    use std::io::Write;
    let folder = repo.path().join(PULLS_FOLDER);
    std::fs::create_dir_all(&folder).map_err(|_| io_failed("make the pull-request folder"))?;
    let bytes = serde_json::to_vec_pretty(record).map_err(|_| io_failed("encode a record"))?;
    let target = record_path(repo, record.number);
    let temporary = folder.join(format!(".{}.json.tmp", record.number));
    let mut file =
        std::fs::File::create(&temporary).map_err(|_| io_failed("write a pull-request record"))?;
    file.write_all(&bytes)
        .and_then(|()| file.sync_all())
        .map_err(|_| io_failed("write a pull-request record"))?;
    std::fs::rename(&temporary, &target).map_err(|_| io_failed("write a pull-request record"))
}

/// Writes nested trees for `files` (paths inside one folder, `/`-separated).
fn write_tree(repo: &Repository, files: &BTreeMap<String, Vec<u8>>) -> Result<Oid, SafeError> {
    let mut folders: BTreeMap<&str, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
    let mut builder = repo
        .treebuilder(None)
        .map_err(|error| failed(&error, "start a tree"))?;
    for (path, content) in files {
        match path.split_once('/') {
            Some((folder, rest)) => {
                folders
                    .entry(folder)
                    .or_default()
                    .insert(rest.to_owned(), content.clone());
            }
            None => {
                let blob = repo
                    .blob(content)
                    .map_err(|error| failed(&error, "write a blob"))?;
                builder
                    .insert(path, blob, i32::from(FileMode::Blob))
                    .map_err(|error| failed(&error, "add a file to a tree"))?;
            }
        }
    }
    for (folder, inner) in &folders {
        let tree = write_tree(repo, inner)?;
        builder
            .insert(folder, tree, i32::from(FileMode::Tree))
            .map_err(|error| failed(&error, "add a folder to a tree"))?;
    }
    builder
        .write()
        .map_err(|error| failed(&error, "write a tree"))
}

fn open(path: &Path) -> Result<Repository, SafeError> {
    Repository::open(path).map_err(|error| failed(&error, "open the repository"))
}

fn branch_commit(repo: &Repository, branch: &str) -> Result<Option<Oid>, SafeError> {
    match repo.find_branch(branch, BranchType::Local) {
        Ok(found) => found
            .get()
            .peel_to_commit()
            .map(|commit| Some(commit.id()))
            .map_err(|error| failed(&error, "read a branch's commit")),
        Err(error) if error.code() == GitErrorCode::NotFound => Ok(None),
        Err(error) => Err(failed(&error, "read a branch")),
    }
}

fn commit_tree<'repo>(
    repo: &'repo Repository,
    commit: &str,
) -> Result<git2::Tree<'repo>, SafeError> {
    repo.find_commit(parse_oid(commit)?)
        .and_then(|commit| commit.tree())
        .map_err(|error| failed(&error, "read a commit's tree"))
}

/// A commit named by its full lowercase hexadecimal ID (libgit2 would take a prefix too).
fn parse_oid(text: &str) -> Result<Oid, SafeError> {
    let is_full_id = text.len() == 40
        && text
            .bytes()
            .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'));
    Oid::from_str(text)
        .ok()
        .filter(|_| is_full_id)
        .ok_or_else(|| {
            warn!("a commit ID is not a full lowercase hexadecimal ID");
            SafeError::new(ErrorCode::GithubFailed)
        })
}

/// The safe error for a libgit2 failure: logged with the action and libgit2's class and code,
/// never its message (which can name paths).
fn failed(error: &git2::Error, action: &'static str) -> SafeError {
    warn!(action, class = ?error.class(), code = ?error.code(), "the local forge failed");
    SafeError::new(ErrorCode::GithubFailed)
}

fn io_failed(action: &'static str) -> SafeError {
    warn!(
        action,
        "the local forge's pull-request records could not be used"
    );
    SafeError::new(ErrorCode::GithubFailed)
}

/// Runs git work on a blocking thread; a panic there goes on unwinding here.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, SafeError> + Send + 'static,
) -> Result<T, SafeError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(_) => {
            warn!("a local forge call was cancelled");
            Err(SafeError::new(ErrorCode::GithubFailed))
        }
    }
}
