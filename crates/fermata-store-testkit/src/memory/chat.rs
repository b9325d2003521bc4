//! The memory adapter's chat store: threads, top-level sessions and run stages.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::{MemoryStorage, remove_where};
use fermata_store::channel::ChannelId;
use fermata_store::chat::{
    ChatKey, ChatStore, ChatThread, RunStage, SessionState, SessionStateDraft, ThreadDraft,
};
use fermata_store::error::StoreResult;
use fermata_store::lease::Fence;

/// Every Chat row, by document.
#[derive(Debug, Default)]
pub(super) struct ChatTables {
    threads: BTreeMap<(ChannelId, ChatKey), ChatThread>,
    sessions: BTreeMap<ChannelId, SessionState>,
    stages: BTreeMap<(ChannelId, ChatKey, ChatKey), RunStage>,
}

impl ChatTables {
    pub(super) fn forget(&mut self, id: &ChannelId) {
        self.threads.retain(|(channel, _), _| channel != id);
        self.sessions.remove(id);
        self.stages.retain(|(channel, _, _), _| channel != id);
    }
}

#[async_trait]
impl ChatStore for MemoryStorage {
    async fn put_thread(&self, fence: &Fence, thread: &ThreadDraft) -> StoreResult<ChatThread> {
        thread.check()?;
        self.inner
            .fenced(fence, |state, now| {
                state.documents.require(&thread.channel)?;
                let stored = ChatThread {
                    thread: thread.clone(),
                    updated_at: now,
                    fencing_token: fence.token,
                };
                state.chat.threads.insert(
                    (thread.channel.clone(), thread.root_id.clone()),
                    stored.clone(),
                );
                Ok(stored)
            })
            .await
    }

    async fn thread(&self, channel: &ChannelId, root: &ChatKey) -> StoreResult<Option<ChatThread>> {
        let state = self.inner.state();
        Ok(state
            .chat
            .threads
            .get(&(channel.clone(), root.clone()))
            .cloned())
    }

    async fn threads(&self, channel: &ChannelId) -> StoreResult<Vec<ChatThread>> {
        let state = self.inner.state();
        Ok(state
            .chat
            .threads
            .iter()
            .filter(|((c, _), _)| c == channel)
            .map(|(_, t)| t.clone())
            .collect())
    }

    async fn remove_thread(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        root: &ChatKey,
    ) -> StoreResult<bool> {
        self.inner
            .fenced(fence, |state, _now| {
                Ok(state
                    .chat
                    .threads
                    .remove(&(channel.clone(), root.clone()))
                    .is_some())
            })
            .await
    }

    async fn put_session_state(
        &self,
        fence: &Fence,
        draft: &SessionStateDraft,
    ) -> StoreResult<SessionState> {
        draft.check()?;
        self.inner
            .fenced(fence, |state, now| {
                state.documents.require(&draft.channel)?;
                let stored = SessionState {
                    state: draft.clone(),
                    updated_at: now,
                    fencing_token: fence.token,
                };
                state
                    .chat
                    .sessions
                    .insert(draft.channel.clone(), stored.clone());
                Ok(stored)
            })
            .await
    }

    async fn session_state(&self, channel: &ChannelId) -> StoreResult<Option<SessionState>> {
        Ok(self.inner.state().chat.sessions.get(channel).cloned())
    }

    async fn put_stage(&self, fence: &Fence, stage: &RunStage) -> StoreResult<()> {
        stage.check()?;
        self.inner
            .fenced(fence, |state, _now| {
                state.documents.require(&stage.channel)?;
                state.chat.stages.insert(
                    (
                        stage.channel.clone(),
                        stage.run_id.clone(),
                        stage.stage_id.clone(),
                    ),
                    stage.clone(),
                );
                Ok(())
            })
            .await
    }

    async fn stages(&self, channel: &ChannelId) -> StoreResult<Vec<RunStage>> {
        let state = self.inner.state();
        let mut stages: Vec<RunStage> = state
            .chat
            .stages
            .iter()
            .filter(|((c, _, _), _)| c == channel)
            .map(|(_, s)| s.clone())
            .collect();
        stages.sort_by(|a, b| {
            (&a.run_id, a.order, &a.stage_id).cmp(&(&b.run_id, b.order, &b.stage_id))
        });
        Ok(stages)
    }

    async fn remove_run(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        run: &ChatKey,
    ) -> StoreResult<u64> {
        self.inner
            .fenced(fence, |state, _now| {
                Ok(remove_where(&mut state.chat.stages, |(c, r, _), _| {
                    c == channel && r == run
                }))
            })
            .await
    }
}
