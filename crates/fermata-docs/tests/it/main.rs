//! The integration tests of `fermata-docs`, as one test binary: one module per subject, the
//! shared helpers beside them. One binary links once, where a binary per file linked each.

mod long_journal;
mod recovery_replay;
mod store_history;
mod stored_corruption;
