//! The memory adapter's history store, and the one call that forgets a deleted document's
//! history and Chat rows.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::{MemoryStorage, State};
use fermata_store::channel::ChannelId;
use fermata_store::error::StoreResult;
use fermata_store::history::{
    Change, HistoryStore, MAX_VERSIONS_LISTED, Recorded, Version, next_session,
};
use fermata_store::lease::Fence;

/// Every session, by document and number.
#[derive(Debug, Default)]
pub(super) struct Versions {
    rows: BTreeMap<(ChannelId, i64), Version>,
}

impl Versions {
    fn of<'a>(&'a self, channel: &ChannelId) -> impl DoubleEndedIterator<Item = &'a Version> {
        self.rows
            .range((channel.clone(), i64::MIN)..=(channel.clone(), i64::MAX))
            .map(|(_, v)| v)
    }
}

/// Removes a deleted document's history and Chat rows (its foreign keys cascade in SQL).
pub(super) fn forget_channel(state: &mut State, id: &ChannelId) {
    state.history.rows.retain(|(channel, _), _| channel != id);
    state.chat.forget(id);
}

#[async_trait]
impl HistoryStore for MemoryStorage {
    async fn record(&self, fence: &Fence, change: &Change) -> StoreResult<Recorded> {
        change.check()?;
        self.inner
            .fenced(fence, |state, _now| {
                state.documents.require(&change.channel)?;
                let latest = state.history.of(&change.channel).next_back();
                let recorded = next_session(latest, change)?;
                let version = &recorded.version;
                state
                    .history
                    .rows
                    .insert((version.channel.clone(), version.number), version.clone());
                Ok(recorded)
            })
            .await
    }

    async fn versions(&self, channel: &ChannelId, limit: usize) -> StoreResult<Vec<Version>> {
        let state = self.inner.state();
        Ok(state
            .history
            .of(channel)
            .rev()
            .take(limit.min(MAX_VERSIONS_LISTED))
            .cloned()
            .collect())
    }

    async fn version(&self, channel: &ChannelId, number: i64) -> StoreResult<Option<Version>> {
        let state = self.inner.state();
        Ok(state.history.rows.get(&(channel.clone(), number)).cloned())
    }
}
