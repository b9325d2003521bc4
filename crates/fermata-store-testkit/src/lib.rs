//! The storage port's test kit: the memory adapter and the contract suite.
//!
//! Every adapter of [`fermata_store`] runs the same contract suite: an adapter's tests provide a
//! [`contract::Harness`] and expand [`contract_suite!`] with it. The memory adapter
//! ([`memory::MemoryStorage`]) implements every store in process memory for unit and contract
//! tests. [`unreliable::UnreliableStorage`] wraps any adapter and fails the calls a test chooses,
//! for tests of what the serving process does when storage fails. [`eventually`] is the one way
//! every crate's tests wait for a condition; [`fixtures`] holds the values tests build again and
//! again. This crate is only ever a dev-dependency, so no release build compiles any of them.

pub mod contract;
mod eventually;
pub mod fixtures;
pub mod memory;
pub mod unreliable;

pub use eventually::{
    PATIENCE, eventually, eventually_some, eventually_some_within, eventually_within,
};
