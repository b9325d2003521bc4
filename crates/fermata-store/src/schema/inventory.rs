//! Inventories: an immutable header (the operation that discovered it, its actor, the server
//! version, the discovery time and the expiry 24 hours later, the visible databases the
//! configured filter left out) and the ordered database names.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{StoreError, StoreResult, StoreResultExt};
use crate::schema::{DatabaseName, OperationId};
use crate::time::UnixMillis;
use crate::user::UserId;

/// How long an inventory may be selected from after discovery.
pub const INVENTORY_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// An inventory's ID (a UUID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct InventoryId(pub uuid::Uuid);

impl InventoryId {
    pub fn generate() -> Self {
        InventoryId(uuid::Uuid::new_v4())
    }
}

impl fmt::Display for InventoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for InventoryId {
    type Err = StoreError;

    fn from_str(text: &str) -> StoreResult<Self> {
        uuid::Uuid::parse_str(text)
            .map(InventoryId)
            .or_invalid("an inventory ID is a UUID")
    }
}

/// An inventory to record: what one discovery found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewInventory {
    pub id: InventoryId,
    pub operation: OperationId,
    pub actor: UserId,
    pub server_version: String,
    /// The visible databases in their stable order, without duplicates.
    pub databases: Vec<DatabaseName>,
    /// The visible databases `[schema] ignore_databases` left out, in the same order; none of
    /// them is among `databases`.
    pub ignored: Vec<DatabaseName>,
    /// How long it may be selected from; [`INVENTORY_LIFETIME`] outside tests.
    pub lifetime: Duration,
}

/// An inventory as stored. Never changes once recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inventory {
    pub id: InventoryId,
    pub operation: OperationId,
    pub actor: UserId,
    pub server_version: String,
    /// When it was recorded, on the database's clock.
    pub discovered_at: UnixMillis,
    pub expires_at: UnixMillis,
    pub databases: Vec<DatabaseName>,
    /// The visible databases the filter left out (none for inventories recorded before they
    /// were kept).
    pub ignored: Vec<DatabaseName>,
}

impl Inventory {
    pub fn is_expired(&self, now: UnixMillis) -> bool {
        self.expires_at <= now
    }
}

impl NewInventory {
    /// Refuses duplicate names and out-of-range lifetimes.
    pub fn check(&self) -> StoreResult<()> {
        let mut seen = std::collections::HashSet::new();
        if !self
            .databases
            .iter()
            .chain(&self.ignored)
            .all(|name| seen.insert(name))
        {
            return Err(StoreError::invalid("an inventory names each database once"));
        }
        if self.server_version.is_empty() || self.server_version.len() > 200 {
            return Err(StoreError::invalid(
                "a server version has 1 to 200 characters",
            ));
        }
        if self.lifetime.is_zero() || self.lifetime > INVENTORY_LIFETIME {
            return Err(StoreError::invalid(
                "an inventory lives for at most 24 hours",
            ));
        }
        Ok(())
    }
}
