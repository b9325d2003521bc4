//! MCP sessions: one row per session an MCP client opened (ID, user, client name and version,
//! creation and last-seen times), kept across restarts and swept once idle.

use std::time::Duration;

use async_trait::async_trait;

use crate::error::{StoreError, StoreResult};
use crate::lease::Fence;
use crate::time::UnixMillis;
use crate::user::UserId;

/// The longest client name or version kept, in characters.
pub const MAX_CLIENT_TEXT_CHARS: usize = 200;

/// An MCP session ID: 1 to 128 printable ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct McpSessionId(String);

impl McpSessionId {
    pub fn new(text: impl Into<String>) -> StoreResult<Self> {
        let text = text.into();
        if text.is_empty() || text.len() > 128 || !text.chars().all(|c| c.is_ascii_graphic()) {
            return Err(StoreError::invalid(
                "an MCP session ID is 1 to 128 printable ASCII characters",
            ));
        }
        Ok(McpSessionId(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What the client said it is: up to [`MAX_CLIENT_TEXT_CHARS`] characters each, no control
/// characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpClient {
    name: String,
    version: String,
}

impl McpClient {
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> StoreResult<Self> {
        let (name, version) = (name.into(), version.into());
        for text in [&name, &version] {
            if text.chars().count() > MAX_CLIENT_TEXT_CHARS || text.chars().any(char::is_control) {
                return Err(StoreError::invalid(
                    "an MCP client name or version is at most 200 characters without control characters",
                ));
            }
        }
        Ok(McpClient { name, version })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn version(&self) -> &str {
        &self.version
    }
}

/// A stored MCP session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpSession {
    pub id: McpSessionId,
    pub user: UserId,
    pub client: McpClient,
    pub created_at: UnixMillis,
    pub last_seen_at: UnixMillis,
}

/// The MCP session store. Every write is fenced by the writer lease.
#[async_trait]
pub trait McpSessionStore: Send + Sync {
    /// Creates a session, seen now. A reused ID is `Conflict`; an unknown user `Invalid`.
    async fn create_mcp_session(
        &self,
        fence: &Fence,
        id: &McpSessionId,
        user: &UserId,
        client: &McpClient,
    ) -> StoreResult<McpSession>;

    async fn mcp_session(&self, id: &McpSessionId) -> StoreResult<Option<McpSession>>;

    /// Records that the session was seen now. `Missing` when it is gone.
    async fn touch_mcp_session(&self, fence: &Fence, id: &McpSessionId) -> StoreResult<McpSession>;

    /// Ends a session. Returns whether it was there.
    async fn delete_mcp_session(&self, fence: &Fence, id: &McpSessionId) -> StoreResult<bool>;

    /// Removes the sessions not seen for longer than `idle`. Returns how many went.
    async fn sweep_idle_mcp_sessions(&self, fence: &Fence, idle: Duration) -> StoreResult<u64>;
}

/// The answer for an MCP session that is gone (ended or swept).
pub fn session_ended() -> StoreError {
    StoreError::missing("the MCP session has ended")
}
