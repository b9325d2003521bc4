//! The SQL Planner store: `agent_state`, `planner_link_holds`, `planner_credentials`,
//! `planner_model_choices`, `decision_answers`, the closing of `planner_deferred_turns`, and the
//! startup resets (owners with the session sweep; children's conversations).
//!
//! Every write is one fenced transaction. Rows that go with a document, a session or a machine
//! go by foreign key (see migration 0007), so no statement here chases them.

use std::time::Duration;

use async_trait::async_trait;
use fermata_store::claim::millis;
use fermata_store::{
    AgentState, ChannelId, ChildConversation, ChoiceName, ClearedChild, DecisionAnswer,
    DeferredTurnRetirement, Fence, FencingToken, HeldSessions, HoldOwner, LinkHold, MachineId,
    ModelChoice, NewLinkHold, NewModelChoice, NewPlannerCredential, OwnerReset, PlannerCredential,
    PlannerKey, PlannerStatus, PlannerStore, SecretHash, SessionId, SidecarState, StoreError,
    StoreResult, StoreResultExt, UserId,
};
use sqlx::AnyConnection;
use sqlx::any::AnyRow;

use crate::SqlStorage;
use crate::dialect::Dialect;
use crate::error::StoreContext;
use crate::fence::FencedTransaction;
use crate::row::{column, flag, instant, optional_instant};
use crate::session::sweep_in;

/// The Planner statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    agent: String,
    channel_exists: String,
    ensure_agent: String,
    claim: String,
    set_status: String,
    hand_over: String,
    release: String,
    write_hold: String,
    remove_hold: String,
    hold: String,
    holds: String,
    clear_windows: String,
    insert_credential: String,
    credential: String,
    withdraw_credentials: String,
    sweep_credentials: String,
    upsert_model: String,
    delete_model: String,
    model: String,
    save_answer: String,
    claim_answers: String,
    claimed_answers: String,
    deliver_answers: String,
    answers: String,
    retire: String,
    clear_owners: String,
    kept_owners: String,
    force_unavailable: String,
    children: String,
    lock_child: String,
    replace_state: String,
    replace_snapshot: String,
    reset_context: String,
}

const AGENT_COLUMNS: &str = "channel_id, owner_session_id, status, summary, transcript_cursor, \
                             generation, updated_at";
const HOLD_COLUMNS: &str = "channel_id, session_id, machine_id, user_id, generation, \
                            held_sessions, suspended_at, handover_until, fencing_token";
const CREDENTIAL_COLUMNS: &str = "digest, machine_id, channel_id, created_at, expires_at";
const MODEL_COLUMNS: &str =
    "channel_id, model, thinking_level, chosen_by, chosen_at, fencing_token";
const ANSWER_COLUMNS: &str =
    "channel_id, decision_id, generation, saved_at, claimed_turn, delivered_at";

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        let held = "WHERE channel_id = $1 AND generation = $2 AND owner_session_id IS NOT NULL";
        Statements {
            agent: dialect.render(&format!(
                "SELECT {AGENT_COLUMNS} FROM agent_state WHERE channel_id = $1"
            )),
            channel_exists: dialect.render("SELECT count(*) FROM channels WHERE id = $1"),
            ensure_agent: dialect.render(
                "INSERT INTO agent_state (channel_id, owner_session_id, status, generation, updated_at) \
                 VALUES ($1, NULL, 'unavailable', 0, $2) ON CONFLICT (channel_id) DO NOTHING",
            ),
            claim: dialect.render(
                "UPDATE agent_state SET owner_session_id = $2, status = 'starting', \
                 generation = generation + 1, updated_at = $3 \
                 WHERE channel_id = $1 AND owner_session_id IS NULL",
            ),
            set_status: dialect.render(&format!(
                "UPDATE agent_state SET status = $3, updated_at = $4 {held}"
            )),
            hand_over: dialect.render(&format!(
                "UPDATE agent_state SET owner_session_id = $3, generation = generation + 1, \
                 updated_at = $4 {held}"
            )),
            release: dialect.render(&format!(
                "UPDATE agent_state SET owner_session_id = NULL, status = 'unavailable', \
                 updated_at = $3 {held}"
            )),
            write_hold: dialect.render(&format!(
                "INSERT INTO planner_link_holds ({HOLD_COLUMNS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                 ON CONFLICT (channel_id) DO UPDATE SET \
                 suspended_at = CASE WHEN planner_link_holds.generation = excluded.generation \
                     AND coalesce(planner_link_holds.session_id, '') = coalesce(excluded.session_id, '') \
                     AND coalesce(planner_link_holds.machine_id, '') = coalesce(excluded.machine_id, '') \
                     THEN planner_link_holds.suspended_at ELSE excluded.suspended_at END, \
                 session_id = excluded.session_id, machine_id = excluded.machine_id, \
                 user_id = excluded.user_id, generation = excluded.generation, \
                 held_sessions = excluded.held_sessions, handover_until = excluded.handover_until, \
                 fencing_token = excluded.fencing_token"
            )),
            remove_hold: dialect.render("DELETE FROM planner_link_holds WHERE channel_id = $1"),
            hold: dialect.render(&format!(
                "SELECT {HOLD_COLUMNS} FROM planner_link_holds WHERE channel_id = $1"
            )),
            holds: dialect.render(&format!(
                "SELECT {HOLD_COLUMNS} FROM planner_link_holds ORDER BY channel_id"
            )),
            clear_windows: dialect.render(
                "UPDATE planner_link_holds SET handover_until = NULL, fencing_token = $1 \
                 WHERE handover_until IS NOT NULL",
            ),
            insert_credential: dialect.render(&format!(
                "INSERT INTO planner_credentials ({CREDENTIAL_COLUMNS}) VALUES ($1, $2, $3, $4, $4 + $5)"
            )),
            credential: dialect.render(&format!(
                "SELECT {CREDENTIAL_COLUMNS} FROM planner_credentials \
                 WHERE digest = $1 AND expires_at > {{now}}"
            )),
            withdraw_credentials: dialect
                .render("DELETE FROM planner_credentials WHERE machine_id = $1"),
            sweep_credentials: dialect
                .render("DELETE FROM planner_credentials WHERE expires_at <= $1"),
            upsert_model: dialect.render(&format!(
                "INSERT INTO planner_model_choices ({MODEL_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (channel_id) DO UPDATE SET model = excluded.model, \
                 thinking_level = excluded.thinking_level, chosen_by = excluded.chosen_by, \
                 chosen_at = excluded.chosen_at, fencing_token = excluded.fencing_token"
            )),
            delete_model: dialect
                .render("DELETE FROM planner_model_choices WHERE channel_id = $1"),
            model: dialect.render(&format!(
                "SELECT {MODEL_COLUMNS} FROM planner_model_choices WHERE channel_id = $1"
            )),
            save_answer: dialect.render(&format!(
                "INSERT INTO decision_answers ({ANSWER_COLUMNS}) VALUES ($1, $2, $3, $4, NULL, NULL) \
                 ON CONFLICT (channel_id, decision_id) DO UPDATE SET \
                 generation = excluded.generation, saved_at = excluded.saved_at, \
                 claimed_turn = NULL, delivered_at = NULL \
                 WHERE decision_answers.generation < excluded.generation"
            )),
            claim_answers: dialect.render(
                "UPDATE decision_answers SET claimed_turn = $2 \
                 WHERE channel_id = $1 AND delivered_at IS NULL \
                 AND (claimed_turn IS NULL OR claimed_turn = $2)",
            ),
            claimed_answers: dialect.render(&format!(
                "SELECT {ANSWER_COLUMNS} FROM decision_answers \
                 WHERE channel_id = $1 AND claimed_turn = $2 AND delivered_at IS NULL \
                 ORDER BY decision_id"
            )),
            deliver_answers: dialect.render(
                "UPDATE decision_answers SET delivered_at = $3 \
                 WHERE channel_id = $1 AND claimed_turn = $2 AND delivered_at IS NULL",
            ),
            answers: dialect.render(&format!(
                "SELECT {ANSWER_COLUMNS} FROM decision_answers WHERE channel_id = $1 \
                 ORDER BY decision_id"
            )),
            retire: dialect.render(
                "UPDATE planner_deferred_turns \
                 SET state = CASE state WHEN 'waiting' THEN 'cancelled' ELSE 'interrupted' END, \
                     fencing_token = $1, resolved_at = $2 \
                 WHERE state IN ('waiting', 'started') RETURNING state",
            ),
            clear_owners: dialect.render(
                "UPDATE agent_state SET owner_session_id = NULL \
                 WHERE owner_session_id IS NOT NULL AND NOT EXISTS ( \
                     SELECT 1 FROM planner_link_holds h JOIN web_sessions s ON s.id = h.session_id \
                     WHERE h.channel_id = agent_state.channel_id \
                       AND h.session_id = agent_state.owner_session_id \
                       AND s.expires_at > $1 AND s.secret_hash IS NOT NULL \
                       AND s.credentials IS NOT NULL)",
            ),
            kept_owners: dialect
                .render("SELECT count(*) FROM agent_state WHERE owner_session_id IS NOT NULL"),
            force_unavailable: dialect.render(
                "UPDATE agent_state SET status = 'unavailable', updated_at = $1 \
                 WHERE status <> 'unavailable'",
            ),
            children: dialect.render(
                "SELECT c.id, st.version, st.sidecar, st.unanswered_decisions, \
                        sn.sidecar_version, sn.sidecar, sn.sidecar_unanswered_decisions, \
                        CASE WHEN a.summary IS NOT NULL OR a.transcript_cursor IS NOT NULL \
                             THEN 1 ELSE 0 END \
                 FROM channels c \
                 LEFT JOIN channel_state st ON st.channel_id = c.id \
                 LEFT JOIN channel_snapshots sn ON sn.channel_id = c.id \
                 LEFT JOIN agent_state a ON a.channel_id = c.id \
                 WHERE c.parent_id IS NOT NULL ORDER BY c.id",
            ),
            lock_child: dialect.render(
                "SELECT CASE WHEN parent_id IS NULL THEN 0 ELSE 1 END FROM channels \
                 WHERE id = $1{for_update}",
            ),
            replace_state: dialect.render(
                "UPDATE channel_state SET version = $2, sidecar = $3, unanswered_decisions = $4 \
                 WHERE channel_id = $1",
            ),
            replace_snapshot: dialect.render(
                "UPDATE channel_snapshots SET sidecar_version = $2, sidecar = $3, \
                 sidecar_unanswered_decisions = $4 WHERE channel_id = $1 AND sidecar IS NOT NULL",
            ),
            reset_context: dialect.render(
                "UPDATE agent_state SET summary = NULL, transcript_cursor = NULL \
                 WHERE channel_id = $1",
            ),
        }
    }
}

fn agent_from(row: &AnyRow, action: &str) -> StoreResult<AgentState> {
    Ok(AgentState {
        channel: ChannelId(column(row, 0, action)?),
        owner: column::<Option<String>>(row, 1, action)?.map(SessionId),
        status: PlannerStatus::parse(&column::<String>(row, 2, action)?)?,
        summary: column(row, 3, action)?,
        transcript_cursor: column(row, 4, action)?,
        generation: column(row, 5, action)?,
        updated_at: instant(row, 6, action)?,
    })
}

fn hold_from(row: &AnyRow, action: &str) -> StoreResult<LinkHold> {
    let session: Option<String> = column(row, 1, action)?;
    let machine: Option<String> = column(row, 2, action)?;
    let owner = match (session, machine) {
        (Some(session), None) => HoldOwner::Session(SessionId(session)),
        (None, Some(machine)) => HoldOwner::Machine(MachineId(machine)),
        _ => return Err(StoreError::corrupt("a link hold has no single owner")),
    };
    let handover: Option<i64> = column(row, 7, action)?;
    Ok(LinkHold {
        channel: ChannelId(column(row, 0, action)?),
        owner,
        user: UserId(column(row, 3, action)?),
        generation: column(row, 4, action)?,
        held_sessions: HeldSessions::new(column::<String>(row, 5, action)?)
            .or_corrupt("a link hold's held sessions do not parse")?,
        suspended_at: instant(row, 6, action)?,
        handover: handover.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
        fencing_token: FencingToken(column(row, 8, action)?),
    })
}

fn digest_from(bytes: &[u8]) -> StoreResult<SecretHash> {
    bytes
        .try_into()
        .map(SecretHash)
        .or_corrupt("a credential digest is not 32 bytes")
}

fn credential_from(row: &AnyRow, action: &str) -> StoreResult<PlannerCredential> {
    Ok(PlannerCredential {
        digest: digest_from(&column::<Vec<u8>>(row, 0, action)?)?,
        machine: MachineId(column(row, 1, action)?),
        channel: ChannelId(column(row, 2, action)?),
        created_at: instant(row, 3, action)?,
        expires_at: instant(row, 4, action)?,
    })
}

fn stored_name(text: Option<String>) -> StoreResult<Option<ChoiceName>> {
    text.map(|text| ChoiceName::new(text).or_corrupt("a stored model choice is invalid"))
        .transpose()
}

fn model_from(row: &AnyRow, action: &str) -> StoreResult<ModelChoice> {
    Ok(ModelChoice {
        channel: ChannelId(column(row, 0, action)?),
        model: stored_name(column(row, 1, action)?)?,
        thinking_level: stored_name(column(row, 2, action)?)?,
        chosen_by: UserId(column(row, 3, action)?),
        chosen_at: instant(row, 4, action)?,
        fencing_token: FencingToken(column(row, 5, action)?),
    })
}

fn stored_key(text: String) -> StoreResult<PlannerKey> {
    PlannerKey::new(text).or_corrupt("a stored decision or turn ID is invalid")
}

fn answer_from(row: &AnyRow, action: &str) -> StoreResult<DecisionAnswer> {
    Ok(DecisionAnswer {
        channel: ChannelId(column(row, 0, action)?),
        decision: stored_key(column(row, 1, action)?)?,
        generation: column(row, 2, action)?,
        saved_at: instant(row, 3, action)?,
        claimed_by: column::<Option<String>>(row, 4, action)?
            .map(stored_key)
            .transpose()?,
        delivered_at: optional_instant(row, 5, action)?,
    })
}

/// A sidecar read from three nullable columns starting at `first`.
fn sidecar_at(row: &AnyRow, first: usize, action: &str) -> StoreResult<Option<SidecarState>> {
    let version: Option<i64> = column(row, first, action)?;
    let json: Option<String> = column(row, first + 1, action)?;
    let unanswered: Option<i64> = column(row, first + 2, action)?;
    Ok(match (version, json, unanswered) {
        (Some(version), Some(json), Some(unanswered_decisions)) => Some(SidecarState {
            version,
            json,
            unanswered_decisions,
        }),
        _ => None,
    })
}

impl SqlStorage {
    async fn agent_on(
        conn: &mut AnyConnection,
        sql: &str,
        channel: &ChannelId,
        action: &str,
    ) -> StoreResult<Option<AgentState>> {
        let row = sqlx::query(sql)
            .bind(&channel.0)
            .fetch_optional(conn)
            .await
            .context(action)?;
        row.map(|row| agent_from(&row, action)).transpose()
    }

    /// After a generation-checked update: the new state, `Conflict` when it matched nothing but
    /// the document has a Planner state, `Missing` when it has none.
    async fn held_outcome(
        &self,
        mut tx: FencedTransaction,
        changed: u64,
        channel: &ChannelId,
        action: &str,
    ) -> StoreResult<AgentState> {
        let agent =
            Self::agent_on(tx.conn(), &self.inner.planner_sql.agent, channel, action).await?;
        let Some(agent) = agent else {
            return Err(StoreError::missing("no such document"));
        };
        if changed == 0 {
            return Err(fermata_store::planner::not_held());
        }
        tx.commit(action).await?;
        Ok(agent)
    }
}

#[async_trait]
impl PlannerStore for SqlStorage {
    async fn agent_state(&self, channel: &ChannelId) -> StoreResult<Option<AgentState>> {
        let action = "reading Planner state";
        let mut conn = self.inner.pool.acquire().await.context(action)?;
        Self::agent_on(&mut conn, &self.inner.planner_sql.agent, channel, action).await
    }

    async fn claim_planner(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        session: &SessionId,
    ) -> StoreResult<AgentState> {
        let action = "claiming a Planner";
        let sql = &self.inner.planner_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        let exists: i64 = sqlx::query_scalar(&sql.channel_exists)
            .bind(&channel.0)
            .fetch_one(tx.conn())
            .await
            .context(action)?;
        if exists == 0 {
            return Err(StoreError::missing("no such document"));
        }
        let ensure = sqlx::query(&sql.ensure_agent).bind(&channel.0).bind(now.0);
        tx.execute(ensure, action).await?;
        let claim = sqlx::query(&sql.claim)
            .bind(&channel.0)
            .bind(&session.0)
            .bind(now.0);
        if tx.execute(claim, action).await? == 0 {
            return Err(fermata_store::planner::already_owned());
        }
        let agent = Self::agent_on(tx.conn(), &sql.agent, channel, action)
            .await?
            .ok_or_else(|| StoreError::unavailable("the claimed Planner state vanished"))?;
        tx.commit(action).await?;
        Ok(agent)
    }

    async fn set_planner_status(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        generation: i64,
        status: PlannerStatus,
    ) -> StoreResult<AgentState> {
        let action = "setting a Planner status";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let query = sqlx::query(&self.inner.planner_sql.set_status)
            .bind(&channel.0)
            .bind(generation)
            .bind(status.as_str())
            .bind(tx.now.0);
        let changed = tx.execute(query, action).await?;
        self.held_outcome(tx, changed, channel, action).await
    }

    async fn hand_over_planner(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        generation: i64,
        session: &SessionId,
    ) -> StoreResult<AgentState> {
        let action = "handing over a Planner";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let query = sqlx::query(&self.inner.planner_sql.hand_over)
            .bind(&channel.0)
            .bind(generation)
            .bind(&session.0)
            .bind(tx.now.0);
        let changed = tx.execute(query, action).await?;
        self.held_outcome(tx, changed, channel, action).await
    }

    async fn release_planner(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        generation: i64,
    ) -> StoreResult<AgentState> {
        let action = "releasing a Planner";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let query = sqlx::query(&self.inner.planner_sql.release)
            .bind(&channel.0)
            .bind(generation)
            .bind(tx.now.0);
        let changed = tx.execute(query, action).await?;
        self.held_outcome(tx, changed, channel, action).await
    }

    async fn write_link_hold(&self, fence: &Fence, hold: &NewLinkHold) -> StoreResult<LinkHold> {
        let action = "writing a Planner link hold";
        let sql = &self.inner.planner_sql;
        let (session, machine) = match &hold.owner {
            HoldOwner::Session(id) => (Some(id.0.as_str()), None),
            HoldOwner::Machine(id) => (None, Some(id.0.as_str())),
        };
        let handover = hold.handover.map(millis).transpose()?;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let query = sqlx::query(&sql.write_hold)
            .bind(&hold.channel.0)
            .bind(session)
            .bind(machine)
            .bind(&hold.user.0)
            .bind(hold.generation)
            .bind(hold.held_sessions.as_str())
            .bind(tx.now.0)
            .bind(handover)
            .bind(fence.token.0);
        tx.execute(query, action).await?;
        let row = sqlx::query(&sql.hold)
            .bind(&hold.channel.0)
            .fetch_one(tx.conn())
            .await
            .context(action)?;
        let stored = hold_from(&row, action)?;
        tx.commit(action).await?;
        Ok(stored)
    }

    async fn remove_link_hold(&self, fence: &Fence, channel: &ChannelId) -> StoreResult<bool> {
        let action = "removing a Planner link hold";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let query = sqlx::query(&self.inner.planner_sql.remove_hold).bind(&channel.0);
        let removed = tx.execute(query, action).await?;
        tx.commit(action).await?;
        Ok(removed > 0)
    }

    async fn link_hold(&self, channel: &ChannelId) -> StoreResult<Option<LinkHold>> {
        let action = "reading a Planner link hold";
        let row = sqlx::query(&self.inner.planner_sql.hold)
            .bind(&channel.0)
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?;
        row.map(|row| hold_from(&row, action)).transpose()
    }

    async fn take_link_holds(&self, fence: &Fence) -> StoreResult<Vec<LinkHold>> {
        let action = "taking the Planner link holds";
        let sql = &self.inner.planner_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let rows = sqlx::query(&sql.holds)
            .fetch_all(tx.conn())
            .await
            .context(action)?;
        let holds = rows
            .iter()
            .map(|row| hold_from(row, action))
            .collect::<StoreResult<Vec<_>>>()?;
        let clear = sqlx::query(&sql.clear_windows).bind(fence.token.0);
        tx.execute(clear, action).await?;
        tx.commit(action).await?;
        Ok(holds)
    }

    async fn record_planner_credential(
        &self,
        fence: &Fence,
        credential: &NewPlannerCredential,
    ) -> StoreResult<PlannerCredential> {
        let action = "recording a Planner credential";
        let ttl = millis(credential.ttl)?;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        let insert = sqlx::query(&self.inner.planner_sql.insert_credential)
            .bind(credential.digest.0.to_vec())
            .bind(&credential.machine.0)
            .bind(&credential.channel.0)
            .bind(now.0)
            .bind(ttl);
        tx.execute(insert, action).await?;
        tx.commit(action).await?;
        Ok(PlannerCredential {
            digest: credential.digest,
            machine: credential.machine.clone(),
            channel: credential.channel.clone(),
            created_at: now,
            expires_at: now.plus(credential.ttl),
        })
    }

    async fn planner_credential(
        &self,
        digest: &SecretHash,
    ) -> StoreResult<Option<PlannerCredential>> {
        let action = "reading a Planner credential";
        let row = sqlx::query(&self.inner.planner_sql.credential)
            .bind(digest.0.to_vec())
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?;
        row.map(|row| credential_from(&row, action)).transpose()
    }

    async fn withdraw_planner_credentials(
        &self,
        fence: &Fence,
        machine: &MachineId,
    ) -> StoreResult<u64> {
        let action = "withdrawing Planner credentials";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let query = sqlx::query(&self.inner.planner_sql.withdraw_credentials).bind(&machine.0);
        let removed = tx.execute(query, action).await?;
        tx.commit(action).await?;
        Ok(removed)
    }

    async fn sweep_planner_credentials(&self, fence: &Fence) -> StoreResult<u64> {
        let action = "sweeping Planner credentials";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let query = sqlx::query(&self.inner.planner_sql.sweep_credentials).bind(tx.now.0);
        let removed = tx.execute(query, action).await?;
        tx.commit(action).await?;
        Ok(removed)
    }

    async fn choose_model(
        &self,
        fence: &Fence,
        choice: &NewModelChoice,
    ) -> StoreResult<Option<ModelChoice>> {
        let action = "choosing a Planner model";
        let sql = &self.inner.planner_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        if choice.model.is_none() && choice.thinking_level.is_none() {
            let delete = sqlx::query(&sql.delete_model).bind(&choice.channel.0);
            tx.execute(delete, action).await?;
            tx.commit(action).await?;
            return Ok(None);
        }
        let upsert = sqlx::query(&sql.upsert_model)
            .bind(&choice.channel.0)
            .bind(choice.model.as_ref().map(ChoiceName::as_str))
            .bind(choice.thinking_level.as_ref().map(ChoiceName::as_str))
            .bind(&choice.chosen_by.0)
            .bind(tx.now.0)
            .bind(fence.token.0);
        tx.execute(upsert, action).await?;
        let row = sqlx::query(&sql.model)
            .bind(&choice.channel.0)
            .fetch_one(tx.conn())
            .await
            .context(action)?;
        let stored = model_from(&row, action)?;
        tx.commit(action).await?;
        Ok(Some(stored))
    }

    async fn model_choice(&self, channel: &ChannelId) -> StoreResult<Option<ModelChoice>> {
        let action = "reading a Planner model choice";
        let row = sqlx::query(&self.inner.planner_sql.model)
            .bind(&channel.0)
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?;
        row.map(|row| model_from(&row, action)).transpose()
    }

    async fn save_decision_answer(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        decision: &PlannerKey,
        generation: i64,
    ) -> StoreResult<bool> {
        let action = "saving a decision answer";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let query = sqlx::query(&self.inner.planner_sql.save_answer)
            .bind(&channel.0)
            .bind(decision.as_str())
            .bind(generation)
            .bind(tx.now.0);
        let stored = tx.execute(query, action).await?;
        tx.commit(action).await?;
        Ok(stored > 0)
    }

    async fn claim_decision_answers(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        turn: &PlannerKey,
    ) -> StoreResult<Vec<DecisionAnswer>> {
        let action = "claiming decision answers";
        let sql = &self.inner.planner_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let claim = sqlx::query(&sql.claim_answers)
            .bind(&channel.0)
            .bind(turn.as_str());
        tx.execute(claim, action).await?;
        let rows = sqlx::query(&sql.claimed_answers)
            .bind(&channel.0)
            .bind(turn.as_str())
            .fetch_all(tx.conn())
            .await
            .context(action)?;
        let claimed = rows
            .iter()
            .map(|row| answer_from(row, action))
            .collect::<StoreResult<Vec<_>>>()?;
        tx.commit(action).await?;
        Ok(claimed)
    }

    async fn deliver_decision_answers(
        &self,
        fence: &Fence,
        channel: &ChannelId,
        turn: &PlannerKey,
    ) -> StoreResult<u64> {
        let action = "delivering decision answers";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let query = sqlx::query(&self.inner.planner_sql.deliver_answers)
            .bind(&channel.0)
            .bind(turn.as_str())
            .bind(tx.now.0);
        let delivered = tx.execute(query, action).await?;
        tx.commit(action).await?;
        Ok(delivered)
    }

    async fn decision_answers(&self, channel: &ChannelId) -> StoreResult<Vec<DecisionAnswer>> {
        let action = "reading decision answers";
        let rows = sqlx::query(&self.inner.planner_sql.answers)
            .bind(&channel.0)
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        rows.iter().map(|row| answer_from(row, action)).collect()
    }

    async fn retire_deferred_turns(&self, fence: &Fence) -> StoreResult<DeferredTurnRetirement> {
        let action = "retiring deferred Planner turns";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let states: Vec<String> = sqlx::query_scalar(&self.inner.planner_sql.retire)
            .bind(fence.token.0)
            .bind(tx.now.0)
            .fetch_all(tx.conn())
            .await
            .context(action)?;
        tx.commit(action).await?;
        let mut retired = DeferredTurnRetirement::default();
        for state in states {
            if state == "cancelled" {
                retired.cancelled += 1;
            } else {
                retired.interrupted += 1;
            }
        }
        Ok(retired)
    }

    async fn reset_owners(&self, fence: &Fence) -> StoreResult<OwnerReset> {
        let action = "resetting Planner owners";
        let sql = &self.inner.planner_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        let clear = sqlx::query(&sql.clear_owners).bind(now.0);
        let owners_cleared = tx.execute(clear, action).await?;
        let kept: i64 = sqlx::query_scalar(&sql.kept_owners)
            .fetch_one(tx.conn())
            .await
            .context(action)?;
        let unavailable = sqlx::query(&sql.force_unavailable).bind(now.0);
        tx.execute(unavailable, action).await?;
        let sessions = sweep_in(tx.conn(), &self.inner.session_sql, now, action).await?;
        tx.commit(action).await?;
        Ok(OwnerReset {
            sessions,
            owners_cleared,
            owners_kept: u64::try_from(kept).unwrap_or(0),
        })
    }

    async fn child_conversations(&self) -> StoreResult<Vec<ChildConversation>> {
        let action = "reading child conversations";
        let rows = sqlx::query(&self.inner.planner_sql.children)
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        rows.iter()
            .map(|row| {
                Ok(ChildConversation {
                    channel: ChannelId(column(row, 0, action)?),
                    state: sidecar_at(row, 1, action)?,
                    snapshot: sidecar_at(row, 4, action)?,
                    has_reserved_context: flag(row, 7, action)?,
                })
            })
            .collect()
    }

    async fn replace_child_sidecars(&self, fence: &Fence, child: &ClearedChild) -> StoreResult<()> {
        let action = "clearing a child's conversation";
        let sql = &self.inner.planner_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let is_child: Option<i64> = sqlx::query_scalar(&sql.lock_child)
            .bind(&child.channel.0)
            .fetch_optional(tx.conn())
            .await
            .context(action)?;
        match is_child {
            None => return Err(StoreError::missing("no such document")),
            Some(0) => return Err(fermata_store::planner::not_a_child()),
            Some(_) => {}
        }
        for (statement, sidecar) in [
            (&sql.replace_state, &child.state),
            (&sql.replace_snapshot, &child.snapshot),
        ] {
            let Some(sidecar) = sidecar else { continue };
            let query = sqlx::query(statement)
                .bind(&child.channel.0)
                .bind(sidecar.version)
                .bind(sidecar.json.as_str())
                .bind(sidecar.unanswered_decisions);
            if tx.execute(query, action).await? == 0 {
                return Err(StoreError::missing("the child has no such sidecar"));
            }
        }
        let reset = sqlx::query(&sql.reset_context).bind(&child.channel.0);
        tx.execute(reset, action).await?;
        tx.commit(action).await
    }
}
