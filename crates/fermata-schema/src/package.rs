//! The package, read side: the folder inside the target git repository that holds the
//! [registry](Registry) of merged snapshots and one folder per registered database, named by
//! [`names::encode`]. Refresh reads the registry and the merged files at the base branch's
//! current commit and records that commit as the reviewed base; publication writes the package
//! later.
//!
//! Everything is read from commits, never from a work tree or an index, so a bare repository and
//! a checked-out one read the same. The git work is blocking and runs on tokio's blocking
//! threads. Every failure to read the repository is the `github`-stage [`SafeError`], logged
//! once with fixed words; nothing libgit2 says reaches the error.

mod registry;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fermata_store::schema::{DatabaseName, ErrorCode, SafeError};
use git2::{BranchType, ErrorCode as GitErrorCode, FileMode, ObjectType, Oid, Repository, Tree};
use tracing::warn;

pub use registry::{REGISTRY_FILE, REGISTRY_FORMAT, RegisteredSnapshot, Registry};

use crate::names;

/// Where the package lives (`[schema.package]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageSettings {
    /// A local git repository, bare or not (its work tree, or its git folder).
    pub repository: PathBuf,
    /// The branch whose head is the merged state of the package.
    pub base_branch: String,
    /// The package folder inside the repository: a relative path with `/` between folders.
    pub path: String,
}

impl PackageSettings {
    /// The package folder when none is configured.
    pub const DEFAULT_PATH: &'static str = "schemas";

    /// Settings with the default package folder.
    pub fn new(repository: impl Into<PathBuf>, base_branch: impl Into<String>) -> Self {
        PackageSettings {
            repository: repository.into(),
            base_branch: base_branch.into(),
            path: Self::DEFAULT_PATH.to_owned(),
        }
    }

    /// Checks what can be checked before opening the repository; the problem is named without
    /// any value.
    pub fn validate(&self) -> Result<(), String> {
        if self.repository.as_os_str().is_empty() {
            return Err("`repository` is empty".to_owned());
        }
        if !self.repository.is_dir() {
            return Err("`repository` is not a folder".to_owned());
        }
        if !git2::Branch::name_is_valid(&self.base_branch).unwrap_or(false) {
            return Err("`base_branch` is not a valid git branch name".to_owned());
        }
        let segments_are_plain = self.path.split('/').all(|segment| {
            !segment.is_empty()
                && segment != "."
                && segment != ".."
                && !segment.eq_ignore_ascii_case(".git")
                && !segment.contains(['\\', '\0'])
        });
        if !segments_are_plain {
            return Err(
                "`path` must be a relative folder path: folder names joined by `/`, none of them empty, `.`, `..` or `.git`"
                    .to_owned(),
            );
        }
        Ok(())
    }
}

/// The package at the head of the base branch: what a refresh compares with and records as its
/// reviewed base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseSnapshot {
    /// The base branch's current commit, as lowercase hexadecimal.
    pub commit: String,
    /// The registry at that commit; empty when the package has no `registry.json` yet.
    pub registry: Registry,
}

/// A package in a local git repository. Each read opens the repository afresh, so a `Package`
/// holds no libgit2 handle and can be shared between tasks.
#[derive(Debug, Clone)]
pub struct Package {
    settings: PackageSettings,
}

impl Package {
    /// Validates the settings and checks that the repository opens.
    pub async fn open(settings: &PackageSettings) -> Result<Package, SafeError> {
        let settings = settings.clone();
        blocking(move || {
            // Validation looks at the file system too.
            if let Err(problem) = settings.validate() {
                warn!(problem, "the package settings cannot be used");
                return Err(SafeError::new(ErrorCode::GithubFailed));
            }
            open_repository(&settings.repository)?;
            Ok(Package { settings })
        })
        .await
    }

    /// Reads the base branch's current commit and the registry at it. A missing base branch is an
    /// error; a missing package folder or `registry.json` is an empty registry.
    pub async fn base_snapshot(&self) -> Result<BaseSnapshot, SafeError> {
        let settings = self.settings.clone();
        blocking(move || {
            let repository = open_repository(&settings.repository)?;
            let branch = match repository.find_branch(&settings.base_branch, BranchType::Local) {
                Ok(branch) => branch,
                Err(error) if error.code() == GitErrorCode::NotFound => {
                    warn!("the package's base branch does not exist");
                    return Err(SafeError::new(ErrorCode::GithubFailed));
                }
                Err(error) => return Err(git_failed(&error, "read the base branch")),
            };
            let commit = branch
                .get()
                .peel_to_commit()
                .map_err(|error| git_failed(&error, "read the base branch's commit"))?;
            let root = commit
                .tree()
                .map_err(|error| git_failed(&error, "read the base commit's tree"))?;
            let registry = match package_tree(&repository, &root, &settings.path)? {
                Some(package) => read_registry(&repository, &package)?,
                None => Registry::default(),
            };
            Ok(BaseSnapshot {
                commit: commit.id().to_string(),
                registry,
            })
        })
        .await
    }

    /// Reads the registry at `commit` (a reviewed base that is no longer the branch's head); a
    /// commit without the package folder or `registry.json` has an empty registry.
    pub async fn registry_at(&self, commit: &str) -> Result<Registry, SafeError> {
        let settings = self.settings.clone();
        let commit = commit.to_owned();
        blocking(move || {
            let repository = open_repository(&settings.repository)?;
            let root = commit_tree(&repository, &commit)?;
            match package_tree(&repository, &root, &settings.path)? {
                Some(package) => read_registry(&repository, &package),
                None => Ok(Registry::default()),
            }
        })
        .await
    }

    /// Reads a database's merged files at a commit (normally [`BaseSnapshot::commit`]), keyed by
    /// their paths inside the database's folder (`tables/^orders.sql`). `None` when the registry
    /// at that commit does not list the database. A listed database without its folder, a
    /// symbolic link or a submodule in the folder, and a path that is not UTF-8 are failures.
    pub async fn merged_files(
        &self,
        commit: &str,
        database: &DatabaseName,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, SafeError> {
        let settings = self.settings.clone();
        let commit = commit.to_owned();
        let database = database.clone();
        blocking(move || {
            let repository = open_repository(&settings.repository)?;
            let root = commit_tree(&repository, &commit)?;
            let Some(package) = package_tree(&repository, &root, &settings.path)? else {
                return Ok(None);
            };
            if read_registry(&repository, &package)?
                .get(&database)
                .is_none()
            {
                return Ok(None);
            }
            // The registry checked that the name has a file name.
            let folder = names::file_name(database.as_str())?;
            let Some(entry) = package.get_name(&folder) else {
                warn!("a registered database has no folder in the package");
                return Err(SafeError::new(ErrorCode::GithubFailed));
            };
            if entry.kind() != Some(ObjectType::Tree) {
                warn!("a registered database's folder in the package is not a folder");
                return Err(SafeError::new(ErrorCode::GithubFailed));
            }
            let tree = repository
                .find_tree(entry.id())
                .map_err(|error| git_failed(&error, "read a database folder"))?;
            let mut files = BTreeMap::new();
            read_folder(&repository, &tree, "", &mut files)?;
            Ok(Some(files))
        })
        .await
    }
}

/// Runs git work on a blocking thread. A panic there is a bug and goes on unwinding here.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, SafeError> + Send + 'static,
) -> Result<T, SafeError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(_) => {
            warn!("a package read was cancelled");
            Err(SafeError::new(ErrorCode::GithubFailed))
        }
    }
}

/// Logs a libgit2 failure by its code and class only (its message may hold paths) and returns
/// the forge's safe error.
fn git_failed(error: &git2::Error, action: &'static str) -> SafeError {
    warn!(
        action,
        code = ?error.code(),
        class = ?error.class(),
        "the package repository could not be read"
    );
    SafeError::new(ErrorCode::GithubFailed)
}

/// Opens the repository at exactly that path (a work tree or a git folder), never one above it.
fn open_repository(path: &Path) -> Result<Repository, SafeError> {
    Repository::open(path).map_err(|error| git_failed(&error, "open the repository"))
}

/// The root tree of a commit named by its full hexadecimal ID.
fn commit_tree<'repository>(
    repository: &'repository Repository,
    commit: &str,
) -> Result<Tree<'repository>, SafeError> {
    let is_full_id = commit.len() == 40
        && commit
            .bytes()
            .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'));
    let id = Oid::from_str(commit).ok().filter(|_| is_full_id);
    let Some(id) = id else {
        warn!("a package commit is not a full lowercase hexadecimal ID");
        return Err(SafeError::new(ErrorCode::GithubFailed));
    };
    repository
        .find_commit(id)
        .and_then(|commit| commit.tree())
        .map_err(|error| git_failed(&error, "read a package commit"))
}

/// The package folder's tree, or `None` when the commit has no such folder.
fn package_tree<'repository>(
    repository: &'repository Repository,
    root: &Tree<'_>,
    path: &str,
) -> Result<Option<Tree<'repository>>, SafeError> {
    let entry = match root.get_path(Path::new(path)) {
        Ok(entry) => entry,
        Err(error) if error.code() == GitErrorCode::NotFound => return Ok(None),
        Err(error) => return Err(git_failed(&error, "find the package folder")),
    };
    if entry.kind() != Some(ObjectType::Tree) {
        warn!("the package path names something other than a folder");
        return Err(SafeError::new(ErrorCode::GithubFailed));
    }
    repository
        .find_tree(entry.id())
        .map(Some)
        .map_err(|error| git_failed(&error, "read the package folder"))
}

/// The registry in a package folder; empty when the folder has no `registry.json`.
fn read_registry(repository: &Repository, package: &Tree<'_>) -> Result<Registry, SafeError> {
    let Some(entry) = package.get_name(REGISTRY_FILE) else {
        return Ok(Registry::default());
    };
    if !is_regular_file(entry.filemode()) {
        warn!("the package registry is not a regular file");
        return Err(SafeError::new(ErrorCode::GithubFailed));
    }
    let blob = repository
        .find_blob(entry.id())
        .map_err(|error| git_failed(&error, "read the package registry"))?;
    Registry::parse(blob.content())
}

fn is_regular_file(mode: i32) -> bool {
    mode == i32::from(FileMode::Blob) || mode == i32::from(FileMode::BlobExecutable)
}

/// Adds every file under `tree` to `files`, keyed by `prefix` and its path below.
fn read_folder(
    repository: &Repository,
    tree: &Tree<'_>,
    prefix: &str,
    files: &mut BTreeMap<String, Vec<u8>>,
) -> Result<(), SafeError> {
    for entry in tree {
        let Ok(name) = std::str::from_utf8(entry.name_bytes()) else {
            warn!("a database folder in the package holds a name that is not UTF-8");
            return Err(SafeError::new(ErrorCode::GithubFailed));
        };
        let path = format!("{prefix}{name}");
        let mode = entry.filemode();
        if mode == i32::from(FileMode::Tree) {
            let subtree = repository
                .find_tree(entry.id())
                .map_err(|error| git_failed(&error, "read a database folder"))?;
            read_folder(repository, &subtree, &format!("{path}/"), files)?;
        } else if is_regular_file(mode) {
            let blob = repository
                .find_blob(entry.id())
                .map_err(|error| git_failed(&error, "read a merged file"))?;
            files.insert(path, blob.content().to_vec());
        } else {
            warn!("a database folder in the package holds a symbolic link or a submodule");
            return Err(SafeError::new(ErrorCode::GithubFailed));
        }
    }
    Ok(())
}
