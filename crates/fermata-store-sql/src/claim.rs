//! The claim machinery the workflow runs and the background jobs share, written once: the two
//! statements of a claim and the claim itself, for any table whose rows have `id`, `state`,
//! `claim_generation`, `claim_worker`, `ready_at` and `updated_at` (see the port's `claim.rs` for
//! what `ready_at` means).
//!
//! A claim selects the first ready row `FOR UPDATE SKIP LOCKED` on PostgreSQL, so workers racing
//! for work each take a different row and never wait for one another; SQLite's `BEGIN IMMEDIATE`
//! runs claims one at a time. The row then becomes `running` under the next claim generation,
//! expiring `ttl` from now on the database's clock. The caller owns the transaction: the workflow
//! store claims in a plain write transaction, the job store in a fenced one.

use sqlx::AnyConnection;
use sqlx::any::AnyRow;

use crate::dialect::Dialect;
use crate::error::StoreContext;

/// The guard every write under a claim starts with: the row is still `running` under the claim
/// generation the writer presents (`$1` the row's ID, `$2` the generation).
pub(crate) const HELD: &str = "id = $1 AND claim_generation = $2 AND state = 'running'";

/// A claimable table's claim statements, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct ClaimStatements {
    /// Has a `{names}` list of placeholders, filled in per call.
    candidate: String,
    claim: String,
}

impl ClaimStatements {
    /// `filter` names the column a claim's list of names matches (the workflow, the job kind);
    /// `also` is more of the claim's `SET` list (it may use `$4`, see [`ClaimStatements::claim`]);
    /// the claim returns `returning`.
    pub(crate) fn new(
        dialect: Dialect,
        table: &str,
        filter: &str,
        also: &str,
        returning: &str,
    ) -> Self {
        ClaimStatements {
            candidate: dialect.render(&format!(
                "SELECT id FROM {table} \
                 WHERE ready_at <= {{now}} AND {filter} IN ({{names}}) \
                 ORDER BY ready_at, id LIMIT 1{{for_update}}{{skip_locked}}"
            )),
            claim: dialect.render(&format!(
                "WITH clock AS (SELECT {{now}} AS now) \
                 UPDATE {table} SET state = 'running', \
                     claim_generation = claim_generation + 1, claim_worker = $2, \
                     ready_at = clock.now + $3, {also}, updated_at = clock.now \
                 FROM clock WHERE id = $1 RETURNING {returning}"
            )),
        }
    }

    /// Claims the first ready row whose filter column is one of `names` for `worker` for
    /// `ttl_ms`, on `conn` (inside the caller's write transaction), binding `extra` as `$4` when
    /// given. Returns the claimed row as the claim statement returns it, or `None` when no row is
    /// ready.
    pub(crate) async fn claim(
        &self,
        conn: &mut AnyConnection,
        names: &[String],
        worker: &str,
        ttl_ms: i64,
        extra: Option<i64>,
        action: &str,
    ) -> fermata_store::StoreResult<Option<AnyRow>> {
        if names.is_empty() {
            return Ok(None);
        }
        let placeholders: Vec<String> = (1..=names.len()).map(|i| format!("${i}")).collect();
        let candidate = self.candidate.replace("{names}", &placeholders.join(", "));
        let mut query = sqlx::query_scalar::<_, String>(&candidate);
        for name in names {
            query = query.bind(name);
        }
        let Some(id) = query.fetch_optional(&mut *conn).await.context(action)? else {
            return Ok(None);
        };
        let mut claim = sqlx::query(&self.claim).bind(&id).bind(worker).bind(ttl_ms);
        if let Some(extra) = extra {
            claim = claim.bind(extra);
        }
        let row = claim.fetch_one(&mut *conn).await.context(action)?;
        Ok(Some(row))
    }
}
