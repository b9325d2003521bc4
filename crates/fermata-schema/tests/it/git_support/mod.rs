//! Git repositories made in temporary folders for the package, refresh and verification tests:
//! commits of exact trees on a branch, with fixed signatures, and packages of merged snapshots.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::path::Path;

use fermata_schema::names;
use fermata_schema::package::{PackageSettings, REGISTRY_FILE, RegisteredSnapshot, Registry};
use fermata_schema::snapshot::DatabaseSnapshot;
use fermata_store::schema::{DatabaseName, OperationId};
use git2::{FileMode, Oid, Repository, Signature, Time};
use tempfile::TempDir;

/// A repository in a temporary folder, kept while the value lives.
pub struct TestRepository {
    folder: TempDir,
    pub repository: Repository,
}

impl TestRepository {
    pub fn new(bare: bool) -> Self {
        let folder = tempfile::tempdir().unwrap();
        let repository = if bare {
            Repository::init_bare(folder.path()).unwrap()
        } else {
            Repository::init(folder.path()).unwrap()
        };
        TestRepository { folder, repository }
    }

    pub fn path(&self) -> &Path {
        self.folder.path()
    }

    pub fn settings(&self, branch: &str) -> PackageSettings {
        PackageSettings::new(self.path(), branch)
    }

    /// Commits exactly these regular files on `branch`, on top of its head if it has one.
    pub fn commit(&self, branch: &str, entries: &BTreeMap<String, Vec<u8>>) -> Oid {
        let with_modes = entries
            .iter()
            .map(|(path, content)| (path.clone(), (FileMode::Blob, content.clone())))
            .collect();
        self.commit_entries(branch, &with_modes)
    }

    /// The commit `branch` points at, as lowercase hexadecimal.
    pub fn head(&self, branch: &str) -> String {
        self.repository
            .find_reference(&format!("refs/heads/{branch}"))
            .unwrap()
            .peel_to_commit()
            .unwrap()
            .id()
            .to_string()
    }

    /// Commits on `branch` a package (`schemas/`, with `README.md` beside it) in which each of
    /// `snapshots` is registered with its files, as a merged pull request leaves it.
    pub fn commit_package(&self, branch: &str, snapshots: &[DatabaseSnapshot]) -> Oid {
        let mut registry = Registry::default();
        let mut tree = BTreeMap::from([("README.md".to_owned(), b"Schemas.\n".to_vec())]);
        for snapshot in snapshots {
            let name = &snapshot.model.name;
            let manifest: serde_json::Value =
                serde_json::from_slice(&snapshot.files["manifest.json"]).unwrap();
            registry
                .register(
                    DatabaseName::new(name.clone()).unwrap(),
                    RegisteredSnapshot {
                        snapshot_hash: snapshot.snapshot_hash.clone(),
                        object_counts: serde_json::from_value(manifest["counts"].clone()).unwrap(),
                        generator_version: env!("CARGO_PKG_VERSION").to_owned(),
                        operation_id: OperationId::generate(),
                    },
                )
                .unwrap();
            let folder = names::file_name(name).unwrap();
            for (path, bytes) in &snapshot.files {
                tree.insert(format!("schemas/{folder}/{path}"), bytes.clone());
            }
        }
        tree.insert(
            format!("schemas/{REGISTRY_FILE}"),
            registry.to_canonical_json(),
        );
        self.commit(branch, &tree)
    }

    /// Commits exactly these entries, each with its mode, on `branch`.
    pub fn commit_entries(
        &self,
        branch: &str,
        entries: &BTreeMap<String, (FileMode, Vec<u8>)>,
    ) -> Oid {
        let repository = &self.repository;
        let tree = repository.find_tree(self.write_tree(entries)).unwrap();
        let reference = format!("refs/heads/{branch}");
        let parent = repository
            .find_reference(&reference)
            .ok()
            .map(|head| head.peel_to_commit().unwrap());
        let signature = Signature::new(
            "Fermata Test",
            "test@example.invalid",
            &Time::new(1_700_000_000, 0),
        )
        .unwrap();
        repository
            .commit(
                Some(&reference),
                &signature,
                &signature,
                "package",
                &tree,
                &parent.iter().collect::<Vec<_>>(),
            )
            .unwrap()
    }

    /// Writes nested trees for paths joined by `/`.
    pub fn write_tree(&self, entries: &BTreeMap<String, (FileMode, Vec<u8>)>) -> Oid {
        let mut folders: BTreeMap<String, BTreeMap<String, (FileMode, Vec<u8>)>> = BTreeMap::new();
        let mut builder = self.repository.treebuilder(None).unwrap();
        for (path, (mode, content)) in entries {
            match path.split_once('/') {
                Some((folder, rest)) => {
                    folders
                        .entry(folder.to_owned())
                        .or_default()
                        .insert(rest.to_owned(), (*mode, content.clone()));
                }
                None => {
                    let blob = self.repository.blob(content).unwrap();
                    builder.insert(path, blob, i32::from(*mode)).unwrap();
                }
            }
        }
        for (folder, inner) in &folders {
            let tree = self.write_tree(inner);
            builder
                .insert(folder, tree, i32::from(FileMode::Tree))
                .unwrap();
        }
        builder.write().unwrap()
    }

    /// Every file of the tree at the head of `branch`, by path.
    pub fn files_at(&self, branch: &str) -> BTreeMap<String, Vec<u8>> {
        let commit = self
            .repository
            .find_reference(&format!("refs/heads/{branch}"))
            .unwrap()
            .peel_to_commit()
            .unwrap();
        let mut files = BTreeMap::new();
        commit
            .tree()
            .unwrap()
            .walk(git2::TreeWalkMode::PreOrder, |folder, entry| {
                if entry.kind() == Some(git2::ObjectType::Blob) {
                    let blob = self.repository.find_blob(entry.id()).unwrap();
                    files.insert(
                        format!("{folder}{}", entry.name().unwrap()),
                        blob.content().to_vec(),
                    );
                }
                git2::TreeWalkResult::Ok
            })
            .unwrap();
        files
    }

    /// The commit at the head of `branch`, as an object ID.
    pub fn head_id(&self, branch: &str) -> Oid {
        self.repository
            .find_reference(&format!("refs/heads/{branch}"))
            .unwrap()
            .peel_to_commit()
            .unwrap()
            .id()
    }

    /// Moves `branch` to `commit`, as a merge that fast-forwards does.
    pub fn fast_forward(&self, branch: &str, commit: Oid) {
        self.repository
            .reference(&format!("refs/heads/{branch}"), commit, true, "merge")
            .unwrap();
    }

    /// The branches whose names start with `prefix`.
    pub fn branches(&self, prefix: &str) -> Vec<String> {
        self.repository
            .branches(Some(git2::BranchType::Local))
            .unwrap()
            .map(|branch| branch.unwrap().0.name().unwrap().unwrap().to_owned())
            .filter(|name| name.starts_with(prefix))
            .collect()
    }
}
