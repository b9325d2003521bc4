//! Group commit across documents: the document commits that wait while another runs share the
//! next fenced transaction, so one `BEGIN`, one fence check and one durable `COMMIT` (one flush)
//! carry the batches of several rooms.
//!
//! The storage contract's rule stays (docs/storage.md): the writes of one lease run one at a
//! time, each in a transaction that holds the lease row (see `fence.rs`). A commit joins a queue
//! and then waits to lead; the leader takes every commit waiting under the same fence (at most
//! [`MAX_GROUP`], [`MAX_GROUP_SQLITE`] on SQLite), the first in the queue first, and runs them in
//! one fenced transaction. A group of one runs as a lone commit, in a transaction of its own (its
//! fence check rides in its query; see `commit_statement.rs`). In a larger group each member runs
//! after a savepoint (on SQLite the savepoint goes to the connection's thread with the member's
//! commit, one hand-off instead of two); a member that is refused, fails, or is answered as a
//! repeat is rolled back to its savepoint alone, so it never fails another member. On PostgreSQL
//! a member whose one statement writes all of its commit or nothing (no title, no events) needs
//! no savepoint, one round trip less: a refusal or a repeat wrote nothing (a statement after a
//! refusal checks that the transaction is still usable), and should its statement fail outright
//! (the database failing, which no refusal does) the group's transaction fails with it, as when a
//! savepoint cannot be set. Each caller hears only its own answer, and a written one only after
//! the transaction committed: if the `COMMIT` fails, every member that wrote hears that failure
//! (and may retry under the same operation ID, which answers as a repeat if it did commit).
//!
//! A caller that goes away before its commit was taken leaves the queue with it; one that goes away
//! later has its commit run and its answer dropped, as if the connection had closed after the
//! commit.

use std::sync::Mutex;

use fermata_store::{Commit, Committed, Fence, StoreError, StoreResult};
use tokio::sync::oneshot;

use crate::SqlStorage;
use crate::collaboration::{CommitWrites, MemberSavepoint};
use crate::error::StoreContext;
use crate::fence::FencedTransaction;

/// The most commits one transaction carries: enough to share a flush among many rooms, few
/// enough that a group's savepoints stay within what PostgreSQL caches per transaction (64).
pub(crate) const MAX_GROUP: usize = 32;
/// The same on SQLite, whose savepoints cost no more past any count: a larger group shares one
/// `BEGIN`, fence check, `COMMIT` and flush among more rooms when many type at once.
pub(crate) const MAX_GROUP_SQLITE: usize = 128;

/// Where a member's statements can be undone without touching the rest of its group.
pub(crate) const SAVEPOINT: &str = "SAVEPOINT group_member";
const ROLLBACK_MEMBER: &str = "ROLLBACK TO SAVEPOINT group_member";
/// Fails when a member without a savepoint left the transaction aborted.
const CHECK_TRANSACTION: &str = "SELECT 1";

/// The commits waiting for the next fenced transaction, and who runs it.
#[derive(Debug, Default)]
pub(crate) struct CommitQueue {
    waiting: Mutex<Waiting>,
    /// Held by the caller that runs a group; the others queue behind it.
    leader: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct Waiting {
    next_ticket: u64,
    members: Vec<Member>,
}

/// One waiting commit and where its answer goes.
#[derive(Debug)]
struct Member {
    ticket: u64,
    fence: Fence,
    commit: Commit,
    answer: oneshot::Sender<StoreResult<Committed>>,
}

/// Takes a caller's commit out of the queue when the caller goes away before a leader took it.
struct Ticket<'a> {
    queue: &'a CommitQueue,
    number: u64,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.queue
            .waiting()
            .members
            .retain(|member| member.ticket != self.number);
    }
}

impl CommitQueue {
    /// Commits `commit` under `fence`, in a transaction shared with the other commits waiting
    /// when it runs; returns this commit's own answer.
    pub(crate) async fn commit(
        &self,
        store: &SqlStorage,
        fence: &Fence,
        commit: &Commit,
    ) -> StoreResult<Committed> {
        let (answer, mut answered) = oneshot::channel();
        let _ticket = self.join(fence, commit, answer);
        loop {
            // The answer is taken as soon as it comes: leading another group first would delay it.
            let _leading = tokio::select! {
                biased;
                result = &mut answered => {
                    return result.unwrap_or_else(|_| {
                        Err(StoreError::unavailable(
                            "the transaction that carried the commit was abandoned",
                        ))
                    });
                }
                leading = self.leader.lock() => leading,
            };
            let group = self.take_group(store.group_limit());
            if !group.is_empty() {
                store.commit_group(group).await;
            }
        }
    }

    /// How many commits wait for a transaction now.
    #[cfg(feature = "testing")]
    pub(crate) fn waiting_count(&self) -> usize {
        self.waiting().members.len()
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, Waiting> {
        // A panic while the queue was held leaves it whole: every change is one `Vec` call.
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn join(
        &self,
        fence: &Fence,
        commit: &Commit,
        answer: oneshot::Sender<StoreResult<Committed>>,
    ) -> Ticket<'_> {
        let mut waiting = self.waiting();
        let ticket = waiting.next_ticket;
        waiting.next_ticket += 1;
        waiting.members.push(Member {
            ticket,
            fence: fence.clone(),
            commit: commit.clone(),
            answer,
        });
        Ticket {
            queue: self,
            number: ticket,
        }
    }

    /// The next group: the first waiting commit and those after it under the same fence, in
    /// queue order, at most `limit`.
    fn take_group(&self, limit: usize) -> Vec<Member> {
        let mut waiting = self.waiting();
        let Some(fence) = waiting.members.first().map(|member| member.fence.clone()) else {
            return Vec::new();
        };
        let mut group = Vec::new();
        let mut rest = Vec::new();
        for member in waiting.members.drain(..) {
            if group.len() < limit && member.fence == fence {
                group.push(member);
            } else {
                rest.push(member);
            }
        }
        waiting.members = rest;
        group
    }
}

impl SqlStorage {
    /// The most commits one group carries on this database.
    fn group_limit(&self) -> usize {
        match self.inner.dialect {
            crate::Dialect::Sqlite => MAX_GROUP_SQLITE,
            crate::Dialect::Postgres => MAX_GROUP,
        }
    }

    /// Runs `group` (non-empty, one fence) in one fenced transaction and answers each member.
    async fn commit_group(&self, group: Vec<Member>) {
        let action = "committing to documents";
        let fence = group[0].fence.clone();
        if group.len() == 1 {
            let member = group.into_iter().next().expect("a group of one");
            let result = self.commit_alone(&fence, &member.commit).await;
            // The caller may have gone; its commit stands or falls all the same.
            let _ = member.answer.send(result);
            return;
        }
        let mut tx = match self.inner.begin_fenced(&fence, action).await {
            Ok(tx) => tx,
            Err(error) => return answer_all(group, &error),
        };
        let mut written = Vec::new();
        let mut members = group.into_iter();
        while let Some(member) = members.next() {
            match self.commit_member(&mut tx, &member.commit).await {
                Ok(MemberOutcome::Wrote(committed)) => written.push((member, committed)),
                Ok(MemberOutcome::Answered(answer)) => {
                    let _ = member.answer.send(answer);
                }
                Err(broken) => {
                    // The transaction can no longer tell one member's writes from another's:
                    // nothing in it commits, and the members not yet run are not run.
                    let unanswered = written.into_iter().map(|(member, _)| member);
                    answer_all(unanswered.chain(members), &broken);
                    let _ = member.answer.send(Err(broken));
                    return;
                }
            }
        }
        if written.is_empty() {
            return;
        }
        match tx.commit(action).await {
            Ok(()) => {
                for (member, committed) in written {
                    let _ = member.answer.send(Ok(committed));
                }
            }
            Err(error) => answer_all(written.into_iter().map(|(member, _)| member), &error),
        }
    }

    /// Runs one member of a larger group after a savepoint where it needs one, rolling back to
    /// it unless the member wrote; `Err` when the savepoint or the rollback failed, or when a
    /// member without a savepoint left the transaction aborted.
    async fn commit_member(
        &self,
        tx: &mut FencedTransaction,
        commit: &Commit,
    ) -> StoreResult<MemberOutcome> {
        let action = "committing to documents";
        let (statement, savepoint) = self.member_commit(commit);
        if savepoint == MemberSavepoint::Separate {
            sqlx::query(SAVEPOINT)
                .execute(tx.conn())
                .await
                .context(action)?;
        }
        let answer = match self.commit_with(tx, commit, statement).await {
            Ok(CommitWrites::Kept(committed)) => return Ok(MemberOutcome::Wrote(committed)),
            Ok(CommitWrites::Nothing(answer)) => Ok(answer),
            Err(error) => Err(error),
        };
        let undo = match savepoint {
            MemberSavepoint::NotNeeded if answer.is_ok() => {
                return Ok(MemberOutcome::Answered(answer));
            }
            // A refusal is answered from reads and leaves the transaction usable; a statement
            // the database failed leaves it aborted, which the next statement finds, and the
            // group fails rather than commit without it.
            MemberSavepoint::NotNeeded => CHECK_TRANSACTION,
            MemberSavepoint::InStatement | MemberSavepoint::Separate => ROLLBACK_MEMBER,
        };
        sqlx::query(undo).execute(tx.conn()).await.context(action)?;
        Ok(MemberOutcome::Answered(answer))
    }
}

/// What one member of a larger group came to.
enum MemberOutcome {
    /// Its writes stand, to be committed with the group's.
    Wrote(Committed),
    /// Rolled back to its savepoint, with its answer: a refusal, a failure, or a repeat.
    Answered(StoreResult<Committed>),
}

/// Gives every member the same failure: the kind and safe message of `error` (its cause goes
/// to the logs of whoever reports it).
fn answer_all(members: impl IntoIterator<Item = Member>, error: &StoreError) {
    for member in members {
        let copy = StoreError::new(error.kind(), error.message().to_owned());
        let _ = member.answer.send(Err(copy));
    }
}
