//! `fermata schema`: schema operations from the command line, on the same configuration and
//! database as `serve` and under the same rules (start protocol, lease, workflow runs).
//!
//! The operator names the system administrator the command acts as (`--as NAME`); the clear
//! action also takes that user's password on standard input, which makes the action fresh. A
//! started inventory is executed by the serving process when one holds the writer lease, and by
//! this command otherwise; either way the command follows its progress until it ends.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fermata_schema::view::{OperationSummary, OperationView, printable};
use fermata_schema::{Administrator, OperationReport, OperationRequest, SourceSettings};
use fermata_store::schema::{OperationId, OperationKind, RequestKey, SafeError};
use fermata_store::{LeaseName, Storage};
use fermata_workflow::WorkerSettings;
use tokio_util::sync::CancellationToken;

use crate::account_commands::password_from_stdin;
use crate::config::StorageSettings;
use crate::failure::Failure;
use crate::schema_runtime::SchemaRuntime;
use crate::storage;

/// How often the command looks at an operation it follows.
const POLL: Duration = Duration::from_millis(250);

/// Output for people, or JSON for scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Text,
    Json,
}

impl From<SafeError> for Failure {
    fn from(error: SafeError) -> Self {
        Failure::runtime(format!(
            "{} ({})",
            printable(&error.message()),
            error.code().name()
        ))
    }
}

struct Opened {
    storage: Arc<dyn Storage>,
    runtime: SchemaRuntime,
}

async fn open(
    settings: &StorageSettings,
    source: Option<SourceSettings>,
) -> Result<Opened, Failure> {
    let store = storage::open(settings).await?;
    storage::prepare_schema(&store, true).await?;
    let storage: Arc<dyn Storage> = Arc::new(store);
    let runtime = SchemaRuntime::new(Arc::clone(&storage), source);
    Ok(Opened { storage, runtime })
}

/// The administrator `name`, fresh when `fresh` (its password was just checked).
async fn administrator(
    storage: &dyn Storage,
    name: &str,
    fresh: bool,
) -> Result<Administrator, Failure> {
    let unknown = || Failure::config(format!("no user named `{name}`"));
    let name = fermata_store::UserName::new(name).map_err(|_| unknown())?;
    let user = storage
        .users()
        .user_by_name(&name)
        .await
        .map_err(|e| Failure::store("cannot read the user", &e))?
        .ok_or_else(unknown)?;
    if fresh {
        let password = password_from_stdin()?;
        if !fermata_crypto::verify_password(password.expose(), Some(&user.password_hash)) {
            return Err(Failure::config("the password is not right"));
        }
    }
    Administrator::from_user(&user, fresh)
        .map_err(|_| Failure::config(format!("`{name}` is not a system_admin")))
}

fn render(report: &OperationReport, format: Format) -> String {
    let view = OperationView::from(report);
    match format {
        Format::Json => format!(
            "{}\n",
            serde_json::to_string_pretty(&view).expect("a view serializes")
        ),
        Format::Text => view.to_text(),
    }
}

/// `fermata schema inventory`: starts an inventory and follows it to its end.
pub(crate) async fn inventory(
    settings: &StorageSettings,
    source: Option<SourceSettings>,
    actor: &str,
    request_key: Option<&str>,
    format: Format,
) -> Result<String, Failure> {
    let opened = open(settings, source).await?;
    let admin = administrator(&*opened.storage, actor, false).await?;
    let key = match request_key {
        Some(key) => key.to_owned(),
        None => format!("cli-{}", uuid::Uuid::new_v4()),
    };
    let request_key = RequestKey::new(key)
        .map_err(|_| Failure::config("--request-key has 1 to 100 printable ASCII characters"))?;
    let operation = opened
        .runtime
        .operations
        .request(
            &admin,
            &OperationRequest {
                kind: OperationKind::Inventory,
                request_key,
                inventory: None,
                databases: Vec::new(),
            },
        )
        .await?;
    eprintln!("inventory {} {}", operation.id, operation.state);
    let report = follow(&opened, operation.id).await?;
    let text = render(&report, format);
    if !report.operation.state.is_failure() {
        return Ok(text);
    }
    print!("{text}");
    let error = report
        .operation
        .error
        .unwrap_or_else(|| SafeError::new(fermata_store::schema::ErrorCode::RunLost));
    Err(error.into())
}

/// Follows operation `id` until it ends, printing each step's progress on standard error. When
/// no server is serving this database, this process runs the workflow itself.
async fn follow(opened: &Opened, id: OperationId) -> Result<OperationReport, Failure> {
    let served = opened
        .storage
        .leases()
        .peek(&LeaseName::WRITER)
        .await
        .map_err(|e| Failure::store("cannot read the writer lease", &e))?
        .live_holder()
        .is_some();
    let stop = CancellationToken::new();
    let worker = (!served).then(|| {
        let worker = opened.runtime.engine.worker(
            format!("cli-{}", std::process::id()),
            WorkerSettings::default(),
        );
        let stop = stop.clone();
        tokio::spawn(async move { worker.run(stop.cancelled_owned()).await })
    });
    if served {
        eprintln!("the serving process runs it");
    }
    let result = watch(opened, id).await;
    stop.cancel();
    if let Some(worker) = worker {
        let _ = worker.await;
    }
    result.map_err(Failure::from)
}

/// Polls operation `id`, printing each step change, until it ends (an operation whose run is
/// gone is ended on the way, see [`Operations::settle`](fermata_schema::Operations::settle)).
async fn watch(opened: &Opened, id: OperationId) -> Result<OperationReport, SafeError> {
    let mut seen: BTreeMap<String, (&'static str, u32)> = BTreeMap::new();
    loop {
        opened.runtime.operations.settle(id).await?;
        let report = opened.runtime.operations.report(id).await?;
        for step in &report.steps {
            let now = (step.state.as_str(), step.attempts);
            if seen.get(step.key.as_str()) == Some(&now) {
                continue;
            }
            let retry = step
                .error
                .as_ref()
                .filter(|_| !step.state.is_terminal())
                .map(|error| format!(" (retrying after: {})", printable(&error.message())))
                .unwrap_or_default();
            eprintln!("  {} {} attempt {}{retry}", step.key.as_str(), now.0, now.1);
            seen.insert(step.key.as_str().to_owned(), now);
        }
        if report.operation.state.is_terminal() {
            return Ok(report);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `fermata schema operations`: the latest operations, newest first.
pub(crate) async fn operations(
    settings: &StorageSettings,
    limit: u32,
    format: Format,
) -> Result<String, Failure> {
    let opened = open(settings, None).await?;
    let operations = opened.runtime.operations.recent(limit).await?;
    let summaries: Vec<_> = operations.iter().map(OperationSummary::from).collect();
    Ok(match format {
        Format::Json => format!(
            "{}\n",
            serde_json::to_string_pretty(&summaries).expect("views serialize")
        ),
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
    typed
        .parse()
        .map_err(|_| Failure::config(format!("`{typed}` is not an operation ID")))
}

/// `fermata schema show ID`: one operation's report.
pub(crate) async fn show(
    settings: &StorageSettings,
    id: &str,
    format: Format,
) -> Result<String, Failure> {
    let opened = open(settings, None).await?;
    let report = opened.runtime.operations.report(operation_id(id)?).await?;
    Ok(render(&report, format))
}

/// `fermata schema clear-lease ID`: the clear action, as `actor` with the password on standard
/// input.
pub(crate) async fn clear_lease(
    settings: &StorageSettings,
    id: &str,
    actor: &str,
    format: Format,
) -> Result<String, Failure> {
    let opened = open(settings, None).await?;
    let admin = administrator(&*opened.storage, actor, true).await?;
    let cleared = opened.runtime.operations.clear_lease(&admin, id).await?;
    let report = opened.runtime.operations.report(cleared.id).await?;
    Ok(render(&report, format))
}
