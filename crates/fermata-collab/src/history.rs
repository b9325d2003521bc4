//! DocumentHistory: each room's recorder of activity history. After a commit that changed the
//! canonical text has been acknowledged (committed, and broadcast to the room's clients or
//! answered to the program that asked), the room hands the new text to its recorder, which
//! writes it to the history store on its own task, in commit order, under the writer fence.
//! Nothing waits for it: a failure is logged, and a full queue drops the change with a warning,
//! so history can miss a change but never blocks or fails one.
//!
//! Credit: a browser batch goes to the member whose update came last in it (a batch spans a few
//! milliseconds, so a batch mixing members is rare and the other members' changes are in the same
//! text); a program rewrite to the calling user; a restore to whoever restored; server and
//! Planner edits to no one. The session rule itself lives in the storage port.

use std::sync::Arc;

use fermata_store::{Change, ChannelId, Storage, UnixMillis, UserId};
use tokio::sync::mpsc;

use crate::fence::WriterFence;

/// How many acknowledged changes wait for their history write before new ones are dropped.
const QUEUE: usize = 256;

/// A room's recorder: the sending end of its history queue. The recording task ends once the
/// room (and so this) is gone and the queue is drained.
#[derive(Debug)]
pub(crate) struct Recorder {
    channel: ChannelId,
    queue: mpsc::Sender<Change>,
    /// The source hash of the text last handed over (or loaded), to record only real changes.
    recorded_hash: String,
}

impl Recorder {
    /// Starts the recording task of one document's room, whose text now has `source_hash`.
    pub(crate) fn start(
        storage: Arc<dyn Storage>,
        fence: WriterFence,
        channel: ChannelId,
        source_hash: String,
    ) -> Recorder {
        let (queue, mut changes) = mpsc::channel::<Change>(QUEUE);
        tokio::spawn(async move {
            while let Some(change) = changes.recv().await {
                record(&*storage, &fence, &change).await;
            }
        });
        Recorder {
            channel,
            queue,
            recorded_hash: source_hash,
        }
    }

    /// The room reloaded its document: its text is the baseline from now on. A commit that landed
    /// although its answer was lost is not recorded.
    pub(crate) fn reset(&mut self, source_hash: String) {
        self.recorded_hash = source_hash;
    }

    /// Hands over the text an acknowledged commit left, when it differs from the last one.
    pub(crate) fn changed(&mut self, text: String, revision: i64, author: Option<UserId>) {
        let source_hash = fermata_docs::source_hash(&text);
        if source_hash == self.recorded_hash {
            return;
        }
        self.recorded_hash.clone_from(&source_hash);
        let change = Change {
            channel: self.channel.clone(),
            author,
            text,
            revision,
            source_hash,
            at: UnixMillis::now(),
        };
        if self.queue.try_send(change).is_err() {
            tracing::warn!(document = %self.channel, revision, "history missed a change: its queue is full");
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
            error = %error,
            "a change was not recorded in history"
        ),
    }
}
