//! The memory adapter's account stores: users, sessions, API tokens and paired machines.

use std::collections::BTreeSet;

use async_trait::async_trait;

use super::{MemoryStorage, State};
use fermata_store::api_token::{ApiToken, ApiTokenId, ApiTokenStore, NewApiToken, needs_marking};
use fermata_store::error::{StoreError, StoreResult};
use fermata_store::lease::Fence;
use fermata_store::machine::{Machine, MachineId, MachineStore, NewMachine};
use fermata_store::session::{
    NewSession, SecretHash, Session, SessionId, SessionLookup, SessionStore, SessionSweep,
};
use fermata_store::time::UnixMillis;
use fermata_store::user::{NewUser, Role, User, UserId, UserName, UserStore};

/// A session row: the session and the hash of its secret.
#[derive(Debug, Clone)]
pub(super) struct SessionRow {
    session: Session,
    secret_hash: Option<SecretHash>,
}

#[async_trait]
impl UserStore for MemoryStorage {
    async fn create_user(&self, user: &NewUser) -> StoreResult<User> {
        self.inner.gate("create user")?;
        let mut state = self.inner.state();
        if state.users.values().any(|u| u.name == user.name) || state.users.contains_key(&user.id) {
            return Err(StoreError::conflict(format!(
                "the user name `{}` is taken",
                user.name
            )));
        }
        let now = UnixMillis::now();
        let created = User {
            id: user.id.clone(),
            name: user.name.clone(),
            password_hash: user.password_hash.clone(),
            roles: user.roles.clone(),
            created_at: now,
            updated_at: now,
        };
        state.users.insert(user.id.clone(), created.clone());
        Ok(created)
    }

    async fn user_by_name(&self, name: &UserName) -> StoreResult<Option<User>> {
        Ok(self
            .inner
            .state()
            .users
            .values()
            .find(|u| &u.name == name)
            .cloned())
    }

    async fn user_by_id(&self, id: &UserId) -> StoreResult<Option<User>> {
        Ok(self.inner.state().users.get(id).cloned())
    }

    async fn set_password_hash(&self, id: &UserId, password_hash: &str) -> StoreResult<User> {
        self.inner.gate("set password hash")?;
        let mut state = self.inner.state();
        let user = state
            .users
            .get_mut(id)
            .ok_or_else(|| StoreError::missing("no such user"))?;
        user.password_hash = password_hash.to_owned();
        user.updated_at = UnixMillis::now();
        let user = user.clone();
        let ended: Vec<SessionId> = state
            .sessions
            .values()
            .filter(|row| row.session.user == *id)
            .map(|row| row.session.id.clone())
            .collect();
        for session in &ended {
            state.sessions.remove(session);
            state.planner.forget_session(session);
        }
        state.access_changed();
        Ok(user)
    }

    async fn set_roles(&self, id: &UserId, roles: &BTreeSet<Role>) -> StoreResult<User> {
        self.inner.gate("set roles")?;
        let mut state = self.inner.state();
        let user = state
            .users
            .get_mut(id)
            .ok_or_else(|| StoreError::missing("no such user"))?;
        user.roles = roles.clone();
        user.updated_at = UnixMillis::now();
        let user = user.clone();
        state.access_changed();
        Ok(user)
    }

    async fn list_users(&self) -> StoreResult<Vec<User>> {
        let mut users: Vec<User> = self.inner.state().users.values().cloned().collect();
        users.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(users)
    }
}

#[async_trait]
impl SessionStore for MemoryStorage {
    async fn create_session(&self, new: &NewSession) -> StoreResult<Session> {
        self.inner.gate("create session")?;
        let mut state = self.inner.state();
        let Some(user) = state.users.get(&new.user) else {
            return Err(StoreError::invalid("a session needs an existing user"));
        };
        if new
            .verified_password_hash
            .as_ref()
            .is_some_and(|verified| *verified != user.password_hash)
        {
            return Err(StoreError::conflict(
                "the password changed while the login was checked",
            ));
        }
        let taken = state.sessions.contains_key(&new.id)
            || new.secret_hash.is_some_and(|hash| {
                state
                    .sessions
                    .values()
                    .any(|row| row.secret_hash == Some(hash))
            });
        if taken {
            return Err(StoreError::conflict(
                "the session ID or secret is already in use",
            ));
        }
        let now = UnixMillis::now();
        let session = Session {
            id: new.id.clone(),
            user: new.user.clone(),
            metadata_only: new.secret_hash.is_none(),
            created_at: now,
            expires_at: now.plus(new.ttl),
            authenticated_at: now,
            revision: 1,
            credentials: new.credentials.clone(),
        };
        state.sessions.insert(
            new.id.clone(),
            SessionRow {
                session: session.clone(),
                secret_hash: new.secret_hash,
            },
        );
        Ok(session)
    }

    async fn session_by_secret(&self, hash: &SecretHash) -> StoreResult<Option<SessionLookup>> {
        let now = UnixMillis::now();
        Ok(self
            .inner
            .state()
            .sessions
            .values()
            .find(|row| row.secret_hash.as_ref() == Some(hash) && row.session.expires_at > now)
            .map(|row| SessionLookup {
                session: row.session.clone(),
                now,
            }))
    }

    async fn session(&self, id: &SessionId) -> StoreResult<Option<SessionLookup>> {
        let now = UnixMillis::now();
        Ok(self
            .inner
            .state()
            .sessions
            .get(id)
            .filter(|row| row.session.expires_at > now)
            .map(|row| SessionLookup {
                session: row.session.clone(),
                now,
            }))
    }

    async fn reauthenticate(
        &self,
        id: &SessionId,
        secret_hash: &SecretHash,
    ) -> StoreResult<Session> {
        self.inner.gate("reauthenticate")?;
        let now = UnixMillis::now();
        let mut state = self.inner.state();
        let row = state
            .sessions
            .get_mut(id)
            .filter(|row| row.session.expires_at > now)
            .ok_or_else(|| StoreError::missing("the session has ended"))?;
        row.session.authenticated_at = now;
        row.secret_hash = Some(*secret_hash);
        Ok(row.session.clone())
    }

    async fn rotate_session_credentials(
        &self,
        id: &SessionId,
        expected_revision: i64,
        credentials: Option<&[u8]>,
    ) -> StoreResult<Session> {
        self.inner.gate("rotate session credentials")?;
        let mut state = self.inner.state();
        let row = state
            .sessions
            .get_mut(id)
            .ok_or_else(|| StoreError::missing("the session has ended"))?;
        if row.session.revision != expected_revision {
            return Err(StoreError::conflict(
                "the session's credentials changed meanwhile",
            ));
        }
        row.session.credentials = credentials.map(<[u8]>::to_vec);
        row.session.revision += 1;
        Ok(row.session.clone())
    }

    async fn delete_session(&self, id: &SessionId) -> StoreResult<bool> {
        self.inner.gate("delete session")?;
        let mut state = self.inner.state();
        state.planner.forget_session(id);
        let removed = state.sessions.remove(id).is_some();
        if removed {
            state.access_changed();
        }
        Ok(removed)
    }

    async fn sessions_with_credentials(&self) -> StoreResult<Vec<Session>> {
        let mut sessions: Vec<Session> = self
            .inner
            .state()
            .sessions
            .values()
            .filter(|row| row.session.credentials.is_some())
            .map(|row| row.session.clone())
            .collect();
        sessions.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(sessions)
    }

    async fn sweep_sessions(&self, fence: &Fence) -> StoreResult<SessionSweep> {
        self.inner
            .fenced(fence, |state, now| Ok(sweep(state, now)))
            .await
    }
}

impl SessionRow {
    /// Whether the startup reset keeps this session's Planner ownership: unexpired, not
    /// metadata-only, with credentials.
    pub(super) fn keeps_planner(&self, now: UnixMillis) -> bool {
        self.session.expires_at > now
            && self.secret_hash.is_some()
            && self.session.credentials.is_some()
    }
}

/// Removes expired and metadata-only sessions and what goes with them.
pub(super) fn sweep(state: &mut State, now: UnixMillis) -> SessionSweep {
    let mut sweep = SessionSweep::default();
    let mut ended = Vec::new();
    for row in state.sessions.values() {
        if row.session.expires_at <= now {
            sweep.expired += 1;
        } else if row.secret_hash.is_none() {
            sweep.metadata_only += 1;
        } else {
            continue;
        }
        ended.push(row.session.id.clone());
    }
    for session in &ended {
        state.sessions.remove(session);
        state.planner.forget_session(session);
    }
    if !ended.is_empty() {
        state.access_changed();
    }
    sweep
}

#[async_trait]
impl ApiTokenStore for MemoryStorage {
    async fn create_api_token(&self, token: &NewApiToken) -> StoreResult<ApiToken> {
        self.inner.gate("create api token")?;
        let mut state = self.inner.state();
        if !state.users.contains_key(&token.user) {
            return Err(StoreError::invalid("an API token needs an existing user"));
        }
        let taken = state.api_tokens.contains_key(&token.id)
            || state
                .api_tokens
                .values()
                .any(|(_, hash)| *hash == token.secret_hash);
        if taken {
            return Err(StoreError::conflict(
                "the API token ID or secret is already in use",
            ));
        }
        let created = ApiToken {
            id: token.id.clone(),
            user: token.user.clone(),
            label: token.label.clone(),
            created_at: UnixMillis::now(),
            last_used_at: None,
            revoked_at: None,
        };
        state
            .api_tokens
            .insert(token.id.clone(), (created.clone(), token.secret_hash));
        Ok(created)
    }

    async fn use_api_token(&self, hash: &SecretHash) -> StoreResult<Option<ApiToken>> {
        self.inner.gate("use api token")?;
        let mut state = self.inner.state();
        let found = state
            .api_tokens
            .values_mut()
            .find(|(token, stored)| stored == hash && token.revoked_at.is_none());
        Ok(found.map(|(token, _)| {
            let now = UnixMillis::now();
            if needs_marking(token.last_used_at, now) {
                token.last_used_at = Some(now);
            }
            token.clone()
        }))
    }

    async fn api_token(&self, id: &ApiTokenId) -> StoreResult<Option<ApiToken>> {
        Ok(self
            .inner
            .state()
            .api_tokens
            .get(id)
            .map(|(token, _)| token.clone()))
    }

    async fn api_tokens_of(&self, user: &UserId) -> StoreResult<Vec<ApiToken>> {
        let mut tokens: Vec<ApiToken> = self
            .inner
            .state()
            .api_tokens
            .values()
            .filter(|(token, _)| &token.user == user)
            .map(|(token, _)| token.clone())
            .collect();
        tokens.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| b.id.cmp(&a.id))
        });
        Ok(tokens)
    }

    async fn revoke_api_token(&self, id: &ApiTokenId) -> StoreResult<bool> {
        self.inner.gate("revoke api token")?;
        let mut state = self.inner.state();
        match state.api_tokens.get_mut(id) {
            Some((token, _)) if token.revoked_at.is_none() => {
                token.revoked_at = Some(UnixMillis::now());
                state.access_changed();
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

#[async_trait]
impl MachineStore for MemoryStorage {
    async fn pair_machine(&self, machine: &NewMachine) -> StoreResult<Machine> {
        self.inner.gate("pair machine")?;
        let mut state = self.inner.state();
        if !state.users.contains_key(&machine.owner) {
            return Err(StoreError::invalid("a machine needs an existing owner"));
        }
        let taken = state.machines.contains_key(&machine.id)
            || state
                .machines
                .values()
                .any(|(_, hash)| *hash == machine.secret_hash);
        if taken {
            return Err(StoreError::conflict(
                "the machine ID or token is already in use",
            ));
        }
        let now = UnixMillis::now();
        let paired = Machine {
            id: machine.id.clone(),
            owner: machine.owner.clone(),
            name: machine.name.clone(),
            created_at: now,
            authorized_at: now,
            revision: 1,
            credentials: None,
        };
        state
            .machines
            .insert(machine.id.clone(), (paired.clone(), machine.secret_hash));
        Ok(paired)
    }

    async fn machine_by_secret(&self, hash: &SecretHash) -> StoreResult<Option<Machine>> {
        Ok(self
            .inner
            .state()
            .machines
            .values()
            .find(|(_, stored)| stored == hash)
            .map(|(machine, _)| machine.clone()))
    }

    async fn machine(&self, id: &MachineId) -> StoreResult<Option<Machine>> {
        Ok(self
            .inner
            .state()
            .machines
            .get(id)
            .map(|(machine, _)| machine.clone()))
    }

    async fn machines_of(&self, owner: &UserId) -> StoreResult<Vec<Machine>> {
        let mut machines: Vec<Machine> = self
            .inner
            .state()
            .machines
            .values()
            .filter(|(machine, _)| &machine.owner == owner)
            .map(|(machine, _)| machine.clone())
            .collect();
        machines.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.id.cmp(&b.id)));
        Ok(machines)
    }

    async fn rotate_machine_credentials(
        &self,
        id: &MachineId,
        expected_revision: i64,
        credentials: Option<&[u8]>,
    ) -> StoreResult<Machine> {
        self.inner.gate("rotate machine credentials")?;
        let mut state = self.inner.state();
        let (machine, _) = state
            .machines
            .get_mut(id)
            .ok_or_else(|| StoreError::missing("no such machine"))?;
        if machine.revision != expected_revision {
            return Err(StoreError::conflict("the machine changed meanwhile"));
        }
        machine.credentials = credentials.map(<[u8]>::to_vec);
        machine.revision += 1;
        Ok(machine.clone())
    }

    async fn reauthorize_machine(
        &self,
        id: &MachineId,
        owner: &UserId,
        expected_revision: i64,
        secret_hash: &SecretHash,
    ) -> StoreResult<Machine> {
        self.inner.gate("reauthorize machine")?;
        let mut state = self.inner.state();
        let taken = state
            .machines
            .iter()
            .any(|(other, (_, hash))| other != id && hash == secret_hash);
        if taken {
            return Err(StoreError::conflict("the machine token is already in use"));
        }
        let (machine, hash) = state
            .machines
            .get_mut(id)
            .filter(|(machine, _)| &machine.owner == owner)
            .ok_or_else(fermata_store::machine::not_owners_machine)?;
        if machine.revision != expected_revision {
            return Err(StoreError::conflict("the machine changed meanwhile"));
        }
        *hash = *secret_hash;
        machine.revision += 1;
        machine.authorized_at = UnixMillis::now();
        Ok(machine.clone())
    }

    async fn revoke_machine(&self, id: &MachineId, owner: &UserId) -> StoreResult<()> {
        self.inner.gate("revoke machine")?;
        let mut state = self.inner.state();
        let owned = state
            .machines
            .get(id)
            .is_some_and(|(machine, _)| &machine.owner == owner);
        if !owned {
            return Err(fermata_store::machine::not_owners_machine());
        }
        state.machines.remove(id);
        state.planner.forget_machine(id);
        Ok(())
    }

    async fn machines_with_credentials(&self) -> StoreResult<Vec<Machine>> {
        let mut machines: Vec<Machine> = self
            .inner
            .state()
            .machines
            .values()
            .filter(|(machine, _)| machine.credentials.is_some())
            .map(|(machine, _)| machine.clone())
            .collect();
        machines.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(machines)
    }
}
