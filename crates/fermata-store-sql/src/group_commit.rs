//! Group commit across documents: the document commits that wait while another runs share the
//! next fenced transaction, so one `BEGIN`, one fence check and one durable `COMMIT` (one flush)
//! carry the batches of several rooms.
//!
//! The storage contract's rule stays (docs/storage.md): the writes of one lease run one at a
//! time, each in a transaction that holds the lease row (see `fence.rs`). A commit joins a queue
//! and then waits to lead; the leader takes every commit waiting under the same fence (at most
//! [`MAX_GROUP`]), the first in the queue first, and runs them in one fenced transaction. A group
//! of one runs as a lone commit, in a transaction of its own (its fence check rides in its
//! query; see `commit_statement.rs`).
//!
//! In a larger group, the members whose writes are all of their commit or nothing (no title, no
//! events) and that are each the first of the group on their document are written by one
//! statement (`commit_statement::render_group`): one round trip (PostgreSQL) or one hand-off to
//! the connection's thread (SQLite) for all of them, not one each (see [`steps`]); a member it
//! did not write (stale, archived, or a repeated operation) wrote nothing, and is answered from
//! reads. Every other member runs alone, after a savepoint (on SQLite the savepoint goes to the
//! connection's thread with the member's commit, one hand-off instead of two); a member that is
//! refused, fails, or is answered as a repeat is rolled back to its savepoint alone, so it never
//! fails another member. On PostgreSQL a member that runs alone and whose one statement writes
//! all of its commit or nothing needs no savepoint, one round trip less. Where no savepoint was
//! set, a refusal wrote nothing (a statement after a refusal checks that the transaction is
//! still usable), and should a statement fail outright (the database failing, which no refusal
//! does) the group's transaction fails with it, as when a savepoint cannot be set. Each caller
//! hears only its own answer, and a written one only after the transaction committed: if the
//! `COMMIT` fails, every member that wrote hears that failure (and may retry under the same
//! operation ID, which answers as a repeat if it did commit).
//!
//! A caller that goes away before its commit was taken leaves the queue with it; one that goes away
//! later has its commit run and its answer dropped, as if the connection had closed after the
//! commit.

use std::collections::HashSet;
use std::sync::Mutex;

use fermata_store::{Commit, Committed, Fence, StoreError, StoreResult};
use tokio::sync::oneshot;

use crate::SqlStorage;
use crate::collaboration::{CommitWrites, MemberSavepoint};
use crate::error::StoreContext;
use crate::fence::FencedTransaction;

/// The most commits one transaction carries: enough to share one `BEGIN`, fence check, `COMMIT`
/// and flush (and one group statement) among many rooms when many type at once.
/// The members that need a savepoint of their own (a title or events) are few, so a group rarely
/// holds more than the 64 subtransactions PostgreSQL caches per transaction, past which it is only
/// slower.
pub(crate) const MAX_GROUP: usize = 128;

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
            let group = self.take_group();
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
    /// queue order, at most [`MAX_GROUP`].
    fn take_group(&self) -> Vec<Member> {
        let mut waiting = self.waiting();
        let Some(fence) = waiting.members.first().map(|member| member.fence.clone()) else {
            return Vec::new();
        };
        let mut group = Vec::new();
        let mut rest = Vec::new();
        for member in waiting.members.drain(..) {
            if group.len() < MAX_GROUP && member.fence == fence {
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
        let commits: Vec<&Commit> = group.iter().map(|member| &member.commit).collect();
        let (outcomes, broken) = self.run_steps(&mut tx, &commits).await;
        drop(commits);
        let mut members: Vec<Option<Member>> = group.into_iter().map(Some).collect();
        let mut written = Vec::new();
        for (at, outcome) in outcomes {
            let member = members[at].take().expect("each member runs once");
            match outcome {
                MemberOutcome::Wrote(committed) => written.push((member, committed)),
                MemberOutcome::Answered(answer) => {
                    let _ = member.answer.send(answer);
                }
            }
        }
        if let Some(broken) = broken {
            // The transaction can no longer tell one member's writes from another's: nothing in
            // it commits, and the members not yet run are not run.
            let unanswered = written.into_iter().map(|(member, _)| member);
            return answer_all(unanswered.chain(members.into_iter().flatten()), &broken);
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

    /// Runs the members of a group, `commits`, in `tx` (see [`steps`]): what each that ran came
    /// to, by its place in the group, and the failure that broke the transaction, after which
    /// the rest did not run.
    async fn run_steps(
        &self,
        tx: &mut FencedTransaction,
        commits: &[&Commit],
    ) -> (Vec<(usize, MemberOutcome)>, Option<StoreError>) {
        let steps = steps(commits, self.group_statement(), SqlStorage::writes_together);
        let mut outcomes = Vec::with_capacity(commits.len());
        for step in steps {
            let ran = match step {
                Step::Alone(at) => self
                    .commit_member(tx, commits[at])
                    .await
                    .map(|outcome| vec![(at, outcome)]),
                Step::Together(statement, members) => {
                    let these: Vec<&Commit> = members.iter().map(|&at| commits[at]).collect();
                    self.commit_together(tx, statement, &these)
                        .await
                        .map(|ran| members.into_iter().zip(ran).collect())
                }
            };
            match ran {
                Ok(ran) => outcomes.extend(ran),
                Err(broken) => return (outcomes, Some(broken)),
            }
        }
        (outcomes, None)
    }

    /// Writes members of a larger group at once with `statement` (see [`steps`]), then answers
    /// those it did not write from reads, as a refused lone commit is answered. `Err` when the
    /// statement failed, which fails the group, or when a refusal left the transaction aborted.
    async fn commit_together(
        &self,
        tx: &mut FencedTransaction,
        statement: &str,
        commits: &[&Commit],
    ) -> StoreResult<Vec<MemberOutcome>> {
        let action = "committing to documents";
        let written = self.write_together(tx, statement, commits).await?;
        let mut outcomes = Vec::with_capacity(commits.len());
        let mut refused = false;
        for (commit, written) in commits.iter().zip(written) {
            outcomes.push(match self.finish_commit(tx, commit, written).await {
                Ok(CommitWrites::Kept(committed)) => MemberOutcome::Wrote(committed),
                Ok(CommitWrites::Nothing(answer)) => MemberOutcome::Answered(Ok(answer)),
                Err(error) => {
                    refused = true;
                    MemberOutcome::Answered(Err(error))
                }
            });
        }
        if refused {
            // As after a member without a savepoint (see `commit_member`).
            sqlx::query(CHECK_TRANSACTION)
                .execute(tx.conn())
                .await
                .context(action)?;
        }
        Ok(outcomes)
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

/// How members of a group run in its transaction.
#[derive(Debug, PartialEq, Eq)]
enum Step<'s> {
    /// The member at this place in the group, alone (after its savepoint, where it needs one).
    Alone(usize),
    /// The members at these places, written at once by this statement.
    Together(&'s str, Vec<usize>),
}

/// The steps that run a group's `commits` (in queue order) in its transaction, `statement`
/// writing several at once: the commits that `joins` admits and that are each the first still
/// to run on their document run together, when there are at least two; otherwise the first
/// commit still to run runs alone. Either way each document's commits run in queue order.
fn steps<'s>(
    commits: &[&Commit],
    statement: &'s str,
    joins: impl Fn(&Commit) -> bool,
) -> Vec<Step<'s>> {
    let mut pending: Vec<usize> = (0..commits.len()).collect();
    let mut steps = Vec::new();
    while let Some(&first) = pending.first() {
        let mut documents = HashSet::new();
        let together: Vec<usize> = pending
            .iter()
            .copied()
            // Every document is marked as met, whether its first commit joins or not.
            .filter(|&at| documents.insert(&commits[at].channel) && joins(commits[at]))
            .collect();
        if together.len() > 1 {
            pending.retain(|at| !together.contains(at));
            steps.push(Step::Together(statement, together));
        } else {
            pending.remove(0);
            steps.push(Step::Alone(first));
        }
    }
    steps
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

#[cfg(test)]
mod tests {
    use fermata_store::ChannelId;
    use fermata_store::collaboration::OperationId;

    use super::*;

    /// A commit to document `channel` under operation ID `operation`.
    fn commit(channel: &str, operation: &str) -> Commit {
        Commit {
            channel: ChannelId(channel.to_owned()),
            operation: OperationId::new(operation).unwrap(),
            expected_revision: 0,
            update: Some(b"x".to_vec()),
            sidecar: None,
            events: Vec::new(),
            title: None,
            text: None,
        }
    }

    fn plan(group: &[(&str, &str)], alone: &[&str]) -> Vec<Step<'static>> {
        let commits: Vec<Commit> = group
            .iter()
            .map(|(channel, operation)| commit(channel, operation))
            .collect();
        let commits: Vec<&Commit> = commits.iter().collect();
        steps(&commits, "S", |commit| {
            !alone.contains(&commit.operation.as_str())
        })
    }

    #[test]
    fn members_that_cannot_join_run_alone_in_queue_order() {
        let group = [("a", "1"), ("b", "2"), ("a", "3")];
        assert_eq!(
            plan(&group, &["1", "2", "3"]),
            vec![Step::Alone(0), Step::Alone(1), Step::Alone(2)]
        );
    }

    #[test]
    fn the_first_commit_of_each_document_runs_together_and_later_ones_after() {
        let group = [("a", "1"), ("b", "2"), ("a", "3"), ("c", "4"), ("a", "5")];
        assert_eq!(
            plan(&group, &[]),
            vec![
                Step::Together("S", vec![0, 1, 3]),
                // One left on document a at a time: it runs alone, the next after it.
                Step::Alone(2),
                Step::Alone(4),
            ]
        );
    }

    #[test]
    fn a_commit_that_must_run_alone_holds_back_the_later_commits_of_its_document() {
        // b's first commit (a title, say) runs alone; b's second may not overtake it.
        let group = [("a", "1"), ("b", "title"), ("b", "3"), ("c", "4")];
        assert_eq!(
            plan(&group, &["title"]),
            vec![
                Step::Together("S", vec![0, 3]),
                Step::Alone(1),
                Step::Alone(2),
            ]
        );
        // With one joiner only, the queue runs in order.
        let group = [("a", "title"), ("b", "2")];
        assert_eq!(
            plan(&group, &["title"]),
            vec![Step::Alone(0), Step::Alone(1)]
        );
    }
}
