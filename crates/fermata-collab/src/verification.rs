//! Verifying every stored document the way recovery opens one, without serving it: the
//! checkpoint's state against its canonical text and hash, then the journal replayed on top
//! (see `fermata_docs::recovery`). `fermata check` and `fermata restore` run it; a document that
//! fails is named with what was wrong, and the pass goes on to the next.

use fermata_docs::recover;
use fermata_store::{
    Channel, ChannelFilter, ChannelId, ErrorKind, Repository, Slug, Storage, StoreError,
};

/// What a pass over every document found.
#[derive(Debug, Default)]
pub struct Verification {
    /// How many documents were read, archived ones included.
    pub checked: usize,
    /// The documents that did not recover, in the order they were read.
    pub damaged: Vec<Damage>,
}

/// A document that did not recover, and why.
#[derive(Debug, Clone)]
pub struct Damage {
    pub id: ChannelId,
    pub repository: Repository,
    pub slug: Slug,
    /// What was wrong, in counters, sequences and fixed words: never the document's content.
    pub problem: String,
}

/// Reads every document (archived ones too) as recovery would. `progress` hears how many were
/// read of how many there are, after each one. A database that fails (unavailable, refused) ends
/// the pass with its error: damage is what a document's own rows hold, not a failed read.
pub async fn verify_documents(
    storage: &dyn Storage,
    mut progress: impl FnMut(usize, usize),
) -> Result<Verification, StoreError> {
    let channels = storage
        .collaboration()
        .list_channels(&ChannelFilter {
            repository: None,
            include_archived: true,
        })
        .await?;
    let mut verification = Verification::default();
    for channel in &channels {
        if let Some(problem) = verify_one(storage, channel).await? {
            verification.damaged.push(Damage {
                id: channel.id.clone(),
                repository: channel.repository.clone(),
                slug: channel.slug.clone(),
                problem,
            });
        }
        verification.checked += 1;
        progress(verification.checked, channels.len());
    }
    Ok(verification)
}

/// What is wrong with one document, or `None` when it recovers.
async fn verify_one(
    storage: &dyn Storage,
    channel: &Channel,
) -> Result<Option<String>, StoreError> {
    let snapshot = match storage.collaboration().recovery_snapshot(&channel.id).await {
        Ok(snapshot) => snapshot,
        // Rows that do not decode are the document's damage.
        Err(error) if error.kind() == ErrorKind::Corrupt => {
            return Ok(Some(error.message().to_owned()));
        }
        Err(error) => return Err(error),
    };
    Ok(recover(&snapshot)
        .err()
        .map(|error| error.problem().to_string()))
}
