//! Notifications (`[schema.notify]`): signed JSON events posted to webhooks when a verification
//! finds drift, an operation fails, a review opens or is about to expire, and a pull request is
//! published.
//!
//! An event holds operation IDs, database names, outcomes and codes, and for a drifted
//! database the API path of its migration script; never DDL, file contents, secrets or URLs of
//! the configuration. Emitting one ([`Notifier::emit`]) starts a durable
//! workflow run ([`NotifyWorkflow`]) whose ID is derived from the event's ID, so an event is
//! started once however many times the run that emits it is executed. The notify run posts the
//! event to each webhook in a step of its own (`notify:<event>:<webhook position>`), retried on
//! the runner's schedule (after 1 s, 3 s and 9 s) when the receiver could not be reached or
//! answered 429 or 5xx, and recorded in the operation's step rows, so every attempt, and why it
//! failed, is in the operation's report. The `review.expiring` event's run first waits, durably,
//! until its time, and posts only if the review is still pending then.
//!
//! Each post carries `X-Fermata-Event`, `X-Fermata-Delivery` (the event ID, the same on every
//! try) and `X-Fermata-Timestamp` (Unix seconds of the try, on the database's clock), and
//! `X-Fermata-Signature: sha256=<hex>`, the HMAC-SHA256 under the configured secret of the
//! timestamp, a full stop and the body ([`signature`]). `docs/notifications.md` documents the
//! payloads and the check a receiver makes.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fermata_schema_core::{ErrorCode, SafeError};
use fermata_store::schema::{
    Operation, OperationId, OperationKind, OperationState, OperationStep, Outcome, ReviewState,
    StepState,
};
use fermata_store::{Storage, UnixMillis};
use fermata_workflow::{RunContext, RunError, Workflow, start_once};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::drift::ddl_path;
use crate::migration::Direction;
use crate::safe_context::{SafeCode, SafeContext};
use crate::step_failure::run_failed;
use crate::tracked::Progress;

/// The name notify runs are started under.
pub const NOTIFY_WORKFLOW: &str = "schema-notify";
/// How long one post may take.
const POST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long before a review expires its `review.expiring` event is sent, at most; half the
/// review window when that is shorter.
pub const EXPIRY_NOTICE: Duration = Duration::from_secs(60 * 60);

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventKind {
    /// A verification found at least one database whose schema differs from its snapshot.
    #[serde(rename = "verification.drift")]
    Drift,
    /// An operation ended `failed`.
    #[serde(rename = "operation.failed")]
    OperationFailed,
    /// A refresh's review opened.
    #[serde(rename = "review.opened")]
    ReviewOpened,
    /// A review is still pending shortly before it expires.
    #[serde(rename = "review.expiring")]
    ReviewExpiring,
    /// An approved refresh's pull request was published.
    #[serde(rename = "pull_request.published")]
    PullRequestPublished,
}

impl EventKind {
    /// The kind's name, as sent (`verification.drift`).
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Drift => "verification.drift",
            EventKind::OperationFailed => "operation.failed",
            EventKind::ReviewOpened => "review.opened",
            EventKind::ReviewExpiring => "review.expiring",
            EventKind::PullRequestPublished => "pull_request.published",
        }
    }
}

/// One database in an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventDatabase {
    pub name: String,
    /// `changed`, `unchanged` or `failed`, once the database has a result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// `fresh`, `stale` or `unregistered`, once the database has a result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freshness: Option<String>,
    /// The safe error code of a database that failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// In `verification.drift`, for a drifted database: the API path of its undo script
    /// ([`ddl_path`]), which the receiver prefixes with its Fermata address. A path, never the
    /// script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ddl: Option<String>,
}

/// A published pull request, in an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventPullRequest {
    pub number: u64,
    pub url: String,
}

/// The JSON body of a post.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// `<type>:<operation>`: one event of a type per operation; receivers deduplicate on it.
    pub id: String,
    #[serde(rename = "type")]
    pub kind: EventKind,
    pub operation: OperationId,
    /// `inventory`, `refresh` or `verification`.
    pub operation_kind: String,
    /// The operation's state when the event was emitted.
    pub state: String,
    /// The operation's safe error code, for `operation.failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    pub databases: Vec<EventDatabase>,
    /// When the review expires (RFC 3339, UTC), for the review events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_expires_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<EventPullRequest>,
}

impl Event {
    /// An event of `kind` about operation `operation` of `operation_kind` in `state`, with no
    /// databases or details yet.
    pub fn new(
        kind: EventKind,
        operation: OperationId,
        operation_kind: OperationKind,
        state: &str,
    ) -> Self {
        Event {
            id: format!("{}:{operation}", kind.name()),
            kind,
            operation,
            operation_kind: operation_kind.as_str().to_owned(),
            state: state.to_owned(),
            code: None,
            databases: Vec::new(),
            review_expires_at: None,
            pull_request: None,
        }
    }
}

/// Where events go: the webhooks and the secret that signs each post.
#[derive(Clone)]
pub struct NotifySettings {
    /// Each webhook's URL, checked by the configuration (`https://`, or `http://` on a loopback
    /// address). Never logged or stored: it may hold a token.
    pub urls: Vec<String>,
    pub secret: Arc<Zeroizing<Vec<u8>>>,
}

impl fmt::Debug for NotifySettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NotifySettings")
            .field("webhooks", &self.urls.len())
            .finish_non_exhaustive()
    }
}

/// The signature of a post: `sha256=` and the lowercase hex HMAC-SHA256, under `secret`, of
/// `timestamp`, `.` and `body`.
pub fn signature(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    // HMAC takes a key of any length.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("sha256={hex}")
}

/// What a notify run is started with.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NotifyInput {
    event: Event,
    /// Not posted before this instant (milliseconds on the database's clock).
    #[serde(default)]
    not_before: Option<i64>,
}

/// Emits events: starts their notify runs. Without settings it emits nothing. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Notifier {
    enabled: bool,
}

impl Notifier {
    /// A notifier that emits events when webhooks are configured.
    pub fn new(settings: Option<&NotifySettings>) -> Self {
        Notifier {
            enabled: settings.is_some_and(|settings| !settings.urls.is_empty()),
        }
    }

    /// Emits the event of `kind` about operation `id`, read from its rows as they stand (its
    /// state, code, databases, review and pull request), posted from `not_before` on when given:
    /// starts its notify run unless that was started before. An `operation.failed` event is
    /// emitted only for an operation that failed. A store that fails loses the run for this
    /// worker, so the execution that emits is repeated.
    pub(crate) async fn emit(
        &self,
        storage: &dyn Storage,
        kind: EventKind,
        id: OperationId,
        not_before: Option<UnixMillis>,
    ) -> Result<(), RunError> {
        if !self.enabled {
            return Ok(());
        }
        let Some(event) = read_event(storage, kind, id)
            .await
            .map_err(RunError::Lost)?
        else {
            return Ok(());
        };
        let run = fermata_store::RunId(format!("{NOTIFY_WORKFLOW}-{}", event.id));
        let input = NotifyInput {
            event,
            not_before: not_before.map(|at| at.0),
        };
        let input = serde_json::to_value(&input)
            .or_code(ErrorCode::RunUnreadable, "write the event")
            .map_err(run_failed)?;
        start_once(storage, NOTIFY_WORKFLOW, &run, &input)
            .await
            .map_err(RunError::Lost)?;
        Ok(())
    }
}

/// The event of `kind` about operation `id` from its rows; `None` when the operation does not
/// exist, or an `operation.failed` event is asked of one that did not fail.
async fn read_event(
    storage: &dyn Storage,
    kind: EventKind,
    id: OperationId,
) -> fermata_store::StoreResult<Option<Event>> {
    let schema = storage.schema();
    let Some(operation) = schema.operation(id).await? else {
        return Ok(None);
    };
    if kind == EventKind::OperationFailed && operation.state != OperationState::Failed {
        return Ok(None);
    }
    let mut event = Event::new(kind, id, operation.kind, operation.state.as_str());
    event.code = operation.error.map(|error| error.code().name());
    event.databases = schema
        .database_results(id)
        .await?
        .into_iter()
        .map(|row| {
            let drifted = kind == EventKind::Drift
                && row
                    .report
                    .as_ref()
                    .is_some_and(|r| r.outcome == Outcome::Changed);
            EventDatabase {
                name: row.database.as_str().to_owned(),
                outcome: row.report.as_ref().map(|r| r.outcome.as_str().to_owned()),
                freshness: row.report.as_ref().map(|r| r.freshness.as_str().to_owned()),
                ddl: drifted.then(|| ddl_path(id, row.database.as_str(), Direction::Undo)),
                code: row
                    .report
                    .and_then(|r| r.error)
                    .map(|error| error.code().name()),
            }
        })
        .collect();
    if matches!(kind, EventKind::ReviewOpened | EventKind::ReviewExpiring) {
        event.review_expires_at = schema
            .review(id)
            .await?
            .map(|review| review.expires_at.to_string());
    }
    event.pull_request = operation.pull_request.map(|pull| EventPullRequest {
        number: pull.number,
        url: pull.url,
    });
    Ok(Some(event))
}

/// One webhook's delivery of an event, as its operation's step row records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub operation: OperationId,
    /// The event's type (`verification.drift`).
    pub event: String,
    /// The webhook's position in `webhooks`, from 0.
    pub webhook: usize,
    pub state: StepState,
    pub attempts: u32,
    /// The latest try's failure, retried or final.
    pub error: Option<SafeError>,
    /// When the latest try began or ended.
    pub at: UnixMillis,
}

impl Delivery {
    /// The delivery a step row records; `None` for any other step.
    fn from_step(step: &OperationStep) -> Option<Self> {
        let (event, webhook) = step
            .key
            .as_str()
            .strip_prefix("notify:")?
            .rsplit_once(':')?;
        Some(Delivery {
            operation: step.operation,
            event: event.to_owned(),
            webhook: webhook.parse().ok()?,
            state: step.state,
            attempts: step.attempts,
            error: step.error.clone(),
            at: step.terminal_at.unwrap_or(step.heartbeat_at),
        })
    }
}

/// The deliveries of the events of `operations`, the latest first, at most `limit`.
pub(crate) async fn deliveries(
    storage: &dyn Storage,
    operations: &[Operation],
    limit: usize,
) -> Result<Vec<Delivery>, SafeError> {
    let mut found = Vec::new();
    for operation in operations {
        let steps = storage
            .schema()
            .steps(operation.id)
            .await
            .context("load the operation's steps")?;
        found.extend(steps.iter().filter_map(Delivery::from_step));
    }
    found.sort_by_key(|delivery| std::cmp::Reverse(delivery.at));
    found.truncate(limit);
    Ok(found)
}

/// The notify workflow: posts one event to every webhook.
#[derive(Clone)]
pub struct NotifyWorkflow {
    storage: Arc<dyn Storage>,
    /// `None` when `[schema.notify]` is not set (any more): runs end without posting.
    settings: Option<Arc<NotifySettings>>,
    client: reqwest::Client,
}

impl fmt::Debug for NotifyWorkflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NotifyWorkflow")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl NotifyWorkflow {
    /// Fails only when the HTTP client cannot be built (no TLS roots, say).
    pub fn new(
        storage: Arc<dyn Storage>,
        settings: Option<NotifySettings>,
    ) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .timeout(POST_TIMEOUT)
            // A webhook that redirects is answered as a refusal, never followed.
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(NotifyWorkflow {
            storage,
            settings: settings.map(Arc::new),
            client,
        })
    }

    async fn execute(&self, ctx: &mut RunContext, input: NotifyInput) -> Result<Value, RunError> {
        let NotifyInput { event, not_before } = input;
        let Some(settings) = self.settings.clone() else {
            tracing::info!(event = %event.id, "no webhook is configured; the event is dropped");
            return Ok(serde_json::json!({ "posted": 0 }));
        };
        let schema = self.storage.schema();
        if let Some(not_before) = not_before.map(UnixMillis) {
            let now = schema.clock().await.map_err(RunError::Lost)?;
            if not_before > now {
                ctx.hook_within("not-before", not_before.since(now)).await?;
            }
        }
        if event.kind == EventKind::ReviewExpiring {
            let review = schema
                .review(event.operation)
                .await
                .map_err(RunError::Lost)?;
            if review.is_none_or(|review| review.state != ReviewState::Pending) {
                tracing::info!(event = %event.id, "the review was decided; no expiry notice");
                return Ok(serde_json::json!({ "posted": 0 }));
            }
        }
        let body = serde_json::to_vec(&event)
            .or_code(ErrorCode::RunUnreadable, "write the event")
            .map_err(run_failed)?;
        let progress = Progress {
            storage: &*self.storage,
            operation: event.operation,
            lease_ttl: None,
        };
        let mut posted = 0;
        for (position, url) in settings.urls.iter().enumerate() {
            let key = format!("notify:{}:{position}", event.kind.name());
            let delivered = progress
                .step(ctx, &key, |_| self.post(&settings, url, &event, &body))
                .await;
            match delivered {
                Ok(()) => posted += 1,
                // This webhook's tries are over; the others still get the event.
                Err(RunError::Failed(_)) => {
                    tracing::warn!(event = %event.id, webhook = position, "an event could not be delivered to a webhook");
                }
                Err(other) => return Err(other),
            }
        }
        Ok(serde_json::json!({ "posted": posted }))
    }

    /// One try of posting `body` to `url`.
    async fn post(
        &self,
        settings: &NotifySettings,
        url: &str,
        event: &Event,
        body: &[u8],
    ) -> Result<(), SafeError> {
        let now = self
            .storage
            .schema()
            .clock()
            .await
            .context("read the database's clock")?;
        let timestamp = now.0.div_euclid(1000);
        let answer = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("X-Fermata-Event", event.kind.name())
            .header("X-Fermata-Delivery", event.id.as_str())
            .header("X-Fermata-Timestamp", timestamp.to_string())
            .header(
                "X-Fermata-Signature",
                signature(&settings.secret, timestamp, body),
            )
            .body(body.to_vec())
            .send()
            .await
            // The cause names the URL, which may hold a token: it is dropped.
            .map_err(|_| SafeError::new(ErrorCode::NotificationFailed))?;
        let status = answer.status();
        if status.is_success() {
            Ok(())
        } else if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            Err(SafeError::new(ErrorCode::NotificationFailed))
        } else {
            Err(SafeError::new(ErrorCode::NotificationRefused))
        }
    }
}

#[async_trait]
impl Workflow for NotifyWorkflow {
    fn name(&self) -> &'static str {
        NOTIFY_WORKFLOW
    }

    async fn run(&self, ctx: &mut RunContext, input: Value) -> Result<Value, RunError> {
        let input: NotifyInput = serde_json::from_value(input)
            .or_code(ErrorCode::StartFailed, "read the run's input")
            .map_err(run_failed)?;
        self.execute(ctx, input).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_the_hmac_of_the_timestamp_and_the_body() {
        // HMAC-SHA256("key", "1700000000.{}"), computed independently with openssl.
        assert_eq!(
            signature(b"key", 1_700_000_000, b"{}"),
            "sha256=9d713ed406bb7076d4123f0dc2c39d2df5c654ed4b0cd56b52c8b4c940bd63ae"
        );
    }

    #[test]
    fn events_serialize_with_their_dotted_type_and_without_absent_details() {
        let operation = OperationId::generate();
        let event = Event::new(
            EventKind::Drift,
            operation,
            OperationKind::Verification,
            "succeeded",
        );
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["type"], "verification.drift");
        assert_eq!(json["id"], format!("verification.drift:{operation}"));
        assert!(json.get("code").is_none() && json.get("pull_request").is_none());
        assert_eq!(serde_json::from_value::<Event>(json).unwrap(), event);
    }

    #[test]
    fn a_drifted_database_links_its_script_by_path_and_an_older_event_reads_without_it() {
        let operation = OperationId::generate();
        let mut event = Event::new(
            EventKind::Drift,
            operation,
            OperationKind::Verification,
            "succeeded",
        );
        event.databases = vec![
            EventDatabase {
                name: "app <&>".to_owned(),
                outcome: Some("changed".to_owned()),
                freshness: Some("stale".to_owned()),
                code: None,
                ddl: Some(ddl_path(operation, "app <&>", Direction::Undo)),
            },
            EventDatabase {
                name: "crm".to_owned(),
                outcome: Some("unchanged".to_owned()),
                freshness: Some("fresh".to_owned()),
                code: None,
                ddl: None,
            },
        ];
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json["databases"][0]["ddl"],
            format!(
                "/api/v1/schema/operations/{operation}/drift/ddl?database=app%20%3C%26%3E&direction=undo"
            )
        );
        assert!(json["databases"][1].get("ddl").is_none());
        // A notify run started before the field existed still reads its event.
        let older = serde_json::json!({"name": "crm", "outcome": "changed"});
        let read: EventDatabase = serde_json::from_value(older).unwrap();
        assert_eq!(read.ddl, None);
    }
}
