//! What the HTTP tests share: an application state on a real SQLite database, sending a request
//! through the router without a socket, callers with a login session, and an application with a
//! repository and its members for the page tests.

#![allow(dead_code, unreachable_pub)] // each test file uses its own part of this module

use std::collections::BTreeSet;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use axum::response::Response;
use fermata_accounts::{AccountSettings, Accounts, KeyringHandle};
use fermata_collab::{
    CollabSettings, DocumentFences, Documents, Media, MediaSettings, RoomManager, WriterFence,
};
use fermata_crypto::Keyring;
use fermata_crypto::SecretToken;
use fermata_http::{HttpState, Phase, Readiness, router};
use fermata_metrics::Metrics;
use fermata_schema::artifact::ArtifactStore;
use fermata_schema::drift::DEFAULT_DRIFT_RETENTION;
use fermata_schema::refresh_run::{
    DEFAULT_CONNECTIONS, DEFAULT_PUBLICATION_WAIT, DEFAULT_REVIEW_WINDOW,
};
use fermata_schema::{
    DriftDiffs, EngineWorkflows, InventoryWorkflow, Operations, RefreshSettings, RefreshWorkflow,
    RegistryReports, Reviews, VerificationSettings, VerificationWorkflow,
};
use fermata_store::{Acquisition, LeaseName, Role, Storage, StoreOptions};
use fermata_store_sql::testing::{ScratchDatabase, ScratchStorage};
use serde_json::{Value, json};
use tower::ServiceExt;

/// The application state every route needs, on `storage`, writing under `fence`.
pub fn state(storage: &ScratchStorage, fence: WriterFence) -> HttpState {
    state_on(Arc::new(storage.clone()), fence)
}

/// [`state`] on any storage (a real one wrapped to fail chosen calls, say).
pub fn state_on(shared: Arc<dyn Storage>, fence: WriterFence) -> HttpState {
    member_state(
        shared,
        fence.clone(),
        DocumentFences::whole(fence),
        Arc::new(KeyringHandle::new(Keyring::generate(), None)),
    )
}

/// The state of one process among several on one database: its documents written under
/// `fences` (a cluster member's, or one fence for a process that serves alone), its other writes
/// under `fence`, and its accounts under the `keyring` the processes share.
pub fn member_state(
    shared: Arc<dyn Storage>,
    fence: WriterFence,
    fences: DocumentFences,
    keyring: Arc<KeyringHandle>,
) -> HttpState {
    let accounts = Accounts::new(Arc::clone(&shared), keyring, AccountSettings::default());
    let metrics = Arc::new(Metrics::new("test"));
    let rooms = RoomManager::new(
        Arc::clone(&shared),
        fences,
        CollabSettings::default(),
        Arc::clone(&metrics),
    );
    // Review artifacts in memory, sealed with a key of their own: no test here opens one.
    let artifacts = ArtifactStore::new(
        Arc::new(object_store::memory::InMemory::new()),
        Arc::new(KeyringHandle::new(Keyring::generate(), None)),
    );
    let refresh = RefreshWorkflow::new(
        Arc::clone(&shared),
        RefreshSettings {
            source: None,
            workspace: None,
            package: None,
            artifacts: artifacts.clone(),
            scratch: std::env::temp_dir(),
            review_window: DEFAULT_REVIEW_WINDOW,
            connections: DEFAULT_CONNECTIONS,
            filter: fermata_schema::Filter::default(),
            publication_wait: DEFAULT_PUBLICATION_WAIT,
            lint: Default::default(),
        },
    );
    let verification = VerificationWorkflow::new(
        Arc::clone(&shared),
        VerificationSettings {
            source: None,
            package: None,
            connections: DEFAULT_CONNECTIONS,
            filter: fermata_schema::Filter::default(),
            artifacts: artifacts.clone(),
            workspace: None,
        },
    );
    let engine = fermata_workflow::Engine::new(Arc::clone(&shared))
        .register(InventoryWorkflow::new(Arc::clone(&shared), None))
        .register(refresh)
        .register(verification);
    let workflows = Arc::new(EngineWorkflows::new(engine));
    let schema = Operations::new(Arc::clone(&shared), workflows.clone());
    let drift = DriftDiffs::new(
        Arc::clone(&shared),
        artifacts.clone(),
        DEFAULT_DRIFT_RETENTION,
    );
    let reviews = Reviews::new(Arc::clone(&shared), workflows, artifacts, None);
    let registry = RegistryReports::new(Arc::clone(&shared), None);
    // The handlers are tested as a serving process runs them; `standby.rs` tests the others.
    let readiness = Readiness::default();
    readiness.set(Phase::Serving);
    HttpState {
        readiness,
        metrics,
        accounts: Arc::new(accounts),
        media: Media::new(Arc::clone(&shared), fence.clone(), MediaSettings::default()),
        documents: Documents::new(shared, fence, rooms),
        schema,
        reviews,
        registry,
        drift,
        schema_setup: Default::default(),
        secure_cookies: false,
        edge: fermata_http::edge::EdgeSettings::local(([127, 0, 0, 1], 7878).into()),
    }
}

/// What a request sent back.
pub struct Answer {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("not JSON: {}", self.body))
    }

    /// The error code of an error body.
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("not an error body: {}", self.body))
            .to_owned()
    }

    /// The session secret the response set, if any.
    pub fn session_cookie(&self) -> Option<String> {
        self.headers
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|v| v.strip_prefix("fermata_session="))
            .map(|rest| rest.split(';').next().unwrap_or_default().to_owned())
            .filter(|value| !value.is_empty())
    }
}

/// Sends `request` through the router.
pub async fn send(state: &HttpState, request: Request<Body>) -> Answer {
    let response: Response = router(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 24)
        .await
        .unwrap();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// A browser or program session against the app.
#[derive(Clone, Default)]
pub struct Caller {
    pub cookie: Option<String>,
    pub csrf: Option<String>,
    pub bearer: Option<String>,
}

/// Sends `body`, if any, as JSON, as `caller`.
pub async fn call(
    state: &HttpState,
    caller: &Caller,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> Answer {
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(cookie) = &caller.cookie {
        request = request.header(header::COOKIE, format!("fermata_session={cookie}"));
    }
    if let Some(csrf) = &caller.csrf {
        request = request.header("x-csrf-token", csrf);
    }
    if let Some(bearer) = &caller.bearer {
        request = request.header(header::AUTHORIZATION, format!("Bearer {bearer}"));
    }
    let body = match body {
        Some(value) => {
            request = request.header(header::CONTENT_TYPE, "application/json");
            Body::from(value.to_string())
        }
        None => Body::empty(),
    };
    send(state, request.body(body).unwrap()).await
}

/// Logs `name` in: a caller with the session's cookie and CSRF token.
pub async fn login(state: &HttpState, name: &str, password: &str) -> Caller {
    let answer = call(
        state,
        &Caller::default(),
        "POST",
        "/api/v1/session",
        Some(json!({"name": name, "password": password})),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    Caller {
        cookie: Some(answer.session_cookie().expect("a session cookie")),
        csrf: Some(answer.json()["csrf_token"].as_str().unwrap().to_owned()),
        bearer: None,
    }
}

/// Makes every session's password entry older than the ten minutes that count as fresh.
pub async fn age_sessions(storage: &ScratchStorage) {
    sqlx::query("UPDATE web_sessions SET authenticated_at = authenticated_at - 660000")
        .execute(storage.storage.pool())
        .await
        .unwrap();
}

/// The password the page tests give their users.
pub const PAGES_PASSWORD: &str = "correct horse battery staple";

/// An application on a scratch SQLite database, writing under the writer lease, where `ada`
/// administers `ada/notes`, `vic` is a viewer there and `out` is no member (each with
/// [`PAGES_PASSWORD`]). `Tests` is a type of one test file's own, which adds its methods to
/// `NotesApp<Tests>`.
pub struct NotesApp<Tests> {
    pub state: HttpState,
    pub ada: Caller,
    pub vic: Caller,
    pub out: Caller,
    _storage: ScratchStorage,
    tests: PhantomData<Tests>,
}

impl<Tests> NotesApp<Tests> {
    /// Starts the application, taking the writer lease as `holder`; each of `others` is added
    /// too, with the roles given.
    pub async fn start(holder: &str, others: &[(&str, BTreeSet<Role>)]) -> Self {
        let storage = ScratchDatabase::sqlite()
            .open(StoreOptions::default())
            .await;
        let fence = WriterFence::default();
        let state = state(&storage, fence.clone());
        let Acquisition::Granted(lease) = storage
            .leases()
            .acquire(&LeaseName::WRITER, holder, Duration::from_secs(3600))
            .await
            .unwrap()
        else {
            panic!("the writer lease is held");
        };
        fence.set(Some(lease.fence()));
        let members = ["ada", "vic", "out"].map(|name| (name, BTreeSet::new()));
        for (name, roles) in members.iter().chain(others) {
            state
                .accounts
                .add_user(
                    name,
                    Some(SecretToken::from_given(PAGES_PASSWORD)),
                    roles.clone(),
                )
                .await
                .unwrap();
        }
        let app = NotesApp {
            ada: login(&state, "ada", PAGES_PASSWORD).await,
            vic: login(&state, "vic", PAGES_PASSWORD).await,
            out: login(&state, "out", PAGES_PASSWORD).await,
            state,
            _storage: storage,
            tests: PhantomData,
        };
        let made = app
            .call(
                &app.ada,
                "POST",
                "/api/v1/repositories",
                Some(json!({"name": "ada/notes"})),
            )
            .await;
        assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
        let viewer = app
            .call(
                &app.ada,
                "PUT",
                "/api/v1/repositories/ada/notes/members/vic",
                Some(json!({"role": "viewer"})),
            )
            .await;
        assert_eq!(viewer.status, StatusCode::OK, "{}", viewer.body);
        app
    }

    /// Sends `body`, if any, as JSON, as `caller`.
    pub async fn call(
        &self,
        caller: &Caller,
        method: &str,
        uri: &str,
        body: Option<Value>,
    ) -> Answer {
        call(&self.state, caller, method, uri, body).await
    }

    /// `GET uri` as `caller`.
    pub async fn get(&self, caller: &Caller, uri: &str) -> Answer {
        self.call(caller, "GET", uri, None).await
    }

    /// Creates a document in `ada/notes` titled `title` as ada; the answer's body.
    pub async fn create_document(&self, title: &str) -> Value {
        let answer = self
            .call(
                &self.ada,
                "POST",
                "/api/v1/documents",
                Some(json!({"repository": "ada/notes", "title": title})),
            )
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
        answer.json()
    }
}
