//! The SQL history store (`document_versions`): each change is recorded in one fenced
//! transaction that reads the document's latest session and applies the port's session rule.
//! The writer lease serializes fenced writes, so two recordings never race for one document.

use async_trait::async_trait;
use fermata_store::history::{MAX_VERSIONS_LISTED, next_session};
use fermata_store::{
    Change, ChannelId, Fence, HistoryStore, Recorded, StoreResult, UserId, Version, VersionSummary,
};
use sqlx::any::AnyRow;

use crate::SqlStorage;
use crate::dialect::Dialect;
use crate::error::StoreContext;
use crate::row::{column, instant};

const COLUMNS: &str = "channel_id, number, author_id, canonical_text, revision, source_hash, \
                       started_at, ended_at, summary_text, summary_source_hash";

/// The history statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct Statements {
    latest: String,
    list: String,
    one: String,
    insert: String,
    extend: String,
}

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        Statements {
            latest: dialect.render(&format!(
                "SELECT {COLUMNS} FROM document_versions WHERE channel_id = $1 \
                 ORDER BY number DESC LIMIT 1"
            )),
            list: dialect.render(&format!(
                "SELECT {COLUMNS} FROM document_versions WHERE channel_id = $1 \
                 ORDER BY number DESC LIMIT $2"
            )),
            one: dialect.render(&format!(
                "SELECT {COLUMNS} FROM document_versions WHERE channel_id = $1 AND number = $2"
            )),
            insert: dialect.render(
                "INSERT INTO document_versions (channel_id, number, author_id, canonical_text, \
                     revision, source_hash, started_at, ended_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            ),
            extend: dialect.render(
                "UPDATE document_versions SET canonical_text = $3, revision = $4, \
                     source_hash = $5, ended_at = $6 WHERE channel_id = $1 AND number = $2",
            ),
        }
    }
}

fn version_from(row: &AnyRow, action: &str) -> StoreResult<Version> {
    let summary_text: Option<String> = column(row, 8, action)?;
    let summary_hash: Option<String> = column(row, 9, action)?;
    Ok(Version {
        channel: ChannelId(column(row, 0, action)?),
        number: column(row, 1, action)?,
        author: column::<Option<String>>(row, 2, action)?.map(UserId),
        text: column(row, 3, action)?,
        revision: column(row, 4, action)?,
        source_hash: column(row, 5, action)?,
        started_at: instant(row, 6, action)?,
        ended_at: instant(row, 7, action)?,
        summary: summary_text
            .zip(summary_hash)
            .map(|(text, source_hash)| VersionSummary { text, source_hash }),
    })
}

#[async_trait]
impl HistoryStore for SqlStorage {
    async fn record(&self, fence: &Fence, change: &Change) -> StoreResult<Recorded> {
        let action = "recording a document's history";
        change.check()?;
        let sql = &self.inner.history_sql;
        let mut tx = self.inner.begin_fenced(fence, action).await?;
        self.require_document(tx.conn(), &change.channel, action)
            .await?;
        let latest = sqlx::query(&sql.latest)
            .bind(&change.channel.0)
            .fetch_optional(tx.conn())
            .await
            .context(action)?
            .map(|row| version_from(&row, action))
            .transpose()?;
        let recorded = next_session(latest.as_ref(), change)?;
        let version = &recorded.version;
        let statement = if recorded.extended {
            sqlx::query(&sql.extend)
                .bind(&version.channel.0)
                .bind(version.number)
                .bind(&version.text)
                .bind(version.revision)
                .bind(&version.source_hash)
                .bind(version.ended_at.0)
        } else {
            sqlx::query(&sql.insert)
                .bind(&version.channel.0)
                .bind(version.number)
                .bind(version.author.as_ref().map(|a| a.0.clone()))
                .bind(&version.text)
                .bind(version.revision)
                .bind(&version.source_hash)
                .bind(version.started_at.0)
                .bind(version.ended_at.0)
        };
        statement.execute(tx.conn()).await.context(action)?;
        tx.commit(action).await?;
        Ok(recorded)
    }

    async fn versions(&self, channel: &ChannelId, limit: usize) -> StoreResult<Vec<Version>> {
        let action = "reading a document's history";
        let limit = i64::try_from(limit.min(MAX_VERSIONS_LISTED)).unwrap_or(0);
        let rows = sqlx::query(&self.inner.history_sql.list)
            .bind(&channel.0)
            .bind(limit)
            .fetch_all(&self.inner.pool)
            .await
            .context(action)?;
        rows.iter().map(|row| version_from(row, action)).collect()
    }

    async fn version(&self, channel: &ChannelId, number: i64) -> StoreResult<Option<Version>> {
        let action = "reading a document's history";
        sqlx::query(&self.inner.history_sql.one)
            .bind(&channel.0)
            .bind(number)
            .fetch_optional(&self.inner.pool)
            .await
            .context(action)?
            .map(|row| version_from(&row, action))
            .transpose()
    }
}
