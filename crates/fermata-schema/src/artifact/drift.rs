//! Sealed drift diffs: the unified diffs a verification found between a database's live schema
//! and its merged snapshot, with the migration scripts between the two, kept in the object store like a staged candidate (the whole
//! envelope, sealed under the review artifact's purpose with `<operation ID>/drift/<position>`
//! as the authenticated row, so it opens neither as an artifact nor as another database's
//! diff), at [`drift_location`]. The application database holds none of their text; how long
//! they are kept is decided by [`crate::drift`].

use std::collections::BTreeSet;

use fermata_schema_core::{ErrorCode, SafeError};
use fermata_store::schema::OperationId;
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use zeroize::Zeroizing;

use super::ArtifactStore;
use crate::safe_context::SafeCode;

/// The object store folder that holds drift diffs, one folder per verification.
pub const DRIFT_FOLDER: &str = "schema-drift";

/// Where the drift diff of the database at `position` in `operation`'s selection is kept:
/// `schema-drift/<operation ID>/<position>.bin`.
pub fn drift_location(operation: OperationId, position: u32) -> String {
    format!("{DRIFT_FOLDER}/{operation}/{position}.bin")
}

/// The authenticated row of a drift diff.
fn drift_row(operation: OperationId, position: u32) -> String {
    format!("{operation}/drift/{position}")
}

impl ArtifactStore {
    /// Seals `plaintext` (a database's drift diff) and writes it at [`drift_location`],
    /// replacing an earlier attempt's.
    pub async fn seal_drift(
        &self,
        operation: OperationId,
        position: u32,
        plaintext: Vec<u8>,
    ) -> Result<(), SafeError> {
        self.put_sealed(
            &drift_location(operation, position),
            drift_row(operation, position),
            plaintext,
        )
        .await
    }

    /// The drift diff at `position`, checked and decrypted (its plaintext wiped when dropped);
    /// `None` when there is none (never written, or deleted).
    pub async fn open_drift(
        &self,
        operation: OperationId,
        position: u32,
    ) -> Result<Option<Zeroizing<Vec<u8>>>, SafeError> {
        self.get_sealed(
            &drift_location(operation, position),
            drift_row(operation, position),
        )
        .await
    }

    /// The operations that have drift diffs in the store, by the folder names.
    pub async fn drift_operations(&self) -> Result<BTreeSet<String>, SafeError> {
        let prefix = ObjectPath::from(DRIFT_FOLDER);
        let listed: Vec<_> = self
            .objects
            .list(Some(&prefix))
            .try_collect()
            .await
            .or_code(ErrorCode::ArtifactUnavailable, "list the drift diffs")?;
        Ok(listed
            .iter()
            .filter_map(|meta| meta.location.parts().nth(1))
            .map(|part| part.as_ref().to_owned())
            .collect())
    }

    /// Deletes every drift diff of the operation whose folder is `operation`; returns how many
    /// went.
    pub async fn delete_drift(&self, operation: &str) -> Result<usize, SafeError> {
        let prefix = ObjectPath::from(format!("{DRIFT_FOLDER}/{operation}"));
        let listed: Vec<_> = self
            .objects
            .list(Some(&prefix))
            .try_collect()
            .await
            .or_code(
                ErrorCode::ArtifactUnavailable,
                "list an operation's drift diffs",
            )?;
        for meta in &listed {
            match self.objects.delete(&meta.location).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(error) => {
                    return Err(error)
                        .or_code(ErrorCode::ArtifactUnavailable, "delete a drift diff");
                }
            }
        }
        Ok(listed.len())
    }
}
