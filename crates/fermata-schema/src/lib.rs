//! Schema snapshots over a MySQL or MariaDB server: how Fermata connects to the source as the
//! snapshot account ([`source`]), which databases that account can see ([`inventory`]), who may
//! run operations ([`admin`]), how a selection is checked against its inventory
//! ([`selection`]), how operations are started, read and cleared ([`operations`]) and run as durable workflows
//! ([`engine`], [`inventory_run`]), and how they are shown ([`view`]).
//! Every failure leaves this crate as a [`SafeError`](fermata_store::schema::SafeError): driver
//! text, SQL, the password and the address never do.

pub mod admin;
pub mod engine;
pub mod inventory;
pub mod inventory_run;
pub mod operations;
pub mod selection;
pub mod source;
mod tracked;
pub mod view;

pub use admin::Administrator;
pub use engine::{EngineWorkflows, workflow_name};
pub use inventory::{Discovery, SYSTEM_DATABASES, discover};
pub use inventory_run::InventoryWorkflow;
pub use operations::{
    OperationReport, OperationRequest, Operations, StartFailure, Workflows, begin_run,
};
pub use source::{SourceSettings, TlsMode};
