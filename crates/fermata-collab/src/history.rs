//! DocumentHistory: each room's recorder of activity history. After a commit that changed the
//! canonical text has been acknowledged (committed, and broadcast to the room's clients or
//! answered to the program that asked), the room hands the new text to its recorder, which
//! writes it to the history store on its own task, in commit order, under the writer fence: a
//! member's change once they pause for a second (or every five seconds while they keep typing),
//! as the last text of that burst. Nothing waits for it: a failure is logged, and a full queue drops the change with a warning,
//! so history can miss a change but never blocks or fails one.
//!
//! Credit: a browser batch goes to the member whose update came last in it (a batch spans a few
//! milliseconds, so a batch mixing members is rare and the other members' changes are in the same
//! text); a program rewrite to the calling user; a restore to whoever restored; server and
//! Planner edits to no one. The session rule itself lives in the storage port.

use std::sync::Arc;
use std::time::Duration;

use fermata_store::{Change, ChannelId, ErrorChain, Storage, UnixMillis, UserId};
use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout_at};

use crate::fence::WriterFence;

/// How many entries wait for the recording task before new ones are dropped. Each holds a
/// complete text, so the queue is short: it only fills while the history store is stalled.
const QUEUE: usize = 32;

/// What a room hands its recorder.
#[derive(Debug)]
enum Entry {
    /// The document's text as the room (re)loaded it: the baseline later changes are compared
    /// with. A commit that landed although its answer was lost is not recorded.
    Baseline(String),
    /// The text an acknowledged commit left.
    Change {
        text: String,
        revision: i64,
        author: Option<UserId>,
        at: UnixMillis,
    },
}

/// A room's recorder: the sending end of its history queue. The recording, a task of its own
/// beside the room's, hashes each text (off the room's task), skips a text equal to the previous
/// one, and ends once the room (and so this) is gone and the queue is drained, or with the room
/// when a stop abandons it.
#[derive(Debug)]
pub(crate) struct Recorder {
    channel: ChannelId,
    queue: mpsc::Sender<Entry>,
}

impl Recorder {
    /// The recorder of one document's room, whose text is now `text`, and the recording, for the
    /// caller to run as a task beside the room's.
    pub(crate) fn start(
        storage: Arc<dyn Storage>,
        fence: WriterFence,
        channel: ChannelId,
        text: String,
    ) -> (Recorder, BoxFuture<'static, ()>) {
        let (queue, mut entries) = mpsc::channel::<Entry>(QUEUE);
        let document = channel.clone();
        let recording = Box::pin(async move {
            let mut last_hash = None;
            let mut burst = Burst::default();
            while let Some(entry) = burst.next(&mut entries).await {
                match entry {
                    Entry::Baseline(text) => last_hash = Some(fermata_docs::source_hash(&text)),
                    Entry::Change {
                        text,
                        revision,
                        author,
                        at,
                    } => {
                        let source_hash = fermata_docs::source_hash(&text);
                        if last_hash.as_ref() == Some(&source_hash) {
                            continue;
                        }
                        last_hash = Some(source_hash.clone());
                        let change = Change {
                            channel: document.clone(),
                            author,
                            text,
                            revision,
                            source_hash,
                            at,
                        };
                        record(&*storage, &fence, &change).await;
                    }
                }
            }
        });
        let recorder = Recorder { channel, queue };
        recorder.submit(Entry::Baseline(text));
        (recorder, recording)
    }

    /// The room reloaded its document: its text is the baseline from now on.
    pub(crate) fn reset(&self, text: String) {
        self.submit(Entry::Baseline(text));
    }

    /// Hands over the text an acknowledged commit left; it is recorded when it differs from the
    /// previous one.
    pub(crate) fn changed(&self, text: String, revision: i64, author: Option<UserId>) {
        self.submit(Entry::Change {
            text,
            revision,
            author,
            at: UnixMillis::now(),
        });
    }

    fn submit(&self, entry: Entry) {
        if self.queue.try_send(entry).is_err() {
            tracing::warn!(document = %self.channel, "history missed a change: its queue is full");
        }
    }
}
/// How long the recorder waits after a member's change for more of theirs before it writes the
/// text...
const SETTLE: Duration = Duration::from_secs(1);
/// ...and the longest it holds a change back while they keep typing.
const HOLD_AT_MOST: Duration = Duration::from_secs(5);

/// Takes entries off the queue a burst at a time: a member's change followed by more changes by
/// the same member (waiting in the queue, or arriving within [`SETTLE`] of the one before, for
/// at most [`HOLD_AT_MOST`]) is taken as the last of them. Recorded one by one they would extend
/// one session, each overwriting the text the one before wrote, so one history write per burst
/// leaves the same history as one per commit, without a second durable transaction beside
/// every commit of a busy room.
#[derive(Default)]
struct Burst {
    /// An entry taken off the queue that ended the previous burst, to be taken next.
    held: Option<Entry>,
}

impl Burst {
    async fn next(&mut self, entries: &mut mpsc::Receiver<Entry>) -> Option<Entry> {
        let mut latest = match self.held.take() {
            Some(entry) => entry,
            None => entries.recv().await?,
        };
        // Baselines, and server and Planner edits (each a session of its own), go at once.
        let Some(author) = latest.author().cloned() else {
            return Some(latest);
        };
        let hold_until = Instant::now() + HOLD_AT_MOST;
        loop {
            let quiet_until = (Instant::now() + SETTLE).min(hold_until);
            match timeout_at(quiet_until, entries.recv()).await {
                Ok(Some(next)) if next.author() == Some(&author) => latest = next,
                Ok(Some(other)) => {
                    self.held = Some(other);
                    break;
                }
                // Quiet for long enough, held long enough, or the room is gone: write it now.
                Ok(None) | Err(_) => break,
            }
        }
        Some(latest)
    }
}

impl Entry {
    /// The member a change is credited to; `None` for a baseline and for server and Planner
    /// edits.
    fn author(&self) -> Option<&UserId> {
        match self {
            Entry::Change { author, .. } => author.as_ref(),
            Entry::Baseline(_) => None,
        }
    }
}

async fn record(storage: &dyn Storage, fence: &WriterFence, change: &Change) {
    let result = match fence.current() {
        Ok(fence) => storage.history().record(&fence, change).await,
        Err(error) => Err(error),
    };
    match result {
        Ok(recorded) => tracing::debug!(
            document = %change.channel,
            revision = change.revision,
            session = recorded.version.number,
            extended = recorded.extended,
            "history recorded"
        ),
        Err(error) => tracing::warn!(
            document = %change.channel,
            revision = change.revision,
            error = %ErrorChain(&error),
            "a change was not recorded in history"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(text: &str, author: Option<&str>) -> Entry {
        Entry::Change {
            text: text.to_owned(),
            revision: 1,
            author: author.map(|name| UserId(name.to_owned())),
            at: UnixMillis(0),
        }
    }

    fn text(entry: &Entry) -> &str {
        match entry {
            Entry::Change { text, .. } | Entry::Baseline(text) => text,
        }
    }

    #[tokio::test]
    async fn a_burst_of_one_members_changes_is_taken_as_its_last() {
        let (queue, mut entries) = mpsc::channel(QUEUE);
        for entry in [
            change("a1", Some("ann")),
            change("a2", Some("ann")),
            change("a3", Some("ann")),
            change("b1", Some("bob")),
            Entry::Baseline("reloaded".to_owned()),
            change("b2", Some("bob")),
            change("server1", None),
            change("server2", None),
            change("a4", Some("ann")),
        ] {
            queue.try_send(entry).unwrap();
        }
        drop(queue);
        let mut burst = Burst::default();
        let mut taken = Vec::new();
        while let Some(entry) = burst.next(&mut entries).await {
            taken.push(text(&entry).to_owned());
        }
        assert_eq!(
            taken,
            ["a3", "b1", "reloaded", "b2", "server1", "server2", "a4"]
        );
    }
}
