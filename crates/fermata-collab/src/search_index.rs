//! When a room indexes its document's text for search. A live room's commits do not carry the
//! text: tokenizing a whole document on every keystroke's commit would cost more than the commit
//! itself. Each such commit marks the document's indexed text as behind, in its own transaction
//! (so the mark is as durable as the edit), and the room writes the text once its writers pause
//! ([`PAUSE`]), at the latest [`AT_MOST`] after the first edit it has not indexed, before any
//! search asks (`RoomManager::index_open_texts`), and when it closes. A process that stops
//! before that leaves the mark, and the next start indexes the document from its journal.

use std::time::Duration;

use tokio::time::Instant;

/// How long the writers must pause before the text is indexed.
pub(crate) const PAUSE: Duration = Duration::from_secs(2);
/// The longest an edit waits to be indexed while the writers never pause.
pub(crate) const AT_MOST: Duration = Duration::from_secs(10);
/// How long after a failed attempt the next one comes.
pub(crate) const RETRY: Duration = Duration::from_secs(5);

/// What a room has committed but not indexed yet.
#[derive(Debug, Default)]
pub(crate) struct PendingIndex {
    /// The first commit not indexed yet, and the last one.
    since: Option<(Instant, Instant)>,
    /// After a failed attempt: when to try again.
    retry_at: Option<Instant>,
}

impl PendingIndex {
    /// A commit changed the text without indexing it.
    pub(crate) fn committed(&mut self, now: Instant) {
        let first = self.since.map_or(now, |(first, _)| first);
        self.since = Some((first, now));
    }

    /// Whether there is anything to index.
    pub(crate) fn is_pending(&self) -> bool {
        self.since.is_some()
    }

    /// When the text is next due to be indexed, if anything is pending.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        let (first, last) = self.since?;
        let due = (last + PAUSE).min(first + AT_MOST);
        Some(self.retry_at.map_or(due, |retry| retry.max(due)))
    }

    /// The text is indexed (or a commit carried it): nothing is pending.
    pub(crate) fn indexed(&mut self) {
        *self = PendingIndex::default();
    }

    /// An attempt failed: the next comes after [`RETRY`].
    pub(crate) fn failed(&mut self, now: Instant) {
        self.retry_at = Some(now + RETRY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_indexed_when_the_writers_pause_or_at_the_latest_after_the_bound() {
        let start = Instant::now();
        let mut pending = PendingIndex::default();
        assert_eq!(pending.deadline(), None);
        pending.committed(start);
        assert_eq!(pending.deadline(), Some(start + PAUSE));
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
    }
}
