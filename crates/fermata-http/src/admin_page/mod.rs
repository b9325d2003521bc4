//! The schema administrator page, `/admin/schema`, and its forms: discover databases, start a
//! refresh or a verification with a selection, approve or reject a review, publish again a
//! refresh whose publication failed, close an open pull request, clear an expired lease; the
//! report page of one operation, `/admin/schema/operations/{id}`, and the drift a verification
//! found, `/admin/schema/operations/{id}/drift`.
//!
//! The forms call the same services as the JSON API (`crate::schema_api`) and the same start
//! protocol, with a request key the page renders. Each post answers with a redirect to the page
//! (POST-redirect-GET); what it came to travels in a short-lived cookie holding only a fixed
//! notice or a safe error's code and subject, so no free text ever reaches the page through it.
//! The CSRF middleware checks every form. A stale session is sent to `/reauth` and back before a
//! decision, publishing again, closing a pull request or the clear action.
//!
//! Who gets in is the route table's `AdminPage` access, whose grant is [`PageAdmin`]. The
//! handlers here gather what a page shows; `render` draws it.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum_extra::extract::CookieJar;
use axum_extra::extract::cookie::{Cookie, SameSite};
use fermata_accounts::Principal;
use fermata_crypto::csrf_token;
use fermata_schema::view::{
    DriftView, ErrorView, InventoryView, LeaseView, OperationSummary, OperationView,
    RegisteredDatabaseView, RegistryView, ReviewView,
};
use fermata_schema::{Administrator, ErrorCode, OperationRequest, SafeError, Verdict};
use fermata_store::UnixMillis;
use fermata_store::schema::{
    InventoryId, Operation, OperationId, OperationKind, OperationState, RequestKey,
};
use serde::{Deserialize, Serialize};

mod render;

use crate::HttpState;
use crate::auth::AuthRejection;
use crate::error::{RequestFailure, attach};
use crate::policy::{Access, PageAdmin, Routes};
use render::{
    DeliveryRow, Flash, InventoryPanel, InventoryRow, LeasePanel, Notice, Place, ReviewPanel,
    SchedulePanel, SchemaPage,
};

/// The cookie carrying what the last form came to, to the page it redirected to.
const FLASH_COOKIE: &str = "fermata_admin_flash";
/// How many recent operations the page lists.
const RECENT: u32 = 20;
/// How many of the latest notifications (of the recent operations' events) the page lists.
const NOTIFICATIONS: usize = 10;

pub(crate) fn routes() -> Routes {
    let page = Access::AdminPage;
    Routes::pages()
        .get("/admin/schema", page, schema_page)
        .post("/admin/schema/inventory", page, discover)
        .post("/admin/schema/start", page, start_selected)
        .get("/admin/schema/operations/{id}", page, report)
        .get("/admin/schema/operations/{id}/drift", page, drift)
        .post("/admin/schema/operations/{id}/publish", page, publish)
        .post(
            "/admin/schema/operations/{id}/close-pull-request",
            page,
            close_pull_request,
        )
        .post("/admin/schema/operations/{id}/approve", page, approve)
        .post("/admin/schema/operations/{id}/reject", page, reject)
        .post("/admin/schema/lease/clear", page, clear_lease)
        // The pages show live state and carry CSRF tokens.
        .never_cached()
}

/// What the flash cookie holds: a place and either a fixed notice or a safe error, stored as its
/// code and subject and rendered again when read.
#[derive(Serialize, Deserialize)]
struct StoredFlash {
    at: Place,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    notice: Option<Notice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

fn flash_cookie(value: String) -> Cookie<'static> {
    Cookie::build((FLASH_COOKIE, value))
        .path("/admin/schema")
        .http_only(true)
        .same_site(SameSite::Strict)
        .max_age(cookie::time::Duration::seconds(60))
        .build()
}

fn encode_flash(flash: &StoredFlash) -> String {
    let json = serde_json::to_string(flash).unwrap_or_default();
    let mut out = String::with_capacity(json.len() * 2);
    for byte in json.bytes() {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

fn decode_flash(value: &str) -> Option<Flash> {
    let bytes: Option<Vec<u8>> = (0..value.len())
        .step_by(2)
        .map(|i| {
            value
                .get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect();
    let stored: StoredFlash = serde_json::from_slice(&bytes?).ok()?;
    match (stored.notice, stored.error) {
        (Some(notice), _) => Some(Flash::Notice(stored.at, notice)),
        (None, Some(error)) => SafeError::from_json(&error)
            .ok()
            .map(|error| Flash::Error(stored.at, ErrorView::from(&error))),
        (None, None) => None,
    }
}

/// A redirect to `to` that leaves `flash` for the page, and the error's cause, when it has one,
/// for the log.
fn redirect(jar: CookieJar, to: &str, at: Place, outcome: Result<Notice, SafeError>) -> Response {
    let (stored, failure) = match outcome {
        Ok(notice) => (
            StoredFlash {
                at,
                notice: Some(notice),
                error: None,
            },
            None,
        ),
        Err(error) => (
            StoredFlash {
                at,
                notice: None,
                error: Some(error.to_json()),
            },
            std::error::Error::source(&error)
                .is_some()
                .then(|| RequestFailure::new(error)),
        ),
    };
    let response = (
        jar.add(flash_cookie(encode_flash(&stored))),
        Redirect::to(to),
    )
        .into_response();
    match failure {
        Some(failure) => attach(response, failure),
        None => response,
    }
}

fn page_of(operation: OperationId) -> String {
    format!("/admin/schema?operation={operation}")
}

#[derive(Deserialize)]
struct PageQuery {
    operation: Option<String>,
}

async fn schema_page(
    State(state): State<HttpState>,
    PageAdmin(principal): PageAdmin,
    jar: CookieJar,
    Query(query): Query<PageQuery>,
) -> Response {
    let flash = jar.get(FLASH_COOKIE).and_then(|c| decode_flash(c.value()));
    let jar = if jar.get(FLASH_COOKIE).is_some() {
        jar.remove(Cookie::build(FLASH_COOKIE).path("/admin/schema"))
    } else {
        jar
    };
    let chosen = query
        .operation
        .and_then(|id| id.parse::<OperationId>().ok());
    match gather(&state, &principal, flash, chosen).await {
        Ok(page) => (jar, render::schema_page(&page)).into_response(),
        Err(error) => {
            let page = (
                StatusCode::SERVICE_UNAVAILABLE,
                jar,
                render::unavailable_page(&ErrorView::from(&error)),
            );
            attach(page.into_response(), RequestFailure::new(error))
        }
    }
}

/// Reads everything the page shows.
async fn gather(
    state: &HttpState,
    principal: &Principal,
    flash: Option<Flash>,
    chosen: Option<OperationId>,
) -> Result<SchemaPage, SafeError> {
    let schema = &state.schema;
    let now = schema.now().await?;
    let recent = schema.recent(RECENT).await?;
    let lease = schema.lease().await?;
    let registry = if state.schema_setup.package {
        Some(
            state
                .registry
                .registry_view()
                .await
                .map(|r| RegistryView::from(&r)),
        )
    } else {
        None
    };
    let (registered, registry_error): (Vec<RegisteredDatabaseView>, _) = match registry {
        Some(Ok(view)) => (view.databases, None),
        Some(Err(error)) => (Vec::new(), Some(ErrorView::from(&error))),
        None => (Vec::new(), None),
    };
    let inventory = schema.latest_inventory().await?.map(|inventory| {
        let expired = inventory.is_expired(now);
        let view = InventoryView::from(&inventory);
        let rows = view
            .databases
            .iter()
            .map(|name| InventoryRow {
                name: name.clone(),
                registered: registered.iter().find(|r| &r.name == name).cloned(),
            })
            .collect();
        let missing = registered
            .iter()
            .filter(|r| r.freshness == "missing")
            .cloned()
            .collect();
        InventoryPanel {
            expired,
            rows,
            missing,
            view,
        }
    });
    // The current operation: the one the page was sent to, else the lease holder, else the
    // newest that has not ended.
    let current_id = chosen
        .or(lease.as_ref().map(|lease| lease.operation))
        .or_else(|| {
            recent
                .iter()
                .find(|operation| !operation.state.is_terminal())
                .map(|operation| operation.id)
        });
    let current = match current_id {
        Some(id) => match schema.report(id).await {
            Ok(report) => Some(OperationView::from(&report)),
            Err(error) if error.code() == ErrorCode::OperationMissing => None,
            Err(error) => return Err(error),
        },
        None => None,
    };
    let admin = Administrator::from_principal(principal)?;
    // The current operation's report was read after the list: where both name the operation
    // that awaited review, the report says whether it still does (a decision may have landed
    // in between, and a page showing the ended operation stops polling).
    let still_awaiting = |operation: &&Operation| {
        current.as_ref().is_none_or(|view| {
            view.summary.id != operation.id.to_string()
                || view.summary.state == OperationState::AwaitingReview.as_str()
        })
    };
    let awaiting = recent
        .iter()
        .find(|operation| {
            operation.kind == OperationKind::Refresh
                && operation.state == OperationState::AwaitingReview
        })
        .filter(still_awaiting);
    let review = match awaiting {
        Some(operation) => Some(match state.reviews.diff(&admin, operation.id).await {
            Ok(diff) => ReviewPanel::Diff(ReviewView::from(&diff)),
            Err(error) => ReviewPanel::Unavailable {
                operation_id: operation.id.to_string(),
                error: ErrorView::from(&error),
            },
        }),
        None => None,
    };
    let schedule = schedule_panel(state, now, &recent).await?;
    let open_pull = schema
        .open_pull_request()
        .await
        .ok()
        .flatten()
        .map(|(operation, pull)| (operation.to_string(), pull));
    Ok(SchemaPage {
        user: principal.user.name.to_string(),
        csrf: principal
            .session()
            .map(|c| csrf_token(&c.secret))
            .unwrap_or_default(),
        fresh: principal.is_fresh(),
        request_key: uuid::Uuid::new_v4().to_string(),
        setup: state.schema_setup,
        flash,
        inventory,
        registry_error,
        lease: lease.as_ref().map(|lease| LeasePanel {
            view: LeaseView::from(lease),
            expired: lease.is_expired(now),
        }),
        current,
        review,
        open_pull,
        recent: recent.iter().map(OperationSummary::from).collect(),
        schedule,
        now,
    })
}

/// The next scheduled check and the latest deliveries of the recent operations' events.
async fn schedule_panel(
    state: &HttpState,
    now: UnixMillis,
    recent: &[Operation],
) -> Result<SchedulePanel, SafeError> {
    let next = state
        .schema_setup
        .schedule
        .map(|schedule| (schedule.to_string(), schedule.next_after(now)));
    let deliveries = state
        .schema
        .deliveries(recent, NOTIFICATIONS)
        .await?
        .into_iter()
        .map(|delivery| DeliveryRow {
            event: delivery.event,
            operation_id: delivery.operation.to_string(),
            webhook: delivery.webhook + 1,
            state: delivery.state.as_str(),
            attempts: delivery.attempts,
            at: delivery.at.to_string(),
            error: delivery.error.as_ref().map(ErrorView::from),
        })
        .collect();
    Ok(SchedulePanel { next, deliveries })
}

/// The value of the first field `name` of a form.
fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

fn request_key(fields: &[(String, String)]) -> Result<RequestKey, SafeError> {
    RequestKey::new(field(fields, "request_key").unwrap_or_default().to_owned())
        // Dropped on purpose: the code says what a request key must be.
        .map_err(|_| SafeError::new(ErrorCode::InvalidRequestKey))
}

async fn discover(
    State(state): State<HttpState>,
    PageAdmin(principal): PageAdmin,
    jar: CookieJar,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    let started = async {
        let request = OperationRequest {
            kind: OperationKind::Inventory,
            request_key: request_key(&fields)?,
            inventory: None,
            databases: Vec::new(),
            remove_missing: false,
        };
        let admin = Administrator::from_principal(&principal)?;
        state.schema.request(&admin, &request).await
    }
    .await;
    match started {
        Ok(operation) => redirect(
            jar,
            &page_of(operation.id),
            Place::Discover,
            Ok(Notice::InventoryStarted),
        ),
        Err(error) => redirect(jar, "/admin/schema", Place::Discover, Err(error)),
    }
}

async fn start_selected(
    State(state): State<HttpState>,
    PageAdmin(principal): PageAdmin,
    jar: CookieJar,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    let (kind, notice) = match field(&fields, "action") {
        Some("verification") => (OperationKind::Verification, Notice::VerificationStarted),
        _ => (OperationKind::Refresh, Notice::RefreshStarted),
    };
    let started = async {
        let inventory = field(&fields, "inventory")
            .unwrap_or_default()
            .parse::<InventoryId>()
            // Dropped on purpose: text that is not an inventory ID names no inventory.
            .map_err(|_| SafeError::new(ErrorCode::InventoryMissing))?;
        let request = OperationRequest {
            kind,
            request_key: request_key(&fields)?,
            inventory: Some(inventory),
            databases: fields
                .iter()
                .filter(|(key, _)| key == "databases")
                .map(|(_, name)| name.clone())
                .collect(),
            remove_missing: field(&fields, "remove_missing") == Some("on"),
        };
        let admin = Administrator::from_principal(&principal)?;
        state.schema.request(&admin, &request).await
    }
    .await;
    match started {
        Ok(operation) => redirect(jar, &page_of(operation.id), Place::Start, Ok(notice)),
        Err(error) => redirect(jar, "/admin/schema#inventory", Place::Start, Err(error)),
    }
}

/// Sends a stale session to re-authenticate and come back to `back`.
fn reauthenticate(back: &str) -> Response {
    AuthRejection::Reauthenticate {
        api: false,
        next: back.to_owned(),
    }
    .into_response()
}

async fn approve(
    State(state): State<HttpState>,
    PageAdmin(principal): PageAdmin,
    jar: CookieJar,
    Path(id): Path<String>,
) -> Response {
    decide(&state, &principal, jar, &id, Verdict::Approve).await
}

async fn reject(
    State(state): State<HttpState>,
    PageAdmin(principal): PageAdmin,
    jar: CookieJar,
    Path(id): Path<String>,
) -> Response {
    decide(&state, &principal, jar, &id, Verdict::Reject).await
}

async fn decide(
    state: &HttpState,
    principal: &Principal,
    jar: CookieJar,
    id: &str,
    verdict: Verdict,
) -> Response {
    let Ok(id) = id.parse::<OperationId>() else {
        return redirect(
            jar,
            "/admin/schema",
            Place::Review,
            Err(SafeError::new(ErrorCode::OperationMissing)),
        );
    };
    if !principal.is_fresh() {
        return reauthenticate(&page_of(id));
    }
    let decided = async {
        let admin = Administrator::from_principal(principal)?;
        state.reviews.decide(&admin, id, verdict).await
    }
    .await;
    let notice = match verdict {
        Verdict::Approve => Notice::Approved,
        Verdict::Reject => Notice::Rejected,
    };
    redirect(jar, &page_of(id), Place::Review, decided.map(|_| notice))
}

async fn clear_lease(
    State(state): State<HttpState>,
    PageAdmin(principal): PageAdmin,
    jar: CookieJar,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    if !principal.is_fresh() {
        return reauthenticate("/admin/schema#lease");
    }
    let typed = field(&fields, "operation_id")
        .unwrap_or_default()
        .to_owned();
    let cleared = async {
        let admin = Administrator::from_principal(&principal)?;
        state.schema.clear_lease(&admin, &typed).await
    }
    .await;
    match cleared {
        Ok(operation) => redirect(
            jar,
            &page_of(operation.id),
            Place::Lease,
            Ok(Notice::LeaseCleared),
        ),
        Err(error) => redirect(jar, "/admin/schema#lease", Place::Lease, Err(error)),
    }
}

/// Publishes again the refresh whose publication failed, for a fresh session.
async fn publish(
    State(state): State<HttpState>,
    PageAdmin(principal): PageAdmin,
    jar: CookieJar,
    Path(id): Path<String>,
) -> Response {
    let schema = &state.schema;
    let publish = |admin: Administrator| async move { schema.republish(&admin, &id).await };
    publication_action(&principal, jar, publish, Notice::PublishingAgain).await
}

/// Closes the open pull request of an operation, for a fresh session.
async fn close_pull_request(
    State(state): State<HttpState>,
    PageAdmin(principal): PageAdmin,
    jar: CookieJar,
    Path(id): Path<String>,
) -> Response {
    let schema = &state.schema;
    let close = |admin: Administrator| async move { schema.close_pull_request(&admin, &id).await };
    publication_action(&principal, jar, close, Notice::PullRequestClosed).await
}

/// Runs `act` for a fresh session (a stale one is sent to confirm its password first) and
/// answers with the operation's page and `notice`, or the page and the refusal, next to the
/// publication controls.
async fn publication_action<F, Fut>(
    principal: &Principal,
    jar: CookieJar,
    act: F,
    notice: Notice,
) -> Response
where
    F: FnOnce(Administrator) -> Fut,
    Fut: std::future::Future<Output = Result<fermata_store::schema::Operation, SafeError>>,
{
    if !principal.is_fresh() {
        return reauthenticate("/admin/schema");
    }
    let done = match Administrator::from_principal(principal) {
        Ok(admin) => act(admin).await,
        Err(error) => Err(error),
    };
    match done {
        Ok(operation) => redirect(jar, &page_of(operation.id), Place::Publication, Ok(notice)),
        Err(error) => redirect(jar, "/admin/schema", Place::Publication, Err(error)),
    }
}

async fn report(
    State(state): State<HttpState>,
    PageAdmin(_): PageAdmin,
    Path(id): Path<String>,
) -> Response {
    let report = match id.parse::<OperationId>() {
        Ok(id) => state.schema.report(id).await,
        Err(_) => Err(SafeError::new(ErrorCode::OperationMissing)),
    };
    match report {
        Ok(report) => {
            render::report_page(&OperationView::from(&report), UnixMillis::now()).into_response()
        }
        Err(error) => refused_page(error),
    }
}

/// The drift a verification found, decrypted for this page and never stored.
async fn drift(
    State(state): State<HttpState>,
    PageAdmin(principal): PageAdmin,
    Path(id): Path<String>,
) -> Response {
    let drift = async {
        let id = id
            .parse::<OperationId>()
            // Dropped on purpose: text that is not an operation ID names no operation.
            .map_err(|_| SafeError::new(ErrorCode::OperationMissing))?;
        let admin = Administrator::from_principal(&principal)?;
        state.drift.diff(&admin, id).await
    }
    .await;
    match drift {
        Ok(drift) => {
            render::drift_page(&DriftView::from(&drift), UnixMillis::now()).into_response()
        }
        Err(error) => refused_page(error),
    }
}

/// The page for what a report or drift page could not show: 404 for a missing operation, 410
/// for a drift past its retention, 503 otherwise.
fn refused_page(error: SafeError) -> Response {
    let status = match error.code() {
        ErrorCode::OperationMissing => StatusCode::NOT_FOUND,
        ErrorCode::DiffExpired => StatusCode::GONE,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    let page = (status, render::unavailable_page(&ErrorView::from(&error)));
    attach(page.into_response(), RequestFailure::new(error))
}
