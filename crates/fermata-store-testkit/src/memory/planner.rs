//! The memory adapter's Planner, machine choice and MCP session stores. Rows that the SQL
//! schema removes by foreign key go here when what they name goes: [`PlannerTables::forget_channel`],
//! [`PlannerTables::forget_session`] and [`PlannerTables::forget_machine`] are called wherever
//! the memory adapter removes a document, a session or a machine.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;

use super::{MemoryStorage, State, accounts, remove_where};
use fermata_store::channel::ChannelId;
use fermata_store::error::{StoreError, StoreResult};
use fermata_store::lease::Fence;
use fermata_store::machine::MachineId;
use fermata_store::machine_choice::MachineChoiceStore;
use fermata_store::mcp_session::{McpClient, McpSession, McpSessionId, McpSessionStore};
use fermata_store::planner::{
    AgentState, ChildConversation, ClearedChild, DecisionAnswer, DeferredTurn,
    DeferredTurnRetirement, DeferredTurnState, HoldOwner, LinkHold, ModelChoice, NewLinkHold,
    NewModelChoice, NewPlannerCredential, OwnerReset, PlannerCredential, PlannerKey, PlannerStatus,
    PlannerStore,
};
use fermata_store::session::{SecretHash, SessionId};
use fermata_store::time::UnixMillis;
use fermata_store::user::UserId;

/// Everything these stores keep, in memory.
#[derive(Debug, Default)]
pub(super) struct PlannerTables {
    agents: BTreeMap<ChannelId, AgentState>,
    holds: BTreeMap<ChannelId, LinkHold>,
    credentials: BTreeMap<[u8; 32], PlannerCredential>,
    model_choices: BTreeMap<ChannelId, ModelChoice>,
    answers: BTreeMap<(ChannelId, PlannerKey), DecisionAnswer>,
    deferred: BTreeMap<String, DeferredTurn>,
    mcp: BTreeMap<McpSessionId, McpSession>,
    /// Shared machines, with when they were shared.
    shared: BTreeMap<MachineId, UnixMillis>,
    choices: BTreeMap<(UserId, ChannelId), MachineId>,
    favorites: BTreeMap<UserId, MachineId>,
}

impl PlannerTables {
    /// The document is gone: every row of it goes.
    pub(super) fn forget_channel(&mut self, id: &ChannelId) {
        self.agents.remove(id);
        self.holds.remove(id);
        self.credentials
            .retain(|_, credential| credential.channel != *id);
        self.model_choices.remove(id);
        self.answers.retain(|(channel, _), _| channel != id);
        self.deferred.retain(|_, turn| turn.channel != *id);
        self.choices.retain(|(_, channel), _| channel != id);
    }

    /// The session is gone: its holds go and its documents lose their owner.
    pub(super) fn forget_session(&mut self, id: &SessionId) {
        self.holds
            .retain(|_, hold| hold.owner != HoldOwner::Session(id.clone()));
        for agent in self.agents.values_mut() {
            if agent.owner.as_ref() == Some(id) {
                agent.owner = None;
            }
        }
    }

    /// The machine is gone: its holds, credentials, choices, favorites and sharing go.
    pub(super) fn forget_machine(&mut self, id: &MachineId) {
        self.holds
            .retain(|_, hold| hold.owner != HoldOwner::Machine(id.clone()));
        self.credentials
            .retain(|_, credential| credential.machine != *id);
        self.choices.retain(|_, machine| machine != id);
        self.favorites.retain(|_, machine| machine != id);
        self.shared.remove(id);
    }
}

fn planner(state: &mut State) -> &mut PlannerTables {
    &mut state.planner
}

fn no_document() -> StoreError {
    StoreError::missing("no such document")
}

fn unknown(what: &str) -> StoreError {
    StoreError::invalid(format!("{what} does not exist"))
}

impl State {
    fn require_document(&self, id: &ChannelId) -> StoreResult<()> {
        if self.documents.exists(id) {
            Ok(())
        } else {
            Err(unknown("the document"))
        }
    }

    fn require_user(&self, id: &UserId) -> StoreResult<()> {
        if self.users.contains_key(id) {
            Ok(())
        } else {
            Err(unknown("the user"))
        }
    }

    /// Whether `user` may use `machine`: it is theirs or shared.
    fn usable_machine(&self, user: &UserId, machine: &MachineId) -> bool {
        self.machines.get(machine).is_some_and(|(machine_row, _)| {
            machine_row.owner == *user || self.planner.shared.contains_key(machine)
        })
    }

    /// The state of a document the caller must hold at `generation`.
    fn held_agent(&mut self, id: &ChannelId, generation: i64) -> StoreResult<&mut AgentState> {
        let agent = self.planner.agents.get_mut(id).ok_or_else(no_document)?;
        if agent.owner.is_none() || agent.generation != generation {
            return Err(fermata_store::planner::not_held());
        }
        Ok(agent)
    }
}

#[async_trait]
impl PlannerStore for MemoryStorage {
    async fn agent_state(&self, channel: &ChannelId) -> StoreResult<Option<AgentState>> {
        Ok(self.inner.state().planner.agents.get(channel).cloned())
    }

    async fn claim_planner(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        session: &SessionId,
    ) -> StoreResult<AgentState> {
        self.inner
            .fenced(fence, |state, now| {
                if !state.documents.exists(channel) {
                    return Err(no_document());
                }
                if !state.sessions.contains_key(session) {
                    return Err(unknown("the session"));
                }
                let agent = planner(state)
                    .agents
                    .entry(channel.clone())
                    .or_insert_with(|| AgentState {
                        channel: channel.clone(),
                        owner: None,
                        status: PlannerStatus::Unavailable,
                        summary: None,
                        transcript_cursor: None,
                        generation: 0,
                        updated_at: now,
                    });
                if agent.owner.is_some() {
                    return Err(fermata_store::planner::already_owned());
                }
                agent.owner = Some(session.clone());
                agent.status = PlannerStatus::Starting;
                agent.generation += 1;
                agent.updated_at = now;
                Ok(agent.clone())
            })
            .await
    }

    async fn set_planner_status(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        generation: i64,
        status: PlannerStatus,
    ) -> StoreResult<AgentState> {
        self.inner
            .fenced(fence, |state, now| {
                let agent = state.held_agent(channel, generation)?;
                agent.status = status;
                agent.updated_at = now;
                Ok(agent.clone())
            })
            .await
    }

    async fn hand_over_planner(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        generation: i64,
        session: &SessionId,
    ) -> StoreResult<AgentState> {
        self.inner
            .fenced(fence, |state, now| {
                if !state.sessions.contains_key(session) {
                    return Err(unknown("the session"));
                }
                let agent = state.held_agent(channel, generation)?;
                agent.owner = Some(session.clone());
                agent.generation += 1;
                agent.updated_at = now;
                Ok(agent.clone())
            })
            .await
    }

    async fn release_planner(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        generation: i64,
    ) -> StoreResult<AgentState> {
        self.inner
            .fenced(fence, |state, now| {
                let agent = state.held_agent(channel, generation)?;
                agent.owner = None;
                agent.status = PlannerStatus::Unavailable;
                agent.updated_at = now;
                Ok(agent.clone())
            })
            .await
    }

    async fn write_link_hold(&self, fence: &Fence, hold: &NewLinkHold) -> StoreResult<LinkHold> {
        self.inner
            .fenced(fence, |state, now| {
                state.require_document(&hold.channel)?;
                state.require_user(&hold.user)?;
                let owner_exists = match &hold.owner {
                    HoldOwner::Session(id) => state.sessions.contains_key(id),
                    HoldOwner::Machine(id) => state.machines.contains_key(id),
                };
                if !owner_exists {
                    return Err(unknown("the hold's owner"));
                }
                let suspended_at = planner(state)
                    .holds
                    .get(&hold.channel)
                    .filter(|old| old.owner == hold.owner && old.generation == hold.generation)
                    .map_or(now, |old| old.suspended_at);
                let stored = LinkHold {
                    channel: hold.channel.clone(),
                    owner: hold.owner.clone(),
                    user: hold.user.clone(),
                    generation: hold.generation,
                    held_sessions: hold.held_sessions.clone(),
                    suspended_at,
                    handover: hold.handover.map(whole_millis),
                    fencing_token: fence.token,
                };
                planner(state)
                    .holds
                    .insert(hold.channel.clone(), stored.clone());
                Ok(stored)
            })
            .await
    }

    async fn remove_link_hold(&self, fence: &Fence, channel: &ChannelId) -> StoreResult<bool> {
        self.inner
            .fenced(fence, |state, _now| {
                Ok(planner(state).holds.remove(channel).is_some())
            })
            .await
    }

    async fn link_hold(&self, channel: &ChannelId) -> StoreResult<Option<LinkHold>> {
        Ok(self.inner.state().planner.holds.get(channel).cloned())
    }

    async fn take_link_holds(&self, fence: &Fence) -> StoreResult<Vec<LinkHold>> {
        self.inner
            .fenced(fence, |state, _now| {
                let holds = &mut planner(state).holds;
                let taken: Vec<LinkHold> = holds.values().cloned().collect();
                for hold in holds.values_mut().filter(|hold| hold.handover.is_some()) {
                    hold.handover = None;
                    hold.fencing_token = fence.token;
                }
                Ok(taken)
            })
            .await
    }

    async fn record_planner_credential(
        &self,
        fence: &Fence,
        credential: &NewPlannerCredential,
    ) -> StoreResult<PlannerCredential> {
        self.inner
            .fenced(fence, |state, now| {
                state.require_document(&credential.channel)?;
                if !state.machines.contains_key(&credential.machine) {
                    return Err(unknown("the machine"));
                }
                let credentials = &mut planner(state).credentials;
                if credentials.contains_key(&credential.digest.0) {
                    return Err(StoreError::conflict("the credential is already recorded"));
                }
                let stored = PlannerCredential {
                    digest: credential.digest,
                    machine: credential.machine.clone(),
                    channel: credential.channel.clone(),
                    created_at: now,
                    expires_at: now.plus(credential.ttl),
                };
                credentials.insert(credential.digest.0, stored.clone());
                Ok(stored)
            })
            .await
    }

    async fn planner_credential(
        &self,
        digest: &SecretHash,
    ) -> StoreResult<Option<PlannerCredential>> {
        let now = UnixMillis::now();
        Ok(self
            .inner
            .state()
            .planner
            .credentials
            .get(&digest.0)
            .filter(|credential| credential.expires_at > now)
            .cloned())
    }

    async fn withdraw_planner_credentials(
        &self,
        fence: &Fence,
        machine: &MachineId,
    ) -> StoreResult<u64> {
        self.inner
            .fenced(fence, |state, _now| {
                Ok(remove_where(
                    &mut planner(state).credentials,
                    |_, credential| credential.machine == *machine,
                ))
            })
            .await
    }

    async fn sweep_planner_credentials(&self, fence: &Fence) -> StoreResult<u64> {
        self.inner
            .fenced(fence, |state, now| {
                Ok(remove_where(
                    &mut planner(state).credentials,
                    |_, credential| credential.expires_at <= now,
                ))
            })
            .await
    }

    async fn choose_model(
        &self,
        fence: &Fence,
        choice: &NewModelChoice,
    ) -> StoreResult<Option<ModelChoice>> {
        self.inner
            .fenced(fence, |state, now| {
                if choice.model.is_none() && choice.thinking_level.is_none() {
                    planner(state).model_choices.remove(&choice.channel);
                    return Ok(None);
                }
                state.require_document(&choice.channel)?;
                state.require_user(&choice.chosen_by)?;
                let stored = ModelChoice {
                    channel: choice.channel.clone(),
                    model: choice.model.clone(),
                    thinking_level: choice.thinking_level.clone(),
                    chosen_by: choice.chosen_by.clone(),
                    chosen_at: now,
                    fencing_token: fence.token,
                };
                planner(state)
                    .model_choices
                    .insert(choice.channel.clone(), stored.clone());
                Ok(Some(stored))
            })
            .await
    }

    async fn model_choice(&self, channel: &ChannelId) -> StoreResult<Option<ModelChoice>> {
        Ok(self
            .inner
            .state()
            .planner
            .model_choices
            .get(channel)
            .cloned())
    }

    async fn save_decision_answer(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        decision: &PlannerKey,
        generation: i64,
    ) -> StoreResult<bool> {
        self.inner
            .fenced(fence, |state, now| {
                state.require_document(channel)?;
                let key = (channel.clone(), decision.clone());
                let answers = &mut planner(state).answers;
                if answers
                    .get(&key)
                    .is_some_and(|stored| stored.generation >= generation)
                {
                    return Ok(false);
                }
                answers.insert(
                    key,
                    DecisionAnswer {
                        channel: channel.clone(),
                        decision: decision.clone(),
                        generation,
                        saved_at: now,
                        claimed_by: None,
                        delivered_at: None,
                    },
                );
                Ok(true)
            })
            .await
    }

    async fn claim_decision_answers(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        turn: &PlannerKey,
    ) -> StoreResult<Vec<DecisionAnswer>> {
        self.inner
            .fenced(fence, |state, _now| {
                let mut claimed = Vec::new();
                for ((of, _), answer) in &mut planner(state).answers {
                    let free = answer.claimed_by.as_ref().is_none_or(|by| by == turn);
                    if of == channel && answer.delivered_at.is_none() && free {
                        answer.claimed_by = Some(turn.clone());
                        claimed.push(answer.clone());
                    }
                }
                Ok(claimed)
            })
            .await
    }

    async fn deliver_decision_answers(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        turn: &PlannerKey,
    ) -> StoreResult<u64> {
        self.inner
            .fenced(fence, |state, now| {
                let mut delivered = 0;
                for ((of, _), answer) in &mut planner(state).answers {
                    if of == channel
                        && answer.delivered_at.is_none()
                        && answer.claimed_by.as_ref() == Some(turn)
                    {
                        answer.delivered_at = Some(now);
                        delivered += 1;
                    }
                }
                Ok(delivered)
            })
            .await
    }

    async fn decision_answers(&self, channel: &ChannelId) -> StoreResult<Vec<DecisionAnswer>> {
        Ok(self
            .inner
            .state()
            .planner
            .answers
            .values()
            .filter(|answer| answer.channel == *channel)
            .cloned()
            .collect())
    }

    async fn retire_deferred_turns(&self, fence: &Fence) -> StoreResult<DeferredTurnRetirement> {
        self.inner
            .fenced(fence, |state, now| {
                let mut retired = DeferredTurnRetirement::default();
                for turn in planner(state).deferred.values_mut() {
                    turn.state = match turn.state {
                        DeferredTurnState::Waiting => {
                            retired.cancelled += 1;
                            DeferredTurnState::Cancelled
                        }
                        DeferredTurnState::Started => {
                            retired.interrupted += 1;
                            DeferredTurnState::Interrupted
                        }
                        _ => continue,
                    };
                    turn.fencing_token = fence.token;
                    turn.resolved_at = Some(now);
                }
                Ok(retired)
            })
            .await
    }

    async fn reset_owners(&self, fence: &Fence) -> StoreResult<OwnerReset> {
        self.inner
            .fenced(fence, |state, now| {
                let mut reset = OwnerReset::default();
                let kept: Vec<ChannelId> = state
                    .planner
                    .agents
                    .values()
                    .filter(|agent| {
                        agent.owner.as_ref().is_some_and(|owner| {
                            let held =
                                state.planner.holds.get(&agent.channel).is_some_and(|hold| {
                                    hold.owner == HoldOwner::Session(owner.clone())
                                });
                            let live = state
                                .sessions
                                .get(owner)
                                .is_some_and(|row| row.keeps_planner(now));
                            held && live
                        })
                    })
                    .map(|agent| agent.channel.clone())
                    .collect();
                for agent in planner(state).agents.values_mut() {
                    if kept.contains(&agent.channel) {
                        reset.owners_kept += 1;
                    } else if agent.owner.take().is_some() {
                        reset.owners_cleared += 1;
                    }
                    if agent.status != PlannerStatus::Unavailable {
                        agent.status = PlannerStatus::Unavailable;
                        agent.updated_at = now;
                    }
                }
                reset.sessions = accounts::sweep(state, now);
                Ok(reset)
            })
            .await
    }

    async fn child_conversations(&self) -> StoreResult<Vec<ChildConversation>> {
        let state = self.inner.state();
        Ok(state
            .documents
            .child_sidecars()
            .into_iter()
            .map(|(channel, sidecar, snapshot)| {
                let has_reserved_context = state
                    .planner
                    .agents
                    .get(&channel)
                    .is_some_and(|a| a.summary.is_some() || a.transcript_cursor.is_some());
                ChildConversation {
                    channel,
                    state: sidecar,
                    snapshot,
                    has_reserved_context,
                }
            })
            .collect())
    }

    async fn replace_child_sidecars(&self, fence: &Fence, child: &ClearedChild) -> StoreResult<()> {
        self.inner
            .fenced(fence, |state, _now| {
                match state.documents.is_child(&child.channel) {
                    None => return Err(no_document()),
                    Some(false) => return Err(fermata_store::planner::not_a_child()),
                    Some(true) => {}
                }
                let docs = &mut state.documents;
                let lacks_state =
                    child.state.is_some() && docs.state_sidecar_mut(&child.channel).is_none();
                let lacks_snapshot =
                    child.snapshot.is_some() && docs.snapshot_sidecar_mut(&child.channel).is_none();
                if lacks_state || lacks_snapshot {
                    return Err(StoreError::missing("the child has no such sidecar"));
                }
                if let Some(sidecar) = &child.state
                    && let Some(stored) = state.documents.state_sidecar_mut(&child.channel)
                {
                    *stored = sidecar.clone();
                }
                if let Some(sidecar) = &child.snapshot
                    && let Some(stored) = state.documents.snapshot_sidecar_mut(&child.channel)
                {
                    *stored = sidecar.clone();
                }
                if let Some(agent) = planner(state).agents.get_mut(&child.channel) {
                    agent.summary = None;
                    agent.transcript_cursor = None;
                }
                Ok(())
            })
            .await
    }
}

/// A duration as the SQL adapters store it: whole milliseconds.
fn whole_millis(duration: Duration) -> Duration {
    Duration::from_millis(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
}

#[async_trait]
impl MachineChoiceStore for MemoryStorage {
    async fn set_machine_shared(
        &self,
        fence: &Fence,
        machine: &MachineId,
        owner: &UserId,
        shared: bool,
    ) -> StoreResult<()> {
        self.inner
            .fenced(fence, |state, now| {
                let owned = state
                    .machines
                    .get(machine)
                    .is_some_and(|(row, _)| row.owner == *owner);
                if !owned {
                    return Err(fermata_store::machine::not_owners_machine());
                }
                let tables = planner(state);
                if shared {
                    tables.shared.entry(machine.clone()).or_insert(now);
                } else {
                    tables.shared.remove(machine);
                    tables
                        .choices
                        .retain(|(user, _), chosen| chosen != machine || user == owner);
                    tables
                        .favorites
                        .retain(|user, chosen| chosen != machine || user == owner);
                }
                Ok(())
            })
            .await
    }

    async fn machine_shared(&self, machine: &MachineId) -> StoreResult<bool> {
        let state = self.inner.state();
        if !state.machines.contains_key(machine) {
            return Err(fermata_store::machine_choice::unknown_machine());
        }
        Ok(state.planner.shared.contains_key(machine))
    }

    async fn choose_machine(
        &self,
        fence: &Fence,
        user: &UserId,
        channel: &ChannelId,
        machine: Option<&MachineId>,
    ) -> StoreResult<()> {
        self.inner
            .fenced(fence, |state, _now| {
                let key = (user.clone(), channel.clone());
                let Some(machine) = machine else {
                    planner(state).choices.remove(&key);
                    return Ok(());
                };
                state.require_document(channel)?;
                state.require_user(user)?;
                if !state.usable_machine(user, machine) {
                    return Err(fermata_store::machine_choice::no_usable_machine());
                }
                planner(state).choices.insert(key, machine.clone());
                Ok(())
            })
            .await
    }

    async fn machine_choice(
        &self,
        user: &UserId,
        channel: &ChannelId,
    ) -> StoreResult<Option<MachineId>> {
        Ok(self
            .inner
            .state()
            .planner
            .choices
            .get(&(user.clone(), channel.clone()))
            .cloned())
    }

    async fn set_favorite_machine(
        &self,
        fence: &Fence,
        user: &UserId,
        machine: Option<&MachineId>,
    ) -> StoreResult<()> {
        self.inner
            .fenced(fence, |state, _now| {
                let Some(machine) = machine else {
                    planner(state).favorites.remove(user);
                    return Ok(());
                };
                state.require_user(user)?;
                if !state.usable_machine(user, machine) {
                    return Err(fermata_store::machine_choice::no_usable_machine());
                }
                planner(state)
                    .favorites
                    .insert(user.clone(), machine.clone());
                Ok(())
            })
            .await
    }

    async fn favorite_machine(&self, user: &UserId) -> StoreResult<Option<MachineId>> {
        Ok(self.inner.state().planner.favorites.get(user).cloned())
    }
}

#[async_trait]
impl McpSessionStore for MemoryStorage {
    async fn create_mcp_session(
        &self,
        fence: &Fence,
        id: &McpSessionId,
        user: &UserId,
        client: &McpClient,
    ) -> StoreResult<McpSession> {
        self.inner
            .fenced(fence, |state, now| {
                state.require_user(user)?;
                let sessions = &mut planner(state).mcp;
                if sessions.contains_key(id) {
                    return Err(StoreError::conflict("the MCP session ID is in use"));
                }
                let session = McpSession {
                    id: id.clone(),
                    user: user.clone(),
                    client: client.clone(),
                    created_at: now,
                    last_seen_at: now,
                };
                sessions.insert(id.clone(), session.clone());
                Ok(session)
            })
            .await
    }

    async fn mcp_session(&self, id: &McpSessionId) -> StoreResult<Option<McpSession>> {
        Ok(self.inner.state().planner.mcp.get(id).cloned())
    }

    async fn touch_mcp_session(&self, fence: &Fence, id: &McpSessionId) -> StoreResult<McpSession> {
        self.inner
            .fenced(fence, |state, now| {
                let session = planner(state)
                    .mcp
                    .get_mut(id)
                    .ok_or_else(fermata_store::mcp_session::session_ended)?;
                session.last_seen_at = now;
                Ok(session.clone())
            })
            .await
    }

    async fn delete_mcp_session(&self, fence: &Fence, id: &McpSessionId) -> StoreResult<bool> {
        self.inner
            .fenced(fence, |state, _now| {
                Ok(planner(state).mcp.remove(id).is_some())
            })
            .await
    }

    async fn sweep_idle_mcp_sessions(&self, fence: &Fence, idle: Duration) -> StoreResult<u64> {
        self.inner
            .fenced(fence, |state, now| {
                Ok(remove_where(&mut planner(state).mcp, |_, session| {
                    now.since(session.last_seen_at) > idle
                }))
            })
            .await
    }
}

/// Test seeding: an earlier release's rows, written as that release wrote them.
impl MemoryStorage {
    /// Stores deferred turns as an earlier release left them.
    pub fn seed_deferred_turns(&self, turns: &[DeferredTurn]) {
        let mut state = self.inner.state();
        for turn in turns {
            state.planner.deferred.insert(turn.id.clone(), turn.clone());
        }
    }

    /// Every deferred turn, by ID.
    pub fn deferred_turns(&self) -> Vec<DeferredTurn> {
        self.inner
            .state()
            .planner
            .deferred
            .values()
            .cloned()
            .collect()
    }

    /// Sets a document's reserved summary and transcript cursor, as an earlier release could.
    pub fn seed_reserved_context(&self, channel: &ChannelId, summary: &str, cursor: i64) {
        let mut state = self.inner.state();
        let agent = state
            .planner
            .agents
            .entry(channel.clone())
            .or_insert_with(|| AgentState {
                channel: channel.clone(),
                owner: None,
                status: PlannerStatus::Unavailable,
                summary: None,
                transcript_cursor: None,
                generation: 0,
                updated_at: UnixMillis::now(),
            });
        agent.summary = Some(summary.to_owned());
        agent.transcript_cursor = Some(cursor);
    }
}
