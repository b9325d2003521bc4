//! Paired machines: found by the hash of their token, holding their own encrypted credentials,
//! re-authorized with a new token, revoked only by their owner (which discards the credentials).

use std::fmt;

use async_trait::async_trait;

use crate::error::{StoreError, StoreResult};
use crate::session::SecretHash;
use crate::time::UnixMillis;
use crate::user::UserId;

/// A machine's stable ID (a UUID), which its encrypted credentials are bound to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MachineId(pub String);

impl fmt::Display for MachineId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A machine to pair.
#[derive(Debug, Clone)]
pub struct NewMachine {
    pub id: MachineId,
    pub owner: UserId,
    pub name: String,
    pub secret_hash: SecretHash,
}

/// A paired machine as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    pub id: MachineId,
    pub owner: UserId,
    pub name: String,
    pub created_at: UnixMillis,
    /// When its current token was issued.
    pub authorized_at: UnixMillis,
    /// Raised by every credential rotation and re-authorization.
    pub revision: i64,
    /// Opaque ciphertext; the store never sees plaintext.
    pub credentials: Option<Vec<u8>>,
}

/// The machine store.
#[async_trait]
pub trait MachineStore: Send + Sync {
    async fn pair_machine(&self, machine: &NewMachine) -> StoreResult<Machine>;

    /// The machine whose current token hashes to `hash`.
    async fn machine_by_secret(&self, hash: &SecretHash) -> StoreResult<Option<Machine>>;

    async fn machine(&self, id: &MachineId) -> StoreResult<Option<Machine>>;

    /// An owner's machines, by name.
    async fn machines_of(&self, owner: &UserId) -> StoreResult<Vec<Machine>>;

    /// Replaces the credentials if the machine is still at `expected_revision`, raising it.
    /// `Conflict` when another change came first; `Missing` when the machine is gone.
    async fn rotate_machine_credentials(
        &self,
        id: &MachineId,
        expected_revision: i64,
        credentials: Option<&[u8]>,
    ) -> StoreResult<Machine>;

    /// Gives the machine a new token (the old one stops working), if `owner` owns it and it is
    /// still at `expected_revision`. `Missing` when `owner` has no such machine.
    async fn reauthorize_machine(
        &self,
        id: &MachineId,
        owner: &UserId,
        expected_revision: i64,
        secret_hash: &SecretHash,
    ) -> StoreResult<Machine>;

    /// Revokes a machine, discarding its credentials. Only its owner can: `Missing` when `owner`
    /// has no such machine, and nothing changes.
    async fn revoke_machine(&self, id: &MachineId, owner: &UserId) -> StoreResult<()>;

    /// Every machine holding credentials, for re-encryption under a new key.
    async fn machines_with_credentials(&self) -> StoreResult<Vec<Machine>>;
}

/// The refusal of an owner's change to a machine they do not own (or that is gone).
pub fn not_owners_machine() -> StoreError {
    StoreError::missing("no such machine of this owner")
}
