//! The startup sequence, run under the writer lease before any room opens, in this order:
//!
//! 1. remove expired and metadata-only sessions and clear every Planner owner reference, except
//!    that of a document whose link hold names the owning session, which the reset keeps (one
//!    fenced transaction: [`fermata_store::PlannerStore::reset_owners`]);
//! 2. clear child documents' conversations from both the state and the latest snapshot, and
//!    reset their reserved summary and transcript cursor; a child whose decision records cite the
//!    Chat is left unchanged and its ID logged ([`fermata_docs::clear_child_conversation`]);
//! 3. close the deferred turns an earlier release left open;
//! 4. index again, from its whole journal, each document whose search text an upgrade took from
//!    its last checkpoint while commits followed it ([`fermata_store::SearchStore::stale_texts`]);
//!    a document that does not recover is logged and left for the next start.
//!
//! Every step is idempotent, so it runs at every start and a second run finds nothing to do. The
//! first step that fails ends the sequence with a [`StartupFailure`], and the process must not
//! serve: it would serve with stale owners and sessions. The next start runs the sequence again
//! from the top. The counts of a sequence that completes are logged once, in one report.

use fermata_docs::{ChildClearing, clear_child_conversation, recover};
use fermata_store::{
    ChannelId, ChildConversation, ClearedChild, DeferredTurnRetirement, ErrorChain, ErrorKind,
    Fence, OwnerReset, SidecarState, Storage, StoreError, StoreResult,
};

/// What the startup sequence did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StartupReport {
    pub owners: OwnerReset,
    pub children: ChildrenCleared,
    pub deferred_turns: DeferredTurnRetirement,
    pub search_texts: SearchTextsRefreshed,
}

/// The step of the startup sequence that failed, with the store's error as its cause.
#[derive(Debug, thiserror::Error)]
#[error("the startup reset could not {step}")]
pub struct StartupFailure {
    pub step: &'static str,
    #[source]
    pub source: StoreError,
}

/// What clearing children's conversations did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildrenCleared {
    /// Children whose sidecars or reserved context were rewritten.
    pub cleared: u64,
    /// Children left unchanged because a decision record cites the Chat.
    pub citing_chat: Vec<ChannelId>,
    /// Children left unchanged because a sidecar could not be read.
    pub unreadable: Vec<ChannelId>,
}

/// What indexing stale search texts again did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchTextsRefreshed {
    /// Documents whose whole text is indexed now.
    pub refreshed: u64,
    /// Documents left as they were because they did not recover.
    pub unreadable: Vec<ChannelId>,
}

/// How many stale documents are listed at a time.
const STALE_PAGE: usize = 100;

/// Runs the startup sequence under `fence` and logs its report; stops at the first step that
/// fails.
pub async fn run(storage: &dyn Storage, fence: &Fence) -> Result<StartupReport, StartupFailure> {
    let failed = |step| move |source| StartupFailure { step, source };
    let owners = storage
        .planner()
        .reset_owners(fence)
        .await
        .map_err(failed("remove sessions and reset Planner owners"))?;
    let children = clear_children(storage, fence)
        .await
        .map_err(failed("clear child conversations"))?;
    let deferred_turns = storage
        .planner()
        .retire_deferred_turns(fence)
        .await
        .map_err(failed("retire deferred Planner turns"))?;
    let search_texts = refresh_search_texts(storage, fence)
        .await
        .map_err(failed("index stale search texts again"))?;
    let report = StartupReport {
        owners,
        children,
        deferred_turns,
        search_texts,
    };
    log(&report);
    Ok(report)
}

fn log(report: &StartupReport) {
    let owners = report.owners;
    let children = &report.children;
    let turns = report.deferred_turns;
    let search = &report.search_texts;
    tracing::info!(
        expired_sessions = owners.sessions.expired,
        metadata_only_sessions = owners.sessions.metadata_only,
        planner_owners_cleared = owners.owners_cleared,
        planner_owners_kept = owners.owners_kept,
        child_conversations_cleared = children.cleared,
        children_citing_chat = children.citing_chat.len(),
        children_unreadable = children.unreadable.len(),
        deferred_turns_cancelled = turns.cancelled,
        deferred_turns_interrupted = turns.interrupted,
        search_texts_refreshed = search.refreshed,
        search_texts_unreadable = search.unreadable.len(),
        "startup reset under the writer lease"
    );
}

async fn clear_children(storage: &dyn Storage, fence: &Fence) -> StoreResult<ChildrenCleared> {
    let planner = storage.planner();
    let mut report = ChildrenCleared::default();
    for child in planner.child_conversations().await? {
        match plan(&child) {
            Plan::Unchanged => {}
            Plan::CitesChat => {
                tracing::warn!(
                    document = %child.channel,
                    "a child document's decisions cite its Chat: its conversation is kept"
                );
                report.citing_chat.push(child.channel);
            }
            Plan::Unreadable(problem) => {
                tracing::warn!(
                    document = %child.channel,
                    %problem,
                    "a child document's sidecar does not read: its conversation is kept"
                );
                report.unreadable.push(child.channel);
            }
            Plan::Rewrite(cleared) => {
                planner.replace_child_sidecars(fence, &cleared).await?;
                report.cleared += 1;
            }
        }
    }
    Ok(report)
}

/// Indexes again, from its whole journal, every document whose search text may be behind it.
async fn refresh_search_texts(
    storage: &dyn Storage,
    fence: &Fence,
) -> StoreResult<SearchTextsRefreshed> {
    let search = storage.search();
    let mut report = SearchTextsRefreshed::default();
    let mut after: Option<ChannelId> = None;
    loop {
        let stale = search.stale_texts(after.as_ref(), STALE_PAGE).await?;
        let Some(last) = stale.last().cloned() else {
            return Ok(report);
        };
        for id in stale {
            let snapshot = match storage.collaboration().recovery_snapshot(&id).await {
                Ok(snapshot) => snapshot,
                // Deleted since it was listed: its search row went with it.
                Err(error) if error.kind() == ErrorKind::Missing => continue,
                Err(error) => return Err(error),
            };
            match recover(&snapshot) {
                Ok(open) => {
                    let text = open.doc.text();
                    if search
                        .refresh_text(fence, &id, snapshot.channel.revision, &text)
                        .await?
                    {
                        report.refreshed += 1;
                    }
                }
                Err(error) => {
                    tracing::warn!(
                        document = %id,
                        error = %ErrorChain(&error),
                        "a document does not recover: its search text stays as an upgrade indexed it"
                    );
                    report.unreadable.push(id);
                }
            }
        }
        after = Some(last);
    }
}

enum Plan {
    Unchanged,
    CitesChat,
    Unreadable(String),
    Rewrite(ClearedChild),
}

/// What to do with one child: both sidecars are judged before either is written.
fn plan(child: &ChildConversation) -> Plan {
    let judge = |sidecar: &Option<SidecarState>| {
        sidecar
            .as_ref()
            .map_or(Ok(ChildClearing::Nothing), clear_child_conversation)
    };
    let (state, snapshot) = match (judge(&child.state), judge(&child.snapshot)) {
        (Ok(state), Ok(snapshot)) => (state, snapshot),
        (Err(error), _) | (_, Err(error)) => return Plan::Unreadable(error.to_string()),
    };
    if state == ChildClearing::CitesChat || snapshot == ChildClearing::CitesChat {
        return Plan::CitesChat;
    }
    let cleared = |clearing| match clearing {
        ChildClearing::Cleared(sidecar) => Some(sidecar),
        ChildClearing::Nothing | ChildClearing::CitesChat => None,
    };
    let rewrite = ClearedChild {
        channel: child.channel.clone(),
        state: cleared(state),
        snapshot: cleared(snapshot),
    };
    if rewrite.state.is_none() && rewrite.snapshot.is_none() && !child.has_reserved_context {
        Plan::Unchanged
    } else {
        Plan::Rewrite(rewrite)
    }
}
