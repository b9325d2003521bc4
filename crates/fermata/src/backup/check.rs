//! `fermata check`: every document of a data folder or database verified as recovery would
//! open it, offline and without writing, each damaged one named with what was wrong. `restore`
//! ends with the same pass.

use std::fmt::Write as _;

use fermata_collab::verification::{Verification, verify_documents};
use fermata_store_sql::SqlStorage;
use indicatif::{ProgressBar, ProgressStyle};

use crate::config::StorageSettings;
use crate::failure::Failure;
use crate::storage;

/// Checks the configured database; a damaged document fails the command (exit 1).
pub(crate) async fn check(settings: &StorageSettings) -> Result<String, Failure> {
    let store = storage::open(settings).await?;
    storage::require_current_schema(&store, "be checked").await?;
    let verification = verify(&store).await?;
    store.close().await;
    let out = describe(&verification);
    if verification.damaged.is_empty() {
        Ok(out)
    } else {
        print!("{out}");
        Err(Failure::runtime(format!(
            "{} of {} documents are damaged",
            verification.damaged.len(),
            verification.checked
        )))
    }
}

/// Verifies every document with a bar on a terminal.
pub(crate) async fn verify(store: &SqlStorage) -> Result<Verification, Failure> {
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("{spinner} verifying documents {pos}/{len} {wide_bar}")
            .expect("the bar template is valid"),
    );
    let verification = verify_documents(store, |done, all| {
        bar.set_length(all as u64);
        bar.set_position(done as u64);
    })
    .await
    .map_err(|error| Failure::store("cannot read the documents", error))?;
    bar.finish_and_clear();
    Ok(verification)
}

/// What the pass found, one line per damaged document.
pub(crate) fn describe(verification: &Verification) -> String {
    let mut out = String::new();
    if verification.damaged.is_empty() {
        let _ = writeln!(
            out,
            "verified {} documents: every one recovers",
            verification.checked
        );
        return out;
    }
    let _ = writeln!(
        out,
        "verified {} documents: {} damaged",
        verification.checked,
        verification.damaged.len()
    );
    for damage in &verification.damaged {
        let _ = writeln!(
            out,
            "  damaged: {}/{} ({}): {}",
            damage.repository, damage.slug, damage.id, damage.problem
        );
    }
    out
}
