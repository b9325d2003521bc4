//! The few places where SQLite and PostgreSQL differ, in one table.
//!
//! Store modules write each statement once, as a template, and render it here when the store
//! opens. Placeholders `$1`, `$2`, ... work on both engines. Every stored instant is a `BIGINT` of
//! milliseconds since the Unix epoch and every flag is a nullable instant (`released_at`), so
//! values cross the `Any` driver as plain integers and text on both engines.

/// Whether the fence is live: lease `l` (joined by name `$1`) holds token `$2`, unreleased and
/// unexpired at `clock.now`.
pub(crate) const FENCE_LIVE: &str = "CASE WHEN l.token = $2 AND l.released_at IS NULL \
                                     AND l.expires_at > clock.now THEN 1 ELSE 0 END AS live";

/// A fence check in two parts; see [`Dialect::fence_steps`].
pub(crate) struct FenceSteps {
    pub(crate) steps: String,
    pub(crate) answer: String,
}

/// Which SQL engine a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The adapter's name, as configured and reported.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Sqlite => "sqlite",
            Dialect::Postgres => "postgres",
        }
    }

    /// How a write transaction begins. SQLite takes its write lock up front, so a transaction
    /// that reads before it writes never fails to upgrade.
    pub fn begin_write(self) -> &'static str {
        match self {
            Dialect::Sqlite => "BEGIN IMMEDIATE",
            Dialect::Postgres => "BEGIN",
        }
    }

    /// How a read-only transaction that must see one consistent snapshot begins. SQLite's WAL
    /// gives a deferred transaction one snapshot from its first read on.
    pub(crate) fn begin_snapshot(self) -> &'static str {
        match self {
            Dialect::Sqlite => "BEGIN",
            Dialect::Postgres => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
        }
    }

    /// The fence check of a fenced transaction, one statement: it locks the lease row so a
    /// takeover must wait for the write (PostgreSQL `FOR KEY SHARE`, which renewal's
    /// `FOR NO KEY UPDATE` does not conflict with), serializes the writes of one lease (a
    /// transaction-scoped advisory lock on PostgreSQL, since `FOR KEY SHARE` lets several writers
    /// share the row), and only then reads the database's clock and whether `$2` is the live
    /// token of lease `$1`, from the row version it locked. Each materialized step reads the one
    /// before it, so the locks are held before the clock is read. On SQLite, `BEGIN IMMEDIATE`
    /// already holds the database's write lock, so the check alone remains.
    pub(crate) fn fence_check(self) -> String {
        let FenceSteps { steps, answer } = self.fence_steps();
        format!("WITH {steps} {answer}")
    }

    /// The fence check as the `WITH` steps that take its locks and read the clock, and the
    /// `SELECT` that answers `(now, live)` from them, for a statement that carries the check in
    /// front of its own work.
    pub(crate) fn fence_steps(self) -> FenceSteps {
        let live = FENCE_LIVE;
        match self {
            Dialect::Sqlite => FenceSteps {
                steps: self.render("clock AS (SELECT {now} AS now)"),
                answer: format!(
                    "SELECT clock.now, {live} FROM clock LEFT JOIN leases l ON l.name = $1"
                ),
            },
            Dialect::Postgres => FenceSteps {
                steps: self.render(
                    "locked AS MATERIALIZED ( \
                         SELECT token, released_at, expires_at FROM leases WHERE name = $1{for_key_share}), \
                     serialized AS MATERIALIZED ( \
                         SELECT pg_advisory_xact_lock(hashtextextended($1, 0)) AS held \
                         FROM (SELECT count(*) FROM locked) AS seen), \
                     clock AS MATERIALIZED ( \
                         SELECT {now} AS now FROM (SELECT count(held) FROM serialized) AS waited)",
                ),
                answer: format!("SELECT clock.now, {live} FROM clock LEFT JOIN locked l ON true"),
            },
        }
    }

    /// The head of a PostgreSQL statement that carries its fence check in front of its own
    /// writes: the check's steps, then `fence` answering `(now, live)`. The writes that follow,
    /// as data-modifying `WITH` queries, read the clock as `(SELECT now FROM fence)` and write
    /// only when `(SELECT live FROM fence) = 1`; the statement ends in [`fenced_answer`].
    ///
    /// [`fenced_answer`]: Dialect::fenced_answer
    pub(crate) fn fenced_head(self) -> String {
        let FenceSteps { steps, answer } = self.fence_steps();
        format!("{steps}, fence AS MATERIALIZED ({answer})")
    }

    /// The `SELECT` that answers a statement carrying its fence check: `(now, live)`, then
    /// `columns`, over the fence and `joins`. On PostgreSQL it ends the statement that
    /// [`fenced_head`] began. On SQLite it follows the writes (which `BEGIN IMMEDIATE` already
    /// serialized; a fence found not live rolls them back) and reads the lease row at `clock`,
    /// the transaction's clock as the caller binds it.
    ///
    /// [`fenced_head`]: Dialect::fenced_head
    pub(crate) fn fenced_answer(self, columns: &str, joins: &str, clock: &str) -> String {
        match self {
            Dialect::Postgres => {
                format!("SELECT fence.now, fence.live, {columns} FROM fence {joins}")
            }
            Dialect::Sqlite => format!(
                "SELECT clock.now, {FENCE_LIVE}, {columns} \
                 FROM (SELECT {clock} AS now) AS clock LEFT JOIN leases l ON l.name = $1 {joins}"
            ),
        }
    }

    /// Settings for the lease renewal connection. PostgreSQL ends a renewal transaction that sits
    /// idle, so a session whose client vanished cannot keep the lease row locked.
    pub(crate) fn renewal_session_settings(self) -> &'static [&'static str] {
        match self {
            Dialect::Sqlite => &[],
            Dialect::Postgres => &["SET idle_in_transaction_session_timeout = '2s'"],
        }
    }

    /// Settings for every session of the shared pool that bound each wait to `limit`, so a
    /// session whose client froze or vanished cannot hold its locks for longer: a statement, a
    /// lock wait and a transaction left idle on PostgreSQL (the server ends such a session, and
    /// its transaction rolls back), the wait for the write lock on SQLite.
    pub(crate) fn pool_session_settings(self, limit: std::time::Duration) -> Vec<String> {
        let millis = limit.as_millis().max(1);
        match self {
            Dialect::Sqlite => vec![format!("PRAGMA busy_timeout = {millis}")],
            Dialect::Postgres => vec![
                format!("SET statement_timeout = {millis}"),
                format!("SET lock_timeout = {millis}"),
                format!("SET idle_in_transaction_session_timeout = {millis}"),
            ],
        }
    }

    /// Reads the server session behind a connection, where there is one.
    pub(crate) fn server_session_id(self) -> Option<&'static str> {
        match self {
            Dialect::Sqlite => None,
            Dialect::Postgres => Some("SELECT CAST(pg_backend_pid() AS BIGINT)"),
        }
    }

    /// Ends a server session from another connection.
    pub(crate) fn terminate_server_session(self) -> Option<&'static str> {
        match self {
            Dialect::Sqlite => None,
            Dialect::Postgres => Some("SELECT pg_terminate_backend(CAST($1 AS INTEGER))"),
        }
    }

    /// Renders a statement template: `{now}` becomes the database's clock in milliseconds,
    /// `{for_update}`, `{for_no_key_update}`, `{for_key_share}` become row locks, and
    /// `{skip_locked}` (after a row lock) passes over rows other transactions hold locked. On
    /// SQLite they are all empty: its `BEGIN IMMEDIATE` already holds the database's write lock,
    /// so write transactions run one at a time and there is never a locked row to skip.
    /// `{bytewise}` (after a text column) compares and orders text by its bytes, as Rust does,
    /// whatever the database's collation (SQLite's default already does).
    pub(crate) fn render(self, template: &str) -> String {
        let (now, for_update, for_no_key_update, for_share, for_key_share, skip_locked, bytewise) =
            match self {
                Dialect::Sqlite => (
                    "CAST(unixepoch('subsec') * 1000 AS INTEGER)",
                    "",
                    "",
                    "",
                    "",
                    "",
                    "",
                ),
                Dialect::Postgres => (
                    "CAST(floor(extract(epoch FROM clock_timestamp()) * 1000) AS BIGINT)",
                    " FOR UPDATE",
                    " FOR NO KEY UPDATE",
                    " FOR SHARE",
                    " FOR KEY SHARE",
                    " SKIP LOCKED",
                    " COLLATE \"C\"",
                ),
            };
        template
            .replace("{now}", now)
            .replace("{bytewise}", bytewise)
            .replace("{for_update}", for_update)
            .replace("{for_no_key_update}", for_no_key_update)
            .replace("{for_share}", for_share)
            .replace("{for_key_share}", for_key_share)
            .replace("{skip_locked}", skip_locked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_each_dialect() {
        let template = "SELECT {now} FROM leases WHERE name = $1{for_key_share}";
        assert_eq!(
            Dialect::Sqlite.render(template),
            "SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER) FROM leases WHERE name = $1"
        );
        assert_eq!(
            Dialect::Postgres.render(template),
            "SELECT CAST(floor(extract(epoch FROM clock_timestamp()) * 1000) AS BIGINT) \
             FROM leases WHERE name = $1 FOR KEY SHARE"
        );
        let queue = "SELECT id FROM runs LIMIT 1{for_update}{skip_locked}";
        let limit = std::time::Duration::from_millis(1_500);
        assert_eq!(
            Dialect::Postgres.pool_session_settings(limit),
            [
                "SET statement_timeout = 1500",
                "SET lock_timeout = 1500",
                "SET idle_in_transaction_session_timeout = 1500",
            ]
        );
        assert_eq!(
            Dialect::Sqlite.pool_session_settings(limit),
            ["PRAGMA busy_timeout = 1500"]
        );
        assert_eq!(Dialect::Sqlite.render(queue), "SELECT id FROM runs LIMIT 1");
        assert_eq!(
            Dialect::Postgres.render(queue),
            "SELECT id FROM runs LIMIT 1 FOR UPDATE SKIP LOCKED"
        );
    }
}
