//! The integration tests of `fermata-forge`, as one test binary: one module per subject, the
//! shared helpers beside them. One binary links once, where a binary per file linked each.

mod fake_github;

mod github;
mod local;
