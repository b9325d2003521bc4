//! What the HTTP tests share: an application state on a real SQLite database, and sending a
//! request through the router without a socket.

#![allow(dead_code, unreachable_pub)] // each test file uses its own part of this module

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use axum::response::Response;
use fermata_accounts::{AccountSettings, Accounts, KeyringHandle};
use fermata_collab::{CollabSettings, Documents, RoomManager, WriterFence};
use fermata_crypto::Keyring;
use fermata_http::{HttpState, Metrics, Readiness, router};
use fermata_store::Storage;
use fermata_store_sql::testing::ScratchStorage;
use serde_json::Value;
use tower::ServiceExt;

/// The application state every route needs, on `storage`, writing under `fence`.
pub fn state(storage: &ScratchStorage, fence: WriterFence) -> HttpState {
    let shared: Arc<dyn Storage> = Arc::new(storage.clone());
    let accounts = Accounts::new(
        Arc::clone(&shared),
        Arc::new(KeyringHandle::new(Keyring::generate(), None)),
        AccountSettings::default(),
    );
    let rooms = RoomManager::new(
        Arc::clone(&shared),
        fence.clone(),
        CollabSettings::default(),
    );
    let engine = fermata_workflow::Engine::new(Arc::clone(&shared)).register(
        fermata_schema::InventoryWorkflow::new(Arc::clone(&shared), None),
    );
    let schema = fermata_schema::Operations::new(
        Arc::clone(&shared),
        Arc::new(fermata_schema::EngineWorkflows::new(engine)),
    );
    HttpState {
        readiness: Readiness::default(),
        metrics: Arc::new(Metrics::new("test")),
        accounts: Arc::new(accounts),
        documents: Documents::new(shared, fence, rooms),
        schema,
        secure_cookies: false,
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
