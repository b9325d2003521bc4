//! The package, read side: the folder inside the target git repository that holds the
//! [registry](Registry) of merged snapshots and one folder per registered database, named by
//! [`names::encode`]. Refresh reads the registry and the merged files at the base branch's
//! current commit and records that commit as the reviewed base; publication writes the package
//! later.
//!
//! Everything is read through the [`Forge`] at commits, never from a work tree or an index, so a
//! bare repository and a checked-out one read the same, and so does a repository on GitHub.
//! Every failure to read the package is the `github`-stage [`SafeError`], logged once with fixed
//! words; nothing the forge says reaches the error.

mod registry;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use fermata_forge::Forge;
use fermata_forge::local::LocalGit;
use fermata_schema_core::{DatabaseName, ErrorCode, SafeError};

pub use registry::{REGISTRY_FILE, REGISTRY_FORMAT, RegisteredSnapshot, Registry};

use crate::filter::Filter;
use crate::names;
use crate::safe_context::{SafeCode, SafeContext, because};

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

    /// Checks what can be checked before opening the local repository; the problem is named
    /// without any value.
    pub fn validate(&self) -> Result<(), String> {
        if self.repository.as_os_str().is_empty() {
            return Err("`repository` is empty".to_owned());
        }
        if !self.repository.is_dir() {
            return Err("`repository` is not a folder".to_owned());
        }
        self.validate_layout()
    }

    /// Checks the base branch's name and the package folder, wherever the repository is.
    pub fn validate_layout(&self) -> Result<(), String> {
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

/// A package on a forge: the package folder of `settings.path` in the repository the forge
/// serves, read at commits by their full ID.
#[derive(Debug, Clone)]
pub struct Package {
    settings: PackageSettings,
    forge: Arc<dyn Forge>,
}

impl Package {
    /// The package in the local git repository of `settings`: validates the settings and checks
    /// that the repository opens.
    pub async fn open(settings: &PackageSettings) -> Result<Package, SafeError> {
        settings
            .validate_layout()
            .map_err(|problem| because(ErrorCode::GithubFailed, problem))?;
        // Opening the repository is the check of its path.
        let local = LocalGit::new(&settings.repository);
        local.check().await.context("open the package repository")?;
        Ok(Package::on(settings, Arc::new(local)))
    }

    /// The package `settings` names (its base branch and folder) on `forge`.
    pub fn on(settings: &PackageSettings, forge: Arc<dyn Forge>) -> Package {
        Package {
            settings: settings.clone(),
            forge,
        }
    }

    pub fn settings(&self) -> &PackageSettings {
        &self.settings
    }

    /// The forge the package is on, which publication writes to.
    pub fn forge(&self) -> &dyn Forge {
        &*self.forge
    }

    /// The forge, shared (for the open pull-request check of new refreshes).
    pub fn forge_handle(&self) -> Arc<dyn Forge> {
        Arc::clone(&self.forge)
    }

    /// Reads the base branch's current commit and the registry at it. A missing base branch is an
    /// error; a missing package folder or `registry.json` is an empty registry.
    pub async fn base_snapshot(&self) -> Result<BaseSnapshot, SafeError> {
        let head = self.forge.branch_head(&self.settings.base_branch).await;
        let Some(commit) = head.context("read the package's base branch")? else {
            return Err(because(
                ErrorCode::GithubFailed,
                "the package's base branch does not exist",
            ));
        };
        let registry = self.registry_at(&commit).await?;
        Ok(BaseSnapshot { commit, registry })
    }

    /// Reads the registry at `commit` (a reviewed base that is no longer the branch's head); a
    /// commit without the package folder or `registry.json` has an empty registry.
    pub async fn registry_at(&self, commit: &str) -> Result<Registry, SafeError> {
        let path = format!("{}/{REGISTRY_FILE}", self.settings.path);
        match self
            .forge
            .read_file(commit, &path)
            .await
            .context("read the package registry")?
        {
            Some(bytes) => Registry::parse(&bytes),
            None => Ok(Registry::default()),
        }
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
        if self.registry_at(commit).await?.get(database).is_none() {
            return Ok(None);
        }
        // The registry checked that the name has a file name.
        let folder = format!(
            "{}/{}",
            self.settings.path,
            names::file_name(database.as_str())?
        );
        match self
            .forge
            .read_folder(commit, &folder)
            .await
            .context("read a database's merged files")?
        {
            Some(files) => Ok(Some(files)),
            None => Err(because(
                ErrorCode::GithubFailed,
                "a registered database has no folder in the package",
            )),
        }
    }

    /// The filter a database's merged snapshot was taken with, as its `manifest.json` at
    /// `commit` records it; `None` when the manifest records none (a snapshot older than
    /// filters) or the database has no manifest there.
    pub async fn merged_filter(
        &self,
        commit: &str,
        database: &DatabaseName,
    ) -> Result<Option<Filter>, SafeError> {
        let path = format!(
            "{}/{}/manifest.json",
            self.settings.path,
            names::file_name(database.as_str())?
        );
        let Some(bytes) = self
            .forge
            .read_file(commit, &path)
            .await
            .context("read a database's merged manifest")?
        else {
            return Ok(None);
        };
        #[derive(serde::Deserialize)]
        struct Recorded {
            #[serde(default)]
            filter: Option<Filter>,
        }
        let recorded: Recorded = serde_json::from_slice(&bytes).or_safe(|| {
            SafeError::about(
                ErrorCode::GithubFailed,
                fermata_schema_core::Subject::Database(database.clone()),
            )
        })?;
        Ok(recorded.filter)
    }
}
