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
//! otherwise. Every failure is a retryable [`ForgeErrorKind::Failed`] naming the action, with
//! libgit2's or the file system's error as its source (which can name paths, so it is for the
//! operator's log only); a branch that points elsewhere is a [`ForgeErrorKind::Conflict`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use git2::build::TreeUpdateBuilder;
use git2::{BranchType, ErrorCode as GitErrorCode, FileMode, Oid, Repository, Time};
use serde::{Deserialize, Serialize};

use crate::error::{ForgeContext, ForgeError, ForgeErrorKind};
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
    pub async fn check(&self) -> Result<(), ForgeError> {
        let repository = self.repository.clone();
        blocking(move || open(&repository).map(drop)).await
    }
}

#[async_trait]
impl Forge for LocalGit {
    async fn branch_head(&self, branch: &str) -> Result<Option<String>, ForgeError> {
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
    ) -> Result<bool, ForgeError> {
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

    async fn create_commit(&self, spec: &CommitSpec) -> Result<String, ForgeError> {
        let repository = self.repository.clone();
        let spec = spec.clone();
        blocking(move || {
            let repo = open(&repository)?;
            let parent = repo
                .find_commit(parse_oid(&spec.parent)?)
                .context("find the parent commit")?;
            let base = parent.tree().context("read the parent's tree")?;
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
                let blob = repo.blob(content).context("write a blob")?;
                update.upsert(path.as_str(), blob, FileMode::Blob);
            }
            let tree_id = update
                .create_updated(&repo, &base)
                .context("write the commit's tree")?;
            let tree = repo.find_tree(tree_id).context("read the commit's tree")?;
            let signature = git2::Signature::new(
                &spec.signature.name,
                &spec.signature.email,
                &Time::new(spec.signature.time, 0),
            )
            .context("make the commit's signature")?;
            let commit = repo
                .commit(
                    None,
                    &signature,
                    &signature,
                    &spec.message,
                    &tree,
                    &[&parent],
                )
                .context("write the commit")?;
            Ok(commit.to_string())
        })
        .await
    }

    async fn create_branch(&self, branch: &str, commit: &str) -> Result<(), ForgeError> {
        let repository = self.repository.clone();
        let (branch, commit) = (branch.to_owned(), commit.to_owned());
        blocking(move || {
            let repo = open(&repository)?;
            let target = parse_oid(&commit)?;
            match branch_commit(&repo, &branch)? {
                Some(existing) if existing == target => Ok(()),
                Some(_) => Err(ForgeError::new(
                    ForgeErrorKind::Conflict,
                    "create the branch",
                )),
                None => {
                    let commit = repo
                        .find_commit(target)
                        .context("find the branch's commit")?;
                    repo.branch(&branch, &commit, false)
                        .context("create the branch")?;
                    Ok(())
                }
            }
        })
        .await
    }

    async fn find_pull_request(&self, head: &str) -> Result<Option<PullRequest>, ForgeError> {
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

    async fn open_pull_request(&self, spec: &PullRequestSpec) -> Result<PullRequest, ForgeError> {
        let repository = self.repository.clone();
        let spec = spec.clone();
        blocking(move || {
            let repo = open(&repository)?;
            let head_commit = branch_commit(&repo, &spec.head)?.ok_or_else(|| {
                ForgeError::failed("a pull request was asked for a head branch that does not exist")
            })?;
            if branch_commit(&repo, &spec.base)?.is_none() {
                return Err(ForgeError::failed(
                    "a pull request was asked for a base branch that does not exist",
                ));
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

    async fn pull_request(&self, number: u64) -> Result<Option<PullRequest>, ForgeError> {
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

    async fn close_pull_request(&self, number: u64) -> Result<bool, ForgeError> {
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

    async fn delete_branch(&self, branch: &str) -> Result<bool, ForgeError> {
        let repository = self.repository.clone();
        let branch = branch.to_owned();
        blocking(move || {
            let repo = open(&repository)?;
            match repo.find_branch(&branch, BranchType::Local) {
                Ok(mut found) => found.delete().context("delete a branch").map(|()| true),
                Err(error) if error.code() == GitErrorCode::NotFound => Ok(false),
                Err(error) => Err(ForgeError::failed("read a branch").with_source(error)),
            }
        })
        .await
    }

    async fn read_file(&self, commit: &str, path: &str) -> Result<Option<Vec<u8>>, ForgeError> {
        let repository = self.repository.clone();
        let (commit, path) = (commit.to_owned(), path.to_owned());
        blocking(move || {
            let repo = open(&repository)?;
            let root = commit_tree(&repo, &commit)?;
            let Some(entry) = entry_at(&root, &path)? else {
                return Ok(None);
            };
            if !is_regular_file(entry.filemode()) {
                return Err(ForgeError::failed(
                    "a package path names something other than a regular file",
                ));
            }
            let blob = repo.find_blob(entry.id()).context("read a file")?;
            Ok(Some(blob.content().to_vec()))
        })
        .await
    }

    async fn read_folder(
        &self,
        commit: &str,
        path: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, ForgeError> {
        let repository = self.repository.clone();
        let (commit, path) = (commit.to_owned(), path.to_owned());
        blocking(move || {
            let repo = open(&repository)?;
            let root = commit_tree(&repo, &commit)?;
            let Some(entry) = entry_at(&root, &path)? else {
                return Ok(None);
            };
            if entry.filemode() != i32::from(FileMode::Tree) {
                return Err(ForgeError::failed(
                    "a package path names something other than a folder",
                ));
            }
            let tree = repo.find_tree(entry.id()).context("read a folder")?;
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
) -> Result<Option<git2::TreeEntry<'static>>, ForgeError> {
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
                        return Err(ForgeError::failed(
                            "a package path runs through something other than a folder",
                        ));
                    }
                    Ok(_) => {}
                    Err(_) => return Ok(None),
                }
            }
            Ok(None)
        }
        Err(error) => Err(ForgeError::failed("look up a path").with_source(error)),
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
) -> Result<(), ForgeError> {
    for entry in tree {
        let name = std::str::from_utf8(entry.name_bytes())
            .context("read a package folder's name, which is not UTF-8")?;
        let path = format!("{prefix}{name}");
        let mode = entry.filemode();
        if mode == i32::from(FileMode::Tree) {
            let subtree = repo.find_tree(entry.id()).context("read a folder")?;
            read_tree(repo, &subtree, &format!("{path}/"), files)?;
        } else if is_regular_file(mode) {
            let blob = repo.find_blob(entry.id()).context("read a file")?;
            files.insert(path, blob.content().to_vec());
        } else {
            return Err(ForgeError::failed(
                "a package folder holds a symbolic link or a submodule",
            ));
        }
    }
    Ok(())
}

/// The pull request a record describes, with its state read from the repository now.
fn pull_request(repo: &Repository, record: &PullRecord) -> Result<PullRequest, ForgeError> {
    let head_commit = parse_oid(&record.head_commit)?;
    let merged = match branch_commit(repo, &record.base)? {
        Some(base) => {
            base == head_commit
                || repo
                    .graph_descendant_of(base, head_commit)
                    .context("compare the base and head commits")?
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

fn read_records(repo: &Repository) -> Result<Vec<PullRecord>, ForgeError> {
    let folder = repo.path().join(PULLS_FOLDER);
    let entries = match std::fs::read_dir(&folder) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => {
            return Err(ForgeError::failed("list the pull-request records").with_source(error));
        }
    };
    let mut records = Vec::new();
    for entry in entries {
        let path = entry.context("list the pull-request records")?.path();
        if path.extension().is_none_or(|extension| extension != "json") {
            continue;
        }
        let bytes = std::fs::read(&path).context("read a pull-request record")?;
        let record: PullRecord =
            serde_json::from_slice(&bytes).context("parse a pull-request record")?;
        records.push(record);
    }
    Ok(records)
}

/// Writes a record whole: a temporary file in the same folder, synced, then renamed over.
fn write_record(repo: &Repository, record: &PullRecord) -> Result<(), ForgeError> {
    use std::io::Write;
    let folder = repo.path().join(PULLS_FOLDER);
    std::fs::create_dir_all(&folder).context("make the pull-request folder")?;
    let bytes = serde_json::to_vec_pretty(record).context("encode a pull-request record")?;
    let target = record_path(repo, record.number);
    let temporary = folder.join(format!(".{}.json.tmp", record.number));
    let mut file = std::fs::File::create(&temporary).context("write a pull-request record")?;
    file.write_all(&bytes)
        .and_then(|()| file.sync_all())
        .context("write a pull-request record")?;
    std::fs::rename(&temporary, &target).context("write a pull-request record")
}

/// Writes nested trees for `files` (paths inside one folder, `/`-separated).
fn write_tree(repo: &Repository, files: &BTreeMap<String, Vec<u8>>) -> Result<Oid, ForgeError> {
    let mut folders: BTreeMap<&str, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
    let mut builder = repo.treebuilder(None).context("start a tree")?;
    for (path, content) in files {
        match path.split_once('/') {
            Some((folder, rest)) => {
                folders
                    .entry(folder)
                    .or_default()
                    .insert(rest.to_owned(), content.clone());
            }
            None => {
                let blob = repo.blob(content).context("write a blob")?;
                builder
                    .insert(path, blob, i32::from(FileMode::Blob))
                    .context("add a file to a tree")?;
            }
        }
    }
    for (folder, inner) in &folders {
        let tree = write_tree(repo, inner)?;
        builder
            .insert(folder, tree, i32::from(FileMode::Tree))
            .context("add a folder to a tree")?;
    }
    builder.write().context("write a tree")
}

fn open(path: &Path) -> Result<Repository, ForgeError> {
    Repository::open(path).context("open the repository")
}

fn branch_commit(repo: &Repository, branch: &str) -> Result<Option<Oid>, ForgeError> {
    match repo.find_branch(branch, BranchType::Local) {
        Ok(found) => found
            .get()
            .peel_to_commit()
            .map(|commit| Some(commit.id()))
            .context("read a branch's commit"),
        Err(error) if error.code() == GitErrorCode::NotFound => Ok(None),
        Err(error) => Err(ForgeError::failed("read a branch").with_source(error)),
    }
}

fn commit_tree<'repo>(
    repo: &'repo Repository,
    commit: &str,
) -> Result<git2::Tree<'repo>, ForgeError> {
    repo.find_commit(parse_oid(commit)?)
        .and_then(|commit| commit.tree())
        .context("read a commit's tree")
}

/// A commit named by its full lowercase hexadecimal ID (libgit2 would take a prefix too).
fn parse_oid(text: &str) -> Result<Oid, ForgeError> {
    let is_full_id = text.len() == 40
        && text
            .bytes()
            .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'));
    Oid::from_str(text)
        .ok()
        .filter(|_| is_full_id)
        .ok_or_else(|| ForgeError::failed("a commit ID is not a full lowercase hexadecimal ID"))
}

/// Runs git work on a blocking thread; a panic there goes on unwinding here.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ForgeError> + Send + 'static,
) -> Result<T, ForgeError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(error) => Err(ForgeError::failed("finish a local forge call").with_source(error)),
    }
}
