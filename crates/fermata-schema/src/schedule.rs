//! Scheduled drift checks (`[schema.schedule]`): when they are due ([`Schedule`]) and the
//! workflow that runs one due check ([`ScheduleWorkflow`]).
//!
//! Each due time is one durable workflow run whose ID is derived from the due time
//! (`schema-schedule-<milliseconds>`), so a due check is started once however many processes
//! or restarts ask for it. The run:
//!
//! 1. waits until its due time on the database's clock (a hook wait with that timeout: durable,
//!    so a restart resumes it, and a run whose time passed while no process served runs as soon
//!    as one does);
//! 2. `next`: starts the run of the first due time after now, so the chain goes on whatever
//!    becomes of this check; due times missed while no process served make one check, not many;
//! 3. `inventory`: requests an ordinary inventory operation as the schedule's actor, under a
//!    request key derived from the due time, and waits (durably again) for it to end;
//! 4. `verification`: requests an ordinary verification of every database the package registers
//!    that the fresh inventory still lists, under its own key derived from the due time. It
//!    takes the lease, reports and fails like any other.
//!
//! A run whose due time is not one of the current schedule's (the setting changed, or went away,
//! while it waited) ends without checking anything. A serving process calls
//! [`ScheduleWorkflow::ensure`] when it starts: it starts the run of the next due time, which
//! begins the chain, or restores one whose run failed.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fermata_schema_core::{ErrorCode, SafeError, Subject};
use fermata_store::schema::{OperationId, OperationKind, OperationState, RequestKey};
use fermata_store::{RunId, Storage, UnixMillis};
use fermata_workflow::{Engine, RunContext, RunError, Workflow, start_once};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::admin::Administrator;
use crate::operations::{OperationRequest, Operations};
use crate::package::Package;
use crate::safe_context::{SafeCode, SafeContext};
use crate::step_failure::{run_failed, step_error};

/// The name the schedule's runs are started under.
pub const SCHEDULE_WORKFLOW: &str = "schema-schedule";
/// The actor of the operations the schedule requests: no user has it as an ID (user IDs are
/// UUIDs), so no person can act under it.
pub const SCHEDULE_ACTOR: &str = "schedule";
/// How often a scheduled check looks whether its inventory has ended.
const INVENTORY_POLL: Duration = Duration::from_secs(2);
/// How many times it looks before it gives up (ten minutes).
const INVENTORY_POLLS: u32 = 300;
const DAY_MILLIS: i64 = 24 * 60 * 60 * 1000;

/// When scheduled checks are due, in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// Every day at this many minutes after midnight UTC.
    Daily { minute_of_day: u32 },
    /// At every multiple of this period since the Unix epoch: for whole hours that divide a
    /// day, midnight UTC and every period after it.
    Every { period: Duration },
}

impl Schedule {
    /// Daily at `hour:minute` UTC; `None` outside 00:00 to 23:59.
    pub fn daily(hour: u32, minute: u32) -> Option<Self> {
        (hour < 24 && minute < 60).then_some(Schedule::Daily {
            minute_of_day: hour * 60 + minute,
        })
    }

    fn period_millis(self) -> i64 {
        match self {
            Schedule::Daily { .. } => DAY_MILLIS,
            Schedule::Every { period } => {
                i64::try_from(period.as_millis()).unwrap_or(i64::MAX).max(1)
            }
        }
    }

    fn offset_millis(self) -> i64 {
        match self {
            Schedule::Daily { minute_of_day } => i64::from(minute_of_day) * 60_000,
            Schedule::Every { .. } => 0,
        }
    }

    /// The first due time strictly after `now`.
    pub fn next_after(self, now: UnixMillis) -> UnixMillis {
        let (period, offset) = (self.period_millis(), self.offset_millis());
        let cycles = (now.0 - offset).div_euclid(period).saturating_add(1);
        UnixMillis(cycles.saturating_mul(period).saturating_add(offset))
    }

    /// Whether `at` is one of this schedule's due times.
    pub fn is_due_time(self, at: UnixMillis) -> bool {
        (at.0 - self.offset_millis()).rem_euclid(self.period_millis()) == 0
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Schedule::Daily { minute_of_day } => write!(
                f,
                "daily at {:02}:{:02} UTC",
                minute_of_day / 60,
                minute_of_day % 60
            ),
            Schedule::Every { period } if period.as_secs() % 3600 == 0 => {
                write!(f, "every {} hours", period.as_secs() / 3600)
            }
            Schedule::Every { period } => write!(f, "every {} seconds", period.as_secs()),
        }
    }
}

/// What a scheduled run is started with: its due time.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DueInput {
    due: i64,
}

/// What a scheduled check did, as its run's output.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Checked {
    due: i64,
    inventory: Option<OperationId>,
    verification: Option<OperationId>,
}

/// The run of the check due at `due`.
pub fn schedule_run_id(due: UnixMillis) -> RunId {
    RunId(format!("{SCHEDULE_WORKFLOW}-{}", due.0))
}

/// The schedule workflow: one due check per run. Cheap to clone.
#[derive(Clone)]
pub struct ScheduleWorkflow {
    storage: Arc<dyn Storage>,
    /// Requests the check's operations.
    operations: Operations,
    /// `None` when `[schema.schedule]` is not set: every run still waiting ends unchecked.
    schedule: Option<Schedule>,
    /// Says which databases are registered.
    package: Option<Package>,
}

impl fmt::Debug for ScheduleWorkflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScheduleWorkflow")
            .field("schedule", &self.schedule)
            .finish_non_exhaustive()
    }
}

impl ScheduleWorkflow {
    pub fn new(
        storage: Arc<dyn Storage>,
        operations: Operations,
        schedule: Option<Schedule>,
        package: Option<Package>,
    ) -> Self {
        ScheduleWorkflow {
            storage,
            operations,
            schedule,
            package,
        }
    }

    pub fn schedule(&self) -> Option<Schedule> {
        self.schedule
    }

    /// The next due time after now on the database's clock; `None` without a schedule.
    pub async fn next_due(&self) -> Result<Option<UnixMillis>, SafeError> {
        let Some(schedule) = self.schedule else {
            return Ok(None);
        };
        Ok(Some(schedule.next_after(self.operations.now().await?)))
    }

    /// Starts the run of the next due time on `engine` (which has this workflow registered),
    /// unless it exists; returns that due time, `None` without a schedule.
    pub async fn ensure(&self, engine: &Engine) -> Result<Option<UnixMillis>, SafeError> {
        let Some(due) = self.next_due().await? else {
            return Ok(None);
        };
        start_due(engine, due).await?;
        Ok(Some(due))
    }

    async fn execute(&self, ctx: &mut RunContext, due: UnixMillis) -> Result<Value, RunError> {
        let now = self.operations.now().await.map_err(run_failed)?;
        if due > now && ctx.hook_within("due", due.since(now)).await?.is_some() {
            tracing::info!(due = %due, "a scheduled check was woken before its time");
        }
        let Some(schedule) = self.schedule.filter(|schedule| schedule.is_due_time(due)) else {
            tracing::info!(due = %due, "a scheduled check is no longer in the schedule; it ends unchecked");
            return Ok(serde_json::json!({ "due": due.0, "skipped": true }));
        };
        let next: i64 = ctx
            .step("next", |_| async move {
                let now = self.operations.now().await.map_err(step_error)?;
                let next = schedule.next_after(now.max(due));
                Ok(next.0)
            })
            .await?;
        let next = UnixMillis(next);
        let input = serde_json::json!(DueInput { due: next.0 });
        start_once(
            &*self.storage,
            SCHEDULE_WORKFLOW,
            &schedule_run_id(next),
            &input,
        )
        .await
        .map_err(RunError::Lost)?;
        tracing::info!(due = %due, next = %next, "scheduled check due");
        let inventory: OperationId = ctx
            .step("inventory", |_| async move {
                self.request(due, OperationKind::Inventory, None)
                    .await
                    .map_err(step_error)
            })
            .await?;
        self.wait_for(ctx, inventory).await?;
        let verification: Option<OperationId> = ctx
            .step("verification", |_| async move {
                self.verify(due, inventory).await.map_err(step_error)
            })
            .await?;
        let checked = Checked {
            due: due.0,
            inventory: Some(inventory),
            verification,
        };
        serde_json::to_value(&checked)
            .or_code(
                ErrorCode::RunUnreadable,
                "write the scheduled check's output",
            )
            .map_err(run_failed)
    }

    /// Waits, in durable waits of [`INVENTORY_POLL`], until the operation has ended; fails with
    /// its error when it did not succeed.
    async fn wait_for(&self, ctx: &mut RunContext, id: OperationId) -> Result<(), RunError> {
        for poll in 0..INVENTORY_POLLS {
            let operation = self
                .storage
                .schema()
                .operation(id)
                .await
                .context("load the operation")
                .map_err(run_failed)?
                .ok_or_else(|| {
                    run_failed(SafeError::about(
                        ErrorCode::OperationMissing,
                        Subject::Operation(id.0),
                    ))
                })?;
            match operation.state {
                OperationState::Succeeded => return Ok(()),
                state if state.is_terminal() => {
                    return Err(run_failed(
                        operation
                            .error
                            .unwrap_or_else(|| SafeError::new(ErrorCode::RunLost)),
                    ));
                }
                _ => {
                    ctx.hook_within(&format!("inventory-{poll}"), INVENTORY_POLL)
                        .await?;
                }
            }
        }
        Err(run_failed(SafeError::new(ErrorCode::StepTimedOut)))
    }

    /// Requests the verification of every registered database the inventory of operation
    /// `inventory` lists; `None` when there is none.
    async fn verify(
        &self,
        due: UnixMillis,
        inventory: OperationId,
    ) -> Result<Option<OperationId>, SafeError> {
        let found = self
            .storage
            .schema()
            .inventory_of_operation(inventory)
            .await
            .context("load the operation's inventory")?
            .ok_or_else(|| SafeError::new(ErrorCode::InventoryMissing))?;
        let package = self
            .package
            .as_ref()
            .ok_or_else(|| SafeError::new(ErrorCode::PackageNotConfigured))?;
        let registry = package.base_snapshot().await?.registry;
        let databases: Vec<String> = found
            .databases
            .iter()
            .filter(|database| registry.get(database).is_some())
            .map(|database| database.as_str().to_owned())
            .collect();
        if databases.is_empty() {
            tracing::info!(due = %due, "no registered database is visible; the scheduled check verifies nothing");
            return Ok(None);
        }
        let kind = OperationKind::Verification;
        self.request(due, kind, Some((found.id, databases)))
            .await
            .map(Some)
    }

    /// Requests an operation of `kind` for the check due at `due` (over a selection of an
    /// inventory, unless an inventory), or returns the one an earlier attempt requested.
    async fn request(
        &self,
        due: UnixMillis,
        kind: OperationKind,
        selection: Option<(fermata_store::schema::InventoryId, Vec<String>)>,
    ) -> Result<OperationId, SafeError> {
        let admin = Administrator::schedule();
        let key = RequestKey::new(format!("{SCHEDULE_WORKFLOW}-{}-{}", due.0, kind.as_str()))
            .or_code(ErrorCode::InvalidRequestKey, "derive the request key")?;
        if let Some(existing) = self
            .storage
            .schema()
            .operation_by_request(admin.user(), &key)
            .await
            .context("load the operation")?
        {
            return Ok(existing.id);
        }
        let (inventory, databases) = selection.unzip();
        let request = OperationRequest {
            kind,
            request_key: key,
            inventory,
            databases: databases.unwrap_or_default(),
            remove_missing: false,
        };
        let operation = self.operations.request(&admin, &request).await?;
        tracing::info!(operation = %operation.id, kind = kind.as_str(), due = %due, "scheduled operation requested");
        Ok(operation.id)
    }
}

/// Starts the run of the check due at `due`, unless it exists.
async fn start_due(engine: &Engine, due: UnixMillis) -> Result<(), SafeError> {
    let input = serde_json::json!(DueInput { due: due.0 });
    engine
        .start_once(SCHEDULE_WORKFLOW, &schedule_run_id(due), &input)
        .await
        .context("start the scheduled check")?;
    Ok(())
}

#[async_trait]
impl Workflow for ScheduleWorkflow {
    fn name(&self) -> &'static str {
        SCHEDULE_WORKFLOW
    }

    async fn run(&self, ctx: &mut RunContext, input: Value) -> Result<Value, RunError> {
        let input: DueInput = serde_json::from_value(input)
            .or_code(ErrorCode::StartFailed, "read the run's input")
            .map_err(run_failed)?;
        self.execute(ctx, UnixMillis(input.due)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-01T00:00:00Z.
    const MIDNIGHT: i64 = 1_796_083_200_000;

    #[test]
    fn a_daily_check_is_due_at_its_minute_each_day() {
        let three = Schedule::daily(3, 30).unwrap();
        let at = |minutes: i64| UnixMillis(MIDNIGHT + minutes * 60_000);
        assert_eq!(three.next_after(at(0)), at(210));
        assert_eq!(three.next_after(at(209)), at(210));
        assert_eq!(three.next_after(at(210)), at(210 + 24 * 60));
        assert!(three.is_due_time(at(210)));
        assert!(!three.is_due_time(at(211)));
        assert_eq!(three.to_string(), "daily at 03:30 UTC");
        assert_eq!(Schedule::daily(24, 0), None);
        assert_eq!(Schedule::daily(23, 60), None);
    }

    #[test]
    fn a_periodic_check_is_due_at_multiples_of_its_period() {
        let six = Schedule::Every {
            period: Duration::from_secs(6 * 3600),
        };
        let at = |hours: i64| UnixMillis(MIDNIGHT + hours * 3_600_000);
        assert_eq!(six.next_after(at(0)), at(6));
        assert_eq!(six.next_after(UnixMillis(at(5).0 + 1)), at(6));
        assert_eq!(six.next_after(at(6)), at(12));
        assert!(six.is_due_time(at(18)));
        assert!(!six.is_due_time(at(19)));
        assert_eq!(six.to_string(), "every 6 hours");
    }

    #[test]
    fn the_run_of_a_due_time_is_named_by_it() {
        assert_eq!(
            schedule_run_id(UnixMillis(MIDNIGHT)).0,
            "schema-schedule-1796083200000"
        );
    }
}
