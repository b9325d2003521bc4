//! Which paired machine runs a person's Planner: each person's choice for one document
//! (`machine_choices`; no row is automatic), each person's one favorite machine, which Automatic
//! prefers (`machine_favorites`; no row is none), and whether a machine's owner shares it with
//! teammates (every user of this server is a teammate).
//!
//! A person may choose or favor their own machine or a teammate's shared one. Revoking a machine
//! removes every choice and favorite of it; its owner no longer sharing it removes teammates'
//! choices and favorites of it, never the owner's own. Deleting a document removes its choices.

use async_trait::async_trait;

use crate::channel::ChannelId;
use crate::error::{StoreError, StoreResult};
use crate::lease::Fence;
use crate::machine::MachineId;
use crate::user::UserId;

/// The machine choice store. Every write is fenced by the writer lease.
#[async_trait]
pub trait MachineChoiceStore: Send + Sync {
    /// Shares or stops sharing a machine. Only its owner can: `Missing` when `owner` has no such
    /// machine. Stopping removes teammates' choices and favorites of it. Idempotent.
    async fn set_machine_shared(
        &self,
        fence: &Fence,
        machine: &MachineId,
        owner: &UserId,
        shared: bool,
    ) -> StoreResult<()>;

    /// Whether the machine is shared; `Missing` when there is no such machine.
    async fn machine_shared(&self, machine: &MachineId) -> StoreResult<bool>;

    /// Chooses `machine` for `user` on `channel` (`None`: automatic, removing the row). `Missing`
    /// when the machine is neither the user's own nor shared; `Invalid` for an unknown document
    /// or user.
    async fn choose_machine(
        &self,
        fence: &Fence,
        user: &UserId,
        channel: &ChannelId,
        machine: Option<&MachineId>,
    ) -> StoreResult<()>;

    async fn machine_choice(
        &self,
        user: &UserId,
        channel: &ChannelId,
    ) -> StoreResult<Option<MachineId>>;

    /// Makes `machine` the user's favorite (`None`: no favorite). `Missing` when the machine is
    /// neither the user's own nor shared.
    async fn set_favorite_machine(
        &self,
        fence: &Fence,
        user: &UserId,
        machine: Option<&MachineId>,
    ) -> StoreResult<()>;

    async fn favorite_machine(&self, user: &UserId) -> StoreResult<Option<MachineId>>;
}

/// The refusal of a choice or favorite of a machine that is neither the person's own nor shared.
pub fn no_usable_machine() -> StoreError {
    StoreError::missing("no such machine of yours or shared with you")
}

/// The refusal of a write naming a machine that does not exist.
pub fn unknown_machine() -> StoreError {
    StoreError::missing("no such machine")
}
