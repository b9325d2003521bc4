//! A fake GitHub for the adapter's tests: the subset of the REST API the adapter uses (refs,
//! commits, trees and blobs of the git data API; pull requests), answering with the request and
//! response shapes of GitHub's documentation, its validation failures (422 with `Validation
//! Failed` or the git data API's messages) and its rate-limit headers on every answer.
//!
//! Objects live in an in-memory git object database (libgit2's mempack), so every SHA is the
//! real git object ID and a tree or commit made here equals the one any git makes of the same
//! content. Refs and pull requests are plain maps. Every request is recorded (method, path below
//! the repository, query and the headers the API asks for) before it is answered, and a test can
//! arm a canned failure for the next request to a path.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::{Path, Query, Request, State};
use axum::http::header::{ACCEPT, AUTHORIZATION, USER_AGENT};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use fermata_forge::github::{GitHub, GitHubSettings, GitHubToken};
use git2::build::TreeUpdateBuilder;
use git2::{
    FileMode, ObjectType, Odb, Oid, Repository, Signature, Time, TreeWalkMode, TreeWalkResult,
};
use serde::Deserialize;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub(crate) const OWNER: &str = "acme";
pub(crate) const REPOSITORY: &str = "schemas";
/// The token the fake accepts; the tests check that it appears in no log line and no error.
pub(crate) const TOKEN: &str = "ghp_fakeToken0123456789abcdefSECRET";
/// Where every repository endpoint lives.
const PREFIX: &str = "/repos/acme/schemas";

/// One request as the fake received it.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) method: Method,
    /// Below `/repos/{owner}/{repo}/`, or the whole path for anything else.
    pub(crate) path: String,
    pub(crate) query: Option<String>,
    pub(crate) accept: Option<String>,
    pub(crate) api_version: Option<String>,
    pub(crate) user_agent: Option<String>,
}

impl Recorded {
    /// `GET git/ref/heads/main`, with `?query` when there is one.
    pub(crate) fn line(&self) -> String {
        match &self.query {
            Some(query) => format!("{} {}?{query}", self.method, self.path),
            None => format!("{} {}", self.method, self.path),
        }
    }
}

/// The failures a test can make the fake answer with, as GitHub sends them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Canned {
    /// The primary limit spent: 403 with `x-ratelimit-remaining: 0`.
    PrimaryRateLimit,
    /// A secondary limit: 429 with a `retry-after` of this many seconds.
    SecondaryRateLimit(u32),
    /// A token without the permission: 403 with requests left.
    Forbidden,
    ServerError,
}

impl Canned {
    fn response(self) -> Response {
        match self {
            Canned::PrimaryRateLimit => {
                let mut response = error(
                    StatusCode::FORBIDDEN,
                    "API rate limit exceeded for user ID 1.",
                );
                set_rate_limit(&mut response, 0);
                response
            }
            Canned::SecondaryRateLimit(seconds) => {
                let mut response = error(
                    StatusCode::TOO_MANY_REQUESTS,
                    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
                );
                response
                    .headers_mut()
                    .insert("retry-after", HeaderValue::from(seconds));
                response
            }
            Canned::Forbidden => error(
                StatusCode::FORBIDDEN,
                "Resource not accessible by personal access token",
            ),
            Canned::ServerError => error(StatusCode::INTERNAL_SERVER_ERROR, "Server Error"),
        }
    }
}

/// A canned answer for the next request whose method matches and whose path starts so.
struct Fault {
    method: Method,
    path: String,
    answer: Canned,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PullStatus {
    Open,
    Closed,
    Merged,
}

struct Pull {
    number: u64,
    title: String,
    body: Option<String>,
    head: String,
    base: String,
    head_sha: String,
    base_sha: String,
    status: PullStatus,
}

struct Hub {
    /// The fake's own root URL, for the `url` fields of its answers.
    api: String,
    repo: Repository,
    /// Full ref names (`refs/heads/main`) to commits.
    refs: BTreeMap<String, Oid>,
    /// In the order opened; a pull request's number is its place plus one.
    pulls: Vec<Pull>,
    requests: Vec<Recorded>,
    faults: Vec<Fault>,
}

type Shared = Arc<Mutex<Hub>>;

/// A running fake, serving on a local port until the test's runtime ends.
pub(crate) struct FakeGitHub {
    pub(crate) url: String,
    hub: Shared,
}

impl FakeGitHub {
    pub(crate) async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let odb = Odb::new().unwrap();
        odb.add_new_mempack_backend(1).unwrap();
        let hub = Arc::new(Mutex::new(Hub {
            api: url.clone(),
            repo: Repository::from_odb(odb).unwrap(),
            refs: BTreeMap::new(),
            pulls: Vec::new(),
            requests: Vec::new(),
            faults: Vec::new(),
        }));
        let repository = Router::new()
            .route("/git/ref/{*name}", get(get_ref))
            .route("/git/refs", post(create_ref))
            .route("/git/refs/{*name}", delete(delete_ref))
            .route("/git/commits", post(create_commit))
            .route("/git/commits/{sha}", get(get_commit))
            .route("/git/blobs", post(create_blob))
            .route("/git/blobs/{sha}", get(get_blob))
            .route("/git/trees", post(create_tree))
            .route("/git/trees/{sha}", get(get_tree))
            .route("/pulls", get(list_pulls).post(create_pull))
            .route("/pulls/{number}", get(get_pull).patch(update_pull));
        let app = Router::new()
            .nest(PREFIX, repository)
            .fallback(|| async { not_found() })
            .layer(middleware::from_fn_with_state(hub.clone(), gate))
            .with_state(hub.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        FakeGitHub { url, hub }
    }

    pub(crate) fn settings(&self) -> GitHubSettings {
        GitHubSettings {
            api_url: self.url.clone(),
            ..GitHubSettings::new(OWNER, REPOSITORY, GitHubToken::new(TOKEN))
        }
    }

    pub(crate) fn forge(&self) -> GitHub {
        GitHub::new(self.settings()).unwrap()
    }

    /// Commits exactly `files` on `branch` (on its head, if it has one) and returns the commit.
    pub(crate) fn commit_on(&self, branch: &str, files: &[(&str, &[u8])]) -> String {
        let mut hub = lock(&self.hub);
        let name = format!("refs/heads/{branch}");
        let parent = hub.refs.get(&name).copied();
        let commit = commit_files(&hub.repo, parent, files);
        hub.refs.insert(name, commit);
        commit.to_string()
    }

    /// Every file of `commit`'s tree, by path.
    pub(crate) fn files(&self, commit: &str) -> BTreeMap<String, Vec<u8>> {
        let hub = lock(&self.hub);
        tree_files(&hub.repo, Oid::from_str(commit).unwrap())
    }

    pub(crate) fn set_pull_status(&self, number: u64, status: PullStatus) {
        let mut hub = lock(&self.hub);
        let pull = hub
            .pulls
            .iter_mut()
            .find(|pull| pull.number == number)
            .unwrap();
        pull.status = status;
    }

    /// Makes the next `method` request whose path (below the repository) starts with `path`
    /// answer `answer`.
    pub(crate) fn answer_next(&self, method: Method, path: &str, answer: Canned) {
        lock(&self.hub).faults.push(Fault {
            method,
            path: path.to_owned(),
            answer,
        });
    }

    pub(crate) fn recorded(&self) -> Vec<Recorded> {
        lock(&self.hub).requests.clone()
    }

    /// The requests so far, as lines, forgetting them.
    pub(crate) fn take_requests(&self) -> Vec<String> {
        std::mem::take(&mut lock(&self.hub).requests)
            .iter()
            .map(Recorded::line)
            .collect()
    }
}

/// A commit of exactly `files` (regular files) with a fixed signature, in any repository: the
/// same files and parent give the same commit here and in a local repository.
pub(crate) fn commit_files(repo: &Repository, parent: Option<Oid>, files: &[(&str, &[u8])]) -> Oid {
    let mut update = TreeUpdateBuilder::new();
    for (path, content) in files {
        update.upsert(*path, repo.blob(content).unwrap(), FileMode::Blob);
    }
    let empty = repo
        .find_tree(repo.treebuilder(None).unwrap().write().unwrap())
        .unwrap();
    let tree = repo
        .find_tree(update.create_updated(repo, &empty).unwrap())
        .unwrap();
    let signature =
        Signature::new("Seed", "seed@example.com", &Time::new(1_700_000_000, 0)).unwrap();
    let parents: Vec<_> = parent
        .map(|id| repo.find_commit(id).unwrap())
        .into_iter()
        .collect();
    let parents: Vec<_> = parents.iter().collect();
    repo.commit(None, &signature, &signature, "seed", &tree, &parents)
        .unwrap()
}

/// Every file of `commit`'s tree, by path.
fn tree_files(repo: &Repository, commit: Oid) -> BTreeMap<String, Vec<u8>> {
    let tree = repo.find_commit(commit).unwrap().tree().unwrap();
    let mut files = BTreeMap::new();
    tree.walk(TreeWalkMode::PreOrder, |folder, entry| {
        if entry.kind() == Some(ObjectType::Blob) {
            let blob = repo.find_blob(entry.id()).unwrap();
            files.insert(
                format!("{folder}{}", entry.name().unwrap()),
                blob.content().to_vec(),
            );
        }
        TreeWalkResult::Ok
    })
    .unwrap();
    files
}

/// Records the request, then answers it as GitHub would before any endpoint runs: a missing
/// `User-Agent` is refused, a wrong token is 401, an armed fault is sent. Every answer carries
/// the rate-limit headers.
async fn gate(State(hub): State<Shared>, request: Request, next: Next) -> Response {
    let (recorded, authorized) = record(&request);
    let fault = {
        let mut hub = hub.lock().unwrap();
        let fault = hub
            .faults
            .iter()
            .position(|fault| {
                fault.method == recorded.method && recorded.path.starts_with(&fault.path)
            })
            .map(|index| hub.faults.remove(index).answer);
        hub.requests.push(recorded.clone());
        fault
    };
    let mut response = if recorded.user_agent.is_none() {
        error(
            StatusCode::FORBIDDEN,
            "Request forbidden by administrative rules. Please make sure your request has a User-Agent header",
        )
    } else if !authorized {
        error(StatusCode::UNAUTHORIZED, "Bad credentials")
    } else if let Some(answer) = fault {
        answer.response()
    } else {
        next.run(request).await
    };
    if !response.headers().contains_key("x-ratelimit-remaining") {
        set_rate_limit(&mut response, 4999);
    }
    response
}

/// The request as recorded, and whether it carries the right token.
fn record(request: &Request) -> (Recorded, bool) {
    let header = |name: &HeaderName| {
        request
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let path = request.uri().path();
    let recorded = Recorded {
        method: request.method().clone(),
        path: path
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.strip_prefix('/'))
            .unwrap_or(path)
            .to_owned(),
        query: request.uri().query().map(str::to_owned),
        accept: header(&ACCEPT),
        api_version: header(&HeaderName::from_static("x-github-api-version")),
        user_agent: header(&USER_AGENT),
    };
    let authorized = header(&AUTHORIZATION) == Some(format!("Bearer {TOKEN}"));
    (recorded, authorized)
}

fn set_rate_limit(response: &mut Response, remaining: u32) {
    let headers = response.headers_mut();
    headers.insert("x-ratelimit-limit", HeaderValue::from_static("5000"));
    headers.insert("x-ratelimit-remaining", HeaderValue::from(remaining));
    headers.insert("x-ratelimit-used", HeaderValue::from(5000 - remaining));
    headers.insert("x-ratelimit-reset", HeaderValue::from_static("1767225600"));
    headers.insert("x-ratelimit-resource", HeaderValue::from_static("core"));
}

fn error(status: StatusCode, message: &str) -> Response {
    let body = json!({
        "message": message,
        "documentation_url": "https://docs.github.com/rest",
        "status": status.as_str(),
    });
    (status, Json(body)).into_response()
}

fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "Not Found")
}

/// A 422 of the git data API, which says what is wrong in its message.
fn unprocessable(message: &str) -> Response {
    error(StatusCode::UNPROCESSABLE_ENTITY, message)
}

/// A 422 of the pulls API: `Validation Failed` with the errors listed.
fn validation_failed(errors: &Value) -> Response {
    let body = json!({
        "message": "Validation Failed",
        "errors": errors,
        "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
        "status": "422",
    });
    (StatusCode::UNPROCESSABLE_ENTITY, Json(body)).into_response()
}

fn created(body: Value) -> Response {
    (StatusCode::CREATED, Json(body)).into_response()
}

impl Hub {
    fn object_url(&self, kind: &str, id: impl std::fmt::Display) -> String {
        format!("{}{PREFIX}/git/{kind}/{id}", self.api)
    }

    fn reference(&self, name: &str, commit: Oid) -> Value {
        json!({
            "ref": name,
            "node_id": format!("REF_{commit}"),
            "url": format!("{}{PREFIX}/git/{name}", self.api),
            "object": {
                "type": "commit",
                "sha": commit.to_string(),
                "url": self.object_url("commits", commit),
            },
        })
    }

    fn commit(&self, id: Oid) -> Option<Value> {
        let commit = self.repo.find_commit(id).ok()?;
        let person = |signature: Signature<'_>| {
            json!({
                "name": signature.name().unwrap(),
                "email": signature.email().unwrap(),
                "date": date(signature.when()),
            })
        };
        let parents: Vec<Value> = commit
            .parent_ids()
            .map(|parent| {
                json!({
                    "sha": parent.to_string(),
                    "url": self.object_url("commits", parent),
                    "html_url": format!("https://github.com/{OWNER}/{REPOSITORY}/commit/{parent}"),
                })
            })
            .collect();
        Some(json!({
            "sha": id.to_string(),
            "node_id": format!("C_{id}"),
            "url": self.object_url("commits", id),
            "html_url": format!("https://github.com/{OWNER}/{REPOSITORY}/commit/{id}"),
            "author": person(commit.author()),
            "committer": person(commit.committer()),
            "tree": { "sha": commit.tree_id().to_string(), "url": self.object_url("trees", commit.tree_id()) },
            "message": commit.message().unwrap(),
            "parents": parents,
            "verification": {
                "verified": false,
                "reason": "unsigned",
                "signature": null,
                "payload": null,
                "verified_at": null,
            },
        }))
    }

    /// A tree as `GET git/trees/{sha}` answers it.
    fn tree(&self, id: Oid, recursive: bool) -> Option<Value> {
        let tree = self.repo.find_tree(id).ok()?;
        let mut entries = Vec::new();
        let mut add = |folder: &str, entry: &git2::TreeEntry<'_>| {
            let kind = entry.kind().unwrap().str();
            let mut value = json!({
                "path": format!("{folder}{}", entry.name().unwrap()),
                "mode": format!("{:06o}", entry.filemode()),
                "type": kind,
                "sha": entry.id().to_string(),
                "url": self.object_url(&format!("{kind}s"), entry.id()),
            });
            if let Ok(blob) = self.repo.find_blob(entry.id()) {
                value["size"] = json!(blob.size());
            }
            entries.push(value);
        };
        if recursive {
            tree.walk(TreeWalkMode::PreOrder, |folder, entry| {
                add(folder, entry);
                TreeWalkResult::Ok
            })
            .unwrap();
        } else {
            for entry in tree.iter() {
                add("", &entry);
            }
        }
        Some(json!({
            "sha": id.to_string(),
            "url": self.object_url("trees", id),
            "tree": entries,
            "truncated": false,
        }))
    }

    fn pull(&self, pull: &Pull) -> Value {
        let branch = |name: &str, sha: &str| {
            json!({
                "label": format!("{OWNER}:{name}"),
                "ref": name,
                "sha": sha,
                "user": { "login": OWNER, "id": 1, "type": "Organization" },
                "repo": { "id": 7, "name": REPOSITORY, "full_name": format!("{OWNER}/{REPOSITORY}") },
            })
        };
        let (state, closed_at, merged_at) = match pull.status {
            PullStatus::Open => ("open", Value::Null, Value::Null),
            PullStatus::Closed => ("closed", json!("2026-12-02T08:00:00Z"), Value::Null),
            PullStatus::Merged => (
                "closed",
                json!("2026-12-02T08:00:00Z"),
                json!("2026-12-02T08:00:00Z"),
            ),
        };
        json!({
            "url": format!("{}{PREFIX}/pulls/{}", self.api, pull.number),
            "id": 1000 + pull.number,
            "node_id": format!("PR_{}", pull.number),
            "html_url": format!("https://github.com/{OWNER}/{REPOSITORY}/pull/{}", pull.number),
            "number": pull.number,
            "state": state,
            "locked": false,
            "title": pull.title,
            "user": { "login": "fermata-bot", "id": 2, "type": "User" },
            "body": pull.body,
            "created_at": "2026-12-01T07:08:49Z",
            "updated_at": "2026-12-01T07:08:49Z",
            "closed_at": closed_at,
            "merged_at": merged_at,
            "merge_commit_sha": null,
            "draft": false,
            "head": branch(&pull.head, &pull.head_sha),
            "base": branch(&pull.base, &pull.base_sha),
            "author_association": "MEMBER",
        })
    }
}

fn date(time: Time) -> String {
    let offset = time::UtcOffset::from_whole_seconds(time.offset_minutes() * 60).unwrap();
    OffsetDateTime::from_unix_timestamp(time.seconds())
        .unwrap()
        .to_offset(offset)
        .format(&Rfc3339)
        .unwrap()
}

fn lock(hub: &Shared) -> MutexGuard<'_, Hub> {
    hub.lock().unwrap()
}

async fn get_ref(State(hub): State<Shared>, Path(name): Path<String>) -> Response {
    let hub = lock(&hub);
    let name = format!("refs/{name}");
    match hub.refs.get(&name) {
        Some(commit) => Json(hub.reference(&name, *commit)).into_response(),
        None => not_found(),
    }
}

#[derive(Deserialize)]
struct CreateRef {
    #[serde(rename = "ref")]
    name: String,
    sha: String,
}

async fn create_ref(State(hub): State<Shared>, Json(body): Json<CreateRef>) -> Response {
    let mut hub = lock(&hub);
    if !body.name.starts_with("refs/") || body.name.matches('/').count() < 2 {
        return unprocessable("Reference name is not a valid ref name");
    }
    let Some(commit) = Oid::from_str(&body.sha)
        .ok()
        .filter(|id| hub.repo.find_commit(*id).is_ok())
    else {
        return unprocessable("Object does not exist");
    };
    if hub.refs.contains_key(&body.name) {
        return unprocessable("Reference already exists");
    }
    hub.refs.insert(body.name.clone(), commit);
    created(hub.reference(&body.name, commit))
}

async fn delete_ref(State(hub): State<Shared>, Path(name): Path<String>) -> Response {
    let mut hub = lock(&hub);
    match hub.refs.remove(&format!("refs/{name}")) {
        Some(_) => StatusCode::NO_CONTENT.into_response(),
        None => unprocessable("Reference does not exist"),
    }
}

async fn get_commit(State(hub): State<Shared>, Path(sha): Path<String>) -> Response {
    let hub = lock(&hub);
    match Oid::from_str(&sha).ok().and_then(|id| hub.commit(id)) {
        Some(commit) => Json(commit).into_response(),
        None => not_found(),
    }
}

#[derive(Deserialize)]
struct Person {
    name: String,
    email: String,
    date: Option<String>,
}

#[derive(Deserialize)]
struct CreateCommit {
    message: String,
    tree: String,
    #[serde(default)]
    parents: Vec<String>,
    author: Option<Person>,
    committer: Option<Person>,
}

/// Without an author GitHub uses the authenticated user and the current time; without a
/// committer, the author.
async fn create_commit(State(hub): State<Shared>, Json(body): Json<CreateCommit>) -> Response {
    let hub = lock(&hub);
    let repo = &hub.repo;
    let Some(tree) = Oid::from_str(&body.tree)
        .ok()
        .and_then(|id| repo.find_tree(id).ok())
    else {
        return unprocessable("Tree SHA does not exist");
    };
    let mut parents = Vec::new();
    for parent in &body.parents {
        match Oid::from_str(parent)
            .ok()
            .and_then(|id| repo.find_commit(id).ok())
        {
            Some(commit) => parents.push(commit),
            None => return unprocessable("Parent SHA does not exist or is not a commit object"),
        }
    }
    let signature = |person: &Person| {
        let time = match &person.date {
            Some(date) => match OffsetDateTime::parse(date, &Rfc3339) {
                Ok(date) => Time::new(
                    date.unix_timestamp(),
                    i32::from(date.offset().whole_minutes()),
                ),
                Err(_) => return None,
            },
            None => now(),
        };
        Signature::new(&person.name, &person.email, &time).ok()
    };
    let author = match &body.author {
        Some(person) => signature(person),
        None => Signature::new("fermata-bot", "bot@example.com", &now()).ok(),
    };
    let committer = match &body.committer {
        Some(person) => signature(person),
        None => author.clone(),
    };
    let (Some(author), Some(committer)) = (author, committer) else {
        return unprocessable("Invalid request.\n\nThe date is not a valid ISO 8601 date.");
    };
    let parents: Vec<_> = parents.iter().collect();
    let id = repo
        .commit(None, &author, &committer, &body.message, &tree, &parents)
        .unwrap();
    created(hub.commit(id).unwrap())
}

fn now() -> Time {
    Time::new(OffsetDateTime::now_utc().unix_timestamp(), 0)
}

#[derive(Deserialize)]
struct CreateBlob {
    content: String,
    encoding: Option<String>,
}

async fn create_blob(State(hub): State<Shared>, Json(body): Json<CreateBlob>) -> Response {
    let hub = lock(&hub);
    let content = match body.encoding.as_deref() {
        None | Some("utf-8") => body.content.into_bytes(),
        Some("base64") => match BASE64.decode(&body.content) {
            Ok(content) => content,
            Err(_) => return unprocessable("Invalid request.\n\nContent is not valid Base64."),
        },
        Some(_) => return unprocessable("Invalid request.\n\nencoding is not supported."),
    };
    let id = hub.repo.blob(&content).unwrap();
    created(json!({ "url": hub.object_url("blobs", id), "sha": id.to_string() }))
}

/// `GET git/blobs/{sha}`: the content in base64, wrapped at 60 characters as GitHub sends it.
async fn get_blob(State(hub): State<Shared>, Path(sha): Path<String>) -> Response {
    let hub = lock(&hub);
    let Some(blob) = Oid::from_str(&sha)
        .ok()
        .and_then(|id| hub.repo.find_blob(id).ok())
    else {
        return not_found();
    };
    let encoded = BASE64.encode(blob.content());
    let wrapped: Vec<&str> = encoded
        .as_bytes()
        .chunks(60)
        .map(|chunk| std::str::from_utf8(chunk).unwrap())
        .collect();
    Json(json!({
        "sha": sha,
        "node_id": "B_fake",
        "size": blob.size(),
        "url": hub.object_url("blobs", &sha),
        "content": format!("{}\n", wrapped.join("\n")),
        "encoding": "base64",
    }))
    .into_response()
}

#[derive(Deserialize)]
struct TreeQuery {
    recursive: Option<String>,
}

async fn get_tree(
    State(hub): State<Shared>,
    Path(sha): Path<String>,
    Query(query): Query<TreeQuery>,
) -> Response {
    let hub = lock(&hub);
    match Oid::from_str(&sha)
        .ok()
        .and_then(|id| hub.tree(id, query.recursive.is_some()))
    {
        Some(tree) => Json(tree).into_response(),
        None => not_found(),
    }
}

/// `POST git/trees`: `base_tree` (or nothing) with each entry written over it; a `sha` of
/// `null` deletes the path (which must exist), `content` writes a blob, and both at once are
/// refused.
async fn create_tree(State(hub): State<Shared>, Json(body): Json<Value>) -> Response {
    let hub = lock(&hub);
    let repo = &hub.repo;
    let Some(entries) = body["tree"].as_array() else {
        return unprocessable("Invalid request.\n\n\"tree\" wasn't supplied.");
    };
    let base = match body.get("base_tree").and_then(Value::as_str) {
        Some(sha) => match Oid::from_str(sha)
            .ok()
            .and_then(|id| repo.find_tree(id).ok())
        {
            Some(tree) => tree,
            None => return unprocessable("base_tree is not a valid tree oid"),
        },
        None => repo
            .find_tree(repo.treebuilder(None).unwrap().write().unwrap())
            .unwrap(),
    };
    let mut update = TreeUpdateBuilder::new();
    for entry in entries {
        let (Some(path), Some(mode), Some(kind)) = (
            entry["path"].as_str(),
            entry["mode"].as_str(),
            entry["type"].as_str(),
        ) else {
            return unprocessable(
                "Invalid request.\n\n\"path\", \"mode\" and \"type\" are required.",
            );
        };
        let (mode, expected_kind) = match mode {
            "100644" => (FileMode::Blob, ObjectType::Blob),
            "100755" => (FileMode::BlobExecutable, ObjectType::Blob),
            "120000" => (FileMode::Link, ObjectType::Blob),
            "040000" => (FileMode::Tree, ObjectType::Tree),
            "160000" => (FileMode::Commit, ObjectType::Commit),
            _ => return unprocessable("Invalid request.\n\nmode is not a valid file mode."),
        };
        if ObjectType::from_str(kind) != Some(expected_kind) {
            return unprocessable("Invalid request.\n\ntype does not match mode.");
        }
        match (entry.get("sha"), entry.get("content")) {
            (Some(_), Some(_)) => {
                return unprocessable(
                    "Invalid request.\n\nUse either tree.sha or content, not both.",
                );
            }
            (Some(Value::Null), None) => {
                if base.get_path(std::path::Path::new(path)).is_err() {
                    return unprocessable("GitRPC::BadObjectState");
                }
                update.remove(path);
            }
            (Some(Value::String(sha)), None) => {
                let exists = Oid::from_str(sha)
                    .ok()
                    .and_then(|id| repo.find_object(id, Some(expected_kind)).ok());
                match exists {
                    Some(object) => update.upsert(path, object.id(), mode),
                    None => return unprocessable("GitRPC::BadObjectState"),
                };
            }
            (None, Some(Value::String(content))) => {
                update.upsert(path, repo.blob(content.as_bytes()).unwrap(), mode);
            }
            _ => {
                return unprocessable(
                    "Invalid request.\n\nEither tree.sha or content is required.",
                );
            }
        }
    }
    let id = update.create_updated(repo, &base).unwrap();
    created(hub.tree(id, false).unwrap())
}

#[derive(Deserialize)]
struct PullQuery {
    head: Option<String>,
    state: Option<String>,
    per_page: Option<usize>,
    page: Option<usize>,
}

/// Newest first, `state=open` unless asked otherwise, 30 a page unless asked otherwise.
async fn list_pulls(State(hub): State<Shared>, Query(query): Query<PullQuery>) -> Response {
    let hub = lock(&hub);
    let state = query.state.as_deref().unwrap_or("open");
    let per_page = query.per_page.unwrap_or(30).min(100);
    let page = query.page.unwrap_or(1).max(1);
    let listed: Vec<Value> = hub
        .pulls
        .iter()
        .rev()
        .filter(|pull| match state {
            "all" => true,
            "open" => pull.status == PullStatus::Open,
            _ => pull.status != PullStatus::Open,
        })
        .filter(|pull| {
            query
                .head
                .as_ref()
                .is_none_or(|head| *head == format!("{OWNER}:{}", pull.head))
        })
        .skip((page - 1) * per_page)
        .take(per_page)
        .map(|pull| hub.pull(pull))
        .collect();
    Json(listed).into_response()
}

#[derive(Deserialize)]
struct CreatePull {
    title: String,
    head: String,
    base: String,
    body: Option<String>,
}

async fn create_pull(State(hub): State<Shared>, Json(body): Json<CreatePull>) -> Response {
    let mut hub = lock(&hub);
    let head = body
        .head
        .strip_prefix(&format!("{OWNER}:"))
        .unwrap_or(&body.head)
        .to_owned();
    let branch = |name: &str| hub.refs.get(&format!("refs/heads/{name}")).copied();
    let Some(head_sha) = branch(&head) else {
        return validation_failed(
            &json!([{ "resource": "PullRequest", "field": "head", "code": "invalid" }]),
        );
    };
    let Some(base_sha) = branch(&body.base) else {
        return validation_failed(
            &json!([{ "resource": "PullRequest", "field": "base", "code": "invalid" }]),
        );
    };
    if hub
        .pulls
        .iter()
        .any(|pull| pull.status == PullStatus::Open && pull.head == head && pull.base == body.base)
    {
        let message = format!("A pull request already exists for {OWNER}:{head}.");
        return validation_failed(
            &json!([{ "resource": "PullRequest", "code": "custom", "message": message }]),
        );
    }
    if head_sha == base_sha {
        let message = format!("No commits between {} and {head}", body.base);
        return validation_failed(
            &json!([{ "resource": "PullRequest", "code": "custom", "message": message }]),
        );
    }
    let pull = Pull {
        number: hub.pulls.len() as u64 + 1,
        title: body.title,
        body: body.body,
        head,
        base: body.base,
        head_sha: head_sha.to_string(),
        base_sha: base_sha.to_string(),
        status: PullStatus::Open,
    };
    let answer = hub.pull(&pull);
    hub.pulls.push(pull);
    created(answer)
}

/// `PATCH pulls/{number}` with `{"state": "closed"}`: closes an open pull request.
async fn update_pull(
    State(hub): State<Shared>,
    Path(number): Path<String>,
    Json(body): Json<Value>,
) -> Response {
    let mut hub = lock(&hub);
    let number = number.parse::<u64>().ok();
    let Some(pull) = hub
        .pulls
        .iter_mut()
        .find(|pull| Some(pull.number) == number)
    else {
        return not_found();
    };
    if body["state"] == "closed" && pull.status == PullStatus::Open {
        pull.status = PullStatus::Closed;
    }
    let number = pull.number;
    let pull = hub.pulls.iter().find(|pull| pull.number == number).unwrap();
    Json(hub.pull(pull)).into_response()
}

async fn get_pull(State(hub): State<Shared>, Path(number): Path<String>) -> Response {
    let hub = lock(&hub);
    let found = number
        .parse::<u64>()
        .ok()
        .and_then(|number| hub.pulls.iter().find(|pull| pull.number == number));
    match found {
        Some(pull) => Json(hub.pull(pull)).into_response(),
        None => not_found(),
    }
}
