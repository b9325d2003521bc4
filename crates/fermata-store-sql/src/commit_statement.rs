//! A document commit's writes as one query: the revision check and advance of the channel row,
//! the journal row, the sidecar and the operation record travel to the database together, one
//! round trip on PostgreSQL and one hand-off to SQLite's connection thread, rather than one each.
//!
//! Both renderings take the same binds and answer the same way: one row, `(revision, sequence,
//! repository, recorded)`, when the channel was at the expected revision and live (with
//! `recorded` 0 when the operation ID was already used, so the caller answers a repeat and rolls
//! the writes back), and no row when nothing was written.
//!
//! - PostgreSQL: one statement whose `UPDATE ... RETURNING` feeds the three inserts
//!   (data-modifying `WITH` queries); the `UPDATE` holds the channel row locked.
//! - SQLite (whose `WITH` cannot write): five statements in one query string, sharing the
//!   numbered binds. Each write is guarded by the same check of the channel row as it was before
//!   the commit, and the `UPDATE` that advances it comes last. `BEGIN IMMEDIATE` holds the
//!   database's write lock, so the row cannot change between them. The answer is a `SELECT`
//!   after the operation record, whose `changes()` is that insert's count (a `SELECT` leaves the
//!   count as the last write set it).
//!
//! Read the answer with `fetch_all`: a driver that stops at the first row would leave SQLite's
//! last statements unrun.

use crate::dialect::Dialect;

/// The channel row a commit may write to: its ID, at the revision the commit expected, live.
const EXPECTED: &str = "id = $1 AND revision = $2 AND archived_at IS NULL";

const ADVANCE: &str = "UPDATE channels SET revision = revision + 1, sequence = sequence + 1, \
                       updated_at = $3, title = COALESCE($4, title)";

const UPSERT_STATE: &str = "ON CONFLICT (channel_id) DO UPDATE SET version = excluded.version, \
                            sidecar = excluded.sidecar, \
                            unanswered_decisions = excluded.unanswered_decisions";

const OPERATION_COLUMNS: &str = "channel_operations (channel_id, operation_id, fingerprint, revision, sequence, update_sequence)";

/// The commit statement for `dialect`; see the module's documentation. Its binds: `$1` channel
/// ID, `$2` expected revision, `$3` the transaction's clock, `$4` new title (or null), `$5` update
/// bytes (or null), `$6` sidecar version (null for no sidecar), `$7` sidecar JSON, `$8`
/// unanswered decisions, `$9` operation ID, `$10` the commit's fingerprint.
pub(crate) fn render(dialect: Dialect) -> String {
    match dialect {
        Dialect::Postgres => format!(
            "WITH advanced AS ({ADVANCE} WHERE {EXPECTED} \
                 RETURNING id, revision, sequence, epoch, repository), \
             journal AS (INSERT INTO channel_updates (channel_id, sequence, epoch, bytes) \
                 SELECT id, sequence, epoch, $5 FROM advanced WHERE $5 IS NOT NULL), \
             state AS (INSERT INTO channel_state (channel_id, version, sidecar, unanswered_decisions) \
                 SELECT id, $6, $7, $8 FROM advanced WHERE $6 IS NOT NULL {UPSERT_STATE}), \
             recorded AS (INSERT INTO {OPERATION_COLUMNS} \
                 SELECT id, $9, $10, revision, sequence, CASE WHEN $5 IS NULL THEN NULL ELSE sequence END \
                 FROM advanced ON CONFLICT (channel_id, operation_id) DO NOTHING RETURNING 1) \
             SELECT revision, sequence, repository, (SELECT count(*) FROM recorded) FROM advanced"
        ),
        Dialect::Sqlite => format!(
            "INSERT INTO channel_updates (channel_id, sequence, epoch, bytes) \
                 SELECT id, sequence + 1, epoch, $5 FROM channels WHERE {EXPECTED} AND $5 IS NOT NULL; \
             INSERT INTO channel_state (channel_id, version, sidecar, unanswered_decisions) \
                 SELECT id, $6, $7, $8 FROM channels WHERE {EXPECTED} AND $6 IS NOT NULL {UPSERT_STATE}; \
             INSERT INTO {OPERATION_COLUMNS} \
                 SELECT id, $9, $10, revision + 1, sequence + 1, \
                     CASE WHEN $5 IS NULL THEN NULL ELSE sequence + 1 END \
                 FROM channels WHERE {EXPECTED} ON CONFLICT (channel_id, operation_id) DO NOTHING; \
             SELECT revision + 1, sequence + 1, repository, changes() FROM channels WHERE {EXPECTED}; \
             {ADVANCE} WHERE {EXPECTED}"
        ),
    }
}
