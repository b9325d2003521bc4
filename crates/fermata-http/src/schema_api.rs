//! The schema operations JSON API under `/api/v1/schema`: start an inventory, a refresh or a
//! verification, list operations, read one operation (the route the administrator page polls),
//! read a refresh's review with its diffs, migration scripts and lint findings and approve or
//! reject it, read a verification's drift diffs and scripts (and one script as a file for the
//! `mysql` client, the one answer here that is not JSON), publish again a refresh whose
//! publication failed, close a published pull request, read the latest inventory, the package
//! registry and the lease, and clear an expired lease. Every answer is `Cache-Control:
//! no-store`. What the schema service refuses is its safe error `{stage, code, retryable,
//! message}`; authentication and malformed bodies and queries are refused as by the rest of the
//! API. The decisions, publishing again, closing a pull request and the clear action need a
//! fresh session.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use fermata_accounts::Principal;
use fermata_schema::migration::Direction;
use fermata_schema::view::{
    DriftView, ErrorView, InventoryView, LeaseView, OperationSummary, OperationView, RegistryView,
    ReviewView,
};
use fermata_schema::{Administrator, ErrorCode, ErrorStage, OperationRequest, SafeError, Verdict};
use fermata_store::schema::{InventoryId, OperationId, OperationKind, RequestKey};
use serde::{Deserialize, Serialize};

use crate::HttpState;
use crate::auth::{FreshSystemAdmin, SystemAdmin};
use crate::documents_api::ApiQuery;
use crate::error::{ApiError, RequestFailure, attach};
use crate::policy::{Access, Routes};

pub(crate) fn routes() -> Routes {
    use Access::{FreshSystemAdmin, SystemAdmin};
    Routes::new()
        .get("/api/v1/schema/inventory", SystemAdmin, latest_inventory)
        .post("/api/v1/schema/inventory", SystemAdmin, start_inventory)
        .post("/api/v1/schema/refresh", SystemAdmin, start_refresh)
        .post(
            "/api/v1/schema/verification",
            SystemAdmin,
            start_verification,
        )
        .get("/api/v1/schema/registry", SystemAdmin, registry)
        .get("/api/v1/schema/operations", SystemAdmin, list_operations)
        .get("/api/v1/schema/operations/{id}", SystemAdmin, operation)
        .get("/api/v1/schema/operations/{id}/review", SystemAdmin, review)
        .get("/api/v1/schema/operations/{id}/drift", SystemAdmin, drift)
        .get(
            "/api/v1/schema/operations/{id}/drift/ddl",
            SystemAdmin,
            drift_script,
        )
        .post(
            "/api/v1/schema/operations/{id}/publish",
            FreshSystemAdmin,
            publish,
        )
        .post(
            "/api/v1/schema/operations/{id}/close-pull-request",
            FreshSystemAdmin,
            close_pull_request,
        )
        .post(
            "/api/v1/schema/operations/{id}/approve",
            FreshSystemAdmin,
            approve,
        )
        .post(
            "/api/v1/schema/operations/{id}/reject",
            FreshSystemAdmin,
            reject,
        )
        .get("/api/v1/schema/lease", SystemAdmin, lease)
        .post("/api/v1/schema/lease/clear", FreshSystemAdmin, clear_lease)
        .never_cached()
}

/// A safe error as an answer. Its cause, when it has one, is left for the log of the
/// [`log_failures`](crate::error::log_failures) layer.
#[derive(Debug)]
pub(crate) struct SchemaError(SafeError);

impl From<SafeError> for SchemaError {
    fn from(error: SafeError) -> Self {
        SchemaError(error)
    }
}

#[derive(Serialize)]
struct ErrorBody {
    error: ErrorView,
}

impl IntoResponse for SchemaError {
    fn into_response(self) -> Response {
        let code = self.0.code();
        let status = match (code, self.0.stage()) {
            (ErrorCode::AccessDenied, _) => StatusCode::FORBIDDEN,
            (
                ErrorCode::OperationMissing
                | ErrorCode::InventoryMissing
                | ErrorCode::NoMigrationScript,
                _,
            ) => StatusCode::NOT_FOUND,
            (ErrorCode::StorageUnavailable, _) => StatusCode::SERVICE_UNAVAILABLE,
            (ErrorCode::DiffExpired, _) => StatusCode::GONE,
            (ErrorCode::NothingToPublish, _) => StatusCode::CONFLICT,
            (_, ErrorStage::Lock | ErrorStage::Review) => StatusCode::CONFLICT,
            (_, ErrorStage::Configuration) => StatusCode::UNPROCESSABLE_ENTITY,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let response = json(
            status,
            ErrorBody {
                error: ErrorView::from(&self.0),
            },
        );
        if status.is_server_error() || std::error::Error::source(&self.0).is_some() {
            attach(response, RequestFailure::new(self.0))
        } else {
            response
        }
    }
}

/// `value` as JSON.
fn json(status: StatusCode, value: impl Serialize) -> Response {
    (status, Json(value)).into_response()
}

fn admin(principal: &Principal) -> Result<Administrator, SchemaError> {
    Ok(Administrator::from_principal(principal)?)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StartInventory {
    /// The browser's key for this request; repeating it returns the same operation.
    request_key: String,
}

async fn start_inventory(
    State(state): State<HttpState>,
    SystemAdmin(principal): SystemAdmin,
    Json(body): Json<StartInventory>,
) -> Result<Response, SchemaError> {
    let request = OperationRequest {
        kind: OperationKind::Inventory,
        request_key: request_key(body.request_key)?,
        inventory: None,
        databases: Vec::new(),
        remove_missing: false,
    };
    start(&state, &principal, &request).await
}

/// A refresh or a verification request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StartSelection {
    /// The browser's key for this request; repeating it returns the same operation.
    request_key: String,
    /// The inventory the databases are selected from.
    inventory: String,
    /// The selected names, exactly as the inventory shows them; an empty selection is refused.
    #[serde(default)]
    databases: Vec<String>,
    /// A refresh's proposal to remove from the package the registered databases the inventory
    /// no longer lists; a verification ignores it.
    #[serde(default)]
    remove_missing: bool,
}

async fn start_refresh(
    State(state): State<HttpState>,
    SystemAdmin(principal): SystemAdmin,
    Json(body): Json<StartSelection>,
) -> Result<Response, SchemaError> {
    start_selected(&state, &principal, OperationKind::Refresh, body).await
}

async fn start_verification(
    State(state): State<HttpState>,
    SystemAdmin(principal): SystemAdmin,
    Json(body): Json<StartSelection>,
) -> Result<Response, SchemaError> {
    start_selected(&state, &principal, OperationKind::Verification, body).await
}

/// Starts an operation of `kind` over the selection `body` names.
async fn start_selected(
    state: &HttpState,
    principal: &Principal,
    kind: OperationKind,
    body: StartSelection,
) -> Result<Response, SchemaError> {
    let inventory = body
        .inventory
        .parse::<InventoryId>()
        // Dropped on purpose: text that is not an inventory ID names no inventory.
        .map_err(|_| SafeError::new(ErrorCode::InventoryMissing))?;
    let request = OperationRequest {
        kind,
        request_key: request_key(body.request_key)?,
        inventory: Some(inventory),
        databases: body.databases,
        remove_missing: body.remove_missing,
    };
    start(state, principal, &request).await
}

fn request_key(key: String) -> Result<RequestKey, SchemaError> {
    // Dropped on purpose: the code says what a request key must be.
    Ok(RequestKey::new(key).map_err(|_| SafeError::new(ErrorCode::InvalidRequestKey))?)
}

/// Runs the start protocol for `request` and answers 202 with the operation.
async fn start(
    state: &HttpState,
    principal: &Principal,
    request: &OperationRequest,
) -> Result<Response, SchemaError> {
    let admin = admin(principal)?;
    let operation = state.schema.request(&admin, request).await?;
    let report = state.schema.report(operation.id).await?;
    Ok(json(StatusCode::ACCEPTED, OperationView::from(&report)))
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    limit: Option<u32>,
}

async fn list_operations(
    State(state): State<HttpState>,
    SystemAdmin(_): SystemAdmin,
    Query(query): Query<ListQuery>,
) -> Result<Response, SchemaError> {
    let limit = query.limit.unwrap_or(50).clamp(1, 500);
    let operations = state.schema.recent(limit).await?;
    let list: Vec<_> = operations.iter().map(OperationSummary::from).collect();
    Ok(json(StatusCode::OK, list))
}

/// The exact operation ID, or the "does not exist" answer.
fn operation_id(typed: &str) -> Result<OperationId, SchemaError> {
    typed
        .parse::<OperationId>()
        // Dropped on purpose: text that is not an operation ID names no operation.
        .map_err(|_| SchemaError(SafeError::new(ErrorCode::OperationMissing)))
}

async fn operation(
    State(state): State<HttpState>,
    SystemAdmin(_): SystemAdmin,
    Path(id): Path<String>,
) -> Result<Response, SchemaError> {
    let report = state.schema.report(operation_id(&id)?).await?;
    Ok(json(StatusCode::OK, OperationView::from(&report)))
}

/// The review row of a refresh and the diff of every changed database.
async fn review(
    State(state): State<HttpState>,
    SystemAdmin(principal): SystemAdmin,
    Path(id): Path<String>,
) -> Result<Response, SchemaError> {
    let diff = state
        .reviews
        .diff(&admin(&principal)?, operation_id(&id)?)
        .await?;
    Ok(json(StatusCode::OK, ReviewView::from(&diff)))
}

/// The unified diffs of every database a verification found drifted.
async fn drift(
    State(state): State<HttpState>,
    SystemAdmin(principal): SystemAdmin,
    Path(id): Path<String>,
) -> Result<Response, SchemaError> {
    let drift = state
        .drift
        .diff(&admin(&principal)?, operation_id(&id)?)
        .await?;
    Ok(json(StatusCode::OK, DriftView::from(&drift)))
}

/// Which script of a drift: the database's, going `direction` (`undo` unless said), with the
/// destructive statements when `allow_destructive`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptQuery {
    database: String,
    direction: Option<String>,
    #[serde(default)]
    allow_destructive: bool,
}

/// One drifted database's migration script as a file for the `mysql`/`mariadb` client
/// (`text/plain`): `NO_MIGRATION_SCRIPT` (404) when the verification did not find that database
/// drifted or kept no script for it; 400 for a direction other than `undo` or `adopt`.
async fn drift_script(
    State(state): State<HttpState>,
    SystemAdmin(principal): SystemAdmin,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<ScriptQuery>,
) -> Result<Response, Response> {
    let direction = match query.direction.as_deref() {
        None => Direction::Undo,
        Some(typed) => Direction::parse(typed).ok_or_else(|| {
            ApiError::bad_request("direction is \"undo\" or \"adopt\"").into_response()
        })?,
    };
    let refused = |error: SafeError| SchemaError(error).into_response();
    let admin = admin(&principal).map_err(IntoResponse::into_response)?;
    let id = operation_id(&id).map_err(IntoResponse::into_response)?;
    let drift = state.drift.diff(&admin, id).await.map_err(refused)?;
    let (drifted, script) = drift.script(&query.database, direction).map_err(refused)?;
    let text = script.text(drifted.database.as_str(), query.allow_destructive);
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        text,
    )
        .into_response())
}

/// Publishes again an approved refresh whose publication failed; answers 202 with the
/// operation, whose run publishes it.
async fn publish(
    State(state): State<HttpState>,
    FreshSystemAdmin(principal): FreshSystemAdmin,
    Path(id): Path<String>,
) -> Result<Response, SchemaError> {
    let operation = state.schema.republish(&admin(&principal)?, &id).await?;
    let report = state.schema.report(operation.id).await?;
    Ok(json(StatusCode::ACCEPTED, OperationView::from(&report)))
}

/// Closes, without merging, the pull request an operation published.
async fn close_pull_request(
    State(state): State<HttpState>,
    FreshSystemAdmin(principal): FreshSystemAdmin,
    Path(id): Path<String>,
) -> Result<Response, SchemaError> {
    let operation = state
        .schema
        .close_pull_request(&admin(&principal)?, &id)
        .await?;
    let report = state.schema.report(operation.id).await?;
    Ok(json(StatusCode::OK, OperationView::from(&report)))
}

async fn approve(
    State(state): State<HttpState>,
    FreshSystemAdmin(principal): FreshSystemAdmin,
    Path(id): Path<String>,
) -> Result<Response, SchemaError> {
    decide(&state, &principal, &id, Verdict::Approve).await
}

async fn reject(
    State(state): State<HttpState>,
    FreshSystemAdmin(principal): FreshSystemAdmin,
    Path(id): Path<String>,
) -> Result<Response, SchemaError> {
    decide(&state, &principal, &id, Verdict::Reject).await
}

/// Records `verdict` as the review's one decision and answers with the operation.
async fn decide(
    state: &HttpState,
    principal: &Principal,
    id: &str,
    verdict: Verdict,
) -> Result<Response, SchemaError> {
    let decided = state
        .reviews
        .decide(&admin(principal)?, operation_id(id)?, verdict)
        .await?;
    let report = state.schema.report(decided.id).await?;
    Ok(json(StatusCode::OK, OperationView::from(&report)))
}

async fn latest_inventory(
    State(state): State<HttpState>,
    SystemAdmin(_): SystemAdmin,
) -> Result<Response, SchemaError> {
    match state.schema.latest_inventory().await? {
        Some(inventory) => Ok(json(StatusCode::OK, InventoryView::from(&inventory))),
        None => Err(SchemaError(SafeError::new(ErrorCode::InventoryMissing))),
    }
}

/// Every registered database with its merged snapshot, last verification and freshness.
async fn registry(
    State(state): State<HttpState>,
    SystemAdmin(_): SystemAdmin,
) -> Result<Response, SchemaError> {
    let report = state.registry.registry_view().await?;
    Ok(json(StatusCode::OK, RegistryView::from(&report)))
}

async fn lease(
    State(state): State<HttpState>,
    SystemAdmin(_): SystemAdmin,
) -> Result<Response, SchemaError> {
    let lease = state.schema.lease().await?;
    Ok(json(StatusCode::OK, lease.as_ref().map(LeaseView::from)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClearLease {
    /// The exact ID of the operation whose expired lease is cleared, as confirmation.
    operation_id: String,
}

async fn clear_lease(
    State(state): State<HttpState>,
    FreshSystemAdmin(principal): FreshSystemAdmin,
    Json(body): Json<ClearLease>,
) -> Result<Response, SchemaError> {
    let admin = admin(&principal)?;
    let cleared = state.schema.clear_lease(&admin, &body.operation_id).await?;
    let report = state.schema.report(cleared.id).await?;
    Ok(json(StatusCode::OK, OperationView::from(&report)))
}
