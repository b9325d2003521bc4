//! The GitHub adapter against a fake GitHub that speaks the documented REST API and computes
//! real git object IDs: publication end to end (checked against the local adapter's commit of
//! the same spec), retries, the 422 "already exists" answers, pull-request states, rate limits,
//! 404s, server and network failures, and that the token reaches no log line and no error (nor
//! its causes, which are what an operator's log shows).

use crate::fake_github;

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::Method;
use fake_github::{Canned, FakeGitHub, PullStatus, TOKEN, commit_files};
use fermata_forge::github::{GitHub, GitHubSettings, GitHubToken};
use fermata_forge::local::LocalGit;
use fermata_forge::{
    CommitSpec, Forge, ForgeError, ForgeErrorKind, PullRequest, PullRequestSpec, PullState,
    Signature, TreeChange,
};
use git2::{Oid, Repository};

const BASE: &str = "main";
const HEAD: &str = "fermata/publication-1";

/// The base branch before publication: one database to replace, one to remove, one untouched.
const SEED: &[(&str, &[u8])] = &[
    ("README.md", b"# Schemas\n"),
    (
        "registry.json",
        b"{\"databases\":[\"keep\",\"old\",\"shop\"]}\n",
    ),
    (
        "databases/keep/tables/k.sql",
        b"CREATE TABLE `k` (`id` int);\n",
    ),
    (
        "databases/old/tables/t.sql",
        b"CREATE TABLE `t` (`id` int);\n",
    ),
    ("databases/shop/manifest.json", b"{\"hash\":\"1\"}\n"),
    (
        "databases/shop/tables/legacy.sql",
        b"CREATE TABLE `legacy` (`id` int);\n",
    ),
    (
        "databases/shop/tables/orders.sql",
        b"CREATE TABLE `orders` (`id` int);\n",
    ),
    (
        "databases/shop/views/v.sql",
        b"CREATE VIEW `v` AS SELECT 1;\n",
    ),
];

/// Bytes that are not UTF-8, which go up as a base64 blob rather than inline.
const BINARY: &[u8] = &[0xff, 0xfe, 0x00, 0x01];

fn files(entries: &[(&str, &[u8])]) -> BTreeMap<String, Vec<u8>> {
    entries
        .iter()
        .map(|(path, content)| ((*path).to_owned(), content.to_vec()))
        .collect()
}

/// `databases/shop` replaced (one file unchanged, one changed, two new, two gone with their
/// folder), `databases/old` removed, `databases/new` added, `registry.json` rewritten.
fn publication(parent: &str) -> CommitSpec {
    CommitSpec {
        parent: parent.to_owned(),
        change: TreeChange {
            folders: BTreeMap::from([
                (
                    "databases/new".to_owned(),
                    files(&[("tables/a.sql", b"CREATE TABLE `a` (`id` int);\n")]),
                ),
                ("databases/old".to_owned(), BTreeMap::new()),
                (
                    "databases/shop".to_owned(),
                    files(&[
                        ("manifest.json", b"{\"hash\":\"1\"}\n"),
                        (
                            "tables/orders.sql",
                            b"CREATE TABLE `orders` (`id` bigint);\n",
                        ),
                        (
                            "tables/customers.sql",
                            b"CREATE TABLE `customers` (`id` int);\n",
                        ),
                        ("data/sample.bin", BINARY),
                    ]),
                ),
            ]),
            files: files(&[(
                "registry.json",
                b"{\"databases\":[\"keep\",\"new\",\"shop\"]}\n",
            )]),
        },
        message: "Schema snapshots of operation 1\n\nshop: 2 tables\n".to_owned(),
        signature: Signature {
            name: "Fermata".to_owned(),
            email: "fermata@example.com".to_owned(),
            time: 1_796_108_929,
        },
    }
}

fn pull_spec() -> PullRequestSpec {
    PullRequestSpec {
        head: HEAD.to_owned(),
        base: BASE.to_owned(),
        title: "Schema snapshots".to_owned(),
        body: "- `shop`: 2 tables\n".to_owned(),
    }
}

/// A bare local repository holding the same seed commit as the fake.
fn local_repository(folder: &Path) -> (Repository, String) {
    let repository = Repository::init_bare(folder).unwrap();
    let seed = commit_files(&repository, None, SEED);
    (repository, seed.to_string())
}

fn tree_at(repository: &Repository, commit: &str, path: &str) -> String {
    let tree = repository
        .find_commit(Oid::from_str(commit).unwrap())
        .unwrap()
        .tree()
        .unwrap();
    if path.is_empty() {
        return tree.id().to_string();
    }
    tree.get_path(Path::new(path)).unwrap().id().to_string()
}

/// The kinds of forge error, without a rate limit's hint (checked where it matters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Failed,
    RateLimited,
    Refused,
    Conflict,
}

#[track_caller]
fn assert_kind(result: Result<impl std::fmt::Debug, ForgeError>, expected: Kind) -> ForgeError {
    let error = result.unwrap_err();
    let kind = match error.kind() {
        ForgeErrorKind::Failed => Kind::Failed,
        ForgeErrorKind::RateLimited { .. } => Kind::RateLimited,
        ForgeErrorKind::Refused => Kind::Refused,
        ForgeErrorKind::Conflict => Kind::Conflict,
    };
    assert_eq!(kind, expected, "{error}");
    error
}

/// The error and every cause, as the log of whoever handles it shows them.
fn chain(error: &ForgeError) -> String {
    let mut text = error.to_string();
    let mut cause = std::error::Error::source(error);
    while let Some(error) = cause {
        text.push_str(&format!(": {error}"));
        cause = error.source();
    }
    text
}

/// Everything the tracing macros write while the guard lives, on this thread.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn capture(&self) -> tracing::subscriber::DefaultGuard {
        let logs = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || logs.clone())
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    /// Every line, the HTTP client's own included.
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }

    /// The adapter's lines.
    fn adapter_lines(&self) -> Vec<String> {
        self.text()
            .lines()
            .filter(|line| line.contains("fermata_forge::github"))
            .map(str::to_owned)
            .collect()
    }
}

impl io::Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_publication_makes_the_local_adapters_commit_a_branch_and_a_pull_request() {
    let fake = FakeGitHub::start().await;
    let seed = fake.commit_on(BASE, SEED);
    let folder = tempfile::tempdir().unwrap();
    let (local, local_seed) = local_repository(folder.path());
    assert_eq!(seed, local_seed);
    let github = fake.forge();
    let spec = publication(&seed);
    fake.take_requests();

    let commit = github.create_commit(&spec).await.unwrap();

    let expected_commit = LocalGit::new(folder.path())
        .create_commit(&spec)
        .await
        .unwrap();
    assert_eq!(commit, expected_commit);
    assert_eq!(
        fake.files(&commit),
        files(&[
            ("README.md", b"# Schemas\n"),
            (
                "databases/keep/tables/k.sql",
                b"CREATE TABLE `k` (`id` int);\n"
            ),
            (
                "databases/new/tables/a.sql",
                b"CREATE TABLE `a` (`id` int);\n"
            ),
            ("databases/shop/data/sample.bin", BINARY),
            ("databases/shop/manifest.json", b"{\"hash\":\"1\"}\n"),
            (
                "databases/shop/tables/customers.sql",
                b"CREATE TABLE `customers` (`id` int);\n"
            ),
            (
                "databases/shop/tables/orders.sql",
                b"CREATE TABLE `orders` (`id` bigint);\n"
            ),
            (
                "registry.json",
                b"{\"databases\":[\"keep\",\"new\",\"shop\"]}\n"
            ),
        ])
    );
    // One listing per folder level, shared between the replaced folders; one blob, for the
    // bytes that are not text; then one tree and one commit.
    let tree = |path| tree_at(&local, &seed, path);
    assert_eq!(
        fake.take_requests(),
        [
            format!("GET git/commits/{seed}"),
            format!("GET git/trees/{}", tree("")),
            format!("GET git/trees/{}", tree("databases")),
            format!("GET git/trees/{}?recursive=1", tree("databases/old")),
            format!("GET git/trees/{}?recursive=1", tree("databases/shop")),
            "POST git/blobs".to_owned(),
            "POST git/trees".to_owned(),
            "POST git/commits".to_owned(),
        ]
    );

    github.create_branch(HEAD, &commit).await.unwrap();
    assert_eq!(
        github.branch_head(HEAD).await.unwrap(),
        Some(commit.clone())
    );
    assert_eq!(github.find_pull_request(HEAD).await.unwrap(), None);
    let opened = github.open_pull_request(&pull_spec()).await.unwrap();
    assert_eq!(
        opened,
        PullRequest {
            number: 1,
            url: "https://github.com/acme/schemas/pull/1".to_owned(),
            head: HEAD.to_owned(),
            base: BASE.to_owned(),
            head_commit: commit.clone(),
            state: PullState::Open,
        }
    );
    assert_eq!(
        github.find_pull_request(HEAD).await.unwrap(),
        Some(opened.clone())
    );
    assert_eq!(github.pull_request(1).await.unwrap(), Some(opened));
    assert_eq!(
        fake.take_requests(),
        [
            "POST git/refs".to_owned(),
            "GET git/ref/heads/fermata/publication-1".to_owned(),
            "GET pulls?head=acme%3Afermata%2Fpublication-1&state=all&per_page=100".to_owned(),
            "POST pulls".to_owned(),
            "GET pulls?head=acme%3Afermata%2Fpublication-1&state=all&per_page=100".to_owned(),
            "GET pulls/1".to_owned(),
        ]
    );
    for request in fake.recorded() {
        assert_eq!(
            request.accept.as_deref(),
            Some("application/vnd.github+json")
        );
        assert_eq!(request.api_version.as_deref(), Some("2022-11-28"));
        assert!(
            request
                .user_agent
                .as_deref()
                .is_some_and(|agent| agent.starts_with("fermata/"))
        );
    }
}

#[tokio::test]
async fn a_retried_commit_is_the_same_commit() {
    let fake = FakeGitHub::start().await;
    let seed = fake.commit_on(BASE, SEED);
    let github = fake.forge();
    let spec = publication(&seed);

    fake.answer_next(Method::POST, "git/commits", Canned::ServerError);
    let error = assert_kind(github.create_commit(&spec).await, Kind::Failed);
    assert!(error.is_retryable());
    let first = github.create_commit(&spec).await.unwrap();
    let again = github.create_commit(&spec).await.unwrap();
    assert_eq!(first, again);

    let mut later = spec.clone();
    later.signature.time += 1;
    assert_ne!(github.create_commit(&later).await.unwrap(), first);
}

#[tokio::test]
async fn a_change_that_changes_nothing_keeps_the_parents_tree() {
    let fake = FakeGitHub::start().await;
    let seed = fake.commit_on(BASE, SEED);
    let github = fake.forge();
    let mut spec = publication(&seed);
    spec.change = TreeChange {
        folders: BTreeMap::from([
            (
                "databases/keep".to_owned(),
                files(&[("tables/k.sql", b"CREATE TABLE `k` (`id` int);\n")]),
            ),
            ("databases/absent".to_owned(), BTreeMap::new()),
        ]),
        files: BTreeMap::new(),
    };
    fake.take_requests();

    let commit = github.create_commit(&spec).await.unwrap();

    assert_eq!(fake.files(&commit), files(SEED));
    let requests = fake.take_requests();
    assert!(
        requests.iter().all(|line| line != "POST git/trees"),
        "{requests:?}"
    );
    assert_eq!(
        requests.last().map(String::as_str),
        Some("POST git/commits")
    );
}

#[tokio::test]
async fn a_branch_is_created_once_and_never_moved() {
    let fake = FakeGitHub::start().await;
    let seed = fake.commit_on(BASE, SEED);
    let other = fake.commit_on(BASE, &[("README.md", b"# Other\n")]);
    let github = fake.forge();

    github.create_branch(HEAD, &seed).await.unwrap();
    fake.take_requests();
    github.create_branch(HEAD, &seed).await.unwrap();
    assert_eq!(
        fake.take_requests(),
        ["POST git/refs", "GET git/ref/heads/fermata/publication-1"]
    );

    let conflict = assert_kind(github.create_branch(HEAD, &other).await, Kind::Conflict);
    assert!(!conflict.is_retryable());
    assert_eq!(github.branch_head(HEAD).await.unwrap(), Some(seed));

    // 422 for a commit GitHub does not have: no branch appears, so it is not "already exists".
    let unknown = "0123456789abcdef0123456789abcdef01234567";
    assert_kind(
        github.create_branch("fermata/other", unknown).await,
        Kind::Failed,
    );
}

#[tokio::test]
async fn opening_a_pull_request_that_github_already_has_finds_it() {
    let fake = FakeGitHub::start().await;
    let seed = fake.commit_on(BASE, SEED);
    let github = fake.forge();
    let commit = github.create_commit(&publication(&seed)).await.unwrap();
    github.create_branch(HEAD, &commit).await.unwrap();
    let opened = github.open_pull_request(&pull_spec()).await.unwrap();
    fake.take_requests();

    assert_eq!(
        github.open_pull_request(&pull_spec()).await.unwrap(),
        opened
    );
    assert_eq!(
        fake.take_requests(),
        [
            "POST pulls",
            "GET pulls?head=acme%3Afermata%2Fpublication-1&state=all&per_page=100",
        ]
    );

    // A closed one does not block another, and the newest is the one found by its head.
    fake.set_pull_status(opened.number, PullStatus::Closed);
    let reopened = github.open_pull_request(&pull_spec()).await.unwrap();
    assert_eq!(reopened.number, 2);
    assert_eq!(
        github.find_pull_request(HEAD).await.unwrap(),
        Some(reopened)
    );

    // Any other 422 (here: no such head branch) finds nothing open and fails.
    let missing = PullRequestSpec {
        head: "fermata/absent".to_owned(),
        ..pull_spec()
    };
    assert_kind(github.open_pull_request(&missing).await, Kind::Failed);
}

#[tokio::test]
async fn pull_request_states_are_githubs_state_and_merged_at() {
    let fake = FakeGitHub::start().await;
    let seed = fake.commit_on(BASE, SEED);
    let github = fake.forge();
    let commit = github.create_commit(&publication(&seed)).await.unwrap();
    github.create_branch(HEAD, &commit).await.unwrap();
    let opened = github.open_pull_request(&pull_spec()).await.unwrap();

    for (status, state) in [
        (PullStatus::Open, PullState::Open),
        (PullStatus::Closed, PullState::Closed),
        (PullStatus::Merged, PullState::Merged),
    ] {
        fake.set_pull_status(opened.number, status);
        let expected = PullRequest {
            state,
            ..opened.clone()
        };
        assert_eq!(
            github.pull_request(opened.number).await.unwrap(),
            Some(expected.clone()),
            "{status:?}"
        );
        assert_eq!(
            github.find_pull_request(HEAD).await.unwrap(),
            Some(expected),
            "{status:?}"
        );
    }
}

#[tokio::test]
async fn rate_limits_are_retryable_and_carry_the_wait_in_numbers_only() {
    let logs = Logs::default();
    let _guard = logs.capture();
    let fake = FakeGitHub::start().await;
    fake.commit_on(BASE, SEED);
    let github = fake.forge();

    fake.answer_next(Method::GET, "git/ref/heads/main", Canned::PrimaryRateLimit);
    let primary = assert_kind(github.branch_head(BASE).await, Kind::RateLimited);
    assert!(primary.is_retryable());
    fake.answer_next(Method::GET, "pulls", Canned::SecondaryRateLimit(60));
    let secondary = assert_kind(github.find_pull_request(HEAD).await, Kind::RateLimited);
    assert!(secondary.is_retryable());
    // A 403 with requests left is a refusal, not a rate limit.
    fake.answer_next(Method::GET, "git/ref/heads/main", Canned::Forbidden);
    let refused = assert_kind(github.branch_head(BASE).await, Kind::Refused);
    assert!(!refused.is_retryable());
    // Rate limits pass: the same call goes through.
    assert!(github.branch_head(BASE).await.unwrap().is_some());

    assert_eq!(
        (primary.kind(), primary.status()),
        (
            ForgeErrorKind::RateLimited {
                retry_after: None,
                reset: Some(1_767_225_600)
            },
            Some(403)
        )
    );
    assert_eq!(
        (secondary.kind(), secondary.status()),
        (
            ForgeErrorKind::RateLimited {
                retry_after: Some(Duration::from_secs(60)),
                reset: Some(1_767_225_600)
            },
            Some(429)
        )
    );
    assert_eq!(refused.status(), Some(403));
    let text = [&primary, &secondary, &refused].map(chain).join("\n");
    assert!(
        text.contains("status 403") && text.contains("resets at 1767225600"),
        "{text}"
    );
    assert!(
        text.contains("status 429") && text.contains("retry after 60 s"),
        "{text}"
    );
    assert!(
        !text.contains("exceeded") && !text.contains("accessible"),
        "{text}"
    );
    // The errors are logged by whoever handles them, never by the adapter.
    assert_eq!(logs.adapter_lines(), Vec::<String>::new());
}

#[tokio::test]
async fn what_github_does_not_have_is_none_or_a_failure() {
    let fake = FakeGitHub::start().await;
    let seed = fake.commit_on(BASE, SEED);
    let github = fake.forge();

    assert_eq!(github.branch_head("fermata/absent").await.unwrap(), None);
    assert_eq!(github.pull_request(99).await.unwrap(), None);
    assert_eq!(
        github.find_pull_request("fermata/absent").await.unwrap(),
        None
    );

    let missing = "89abcdef0123456789abcdef0123456789abcdef";
    let error = assert_kind(
        github.create_commit(&publication(missing)).await,
        Kind::Refused,
    );
    assert!(!error.is_retryable(), "a missing commit stays missing");
    assert_kind(
        github
            .paths_changed(&seed, missing, &["README.md".to_owned()])
            .await,
        Kind::Refused,
    );
    assert_kind(
        github.create_commit(&publication("not/a/commit")).await,
        Kind::Failed,
    );
}

#[tokio::test]
async fn server_and_network_failures_are_retryable() {
    let logs = Logs::default();
    let _guard = logs.capture();
    let fake = FakeGitHub::start().await;
    fake.commit_on(BASE, SEED);
    let github = fake.forge();

    fake.answer_next(Method::GET, "git/ref/heads/main", Canned::ServerError);
    let error = assert_kind(github.branch_head(BASE).await, Kind::Failed);
    assert!(error.is_retryable());
    assert_eq!(error.status(), Some(500));

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = closed.local_addr().unwrap();
    drop(closed);
    let unreachable = GitHub::new(GitHubSettings {
        api_url: format!("http://{address}"),
        ..fake.settings()
    })
    .unwrap();
    let error = assert_kind(unreachable.branch_head(BASE).await, Kind::Failed);
    assert!(error.is_retryable());
    assert_eq!(error.status(), None);
    // The client's own error is the cause, for the log; its URL is not.
    let text = chain(&error);
    assert!(std::error::Error::source(&error).is_some(), "{text}");
    assert!(!text.contains("http://"), "{text}");
    assert_eq!(logs.adapter_lines(), Vec::<String>::new());
}

#[tokio::test]
async fn the_token_reaches_no_log_line_and_no_error() {
    let logs = Logs::default();
    let _guard = logs.capture();
    let fake = FakeGitHub::start().await;
    let seed = fake.commit_on(BASE, SEED);
    let github = fake.forge();
    let wrong_token = "ghp_wrongToken9876543210zyxwvuSECRET";
    let mut wrong_settings = fake.settings();
    wrong_settings.token = GitHubToken::new(wrong_token);
    let wrong = GitHub::new(wrong_settings.clone()).unwrap();

    let commit = github.create_commit(&publication(&seed)).await.unwrap();
    github.create_branch(HEAD, &commit).await.unwrap();
    github.open_pull_request(&pull_spec()).await.unwrap();
    let mut errors = Vec::new();
    fake.answer_next(Method::POST, "git/trees", Canned::PrimaryRateLimit);
    errors.push(github.create_commit(&publication(&seed)).await.unwrap_err());
    fake.answer_next(Method::GET, "pulls/1", Canned::ServerError);
    errors.push(github.pull_request(1).await.unwrap_err());
    errors.push(github.create_branch(HEAD, &seed).await.unwrap_err());
    errors.push(assert_kind(wrong.branch_head(BASE).await, Kind::Refused));
    errors.push(wrong.create_commit(&publication(&seed)).await.unwrap_err());

    assert_eq!(errors.len(), 5);
    assert_eq!(errors[3].status(), Some(401));
    let text = errors.iter().map(chain).collect::<Vec<_>>().join("\n");
    let mut shown = vec![
        format!("{text}\n{}", logs.text()),
        format!("{github:?}"),
        format!("{wrong:?}"),
        format!("{wrong_settings:?}"),
        format!("{:?}", fake.settings()),
    ];
    shown.extend(errors.iter().map(|error| format!("{error} {error:?}")));
    assert!(
        !shown[0].contains("http://"),
        "a URL was logged: {}",
        shown[0]
    );
    for shown in shown {
        for secret in [TOKEN, wrong_token, "Bearer"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
    }
}

#[test]
fn settings_that_cannot_be_used_are_refused() {
    let settings = |api_url: &str, owner: &str, repository: &str, token: &str| GitHubSettings {
        api_url: api_url.to_owned(),
        owner: owner.to_owned(),
        repository: repository.to_owned(),
        token: GitHubToken::new(token),
    };
    for api_url in ["https://api.github.com", "https://ghe.example/api/v3/"] {
        assert!(GitHub::new(settings(api_url, "acme", "schemas.git-1_x", "t")).is_ok());
    }
    for (api_url, owner, repository, token, expected) in [
        ("ftp://github.example", "acme", "schemas", "t", "ApiUrl"),
        (
            "https://user:secret@github.example",
            "acme",
            "schemas",
            "t",
            "ApiUrl",
        ),
        (
            "https://github.example/?token=t",
            "acme",
            "schemas",
            "t",
            "ApiUrl",
        ),
        ("not a url", "acme", "schemas", "t", "ApiUrl"),
        (
            "https://api.github.com",
            "acme/evil",
            "schemas",
            "t",
            "Name",
        ),
        ("https://api.github.com", "acme", "..", "t", "Name"),
        ("https://api.github.com", "acme", "", "t", "Name"),
        (
            "https://api.github.com",
            "acme",
            "schemas",
            "line\nbreak",
            "Token",
        ),
    ] {
        let error = GitHub::new(settings(api_url, owner, repository, token)).unwrap_err();
        assert_eq!(
            format!("{error:?}"),
            expected,
            "{api_url} {owner} {repository}"
        );
        assert!(!error.to_string().contains("secret"));
    }
}

/// The same cases on both adapters, over the same two commits.
#[tokio::test]
async fn paths_changed_compares_the_objects_at_each_path() {
    const NEXT: &[(&str, &[u8])] = &[
        ("README.md", b"# Schemas\n"),
        (
            "registry.json",
            b"{\"databases\":[\"keep\",\"old\",\"shop\"]}\n",
        ),
        (
            "databases/added/tables/x.sql",
            b"CREATE TABLE `x` (`id` int);\n",
        ),
        (
            "databases/keep/tables/k.sql",
            b"CREATE TABLE `k` (`id` int);\n",
        ),
        (
            "databases/old/tables/t.sql",
            b"CREATE TABLE `t` (`id` int);\n",
        ),
        ("databases/shop/manifest.json", b"{\"hash\":\"1\"}\n"),
        (
            "databases/shop/tables/legacy.sql",
            b"CREATE TABLE `legacy` (`id` int);\n",
        ),
        (
            "databases/shop/tables/orders.sql",
            b"CREATE TABLE `orders` (`id` bigint);\n",
        ),
        (
            "databases/shop/views/v.sql",
            b"CREATE VIEW `v` AS SELECT 1;\n",
        ),
    ];
    let fake = FakeGitHub::start().await;
    let before = fake.commit_on(BASE, SEED);
    let after = fake.commit_on(BASE, NEXT);
    let folder = tempfile::tempdir().unwrap();
    let (local, local_before) = local_repository(folder.path());
    let local_after = commit_files(&local, Some(Oid::from_str(&local_before).unwrap()), NEXT);
    assert_eq!(
        (before.as_str(), after.clone()),
        (local_before.as_str(), local_after.to_string())
    );
    let github = fake.forge();
    let local = LocalGit::new(folder.path());
    let forges: [&dyn Forge; 2] = [&github, &local];

    let cases: &[(&[&str], bool)] = &[
        (&["databases/shop/tables/orders.sql"], true),
        (&["databases/shop"], true),
        (&["databases"], true),
        (&["databases/added"], true),
        (&["registry.json"], false),
        (
            &["databases/keep", "README.md", "databases/shop/views"],
            false,
        ),
        (
            &["databases/absent", "databases/shop/tables/absent.sql"],
            false,
        ),
        (&["README.md", "databases/shop/tables"], true),
        (&[], false),
    ];
    for forge in forges {
        for (paths, changed) in cases {
            let paths: Vec<String> = paths.iter().map(|path| (*path).to_owned()).collect();
            assert_eq!(
                forge.paths_changed(&before, &after, &paths).await.unwrap(),
                *changed,
                "{forge:?} {paths:?}"
            );
        }
        assert!(
            !forge
                .paths_changed(&before, &before, &["databases".to_owned()])
                .await
                .unwrap()
        );
    }

    // Equal trees need no listing at all.
    fake.take_requests();
    github
        .paths_changed(&after, &after, &["databases".to_owned()])
        .await
        .unwrap();
    assert_eq!(
        fake.take_requests(),
        [
            format!("GET git/commits/{after}"),
            format!("GET git/commits/{after}")
        ]
    );
}

#[tokio::test]
async fn files_and_folders_read_the_same_on_both_forges() {
    let fake = FakeGitHub::start().await;
    let seed = fake.commit_on(BASE, SEED);
    let folder = tempfile::tempdir().unwrap();
    let (_local, local_seed) = local_repository(folder.path());
    assert_eq!(seed, local_seed);
    let github = fake.forge();
    let local = LocalGit::new(folder.path());
    let forges: [&dyn Forge; 2] = [&github, &local];
    for forge in forges {
        assert_eq!(
            forge.read_file(&seed, "README.md").await.unwrap(),
            Some(b"# Schemas\n".to_vec())
        );
        assert_eq!(forge.read_file(&seed, "absent.md").await.unwrap(), None);
        assert_eq!(
            forge
                .read_file(&seed, "databases/absent/x.sql")
                .await
                .unwrap(),
            None
        );
        assert_kind(forge.read_file(&seed, "databases/shop").await, Kind::Failed);
        assert_kind(
            forge.read_file(&seed, "README.md/inside").await,
            Kind::Failed,
        );
        assert_eq!(
            forge.read_folder(&seed, "databases/shop").await.unwrap(),
            Some(files(&[
                ("manifest.json", b"{\"hash\":\"1\"}\n"),
                ("tables/legacy.sql", b"CREATE TABLE `legacy` (`id` int);\n"),
                ("tables/orders.sql", b"CREATE TABLE `orders` (`id` int);\n"),
                ("views/v.sql", b"CREATE VIEW `v` AS SELECT 1;\n"),
            ]))
        );
        assert_eq!(
            forge.read_folder(&seed, "databases/absent").await.unwrap(),
            None
        );
        assert_kind(forge.read_folder(&seed, "README.md").await, Kind::Failed);
        // A commit is named by its full ID only.
        assert_kind(
            forge.read_file(&seed[..12], "README.md").await,
            Kind::Failed,
        );
    }
}

#[tokio::test]
async fn closing_a_pull_request_closes_it_on_github() {
    let fake = FakeGitHub::start().await;
    let seed = fake.commit_on(BASE, SEED);
    let github = fake.forge();
    let commit = github.create_commit(&publication(&seed)).await.unwrap();
    github.create_branch(HEAD, &commit).await.unwrap();
    let pull = github.open_pull_request(&pull_spec()).await.unwrap();
    assert!(github.close_pull_request(pull.number).await.unwrap());
    assert_eq!(
        github
            .pull_request(pull.number)
            .await
            .unwrap()
            .unwrap()
            .state,
        PullState::Closed
    );
    assert!(github.close_pull_request(pull.number).await.unwrap());
    assert!(!github.close_pull_request(999).await.unwrap());
    // The closed pull request's branch is deleted, once.
    assert!(github.delete_branch(HEAD).await.unwrap());
    assert_eq!(github.branch_head(HEAD).await.unwrap(), None);
    assert!(!github.delete_branch(HEAD).await.unwrap());
}
