//! The GitHub forge: one repository on GitHub (or GitHub Enterprise Server), through the REST
//! API's git data endpoints (refs, commits, trees, blobs) and its pull requests, with API
//! version `2022-11-28`.
//!
//! How the port's contracts are met:
//!
//! - [`Forge::branch_head`] reads `git/ref/heads/{branch}`, the endpoint that answers only an
//!   exact name (the plural `git/refs/...` would list every ref the name prefixes); 404 is no
//!   branch.
//! - [`Forge::paths_changed`] compares the git objects at each path in the two commits' trees,
//!   found one level at a time with non-recursive tree listings. The compare endpoint was the
//!   other candidate, but it diffs `to` against the merge base of the two commits (not the
//!   same thing once the base branch was rewritten) and lists at most 300 files, so a large
//!   change would have to count as "changed" unseen; the tree walk answers exactly what the
//!   local adapter answers, in a few requests whatever the size of the change.
//! - [`Forge::create_commit`] reads the parent's tree, lists each replaced folder there, and
//!   creates one tree on top of the parent's (`base_tree`) holding only the differences: a
//!   `"sha": null` entry for every file of an old folder that its new files lack (a folder
//!   left without files disappears), and an entry for every file that is new or differs from
//!   the parent's (the git object ID is computed here to tell). Text goes inline as the entry's
//!   `content`; only content that is not UTF-8 is uploaded first as a base64 blob. GitHub
//!   allows about 80 content-creating requests a minute and 500 an hour, so a blob per file
//!   would stall the first publication of any sizeable schema. The commit then carries the
//!   spec's signature as author and committer, dated in RFC 3339 UTC: git objects are named by
//!   their content, so a retry of the same spec creates the same tree and the same commit
//!   (no signature is asked for, so nothing else goes into the object).
//! - [`Forge::create_branch`] creates the ref; GitHub answers 422 both when it exists and for
//!   other invalid requests, so a 422 is followed by a read of the branch, which decides
//!   between success, `PUBLICATION_CONFLICT` and failure without parsing GitHub's message.
//! - [`Forge::find_pull_request`] lists pull requests of any state with the head filter
//!   `{owner}:{head}` (up to 100, far more than one head branch ever has) and keeps only those
//!   whose head is that branch of that owner rather than trust the filter alone; the highest
//!   number wins, as in the local adapter. [`Forge::open_pull_request`] treats a 422 the same way as
//!   the branch: a lookup by head finds the open pull request GitHub refused to duplicate.
//!   A pull request is merged when `merged_at` is set, else open or closed as `state` says;
//!   its head commit is GitHub's `head.sha`, which stays the commit it was opened at because
//!   nothing pushes to a publication branch afterwards.
//!
//! Every failure is a [`ForgeError`] naming the action and the status. A 403 or 429 that says
//! the rate limit is spent (`x-ratelimit-remaining: 0`, a `retry-after` header, or any 429) is
//! the retryable [`ForgeErrorKind::RateLimited`], with the seconds to wait and the reset time;
//! any other 4xx but a timeout (401, other 403s, a resource that must exist and does not, a 422
//! the adapter does not resolve by reading) is the permanent [`ForgeErrorKind::Refused`], which
//! is not retried; the rest (network errors, timeouts, 5xx, an answer that does not parse) is the
//! retryable [`ForgeErrorKind::Failed`], with the client's error as its source. The adapter logs
//! nothing itself: whoever handles the error logs it. No error carries a URL (the client's are
//! stripped of theirs), a response body or the token: the token lives in a [`GitHubToken`] until
//! it becomes a header marked sensitive.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use reqwest::{RequestBuilder, Response, StatusCode, Url};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::json;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use zeroize::Zeroizing;

use crate::error::{ForgeContext, ForgeError, ForgeErrorKind};
use crate::{CommitSpec, Forge, PullRequest, PullRequestSpec, PullState, TreeChange};

/// The API of github.com. GitHub Enterprise Server serves it at `https://<host>/api/v3`.
pub const DEFAULT_API_URL: &str = "https://api.github.com";

const API_VERSION: &str = "2022-11-28";
const MEDIA_TYPE: &str = "application/vnd.github+json";
const USER_AGENT: &str = concat!("fermata/", env!("CARGO_PKG_VERSION"));
/// How long one request may take in all, and its connection.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The mode of every file Fermata writes: a plain, non-executable file.
const FILE_MODE: &str = "100644";
/// The modes of regular files (plain and executable); links (`120000`) and submodules are not.
const REGULAR_MODES: [&str; 2] = ["100644", "100755"];

/// A GitHub token (personal, fine-grained or an app's). Its `Debug` is redacted and it has no
/// `Display`; the adapter only ever puts it in a header marked sensitive.
#[derive(Clone)]
pub struct GitHubToken(Zeroizing<String>);

impl GitHubToken {
    pub fn new(token: impl Into<String>) -> Self {
        GitHubToken(Zeroizing::new(token.into()))
    }
}

impl fmt::Debug for GitHubToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GitHubToken(<redacted>)")
    }
}

/// Where the repository is and how to reach it.
#[derive(Debug, Clone)]
pub struct GitHubSettings {
    /// The REST API's root URL ([`DEFAULT_API_URL`] unless GitHub Enterprise Server or a test).
    pub api_url: String,
    /// The account or organization that owns the repository.
    pub owner: String,
    pub repository: String,
    pub token: GitHubToken,
}

impl GitHubSettings {
    /// Settings for `owner/repository` on github.com.
    pub fn new(
        owner: impl Into<String>,
        repository: impl Into<String>,
        token: GitHubToken,
    ) -> Self {
        GitHubSettings {
            api_url: DEFAULT_API_URL.to_owned(),
            owner: owner.into(),
            repository: repository.into(),
            token,
        }
    }
}

/// Settings [`GitHub::new`] cannot use. The messages name the problem, never the value.
#[derive(Debug, thiserror::Error)]
pub enum GitHubSettingsError {
    #[error(
        "the GitHub API URL is not an http or https URL without credentials, query or fragment"
    )]
    ApiUrl,
    #[error("the GitHub owner or repository is not a valid GitHub name")]
    Name,
    #[error("the GitHub token cannot be sent in an HTTP header")]
    Token,
    #[error("the HTTP client for GitHub could not be built")]
    Client(#[source] reqwest::Error),
}

/// A GitHub repository as a forge. The client pools connections and is cheap to share.
#[derive(Clone)]
pub struct GitHub {
    client: reqwest::Client,
    /// `{api}/repos/{owner}/{repository}`: every endpoint the adapter uses lies below it.
    repository_url: Url,
    /// The owner part of the head filter when pull requests are looked up by branch.
    owner: String,
    /// `Bearer <token>`, marked sensitive so that no `Debug` of a request shows it.
    authorization: HeaderValue,
}

impl fmt::Debug for GitHub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitHub")
            .field("repository_url", &self.repository_url.as_str())
            .finish_non_exhaustive()
    }
}

impl GitHub {
    /// Checks the settings and builds the HTTP client; nothing is sent before the first call.
    pub fn new(settings: GitHubSettings) -> Result<Self, GitHubSettingsError> {
        let GitHubSettings {
            api_url,
            owner,
            repository,
            token,
        } = settings;
        if !is_github_name(&owner) || !is_github_name(&repository) {
            return Err(GitHubSettingsError::Name);
        }
        // Dropped on purpose here and for the token: the parser's error can quote the value.
        let mut repository_url = Url::parse(&api_url).map_err(|_| GitHubSettingsError::ApiUrl)?;
        if !matches!(repository_url.scheme(), "http" | "https")
            || !repository_url.username().is_empty()
            || repository_url.password().is_some()
            || repository_url.query().is_some()
            || repository_url.fragment().is_some()
        {
            return Err(GitHubSettingsError::ApiUrl);
        }
        repository_url
            .path_segments_mut()
            .map_err(|()| GitHubSettingsError::ApiUrl)?
            .pop_if_empty()
            .extend(["repos", owner.as_str(), repository.as_str()]);
        let bearer = Zeroizing::new(format!("Bearer {}", token.0.as_str()));
        let mut authorization =
            HeaderValue::from_str(&bearer).map_err(|_| GitHubSettingsError::Token)?;
        authorization.set_sensitive(true);
        let headers = HeaderMap::from_iter([
            (ACCEPT, HeaderValue::from_static(MEDIA_TYPE)),
            (
                HeaderName::from_static("x-github-api-version"),
                HeaderValue::from_static(API_VERSION),
            ),
        ]);
        let client = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .default_headers(headers)
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(GitHubSettingsError::Client)?;
        Ok(GitHub {
            client,
            repository_url,
            owner,
            authorization,
        })
    }
}

#[async_trait]
impl Forge for GitHub {
    async fn branch_head(&self, branch: &str) -> Result<Option<String>, ForgeError> {
        const ACTION: &str = "read a branch";
        let url = self.url(&format!("git/ref/heads/{branch}"));
        let response = self
            .send(ACTION, self.client.get(url), &[StatusCode::NOT_FOUND])
            .await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let reference: Reference = parse(ACTION, response).await?;
        Ok(Some(reference.object.sha))
    }

    async fn paths_changed(
        &self,
        from: &str,
        to: &str,
        paths: &[String],
    ) -> Result<bool, ForgeError> {
        let before = self.commit_tree(from).await?;
        let after = self.commit_tree(to).await?;
        if before == after {
            return Ok(false);
        }
        let mut listings = Listings::default();
        for path in paths {
            let old = self.entry_at(&mut listings, &before, path).await?;
            let new = self.entry_at(&mut listings, &after, path).await?;
            if old.as_ref().map(TreeEntry::object) != new.as_ref().map(TreeEntry::object) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    async fn create_commit(&self, spec: &CommitSpec) -> Result<String, ForgeError> {
        let base_tree = self.commit_tree(&spec.parent).await?;
        let entries = self.tree_entries(&base_tree, &spec.change).await?;
        // A change that changes nothing would be an empty `tree` list, which the API refuses;
        // the commit then simply keeps its parent's tree.
        let tree = if entries.is_empty() {
            base_tree
        } else {
            let body = NewTree {
                base_tree: &base_tree,
                tree: &entries,
            };
            self.create("create the commit's tree", "git/trees", &body)
                .await?
        };
        let signature = json!({
            "name": spec.signature.name,
            "email": spec.signature.email,
            "date": git_date(spec.signature.time)?,
        });
        let body = json!({
            "message": spec.message,
            "tree": tree,
            "parents": [spec.parent],
            "author": signature,
            "committer": signature,
        });
        self.create("create the commit", "git/commits", &body).await
    }

    async fn create_branch(&self, branch: &str, commit: &str) -> Result<(), ForgeError> {
        check_commit_id(commit)?;
        let body = json!({ "ref": format!("refs/heads/{branch}"), "sha": commit });
        let request = self.client.post(self.url("git/refs")).json(&body);
        let response = self
            .send(
                "create the branch",
                request,
                &[StatusCode::UNPROCESSABLE_ENTITY],
            )
            .await?;
        if response.status() != StatusCode::UNPROCESSABLE_ENTITY {
            return Ok(());
        }
        match self.branch_head(branch).await? {
            Some(existing) if existing.eq_ignore_ascii_case(commit) => Ok(()),
            Some(_) => Err(ForgeError::new(
                ForgeErrorKind::Conflict,
                "create the branch",
            )),
            None => Err(ForgeError::failed("create the branch").with_status(422)),
        }
    }

    async fn find_pull_request(&self, head: &str) -> Result<Option<PullRequest>, ForgeError> {
        const ACTION: &str = "look up a pull request by its head";
        let mut url = self.url("pulls");
        url.query_pairs_mut()
            .append_pair("head", &format!("{}:{head}", self.owner))
            .append_pair("state", "all")
            .append_pair("per_page", "100");
        let response = self.send(ACTION, self.client.get(url), &[]).await?;
        let pulls: Vec<Pull> = parse(ACTION, response).await?;
        Ok(pulls
            .into_iter()
            .filter(|pull| pull.head.is_branch(&self.owner, head))
            .max_by_key(|pull| pull.number)
            .map(Pull::into_pull_request))
    }

    async fn open_pull_request(&self, spec: &PullRequestSpec) -> Result<PullRequest, ForgeError> {
        const ACTION: &str = "open the pull request";
        let body = json!({
            "title": spec.title,
            "head": spec.head,
            "base": spec.base,
            "body": spec.body,
        });
        let request = self.client.post(self.url("pulls")).json(&body);
        let response = self
            .send(ACTION, request, &[StatusCode::UNPROCESSABLE_ENTITY])
            .await?;
        if response.status() != StatusCode::UNPROCESSABLE_ENTITY {
            let pull: Pull = parse(ACTION, response).await?;
            return Ok(pull.into_pull_request());
        }
        match self.find_pull_request(&spec.head).await? {
            Some(pull) if pull.state == PullState::Open && pull.base == spec.base => Ok(pull),
            _ => Err(ForgeError::failed(ACTION).with_status(422)),
        }
    }

    async fn pull_request(&self, number: u64) -> Result<Option<PullRequest>, ForgeError> {
        const ACTION: &str = "read a pull request";
        let url = self.url(&format!("pulls/{number}"));
        let response = self
            .send(ACTION, self.client.get(url), &[StatusCode::NOT_FOUND])
            .await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let pull: Pull = parse(ACTION, response).await?;
        Ok(Some(pull.into_pull_request()))
    }

    async fn close_pull_request(&self, number: u64) -> Result<bool, ForgeError> {
        const ACTION: &str = "close a pull request";
        let url = self.url(&format!("pulls/{number}"));
        let request = self.client.patch(url).json(&json!({ "state": "closed" }));
        let response = self.send(ACTION, request, &[StatusCode::NOT_FOUND]).await?;
        Ok(response.status() != StatusCode::NOT_FOUND)
    }

    async fn delete_branch(&self, branch: &str) -> Result<bool, ForgeError> {
        let url = self.url(&format!("git/refs/heads/{branch}"));
        // GitHub answers a reference that does not exist with 422 (or 404).
        let absent = [StatusCode::NOT_FOUND, StatusCode::UNPROCESSABLE_ENTITY];
        let response = self
            .send("delete the branch", self.client.delete(url), &absent)
            .await?;
        Ok(response.status().is_success())
    }

    async fn read_file(&self, commit: &str, path: &str) -> Result<Option<Vec<u8>>, ForgeError> {
        match self.read_entry(commit, path).await? {
            Some(entry) => self.file_content(&entry).await.map(Some),
            None => Ok(None),
        }
    }

    async fn read_folder(
        &self,
        commit: &str,
        path: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, ForgeError> {
        let Some(folder) = self.read_entry(commit, path).await? else {
            return Ok(None);
        };
        if folder.kind != "tree" {
            return Err(ForgeError::failed(
                "a package path names something other than a folder",
            ));
        }
        let mut files = BTreeMap::new();
        for entry in self.tree(&folder.sha, true).await? {
            if entry.kind == "tree" {
                continue;
            }
            let content = self.file_content(&entry).await?;
            files.insert(entry.path, content);
        }
        Ok(Some(files))
    }
}

/// Tree listings already read during one call, by tree SHA (a tree never changes).
type Listings = HashMap<String, Vec<TreeEntry>>;

/// What a path of the new tree becomes.
enum Planned<'change> {
    Delete(TreeEntry),
    Write(&'change [u8]),
}

impl GitHub {
    /// The URL of `path` (`/`-separated) below the repository, each segment percent-encoded.
    fn url(&self, path: &str) -> Url {
        let mut url = self.repository_url.clone();
        url.path_segments_mut()
            .expect("the repository URL was checked to have a path when the adapter was made")
            .extend(path.split('/'));
        url
    }

    /// Sends `request` and sorts the answer: a success or one of `expected` is returned, and
    /// every other answer becomes the error of its kind, with the action and the status.
    async fn send(
        &self,
        action: &'static str,
        request: RequestBuilder,
        expected: &[StatusCode],
    ) -> Result<Response, ForgeError> {
        let response = request
            .header(AUTHORIZATION, self.authorization.clone())
            .send()
            .await
            .map_err(|error| client_error(action, error))?;
        let status = response.status();
        if status.is_success() || expected.contains(&status) {
            return Ok(response);
        }
        let kind = if let Some(limit) = RateLimit::of(status, response.headers()) {
            ForgeErrorKind::RateLimited {
                retry_after: limit.retry_after.map(Duration::from_secs),
                reset: limit.reset,
            }
        } else if status.is_client_error() && status != StatusCode::REQUEST_TIMEOUT {
            // A 4xx other than a timeout says the request itself is refused: repeating it
            // unchanged cannot succeed, so it is not retried. Server errors may pass.
            ForgeErrorKind::Refused
        } else {
            ForgeErrorKind::Failed
        };
        Err(ForgeError::new(kind, action).with_status(status.as_u16()))
    }

    /// POSTs `body` to the endpoint at `path`, which creates a git object, and returns its SHA.
    async fn create(
        &self,
        action: &'static str,
        path: &str,
        body: &impl Serialize,
    ) -> Result<String, ForgeError> {
        let request = self.client.post(self.url(path)).json(body);
        let response = self.send(action, request, &[]).await?;
        let created: Created = parse(action, response).await?;
        Ok(created.sha)
    }

    /// The tree of `commit`, which must exist.
    async fn commit_tree(&self, commit: &str) -> Result<String, ForgeError> {
        const ACTION: &str = "read a commit";
        check_commit_id(commit)?;
        let url = self.url(&format!("git/commits/{commit}"));
        let response = self.send(ACTION, self.client.get(url), &[]).await?;
        let commit: Commit = parse(ACTION, response).await?;
        Ok(commit.tree.sha)
    }

    /// The entries of tree `sha` (all of them, at any depth, when `recursive`). A listing that
    /// GitHub truncated cannot answer what the tree holds, so it is a failure.
    async fn tree(&self, sha: &str, recursive: bool) -> Result<Vec<TreeEntry>, ForgeError> {
        const ACTION: &str = "list a tree";
        let mut url = self.url(&format!("git/trees/{sha}"));
        if recursive {
            url.query_pairs_mut().append_pair("recursive", "1");
        }
        let response = self.send(ACTION, self.client.get(url), &[]).await?;
        let tree: Tree = parse(ACTION, response).await?;
        if tree.truncated {
            return Err(ForgeError::failed("GitHub truncated a tree listing"));
        }
        Ok(tree.tree)
    }

    /// The entry at `path` below the tree `root`, found one folder at a time.
    async fn entry_at(
        &self,
        listings: &mut Listings,
        root: &str,
        path: &str,
    ) -> Result<Option<TreeEntry>, ForgeError> {
        let (folders, name) = match path.rsplit_once('/') {
            Some((folders, name)) => (Some(folders), name),
            None => (None, path),
        };
        let mut tree = root.to_owned();
        for folder in folders.into_iter().flat_map(|folders| folders.split('/')) {
            match self.child(listings, &tree, folder).await? {
                Some(entry) if entry.kind == "tree" => tree = entry.sha,
                _ => return Ok(None),
            }
        }
        self.child(listings, &tree, name).await
    }

    /// The entry called `name` in tree `tree`.
    async fn child(
        &self,
        listings: &mut Listings,
        tree: &str,
        name: &str,
    ) -> Result<Option<TreeEntry>, ForgeError> {
        if !listings.contains_key(tree) {
            let entries = self.tree(tree, false).await?;
            listings.insert(tree.to_owned(), entries);
        }
        Ok(listings[tree]
            .iter()
            .find(|entry| entry.path == name)
            .cloned())
    }

    /// Every file (any non-tree entry) at or below `folder` in tree `root`, by full path.
    async fn files_under(
        &self,
        listings: &mut Listings,
        root: &str,
        folder: &str,
    ) -> Result<BTreeMap<String, TreeEntry>, ForgeError> {
        Ok(match self.entry_at(listings, root, folder).await? {
            None => BTreeMap::new(),
            Some(entry) if entry.kind == "tree" => self
                .tree(&entry.sha, true)
                .await?
                .into_iter()
                .filter(|entry| entry.kind != "tree")
                .map(|entry| (format!("{folder}/{}", entry.path), entry))
                .collect(),
            Some(entry) => BTreeMap::from([(folder.to_owned(), entry)]),
        })
    }

    /// The entries of the tree to create on `base_tree`: only what differs from it.
    async fn tree_entries(
        &self,
        base_tree: &str,
        change: &TreeChange,
    ) -> Result<Vec<NewEntry>, ForgeError> {
        let mut listings = Listings::default();
        let mut plan: BTreeMap<String, Planned<'_>> = BTreeMap::new();
        for (folder, files) in &change.folders {
            let mut old = self.files_under(&mut listings, base_tree, folder).await?;
            for (path, content) in files {
                let path = format!("{folder}/{path}");
                let unchanged = old.remove(&path).is_some_and(|entry| entry.holds(content));
                if !unchanged {
                    plan.insert(path, Planned::Write(content));
                }
            }
            for (path, entry) in old {
                plan.insert(path, Planned::Delete(entry));
            }
        }
        for (path, content) in &change.files {
            plan.insert(path.clone(), Planned::Write(content));
        }
        let mut entries = Vec::with_capacity(plan.len());
        for (path, planned) in plan {
            entries.push(match planned {
                Planned::Delete(entry) => NewEntry {
                    path,
                    mode: entry.mode,
                    kind: entry.kind,
                    object: NewObject::Sha(None),
                },
                Planned::Write(content) => NewEntry {
                    path,
                    mode: FILE_MODE.to_owned(),
                    kind: "blob".to_owned(),
                    object: match std::str::from_utf8(content) {
                        Ok(text) => NewObject::Content(text.to_owned()),
                        Err(_) => NewObject::Sha(Some(self.create_blob(content).await?)),
                    },
                },
            });
        }
        Ok(entries)
    }

    /// The entry at `path` in commit `commit`: `None` when a component is missing, refused when
    /// a component before the last is not a folder.
    async fn read_entry(&self, commit: &str, path: &str) -> Result<Option<TreeEntry>, ForgeError> {
        let mut tree = self.commit_tree(commit).await?;
        let mut components = path.split('/').peekable();
        let mut listings = Listings::default();
        while let Some(component) = components.next() {
            let Some(entry) = self.child(&mut listings, &tree, component).await? else {
                return Ok(None);
            };
            if components.peek().is_none() {
                return Ok(Some(entry));
            }
            if entry.kind != "tree" {
                return Err(ForgeError::failed(
                    "a package path runs through something other than a folder",
                ));
            }
            tree = entry.sha;
        }
        Ok(None)
    }

    /// The content of a regular file's entry; anything else (a link, a submodule) is refused.
    async fn file_content(&self, entry: &TreeEntry) -> Result<Vec<u8>, ForgeError> {
        const ACTION: &str = "read a file";
        if entry.kind != "blob" || !REGULAR_MODES.contains(&entry.mode.as_str()) {
            return Err(ForgeError::failed(
                "a package path names something other than a regular file",
            ));
        }
        let url = self.url(&format!("git/blobs/{}", entry.sha));
        let response = self.send(ACTION, self.client.get(url), &[]).await?;
        let blob: Blob = parse(ACTION, response).await?;
        let encoded: String = blob.content.split_whitespace().collect();
        match blob.encoding.as_str() {
            "base64" => BASE64
                .decode(encoded.as_bytes())
                .context("decode a blob GitHub sent as base64"),
            _ => Err(ForgeError::failed(
                "GitHub sent a blob in an encoding the adapter does not read",
            )),
        }
    }

    async fn create_blob(&self, content: &[u8]) -> Result<String, ForgeError> {
        let body = json!({ "content": BASE64.encode(content), "encoding": "base64" });
        self.create("upload a file", "git/blobs", &body).await
    }
}

/// What a 403 or 429 says about the rate limit, when it says the limit is spent.
struct RateLimit {
    /// Seconds to wait, from `retry-after` (when it is a number of seconds).
    retry_after: Option<u64>,
    /// When the limit resets, in seconds since the Unix epoch, from `x-ratelimit-reset`.
    reset: Option<u64>,
}

impl RateLimit {
    fn of(status: StatusCode, headers: &HeaderMap) -> Option<Self> {
        if status != StatusCode::FORBIDDEN && status != StatusCode::TOO_MANY_REQUESTS {
            return None;
        }
        let number =
            |name: &str| -> Option<u64> { headers.get(name)?.to_str().ok()?.trim().parse().ok() };
        let spent = status == StatusCode::TOO_MANY_REQUESTS
            || headers.contains_key(RETRY_AFTER)
            || number("x-ratelimit-remaining") == Some(0);
        spent.then(|| RateLimit {
            retry_after: number(RETRY_AFTER.as_str()),
            reset: number("x-ratelimit-reset"),
        })
    }
}

/// Reads a JSON answer; what does not parse is a failure whose source is the client's error.
async fn parse<T: DeserializeOwned>(
    action: &'static str,
    response: Response,
) -> Result<T, ForgeError> {
    response
        .json()
        .await
        .map_err(|error| client_error(action, error))
}

/// The HTTP client's error met while doing `action`, without its URL: the URL names the
/// repository and the API's address, and the action says enough.
fn client_error(action: &'static str, error: reqwest::Error) -> ForgeError {
    ForgeError::failed(action).with_source(error.without_url())
}

/// A commit time as the API takes it: `2026-12-01T07:08:49Z`.
fn git_date(seconds: i64) -> Result<String, ForgeError> {
    OffsetDateTime::from_unix_timestamp(seconds)
        .ok()
        .and_then(|date| date.format(&Rfc3339).ok())
        .ok_or_else(|| ForgeError::failed("a commit time cannot be written as a date"))
}

/// A commit ID goes into a URL path, so it must be what it claims: hexadecimal.
fn check_commit_id(id: &str) -> Result<(), ForgeError> {
    // A full ID, as the port requires: GitHub would resolve a prefix.
    if id.len() == 40 && id.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(ForgeError::failed(
            "a commit ID is not a full hexadecimal ID",
        ))
    }
}

/// The characters GitHub allows in account and repository names.
fn is_github_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'))
}

/// A blob as `GET git/blobs/{sha}` sends it.
#[derive(Deserialize)]
struct Blob {
    content: String,
    encoding: String,
}

#[derive(Deserialize)]
struct Reference {
    object: ReferenceObject,
}

#[derive(Deserialize)]
struct ReferenceObject {
    sha: String,
}

#[derive(Deserialize)]
struct Commit {
    tree: Created,
}

/// The part of a created (or referenced) git object the adapter needs.
#[derive(Deserialize)]
struct Created {
    sha: String,
}

#[derive(Deserialize)]
struct Tree {
    tree: Vec<TreeEntry>,
    truncated: bool,
}

#[derive(Debug, Clone, Deserialize)]
struct TreeEntry {
    /// The name in its tree, or the path below the listed tree in a recursive listing.
    path: String,
    mode: String,
    #[serde(rename = "type")]
    kind: String,
    sha: String,
}

impl TreeEntry {
    /// What the entry is, for comparisons: its object and mode.
    fn object(&self) -> (&str, &str) {
        (&self.sha, &self.mode)
    }

    /// Whether the entry is a plain file with exactly `content`.
    fn holds(&self, content: &[u8]) -> bool {
        self.kind == "blob"
            && self.mode == FILE_MODE
            && git2::Oid::hash_object(git2::ObjectType::Blob, content)
                .is_ok_and(|id| id.to_string().eq_ignore_ascii_case(&self.sha))
    }
}

/// A tree to create: `base_tree` with `tree`'s entries written over it.
#[derive(Serialize)]
struct NewTree<'entries> {
    base_tree: &'entries str,
    tree: &'entries [NewEntry],
}

/// An entry of a tree to create, as the API takes it.
#[derive(Serialize)]
struct NewEntry {
    path: String,
    mode: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(flatten)]
    object: NewObject,
}

/// The entry's object: text GitHub writes as a blob, or an existing object's SHA (`null`
/// deletes the path). The API refuses an entry with both.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum NewObject {
    Content(String),
    Sha(Option<String>),
}

#[derive(Deserialize)]
struct Pull {
    number: u64,
    html_url: String,
    state: PullStateJson,
    merged_at: Option<String>,
    head: PullBranch,
    base: PullBranch,
}

#[derive(Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum PullStateJson {
    Open,
    Closed,
}

#[derive(Deserialize)]
struct PullBranch {
    /// `owner:branch`.
    label: String,
    #[serde(rename = "ref")]
    name: String,
    sha: String,
}

impl PullBranch {
    /// Whether this is `branch` of `owner` (GitHub account names ignore case).
    fn is_branch(&self, owner: &str, branch: &str) -> bool {
        self.name == branch
            && self
                .label
                .split_once(':')
                .is_some_and(|(label_owner, _)| label_owner.eq_ignore_ascii_case(owner))
    }
}

impl Pull {
    fn into_pull_request(self) -> PullRequest {
        let state = if self.merged_at.is_some() {
            PullState::Merged
        } else if self.state == PullStateJson::Open {
            PullState::Open
        } else {
            PullState::Closed
        };
        PullRequest {
            number: self.number,
            url: self.html_url,
            head: self.head.name,
            base: self.base.name,
            head_commit: self.head.sha,
            state,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_times_are_rfc_3339_in_utc() {
        assert_eq!(git_date(1_796_108_929).unwrap(), "2026-12-01T07:08:49Z");
        assert_eq!(git_date(0).unwrap(), "1970-01-01T00:00:00Z");
        assert!(git_date(i64::MAX).is_err());
    }

    #[test]
    fn only_a_spent_limit_is_a_rate_limit() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            HeaderMap::from_iter(pairs.iter().map(|(name, value)| {
                (
                    HeaderName::from_static(name),
                    HeaderValue::from_static(value),
                )
            }))
        };
        let spent = headers(&[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1767225600"),
        ]);
        let left = headers(&[("x-ratelimit-remaining", "12")]);
        let wait = headers(&[("retry-after", "60")]);
        let dated = headers(&[("retry-after", "Wed, 21 Oct 2026 07:28:00 GMT")]);
        let cases = [
            (
                StatusCode::FORBIDDEN,
                &spent,
                Some((None, Some(1_767_225_600))),
            ),
            (StatusCode::FORBIDDEN, &wait, Some((Some(60), None))),
            (StatusCode::FORBIDDEN, &dated, Some((None, None))),
            (StatusCode::FORBIDDEN, &left, None),
            (StatusCode::TOO_MANY_REQUESTS, &left, Some((None, None))),
            (StatusCode::UNAUTHORIZED, &spent, None),
            (StatusCode::INTERNAL_SERVER_ERROR, &wait, None),
        ];
        for (status, headers, expected) in cases {
            let found =
                RateLimit::of(status, headers).map(|limit| (limit.retry_after, limit.reset));
            assert_eq!(found, expected, "{status} {headers:?}");
        }
    }
}
