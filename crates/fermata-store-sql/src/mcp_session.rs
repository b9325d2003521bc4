//! The SQL MCP session store (`mcp_sessions`).

use std::time::Duration;

use async_trait::async_trait;
use fermata_store::{
    Fence, McpClient, McpSession, McpSessionId, McpSessionStore, StoreError, StoreResult, UserId,
};
use sqlx::any::AnyRow;

use crate::SqlStorage;
use crate::dialect::Dialect;
use crate::error::StoreContext;
use crate::row::{column, instant};

/// The MCP session statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    insert: String,
    read: String,
    touch: String,
    delete: String,
    sweep: String,
}

const COLUMNS: &str = "id, user_id, client_name, client_version, created_at, last_seen_at";

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        Statements {
            insert: dialect.render(&format!(
                "INSERT INTO mcp_sessions ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $5)"
            )),
            read: dialect.render(&format!("SELECT {COLUMNS} FROM mcp_sessions WHERE id = $1")),
            touch: dialect.render("UPDATE mcp_sessions SET last_seen_at = $2 WHERE id = $1"),
            delete: dialect.render("DELETE FROM mcp_sessions WHERE id = $1"),
            sweep: dialect.render("DELETE FROM mcp_sessions WHERE last_seen_at < $1 - $2"),
        }
    }
}

fn session_from(row: &AnyRow, action: &str) -> StoreResult<McpSession> {
    let corrupt = |_| StoreError::corrupt("a stored MCP session is invalid");
    Ok(McpSession {
        id: McpSessionId::new(column::<String>(row, 0, action)?).map_err(corrupt)?,
        user: UserId(column(row, 1, action)?),
        client: McpClient::new(
            column::<String>(row, 2, action)?,
            column::<String>(row, 3, action)?,
        )
        .map_err(corrupt)?,
        created_at: instant(row, 4, action)?,
        last_seen_at: instant(row, 5, action)?,
    })
}

#[async_trait]
impl McpSessionStore for SqlStorage {
    async fn create_mcp_session(
        &self,
        fence: &Fence,
        id: &McpSessionId,
        user: &UserId,
        client: &McpClient,
    ) -> StoreResult<McpSession> {
        let action = "creating an MCP session";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let now = tx.now;
        tx.execute(
            sqlx::query(&self.inner.mcp_session_sql.insert)
                .bind(id.as_str())
                .bind(&user.0)
                .bind(client.name())
                .bind(client.version())
                .bind(now.0),
            action,
        )
        .await?;
        tx.commit(action).await?;
        Ok(McpSession {
            id: id.clone(),
            user: user.clone(),
            client: client.clone(),
            created_at: now,
            last_seen_at: now,
        })
    }

    async fn mcp_session(&self, id: &McpSessionId) -> StoreResult<Option<McpSession>> {
        let action = "reading an MCP session";
        let row = sqlx::query(&self.inner.mcp_session_sql.read)
            .bind(id.as_str())
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?;
        row.map(|row| session_from(&row, action)).transpose()
    }

    async fn touch_mcp_session(&self, fence: &Fence, id: &McpSessionId) -> StoreResult<McpSession> {
        let action = "touching an MCP session";
        let sql = &self.inner.mcp_session_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        tx.execute(
            sqlx::query(&sql.touch).bind(id.as_str()).bind(tx.now.0),
            action,
        )
        .await?;
        let row = sqlx::query(&sql.read)
            .bind(id.as_str())
            .fetch_optional(tx.conn())
            .await
            .context(action)?
            .ok_or_else(fermata_store::mcp_session::session_ended)?;
        let session = session_from(&row, action)?;
        tx.commit(action).await?;
        Ok(session)
    }

    async fn delete_mcp_session(&self, fence: &Fence, id: &McpSessionId) -> StoreResult<bool> {
        let action = "deleting an MCP session";
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let removed = tx
            .execute(
                sqlx::query(&self.inner.mcp_session_sql.delete).bind(id.as_str()),
                action,
            )
            .await?;
        tx.commit(action).await?;
        Ok(removed > 0)
    }

    async fn sweep_idle_mcp_sessions(&self, fence: &Fence, idle: Duration) -> StoreResult<u64> {
        let action = "sweeping idle MCP sessions";
        let idle = fermata_store::claim::millis(idle)?;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        let removed = tx
            .execute(
                sqlx::query(&self.inner.mcp_session_sql.sweep)
                    .bind(tx.now.0)
                    .bind(idle),
                action,
            )
            .await?;
        tx.commit(action).await?;
        Ok(removed)
    }
}
