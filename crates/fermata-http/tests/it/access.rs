//! The authorization matrix, generated from the router's own route table, on SQLite and
//! PostgreSQL: every route is sent by an outsider, a viewer, an editor, an admin, a
//! `system_admin` who is not a member, a read client token, a write client token, a client token
//! for another document and an expired client token. Each answer's status is the one the route's
//! access says; every refused write is followed by reading the document, its repository and its
//! files back to prove nothing changed; allowed writes run against a world of their own. A route
//! with no case here fails the test, and so does a route the table does not cover (it is refused
//! by the layer, fail closed). The `system_admin`'s uses are found in the repository's audit.

use std::io::Cursor;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use fermata_accounts::ClientAccess;
use fermata_collab::WriterFence;
use fermata_crypto::SecretToken;
use fermata_http::{Access, HttpState, RouteEntry};
use fermata_store::{
    Acquisition, ChannelId, LeaseName, RepositoryRole, Role, Storage, StoreOptions,
};
use fermata_store_sql::testing::{ScratchDatabase, ScratchStorage};
use fermata_store_testkit::{eventually, eventually_some};
use serde_json::{Value, json};

use crate::support::{self, Answer};

const PASSWORD: &str = "correct horse battery staple";
const FORM: &str = "application/x-www-form-urlencoded";

/// Who calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Outsider,
    Viewer,
    Editor,
    Admin,
    SystemAdmin,
    ReadToken,
    WriteToken,
    OtherDocumentToken,
    ExpiredToken,
}

const EVERYONE: [Who; 9] = [
    Who::Outsider,
    Who::Viewer,
    Who::Editor,
    Who::Admin,
    Who::SystemAdmin,
    Who::ReadToken,
    Who::WriteToken,
    Who::OtherDocumentToken,
    Who::ExpiredToken,
];

impl Who {
    fn is_client_token(self) -> bool {
        matches!(
            self,
            Who::ReadToken | Who::WriteToken | Who::OtherDocumentToken | Who::ExpiredToken
        )
    }

    /// The role the access rules give this caller on the world's document.
    fn role(self) -> Option<RepositoryRole> {
        match self {
            Who::Outsider | Who::OtherDocumentToken | Who::ExpiredToken => None,
            Who::Viewer | Who::ReadToken => Some(RepositoryRole::Viewer),
            Who::Editor | Who::WriteToken => Some(RepositoryRole::Editor),
            Who::Admin | Who::SystemAdmin => Some(RepositoryRole::Admin),
        }
    }
}

/// How the policy refuses `who` on a route with `access`; `None` when it lets them through.
fn refusal(access: Access, who: Who) -> Option<StatusCode> {
    if who.is_client_token() && !access.takes_client_tokens() {
        return Some(StatusCode::UNAUTHORIZED);
    }
    if who == Who::ExpiredToken {
        return Some(StatusCode::UNAUTHORIZED);
    }
    let by_role = |need: RepositoryRole| match who.role() {
        None => Some(StatusCode::NOT_FOUND),
        Some(role) if role < need => Some(StatusCode::FORBIDDEN),
        Some(_) => None,
    };
    match access {
        Access::Document { need, .. } | Access::Repository { need } => by_role(need),
        Access::DocumentBySlug | Access::Sync | Access::ListDocuments | Access::DocumentPage => {
            by_role(RepositoryRole::Viewer)
        }
        Access::CreateDocument => by_role(RepositoryRole::Editor),
        Access::Public | Access::SignedIn => None,
        Access::SystemAdmin | Access::AdminPage => {
            (who != Who::SystemAdmin).then_some(StatusCode::FORBIDDEN)
        }
        // API tokens are never fresh.
        Access::FreshSystemAdmin => Some(StatusCode::FORBIDDEN),
        // A user's token is no machine's.
        Access::Machine => Some(StatusCode::UNAUTHORIZED),
    }
}

/// Whether a route's access concerns one repository's documents or members, whose state a
/// refused write must leave unchanged.
fn concerns_a_world(access: Access) -> bool {
    matches!(
        access,
        Access::Document { .. } | Access::Repository { .. } | Access::CreateDocument
    )
}

/// A repository with its members, a document with history, an image and a sent attachment, an
/// archived child and another document, and client tokens.
#[derive(Debug, Clone)]
struct World {
    repository: String,
    document: String,
    slug: String,
    child: String,
    image: String,
    attachment: String,
    read_token: String,
    write_token: String,
    other_token: String,
}

struct Matrix {
    state: HttpState,
    /// API tokens by caller.
    tokens: Vec<(Who, String)>,
    expired_token: String,
    worlds: AtomicUsize,
    _storage: ScratchStorage,
}

fn png() -> Vec<u8> {
    let image = image::RgbImage::from_fn(8, 8, |x, y| image::Rgb([x as u8, y as u8, 7]));
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(image)
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

/// A Yjs update made by a client that has seen nothing.
fn fresh_update(text: &str) -> Vec<u8> {
    let mut doc = fermata_docs::SourceDoc::new();
    doc.insert(0, text).unwrap()
}

/// A request as it is sent.
struct Call {
    method: Method,
    uri: String,
    body: Vec<u8>,
    content_type: Option<&'static str>,
    upgrade: bool,
}

impl Call {
    fn new(method: Method, uri: impl Into<String>) -> Self {
        Call {
            method,
            uri: uri.into(),
            body: Vec::new(),
            content_type: None,
            upgrade: false,
        }
    }

    fn json(mut self, body: &Value) -> Self {
        self.body = body.to_string().into_bytes();
        self.content_type = Some("application/json");
        self
    }

    fn bytes(mut self, body: Vec<u8>, content_type: &'static str) -> Self {
        self.body = body;
        self.content_type = Some(content_type);
        self
    }
}

impl Matrix {
    async fn new(storage: ScratchStorage) -> Self {
        let fence = WriterFence::default();
        let state = support::state(&storage, fence.clone());
        let Acquisition::Granted(lease) = storage
            .leases()
            .acquire(&LeaseName::WRITER, "matrix", Duration::from_secs(3600))
            .await
            .unwrap()
        else {
            panic!("the writer lease is held");
        };
        fence.set(Some(lease.fence()));
        let accounts = &state.accounts;
        let mut tokens = Vec::new();
        for (who, name) in [
            (Who::Outsider, "out"),
            (Who::Viewer, "vic"),
            (Who::Editor, "ed"),
            (Who::Admin, "ann"),
            (Who::SystemAdmin, "root"),
        ] {
            let roles = if who == Who::SystemAdmin {
                [Role::SystemAdmin].into()
            } else {
                Default::default()
            };
            let (user, _) = accounts
                .add_user(name, Some(SecretToken::from_given(PASSWORD)), roles)
                .await
                .unwrap();
            // With the `tokens` scope, so the routes that make tokens and machines are theirs too.
            let (_, token) = accounts
                .create_scoped_api_token(&user, "matrix", fermata_accounts::TokenScope::Issuing)
                .await
                .unwrap();
            tokens.push((who, token.expose().to_owned()));
        }
        accounts
            .add_user("zed", None, Default::default())
            .await
            .unwrap();
        let ann = accounts.user_named("ann").await.unwrap();
        let expired = accounts
            .mint_client_token(
                &ChannelId::random(),
                ClientAccess::Write,
                Duration::from_secs(1),
                &ann.id,
            )
            .unwrap();
        eventually("the client token to expire", || async {
            accounts.open_client_token(&expired.token)
                == Err(fermata_accounts::ClientTokenError::Expired)
        })
        .await;
        Matrix {
            state,
            tokens,
            expired_token: expired.token.expose().to_owned(),
            worlds: AtomicUsize::new(0),
            _storage: storage,
        }
    }

    fn token(&self, who: Who) -> &str {
        &self
            .tokens
            .iter()
            .find(|(w, _)| *w == who)
            .unwrap_or_else(|| panic!("{who:?} has no API token"))
            .1
    }

    /// Sends `call` as `who`: a user by their API token (in `?token=` for `/sync`, which takes
    /// no header), a client token in `?token=`.
    async fn send(&self, who: Who, world: &World, call: &Call) -> Answer {
        let client = match who {
            Who::ReadToken => Some(world.read_token.as_str()),
            Who::WriteToken => Some(world.write_token.as_str()),
            Who::OtherDocumentToken => Some(world.other_token.as_str()),
            Who::ExpiredToken => Some(self.expired_token.as_str()),
            _ => None,
        };
        let sync = call.uri.starts_with("/sync/");
        let in_query = client.or_else(|| sync.then(|| self.token(who)));
        let uri = match in_query {
            Some(token) => {
                let joiner = if call.uri.contains('?') { '&' } else { '?' };
                format!("{}{joiner}token={token}", call.uri)
            }
            None => call.uri.clone(),
        };
        let mut request = Request::builder().method(call.method.clone()).uri(uri);
        if client.is_none() && !sync {
            request = request.header(header::AUTHORIZATION, format!("Bearer {}", self.token(who)));
        }
        if let Some(content_type) = call.content_type {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        if call.upgrade {
            request = request
                .header(header::CONNECTION, "upgrade")
                .header(header::UPGRADE, "websocket")
                .header(header::SEC_WEBSOCKET_VERSION, "13")
                .header(header::SEC_WEBSOCKET_KEY, "dGhlIHNhbXBsZSBub25jZQ==");
        }
        support::send(
            &self.state,
            request.body(Body::from(call.body.clone())).unwrap(),
        )
        .await
    }

    /// Sends `call` as the world's admin and expects `status`.
    async fn as_admin(&self, world: Option<&World>, call: Call, status: StatusCode) -> Value {
        let empty = World::empty();
        let answer = self.send(Who::Admin, world.unwrap_or(&empty), &call).await;
        assert_eq!(
            answer.status, status,
            "setting up: {} {}: {}",
            call.method, call.uri, answer.body
        );
        serde_json::from_str(&answer.body).unwrap_or(Value::Null)
    }

    /// A new world, in a repository of its own.
    async fn world(&self) -> World {
        let n = self.worlds.fetch_add(1, Ordering::Relaxed);
        let repository = format!("ann/w{n}");
        let create = |title: &str, parent: Option<&str>| {
            Call::new(Method::POST, "/api/v1/documents")
                .json(&json!({"repository": repository, "title": title, "parent": parent}))
        };
        let created = self
            .as_admin(None, create("Doc", None), StatusCode::CREATED)
            .await;
        let document = created["id"].as_str().unwrap().to_owned();
        let slug = created["slug"].as_str().unwrap().to_owned();
        for (user, role) in [("vic", "viewer"), ("ed", "editor"), ("zed", "editor")] {
            self.as_admin(
                None,
                Call::new(
                    Method::PUT,
                    format!("/api/v1/repositories/{repository}/members/{user}"),
                )
                .json(&json!({"role": role})),
                StatusCode::OK,
            )
            .await;
        }
        let child = self
            .as_admin(None, create("Child", Some(&document)), StatusCode::CREATED)
            .await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        self.as_admin(
            None,
            Call::new(Method::POST, format!("/api/v1/documents/{child}/archive")),
            StatusCode::OK,
        )
        .await;
        let other = self
            .as_admin(None, create("Other", None), StatusCode::CREATED)
            .await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        self.as_admin(
            None,
            Call::new(Method::PUT, format!("/api/v1/documents/{document}/text"))
                .json(&json!({"text": "original\n"})),
            StatusCode::OK,
        )
        .await;
        let image = self
            .as_admin(
                None,
                Call::new(Method::POST, format!("/api/v1/documents/{document}/images"))
                    .bytes(png(), "image/png"),
                StatusCode::CREATED,
            )
            .await["sha256"]
            .as_str()
            .unwrap()
            .to_owned();
        let attachment = self
            .as_admin(
                None,
                Call::new(
                    Method::POST,
                    format!("/api/v1/documents/{document}/attachments?name=note.txt"),
                )
                .bytes(b"a note\n".to_vec(), "text/plain"),
                StatusCode::CREATED,
            )
            .await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        self.as_admin(
            None,
            Call::new(
                Method::POST,
                format!("/api/v1/documents/{document}/messages/req-1/attachments"),
            )
            .json(&json!({"attachments": [attachment]})),
            StatusCode::OK,
        )
        .await;
        let mint = |id: &str, access: &str| {
            Call::new(
                Method::POST,
                format!("/api/v1/documents/{id}/client-tokens"),
            )
            .json(&json!({"access": access, "ttl": 3600}))
        };
        let read_token = self
            .as_admin(None, mint(&document, "read"), StatusCode::CREATED)
            .await["token"]
            .as_str()
            .unwrap()
            .to_owned();
        let write_token = self
            .as_admin(None, mint(&document, "write"), StatusCode::CREATED)
            .await["token"]
            .as_str()
            .unwrap()
            .to_owned();
        let other_token = self
            .as_admin(None, mint(&other, "write"), StatusCode::CREATED)
            .await["token"]
            .as_str()
            .unwrap()
            .to_owned();
        let world = World {
            repository,
            document,
            slug,
            child,
            image,
            attachment,
            read_token,
            write_token,
            other_token,
        };
        // History is recorded after the edit is acknowledged: wait for the session to restore.
        eventually_some("the first session in history", || async {
            let versions = self
                .as_admin(
                    Some(&world),
                    Call::new(
                        Method::GET,
                        format!("/api/v1/documents/{}/versions", world.document),
                    ),
                    StatusCode::OK,
                )
                .await;
            (versions["versions"].as_array()?.len() == 1).then_some(())
        })
        .await;
        world
    }

    /// Everything a refused write could have changed, read back as the admin.
    async fn snapshot(&self, world: &World) -> Value {
        let read = |uri: String| Call::new(Method::GET, uri);
        let d = &world.document;
        let mut document = self
            .as_admin(
                Some(world),
                read(format!("/api/v1/documents/{d}")),
                StatusCode::OK,
            )
            .await;
        // Reading a document can open its room; what it holds is what matters.
        document["updated_at"] = Value::Null;
        json!({
            "document": document,
            "children": self.as_admin(Some(world), read(format!("/api/v1/documents/{d}/children?archived=true")), StatusCode::OK).await,
            "images": self.as_admin(Some(world), read(format!("/api/v1/documents/{d}/images")), StatusCode::OK).await,
            "message": self.as_admin(Some(world), read(format!("/api/v1/documents/{d}/messages/req-1/attachments")), StatusCode::OK).await,
            "versions": self.as_admin(Some(world), read(format!("/api/v1/documents/{d}/versions")), StatusCode::OK).await["versions"].as_array().map(Vec::len),
            "members": self.as_admin(Some(world), read(format!("/api/v1/repositories/{}/members", world.repository)), StatusCode::OK).await,
            "documents": self.as_admin(Some(world), read(format!("/api/v1/documents?repository={}&archived=true&limit=500", world.repository)), StatusCode::OK).await["documents"].as_array().map(|d| d.iter().map(|d| d["id"].clone()).collect::<Vec<_>>()),
        })
    }
}

impl World {
    fn empty() -> Self {
        World {
            repository: String::new(),
            document: String::new(),
            slug: String::new(),
            child: String::new(),
            image: String::new(),
            attachment: String::new(),
            read_token: String::new(),
            write_token: String::new(),
            other_token: String::new(),
        }
    }
}

/// The request of a route's case in `world` for `who`, and the status an allowed caller gets.
/// `None` for a route this matrix has no case for, which fails the test.
async fn case(
    matrix: &Matrix,
    route: &RouteEntry,
    world: &World,
    who: Who,
) -> Option<(Call, StatusCode)> {
    use StatusCode as S;
    let d = &world.document;
    let r = &world.repository;
    let path = |template: &str| {
        template
            .replace("{id}", d)
            .replace("{owner}/{name}", r)
            .replace("{sha256}", &world.image)
            .replace("{attachment}", &world.attachment)
            .replace("{request_id}", "req-1")
            .replace("{version}", "1")
            .replace("{user}", "zed")
    };
    let m = route.method.clone();
    let p = route.path;
    let name = match who {
        Who::Outsider => "out",
        Who::Viewer => "vic",
        Who::Editor => "ed",
        Who::Admin => "ann",
        _ => "root",
    };
    Some(match (m.as_str(), p) {
        ("GET", "/healthz" | "/readyz") => (Call::new(m, p), S::OK),
        // Metrics go to this machine or a scrape token; a request without a peer address is
        // neither.
        ("GET", "/metrics") => (Call::new(m, p), S::FORBIDDEN),
        // Accounts.
        ("POST", "/api/v1/session") => (
            Call::new(m, p).json(&json!({"name": "ann", "password": PASSWORD})),
            S::OK,
        ),
        ("DELETE", "/api/v1/session") => (Call::new(m, p), S::BAD_REQUEST),
        ("POST", "/api/v1/session/reauth") => (
            Call::new(m, p).json(&json!({"password": PASSWORD})),
            S::BAD_REQUEST,
        ),
        ("GET" | "PUT" | "DELETE", "/api/v1/session/credentials") => (
            Call::new(m, p).json(&json!({"credentials": {}})),
            S::BAD_REQUEST,
        ),
        ("GET", "/api/v1/me") => (Call::new(m, p), S::OK),
        ("GET", "/api/v1/tokens") => (Call::new(m, p), S::OK),
        ("POST", "/api/v1/tokens") => (Call::new(m, p).json(&json!({"label": "more"})), S::CREATED),
        ("DELETE", "/api/v1/tokens/{id}") => {
            (Call::new(m, "/api/v1/tokens/no-such-token"), S::NOT_FOUND)
        }
        ("GET", "/api/v1/machines") => (Call::new(m, p), S::OK),
        ("POST", "/api/v1/machines") => {
            (Call::new(m, p).json(&json!({"name": "laptop"})), S::CREATED)
        }
        ("DELETE", "/api/v1/machines/{id}") => (
            Call::new(m, "/api/v1/machines/no-such-machine"),
            S::NOT_FOUND,
        ),
        ("POST", "/api/v1/machines/{id}/reauthorize") => (
            Call::new(m, "/api/v1/machines/no-such-machine/reauthorize"),
            S::NOT_FOUND,
        ),
        ("GET", "/api/v1/machine") => (Call::new(m, p), S::OK),
        ("PUT" | "DELETE", "/api/v1/machine/credentials") => {
            (Call::new(m, p).json(&json!({"credentials": {}})), S::OK)
        }
        ("GET", "/api/v1/users") => (Call::new(m, p), S::OK),
        ("POST", "/api/v1/users") => (
            Call::new(m, p).json(&json!({"name": "newcomer"})),
            S::CREATED,
        ),
        ("PUT", "/api/v1/users/{name}/roles") => (
            Call::new(m, "/api/v1/users/zed/roles").json(&json!({"roles": []})),
            S::OK,
        ),
        // Documents.
        ("POST", "/api/v1/documents") => (
            Call::new(m, p).json(&json!({"repository": r, "title": "Made"})),
            S::CREATED,
        ),
        ("GET", "/api/v1/documents") => (Call::new(m, format!("{p}?repository={r}")), S::OK),
        ("GET", "/api/v1/search") => (Call::new(m, format!("{p}?q=doc&repository={r}")), S::OK),
        ("GET", "/api/v1/documents/by-slug") => (
            Call::new(m, format!("{p}?repository={r}&slug={}", world.slug)),
            S::OK,
        ),
        ("GET", "/api/v1/documents/{id}") => (Call::new(m, path(p)), S::OK),
        ("PATCH", "/api/v1/documents/{id}") => (
            Call::new(m, path(p)).json(&json!({"title": "Renamed"})),
            S::OK,
        ),
        ("DELETE", "/api/v1/documents/{id}") => (
            Call::new(m, format!("/api/v1/documents/{}", world.child)),
            S::NO_CONTENT,
        ),
        ("PUT", "/api/v1/documents/{id}/text") => (
            Call::new(m, path(p)).json(&json!({"text": "rewritten\n"})),
            S::OK,
        ),
        ("GET", "/api/v1/documents/{id}/state") => (Call::new(m, path(p)), S::OK),
        ("POST", "/api/v1/documents/{id}/updates") => (
            Call::new(m, path(p)).bytes(fresh_update("merged "), "application/octet-stream"),
            S::OK,
        ),
        ("POST", "/api/v1/documents/{id}/client-tokens") => (
            Call::new(m, path(p)).json(&json!({"access": "read", "ttl": 60})),
            S::CREATED,
        ),
        ("POST", "/api/v1/documents/{id}/archive") => (Call::new(m, path(p)), S::OK),
        ("POST", "/api/v1/documents/{id}/restore") => (
            Call::new(m, format!("/api/v1/documents/{}/restore", world.child)),
            S::OK,
        ),
        ("GET", "/api/v1/documents/{id}/children") => (Call::new(m, path(p)), S::OK),
        ("GET", "/api/v1/documents/{id}/versions") => (Call::new(m, path(p)), S::OK),
        ("POST", "/api/v1/documents/{id}/versions/{version}/restore") => {
            (Call::new(m, path(p)), S::OK)
        }
        ("GET", "/api/v1/openapi.json") => (Call::new(m, p), S::OK),
        // A document's files.
        ("POST", "/api/v1/documents/{id}/images") => {
            (Call::new(m, path(p)).bytes(png(), "image/png"), S::OK)
        }
        ("GET", "/api/v1/documents/{id}/images" | "/api/v1/documents/{id}/images/{sha256}") => {
            (Call::new(m, path(p)), S::OK)
        }
        ("POST", "/api/v1/documents/{id}/attachments") => (
            Call::new(m, format!("{}?name=more.txt", path(p)))
                .bytes(b"more\n".to_vec(), "text/plain"),
            S::CREATED,
        ),
        ("GET", "/api/v1/documents/{id}/attachments/{attachment}") => {
            (Call::new(m, path(p)), S::OK)
        }
        ("POST", "/api/v1/documents/{id}/messages/{request_id}/attachments") => {
            // An allowed sender sends a file of their own: uploaded first, as them.
            let mine = if who.role() >= Some(RepositoryRole::Editor) && !who.is_client_token() {
                let upload = Call::new(
                    Method::POST,
                    format!("/api/v1/documents/{d}/attachments?name=mine.txt"),
                )
                .bytes(b"mine\n".to_vec(), "text/plain");
                let answer = matrix.send(who, world, &upload).await;
                serde_json::from_str::<Value>(&answer.body)
                    .ok()
                    .and_then(|v| v["id"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| world.attachment.clone())
            } else {
                world.attachment.clone()
            };
            (
                Call::new(m, p.replace("{id}", d).replace("{request_id}", "req-2"))
                    .json(&json!({"attachments": [mine]})),
                S::OK,
            )
        }
        ("GET" | "DELETE", "/api/v1/documents/{id}/messages/{request_id}/attachments") => {
            (Call::new(m, path(p)), S::OK)
        }
        // Repositories.
        ("GET", "/api/v1/repositories") => (Call::new(m, p), S::OK),
        ("POST", "/api/v1/repositories") => (
            Call::new(m, p).json(&json!({"name": format!("{name}/made")})),
            S::CREATED,
        ),
        (
            "GET",
            "/api/v1/repositories/{owner}/{name}"
            | "/api/v1/repositories/{owner}/{name}/members"
            | "/api/v1/repositories/{owner}/{name}/audit"
            | "/api/v1/repositories/{owner}/{name}/export",
        ) => (Call::new(m, path(p)), S::OK),
        ("PUT", "/api/v1/repositories/{owner}/{name}/members/{user}") => (
            Call::new(m, path(p)).json(&json!({"role": "viewer"})),
            S::OK,
        ),
        ("DELETE", "/api/v1/repositories/{owner}/{name}/members/{user}") => {
            (Call::new(m, path(p)), S::NO_CONTENT)
        }
        // Live editing: the policy lets the upgrade through; without a socket it cannot finish.
        ("GET", "/sync/{*room}") => {
            let mut call = Call::new(m, format!("/sync/{d}"));
            call.upgrade = true;
            (call, S::UPGRADE_REQUIRED)
        }
        // Schema operations: nothing is configured, so each answers that, past the policy.
        ("GET", "/api/v1/schema/operations" | "/api/v1/schema/lease") => (Call::new(m, p), S::OK),
        ("GET", "/api/v1/schema/inventory") => (Call::new(m, p), S::NOT_FOUND),
        ("GET", "/api/v1/schema/registry") => (Call::new(m, p), S::UNPROCESSABLE_ENTITY),
        (
            "POST",
            "/api/v1/schema/inventory" | "/api/v1/schema/refresh" | "/api/v1/schema/verification",
        ) => (Call::new(m, p).json(&json!({})), S::UNPROCESSABLE_ENTITY),
        (
            "GET",
            "/api/v1/schema/operations/{id}"
            | "/api/v1/schema/operations/{id}/review"
            | "/api/v1/schema/operations/{id}/drift",
        ) => (
            Call::new(m, p.replace("{id}", "no-such-operation")),
            S::NOT_FOUND,
        ),
        ("GET", "/api/v1/schema/operations/{id}/drift/ddl") => (
            Call::new(
                m,
                format!(
                    "{}?database=app&direction=adopt",
                    p.replace("{id}", "no-such-operation")
                ),
            ),
            S::NOT_FOUND,
        ),
        (
            "POST",
            "/api/v1/schema/operations/{id}/approve"
            | "/api/v1/schema/operations/{id}/reject"
            | "/api/v1/schema/operations/{id}/publish"
            | "/api/v1/schema/operations/{id}/close-pull-request"
            | "/api/v1/schema/lease/clear",
        ) => (
            Call::new(m, p.replace("{id}", "no-such-operation")).json(&json!({})),
            S::NOT_FOUND,
        ),
        // Pages.
        ("GET", "/") => (Call::new(m, p), S::OK),
        // The home page's form: a repository under the caller's own name.
        ("POST", "/r") => (
            Call::new(m, p).bytes(b"name=made-here".to_vec(), FORM),
            S::SEE_OTHER,
        ),
        ("GET", "/assets/{name}") => (Call::new(m, "/assets/editor.js"), S::OK),
        ("GET", "/d/{*document}") => (Call::new(m, format!("/d/{d}")), S::OK),
        ("GET", "/login") => (Call::new(m, p), S::OK),
        ("POST", "/documents/{id}/rename") => (
            Call::new(m, path(p)).bytes(b"title=Renamed".to_vec(), FORM),
            S::SEE_OTHER,
        ),
        ("POST", "/documents/{id}/archive") => {
            (Call::new(m, path(p)).bytes(Vec::new(), FORM), S::SEE_OTHER)
        }
        ("POST", "/documents/{id}/restore") => (
            Call::new(m, format!("/documents/{}/restore", world.child)).bytes(Vec::new(), FORM),
            S::SEE_OTHER,
        ),
        ("POST", "/documents/{id}/delete") => (
            Call::new(m, format!("/documents/{}/delete", world.child)).bytes(Vec::new(), FORM),
            S::SEE_OTHER,
        ),
        ("GET", "/documents/{id}/history/{version}") => (Call::new(m, path(p)), S::OK),
        ("GET", "/documents/{id}/history/compare") => (Call::new(m, path(p)), S::OK),
        ("POST", "/documents/{id}/history/{version}/restore") => {
            (Call::new(m, path(p)).bytes(Vec::new(), FORM), S::SEE_OTHER)
        }
        ("GET", "/r/{owner}/{name}") => (Call::new(m, path(p)), S::OK),
        // The results page, searching the world's repository by name.
        ("GET", "/search") => (Call::new(m, format!("{p}?q=doc&repository={r}")), S::OK),
        ("POST", "/r/{owner}/{name}/documents") => (
            Call::new(m, path(p)).bytes(b"title=Made".to_vec(), FORM),
            S::SEE_OTHER,
        ),
        ("POST", "/r/{owner}/{name}/members") => (
            Call::new(m, path(p)).bytes(b"user=zed&role=editor".to_vec(), FORM),
            S::SEE_OTHER,
        ),
        ("POST", "/r/{owner}/{name}/members/{user}/remove") => {
            (Call::new(m, path(p)).bytes(Vec::new(), FORM), S::SEE_OTHER)
        }
        // Pages: a program's token reaches them, and every form answers with a redirect.
        ("POST", "/login") => (
            Call::new(m, p).bytes(b"name=ann&password=x".to_vec(), FORM),
            S::SEE_OTHER,
        ),
        ("POST", "/logout") => (Call::new(m, p), S::SEE_OTHER),
        ("GET", "/reauth" | "/account") => (Call::new(m, p), S::OK),
        // Only a browser session re-authenticates: a token is sent back to the form.
        ("POST", "/reauth") => (
            Call::new(m, p).bytes(format!("password={PASSWORD}").into_bytes(), FORM),
            S::SEE_OTHER,
        ),
        ("POST", "/account/credentials") => (
            Call::new(m, p).bytes(b"name=x&value=y".to_vec(), FORM),
            S::SEE_OTHER,
        ),
        ("POST", "/account/credentials/clear") => {
            (Call::new(m, p).bytes(Vec::new(), FORM), S::SEE_OTHER)
        }
        ("POST", "/account/tokens") => (
            Call::new(m, p).bytes(b"label=x".to_vec(), FORM),
            S::SEE_OTHER,
        ),
        ("POST", "/account/machines") => (
            Call::new(m, p).bytes(b"name=x".to_vec(), FORM),
            S::SEE_OTHER,
        ),
        (
            "POST",
            "/account/tokens/{id}/revoke"
            | "/account/machines/{id}/reauthorize"
            | "/account/machines/{id}/revoke",
        ) => (
            Call::new(m, p.replace("{id}", "no-such-thing")),
            S::SEE_OTHER,
        ),
        ("GET", "/admin/schema") => (Call::new(m, p), S::OK),
        ("GET", "/admin/schema/operations/{id}" | "/admin/schema/operations/{id}/drift") => (
            Call::new(m, p.replace("{id}", "no-such-operation")),
            S::NOT_FOUND,
        ),
        (
            "POST",
            "/admin/schema/inventory"
            | "/admin/schema/start"
            | "/admin/schema/operations/{id}/approve"
            | "/admin/schema/operations/{id}/reject"
            | "/admin/schema/operations/{id}/publish"
            | "/admin/schema/operations/{id}/close-pull-request"
            | "/admin/schema/lease/clear",
        ) => (
            Call::new(m, p.replace("{id}", "no-such-operation")).bytes(Vec::new(), FORM),
            S::SEE_OTHER,
        ),
        _ => return None,
    })
}

async fn the_matrix_covers_every_route(storage: ScratchStorage) {
    let matrix = Matrix::new(storage).await;
    let shared = matrix.world().await;
    let table = fermata_http::route_table();
    assert!(table.len() > 50, "the table lists {} routes", table.len());
    let mut missing = Vec::new();
    let mut failures = Vec::new();
    for route in &table {
        for who in EVERYONE {
            let refused = refusal(route.access, who);
            let write = route.method != Method::GET;
            // An allowed write changes its world: it gets one of its own.
            let world = if refused.is_none() && write && concerns_a_world(route.access) {
                matrix.world().await
            } else {
                shared.clone()
            };
            let Some((call, ok)) = case(&matrix, route, &world, who).await else {
                missing.push(format!("{} {}", route.method, route.path));
                break;
            };
            let checks_state = refused.is_some() && write && concerns_a_world(route.access);
            let before = if checks_state {
                Some(matrix.snapshot(&world).await)
            } else {
                None
            };
            let answer = matrix.send(who, &world, &call).await;
            let want = refused.unwrap_or(ok);
            if answer.status != want {
                failures.push(format!(
                    "{} {} as {who:?}: {} (expected {want}): {}",
                    route.method,
                    route.path,
                    answer.status,
                    answer.body.chars().take(200).collect::<String>()
                ));
            }
            if let Some(before) = before {
                let after = matrix.snapshot(&world).await;
                if before != after {
                    failures.push(format!(
                        "{} {} as {who:?} was refused ({}) but changed {before} into {after}",
                        route.method, route.path, answer.status
                    ));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "routes with no case in the authorization matrix (add one): {missing:#?}"
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );

    // The system_admin's uses of the shared repository were recorded.
    let audit = matrix
        .as_admin(
            Some(&shared),
            Call::new(
                Method::GET,
                format!("/api/v1/repositories/{}/audit?limit=500", shared.repository),
            ),
            StatusCode::OK,
        )
        .await;
    let actions: Vec<&str> = audit["overrides"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["user"] == "root")
        .filter_map(|o| o["action"].as_str())
        .collect();
    for action in [
        "GET /api/v1/documents/{id}",
        "GET /api/v1/documents/{id}/state",
        "GET /sync/{*room}",
        "GET /api/v1/repositories/{owner}/{name}/members",
    ] {
        assert!(
            actions.contains(&action),
            "{action} is not in the audit: {actions:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_the_matrix_covers_every_route() {
    the_matrix_covers_every_route(
        ScratchDatabase::sqlite()
            .open(StoreOptions::default())
            .await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_the_matrix_covers_every_route() {
    the_matrix_covers_every_route(
        ScratchDatabase::postgres()
            .await
            .open(StoreOptions::default())
            .await,
    )
    .await;
}

#[tokio::test]
async fn lists_leave_out_what_the_caller_cannot_read() {
    let matrix = Matrix::new(
        ScratchDatabase::sqlite()
            .open(StoreOptions::default())
            .await,
    )
    .await;
    let mine = matrix.world().await;
    let theirs = matrix.world().await;
    // vic reads one of the two repositories only.
    matrix
        .as_admin(
            None,
            Call::new(
                Method::DELETE,
                format!("/api/v1/repositories/{}/members/vic", theirs.repository),
            ),
            StatusCode::NO_CONTENT,
        )
        .await;
    let list = |who: Who, uri: &str| {
        let call = Call::new(Method::GET, uri);
        let matrix = &matrix;
        let mine = &mine;
        async move { matrix.send(who, mine, &call).await }
    };
    let documents = list(Who::Viewer, "/api/v1/documents?archived=true&limit=500").await;
    assert_eq!(documents.status, StatusCode::OK, "{}", documents.body);
    let repositories: std::collections::BTreeSet<String> = documents.json()["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["repository"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(repositories, [mine.repository.clone()].into());
    let listed = list(Who::Viewer, "/api/v1/repositories").await.json();
    assert_eq!(
        listed["repositories"],
        json!([{"name": mine.repository, "created_at": listed["repositories"][0]["created_at"], "role": "viewer"}])
    );
    // An outsider's lists are empty, and naming a repository or a slug teaches them nothing.
    let outsider = list(Who::Outsider, "/api/v1/documents").await.json();
    assert_eq!(outsider["documents"], json!([]));
    let named = list(
        Who::Outsider,
        &format!("/api/v1/documents?repository={}", mine.repository),
    )
    .await;
    let missing = list(Who::Outsider, "/api/v1/documents?repository=ann/none").await;
    assert_eq!((named.status, named.body), (missing.status, missing.body));
    let slug = list(
        Who::Outsider,
        &format!(
            "/api/v1/documents/by-slug?repository={}&slug={}",
            mine.repository, mine.slug
        ),
    )
    .await;
    let no_slug = list(
        Who::Outsider,
        &format!(
            "/api/v1/documents/by-slug?repository={}&slug=nothing-here",
            mine.repository
        ),
    )
    .await;
    assert_eq!((slug.status, slug.body), (no_slug.status, no_slug.body));
    let document = list(
        Who::Outsider,
        &format!("/api/v1/documents/{}", mine.document),
    )
    .await;
    let unknown = list(
        Who::Outsider,
        &format!("/api/v1/documents/{}", ChannelId::random()),
    )
    .await;
    assert_eq!(
        (document.status, document.body),
        (unknown.status, unknown.body)
    );
    // Search answers as the lists do: a member finds only their repositories' documents; an
    // outsider finds nothing, and naming a repository teaches them no more than naming one that
    // does not exist; a system_admin who is no member finds a repository's documents only by
    // naming it (the audited override).
    let found = list(Who::Viewer, "/api/v1/search?q=doc&archived=true&limit=100").await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.body);
    let searched: std::collections::BTreeSet<String> = found.json()["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["repository"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(searched, [mine.repository.clone()].into());
    let theirs_named = list(
        Who::Viewer,
        &format!("/api/v1/search?q=doc&repository={}", theirs.repository),
    )
    .await;
    assert_eq!(theirs_named.status, StatusCode::NOT_FOUND);
    let outsider = list(Who::Outsider, "/api/v1/search?q=doc&archived=true").await;
    assert_eq!(outsider.status, StatusCode::OK);
    assert_eq!(
        outsider.json(),
        json!({"results": [], "next_cursor": null}),
        "an outsider's search shows nothing and counts nothing"
    );
    let named = list(
        Who::Outsider,
        &format!("/api/v1/search?q=doc&repository={}", mine.repository),
    )
    .await;
    let missing = list(Who::Outsider, "/api/v1/search?q=doc&repository=ann/none").await;
    assert_eq!((named.status, named.body), (missing.status, missing.body));
    let root = list(Who::SystemAdmin, "/api/v1/search?q=doc").await.json();
    assert_eq!(root["results"], json!([]));
    let overridden = list(
        Who::SystemAdmin,
        &format!("/api/v1/search?q=doc&repository={}", theirs.repository),
    )
    .await
    .json();
    assert!(
        overridden["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["repository"] == json!(theirs.repository)),
        "{overridden}"
    );
    assert!(!overridden["results"].as_array().unwrap().is_empty());
    // A system_admin may list every repository, and nobody else may.
    let all = list(Who::SystemAdmin, "/api/v1/repositories?all=true&limit=1")
        .await
        .json();
    assert_eq!(all["repositories"].as_array().unwrap().len(), 1);
    assert!(all["next_cursor"].is_string());
    assert_eq!(
        list(Who::Admin, "/api/v1/repositories?all=true")
            .await
            .status,
        StatusCode::FORBIDDEN
    );
}

/// Whether a route is a page for people or what pages load, which docs/access.md lists one by
/// one (the administrator pages it covers in one sentence).
fn is_listed_page(path: &str) -> bool {
    ![
        "/api/", "/sync/", "/admin/", "/healthz", "/readyz", "/metrics",
    ]
    .iter()
    .any(|prefix| path.starts_with(prefix))
}

#[test]
fn the_page_routes_in_access_md_match_the_route_table() {
    let doc = include_str!("../../../../docs/access.md");
    let section = doc
        .split("## The pages")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/access.md has a section on the pages");
    // Each row: | `METHOD PATH` | `ACCESS` | who |
    let documented: std::collections::BTreeSet<(String, String)> = section
        .lines()
        .filter_map(|line| {
            let mut cells = line.split('|').map(str::trim).skip(1);
            let route = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            let access = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            Some((route.to_owned(), access.to_owned()))
        })
        .collect();
    let table = fermata_http::route_table();
    let served: std::collections::BTreeSet<(String, String)> = table
        .iter()
        .filter(|route| is_listed_page(route.path))
        .map(|route| {
            (
                format!("{} {}", route.method, route.path),
                format!("{:?}", route.access),
            )
        })
        .collect();
    let missing: Vec<_> = served.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&served).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/access.md's page routes differ from the route table: \
         not in the doc {missing:#?}, not in the table {stale:#?}"
    );
    for route in table
        .iter()
        .filter(|route| route.path.starts_with("/admin/"))
    {
        assert_eq!(route.access, Access::AdminPage, "{}", route.path);
    }
}
