//! The HTTP surface of `fermata serve`: liveness, readiness and Prometheus metrics; log in, log
//! out and re-authenticate (pages and JSON); the account page; the schema administrator page;
//! the accounts API; the documents API with a document's images and Chat attachments; the
//! repositories API; the schema operations API; the document page with its editor's assets; and
//! the signed-in home page, the repository pages and the search results page; the `/sync`
//! WebSocket endpoint for live collaboration.
//!
//! Every route is declared in one table with the access it needs ([`route_table`]), and one
//! layer applies that table to every request (see `policy`). Every page is drawn in one skeleton
//! under one Content-Security-Policy (see `view`, the leaf every page module builds on). The
//! server is started with a listener and a shutdown future as parameters, so tests run it on
//! port 0 or call the router directly without a socket. Every handler reaches storage through a service
//! ([`fermata_accounts::Accounts`], the documents and media services of `fermata-collab`, the
//! schema operations of `fermata-schema`), never a store that holds secrets, a line of SQL or a
//! driver.
//!
//! What a client may take of the server (connections, time) is bounded in `limits.rs`; what
//! every request is checked for and every answer carries (hosts, caching, page policies, safe
//! errors) in [`edge`]. In a member of a cluster, a live connection or a documents API request
//! for a document another member writes is forwarded to that member (`forward.rs`).

mod admin_page;
mod api;
mod assets;
pub mod auth;
pub mod client_address;
mod cookies;
pub mod csrf;
mod document_actions;
mod document_history;
mod document_page;
mod documents_api;
pub mod edge;
mod error;
mod forward;
mod home_page;
mod images_api;
mod limits;
mod pages;
mod policy;
mod readiness;
mod repositories_api;
mod repository_export;
mod repository_page;
mod request_count;
mod schema_api;
mod search_api;
mod search_page;
mod standby;
mod sync;
mod view;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use fermata_metrics::{Metrics, Observed, SchemaOperationCount};
use fermata_store::ErrorChain;
use tokio::net::TcpListener;

pub use limits::{FILES_KEPT_FREE, HEALTH_RESERVE, ServerLimits, listen};
pub use policy::{Access, RouteEntry};
pub use readiness::{Phase, Readiness};

use policy::{Policy, Routes};

pub use error::ApiError;

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct HttpState {
    /// Whether this process holds the writer lease and serves; `/readyz` reports it.
    pub readiness: Readiness,
    /// The process's metrics; `/metrics` renders them.
    pub metrics: Arc<Metrics>,
    /// Users, sessions, tokens and machines.
    pub accounts: Arc<fermata_accounts::Accounts>,
    /// Documents and their live rooms.
    pub documents: fermata_collab::Documents,
    /// A document's images and Chat attachments.
    pub media: fermata_collab::Media,
    /// Schema operations.
    pub schema: fermata_schema::Operations,
    /// Reviews of refreshes: their diffs and decisions.
    pub reviews: fermata_schema::Reviews,
    /// The package registry with each database's last verification and freshness.
    pub registry: fermata_schema::RegistryReports,
    /// Verifications' drift diffs.
    pub drift: fermata_schema::DriftDiffs,
    /// Which parts of the schema setup are configured, for the administrator page's empty states.
    pub schema_setup: SchemaSetup,
    /// Mark cookies `Secure`: on when the server is reached over TLS (directly or through a
    /// proxy that terminates it). Answers then also carry HSTS.
    pub secure_cookies: bool,
    /// The hosts and origins the server answers for, and who may read `/metrics`.
    pub edge: edge::EdgeSettings,
}

/// Which parts of the schema operations are configured: the page says what is missing before
/// an administrator starts an operation that would fail for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchemaSetup {
    /// A `[schema.source]` MySQL server: without it inventories and refreshes fail.
    pub source: bool,
    /// A `[schema.package]` repository: without it refreshes fail and there is no registry.
    pub package: bool,
    /// `[schema.schedule]`: when `serve` checks for drift by itself.
    pub schedule: Option<fermata_schema::Schedule>,
}

/// Every route, with the access it needs: the one place routes are added.
fn routes() -> Routes {
    Routes::new()
        .get("/healthz", Access::Public, healthz)
        .get("/readyz", Access::Public, readyz)
        .get("/metrics", Access::Public, metrics)
        .merge(api::routes())
        .merge(documents_api::routes())
        .merge(images_api::routes())
        .merge(repositories_api::routes())
        .merge(repository_export::routes())
        .merge(schema_api::routes())
        .merge(search_api::routes())
        .get("/sync/{*room}", Access::Sync, sync::sync)
        .merge(pages::routes())
        .merge(admin_page::routes())
        .get("/assets/{name}", Access::Public, assets::asset)
        .merge(document_page::routes())
        .merge(document_actions::routes())
        .merge(document_history::routes())
        .merge(home_page::routes())
        .merge(repository_page::routes())
        .merge(search_page::routes())
}

/// The route table: every route the router serves, with its method, path template and access.
pub fn route_table() -> Vec<RouteEntry> {
    routes().into_parts().0
}

/// Every route, behind the authorization layer and CSRF protection.
pub fn router(state: HttpState) -> Router {
    let (table, router) = routes().into_parts();
    let policy = Policy {
        state: state.clone(),
        table: table.into(),
    };
    router
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            forward::documents_api,
        ))
        .layer(axum::middleware::from_fn_with_state(
            policy,
            policy::authorize,
        ))
        .layer(axum::middleware::from_fn(csrf::protect))
        .layer(axum::middleware::from_fn_with_state(
            state.readiness.clone(),
            standby::refuse_unless_serving,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            edge::guard,
        ))
        .layer(axum::middleware::from_fn(error::log_failures))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state.metrics),
            request_count::count,
        ))
        .with_state(state)
}

/// Serves `router` on `listener` under `limits` (see [`ServerLimits`]) until `shutdown`
/// completes, then stops accepting and finishes the requests in flight. Turned-away clients are
/// counted in `metrics`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ServerLimits,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    limits::serve(listener, router, limits, metrics, shutdown).await
}

async fn healthz() -> &'static str {
    "ok\n"
}

/// 200 while the process serves and the database takes its work; 503 with the phase otherwise,
/// or with `storage_unavailable` while commits, loads or lease renewals fail (a load balancer
/// then stops sending people to a server that cannot save what they type).
async fn readyz(State(state): State<HttpState>) -> impl IntoResponse {
    match state.readiness.phase() {
        Phase::Serving if state.metrics.storage_available() => {
            (StatusCode::OK, format!("{}\n", Phase::Serving.as_str()))
        }
        Phase::Serving => (
            StatusCode::SERVICE_UNAVAILABLE,
            "storage_unavailable\n".to_owned(),
        ),
        phase => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{}\n", phase.as_str()),
        ),
    }
}

/// The schema operations by kind and state, read from the database on each scrape (a grouped
/// count of a small table); `None`, logged, when the database does not answer.
async fn schema_operation_counts(
    operations: &fermata_schema::Operations,
) -> Option<Vec<SchemaOperationCount>> {
    match operations.counts().await {
        Ok(counts) => Some(
            counts
                .into_iter()
                .map(|count| SchemaOperationCount {
                    kind: count.kind.as_str(),
                    state: count.state.as_str(),
                    count: count.count,
                })
                .collect(),
        ),
        Err(error) => {
            tracing::warn!(error = %ErrorChain(&error), "could not count the schema operations for the metrics");
            None
        }
    }
}

/// The metrics, for this machine or for a scraper with the token, as the operator chose; the
/// writer lease's fencing token only for the scraper that presented the token.
async fn metrics(State(state): State<HttpState>, request: axum::extract::Request) -> Response {
    let (parts, _) = request.into_parts();
    let full = match &state.edge.metrics {
        edge::MetricsAccess::Loopback if client_address::peer_is_loopback(&parts) => false,
        edge::MetricsAccess::Loopback => {
            return ApiError::forbidden("metrics are served to this machine only").into_response();
        }
        access @ edge::MetricsAccess::Token(_) if access.token_presented(&parts.headers) => true,
        edge::MetricsAccess::Token(_) => {
            return ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthenticated",
                "send the scrape token as a bearer token",
            )
            .into_response();
        }
    };
    let logins = state.accounts.login_counts();
    state.metrics.observe(&Observed {
        login_failures: logins.failures,
        login_locks: logins.locks,
        login_throttled: logins.throttled,
        decodes_turned_away: state.media.turned_away(),
        schema_operations: schema_operation_counts(&state.schema).await,
    });
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render_for(full),
    )
        .into_response()
}
