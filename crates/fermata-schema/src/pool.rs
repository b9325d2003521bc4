//! The introspection connections of one database step: at most the configured number (8 by
//! default), and never more than the snapshot account may still open under its
//! `max_user_connections` limit, so a refresh never takes the connections the account's other
//! clients need, nor fails on the limit halfway. Every connection is prepared with the fixed
//! introspection settings ([`snapshot::prepare`]). A step closes its connections ([`close`])
//! before the verifier opens its own, so the two never count against the limit together.
//!
//! The headroom is read on the first connection: the session value of `max_user_connections`
//! (which both MySQL and MariaDB set to the account's own limit when it has one, else the global
//! one; 0 means no limit) minus the account's connections in `information_schema.PROCESSLIST`
//! (an account always sees its own threads there). Connections of the same user name from other
//! hosts are counted too, which errs on the side of fewer connections.

use fermata_schema_core::{ErrorCode, SafeError};
use sqlx::mysql::MySqlConnection;
use sqlx::{Connection, Row};

use crate::snapshot;
use crate::source::{DriverContext, SourceSettings};

/// The account's limit and how many of its connections are open now, this one included.
const HEADROOM: &str = "SELECT CAST(@@SESSION.max_user_connections AS SIGNED), \
     CAST((SELECT COUNT(*) FROM information_schema.PROCESSLIST \
      WHERE USER = SUBSTRING(CURRENT_USER(), 1, \
                             CHAR_LENGTH(CURRENT_USER()) - LOCATE('@', REVERSE(CURRENT_USER())))) \
      AS SIGNED)";

/// How many connections the account may have open in all, at most `wanted`, given its `limit`
/// (0 or less: none) and the `open` ones (`first` among them).
fn allowed(wanted: usize, limit: i64, open: i64) -> usize {
    let wanted = wanted.max(1);
    if limit <= 0 {
        return wanted;
    }
    // The connection already open is ours; the others belong to someone else.
    let others = open.saturating_sub(1).max(0);
    let headroom = usize::try_from(limit.saturating_sub(others)).unwrap_or(0);
    wanted.min(headroom).max(1)
}

/// `first` and as many more connections as the account's headroom allows, up to `wanted`, all
/// prepared for introspection.
pub(crate) async fn open(
    source: &SourceSettings,
    mut first: MySqlConnection,
    wanted: usize,
) -> Result<Vec<MySqlConnection>, SafeError> {
    let row = sqlx::query(HEADROOM)
        .fetch_one(&mut first)
        .await
        .query_context("read the account's connection headroom")?;
    let (limit, open): (i64, i64) = (
        row.try_get(0)
            .or_unreadable(|| SafeError::new(ErrorCode::UnsupportedSchemaOutput))?,
        row.try_get(1)
            .or_unreadable(|| SafeError::new(ErrorCode::UnsupportedSchemaOutput))?,
    );
    let count = allowed(wanted, limit, open);
    snapshot::prepare(&mut first).await?;
    let mut connections = Vec::with_capacity(count);
    connections.push(first);
    let more = (1..count).map(|_| async {
        let mut connection = source.connect().await?;
        snapshot::prepare(&mut connection).await?;
        Ok::<_, SafeError>(connection)
    });
    for opened in futures::future::join_all(more).await {
        connections.push(opened?);
    }
    tracing::debug!(
        connections = connections.len(),
        limit,
        open,
        "introspection connections open"
    );
    Ok(connections)
}

/// Closes `connections` at once, each telling the server it is leaving, so that they no longer
/// count against the account's limit when the next connections open.
pub(crate) async fn close(connections: Vec<MySqlConnection>) {
    let closing = connections.into_iter().map(|connection| async move {
        // A connection that fails to close cleanly is dropped, which closes its socket: the
        // server ends the session either way, and nothing read depends on it.
        let _ = connection.close().await;
    });
    futures::future::join_all(closing).await;
}

#[cfg(test)]
mod tests {
    use super::allowed;

    #[test]
    fn the_pool_stays_inside_the_accounts_headroom() {
        // No limit: as many as wanted.
        assert_eq!(allowed(8, 0, 1), 8);
        assert_eq!(allowed(8, -1, 1), 8);
        // A limit of 3 with only our connection open: 3.
        assert_eq!(allowed(8, 3, 1), 3);
        // A limit of 10 with 4 others open: 6.
        assert_eq!(allowed(8, 10, 5), 6);
        // Never fewer than the one we have, never more than wanted.
        assert_eq!(allowed(8, 2, 9), 1);
        assert_eq!(allowed(2, 100, 1), 2);
        assert_eq!(allowed(0, 100, 1), 1);
    }
}
