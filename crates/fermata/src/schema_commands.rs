//! `fermata schema`: schema operations from the command line, on the same configuration and
//! database as `serve` and under the same rules (start protocol, lease, workflow runs, review).
//!
//! The operator names the system administrator the command acts as (`--as NAME`); the clear
//! action and the review decisions also take that user's password on standard input, which
//! makes the action fresh. A started inventory, refresh or verification, and a decided review,
//! are executed by the serving process when one holds the writer lease, and by this command
//! otherwise; either way the command follows the operation: an inventory, a verification and a
//! decision until the operation ends, a refresh until it awaits review or ends. The source check
//! needs neither: it connects to the source and reports what the snapshot account can read.

use std::sync::Arc;
use std::time::Duration;

use fermata_schema::lint::{self, Severity};
use fermata_schema::migration::{Direction, Migration};
use fermata_schema::view::{
    DriftView, OperationSummary, OperationView, RegistryView, ReviewView, drift_scripts, printable,
    review_scripts, script_file,
};
use fermata_schema::{
    Administrator, DatabaseName, ErrorCode, ErrorStage, OperationReport, OperationRequest,
    SafeError, Verdict,
};
use fermata_store::schema::{
    InventoryId, OperationId, OperationKind, OperationState, Outcome, RequestKey,
};
use fermata_store::{RunId, Storage};
use fermata_workflow::WorkerSettings;
use tokio_util::sync::CancellationToken;

use crate::account_commands::password_from_stdin;
use crate::config::{KeySource, SchemaSettings, StorageSettings};
use crate::failure::{Exit, Failure};
use crate::schema_progress::{DatabaseBars, Silent, StepLines, Watcher};
use crate::schema_runtime::SchemaRuntime;
use crate::{keys, storage};

/// How often the command looks at an operation a serving process runs.
const POLL: Duration = Duration::from_millis(250);
/// How often it looks at one it runs itself: the command exits as soon as it sees the run got far
/// enough, and a look (a few reads of its own database) costs little next to what the run does.
const LOCAL_POLL: Duration = Duration::from_millis(25);
/// How long a command that runs the workflow itself waits, once the operation ended, for the run
/// to take its last steps (the review artifact's deletion): milliseconds as a rule. A run still
/// going after this resumes with the next worker.
const RUN_END_GRACE: Duration = Duration::from_secs(10);

/// Output for people, or JSON for scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Text,
    Json,
}

/// What every schema command is configured with.
#[derive(Debug)]
pub(crate) struct Setup {
    pub(crate) storage: StorageSettings,
    pub(crate) schema: SchemaSettings,
    /// The keyring that seals review artifacts: the serving process's own.
    pub(crate) keys: KeySource,
}

impl From<SafeError> for Failure {
    fn from(error: SafeError) -> Self {
        // A request the configuration or the arguments make impossible is an invalid argument.
        let exit = match error.stage() {
            ErrorStage::Configuration | ErrorStage::Authorization => Exit::Config,
            _ => Exit::Runtime,
        };
        let message = format!("{} ({})", printable(&error.message()), error.code().name());
        Failure::new(message, exit).with_source(error)
    }
}

struct Opened {
    storage: Arc<dyn Storage>,
    runtime: SchemaRuntime,
}

async fn open(setup: &Setup) -> Result<Opened, Failure> {
    let store = storage::open(&setup.storage).await?;
    storage::prepare_schema(&store, true).await?;
    let storage: Arc<dyn Storage> = Arc::new(store);
    let keys = Arc::new(keys::handle(&setup.keys)?);
    let runtime = SchemaRuntime::new(
        Arc::clone(&storage),
        &setup.schema,
        &setup.storage.data_dir,
        keys,
    )
    .await?;
    Ok(Opened { storage, runtime })
}

/// The administrator `name`, fresh when `fresh` (its password was just checked).
async fn administrator(
    storage: &dyn Storage,
    name: &str,
    fresh: bool,
) -> Result<Administrator, Failure> {
    let unknown = || Failure::config(format!("no user named `{name}`"));
    // Dropped on purpose: text that is not a user name names no user.
    let name = fermata_store::UserName::new(name).map_err(|_| unknown())?;
    let user = storage
        .users()
        .user_by_name(&name)
        .await
        .map_err(|e| Failure::store("cannot read the user", e))?
        .ok_or_else(unknown)?;
    if fresh {
        let password = password_from_stdin()?;
        if !fermata_crypto::verify_password(password.expose(), Some(&user.password_hash)) {
            return Err(Failure::config("the password is not right"));
        }
    }
    Administrator::from_user(&user, fresh).map_err(|error| {
        Failure::config(format!("`{name}` is not a system_admin")).with_source(error)
    })
}

fn render(report: &OperationReport, format: Format) -> String {
    let view = OperationView::from(report);
    match format {
        Format::Json => json(&view),
        Format::Text => view.to_text(),
    }
}

/// `view` as JSON for scripts, or as `text` writes it for people.
fn shown<V: serde::Serialize>(view: &V, format: Format, text: impl FnOnce(&V) -> String) -> String {
    match format {
        Format::Json => json(view),
        Format::Text => text(view),
    }
}

fn json(view: &impl serde::Serialize) -> String {
    format!(
        "{}\n",
        serde_json::to_string_pretty(view).expect("a view serializes")
    )
}

/// The request key given, or a new one for this command.
fn request_key_or_new(given: Option<&str>) -> Result<RequestKey, Failure> {
    let key = match given {
        Some(key) => key.to_owned(),
        None => format!("cli-{}", uuid::Uuid::new_v4()),
    };
    // Dropped on purpose: the message says what a request key must be.
    RequestKey::new(key)
        .map_err(|_| Failure::config("--request-key has 1 to 100 printable ASCII characters"))
}

/// The command's output for an operation it followed: the report when `reached` (the operation
/// got where the command wanted), else the report printed and the operation's safe error.
fn conclude(report: &OperationReport, format: Format, reached: bool) -> Result<String, Failure> {
    let text = render(report, format);
    if reached {
        return Ok(text);
    }
    print!("{text}");
    let error = report
        .operation
        .error
        .clone()
        .unwrap_or_else(|| SafeError::new(ErrorCode::RunLost));
    let failure = Failure::from(error);
    if report.awaits_republication() {
        let hint = format!(
            "{}; the approved refresh is kept: `fermata schema publish {}` publishes it again",
            failure.message, report.operation.id
        );
        return Err(Failure {
            message: hint,
            ..failure
        });
    }
    Err(failure)
}

/// `fermata schema inventory`: starts an inventory and follows it to its end.
pub(crate) async fn inventory(
    setup: &Setup,
    actor: &str,
    request_key: Option<&str>,
    format: Format,
) -> Result<String, Failure> {
    let opened = open(setup).await?;
    let admin = administrator(&*opened.storage, actor, false).await?;
    let request = OperationRequest {
        kind: OperationKind::Inventory,
        request_key: request_key_or_new(request_key)?,
        inventory: None,
        databases: Vec::new(),
        remove_missing: false,
    };
    let operation = opened.runtime.operations.request(&admin, &request).await?;
    eprintln!("inventory {} {}", operation.id, operation.state);
    let report = follow(&opened, operation.id, &ended, &mut StepLines::default()).await?;
    conclude(&report, format, !report.operation.state.is_failure())
}

/// What `fermata schema refresh` and `verify` select: the named databases, or the whole
/// inventory.
#[derive(Debug)]
pub(crate) enum Selection<'a> {
    Named(&'a [String]),
    All,
}

/// A refresh or a verification as the command line asks for it.
#[derive(Debug)]
pub(crate) struct SelectionRequest<'a> {
    /// The inventory's ID, as typed.
    pub(crate) inventory: &'a str,
    pub(crate) selection: Selection<'a>,
    /// The system administrator the operation is recorded for.
    pub(crate) actor: &'a str,
    pub(crate) request_key: Option<&'a str>,
    /// A refresh that also proposes removing the registered databases the inventory no longer
    /// lists.
    pub(crate) remove_missing: bool,
}

/// `fermata schema refresh`: starts a refresh of the selected databases of an inventory and
/// follows it until it awaits review or ends, with a bar per database (none with `--json`).
pub(crate) async fn refresh(
    setup: &Setup,
    request: &SelectionRequest<'_>,
    format: Format,
) -> Result<String, Failure> {
    let report = start_selected(setup, OperationKind::Refresh, request, format, &|report| {
        awaits_review_or_ended(report.operation.state)
    })
    .await?;
    let state = report.operation.state;
    conclude(
        &report,
        format,
        matches!(
            state,
            OperationState::AwaitingReview | OperationState::Succeeded
        ),
    )
}

/// `fermata schema verify`: starts a verification of the selected databases of an inventory
/// and follows it to its end, with a bar per database (none with `--json`). It succeeds when
/// the verification did, whatever it found; with `exit_code`, a database that drifted fails
/// it (exit 1) after the report.
pub(crate) async fn verify(
    setup: &Setup,
    request: &SelectionRequest<'_>,
    exit_code: bool,
    format: Format,
) -> Result<String, Failure> {
    let report =
        start_selected(setup, OperationKind::Verification, request, format, &ended).await?;
    let succeeded = report.operation.state == OperationState::Succeeded;
    let text = conclude(&report, format, succeeded)?;
    let drifted = report
        .databases
        .iter()
        .filter(|row| {
            row.report
                .as_ref()
                .is_some_and(|result| result.outcome == Outcome::Changed)
        })
        .count();
    if !exit_code || drifted == 0 {
        return Ok(text);
    }
    print!("{text}");
    Err(Failure::runtime(format!(
        "{drifted} database{} drifted from {} merged snapshot{}; `fermata schema drift {}` shows how",
        if drifted == 1 { "" } else { "s" },
        if drifted == 1 { "its" } else { "their" },
        if drifted == 1 { "" } else { "s" },
        report.operation.id
    )))
}

/// Starts an operation of `kind` over `request`'s selection and follows it until `done`, with a
/// bar per database on a terminal.
async fn start_selected(
    setup: &Setup,
    kind: OperationKind,
    request: &SelectionRequest<'_>,
    format: Format,
    done: &dyn Fn(&OperationReport) -> bool,
) -> Result<OperationReport, Failure> {
    if matches!(request.selection, Selection::Named([])) {
        return Err(SafeError::new(ErrorCode::EmptySelection).into());
    }
    let typed = request.inventory;
    let inventory = typed
        .parse::<InventoryId>()
        // Dropped on purpose: the message says what is wrong with the argument.
        .map_err(|_| Failure::config(format!("`{typed}` is not an inventory ID")))?;
    let opened = open(setup).await?;
    let admin = administrator(&*opened.storage, request.actor, false).await?;
    let databases = match request.selection {
        Selection::Named(names) => names.to_vec(),
        Selection::All => opened
            .runtime
            .operations
            .inventory(inventory)
            .await?
            .ok_or_else(|| SafeError::new(ErrorCode::InventoryMissing))?
            .databases
            .iter()
            .map(ToString::to_string)
            .collect(),
    };
    let operation_request = OperationRequest {
        kind,
        request_key: request_key_or_new(request.request_key)?,
        inventory: Some(inventory),
        databases,
        remove_missing: request.remove_missing,
    };
    let operation = opened
        .runtime
        .operations
        .request(&admin, &operation_request)
        .await?;
    let started = opened.runtime.operations.report(operation.id).await?;
    let mut watcher: Box<dyn Watcher> = match format {
        Format::Json => Box::new(Silent),
        Format::Text => Box::new(DatabaseBars::new(&started)),
    };
    let report = follow(&opened, operation.id, done, &mut *watcher).await;
    drop(watcher);
    report
}

fn awaits_review_or_ended(state: OperationState) -> bool {
    state == OperationState::AwaitingReview || state.is_terminal()
}

/// Whether the operation ended, or its publication failed and waits to be published again.
fn ended(report: &OperationReport) -> bool {
    report.operation.state.is_terminal() || report.awaits_republication()
}

/// Follows operation `id` until `done` says it got far enough, showing its progress with
/// `watcher`. When no server is serving this database, this process runs the workflow itself.
async fn follow(
    opened: &Opened,
    id: OperationId,
    done: &dyn Fn(&OperationReport) -> bool,
    watcher: &mut dyn Watcher,
) -> Result<OperationReport, Failure> {
    let served = crate::storage::is_served(&*opened.storage)
        .await
        .map_err(|e| Failure::store("cannot read the writer lease", e))?;
    if served {
        eprintln!("the serving process runs it");
    } else {
        opened.runtime.sweep_scratch().await;
    }
    let stop = CancellationToken::new();
    let worker = (!served).then(|| {
        let worker = opened.runtime.engine.worker(
            format!("cli-{}", std::process::id()),
            WorkerSettings::default(),
        );
        let stop = stop.clone();
        tokio::spawn(async move { worker.run(stop.cancelled_owned()).await })
    });
    let poll = if served { POLL } else { LOCAL_POLL };
    let result = watch(opened, id, done, watcher, poll).await;
    if let (Some(_), Ok(report)) = (&worker, &result) {
        let_the_run_end(opened, report).await;
    }
    stop.cancel();
    if let Some(worker) = worker {
        let _ = worker.await;
    }
    result.map_err(Failure::from)
}

/// Once the operation of `report` ended, lets its run end too (within [`RUN_END_GRACE`]), so the
/// steps after the operation's last state (the deletion of a decided review's artifact) are not
/// left for the next worker when this process, the only one running it, exits.
async fn let_the_run_end(opened: &Opened, report: &OperationReport) {
    let operation = &report.operation;
    let Some(run) = operation
        .run_id
        .clone()
        .filter(|_| operation.state.is_terminal())
    else {
        return;
    };
    let run = RunId(run);
    let deadline = tokio::time::Instant::now() + RUN_END_GRACE;
    while tokio::time::Instant::now() < deadline {
        match opened.runtime.engine.run_status(&run).await {
            Ok(Some(run)) if !run.state.is_terminal() => tokio::time::sleep(LOCAL_POLL).await,
            _ => return,
        }
    }
}

/// Polls operation `id` every `poll`, showing each report, until `done` (an inventory whose run
/// is gone is ended on the way, see [`Operations::settle`](fermata_schema::Operations::settle)).
async fn watch(
    opened: &Opened,
    id: OperationId,
    done: &dyn Fn(&OperationReport) -> bool,
    watcher: &mut dyn Watcher,
    poll: Duration,
) -> Result<OperationReport, SafeError> {
    loop {
        opened.runtime.operations.settle(id).await?;
        let report = opened.runtime.operations.report(id).await?;
        watcher.show(&report);
        if done(&report) {
            return Ok(report);
        }
        tokio::time::sleep(poll).await;
    }
}

/// `fermata schema check-source`: what the snapshot account can read, per kind of object. The
/// report is printed either way; a missing privilege fails the command after it.
pub(crate) async fn check_source(
    settings: &SchemaSettings,
    format: Format,
) -> Result<String, Failure> {
    let source = settings
        .source
        .as_ref()
        .ok_or_else(|| SafeError::new(ErrorCode::SourceNotConfigured))?;
    let check = fermata_schema::check_source(source, &settings.filter).await?;
    let text = match format {
        Format::Json => json(&check),
        Format::Text => check.to_text(),
    };
    if check.complete {
        return Ok(text);
    }
    print!("{text}");
    let count = check.missing_count();
    Err(Failure::runtime(format!(
        "the snapshot account lacks {count} privilege{} it needs",
        if count == 1 { "" } else { "s" }
    )))
}

/// `fermata schema registry`: the package registry with each database's last verification and
/// freshness.
pub(crate) async fn registry(setup: &Setup, format: Format) -> Result<String, Failure> {
    let opened = open(setup).await?;
    let report = opened.runtime.registry.registry_view().await?;
    let view = RegistryView::from(&report);
    Ok(shown(&view, format, RegistryView::to_text))
}

/// `fermata schema operations`: the latest operations, newest first.
pub(crate) async fn operations(
    setup: &Setup,
    limit: u32,
    format: Format,
) -> Result<String, Failure> {
    let opened = open(setup).await?;
    let operations = opened.runtime.operations.recent(limit).await?;
    let summaries: Vec<_> = operations.iter().map(OperationSummary::from).collect();
    Ok(match format {
        Format::Json => json(&summaries),
        Format::Text if summaries.is_empty() => "no schema operations yet\n".to_owned(),
        Format::Text => summaries
            .iter()
            .map(|s| {
                let error = s
                    .error
                    .as_ref()
                    .map(|e| format!("  {}", printable(&e.message)))
                    .unwrap_or_default();
                format!(
                    "{}  {:<12}  {:<15}  {}{error}\n",
                    s.id, s.kind, s.state, s.created_at
                )
            })
            .collect(),
    })
}

fn operation_id(typed: &str) -> Result<OperationId, Failure> {
    // Dropped on purpose: the message says what is wrong with the argument.
    typed
        .parse()
        .map_err(|_| Failure::config(format!("`{typed}` is not an operation ID")))
}

/// `fermata schema show ID`: one operation's report.
pub(crate) async fn show(setup: &Setup, id: &str, format: Format) -> Result<String, Failure> {
    let opened = open(setup).await?;
    let report = opened.runtime.operations.report(operation_id(id)?).await?;
    Ok(render(&report, format))
}

/// `fermata schema clear-lease ID`: the clear action, as `actor` with the password on standard
/// input.
pub(crate) async fn clear_lease(
    setup: &Setup,
    id: &str,
    actor: &str,
    format: Format,
) -> Result<String, Failure> {
    let opened = open(setup).await?;
    let admin = administrator(&*opened.storage, actor, true).await?;
    let cleared = opened.runtime.operations.clear_lease(&admin, id).await?;
    let report = opened.runtime.operations.report(cleared.id).await?;
    Ok(render(&report, format))
}

/// `fermata schema close-pull-request ID`: closes the operation's pull request, as `actor` with
/// the password on standard input.
pub(crate) async fn close_pull_request(
    setup: &Setup,
    id: &str,
    actor: &str,
    format: Format,
) -> Result<String, Failure> {
    let opened = open(setup).await?;
    let admin = administrator(&*opened.storage, actor, true).await?;
    let closed = opened
        .runtime
        .operations
        .close_pull_request(&admin, id)
        .await?;
    let report = opened.runtime.operations.report(closed.id).await?;
    Ok(render(&report, format))
}

/// What `--ddl` asks of `drift` and `review`: the scripts going `direction`, of every database
/// or only `database`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScriptRequest<'a> {
    pub(crate) direction: Direction,
    pub(crate) allow_destructive: bool,
    pub(crate) database: Option<&'a str>,
}

impl ScriptRequest<'_> {
    /// The scripts of `databases` (each a name and its scripts or why it has none) as one file,
    /// only `--database`'s when given: refused when the operation does not name it.
    fn file<'a>(
        &self,
        databases: Vec<(&'a DatabaseName, Result<&'a Migration, &'a str>)>,
        none: impl FnOnce(&str) -> String,
    ) -> Result<String, Failure> {
        let chosen: Vec<_> = databases
            .into_iter()
            .filter(|(name, _)| self.database.is_none_or(|wanted| name.as_str() == wanted))
            .collect();
        if let (Some(wanted), true) = (self.database, chosen.is_empty()) {
            return Err(Failure::config(none(&printable(wanted))));
        }
        Ok(script_file(chosen, self.direction, self.allow_destructive))
    }
}

/// What `fermata schema review` shows, and what fails it.
#[derive(Debug)]
pub(crate) struct ReviewRequest<'a> {
    /// Exit 1, after printing, when a database's lint findings hold one at this severity or
    /// above.
    pub(crate) fail_on: Option<Severity>,
    /// The scripts instead of the review (`--ddl`).
    pub(crate) scripts: Option<ScriptRequest<'a>>,
}

/// `fermata schema review ID`: the refresh's review and the diff of every changed database,
/// with their migration scripts' summaries and lint findings; or, with `--ddl`, the scripts.
/// With `--fail-on`, a finding at that severity or above fails the command after the output.
pub(crate) async fn review(
    setup: &Setup,
    id: &str,
    actor: &str,
    format: Format,
    request: &ReviewRequest<'_>,
) -> Result<String, Failure> {
    let opened = open(setup).await?;
    let admin = administrator(&*opened.storage, actor, false).await?;
    let diff = opened
        .runtime
        .reviews
        .diff(&admin, operation_id(id)?)
        .await?;
    let text = match request.scripts {
        Some(scripts) => scripts.file(
            diff.databases
                .iter()
                .map(|database| (&database.database, review_scripts(database)))
                .collect(),
            |name| format!("the review of {id} has no database named `{name}`"),
        )?,
        None => shown(&ReviewView::from(&diff), format, ReviewView::to_text),
    };
    let Some(threshold) = request.fail_on else {
        return Ok(text);
    };
    let failing = diff
        .databases
        .iter()
        .filter(|database| {
            database
                .notes
                .as_ref()
                .is_some_and(|notes| lint::fails(&notes.lint, threshold))
        })
        .count();
    if failing == 0 {
        return Ok(text);
    }
    print!("{text}");
    Err(Failure::runtime(format!(
        "the lint findings of {failing} database{} hold one at {} or above",
        if failing == 1 { "" } else { "s" },
        threshold.id()
    )))
}

/// `fermata schema approve ID` and `reject ID`: records the decision as `actor`, with the
/// password on standard input, and follows the refresh until it ends.
pub(crate) async fn decide(
    setup: &Setup,
    id: &str,
    actor: &str,
    verdict: Verdict,
    format: Format,
) -> Result<String, Failure> {
    let id = operation_id(id)?;
    let opened = open(setup).await?;
    let admin = administrator(&*opened.storage, actor, true).await?;
    opened.runtime.reviews.decide(&admin, id, verdict).await?;
    let report = follow(&opened, id, &ended, &mut StepLines::default()).await?;
    let wanted = match verdict {
        Verdict::Approve => OperationState::Succeeded,
        Verdict::Reject => OperationState::Rejected,
    };
    conclude(&report, format, report.operation.state == wanted)
}

/// `fermata schema drift ID`: the unified diff of every file in which verification `ID` found a
/// database's live schema differing from its merged snapshot, with its migration scripts'
/// summaries; or, with `--ddl`, the scripts.
pub(crate) async fn drift(
    setup: &Setup,
    id: &str,
    actor: &str,
    format: Format,
    scripts: Option<ScriptRequest<'_>>,
) -> Result<String, Failure> {
    let opened = open(setup).await?;
    let admin = administrator(&*opened.storage, actor, false).await?;
    let drift = opened.runtime.drift.diff(&admin, operation_id(id)?).await?;
    match scripts {
        Some(scripts) => scripts.file(
            drift
                .databases
                .iter()
                .map(|database| (&database.database, drift_scripts(database)))
                .collect(),
            |name| format!("verification {id} found no drift in a database named `{name}`"),
        ),
        None => Ok(shown(&DriftView::from(&drift), format, DriftView::to_text)),
    }
}

/// `fermata schema publish ID`: publishes again an approved refresh whose publication failed,
/// as `actor` with the password on standard input, and follows it until it ends or its
/// publication fails again.
pub(crate) async fn publish(
    setup: &Setup,
    id: &str,
    actor: &str,
    format: Format,
) -> Result<String, Failure> {
    let opened = open(setup).await?;
    let admin = administrator(&*opened.storage, actor, true).await?;
    let id = operation_id(id)?;
    let held = opened
        .runtime
        .operations
        .report(id)
        .await?
        .held_publications();
    opened
        .runtime
        .operations
        .republish(&admin, &id.to_string())
        .await?;
    let done = |report: &OperationReport| {
        report.operation.state.is_terminal()
            || (report.awaits_republication() && report.held_publications() > held)
    };
    let report = follow(&opened, id, &done, &mut StepLines::default()).await?;
    conclude(
        &report,
        format,
        report.operation.state == OperationState::Succeeded,
    )
}
