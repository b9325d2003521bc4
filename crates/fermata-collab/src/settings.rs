//! The limits and timings of live collaboration, with their documented defaults.

use std::time::Duration;

/// How rooms batch, checkpoint, close and limit what clients send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollabSettings {
    /// Updates arriving within this window of the first are committed together, with every update
    /// that queued while the previous commit ran (group commit). Zero, the default, is classic
    /// group commit: an update that finds the room idle commits at once, and what arrives while
    /// that commit runs forms the next batch, so an idle room adds no wait to an
    /// acknowledgement.
    pub batch_window: Duration,
    /// At most this many updates go into one commit.
    pub max_batch: usize,
    /// Checkpoint once this many commits with updates accumulated since the last checkpoint...
    pub checkpoint_every_commits: usize,
    /// ...or once their updates add up to this many bytes.
    pub checkpoint_every_bytes: usize,
    /// A room with no client closes (with a final checkpoint) after this long.
    pub idle_close: Duration,
    /// The largest WebSocket message a client may send.
    pub max_message_bytes: usize,
    /// The largest document (its encoded Yjs state, whatever root types it uses) an update may
    /// produce.
    pub max_document_bytes: usize,
    /// The most clients one room serves at once.
    pub max_clients_per_room: usize,
    /// The most of a room's connections one member holds at once.
    pub max_connections_per_member: usize,
    /// Presence messages one connection may send a second, on average...
    pub presence_per_second: u32,
    /// ...and at once; presence over that is dropped, not relayed.
    pub presence_burst: u32,
    /// A commit with no answer after this long is given up as unavailable, and its senders are
    /// told nothing was saved. Not a setting of its own: the serving process derives it from the
    /// writer lease's timings ([`CollabSettings::with_database_wait`]).
    pub commit_patience: Duration,
}

impl CollabSettings {
    /// These settings with `commit_patience` derived from `database_wait`, the longest one wait
    /// of the pool on the database may last: a healthy commit waits at most for a lock and then
    /// for its statement, each bounded by it, so three of them is a commit nobody answers.
    #[must_use]
    pub fn with_database_wait(self, database_wait: Duration) -> Self {
        CollabSettings {
            commit_patience: 3 * database_wait,
            ..self
        }
    }
}

impl Default for CollabSettings {
    fn default() -> Self {
        CollabSettings {
            batch_window: Duration::ZERO,
            max_batch: 64,
            checkpoint_every_commits: 500,
            checkpoint_every_bytes: 4 * 1024 * 1024,
            idle_close: Duration::from_secs(30),
            max_message_bytes: 1024 * 1024,
            max_document_bytes: 8 * 1024 * 1024,
            max_clients_per_room: 64,
            max_connections_per_member: 8,
            presence_per_second: 10,
            presence_burst: 20,
            commit_patience: Duration::from_secs(9),
        }
    }
}
