//! Checking a refresh or verification selection against its inventory: the inventory exists and
//! has not expired, the selection is not empty, every name matches one inventory entry exactly,
//! duplicates are removed and the inventory's order is kept. A selection may name every database
//! in the inventory; there is no separate "all" request.

use std::collections::HashSet;

use fermata_schema_core::{DatabaseName, ErrorCode, SafeError, Subject};
use fermata_store::UnixMillis;
use fermata_store::schema::Inventory;

/// The selected databases in inventory order, or the safe error that refuses the selection.
pub fn resolve(
    inventory: &Inventory,
    now: UnixMillis,
    requested: &[String],
) -> Result<Vec<DatabaseName>, SafeError> {
    if inventory.is_expired(now) {
        return Err(SafeError::new(ErrorCode::InventoryExpired));
    }
    if requested.is_empty() {
        return Err(SafeError::new(ErrorCode::EmptySelection));
    }
    let known: HashSet<&str> = inventory
        .databases
        .iter()
        .map(DatabaseName::as_str)
        .collect();
    for name in requested {
        if !known.contains(name.as_str()) {
            // Only a name that is a valid database name is repeated back.
            return Err(match DatabaseName::new(name.clone()) {
                Ok(name) => {
                    SafeError::about(ErrorCode::DatabaseNotInInventory, Subject::Database(name))
                }
                Err(_) => SafeError::new(ErrorCode::InvalidIdentifier),
            });
        }
    }
    let wanted: HashSet<&str> = requested.iter().map(String::as_str).collect();
    Ok(inventory
        .databases
        .iter()
        .filter(|name| wanted.contains(name.as_str()))
        .cloned()
        .collect())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use fermata_store::UserId;
    use fermata_store::schema::{InventoryId, OperationId};

    use super::*;

    fn inventory(names: &[&str]) -> Inventory {
        Inventory {
            id: InventoryId::generate(),
            operation: OperationId::generate(),
            actor: UserId("admin".to_owned()),
            server_version: "8.0.36".to_owned(),
            discovered_at: UnixMillis(1_000),
            expires_at: UnixMillis(1_000).plus(Duration::from_secs(86_400)),
            databases: names
                .iter()
                .map(|n| DatabaseName::new(*n).unwrap())
                .collect(),
            ignored: Vec::new(),
        }
    }

    fn request(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn keeps_inventory_order_and_drops_duplicates() {
        let inventory = inventory(&["Zeta", "alpha", "b c", "naïve"]);
        let chosen = resolve(
            &inventory,
            UnixMillis(2_000),
            &request(&["naïve", "Zeta", "naïve"]),
        )
        .unwrap();
        let names: Vec<_> = chosen.iter().map(DatabaseName::as_str).collect();
        assert_eq!(names, ["Zeta", "naïve"]);
        let all = resolve(
            &inventory,
            UnixMillis(2_000),
            &request(&["naïve", "b c", "alpha", "Zeta"]),
        )
        .unwrap();
        assert_eq!(all, inventory.databases);
    }

    #[test]
    fn refuses_empty_unknown_inexact_and_expired_selections() {
        let inventory = inventory(&["App", "billing"]);
        let code = |requested: &[&str], now| {
            resolve(&inventory, UnixMillis(now), &request(requested))
                .unwrap_err()
                .code()
        };
        assert_eq!(code(&[], 2_000), ErrorCode::EmptySelection);
        assert_eq!(code(&["app"], 2_000), ErrorCode::DatabaseNotInInventory);
        assert_eq!(
            code(&["billing "], 2_000),
            ErrorCode::DatabaseNotInInventory
        );
        assert_eq!(code(&[""], 2_000), ErrorCode::InvalidIdentifier);
        assert_eq!(
            code(&["App"], 1_000 + 86_400_000),
            ErrorCode::InventoryExpired
        );
    }
}
