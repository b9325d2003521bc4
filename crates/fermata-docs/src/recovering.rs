//! Recovery while the store reads: [`Recovering`], the [`RecoveryReceiver`] that recovers a
//! document as its snapshot arrives.
//!
//! A journal longer than [`OVERLAP_FROM`] sequences after the checkpoint comes from the store in
//! several runs, and replaying it costs about as much as reading it. Such a recovery runs on a
//! thread of its own: the checkpoint is loaded and each run replayed there while the store reads
//! the next one, so the two overlap on two cores. A shorter journal, which the store reads in
//! one statement and hands over at once, is recovered in place, without a thread to start. Both
//! take the same steps in the same order ([`crate::recovery`]), so they refuse the same stored
//! data with the same error.

use std::sync::mpsc;
use std::thread::{self, JoinHandle};

use fermata_store::{Channel, ChannelId, Event, JournalUpdate, RecoveryHead, RecoveryReceiver};

use crate::recovery::{Head, OpenDocument, Recovery, RecoveryError, RecoveryProblem};

/// The journal length, in sequences after the checkpoint, from which a recovery runs on a thread
/// of its own: the store reads up to 4,096 in one statement, so shorter journals arrive whole.
pub const OVERLAP_FROM: i64 = 4096;

/// A document recovered as the store reads it. Hand it to
/// [`fermata_store::CollaborationStore::read_for_recovery`]; when the read succeeds,
/// [`Self::finish`] answers the open document or why its stored data was refused. A read that
/// failed leaves it unfinished: drop it.
#[derive(Debug)]
pub struct Recovering {
    id: ChannelId,
    /// Journals longer than this many sequences are replayed on a thread of their own.
    overlap_from: i64,
    /// The channel as the store read it, for the caller's own checks.
    channel: Option<Channel>,
    state: State,
}

#[derive(Debug)]
enum State {
    /// Nothing received yet.
    Waiting,
    /// Recovering in place; `read` once the rest has arrived.
    InPlace {
        recovery: Result<Box<Recovery>, RecoveryError>,
        read: bool,
    },
    /// Recovering on a thread of its own, fed through `steps`.
    Threaded {
        steps: mpsc::Sender<Step>,
        thread: JoinHandle<Result<OpenDocument, RecoveryError>>,
    },
}

/// What the store hands over after the head, passed on to a recovery's thread.
#[derive(Debug)]
enum Step {
    Head(Box<RecoveryHead>),
    Journal(Vec<JournalUpdate>),
    Rest,
}

impl Recovering {
    /// A recovery of document `id`, waiting for its snapshot.
    pub fn new(id: &ChannelId) -> Self {
        Recovering {
            id: id.clone(),
            overlap_from: OVERLAP_FROM,
            channel: None,
            state: State::Waiting,
        }
    }

    /// A recovery of `id` that runs on a thread of its own whatever its journal's length.
    #[cfg(test)]
    pub(crate) fn on_a_thread(id: &ChannelId) -> Self {
        Recovering {
            overlap_from: -1,
            ..Recovering::new(id)
        }
    }

    /// The channel as the store read it, once it has arrived.
    pub fn channel(&self) -> Option<&Channel> {
        self.channel.as_ref()
    }

    /// The channel as read and the recovered document, once the store's read succeeded. The
    /// checkpoint's state is moved into the document, not copied, and when no journal follows the
    /// document keeps those bytes as its answer to the first client that holds nothing
    /// ([`crate::SourceDoc::sync_answer`]).
    pub fn finish(self) -> Result<(Channel, OpenDocument), RecoveryError> {
        let unfinished = || RecoveryError::new(self.id.clone(), RecoveryProblem::Unfinished);
        let channel = self.channel.ok_or_else(unfinished)?;
        let open = match self.state {
            State::Waiting => Err(unfinished()),
            State::InPlace {
                recovery,
                read: true,
            } => recovery?.finish(),
            State::InPlace { read: false, .. } => Err(unfinished()),
            State::Threaded { steps, thread } => {
                drop(steps);
                thread
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            }
        }?;
        Ok((channel, open))
    }
}

/// Begins a recovery from an owned head, its checkpoint's state moved into the document.
fn begin(mut head: RecoveryHead) -> Result<Box<Recovery>, RecoveryError> {
    let state = head
        .checkpoint
        .as_mut()
        .map(|checkpoint| std::mem::take(&mut checkpoint.state));
    Recovery::begin(
        Head {
            channel: &head.channel,
            sidecar: head.sidecar.as_ref(),
            checkpoint: head.checkpoint.as_ref(),
            expected: &head.expected_update_sequences,
        },
        state,
    )
    .map(Box::new)
}

/// A recovery's thread: begins from the head it is sent first, replays each run, and finishes
/// when the rest has been read. Steps that stop before the rest mean the read failed: the answer
/// is then never asked for.
fn recover_on_thread(
    id: &ChannelId,
    steps: &mpsc::Receiver<Step>,
) -> Result<OpenDocument, RecoveryError> {
    let unfinished = || RecoveryError::new(id.clone(), RecoveryProblem::Unfinished);
    let Ok(Step::Head(head)) = steps.recv() else {
        return Err(unfinished());
    };
    let mut recovery = begin(*head)?;
    for step in steps {
        match step {
            Step::Journal(run) => recovery.replay(&run)?,
            Step::Rest => return recovery.finish(),
            Step::Head(_) => break,
        }
    }
    Err(unfinished())
}

impl RecoveryReceiver for Recovering {
    fn head(&mut self, head: RecoveryHead) {
        self.channel = Some(head.channel.clone());
        let after = head.checkpoint.as_ref().map_or(0, |c| c.through_sequence);
        if head.channel.sequence.saturating_sub(after) > self.overlap_from {
            let (steps, received) = mpsc::channel();
            let id = self.id.clone();
            let spawned = thread::Builder::new()
                .name("fermata-recovery".to_owned())
                .spawn(move || recover_on_thread(&id, &received));
            // A thread that cannot start leaves the recovery in place.
            if let Ok(thread) = spawned {
                // The thread holds the receiving end until it answers, so this cannot fail.
                drop(steps.send(Step::Head(Box::new(head))));
                self.state = State::Threaded { steps, thread };
                return;
            }
        }
        self.state = State::InPlace {
            recovery: begin(head),
            read: false,
        };
    }

    fn journal(&mut self, run: Vec<JournalUpdate>) {
        match &mut self.state {
            State::InPlace {
                recovery: Ok(recovery),
                ..
            } => {
                if let Err(error) = recovery.replay(&run) {
                    self.state = State::InPlace {
                        recovery: Err(error),
                        read: false,
                    };
                }
            }
            // A thread that stopped at a refusal no longer listens: its answer says why.
            State::Threaded { steps, .. } => drop(steps.send(Step::Journal(run))),
            State::InPlace {
                recovery: Err(_), ..
            }
            | State::Waiting => {}
        }
    }

    fn rest(&mut self, _events: Vec<Event>) {
        match &mut self.state {
            State::InPlace { read, .. } => *read = true,
            State::Threaded { steps, .. } => drop(steps.send(Step::Rest)),
            State::Waiting => {}
        }
    }
}

/// Hands `snapshot` to `receiver` as a store would, its journal in runs of `run` updates.
#[cfg(test)]
pub(crate) fn hand_over(
    snapshot: fermata_store::RecoverySnapshot,
    run: usize,
    receiver: &mut dyn RecoveryReceiver,
) {
    receiver.head(RecoveryHead {
        channel: snapshot.channel,
        sidecar: snapshot.sidecar,
        checkpoint: snapshot.checkpoint,
        expected_update_sequences: snapshot.expected_update_sequences,
    });
    for updates in snapshot.updates.chunks(run.max(1)) {
        receiver.journal(updates.to_vec());
    }
    receiver.rest(snapshot.events);
}
