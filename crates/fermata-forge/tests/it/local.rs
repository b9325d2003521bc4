//! The local git forge against real repositories in temporary folders, bare and with a work
//! tree: deterministic commits that replace folders whole, branches created only when absent,
//! pull-request records and their states read from the repository.

use std::collections::BTreeMap;
use std::path::Path;

use fermata_forge::local::LocalGit;
use fermata_forge::{
    CommitSpec, Forge, ForgeErrorKind, PullRequestSpec, PullState, Signature, TreeChange,
};
use git2::{Oid, Repository, Time};

fn files(entries: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
    entries
        .iter()
        .map(|(path, content)| ((*path).to_owned(), content.as_bytes().to_vec()))
        .collect()
}

/// A repository with one commit on `main`: a README and a package folder of two databases.
fn repository(folder: &Path, bare: bool) -> (Repository, Oid) {
    let repo = if bare {
        Repository::init_bare(folder).unwrap()
    } else {
        Repository::init(folder).unwrap()
    };
    let oid = {
        let mut index = repo.index().unwrap();
        for (path, content) in [
            ("README.md", "Schemas.\n"),
            ("schemas/registry.json", "{}\n"),
            ("schemas/shop/tables/a.sql", "CREATE TABLE a (x int)\n"),
            (
                "schemas/shop/tables/gone.sql",
                "CREATE TABLE gone (x int)\n",
            ),
            ("schemas/crm/tables/c.sql", "CREATE TABLE c (x int)\n"),
        ] {
            let blob = repo.blob(content.as_bytes()).unwrap();
            index
                .add(&git2::IndexEntry {
                    ctime: git2::IndexTime::new(0, 0),
                    mtime: git2::IndexTime::new(0, 0),
                    dev: 0,
                    ino: 0,
                    mode: 0o100644,
                    uid: 0,
                    gid: 0,
                    file_size: 0,
                    id: blob,
                    flags: 0,
                    flags_extended: 0,
                    path: path.as_bytes().to_vec(),
                })
                .unwrap();
        }
        let tree = repo.find_tree(index.write_tree_to(&repo).unwrap()).unwrap();
        let signature =
            git2::Signature::new("Test", "test@example.invalid", &Time::new(1, 0)).unwrap();
        repo.commit(
            Some("refs/heads/main"),
            &signature,
            &signature,
            "base",
            &tree,
            &[],
        )
        .unwrap()
    };
    (repo, oid)
}

fn spec(parent: Oid) -> CommitSpec {
    CommitSpec {
        parent: parent.to_string(),
        change: TreeChange {
            folders: BTreeMap::from([
                (
                    "schemas/shop".to_owned(),
                    files(&[
                        ("tables/a.sql", "CREATE TABLE a (x int, y int)\n"),
                        ("views/v.sql", "CREATE VIEW v AS SELECT 1\n"),
                    ]),
                ),
                ("schemas/old".to_owned(), BTreeMap::new()),
            ]),
            files: files(&[("schemas/registry.json", "{\"format\":1}\n")]),
        },
        message: "Schema snapshots\n".to_owned(),
        signature: Signature {
            name: "Fermata".to_owned(),
            email: "fermata@localhost".to_owned(),
            time: 1_796_000_000,
        },
    }
}

fn tree_files(repo: &Repository, commit: &str) -> BTreeMap<String, String> {
    let mut all = BTreeMap::new();
    repo.find_commit(Oid::from_str(commit).unwrap())
        .unwrap()
        .tree()
        .unwrap()
        .walk(git2::TreeWalkMode::PreOrder, |folder, entry| {
            if let Ok(blob) = repo.find_blob(entry.id()) {
                all.insert(
                    format!("{folder}{}", entry.name().unwrap()),
                    String::from_utf8(blob.content().to_vec()).unwrap(),
                );
            }
            git2::TreeWalkResult::Ok
        })
        .unwrap();
    all
}

#[tokio::test]
async fn commits_are_deterministic_and_replace_folders_whole() {
    for bare in [false, true] {
        let folder = tempfile::tempdir().unwrap();
        let (repo, base) = repository(folder.path(), bare);
        let forge = LocalGit::new(folder.path());
        let first = forge.create_commit(&spec(base)).await.unwrap();
        let again = forge.create_commit(&spec(base)).await.unwrap();
        assert_eq!(first, again, "the same spec gives the same commit");
        let tree = tree_files(&repo, &first);
        let paths: Vec<&str> = tree.keys().map(String::as_str).collect();
        assert_eq!(
            paths,
            [
                "README.md",
                "schemas/crm/tables/c.sql",
                "schemas/registry.json",
                "schemas/shop/tables/a.sql",
                "schemas/shop/views/v.sql",
            ],
            "the folder is replaced whole, others are kept"
        );
        assert_eq!(
            tree["schemas/shop/tables/a.sql"],
            "CREATE TABLE a (x int, y int)\n"
        );
        // Nothing moved: the commit is only an object until a branch names it.
        assert_eq!(
            forge.branch_head("main").await.unwrap(),
            Some(base.to_string())
        );
        assert!(
            forge
                .paths_changed(&base.to_string(), &first, &["schemas/shop".to_owned()])
                .await
                .unwrap()
        );
        assert!(
            !forge
                .paths_changed(
                    &base.to_string(),
                    &first,
                    &["schemas/crm".to_owned(), "README.md".to_owned()]
                )
                .await
                .unwrap()
        );
    }
}

#[tokio::test]
async fn branches_are_created_once_and_never_moved() {
    let folder = tempfile::tempdir().unwrap();
    let (_repo, base) = repository(folder.path(), false);
    let forge = LocalGit::new(folder.path());
    let commit = forge.create_commit(&spec(base)).await.unwrap();
    forge.create_branch("fermata/x", &commit).await.unwrap();
    forge.create_branch("fermata/x", &commit).await.unwrap();
    let error = forge
        .create_branch("fermata/x", &base.to_string())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ForgeErrorKind::Conflict);
    assert!(!error.is_retryable());
    assert_eq!(forge.branch_head("fermata/x").await.unwrap(), Some(commit));
    assert_eq!(forge.branch_head("absent").await.unwrap(), None);
}

#[tokio::test]
async fn pull_requests_are_found_by_head_and_their_state_read_from_the_repository() {
    let folder = tempfile::tempdir().unwrap();
    let (repo, base) = repository(folder.path(), false);
    let forge = LocalGit::new(folder.path());
    let pull_spec = |head: &str| PullRequestSpec {
        head: head.to_owned(),
        base: "main".to_owned(),
        title: "Schema snapshots".to_owned(),
        body: "Changed: `shop`".to_owned(),
    };
    let commit = forge.create_commit(&spec(base)).await.unwrap();
    forge.create_branch("fermata/one", &commit).await.unwrap();
    assert!(
        forge
            .find_pull_request("fermata/one")
            .await
            .unwrap()
            .is_none()
    );
    let opened = forge
        .open_pull_request(&pull_spec("fermata/one"))
        .await
        .unwrap();
    assert_eq!((opened.number, opened.state), (1, PullState::Open));
    assert_eq!(
        forge.find_pull_request("fermata/one").await.unwrap(),
        Some(opened.clone())
    );

    // Merged once main reaches its head commit.
    repo.reference(
        "refs/heads/main",
        Oid::from_str(&commit).unwrap(),
        true,
        "merge",
    )
    .unwrap();
    assert_eq!(
        forge.pull_request(1).await.unwrap().unwrap().state,
        PullState::Merged
    );

    // Closed when its branch is deleted, or when told so.
    let mut second = spec(Oid::from_str(&commit).unwrap());
    second.message = "Second\n".to_owned();
    let second = forge.create_commit(&second).await.unwrap();
    forge.create_branch("fermata/two", &second).await.unwrap();
    forge.create_branch("fermata/three", &second).await.unwrap();
    let two = forge
        .open_pull_request(&pull_spec("fermata/two"))
        .await
        .unwrap();
    let three = forge
        .open_pull_request(&pull_spec("fermata/three"))
        .await
        .unwrap();
    assert_eq!((two.number, three.number), (2, 3));
    repo.find_branch("fermata/two", git2::BranchType::Local)
        .unwrap()
        .delete()
        .unwrap();
    assert_eq!(
        forge.pull_request(2).await.unwrap().unwrap().state,
        PullState::Closed
    );
    assert!(forge.close_pull_request(3).await.unwrap());
    assert_eq!(
        forge.pull_request(3).await.unwrap().unwrap().state,
        PullState::Closed
    );
    assert!(!forge.close_pull_request(9).await.unwrap());
    assert!(forge.pull_request(9).await.unwrap().is_none());
    // A closed pull request's branch is deleted, once; the record stays.
    let closed = forge.pull_request(3).await.unwrap().unwrap();
    assert!(forge.delete_branch(&closed.head).await.unwrap());
    assert_eq!(forge.branch_head(&closed.head).await.unwrap(), None);
    assert!(!forge.delete_branch(&closed.head).await.unwrap());
    assert!(forge.pull_request(3).await.unwrap().is_some());

    // A head branch that does not exist cannot be proposed.
    let error = forge
        .open_pull_request(&pull_spec("fermata/absent"))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ForgeErrorKind::Failed);
}
