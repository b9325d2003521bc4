//! The integration tests of `fermata-store-testkit`, as one test binary: one module per subject, the
//! shared helpers beside them. One binary links once, where a binary per file linked each.

mod contract_memory;
mod unreliable;
