//! Durable workflow runs on the store port: a small engine in the manner of a hosted durable
//! workflow service.
//!
//! A [`Workflow`] is registered with an [`Engine`] under a stable name; [`Engine::start`] creates
//! a run with a new ID, and [`Worker`]s claim runs and execute them. Execution is replay: each
//! time a worker claims a run, the workflow starts again from the top, and every step that
//! completed before returns its journaled output without running again ([`RunContext::step`]).
//! A step fails with a [`StepError`] (a stable code and whether it is retryable) and is retried
//! on transient errors by a fixed schedule ([`retry_delay`]); a run may wait
//! for a hook delivered from outside ([`RunContext::hook`]), or sleep durably
//! ([`RunContext::sleep`]). A worker holds a claim on the run it
//! executes and heartbeats it; a worker that dies mid-run leaves a claim that expires, another
//! worker resumes the run from its journal, and the dead worker, should it come back, is fenced
//! out of every write.
//!
//! Nothing here knows SQL: runs, steps and hooks live behind
//! [`WorkflowStore`](fermata_store::WorkflowStore).

mod context;
mod engine;
mod retry;
mod step_error;
mod worker;

pub use context::{Attempt, RunContext, RunError};
pub use engine::{Engine, Workflow, start_once};
pub use retry::{RetryPause, TimerPause, retry_delay};
pub use step_error::StepError;
pub use worker::{Execution, ExecutionEnd, Worker, WorkerSettings};
