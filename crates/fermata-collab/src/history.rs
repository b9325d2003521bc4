//! DocumentHistory: each room's recorder of activity history. After a commit that changed the
//! canonical text has been acknowledged (committed, and broadcast to the room's clients or
//! answered to the program that asked), the room tells its recorder, which writes the text to the
//! history store on its own task, in commit order, under the writer fence. Nothing waits for it: a
//! failure is logged, and a full queue drops the change with a warning, so history can miss a
//! change but never blocks or fails one.
//!
//! A member's typing is recorded once per burst, as the last text of it: once they pause for a
//! second, every five seconds while they keep typing, and before anyone else's change. The
//! recorder holds the burst without its text ([`Bursts`]) and the room takes the document's text
//! only when the burst ends, while the document is still at the burst's last revision: taking the
//! whole text after every commit would cost the size of the document per commit. Program
//! rewrites, restores, server and Planner edits are recorded at once, each after the burst before
//! it.
//!
//! Credit: a browser batch goes to the member whose update came last in it (a batch spans a few
//! milliseconds, so a batch mixing members is rare and the other members' changes are in the same
//! text); a program rewrite to the calling user; a restore to whoever restored; server and
//! Planner edits to no one. The session rule itself lives in the storage port.

use std::sync::Arc;
use std::time::Duration;

use fermata_docs::OpenDocument;
use fermata_store::{Change, ChannelId, ErrorChain, Storage, UnixMillis, UserId};
use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::fence::WriterFence;
use crate::spread::spread;

/// How many entries wait for the recording task before new ones are dropped. Each holds a
/// complete text, so the queue is short: it only fills while the history store is stalled.
const QUEUE: usize = 32;

/// How long a member's burst waits for more of their changes before it is recorded...
const SETTLE: Duration = Duration::from_secs(1);
/// ...and the longest it is held back while they keep typing.
const HOLD_AT_MOST: Duration = Duration::from_secs(5);

/// What a room hands its recorder.
#[derive(Debug)]
enum Entry {
    /// The document as the room (re)loaded it: the baseline later changes are compared with. A
    /// commit that landed although its answer was lost is not recorded.
    Baseline(Baseline),
    /// The text an acknowledged commit left.
    Change {
        text: String,
        revision: i64,
        author: Option<UserId>,
        at: UnixMillis,
    },
}

/// A baseline: the hash of the loaded text when recovery already had it checked, or else the
/// text, hashed by the recording.
#[derive(Debug)]
enum Baseline {
    Hash(String),
    Text(String),
}

impl Baseline {
    fn of(doc: &OpenDocument) -> Baseline {
        match &doc.stored.text_hash {
            Some(hash) => Baseline::Hash(hash.clone()),
            None => Baseline::Text(doc.doc.text()),
        }
    }
}

/// A room's recorder: its burst in progress, and the sending end of its history queue. The
/// recording, a task of its own beside the room's, hashes each text (off the room's task), skips
/// a text equal to the previous one, and ends once the room (and so this) is gone and the queue
/// is drained, or with the room when a stop abandons it.
#[derive(Debug)]
pub(crate) struct Recorder {
    channel: ChannelId,
    queue: mpsc::Sender<Entry>,
    bursts: Bursts,
}

impl Recorder {
    /// The recorder of one document's room, which has just loaded `doc`, and the recording, for
    /// the caller to run as a task beside the room's.
    pub(crate) fn start(
        storage: Arc<dyn Storage>,
        fence: WriterFence,
        channel: ChannelId,
        doc: &OpenDocument,
    ) -> (Recorder, BoxFuture<'static, ()>) {
        let (queue, mut entries) = mpsc::channel::<Entry>(QUEUE);
        let document = channel.clone();
        let recording = Box::pin(async move {
            let mut last_hash = None;
            while let Some(entry) = entries.recv().await {
                match entry {
                    Entry::Baseline(Baseline::Hash(hash)) => last_hash = Some(hash),
                    Entry::Baseline(Baseline::Text(text)) => {
                        last_hash = Some(fermata_docs::source_hash(&text));
                    }
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
        let recorder = Recorder {
            channel,
            queue,
            bursts: Bursts::spread(),
        };
        recorder.submit(Entry::Baseline(Baseline::of(doc)));
        (recorder, recording)
    }

    /// The room reloaded its document: the burst in progress ends with the reloaded text, which
    /// is the baseline from now on.
    pub(crate) fn reset(&mut self, doc: &OpenDocument) {
        self.settle(doc);
        self.submit(Entry::Baseline(Baseline::of(doc)));
    }

    /// Called before the document changes by a batch whose updates came from `authors`: ends
    /// the burst in progress, with `doc`'s text, unless the batch continues it.
    pub(crate) fn before_batch<'a>(
        &mut self,
        authors: impl IntoIterator<Item = &'a UserId>,
        doc: &OpenDocument,
    ) {
        if !self.bursts.continued_by(authors, Instant::now()) {
            self.settle(doc);
        }
    }

    /// An acknowledged batch, credited to `author`, left `doc`: it starts or extends a burst
    /// (recorded when it ends), or, with no one to credit, is recorded at once. The credit is
    /// one of the batch's writers, so [`before_batch`] already ended any burst it does not
    /// continue.
    ///
    /// [`before_batch`]: Recorder::before_batch
    pub(crate) fn batched(&mut self, author: Option<UserId>, doc: &OpenDocument) {
        match author {
            Some(author) => self
                .bursts
                .extend(author, Instant::now(), UnixMillis::now()),
            None => self.changed(None, doc),
        }
    }

    /// An acknowledged change credited to `author` left `doc`: recorded at once, after the burst
    /// in progress (which the room ends with [`settle`] before a change recorded at once: a
    /// program's rewrite or update, a restore).
    ///
    /// [`settle`]: Recorder::settle
    pub(crate) fn changed(&mut self, author: Option<UserId>, doc: &OpenDocument) {
        self.settle(doc);
        self.submit(Entry::Change {
            text: doc.doc.text(),
            revision: doc.revision,
            author,
            at: UnixMillis::now(),
        });
    }

    /// When the burst in progress ends if nothing else happens.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.bursts.deadline()
    }

    /// Ends the burst in progress, if any, recording `doc`'s text: the room calls it at the
    /// burst's deadline, before its document changes otherwise, and when it closes.
    pub(crate) fn settle(&mut self, doc: &OpenDocument) {
        if let Some(burst) = self.bursts.end() {
            self.submit(Entry::Change {
                text: doc.doc.text(),
                revision: doc.revision,
                author: Some(burst.author),
                at: burst.at,
            });
        }
    }

    fn submit(&self, entry: Entry) {
        if self.queue.try_send(entry).is_err() {
            tracing::warn!(document = %self.channel, "history missed a change: its queue is full");
        }
    }
}

/// One member's burst of changes, not yet recorded.
#[derive(Debug, Clone, PartialEq)]
struct Burst {
    author: UserId,
    /// When its first change was acknowledged.
    began: Instant,
    /// When its last change was acknowledged, on the room's clock and as recorded.
    last: Instant,
    at: UnixMillis,
}

/// The burst in progress: a member's changes acknowledged less than [`SETTLE`] apart, for at
/// most `hold` (at least [`HOLD_AT_MOST`]), recorded as the last of them.
#[derive(Debug)]
struct Bursts {
    current: Option<Burst>,
    /// The longest a burst is held, drawn for the room (see `spread.rs`).
    hold: Duration,
}

impl Default for Bursts {
    fn default() -> Self {
        Bursts {
            current: None,
            hold: HOLD_AT_MOST,
        }
    }
}

impl Bursts {
    /// A room's bursts, held for its own share beyond [`HOLD_AT_MOST`].
    fn spread() -> Self {
        Bursts {
            current: None,
            hold: spread(HOLD_AT_MOST),
        }
    }

    /// Whether a batch by `authors` at `now` continues the burst in progress (so it need not be
    /// recorded first): all of them are its member, and it has not run out. True with no burst.
    fn continued_by<'a>(
        &self,
        authors: impl IntoIterator<Item = &'a UserId>,
        now: Instant,
    ) -> bool {
        match &self.current {
            None => true,
            Some(burst) => {
                now < burst.deadline(self.hold)
                    && authors.into_iter().all(|author| *author == burst.author)
            }
        }
    }

    /// A change by `author` at `now` (`at` on the recorded clock): extends the burst in progress,
    /// or starts one. A burst it does not continue ([`Bursts::continued_by`]) was ended before
    /// the change, while its text could still be taken.
    fn extend(&mut self, author: UserId, now: Instant, at: UnixMillis) {
        match &mut self.current {
            Some(burst) => {
                debug_assert_eq!(
                    burst.author, author,
                    "a burst ended before another's change"
                );
                burst.last = now;
                burst.at = at;
            }
            None => {
                self.current = Some(Burst {
                    author,
                    began: now,
                    last: now,
                    at,
                })
            }
        }
    }

    fn deadline(&self) -> Option<Instant> {
        self.current.as_ref().map(|burst| burst.deadline(self.hold))
    }

    fn end(&mut self) -> Option<Burst> {
        self.current.take()
    }
}

impl Burst {
    /// When it is recorded if no change of its member comes first, held at most `hold`.
    fn deadline(&self, hold: Duration) -> Instant {
        (self.last + SETTLE).min(self.began + hold)
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

    fn member(name: &str) -> UserId {
        UserId(name.to_owned())
    }

    #[test]
    fn a_members_changes_extend_one_burst_until_they_pause() {
        let (mut bursts, start, ann) = (Bursts::default(), Instant::now(), member("ann"));
        assert!(
            bursts.continued_by([&ann], start),
            "no burst: nothing to end"
        );
        bursts.extend(ann.clone(), start, UnixMillis(1));
        let later = start + Duration::from_millis(900);
        assert!(bursts.continued_by([&ann], later));
        bursts.extend(ann.clone(), later, UnixMillis(2));
        assert_eq!(bursts.deadline(), Some(later + SETTLE));
        // A second of quiet ends it.
        assert!(!bursts.continued_by([&ann], later + SETTLE));
        let ended = bursts.end().unwrap();
        assert_eq!((ended.began, ended.at), (start, UnixMillis(2)));
    }

    #[test]
    fn another_members_change_ends_the_burst() {
        let (mut bursts, start) = (Bursts::default(), Instant::now());
        let (ann, bob) = (member("ann"), member("bob"));
        bursts.extend(ann.clone(), start, UnixMillis(1));
        assert!(!bursts.continued_by([&bob], start));
        assert!(
            !bursts.continued_by([&ann, &bob], start),
            "a batch that mixes members"
        );
        assert_eq!(bursts.end().unwrap().author, ann);
        bursts.extend(bob.clone(), start, UnixMillis(2));
        assert_eq!(bursts.end().unwrap().author, bob);
        assert_eq!(bursts.deadline(), None);
    }

    #[test]
    fn a_burst_is_held_at_most_five_seconds() {
        let (mut bursts, start, ann) = (Bursts::default(), Instant::now(), member("ann"));
        bursts.extend(ann.clone(), start, UnixMillis(0));
        let mut now = start;
        while now < start + HOLD_AT_MOST - Duration::from_millis(500) {
            now += Duration::from_millis(500);
            bursts.extend(ann.clone(), now, UnixMillis(0));
        }
        assert_eq!(bursts.deadline(), Some(start + HOLD_AT_MOST));
        assert!(!bursts.continued_by([&ann], start + HOLD_AT_MOST));
    }
}
