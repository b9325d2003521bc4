//! The schema administrator page and the operation report page as markup: pure functions of the
//! data the handlers of the parent module gather, so every state renders the same way in a
//! snapshot test as in the server. Times, IDs and the request key are inputs, never read here;
//! every time is shown relative to the moment the page is drawn for, the exact instant in its
//! `<time>` element (see [`crate::view::time()`]).
//!
//! Every error shown is a safe error's message ([`ErrorView`]); every form posts with the
//! session's CSRF token. A migration script is shown collapsed, its verdict first (verified, NOT
//! verified with the reason, or unverified with the reason), each destructive statement marked;
//! database names, SQL and findings are text maud escapes like any other. Each page is drawn in the one skeleton of [`crate::view`], with the
//! administrator pages' style sheet. The page works without JavaScript; its script
//! (`admin_page.js`, served as `/assets/admin.js`) only adds the filter box, Select all / none /
//! stale / drifted, the client-side empty-selection check and the live polling of the current
//! operation.

use fermata_schema::drift::ddl_path;
use fermata_schema::lint::{Finding, Severity};
use fermata_schema::migration::{Direction, Verification};
use fermata_schema::review::FileDiff;
use fermata_schema::view::{
    DatabaseView, DriftView, ErrorView, InventoryView, LeaseView, MigrationView, NO_DRIFT_SCRIPT,
    OperationSummary, OperationView, RegisteredDatabaseView, ReviewView, ScriptView, StepView,
};
use fermata_schema::{ErrorCode, SafeError};
use fermata_store::UnixMillis;
use fermata_store::schema::PullRequest;
use maud::{Markup, html};

use crate::SchemaSetup;
use crate::view::{Page, time, time_text};

/// Where a message is shown: next to the control whose form caused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Place {
    Discover,
    Start,
    Review,
    Lease,
    Publication,
}

/// What a form's action came to, shown once after its redirect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Notice {
    InventoryStarted,
    RefreshStarted,
    VerificationStarted,
    Approved,
    Rejected,
    LeaseCleared,
    PublishingAgain,
    PullRequestClosed,
}

impl Notice {
    fn text(self) -> &'static str {
        match self {
            Notice::InventoryStarted => "Discovery started.",
            Notice::RefreshStarted => "Refresh started.",
            Notice::VerificationStarted => "Verification started.",
            Notice::Approved => "Approved: the refresh publishes its pull request.",
            Notice::Rejected => "Rejected: nothing is published.",
            Notice::LeaseCleared => "The expired lease was cleared.",
            Notice::PublishingAgain => "Publishing again: the refresh publishes its pull request.",
            Notice::PullRequestClosed => "The pull request was closed without merging.",
        }
    }
}

/// A message for one place on the page.
#[derive(Debug, Clone)]
pub(crate) enum Flash {
    Notice(Place, Notice),
    Error(Place, ErrorView),
}

impl Flash {
    fn at(&self, place: Place) -> Markup {
        html! {
            @match self {
                Flash::Notice(at, notice) if *at == place => {
                    p.notice role="status" { (notice.text()) }
                }
                Flash::Error(at, error) if *at == place => {
                    p.error role="alert" id={ "error-" (place_name(place)) } { (error.message) }
                }
                _ => {}
            }
        }
    }
}

fn place_name(place: Place) -> &'static str {
    match place {
        Place::Discover => "discover",
        Place::Start => "start",
        Place::Review => "review",
        Place::Lease => "lease",
        Place::Publication => "publication",
    }
}

/// One database of the latest inventory, with what the registry says of it.
#[derive(Debug, Clone)]
pub(crate) struct InventoryRow {
    pub(crate) name: String,
    /// Its registry entry, when it has a merged snapshot.
    pub(crate) registered: Option<RegisteredDatabaseView>,
}

/// The latest inventory.
#[derive(Debug, Clone)]
pub(crate) struct InventoryPanel {
    pub(crate) view: InventoryView,
    pub(crate) expired: bool,
    pub(crate) rows: Vec<InventoryRow>,
    /// Registered databases the inventory does not list: no longer on the server.
    pub(crate) missing: Vec<RegisteredDatabaseView>,
}

/// The global lease.
#[derive(Debug, Clone)]
pub(crate) struct LeasePanel {
    pub(crate) view: LeaseView,
    pub(crate) expired: bool,
}

/// The review of the refresh that awaits one.
#[derive(Debug, Clone)]
pub(crate) enum ReviewPanel {
    Diff(ReviewView),
    /// The diff could not be read; the decision forms are still shown.
    Unavailable {
        operation_id: String,
        error: ErrorView,
    },
}

/// The schedule and the latest webhook deliveries; shown when there is either.
#[derive(Debug, Clone, Default)]
pub(crate) struct SchedulePanel {
    /// The schedule in words and the next due time.
    pub(crate) next: Option<(String, UnixMillis)>,
    pub(crate) deliveries: Vec<DeliveryRow>,
}

/// One webhook's delivery of an event.
#[derive(Debug, Clone)]
pub(crate) struct DeliveryRow {
    pub(crate) event: String,
    pub(crate) operation_id: String,
    /// The webhook's position in `webhooks`, from 1 as people count.
    pub(crate) webhook: usize,
    pub(crate) state: &'static str,
    pub(crate) attempts: u32,
    pub(crate) at: String,
    pub(crate) error: Option<ErrorView>,
}

/// Everything the administrator page shows.
#[derive(Debug, Clone)]
pub(crate) struct SchemaPage {
    pub(crate) user: String,
    pub(crate) csrf: String,
    /// Whether the session entered its password recently enough to decide and clear.
    pub(crate) fresh: bool,
    /// The key the start forms send, new for every rendering.
    pub(crate) request_key: String,
    pub(crate) setup: SchemaSetup,
    pub(crate) flash: Option<Flash>,
    pub(crate) inventory: Option<InventoryPanel>,
    /// Why the registry could not be read, when it could not.
    pub(crate) registry_error: Option<ErrorView>,
    pub(crate) lease: Option<LeasePanel>,
    pub(crate) current: Option<OperationView>,
    pub(crate) review: Option<ReviewPanel>,
    /// The latest published pull request, while it is open: the operation and the request.
    pub(crate) open_pull: Option<(String, PullRequest)>,
    pub(crate) recent: Vec<OperationSummary>,
    pub(crate) schedule: SchedulePanel,
    /// The moment the page is drawn for: times are told relative to it.
    pub(crate) now: UnixMillis,
}

/// An administrator page: the shared look with the administrator pages' style sheet after it.
fn admin_page(title: &str, body: Markup) -> Page {
    Page::new(title, body).style("admin.css")
}

fn error_line(error: &ErrorView) -> Markup {
    html! { span.code { (error.code.name()) } ": " (error.message) }
}

/// The administrator page.
pub(crate) fn schema_page(page: &SchemaPage) -> Page {
    let flash = |place| page.flash.as_ref().map(|f| f.at(place));
    let body = html! {
        h1 { "Schema snapshots" }
        p.note { "Signed in as " strong { (page.user) } ". "
            a href="/account" { "Account" } }
        @if !page.setup.source {
            p.warning role="status" { (SafeError::new(ErrorCode::SourceNotConfigured).message())
                ": add a " code { "[schema.source]" } " to the configuration to discover databases." }
        }
        @if !page.setup.package {
            p.warning role="status" { (SafeError::new(ErrorCode::PackageNotConfigured).message())
                ": add a " code { "[schema.package]" } " to refresh and publish." }
        }
        @if let Some((operation, pull)) = &page.open_pull {
            p.warning role="status" #pull-request {
                "Pull request " a href=(pull.url) { "#" (pull.number) } " (" (pull.head) " onto " (pull.base)
                ") of operation " a href={ "/admin/schema/operations/" (operation) } { code { (operation) } }
                " is open: a new refresh waits until it is merged or closed." }
            (fresh_form(page, &format!("/admin/schema/operations/{operation}/close-pull-request"),
                "close-pull-request", "Close the pull request without merging", "to close it"))
        }
        (flash(Place::Publication).unwrap_or_default())

        section #discover aria-labelledby="discover-title" {
            h2 #discover-title { "Discover databases" }
            p.note { "An inventory lists the databases the snapshot account can see. It never takes the lease." }
            form method="post" action="/admin/schema/inventory" {
                input type="hidden" name="csrf" value=(page.csrf);
                input type="hidden" name="request_key" value=(page.request_key);
                button type="submit" { "Discover databases" }
            }
            (flash(Place::Discover).unwrap_or_default())
        }

        section #inventory aria-labelledby="inventory-title" {
            h2 #inventory-title { "Latest inventory" }
            @match &page.inventory {
                None => { p.note #no-inventory { "No inventory yet. Discover databases to choose from." } }
                Some(inventory) => { (inventory_panel(page, inventory)) }
            }
            (flash(Place::Start).unwrap_or_default())
        }

        section #current aria-labelledby="current-title" aria-live="polite" {
            h2 #current-title { "Current operation" }
            @match &page.current {
                None => { p.note #no-operation { "No operation is running." } }
                Some(operation) => {
                    (operation_panel(operation, true, page.now))
                    @if operation.summary.state == "publishing" && operation.summary.error.is_some() {
                        p.warning #publication-held role="status" {
                            "Publication failed; the approved refresh is kept. Publishing again uses the same branch, commit and pull request." }
                        (fresh_form(page, &format!("/admin/schema/operations/{}/publish", operation.summary.id),
                            "publish-again", "Publish again", "to publish again"))
                    }
                }
            }
        }

        section #review aria-labelledby="review-title" {
            h2 #review-title { "Review" }
            (flash(Place::Review).unwrap_or_default())
            @match &page.review {
                None => { p.note #no-review { "No refresh awaits review." } }
                Some(review) => { (review_panel(page, review)) }
            }
        }

        section #lease aria-labelledby="lease-title" {
            h2 #lease-title { "Lease" }
            (flash(Place::Lease).unwrap_or_default())
            (lease_panel(page))
        }

        section #recent aria-labelledby="recent-title" {
            h2 #recent-title { "Recent operations" }
            @if page.recent.is_empty() { p.note { "No operations yet." } }
            @else { (recent_table(&page.recent, page.now)) }
        }

        @if page.schedule.next.is_some() || !page.schedule.deliveries.is_empty() {
            (schedule_panel(&page.schedule, page.now))
        }
    };
    admin_page("Schema snapshots", body).script("admin.js")
}

fn inventory_panel(page: &SchemaPage, inventory: &InventoryPanel) -> Markup {
    let view = &inventory.view;
    let empty = SafeError::new(ErrorCode::EmptySelection).message();
    html! {
        dl.facts {
            dt { "Inventory" } dd { code #inventory-id { (view.id) } }
            dt { "Server" } dd { (view.server_version) }
            dt { "Discovered" } dd { (time_text(&view.discovered_at, page.now)) }
            dt { @if inventory.expired { "Expired" } @else { "Expires" } }
            dd { (time_text(&view.expires_at, page.now)) }
        }
        @if !view.ignored.is_empty() {
            p.note #inventory-ignored {
                "Ignored by " code { "[schema] ignore_databases" } " (" (view.ignored.len()) "): "
                @for (index, name) in view.ignored.iter().enumerate() {
                    @if index > 0 { ", " }
                    code { (name) }
                }
            }
        }
        @if let Some(error) = &page.registry_error {
            p.note { "Registry: " (error.message) }
        }
        @if inventory.expired {
            p.warning #inventory-expired role="status" { (SafeError::new(ErrorCode::InventoryExpired).message())
                ". Discover databases again to select from a current inventory." }
        } @else if inventory.rows.is_empty() {
            p.note { "The snapshot account sees no databases." }
        } @else {
            form #selection method="post" action="/admin/schema/start" data-empty-message=(empty) {
                input type="hidden" name="csrf" value=(page.csrf);
                input type="hidden" name="request_key" value=(page.request_key);
                input type="hidden" name="inventory" value=(view.id);
                div.actions.selectors hidden {
                    label for="inventory-filter" { "Filter" }
                    input #inventory-filter type="search" autocomplete="off" spellcheck="false";
                    button type="button" #select-all { "Select all" }
                    button type="button" #select-none { "Select none" }
                    button type="button" #select-stale { "Select stale" }
                    button type="button" #select-drifted { "Select drifted" }
                }
                div.scroll {
                    table.inventory {
                        caption.note { "Databases (" (inventory.rows.len()) ")" }
                        thead { tr { th { "Select" } th { "Name" } th { "Registered" } th { "Merged hash" } th { "Freshness" } th { "Last verification" } } }
                        tbody #inventory-rows {
                            @for (index, row) in inventory.rows.iter().enumerate() {
                                @let freshness = row.registered.as_ref().map_or("unregistered", |r| r.freshness);
                                @let drifted = row.registered.as_ref()
                                    .and_then(|r| r.last_verification.as_ref())
                                    .is_some_and(|check| check.outcome == Some("changed"));
                                tr data-name=(row.name) data-freshness=(freshness) data-drifted=(drifted) {
                                    td { input type="checkbox" name="databases" value=(row.name) id={ "db-" (index) }; }
                                    td { label for={ "db-" (index) } { code { (row.name) } } }
                                    (registry_cells(row.registered.as_ref(), page.now))
                                }
                            }
                            @for registered in &inventory.missing {
                                tr.missing data-name=(registered.name) data-freshness="missing" data-drifted="false" {
                                    td {}
                                    td { code { (registered.name) } " " span.note { "not on the server" } }
                                    (registry_cells(Some(registered), page.now))
                                }
                            }
                        }
                    }
                }
                @if !inventory.missing.is_empty() {
                    p {
                        input #remove-missing type="checkbox" name="remove_missing";
                        " "
                        label for="remove-missing" {
                            "A refresh also proposes removing the " (inventory.missing.len())
                            " registered database(s) no longer on the server from the package" }
                    }
                }
                div.actions {
                    button type="submit" name="action" value="refresh" { "Start refresh" }
                    button type="submit" name="action" value="verification" { "Start verification" }
                    span #selection-message.error role="alert" hidden {}
                }
            }
        }
    }
}

/// The registry's cells of an inventory row: registered, merged hash, freshness, last
/// verification.
fn registry_cells(registered: Option<&RegisteredDatabaseView>, now: UnixMillis) -> Markup {
    html! {
        @match registered {
            None => { td { "no" } td {} td { "unregistered" } td {} }
            Some(registered) => {
                td { "yes" }
                td { code title=(registered.merged.snapshot_hash) { (short(&registered.merged.snapshot_hash)) } }
                td { (registered.freshness) }
                td {
                    @match &registered.last_verification {
                        None => { "never" }
                        Some(check) => {
                            a href={ "/admin/schema/operations/" (check.operation_id) } {
                                (check.outcome.unwrap_or("-")) }
                            " " @match &check.finished_at {
                                Some(at) => { (time_text(at, now)) }
                                None => { "-" }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A form posting to `action` for a fresh session, or the way to confirm the password first
/// for a stale one (coming back to the page).
fn fresh_form(page: &SchemaPage, action: &str, id: &str, label: &str, purpose: &str) -> Markup {
    html! {
        @if page.fresh {
            form.inline method="post" action=(action) {
                input type="hidden" name="csrf" value=(page.csrf);
                button type="submit" id=(id) { (label) }
            }
        } @else {
            form method="get" action="/reauth" {
                input type="hidden" name="next" value="/admin/schema";
                button type="submit" id={ "reauth-" (id) } { "Confirm your password " (purpose) }
            }
        }
    }
}

/// The first twelve characters of a hash, enough to tell snapshots apart.
fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

fn counts(database: &DatabaseView) -> String {
    database
        .object_counts
        .iter()
        .map(|(category, count)| format!("{count} {category}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// An operation's state, databases, steps and lease. `live` marks it for polling.
fn operation_panel(operation: &OperationView, live: bool, now: UnixMillis) -> Markup {
    let summary = &operation.summary;
    html! {
        div #operation data-operation=(summary.id) data-state=(summary.state)
            data-terminal=(summary.terminal) data-live=(live) {
            dl.facts {
                dt { "Operation" } dd { a href={ "/admin/schema/operations/" (summary.id) } { code { (summary.id) } } }
                dt { "Kind" } dd { (summary.kind) }
                dt { "State" } dd { strong data-field="state" { (summary.state) } }
                dt { "By" } dd { (operation.actor_name.as_deref().unwrap_or(&summary.actor)) }
                dt { "Started" } dd { (time_text(&summary.created_at, now)) }
                @if let Some(finished) = &summary.finished_at { dt { "Finished" } dd { (time_text(finished, now)) } }
                dt { "Lease" } dd data-field="lease" {
                    @match &operation.lease {
                        Some(lease) => { (lease.status) ", expires " (time_text(&lease.expires_at, now)) }
                        None => { "not held" }
                    }
                }
                @if let Some(pull) = &summary.pull_request {
                    dt { "Pull request" } dd { a.pull href=(pull.url) { "#" (pull.number) } " " (pull.head) " onto " (pull.base) }
                }
            }
            p.error role="alert" data-field="error" hidden[summary.error.is_none()] {
                @if let Some(error) = &summary.error { (error_line(error)) }
            }
            @if summary.kind == "verification" && operation.databases.iter().any(|d| d.outcome == Some("changed")) {
                p { a #show-drift href={ "/admin/schema/operations/" (summary.id) "/drift" } { "Show the drift" }
                    " (the unified diff of each file that differs from its merged snapshot)" }
            }
            @if summary.kind == "inventory" {
                @if let Some(inventory) = &operation.inventory {
                    p { "Found " (inventory.databases.len()) " database(s)."
                        @if !inventory.ignored.is_empty() {
                            " Ignored " (inventory.ignored.len()) " by " code { "ignore_databases" } "."
                        }
                    }
                }
            }
            @if !operation.databases.is_empty() {
                div.scroll {
                    table {
                        caption.note { "Databases" }
                        thead { tr { th { "Database" } th { "Progress" } th { "Outcome" } th { "Freshness" } th { "Objects" } th { "Error" } } }
                        tbody data-field="databases" {
                            @for database in &operation.databases {
                                tr {
                                    td { code { (database.name) } }
                                    td { (database.state) }
                                    td { (database.outcome.unwrap_or("")) }
                                    td { (database.freshness.unwrap_or("")) }
                                    td { (counts(database)) }
                                    td { @if let Some(error) = &database.error { (error.message) } }
                                }
                            }
                        }
                    }
                }
            }
            @if !operation.steps.is_empty() {
                div.scroll {
                    table {
                        caption.note { "Steps and retries" }
                        thead { tr { th { "Step" } th { "State" } th { "Attempts" } th { "Latest error" } } }
                        tbody data-field="steps" {
                            @for step in &operation.steps { (step_row(step)) }
                        }
                    }
                }
            }
        }
    }
}

fn step_row(step: &StepView) -> Markup {
    html! {
        tr {
            td { code { (step.key) } }
            td { (step.state) }
            td { (step.attempts) }
            td { @if let Some(error) = &step.error { (error.message) } }
        }
    }
}

fn decision_forms(page: &SchemaPage, operation_id: &str) -> Markup {
    html! {
        @if page.fresh {
            div.actions {
                form.inline method="post" action={ "/admin/schema/operations/" (operation_id) "/approve" } {
                    input type="hidden" name="csrf" value=(page.csrf);
                    button type="submit" #approve { "Approve" }
                }
                form.inline method="post" action={ "/admin/schema/operations/" (operation_id) "/reject" } {
                    input type="hidden" name="csrf" value=(page.csrf);
                    button type="submit" #reject { "Reject" }
                }
            }
        } @else {
            p.note { "Approving or rejecting needs your password again." }
            form method="get" action="/reauth" {
                input type="hidden" name="next" value={ "/admin/schema?operation=" (operation_id) };
                button type="submit" #reauth-review { "Confirm your password to decide" }
            }
        }
    }
}

fn review_panel(page: &SchemaPage, review: &ReviewPanel) -> Markup {
    match review {
        ReviewPanel::Unavailable {
            operation_id,
            error,
        } => html! {
            p { "Operation " code { (operation_id) } " awaits review." }
            p.error role="alert" { (error.message) }
            (decision_forms(page, operation_id))
        },
        ReviewPanel::Diff(view) => html! {
            dl.facts {
                dt { "Operation" } dd { code #review-operation { (view.operation_id) } }
                dt { "Base commit" } dd { code { (view.base_commit) } }
                dt { "Review" } dd { (view.review.state) ", window closes " (time_text(&view.review.expires_at, page.now)) }
            }
            @if view.databases.is_empty() { p.note { "No database changed." } }
            @for database in &view.databases {
                details open {
                    summary {
                        code { (database.database.as_str()) }
                        @if database.removed { " (no longer on the server: removed from the package)" }
                        @else if database.registered { " (registered)" } @else { " (not registered: every file is new)" }
                        ": " (database.files.len()) " file(s) differ"
                        @if let Some(findings) = &database.lint { ", " (findings.len()) " lint finding(s)" }
                    }
                    @if !database.removed {
                        (migration_panel(database.migration.as_ref(), "candidate", None, database.no_script()))
                    }
                    @if let Some(findings) = &database.lint { (lint_table(findings)) }
                    (file_diffs(&database.files))
                }
            }
            (decision_forms(page, &view.operation_id))
        },
    }
}

/// A database's two migration scripts, or why it has none (`missing`). `live` names the schema
/// the scripts go from and to besides the merged snapshot ("live schema", "candidate");
/// `download`, the operation and database whose script the API answers as a file.
fn migration_panel(
    migration: Option<&MigrationView>,
    live: &str,
    download: Option<(&str, &str)>,
    missing: &str,
) -> Markup {
    html! {
        @match migration {
            None => { p.note { "No migration script: " (missing) "." } }
            Some(migration) => {
                @for (direction, script) in migration.scripts() {
                    (script_details(direction, script, live, download))
                }
            }
        }
    }
}

/// One script, collapsed: its verdict first, then what it says, its notes, and its statements
/// with the destructive ones marked.
fn script_details(
    direction: Direction,
    script: &ScriptView,
    live: &str,
    download: Option<(&str, &str)>,
) -> Markup {
    let (from, to) = match direction {
        Direction::Undo => (live, "merged snapshot"),
        Direction::Adopt => ("merged snapshot", live),
    };
    let (verdict, state) = match &script.verification {
        Verification::Verified => ("Verified", "verified"),
        Verification::Failed { .. } => ("NOT verified", "failed"),
        Verification::Unverified { .. } => ("Unverified", "unverified"),
    };
    let count = script.statements.len();
    html! {
        details.script data-direction=(direction.as_str()) data-verification=(state) {
            summary {
                strong class={ "verdict " (state) } { (verdict) }
                " · " (direction.as_str()) " (" (from) " → " (to) "): "
                @if count == 0 { "nothing to do" }
                @else { (count) " statement" @if count != 1 { "s" } }
                @if script.destructive > 0 { ", " span.destructive { (script.destructive) " destructive" } }
            }
            @match &script.verification {
                Verification::Verified => {
                    p.notice { "Verified: run in a scratch schema holding the " (from) ", it gave the " (to) " exactly." }
                }
                Verification::Failed { reason } => {
                    p.error role="alert" { strong { "NOT verified" } ": " (reason) ". Do not run it as is." }
                }
                Verification::Unverified { reason } => {
                    p.warning { strong { "Unverified" } ": " (reason) "." }
                }
            }
            @if !script.notes.is_empty() {
                ul.notes { @for note in &script.notes { li { "Note: " (note) } } }
            }
            @if let (Some((operation, database)), true) = (download, count > 0) {
                p { a href=(ddl_path(operation, database, direction)) { "The script as a file" }
                    span.note { " (for the mysql or mariadb client; destructive statements are left out unless "
                        code { "allow_destructive=true" } " is added)" } }
            }
            @if count > 0 {
                ol.statements {
                    @for statement in &script.statements {
                        @match &statement.destructive {
                            Some(reason) => {
                                li.destructive {
                                    p { strong { "destructive:" } " " (reason) }
                                    pre { code { (statement.sql) } }
                                }
                            }
                            None => { li { pre { code { (statement.sql) } } } }
                        }
                    }
                }
            }
        }
    }
}

/// A database's lint findings, or that there are none.
fn lint_table(findings: &[Finding]) -> Markup {
    html! {
        @if findings.is_empty() {
            p.note { "Lint: no findings." }
        } @else {
            div.scroll {
                table.lint {
                    caption.note { "Lint findings (" (findings.len()) ")" }
                    thead { tr { th { "Severity" } th { "Rule" } th { "Object" } th { "Message" } } }
                    tbody {
                        @for finding in findings {
                            tr data-severity=(finding.severity.id()) {
                                td { @if finding.severity == Severity::Error { strong.failed { (finding.severity.id()) } }
                                     @else { (finding.severity.id()) } }
                                td { code { (finding.rule.id()) } }
                                td { (finding.object) }
                                td { (finding.message) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Each file's path, how it changed and its unified diff, added and removed lines marked.
fn file_diffs(files: &[FileDiff]) -> Markup {
    html! {
        @for file in files {
            h3 { code { (file.path) } " " span.note { (file.change.as_str()) } }
            pre.diff { code {
                @for line in file.diff.lines() {
                    @if line.starts_with('+') && !line.starts_with("+++") { span.add { (line) } "\n" }
                    @else if line.starts_with('-') && !line.starts_with("---") { span.del { (line) } "\n" }
                    @else { (line) "\n" }
                }
            } }
        }
    }
}

fn lease_panel(page: &SchemaPage) -> Markup {
    html! {
        @match &page.lease {
            None => { p.note #lease-free { "No operation holds the lease." } }
            Some(lease) => {
                p #lease-holder {
                    "Held by " (lease.view.kind) " operation "
                    a href={ "/admin/schema/operations/" (lease.view.operation_id) } { code { (lease.view.operation_id) } }
                    " (" (lease.view.status) "), "
                    @if lease.expired { "expired " } @else { "expires " }
                    (time_text(&lease.view.expires_at, page.now)) "."
                }
                @if !lease.expired {
                    p.note { "A refresh or verification waits until this operation ends." }
                } @else if page.fresh {
                    form #clear-lease method="post" action="/admin/schema/lease/clear" {
                        input type="hidden" name="csrf" value=(page.csrf);
                        label for="clear-id" { "Type the exact operation ID to clear its expired lease" }
                        input #clear-id type="text" name="operation_id" required autocomplete="off" spellcheck="false";
                        div { button type="submit" { "Clear the expired lease" } }
                    }
                } @else {
                    p.note { "Clearing the expired lease needs your password again." }
                    form method="get" action="/reauth" {
                        input type="hidden" name="next" value="/admin/schema#lease";
                        button type="submit" #reauth-lease { "Confirm your password to clear" }
                    }
                }
            }
        }
    }
}

fn recent_table(recent: &[OperationSummary], now: UnixMillis) -> Markup {
    html! {
        div.scroll {
            table {
                thead { tr { th { "Operation" } th { "Kind" } th { "State" } th { "Started" } th { "Finished" } th { "Error" } } }
                tbody {
                    @for operation in recent {
                        tr {
                            td { a href={ "/admin/schema/operations/" (operation.id) } { code { (short(&operation.id)) "…" } } }
                            td { (operation.kind) }
                            td { (operation.state) }
                            td { (time_text(&operation.created_at, now)) }
                            td { @if let Some(finished) = &operation.finished_at { (time_text(finished, now)) } }
                            td { @if let Some(error) = &operation.error { (error.message) } }
                        }
                    }
                }
            }
        }
    }
}

fn schedule_panel(panel: &SchedulePanel, now: UnixMillis) -> Markup {
    html! {
        section #schedule aria-labelledby="schedule-title" {
            h2 #schedule-title { "Schedule and notifications" }
            @match &panel.next {
                Some((every, at)) => {
                    p #next-check { "Next scheduled check: " strong { (time(*at, now)) } " (" (every) ")." }
                }
                None => { p.note #next-check { "No scheduled checks: set " code { "[schema.schedule]" } " to have them." } }
            }
            @if panel.deliveries.is_empty() {
                p.note #no-notifications { "No notification sent lately." }
            } @else {
                div.scroll {
                    table #notifications {
                        thead { tr { th { "Event" } th { "Operation" } th { "Webhook" } th { "State" } th { "Tries" } th { "At" } th { "Error" } } }
                        tbody {
                            @for delivery in &panel.deliveries {
                                tr {
                                    td { code { (delivery.event) } }
                                    td { a href={ "/admin/schema/operations/" (delivery.operation_id) } { code { (short(&delivery.operation_id)) "…" } } }
                                    td { (delivery.webhook) }
                                    td { (delivery.state) }
                                    td { (delivery.attempts) }
                                    td { (time_text(&delivery.at, now)) }
                                    td { @if let Some(error) = &delivery.error { (error_line(error)) } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The report page of one operation, from its stored rows alone (readable after its workflow
/// run is purged).
pub(crate) fn report_page(operation: &OperationView, now: UnixMillis) -> Page {
    let body = html! {
        p { a href="/admin/schema" { "← Schema snapshots" } }
        h1 { "Operation report" }
        (operation_panel(operation, false, now))
        @if let Some(review) = &operation.review {
            h2 { "Review" }
            p { (review.state)
                @if let (Some(actor), Some(at)) = (&review.actor, &review.decided_at) { " by " code { (actor) } " " (time_text(at, now)) }
                "; window closed or closes " (time_text(&review.expires_at, now)) "." }
        }
        @if operation.summary.kind == "inventory" {
            @if let Some(inventory) = &operation.inventory {
                h2 { "Databases found" }
                ul { @for name in &inventory.databases { li { code { (name) } } } }
                @if !inventory.ignored.is_empty() {
                    h2 { "Databases ignored" }
                    p.note { "Visible to the snapshot account, left out by " code { "[schema] ignore_databases" } "." }
                    ul #ignored-databases { @for name in &inventory.ignored { li { code { (name) } } } }
                }
            }
        }
        @for database in &operation.databases {
            @if !database.differences.is_empty() {
                h2 { "Drift in " code { (database.name) } }
                ul { @for difference in &database.differences { li { (difference.change.as_str()) " " code { (difference.path) } } } }
            }
        }
    };
    admin_page("Operation report", body)
}

/// The drift a verification found: each drifted database's migration scripts and its files
/// with their unified diffs.
pub(crate) fn drift_page(drift: &DriftView, now: UnixMillis) -> Page {
    let body = html! {
        p { a href="/admin/schema" { "← Schema snapshots" } " · "
            a href={ "/admin/schema/operations/" (drift.operation_id) } { "Operation report" } }
        h1 { "Drift found by verification" }
        dl.facts {
            dt { "Operation" } dd { code #drift-operation { (drift.operation_id) } }
            @if let Some(commit) = &drift.base_commit { dt { "Compared with" } dd { code { (commit) } } }
            @if let Some(until) = &drift.kept_until { dt { "Kept" } dd { "until " (time_text(until, now)) } }
        }
        @if drift.databases.is_empty() { p.note #no-drift { "No database drifted." } }
        @for database in &drift.databases {
            section.drift {
                h2 { code { (database.database.as_str()) } ": " (database.files.len()) " file(s) differ" }
                (migration_panel(database.migration.as_ref(), "live schema",
                    Some((&drift.operation_id, database.database.as_str())), NO_DRIFT_SCRIPT))
                (file_diffs(&database.files))
            }
        }
    };
    admin_page("Drift", body)
}

/// The page shown when the page's data cannot be read.
pub(crate) fn unavailable_page(error: &ErrorView) -> Page {
    let body = html! {
        h1 { "Schema snapshots" }
        p.error role="alert" { (error.message) }
    };
    admin_page("Schema snapshots", body)
}

#[cfg(test)]
mod tests {
    //! Every state of the page rendered from fixed data, compared with its stored snapshot.

    use std::collections::BTreeMap;

    use fermata_schema::lint::Rule;
    use fermata_schema::migration::{Migration, Script, Statement};
    use fermata_schema::review::FileChange;
    use fermata_schema::snapshot::model::Flavor;
    use fermata_schema::view::{
        CheckView, DriftDatabaseView, MergedSnapshotView, ReviewDatabaseView, ReviewStateView,
        StepView as Step,
    };
    use fermata_schema::{DatabaseName, Subject};

    use super::*;

    const OPERATION: &str = "0b6f3c1e-5a2d-4c8e-9f10-2a3b4c5d6e7f";
    const OTHER: &str = "7d1e2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6";
    const INVENTORY: &str = "c3d4e5f6-a7b8-4c9d-8e0f-112233445566";
    /// The moment the pages are drawn for: 2026-01-02T03:30:00Z.
    const NOW: UnixMillis = UnixMillis(1_767_324_600_000);
    /// A moment after the operations that finish in these pages finished: 2026-01-02T04:30:00Z.
    const LATER: UnixMillis = UnixMillis(1_767_328_200_000);

    fn empty_page() -> SchemaPage {
        SchemaPage {
            user: "ada".to_owned(),
            csrf: "csrf-token".to_owned(),
            fresh: true,
            request_key: "request-key-1".to_owned(),
            setup: SchemaSetup {
                source: true,
                package: true,
                schedule: None,
            },
            flash: None,
            inventory: None,
            registry_error: None,
            lease: None,
            current: None,
            review: None,
            open_pull: None,
            recent: Vec::new(),
            schedule: SchedulePanel::default(),
            now: NOW,
        }
    }

    fn summary(id: &str, kind: &'static str, state: &'static str) -> OperationSummary {
        OperationSummary {
            id: id.to_owned(),
            kind,
            state,
            terminal: matches!(state, "succeeded" | "failed" | "rejected" | "expired"),
            actor: "user-1".to_owned(),
            inventory_id: None,
            run_id: None,
            created_at: "2026-01-02T03:04:05.000Z".to_owned(),
            updated_at: "2026-01-02T03:04:06.000Z".to_owned(),
            finished_at: None,
            error: None,
            reviewed_base_commit: None,
            pull_request: None,
        }
    }

    fn registered(name: &str) -> RegisteredDatabaseView {
        RegisteredDatabaseView {
            name: name.to_owned(),
            merged: MergedSnapshotView {
                snapshot_hash: "sha256-0123456789abcdef".to_owned(),
                object_counts: BTreeMap::from([("tables".to_owned(), 3)]),
                generator_version: "fermata 0.1.0".to_owned(),
                operation_id: OTHER.to_owned(),
            },
            freshness: "fresh",
            last_verification: Some(CheckView {
                operation_id: OTHER.to_owned(),
                kind: "verification",
                finished_at: Some("2026-01-01T00:00:00.000Z".to_owned()),
                outcome: Some("unchanged"),
                freshness: Some("fresh"),
                snapshot_hash: Some("sha256-0123456789abcdef".to_owned()),
            }),
            checked: None,
        }
    }

    fn inventory(expired: bool) -> InventoryPanel {
        InventoryPanel {
            view: InventoryView {
                id: INVENTORY.to_owned(),
                operation_id: OTHER.to_owned(),
                actor: "user-1".to_owned(),
                server_version: "11.4.2-MariaDB".to_owned(),
                discovered_at: "2026-01-02T03:00:00.000Z".to_owned(),
                expires_at: "2026-01-03T03:00:00.000Z".to_owned(),
                databases: vec!["app".to_owned(), "billing <&>".to_owned(), "crm".to_owned()],
                ignored: vec!["scratch <1>".to_owned()],
            },
            expired,
            rows: vec![
                InventoryRow {
                    name: "app".to_owned(),
                    registered: Some(registered("app")),
                },
                InventoryRow {
                    name: "billing <&>".to_owned(),
                    registered: None,
                },
                InventoryRow {
                    name: "crm".to_owned(),
                    registered: Some(drifted("crm")),
                },
            ],
            missing: vec![RegisteredDatabaseView {
                freshness: "missing",
                ..registered("legacy")
            }],
        }
    }

    /// A registered database its last verification found drifted.
    fn drifted(name: &str) -> RegisteredDatabaseView {
        let mut view = registered(name);
        view.freshness = "stale";
        if let Some(check) = view.last_verification.as_mut() {
            check.outcome = Some("changed");
            check.freshness = Some("stale");
        }
        view
    }

    fn database(name: &str, state: &'static str, error: Option<&SafeError>) -> DatabaseView {
        DatabaseView {
            name: name.to_owned(),
            state,
            outcome: (state == "done").then_some(if error.is_some() {
                "failed"
            } else {
                "changed"
            }),
            freshness: (state == "done").then_some("stale"),
            object_counts: BTreeMap::from([("tables".to_owned(), 4), ("views".to_owned(), 1)]),
            snapshot_hash: None,
            merged_hash: None,
            differences: Vec::new(),
            started_at: None,
            finished_at: None,
            error: error.map(ErrorView::from),
        }
    }

    fn lease(expired: bool) -> LeasePanel {
        LeasePanel {
            view: LeaseView {
                operation_id: OPERATION.to_owned(),
                kind: "refresh",
                status: "active",
                acquired_at: "2026-01-02T03:04:05.000Z".to_owned(),
                heartbeat_at: "2026-01-02T03:05:05.000Z".to_owned(),
                expires_at: "2026-01-02T03:35:05.000Z".to_owned(),
            },
            expired,
        }
    }

    fn running_refresh() -> OperationView {
        OperationView {
            summary: summary(OPERATION, "refresh", "running"),
            databases: vec![
                database("app", "done", None),
                database("billing <&>", "running", None),
            ],
            inventory: None,
            lease: Some(lease(false).view),
            steps: vec![Step {
                key: "database:app".to_owned(),
                state: "retrying",
                attempts: 2,
                started_at: "2026-01-02T03:04:05.000Z".to_owned(),
                heartbeat_at: "2026-01-02T03:04:07.000Z".to_owned(),
                finished_at: None,
                error: Some(ErrorView::from(&SafeError::new(
                    ErrorCode::StorageUnavailable,
                ))),
            }],
            actor_name: Some("ada".to_owned()),
            review: None,
        }
    }

    fn review() -> ReviewPanel {
        ReviewPanel::Diff(ReviewView {
            operation_id: OPERATION.to_owned(),
            base_commit: "abc123".to_owned(),
            review: ReviewStateView {
                state: "pending",
                actor: None,
                decided_at: None,
                created_at: "2026-01-02T03:10:00.000Z".to_owned(),
                expires_at: "2026-01-03T03:10:00.000Z".to_owned(),
            },
            databases: vec![ReviewDatabaseView {
                database: DatabaseName::new("app").unwrap(),
                registered: true,
                removed: false,
                migration: Some(migration(
                    "app",
                    Verification::Unverified {
                        reason: "no verification workspace is configured ([schema.workspace])"
                            .to_owned(),
                    },
                )),
                lint: Some(vec![
                    Finding {
                        rule: Rule::ZeroDateDefault,
                        severity: Severity::Error,
                        object: "column `users`.`born <&>`".to_owned(),
                        message: "The default is a zero date: give a real date.".to_owned(),
                    },
                    Finding {
                        rule: Rule::NoPrimaryKey,
                        severity: Severity::Warning,
                        object: "table `users`".to_owned(),
                        message: "The table has no primary key: add one.".to_owned(),
                    },
                ]),
                files: vec![FileDiff {
                    path: "tables/users.sql".to_owned(),
                    change: FileChange::Modified,
                    diff: "--- a/tables/users.sql\n+++ b/tables/users.sql\n@@ -1,2 +1,3 @@\n CREATE TABLE users (\n-  id int\n+  id int,\n+  name text\n".to_owned(),
                }],
            }],
        })
    }

    /// Both scripts of `database`: the undo one verified (or as `undo` says), one of its
    /// statements destructive, with a note; the adopt one said `adopt`.
    fn migration(database: &str, adopt: Verification) -> MigrationView {
        let statement = |sql: &str, destructive: Option<&str>| Statement {
            sql: sql.to_owned(),
            destructive: destructive.map(str::to_owned),
            definer_clause: None,
            compound: false,
        };
        let script = |direction, statements, verification| {
            Script {
            direction,
            flavor: Flavor::Mariadb,
            statements,
            notes: vec!["column `name` is dropped beside `born <&>`, which is added: a rename is never guessed".to_owned()],
            verification,
        }
        };
        MigrationView::new(
            database,
            &Migration {
                undo: script(
                    Direction::Undo,
                    vec![
                        statement(
                            "ALTER TABLE `users`\n  DROP COLUMN `name`",
                            Some("drops column `name` and its values"),
                        ),
                        statement(
                            "ALTER TABLE `users`\n  ADD COLUMN `born <&>` date DEFAULT '0000-00-00'",
                            None,
                        ),
                    ],
                    Verification::Verified,
                ),
                adopt: script(
                    Direction::Adopt,
                    vec![statement(
                        "ALTER TABLE `users`\n  ADD COLUMN `name` text",
                        None,
                    )],
                    adopt,
                ),
            },
        )
    }

    fn check(name: &str, page: &Page) {
        insta::assert_snapshot!(name, page.snapshot().replace("><", ">\n<"));
    }

    #[test]
    fn nothing_configured_and_no_inventory() {
        let page = SchemaPage {
            setup: SchemaSetup::default(),
            ..empty_page()
        };
        check("nothing_configured", &schema_page(&page));
    }

    #[test]
    fn an_inventory_to_select_from_with_an_empty_selection_refused() {
        let page = SchemaPage {
            inventory: Some(inventory(false)),
            flash: Some(Flash::Error(
                Place::Start,
                ErrorView::from(&SafeError::new(ErrorCode::EmptySelection)),
            )),
            ..empty_page()
        };
        check("inventory_selection_refused", &schema_page(&page));
    }

    #[test]
    fn an_expired_inventory() {
        let page = SchemaPage {
            inventory: Some(inventory(true)),
            // 2026-01-03T05:00:00Z, after the inventory expired.
            now: UnixMillis(1_767_416_400_000),
            ..empty_page()
        };
        check("inventory_expired", &schema_page(&page));
    }

    #[test]
    fn a_running_refresh_holding_the_lease() {
        let page = SchemaPage {
            inventory: Some(inventory(false)),
            flash: Some(Flash::Notice(Place::Start, Notice::RefreshStarted)),
            lease: Some(lease(false)),
            current: Some(running_refresh()),
            recent: vec![summary(OPERATION, "refresh", "running")],
            ..empty_page()
        };
        check("refresh_running", &schema_page(&page));
    }

    #[test]
    fn a_review_on_a_fresh_and_on_a_stale_session() {
        let mut awaiting = running_refresh();
        awaiting.summary.state = "awaiting_review";
        let page = SchemaPage {
            current: Some(awaiting),
            review: Some(review()),
            lease: Some(lease(false)),
            ..empty_page()
        };
        check("review_fresh", &schema_page(&page));
        let stale = SchemaPage {
            fresh: false,
            ..page
        };
        check("review_stale", &schema_page(&stale));
    }

    #[test]
    fn an_expired_lease_with_a_wrong_id_refused() {
        let page = SchemaPage {
            lease: Some(lease(true)),
            flash: Some(Flash::Error(
                Place::Lease,
                ErrorView::from(&SafeError::new(ErrorCode::OperationMissing)),
            )),
            // 2026-01-02T03:40:00Z, after the lease expired.
            now: UnixMillis(1_767_325_200_000),
            ..empty_page()
        };
        check("lease_expired", &schema_page(&page));
    }

    #[test]
    fn an_open_pull_request_and_recent_operations() {
        let pull = PullRequest {
            number: 7,
            url: "https://forge.example/pulls/7".to_owned(),
            head: "fermata/refresh-1".to_owned(),
            base: "main".to_owned(),
        };
        let mut published = summary(OPERATION, "refresh", "succeeded");
        published.pull_request = Some(pull.clone());
        published.finished_at = Some("2026-01-02T04:00:00.000Z".to_owned());
        let mut failed = summary(OTHER, "verification", "failed");
        failed.error = Some(ErrorView::from(&SafeError::about(
            ErrorCode::LeaseHeld,
            Subject::Operation(OPERATION.parse().unwrap()),
        )));
        let page = SchemaPage {
            open_pull: Some((OPERATION.to_owned(), pull)),
            flash: Some(Flash::Notice(Place::Review, Notice::Approved)),
            recent: vec![published, failed],
            now: LATER,
            ..empty_page()
        };
        check("pull_request_open", &schema_page(&page));
    }

    #[test]
    fn the_next_scheduled_check_and_the_latest_notifications() {
        let page = SchemaPage {
            schedule: SchedulePanel {
                next: Some((
                    "daily at 03:30 UTC".to_owned(),
                    UnixMillis(1_767_411_000_000),
                )),
                deliveries: vec![
                    DeliveryRow {
                        event: "verification.drift".to_owned(),
                        operation_id: OPERATION.to_owned(),
                        webhook: 1,
                        state: "succeeded",
                        attempts: 2,
                        at: "2026-01-02T03:31:00.000Z".to_owned(),
                        error: None,
                    },
                    DeliveryRow {
                        event: "operation.failed".to_owned(),
                        operation_id: OTHER.to_owned(),
                        webhook: 2,
                        state: "failed",
                        attempts: 1,
                        at: "2026-01-02T03:30:10.000Z".to_owned(),
                        error: Some(ErrorView::from(&SafeError::new(
                            ErrorCode::NotificationRefused,
                        ))),
                    },
                ],
            },
            ..empty_page()
        };
        check("schedule_and_notifications", &schema_page(&page));
    }

    #[test]
    fn a_held_publication_with_its_open_pull_request_on_a_fresh_and_a_stale_session() {
        let mut held = running_refresh();
        held.summary.state = "publishing";
        held.lease = None;
        held.summary.error = Some(ErrorView::from(&SafeError::new(
            ErrorCode::GithubRateLimited,
        )));
        let pull = PullRequest {
            number: 3,
            url: "https://forge.example/pulls/3".to_owned(),
            head: "fermata/refresh-2".to_owned(),
            base: "main".to_owned(),
        };
        let page = SchemaPage {
            current: Some(held),
            open_pull: Some((OTHER.to_owned(), pull)),
            flash: Some(Flash::Error(
                Place::Publication,
                ErrorView::from(&SafeError::about(
                    ErrorCode::NothingToPublish,
                    Subject::Operation(OTHER.parse().unwrap()),
                )),
            )),
            ..empty_page()
        };
        check("publication_held_fresh", &schema_page(&page));
        let stale = SchemaPage {
            fresh: false,
            flash: None,
            ..page
        };
        check("publication_held_stale", &schema_page(&stale));
    }

    #[test]
    fn a_verification_that_found_drift_and_its_drift_page() {
        let mut verified = running_refresh();
        verified.summary = summary(OPERATION, "verification", "succeeded");
        verified.lease = None;
        check("verification_drifted", &report_page(&verified, NOW));
        let drift = DriftView {
            operation_id: OPERATION.to_owned(),
            base_commit: Some("abc123".to_owned()),
            kept_until: Some("2026-02-01T03:04:05.000Z".to_owned()),
            databases: vec![DriftDatabaseView {
                database: DatabaseName::new("app <&>").unwrap(),
                migration: Some(migration(
                    "app <&>",
                    Verification::Failed {
                        reason: "the workspace refused statement 1 of 1 with error 1064".to_owned(),
                    },
                )),
                files: vec![FileDiff {
                    path: "tables/users.sql".to_owned(),
                    change: FileChange::Modified,
                    diff: "--- a/tables/users.sql\n+++ b/tables/users.sql\n@@ -1,2 +1,3 @@\n CREATE TABLE users (\n-  id int\n+  id int,\n+  name text\n".to_owned(),
                }],
            }],
        };
        check("drift", &drift_page(&drift, NOW));
    }

    #[test]
    fn a_failed_operations_report() {
        let mut done = running_refresh();
        done.summary.state = "failed";
        done.summary.terminal = true;
        done.summary.finished_at = Some("2026-01-02T04:00:00.000Z".to_owned());
        done.summary.error = Some(ErrorView::from(&SafeError::new(ErrorCode::LeaseCleared)));
        done.lease = None;
        done.databases[1] = database(
            "billing <&>",
            "done",
            Some(&SafeError::new(ErrorCode::SourceNotConfigured)),
        );
        check("report", &report_page(&done, LATER));
    }
}
