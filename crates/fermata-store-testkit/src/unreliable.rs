//! A storage wrapper that fails chosen calls with chosen errors, as a lost connection, a busy
//! database or a lost answer would: the way to test that the serving process rides through
//! storage failures (after neon's `UnreliableWrapper`, beside the real store rather than a mock).
//!
//! [`UnreliableStorage`] wraps any `Arc<dyn Storage>`. A test sets and clears faults while it
//! runs, through the shared [`Faults`] handle, by call name: the accessor and the method,
//! `"collaboration.commit"`, `"leases.renew"`; the renewal channel a lease store hands out is
//! `"leases.renewal.renew"`. A [`Fault`] fails the call before it reaches the inner store
//! (nothing is written) or after the inner store answered (what it did stands, its answer is
//! lost), for the next N calls or until cleared. Every call is counted by name, faulted or not.
//!
//! The stores whose failures a serving process must ride through are wrapped, every method:
//! leases (with the renewal channel), collaboration, sessions, users, API tokens and
//! repositories. The other accessors are the inner store's, unchanged and uncounted. A renewal
//! channel's `abandon` cannot fail and is forwarded as it is.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use fermata_store::{
    Acquisition, ApiToken, ApiTokenId, ApiTokenStore, Channel, ChannelFilter, ChannelId,
    Checkpoint, CollaborationStore, Commit, Committed, CreationOrigin, DescriptionDraft,
    DocumentCursor, DocumentScope, ErrorKind, Event, Fence, JournalUpdate, KeyedCreation, Lease,
    LeaseName, LeasePeek, LeaseRenewal, LeaseStore, Member, NewApiToken, NewChannel, NewCheckpoint,
    NewOverride, NewSession, NewUser, Override, PublishedChannel, RecoveryReceiver, Repository,
    RepositoryRecord, RepositoryRole, RepositoryStore, Role, SecretHash, Session, SessionId,
    SessionLookup, SessionStore, SessionSweep, Slug, Storage, StoreError, StoreResult, User,
    UserId, UserName, UserStore,
};

/// Any storage, with faults injected into the calls a test chooses.
#[derive(Debug)]
pub struct UnreliableStorage {
    inner: Arc<dyn Storage>,
    faults: Faults,
}

impl UnreliableStorage {
    /// `inner`, with no fault set yet.
    pub fn new(inner: Arc<dyn Storage>) -> Self {
        UnreliableStorage {
            inner,
            faults: Faults::default(),
        }
    }

    /// The handle that sets, clears and counts this wrapper's faults; clones share them.
    pub fn faults(&self) -> Faults {
        self.faults.clone()
    }

    /// The wrapped store, to read what was really stored past any fault.
    pub fn inner(&self) -> &Arc<dyn Storage> {
        &self.inner
    }
}

fermata_store::impl_storage! {
    UnreliableStorage,
    driver = |wrapper| wrapper.inner.driver(),
    stores = |wrapper| wrapper,
    only = [leases, collaboration, sessions, users, api_tokens, repositories],
    others = |wrapper| wrapper.inner,
}

/// When a fault strikes the call it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// Before the call reaches the inner store, which never sees it: nothing is written.
    Before,
    /// After the inner store answered: whatever it did stands, and its answer (success or
    /// failure) is replaced by the fault's error, as when a connection drops after the commit.
    After,
}

/// How many calls a fault fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Times {
    /// The next N calls of its name; then it is spent.
    Next(u32),
    /// Every call of its name until the test clears it.
    UntilCleared,
}

/// A fault to set on a call: a store error of `kind` at `moment`, `times` over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub kind: ErrorKind,
    pub moment: Moment,
    pub times: Times,
}

impl Fault {
    /// Fails every call with `kind` before it reaches the inner store, until cleared.
    pub fn before(kind: ErrorKind) -> Fault {
        Fault {
            kind,
            moment: Moment::Before,
            times: Times::UntilCleared,
        }
    }

    /// Fails every call with `kind` after the inner store answered, until cleared.
    pub fn after(kind: ErrorKind) -> Fault {
        Fault {
            kind,
            moment: Moment::After,
            times: Times::UntilCleared,
        }
    }

    /// The same fault, for the next `calls` calls only.
    #[must_use]
    pub fn times(self, calls: u32) -> Fault {
        Fault {
            times: Times::Next(calls),
            ..self
        }
    }
}

/// The faults of one [`UnreliableStorage`] and its call counts, shared between the wrapper and
/// the test that steers it.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    calls: Arc<Mutex<HashMap<&'static str, Call>>>,
}

/// What is known of one call name.
#[derive(Debug, Default)]
struct Call {
    /// Calls made, faulted or not.
    made: u64,
    /// Calls the fault failed.
    failed: u64,
    /// The fault set on it, if any is left.
    fault: Option<Fault>,
}

impl Faults {
    /// Sets `fault` on `call` (`"collaboration.commit"`), replacing the one set before. Panics
    /// on a name that is no wrapped call, so a misspelled name fails the test instead of
    /// injecting nothing.
    pub fn set(&self, call: &str, fault: Fault) {
        let call = known(call);
        self.table().entry(call).or_default().fault = Some(fault);
    }

    /// Clears the fault on `call`; its counts stay.
    pub fn clear(&self, call: &str) {
        let call = known(call);
        if let Some(state) = self.table().get_mut(call) {
            state.fault = None;
        }
    }

    /// Clears every fault; the counts stay.
    pub fn clear_all(&self) {
        for state in self.table().values_mut() {
            state.fault = None;
        }
    }

    /// How many times `call` was made, faulted or not.
    pub fn calls(&self, call: &str) -> u64 {
        let call = known(call);
        self.table().get(call).map_or(0, |state| state.made)
    }

    /// How many calls of `call` a fault failed.
    pub fn failed(&self, call: &str) -> u64 {
        let call = known(call);
        self.table().get(call).map_or(0, |state| state.failed)
    }

    fn table(&self) -> MutexGuard<'_, HashMap<&'static str, Call>> {
        // A test that panicked while holding the lock left plain counts behind; keep them.
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a call of `call` and takes one turn of its fault, if one is set: when it strikes,
    /// and the error it fails with.
    fn arrive(&self, call: &'static str) -> Option<(Moment, StoreError)> {
        let mut table = self.table();
        let state = table.entry(call).or_default();
        state.made += 1;
        let fault = state.fault?;
        match fault.times {
            Times::UntilCleared => {}
            Times::Next(0) => {
                state.fault = None;
                return None;
            }
            Times::Next(left) => {
                state.fault = (left > 1).then_some(Fault {
                    times: Times::Next(left - 1),
                    ..fault
                });
            }
        }
        state.failed += 1;
        let error = StoreError::new(fault.kind, format!("a fault injected into `{call}`"));
        Some((fault.moment, error))
    }

    /// Runs `inner` (the same call on the inner store) as `call`'s fault, if any, allows.
    async fn around<T>(
        &self,
        call: &'static str,
        inner: impl Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        match self.arrive(call) {
            None => inner.await,
            // The inner call is dropped without being polled: it never starts.
            Some((Moment::Before, error)) => Err(error),
            Some((Moment::After, error)) => {
                // Dropped on purpose: this answer is the one the fault loses.
                let _lost = inner.await;
                Err(error)
            }
        }
    }
}

/// The renewal channel's one fallible call.
const RENEWAL: &str = "leases.renewal.renew";

/// `call` as one of the wrapped calls' names; panics on any other.
fn known(call: &str) -> &'static str {
    WRAPPED_CALLS
        .iter()
        .chain([&RENEWAL])
        .copied()
        .find(|name| *name == call)
        .unwrap_or_else(|| {
            let names: BTreeSet<&str> = WRAPPED_CALLS.iter().copied().chain([RENEWAL]).collect();
            panic!("`{call}` is not a call UnreliableStorage wraps; it wraps {names:?}")
        })
}

/// Implements each listed store on [`UnreliableStorage`]: every method counts its call and lets
/// its fault strike, else calls the same method of the inner store's same accessor. The
/// methods are written as the trait declares them (`-> T` for `-> StoreResult<T>`); a store's
/// other items (`fn ... { ... }`, which cannot fail) follow its methods. Also writes
/// `WRAPPED_CALLS`, every name a fault can be set on but the renewal channel's.
macro_rules! wrap_stores {
    ($(
        $accessor:ident: $store:ident {
            $(async fn $method:ident(&self $(, $arg:ident: $arg_type:ty)* $(,)?) -> $ok:ty;)+
            $(fn $item:ident(&$receiver:ident) -> $item_type:ty $item_body:block)*
        }
    )+) => {
        $(
            #[async_trait]
            impl $store for UnreliableStorage {
                $(
                    async fn $method(&self $(, $arg: $arg_type)*) -> StoreResult<$ok> {
                        let call = concat!(stringify!($accessor), ".", stringify!($method));
                        let inner = self.inner.$accessor().$method($($arg),*);
                        self.faults.around(call, inner).await
                    }
                )+
                $(fn $item(&$receiver) -> $item_type $item_body)*
            }
        )+

        /// Every call of the wrapped stores, by name.
        const WRAPPED_CALLS: &[&str] = &[
            $($(concat!(stringify!($accessor), ".", stringify!($method)),)+)+
        ];
    };
}

wrap_stores! {
    leases: LeaseStore {
        async fn acquire(&self, name: &LeaseName, holder: &str, ttl: Duration) -> Acquisition;
        async fn renew(&self, lease: &Lease, ttl: Duration) -> Lease;
        async fn release(&self, lease: &Lease) -> bool;
        async fn peek(&self, name: &LeaseName) -> LeasePeek;
        fn renewal_channel(&self) -> Box<dyn LeaseRenewal> {
            Box::new(UnreliableRenewal {
                inner: self.inner.leases().renewal_channel(),
                faults: self.faults.clone(),
            })
        }
    }
    collaboration: CollaborationStore {
        async fn create_channel(&self, fence: &Fence, channel: &NewChannel) -> Channel;
        async fn create_published(&self, fence: &Fence, channel: &PublishedChannel) -> Channel;
        async fn channel(&self, id: &ChannelId) -> Option<Channel>;
        async fn list_channels(&self, filter: &ChannelFilter) -> Vec<Channel>;
        async fn resolve_slug(&self, repository: &Repository, slug: &Slug) -> Option<Channel>;
        async fn slugs_of(&self, id: &ChannelId) -> Vec<Slug>;
        async fn children_of(&self, id: &ChannelId, include_archived: bool) -> Vec<Channel>;
        async fn commit(&self, fence: &Fence, commit: &Commit) -> Committed;
        async fn updates_after(&self, id: &ChannelId, sequence: i64) -> Vec<JournalUpdate>;
        async fn events_after(&self, id: &ChannelId, sequence: i64) -> Vec<Event>;
        async fn save_checkpoint(
            &self,
            fence: &Fence,
            id: &ChannelId,
            checkpoint: &NewCheckpoint,
        ) -> Checkpoint;
        async fn replace_epoch(
            &self,
            fence: &Fence,
            id: &ChannelId,
            expected_revision: i64,
            checkpoint: &NewCheckpoint,
        ) -> Committed;
        async fn read_for_recovery(
            &self,
            id: &ChannelId,
            receiver: &mut dyn RecoveryReceiver,
        ) -> ();
        async fn archive(&self, fence: &Fence, id: &ChannelId) -> Channel;
        async fn restore(&self, fence: &Fence, id: &ChannelId) -> Channel;
        async fn delete_archived(&self, fence: &Fence, id: &ChannelId) -> ();
        async fn publish_description(
            &self,
            fence: &Fence,
            id: &ChannelId,
            description: &DescriptionDraft,
        ) -> bool;
        async fn set_navigation(&self, user: &UserId, channel: Option<&ChannelId>) -> ();
        async fn navigation(&self, user: &UserId) -> Option<ChannelId>;
    }
    sessions: SessionStore {
        async fn create_session(&self, session: &NewSession) -> Session;
        async fn session_by_secret(&self, hash: &SecretHash) -> Option<SessionLookup>;
        async fn session(&self, id: &SessionId) -> Option<SessionLookup>;
        async fn reauthenticate(&self, id: &SessionId, secret_hash: &SecretHash) -> Session;
        async fn rotate_session_credentials(
            &self,
            id: &SessionId,
            expected_revision: i64,
            credentials: Option<&[u8]>,
        ) -> Session;
        async fn delete_session(&self, id: &SessionId) -> bool;
        async fn sessions_with_credentials(&self) -> Vec<Session>;
        async fn sweep_sessions(&self, fence: &Fence) -> SessionSweep;
    }
    users: UserStore {
        async fn create_user(&self, user: &NewUser) -> User;
        async fn user_by_name(&self, name: &UserName) -> Option<User>;
        async fn user_by_id(&self, id: &UserId) -> Option<User>;
        async fn set_password_hash(&self, id: &UserId, password_hash: &str) -> User;
        async fn set_roles(&self, id: &UserId, roles: &BTreeSet<Role>) -> User;
        async fn list_users(&self) -> Vec<User>;
    }
    api_tokens: ApiTokenStore {
        async fn create_api_token(&self, token: &NewApiToken) -> ApiToken;
        async fn use_api_token(&self, hash: &SecretHash) -> Option<ApiToken>;
        async fn api_token(&self, id: &ApiTokenId) -> Option<ApiToken>;
        async fn api_tokens_of(&self, user: &UserId) -> Vec<ApiToken>;
        async fn revoke_api_token(&self, id: &ApiTokenId) -> bool;
    }
    repositories: RepositoryStore {
        async fn create_repository(
            &self,
            fence: &Fence,
            name: &Repository,
            creator: &UserId,
        ) -> (RepositoryRecord, bool);
        async fn repository(&self, name: &Repository) -> Option<RepositoryRecord>;
        async fn role_of(&self, name: &Repository, user: &UserId) -> Option<RepositoryRole>;
        async fn set_member(
            &self,
            fence: &Fence,
            name: &Repository,
            user: &UserId,
            role: RepositoryRole,
        ) -> Member;
        async fn remove_member(&self, fence: &Fence, name: &Repository, user: &UserId) -> bool;
        async fn members(&self, name: &Repository) -> Vec<Member>;
        async fn repositories_of(
            &self,
            user: &UserId,
            after: Option<&Repository>,
            limit: usize,
        ) -> Vec<(RepositoryRecord, RepositoryRole)>;
        async fn all_repositories(
            &self,
            after: Option<&Repository>,
            limit: usize,
        ) -> Vec<RepositoryRecord>;
        async fn record_override(&self, fence: &Fence, entry: &NewOverride) -> Override;
        async fn overrides(&self, name: &Repository, limit: usize) -> Vec<Override>;
        async fn documents_page(
            &self,
            scope: &DocumentScope,
            include_archived: bool,
            after: Option<&DocumentCursor>,
            limit: usize,
        ) -> Vec<Channel>;
        async fn create_keyed(
            &self,
            fence: &Fence,
            channel: &PublishedChannel,
            origin: &CreationOrigin,
        ) -> KeyedCreation;
        async fn access_generation(&self) -> i64;
    }
}

/// The inner store's renewal channel, with the wrapper's faults on its renewals.
struct UnreliableRenewal {
    inner: Box<dyn LeaseRenewal>,
    faults: Faults,
}

#[async_trait]
impl LeaseRenewal for UnreliableRenewal {
    async fn renew(&mut self, lease: &Lease, ttl: Duration) -> StoreResult<Lease> {
        let inner = self.inner.renew(lease, ttl);
        self.faults.around(RENEWAL, inner).await
    }

    async fn abandon(&mut self) {
        self.inner.abandon().await;
    }
}
