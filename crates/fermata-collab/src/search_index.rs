//! When a room indexes its document's text for search. A live room's commits do not carry the
//! text: tokenizing a whole document on every keystroke's commit would cost more than the commit
//! itself. Each such commit marks the document's indexed text as behind, in its own transaction
//! (so the mark is as durable as the edit), and the room writes the text once its writers pause
//! ([`PAUSE`]), at the latest [`AT_MOST`] and the room's own share beyond it (`spread.rs`)
//! after the first edit it has not indexed, before any search asks (`RoomManager::index_open_texts`, which asks only the rooms listed in
//! [`Unindexed`]), and when it closes. A process that stops before that leaves the mark, and the
//! next start indexes the document from its journal.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fermata_store::ChannelId;
use tokio::time::Instant;

use crate::spread::spread;

/// How long the writers must pause before the text is indexed.
pub(crate) const PAUSE: Duration = Duration::from_secs(2);
/// The longest an edit waits to be indexed while the writers never pause.
pub(crate) const AT_MOST: Duration = Duration::from_secs(10);
/// How long after a failed attempt the next one comes.
pub(crate) const RETRY: Duration = Duration::from_secs(5);

/// The documents whose open rooms hold edits not yet indexed, shared by the rooms and their
/// manager, so a search asks those rooms alone. Each document counts the rooms that list it: a
/// room still closing and the new room of the same document may both hold edits for a moment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Unindexed(Arc<Mutex<HashMap<ChannelId, usize>>>);

impl Unindexed {
    /// The documents listed now.
    pub(crate) fn documents(&self) -> Vec<ChannelId> {
        self.set().keys().cloned().collect()
    }

    fn list(&self, id: &ChannelId) {
        *self.set().entry(id.clone()).or_default() += 1;
    }

    fn unlist(&self, id: &ChannelId) {
        let mut set = self.set();
        if let Some(holders) = set.get_mut(id) {
            *holders -= 1;
            if *holders == 0 {
                set.remove(id);
            }
        }
    }

    fn set(&self) -> std::sync::MutexGuard<'_, HashMap<ChannelId, usize>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What a room has committed but not indexed yet; its document is listed in [`Unindexed`]
/// meanwhile, and leaves the list when indexed or when the room ends.
#[derive(Debug)]
pub(crate) struct PendingIndex {
    id: ChannelId,
    listed: Unindexed,
    /// The first commit not indexed yet, and the last one.
    since: Option<(Instant, Instant)>,
    /// After a failed attempt: when to try again.
    retry_at: Option<Instant>,
    /// The longest an edit waits to be indexed.
    at_most: Duration,
}

impl PendingIndex {
    /// A room's pending index, due at most its own share beyond [`AT_MOST`] after its first
    /// edit not indexed (see `spread.rs`).
    pub(crate) fn new(id: ChannelId, listed: Unindexed) -> Self {
        Self::due_within(id, listed, spread(AT_MOST))
    }

    fn due_within(id: ChannelId, listed: Unindexed, at_most: Duration) -> Self {
        PendingIndex {
            id,
            listed,
            since: None,
            retry_at: None,
            at_most,
        }
    }

    /// A commit changed the text without indexing it.
    pub(crate) fn committed(&mut self, now: Instant) {
        let first = self.since.map_or(now, |(first, _)| first);
        if self.since.is_none() {
            self.listed.list(&self.id);
        }
        self.since = Some((first, now));
    }

    /// Whether there is anything to index.
    pub(crate) fn is_pending(&self) -> bool {
        self.since.is_some()
    }

    /// When the text is next due to be indexed, if anything is pending.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        let (first, last) = self.since?;
        let due = (last + PAUSE).min(first + self.at_most);
        Some(self.retry_at.map_or(due, |retry| retry.max(due)))
    }

    /// The text is indexed (or a commit carried it): nothing is pending.
    pub(crate) fn indexed(&mut self) {
        if self.since.take().is_some() {
            self.listed.unlist(&self.id);
        }
        self.retry_at = None;
    }

    /// An attempt failed: the next comes after [`RETRY`].
    pub(crate) fn failed(&mut self, now: Instant) {
        self.retry_at = Some(now + RETRY);
    }
}

impl Drop for PendingIndex {
    fn drop(&mut self) {
        self.indexed();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_indexed_when_the_writers_pause_or_at_the_latest_after_the_bound() {
        let start = Instant::now();
        let listed = Unindexed::default();
        let id = ChannelId("doc".to_owned());
        let mut pending = PendingIndex::due_within(id.clone(), listed.clone(), AT_MOST);
        assert_eq!(pending.deadline(), None);
        assert!(listed.documents().is_empty());
        pending.committed(start);
        assert_eq!(pending.deadline(), Some(start + PAUSE));
        assert_eq!(listed.documents(), std::slice::from_ref(&id));
        // Typing on moves the pause along, up to the bound.
        pending.committed(start + Duration::from_secs(1));
        assert_eq!(pending.deadline(), Some(start + Duration::from_secs(3)));
        pending.committed(start + Duration::from_secs(9));
        assert_eq!(pending.deadline(), Some(start + AT_MOST));
        // A failure waits before the next attempt.
        pending.failed(start + AT_MOST);
        assert_eq!(pending.deadline(), Some(start + AT_MOST + RETRY));
        pending.indexed();
        assert!(!pending.is_pending());
        assert_eq!(pending.deadline(), None);
        assert!(listed.documents().is_empty());
        // A room that ends with edits not indexed leaves the list too (its mark in storage
        // stays, for the next start).
        pending.committed(start);
        drop(pending);
        assert!(listed.documents().is_empty());
        // A closing room that ends does not unlist the new room of the same document.
        let mut closing = PendingIndex::new(id.clone(), listed.clone());
        let mut replacement = PendingIndex::new(id.clone(), listed.clone());
        closing.committed(start);
        replacement.committed(start);
        drop(closing);
        assert_eq!(listed.documents(), std::slice::from_ref(&id));
        replacement.indexed();
        assert!(listed.documents().is_empty());
    }
}
