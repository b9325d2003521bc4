//! Schema snapshots over a MySQL or MariaDB server: how Fermata connects to the source as the
//! snapshot account ([`source`]), which databases that account can see ([`inventory`]), who may
//! run operations ([`admin`]), how a selection is checked against its inventory
//! ([`selection`]), how operations are started, read and cleared ([`operations`]) and run as
//! durable workflows ([`engine`], [`inventory_run`], [`refresh_run`], [`verification_run`]), how
//! their candidates are sealed for review ([`artifact`]) and reviewed ([`review`]), what a
//! verification found drifted ([`drift`]), when drift checks run by themselves ([`schedule`]),
//! which events are posted to webhooks ([`notify`]), what the
//! registry says of each registered database ([`registry_view`]), and how they are shown
//! ([`view`]). What the snapshot account may read is checked by [`source_check`].
//! A database's schema becomes its canonical snapshot files in [`snapshot`]. The package of
//! merged snapshots in the target git repository is read by [`package`], with file names from
//! [`names`].
//! Every failure leaves this crate as a [`SafeError`]: driver text, SQL, the password and the
//! address never do.

pub mod admin;
pub mod artifact;
mod database_run;
pub mod drift;
pub mod engine;
pub mod filter;
pub mod inventory;
pub mod inventory_run;
pub mod lint;
pub mod migration;
pub mod names;
pub mod notify;
pub mod operations;
pub mod package;
mod pool;
pub mod publication;
pub mod refresh_run;
pub mod registry_view;
pub mod review;
mod safe_context;
pub mod schedule;
pub mod selection;
pub mod snapshot;
pub mod source;
pub mod source_check;
mod step_failure;
#[cfg(test)]
mod test_models;
mod tracked;
pub mod verification_run;
pub mod view;
mod wildcard;

pub use admin::Administrator;
pub use drift::DriftDiffs;
pub use engine::{EngineWorkflows, workflow_name};
pub use fermata_schema_core::{
    DatabaseName, ErrorCode, ErrorStage, ObjectKind, ObjectSubject, Reason, SafeError, Subject,
};
pub use filter::Filter;
pub use inventory::{Discovery, SYSTEM_DATABASES, discover};
pub use inventory_run::InventoryWorkflow;
pub use notify::{Notifier, NotifySettings, NotifyWorkflow};
pub use operations::{
    OperationReport, OperationRequest, Operations, StartFailure, Workflows, begin_run,
};
pub use refresh_run::{RefreshSettings, RefreshWorkflow};
pub use registry_view::RegistryReports;
pub use review::{Reviews, Verdict};
pub use schedule::{Schedule, ScheduleWorkflow};
pub use source::{SourceSettings, TlsMode};
pub use source_check::{SourceCheck, check_source};
pub use verification_run::{VerificationSettings, VerificationWorkflow};
