//! The storage port of Fermata.
//!
//! Domain code depends on these traits, never on a database driver. Each store is its own trait
//! ([`LeaseStore`], [`TenureStore`], [`UserStore`], [`SessionStore`], ...), reached through one [`Storage`] handle, so later stores
//! are added beside the existing ones without touching them. Every adapter (the SQL adapters in
//! `fermata-store-sql`, the memory adapter in `fermata-store-testkit`) runs the same contract
//! suite, which lives in `fermata-store-testkit` with the memory adapter.

pub mod api_token;
pub mod attachments;
pub mod channel;
pub mod chat;
pub mod claim;
pub mod cluster;
pub mod collaboration;
pub mod collaboration_rules;
pub mod error;
pub mod history;
pub mod images;
pub mod jobs;
pub mod lease;
pub mod machine;
pub mod machine_choice;
pub mod mcp_session;
pub mod placement;
pub mod planner;
pub mod repository;
pub mod research;
pub mod schema;
pub mod search;
pub mod session;
pub mod tenure;
pub mod time;
pub mod user;
pub mod workflow;
pub mod writer_fence;

pub use api_token::{
    ApiToken, ApiTokenId, ApiTokenStore, LAST_USED_PRECISION, NewApiToken, needs_marking,
};
pub use attachments::{
    AttachmentId, AttachmentInfo, AttachmentStore, AttachmentType, MessagePlace, MessageRequestId,
    NewAttachment, OriginalFile, StoredAttachment, UNSENT_ATTACHMENT_LIFETIME,
};
pub use channel::{
    Channel, ChannelFilter, ChannelId, CreationKey, Description, DescriptionDraft, NewChannel,
    Repository, Slug, UPDATED_AT_RESOLUTION_MS, updated_at_after_commit,
};
pub use chat::{
    ChatKey, ChatStore, ChatThread, RunStage, SessionState, SessionStateDraft, ThreadDraft,
};
pub use cluster::{
    Announcement, ClusterMember, ClusterStore, ClusterView, Coverage, MEMBER_PREFIX, Shard,
    ShardCount,
};
pub use collaboration::{
    Checkpoint, CollaborationStore, Commit, Committed, Event, EventDraft, JournalUpdate,
    NewCheckpoint, OperationId, PublishedChannel, RecoveryHead, RecoveryReceiver, RecoverySnapshot,
    SidecarState,
};
pub use error::{ErrorChain, ErrorKind, FailureStreak, StoreError, StoreResult, StoreResultExt};
pub use history::{Change, HistoryStore, Recorded, Version, VersionSummary};
pub use images::{ImageHash, ImageInfo, ImageStore, ImageStored, ImageType, NewImage, StoredImage};
pub use jobs::{
    ClaimedJob, Job, JobClaim, JobFailure, JobHolder, JobId, JobKind, JobState, JobStore, NewJob,
    Settlement,
};
pub use lease::{
    Acquisition, Fence, FencedWriteHook, FencingToken, Lease, LeaseName, LeasePeek, LeaseRecord,
    LeaseRenewal, LeaseStore,
};
pub use machine::{Machine, MachineId, MachineStore, NewMachine};
pub use machine_choice::MachineChoiceStore;
pub use mcp_session::{McpClient, McpSession, McpSessionId, McpSessionStore};
pub use planner::{
    AgentState, ChildConversation, ChoiceName, ClearedChild, DecisionAnswer, DeferredTurn,
    DeferredTurnRetirement, DeferredTurnState, HeldSessions, HoldOwner, LinkHold, ModelChoice,
    NewLinkHold, NewModelChoice, NewPlannerCredential, OwnerReset, PlannerCredential, PlannerKey,
    PlannerStatus, PlannerStore,
};
pub use repository::{
    CreationOrigin, DocumentCursor, DocumentScope, KeyedCreation, Member, NewOverride, Override,
    RepositoryRecord, RepositoryRole, RepositoryStore,
};
pub use research::{
    JobLink, Publication, RequestKey, ResearchDraft, ResearchRequest, ResearchStore,
};
pub use search::{
    Alternative, SearchCursor, SearchHit, SearchQuery, SearchStore, SearchTerms, SnippetPart,
};
pub use session::{
    NewSession, SecretHash, Session, SessionId, SessionLookup, SessionStore, SessionSweep,
};
pub use tenure::{Tenure, TenureEnd, TenureStart, TenureStore};
pub use time::UnixMillis;
pub use user::{NewUser, Role, User, UserId, UserName, UserStore};
pub use workflow::{
    Claim, ClaimGeneration, ClaimedRun, Hook, HookDelivery, HookWait, JournaledError, NewRun, Run,
    RunClaim, RunId, RunState, StepRecord, StepState, StepUpdate, WorkflowStore,
};
pub use writer_fence::WriterFence;

/// One handle on an application database: every store of one adapter.
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// Which adapter this is, for logs and status (`memory`, `sqlite`, `postgres`).
    fn driver(&self) -> &'static str;

    fn leases(&self) -> &dyn LeaseStore;

    fn tenures(&self) -> &dyn TenureStore;

    /// Shards and the members of a cluster of serving processes.
    fn cluster(&self) -> &dyn ClusterStore;

    fn users(&self) -> &dyn UserStore;

    fn sessions(&self) -> &dyn SessionStore;

    fn api_tokens(&self) -> &dyn ApiTokenStore;

    fn machines(&self) -> &dyn MachineStore;

    fn collaboration(&self) -> &dyn CollaborationStore;

    fn schema(&self) -> &dyn schema::SchemaStore;

    fn workflows(&self) -> &dyn WorkflowStore;

    fn jobs(&self) -> &dyn JobStore;

    fn research(&self) -> &dyn ResearchStore;

    fn history(&self) -> &dyn HistoryStore;

    fn chat(&self) -> &dyn ChatStore;

    fn planner(&self) -> &dyn PlannerStore;

    fn machine_choices(&self) -> &dyn MachineChoiceStore;

    fn mcp_sessions(&self) -> &dyn McpSessionStore;

    /// A document's images (`plan_images`).
    fn images(&self) -> &dyn ImageStore;

    /// Files sent with Chat messages (`chat_attachments`).
    fn attachments(&self) -> &dyn AttachmentStore;

    /// Document repositories, their members and the audit of `system_admin` overrides.
    fn repositories(&self) -> &dyn RepositoryStore;

    /// Full-text search of documents.
    fn search(&self) -> &dyn SearchStore;
}

/// Writes `impl Storage for $type`: `driver()` from the given expression, and every accessor
/// answering with `stores` (by default the value itself), which must then implement that store's
/// trait. The accessors are listed here once more, beside the trait, so that no adapter lists
/// them: a store added to [`Storage`] and not here fails every adapter's build.
///
/// ```ignore
/// // One type implements every store:
/// fermata_store::impl_storage!(SqlStorage, driver = |storage| storage.inner.dialect.name());
/// // A field does:
/// fermata_store::impl_storage!(
///     ScratchStorage,
///     driver = |scratch| scratch.storage.driver(),
///     stores = |scratch| &scratch.storage,
/// );
/// // Some stores are the value's own, the others another `Storage`'s (a wrapper):
/// fermata_store::impl_storage!(
///     UnreliableStorage,
///     driver = |wrapper| wrapper.inner.driver(),
///     stores = |wrapper| wrapper,
///     only = [leases, collaboration],
///     others = |wrapper| wrapper.inner,
/// );
/// ```
///
/// A name in `only` that is not an accessor of [`Storage`] does not compile.
#[macro_export]
macro_rules! impl_storage {
    ($type:ty, driver = |$this:ident| $driver:expr $(,)?) => {
        $crate::impl_storage!($type, driver = |$this| $driver, stores = |this| this);
    };
    (
        $type:ty,
        driver = |$this:ident| $driver:expr,
        stores = |$own_this:ident| $stores:expr
        $(, only = [$($own:ident),+ $(,)?], others = |$other_this:ident| $others:expr)?
        $(,)?
    ) => {
        // `route!(accessor, self)` is the accessor's body: `stores` for an accessor in `only`
        // (every accessor when there is no `only`), else the same accessor of `others`.
        // Written as a macro of its own because only a macro's rules can tell one name from
        // another; `$` reaches its rules through `$crate::__storage_route!`'s first argument.
        $crate::__storage_route! {
            ($)
            $type,
            |$this| $driver,
            |$own_this| $stores,
            $([$($own),+] |$other_this| $others)?
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __storage_route {
    (($dollar:tt) $type:ty, |$this:ident| $driver:expr, |$own_this:ident| $stores:expr,) => {
        const _: () = {
            macro_rules! route {
                ($dollar accessor:ident, $dollar receiver:ident) => {{
                    let $own_this = $dollar receiver;
                    $stores
                }};
            }
            $crate::__storage_accessors!($type, |$this| $driver, route);
        };
    };
    (
        ($dollar:tt) $type:ty,
        |$this:ident| $driver:expr,
        |$own_this:ident| $stores:expr,
        [$($own:ident),+] |$other_this:ident| $others:expr
    ) => {
        const _: () = {
            // A name that is no accessor fails here instead of routing nothing.
            $(let _ = <$type as $crate::Storage>::$own;)+
            macro_rules! route {
                $(($own, $dollar receiver:ident) => {{
                    let $own_this = $dollar receiver;
                    $stores
                }};)+
                ($dollar accessor:ident, $dollar receiver:ident) => {{
                    let $other_this = $dollar receiver;
                    $others.$dollar accessor()
                }};
            }
            $crate::__storage_accessors!($type, |$this| $driver, route);
        };
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __storage_accessors {
    ($type:ty, |$this:ident| $driver:expr, $route:ident) => {
        $crate::__storage_accessors!(@impl $type, |$this| $driver, $route, [
            leases: $crate::LeaseStore,
            tenures: $crate::TenureStore,
            cluster: $crate::ClusterStore,
            users: $crate::UserStore,
            sessions: $crate::SessionStore,
            api_tokens: $crate::ApiTokenStore,
            machines: $crate::MachineStore,
            collaboration: $crate::CollaborationStore,
            schema: $crate::schema::SchemaStore,
            workflows: $crate::WorkflowStore,
            jobs: $crate::JobStore,
            research: $crate::ResearchStore,
            history: $crate::HistoryStore,
            chat: $crate::ChatStore,
            planner: $crate::PlannerStore,
            machine_choices: $crate::MachineChoiceStore,
            mcp_sessions: $crate::McpSessionStore,
            images: $crate::ImageStore,
            attachments: $crate::AttachmentStore,
            repositories: $crate::RepositoryStore,
            search: $crate::SearchStore,
        ]);
    };
    (@impl $type:ty, |$this:ident| $driver:expr, $route:ident, [$($accessor:ident: $store:path,)+]) => {
        impl $crate::Storage for $type {
            fn driver(&self) -> &'static str {
                let $this = self;
                $driver
            }

            $(
                fn $accessor(&self) -> &dyn $store {
                    $route!($accessor, self)
                }
            )+
        }
    };
}

/// Options every adapter takes when it is opened.
#[derive(Debug, Clone, Default)]
pub struct StoreOptions {
    /// Runs inside each fenced write; see [`FencedWriteHook`].
    pub fenced_write_hook: Option<FencedWriteHook>,
    /// A serving process's writer fence: every write, fenced by name or not, is then made under
    /// it (see [`writer_fence`]). `None` for a process that serves nothing (the commands).
    pub writer_fence: Option<WriterFence>,
    /// The longest any one wait of the shared pool on the database may last: a statement, a
    /// lock, a transaction left idle (PostgreSQL), the write lock (SQLite's busy timeout). The
    /// serving process derives it from the writer lease's timings; `None` keeps the adapter's
    /// defaults. Adapters without a database ignore it.
    pub wait_limit: Option<std::time::Duration>,
}
