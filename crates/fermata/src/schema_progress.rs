//! What `fermata schema` shows on standard error while it follows an operation: each step's
//! progress as a line ([`StepLines`], for inventories and decisions), or one progress bar per
//! selected database in selection order plus the operation's state ([`DatabaseBars`], for
//! refreshes and verifications). Both show only the safe view of the report: states, outcomes, counts and safe
//! errors, with names made printable.

use std::collections::BTreeMap;
use std::time::Duration;

use fermata_schema::OperationReport;
use fermata_schema::view::{DatabaseView, ErrorView, OperationView, printable};
use fermata_store::schema::OperationState;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// How often a bar's spinner turns.
const TICK: Duration = Duration::from_millis(120);

/// Shows the progress of an operation each time the command reads its report.
pub(crate) trait Watcher {
    fn show(&mut self, report: &OperationReport);
}

/// Shows nothing (`--json` output has no progress).
#[derive(Debug)]
pub(crate) struct Silent;

impl Watcher for Silent {
    fn show(&mut self, _: &OperationReport) {}
}

/// One line per step change: its state, its attempt, and the error it is retried after.
#[derive(Debug, Default)]
pub(crate) struct StepLines {
    seen: BTreeMap<String, (&'static str, u32)>,
}

impl Watcher for StepLines {
    fn show(&mut self, report: &OperationReport) {
        for step in &report.steps {
            let now = (step.state.as_str(), step.attempts);
            if self.seen.get(step.key.as_str()) == Some(&now) {
                continue;
            }
            let retry = step
                .error
                .as_ref()
                .filter(|_| !step.state.is_terminal())
                .map(|error| format!(" (retrying after: {})", printable(&error.message())))
                .unwrap_or_default();
            eprintln!("  {} {} attempt {}{retry}", step.key.as_str(), now.0, now.1);
            self.seen.insert(step.key.as_str().to_owned(), now);
        }
    }
}

/// A bar per selected database, in selection order, and one for the operation. Drawn only when
/// standard error is a terminal.
#[derive(Debug)]
pub(crate) struct DatabaseBars {
    operation: ProgressBar,
    databases: Vec<ProgressBar>,
}

impl DatabaseBars {
    /// Bars for the databases `report` selected.
    pub(crate) fn new(report: &OperationReport) -> Self {
        let multi = MultiProgress::new();
        let style = ProgressStyle::with_template("{spinner} {prefix} {wide_msg}")
            .expect("the bar template is valid");
        let names: Vec<String> = report
            .databases
            .iter()
            .map(|row| printable(row.database.as_str()))
            .collect();
        let width = names
            .iter()
            .map(|name| name.chars().count())
            .max()
            .unwrap_or(0);
        let bar = |prefix: String| {
            let bar = multi.add(ProgressBar::new_spinner().with_style(style.clone()));
            bar.set_prefix(prefix);
            bar.enable_steady_tick(TICK);
            bar
        };
        DatabaseBars {
            databases: names
                .into_iter()
                .map(|name| bar(format!("{name:<width$}")))
                .collect(),
            operation: bar(format!("operation {}", report.operation.id)),
        }
    }
}

impl Watcher for DatabaseBars {
    fn show(&mut self, report: &OperationReport) {
        let view = OperationView::from(report);
        for (bar, database) in self.databases.iter().zip(&view.databases) {
            if bar.is_finished() {
                continue;
            }
            let line = database_line(database);
            // A recorded result is final.
            if database.outcome.is_some() {
                bar.finish_with_message(line);
            } else {
                bar.set_message(line);
            }
        }
        let state = report.operation.state;
        let line = match &view.summary.error {
            Some(error) => format!("{state}: {}", error_line(error)),
            None => state.to_string(),
        };
        if state.is_terminal() || state == OperationState::AwaitingReview {
            self.operation.finish_with_message(line);
        } else {
            self.operation.set_message(line);
        }
    }
}

impl Drop for DatabaseBars {
    /// Bars the command stopped following stay on screen as they were.
    fn drop(&mut self) {
        for bar in self.databases.iter().chain([&self.operation]) {
            if !bar.is_finished() {
                bar.abandon();
            }
        }
    }
}

/// A database's bar line: pending, running, or its outcome and freshness with its object counts,
/// the number of files a verification found differing, or its safe error.
fn database_line(database: &DatabaseView) -> String {
    let (Some(outcome), Some(freshness)) = (database.outcome, database.freshness) else {
        return database.state.to_owned();
    };
    let detail = match &database.error {
        Some(error) => error_line(error),
        None if !database.differences.is_empty() => {
            format!("{} file(s) differ", database.differences.len())
        }
        None => database
            .object_counts
            .iter()
            .map(|(category, count)| format!("{count} {category}"))
            .collect::<Vec<_>>()
            .join(", "),
    };
    format!("{outcome} ({freshness}) {detail}")
}

fn error_line(error: &ErrorView) -> String {
    format!("{} {}", error.code.name(), printable(&error.message))
}
