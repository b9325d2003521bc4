//! The integration tests of `fermata-collab`, as one test binary: one module per subject, the
//! shared helpers beside them. One binary links once, where a binary per file linked each.

mod background;
mod history;
mod rooms;
mod startup;
mod storage_faults;
