//! A document commit's writes as one query: the revision check and advance of the channel row,
//! the journal row, the sidecar, the search row (the text and title the commit carries) and the
//! operation record travel to the database together, one round trip on PostgreSQL and one
//! hand-off to SQLite's connection thread, rather than one each.
//! A commit that runs alone carries its fence check in the same query too.
//!
//! Every rendering takes the commit's values as the same run of binds ([`bind_commit`]) and
//! answers with one row, `(revision, sequence, repository, recorded)`, when the channel was at the
//! expected revision and live (on SQLite with `recorded` 0 when the operation ID was already
//! used, so the caller answers a repeat and rolls the writes back), and with no row when nothing
//! was written.
//! The fenced renderings ([`render_fenced`]) bind the lease and token as `$1` and `$2` first and
//! always answer one row: `(now, live)`, then those four columns, null where nothing was written.
//! A fence found not live fails the transaction, which rolls back whatever the query wrote (on
//! PostgreSQL, nothing: its fenced form writes only once the fence is found live).
//!
//! - PostgreSQL: one statement whose `UPDATE ... RETURNING` feeds the three inserts and the
//!   search row's update (data-modifying `WITH` queries); the `UPDATE` holds the channel row
//!   locked, and writes only when the operation ID is new, so the statement never writes what
//!   it must take back, and a lone commit runs it as a transaction of its own
//!   (`Inner::run_fenced_statement`). The fenced
//!   form puts the fence check's steps ([`Dialect::fence_steps`]: the lease row `FOR KEY SHARE`, the
//!   advisory lock, the server's clock) in front, and its `UPDATE` writes only when the token is
//!   live. That guard is uncorrelated, so PostgreSQL plans it as a one-time filter over the
//!   channel's index scan (`EXPLAIN` shows `One-Time Filter` above `Index Scan using
//!   channels_pkey`): the fence's locks are taken before the channel row is, in the order a
//!   separate check takes them, so two writers of one lease cannot lock in opposite orders.
//! - SQLite (whose `WITH` cannot write): seven statements in one query string, sharing the
//!   numbered binds. Each write is guarded by the same check of the channel row as it was before
//!   the commit, and the `UPDATE`s that move its `updated_at` (when due, [`updated_at_due`])
//!   and advance it come last. `BEGIN IMMEDIATE` holds the database's write lock, so the row
//!   cannot change between them. The answer is a `SELECT`
//!   after the operation record, whose `changes()` is that insert's count (a `SELECT` leaves the
//!   count as the last write set it). The fenced form answers the fence from the lease row in
//!   that `SELECT`, at a clock bound by the caller: SQLite's clock is the process's, and one
//!   value keeps the check and the writes' timestamps the same instant across the statements.
//!
//! Several commits of a group at once ([`render_group`]), after the group's fence check: the same
//! writes over the rows of `members`, one per commit, read from one JSON bind (bytes as hex; the
//! `Any` driver binds no arrays), one round trip or hand-off for the group. Each member's writes
//! are guarded by its channel's expected revision and by its operation ID being new, so a member
//! that is stale, archived or repeated writes nothing. On PostgreSQL the members are
//! `jsonb_to_recordset`'s rows and the writes are the lone commit's `WITH` queries; on SQLite
//! they are `json_each`'s, read again by each of seven statements, the operation record written
//! before the answer, the move of `updated_at` and the advance, which find a member written by
//! its record at the revision that follows the channel's (no earlier record can be: the channel
//! is past every revision it recorded).
//!
//! Read the answer with `fetch_all`: a driver that stops at the first row would leave SQLite's
//! last statements unrun.

use fermata_store::search::indexed_text;
use fermata_store::{Commit, Coverage, Fence, UPDATED_AT_RESOLUTION_MS};
use sqlx::Any;
use sqlx::any::AnyArguments;
use sqlx::query::Query;

use crate::dialect::Dialect;

/// Where a rendering finds the commit's values, the clock, and the shard the fence covers.
struct Binds {
    values: Values,
    /// The transaction's clock: a bind, or the fence check's.
    now: &'static str,
    /// The bind of the one shard the fence covers, null when it covers every shard
    /// ([`covered_shard`]).
    covered: &'static str,
}

/// Where a rendering finds the commit's values.
enum Values {
    /// Numbered binds, the first at this placeholder number, the rest following in
    /// [`bind_commit`]'s order.
    From(usize),
    /// The columns of the member row `m` of a group written as one statement
    /// ([`render_group`]), named `given_` and the value's name.
    Member,
}

/// A commit's values as every rendering names them (`{channel}`, ... in a template), in the
/// order [`values`] gives them, with the kind of each.
const NAMES: [(&str, Kind); 10] = [
    ("channel", Kind::Text),
    ("expected", Kind::Number),
    ("title", Kind::Text),
    ("update", Kind::Bytes),
    ("version", Kind::Number),
    ("json", Kind::Text),
    ("unanswered", Kind::Number),
    ("operation", Kind::Text),
    ("fingerprint", Kind::Bytes),
    ("text", Kind::Text),
];

/// What a commit's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Number,
    Bytes,
}

/// One of a commit's values, null where the commit has none.
enum Value {
    Text(Option<String>),
    Number(Option<i64>),
    Bytes(Option<Vec<u8>>),
}

/// `commit`'s values in [`NAMES`]' order: channel, expected revision, title, update, sidecar
/// version, sidecar JSON, unanswered decisions, operation ID, fingerprint, text (as the index
/// takes it, [`indexed_text`]).
fn values(commit: &Commit) -> [Value; 10] {
    let sidecar = commit.sidecar.as_ref();
    [
        Value::Text(Some(commit.channel.0.clone())),
        Value::Number(Some(commit.expected_revision)),
        Value::Text(commit.title.clone()),
        Value::Bytes(commit.update.clone()),
        Value::Number(sidecar.map(|s| s.version)),
        Value::Text(sidecar.map(|s| s.json.clone())),
        Value::Number(sidecar.map(|s| s.unanswered_decisions)),
        Value::Text(Some(commit.operation.as_str().to_owned())),
        Value::Bytes(Some(commit.fingerprint().to_vec())),
        Value::Text(commit.text.as_deref().map(indexed_text)),
    ]
}

impl Binds {
    /// Fills a template whose placeholders `{channel}`, `{expected}`, ... name the commit's
    /// values.
    fn fill(&self, template: &str) -> String {
        let filled =
            NAMES
                .iter()
                .enumerate()
                .fold(template.to_owned(), |text, (offset, (name, _))| {
                    let value = match self.values {
                        Values::From(first) => format!("${}", first + offset),
                        Values::Member => format!("m.given_{name}"),
                    };
                    text.replace(&format!("{{{name}}}"), &value)
                });
        filled
            .replace("{clock}", self.now)
            .replace("{covered}", self.covered)
    }
}

/// The channel row a commit may write to: its ID, at the revision the commit expected, live, in
/// a shard the fence covers. The shard is checked here rather than read before, a round trip
/// per commit; a commit this refuses is answered `Fenced` from reads.
const EXPECTED: &str = "id = {channel} AND revision = {expected} AND archived_at IS NULL \
                        AND ({covered} IS NULL OR channels.shard = {covered})";

/// The channel row's advance. A commit whose update comes without its text marks the document's
/// indexed text as behind (a live room's batches: the room indexes the text when its writers
/// pause); a commit with its text makes it current. It leaves `updated_at` to
/// [`updated_at_due`].
const ADVANCE: &str = "UPDATE channels SET revision = revision + 1, sequence = sequence + 1, \
                       title = COALESCE({title}, title), \
                       search_stale_since = CASE WHEN {text} IS NOT NULL THEN NULL \
                           WHEN {update} IS NOT NULL THEN COALESCE(search_stale_since, {clock}) \
                           ELSE search_stale_since END";

/// Whether a commit moves the channel's `updated_at` to its clock: only where the time recorded
/// is [`UPDATED_AT_RESOLUTION_MS`] or more older ([`updated_at_after_commit`]). A write that left
/// the column as it was would still rewrite the document's entry in the recency index
/// (`channels_page`) on SQLite, which rewrites the index of every column an `UPDATE` sets, and
/// would keep PostgreSQL from updating the row in place (a heap-only tuple, which writes no
/// index entry); so SQLite moves it in a statement of its own, which writes nothing when it is
/// not due, and PostgreSQL's advance sets it only to a new value.
///
/// [`updated_at_after_commit`]: fermata_store::updated_at_after_commit
fn updated_at_due() -> String {
    format!("updated_at <= {{clock}} - {UPDATED_AT_RESOLUTION_MS}")
}

/// The sidecar's table and the columns every write of it names.
pub(crate) const STATE_COLUMNS: &str =
    "channel_state (channel_id, version, sidecar, unanswered_decisions)";

/// How a sidecar write replaces the one before.
pub(crate) const UPSERT_STATE: &str = "ON CONFLICT (channel_id) DO UPDATE SET version = excluded.version, \
                            sidecar = excluded.sidecar, \
                            unanswered_decisions = excluded.unanswered_decisions";

/// The search row's new title and text, where the commit carries either (see migration `0018`).
const SEARCH_SET: &str = "title = COALESCE({title}, title), body = COALESCE({text}, body)";

/// Whether the commit changes the search row at all.
const SEARCH_CHANGES: &str = "({title} IS NOT NULL OR {text} IS NOT NULL)";

const OPERATION_COLUMNS: &str = "channel_operations (channel_id, operation_id, fingerprint, revision, sequence, update_sequence)";

/// The commit statement for `dialect`, to run after a fence check; see the module's
/// documentation. Its binds: the covered shard, [`bind_commit`]'s, then the transaction's clock.
pub(crate) fn render(dialect: Dialect) -> String {
    let binds = Binds {
        values: Values::From(2),
        now: "$12",
        covered: "$1",
    };
    match dialect {
        Dialect::Postgres => binds.fill(&format!(
            "WITH {} SELECT revision, sequence, repository, (SELECT count(*) FROM recorded) \
             FROM advanced",
            postgres_writes("", ONE)
        )),
        Dialect::Sqlite => binds.fill(&sqlite_writes(&format!(
            "SELECT revision + 1, sequence + 1, repository, changes() FROM channels \
             WHERE {EXPECTED}"
        ))),
    }
}

/// The statement of a commit that runs alone: its fence check (lease `$1`, token `$2`) and its
/// writes, one round trip after `BEGIN`. Its binds: the lease, the token, the covered shard,
/// [`bind_commit`]'s, and on SQLite the transaction's clock. Its one row: `(now, live, revision,
/// sequence, repository, recorded)`.
pub(crate) fn render_fenced(dialect: Dialect) -> String {
    let binds = Binds {
        values: Values::From(4),
        now: match dialect {
            Dialect::Postgres => "(SELECT now FROM fence)",
            Dialect::Sqlite => "$14",
        },
        covered: "$3",
    };
    match dialect {
        Dialect::Postgres => binds.fill(&format!(
            "WITH {}, {} {}",
            dialect.fenced_head(),
            postgres_writes(" AND (SELECT live FROM fence) = 1", ONE),
            dialect.fenced_answer(
                "a.revision, a.sequence, a.repository, (SELECT count(*) FROM recorded)",
                "LEFT JOIN advanced a ON true",
                "",
            )
        )),
        Dialect::Sqlite => binds.fill(&sqlite_writes(&dialect.fenced_answer(
            "channels.revision + 1, channels.sequence + 1, channels.repository, changes()",
            &format!("LEFT JOIN channels ON {EXPECTED}"),
            "{clock}",
        ))),
    }
}

/// The seven statements of a SQLite commit, `answer` the fifth.
fn sqlite_writes(answer: &str) -> String {
    let due = updated_at_due();
    format!(
        "INSERT INTO channel_updates (channel_id, sequence, epoch, bytes) \
             SELECT id, sequence + 1, epoch, {{update}} FROM channels \
             WHERE {EXPECTED} AND {{update}} IS NOT NULL; \
         INSERT INTO {STATE_COLUMNS} \
             SELECT id, {{version}}, {{json}}, {{unanswered}} FROM channels \
             WHERE {EXPECTED} AND {{version}} IS NOT NULL {UPSERT_STATE}; \
         UPDATE document_search SET {SEARCH_SET} WHERE channel_id = {{channel}} \
             AND {SEARCH_CHANGES} AND EXISTS (SELECT 1 FROM channels WHERE {EXPECTED}); \
         INSERT INTO {OPERATION_COLUMNS} \
             SELECT id, {{operation}}, {{fingerprint}}, revision + 1, sequence + 1, \
                 CASE WHEN {{update}} IS NULL THEN NULL ELSE sequence + 1 END \
             FROM channels WHERE {EXPECTED} ON CONFLICT (channel_id, operation_id) DO NOTHING; \
         {answer}; \
         UPDATE channels SET updated_at = {{clock}} WHERE {EXPECTED} AND {due}; \
         {ADVANCE} WHERE {EXPECTED}"
    )
}

/// Where a PostgreSQL commit's writes find the commit's values beside the channel row they
/// advanced.
#[derive(Clone, Copy)]
struct Source {
    /// What the advance's `UPDATE` reads besides the channel.
    advance_from: &'static str,
    /// The rows the writes after the advance read: `advanced`, joined to the members of a group.
    rows: &'static str,
}

/// One commit, whose values are binds.
const ONE: Source = Source {
    advance_from: "",
    rows: "advanced",
};

/// A group's commits, one row of `members` each (see [`render_group`]).
const GROUP: Source = Source {
    advance_from: " FROM members m",
    rows: "advanced JOIN members m ON m.given_channel = advanced.id",
};

/// Whether a commit's operation ID is new on its document.
const NEW_OPERATION: &str = "NOT EXISTS (SELECT 1 FROM channel_operations \
                             WHERE channel_id = {channel} AND operation_id = {operation})";

/// The data-modifying `WITH` queries of a PostgreSQL commit (or of a group's, one row of
/// `source` each), the advance guarded by `guard` too. The advance also checks that the
/// operation ID is new, so a repeated operation writes nothing and the statement never writes
/// what it must take back: a lone commit can run as a transaction of its own. Its operation
/// record is a plain `INSERT`, so a conflict the check missed (it cannot, while the lease's
/// writes run one at a time) fails the statement whole.
fn postgres_writes(guard: &str, source: Source) -> String {
    let Source { advance_from, rows } = source;
    let due = updated_at_due();
    format!(
        "advanced AS ({ADVANCE}, \
             updated_at = CASE WHEN {due} THEN {{clock}} ELSE updated_at END{advance_from} \
             WHERE {EXPECTED}{guard} AND {NEW_OPERATION} \
             RETURNING id, revision, sequence, epoch, repository), \
         journal AS (INSERT INTO channel_updates (channel_id, sequence, epoch, bytes) \
             SELECT id, sequence, epoch, {{update}} FROM {rows} WHERE {{update}} IS NOT NULL), \
         state AS (INSERT INTO {STATE_COLUMNS} \
             SELECT id, {{version}}, {{json}}, {{unanswered}} FROM {rows} \
             WHERE {{version}} IS NOT NULL {UPSERT_STATE}), \
         searched AS (UPDATE document_search SET {SEARCH_SET} FROM {rows} \
             WHERE channel_id = advanced.id AND {SEARCH_CHANGES}), \
         recorded AS (INSERT INTO {OPERATION_COLUMNS} \
             SELECT id, {{operation}}, {{fingerprint}}, revision, sequence, \
                 CASE WHEN {{update}} IS NULL THEN NULL ELSE sequence END \
             FROM {rows} RETURNING channel_id)"
    )
}

/// The statement that writes the commits of a group at once (see the module's documentation),
/// to run after a fence check: one round trip or hand-off for the group, not one per member.
/// Each member must be a commit of a valid shape, without title or events, and no two on the
/// same document (one statement sees one snapshot of the channel rows). Its binds: the members
/// as a JSON array ([`bind_group`]), the transaction's clock, then the covered shard. It answers one row per member
/// it wrote, `(channel, revision, sequence, repository, recorded)`; a member it did not write
/// (stale, archived, missing, or a repeated operation) wrote nothing, and is answered from reads
/// like a lone commit that was refused.
pub(crate) fn render_group(dialect: Dialect) -> String {
    let binds = Binds {
        values: Values::Member,
        now: "$2",
        covered: "$3",
    };
    match dialect {
        Dialect::Postgres => binds.fill(&format!(
            "WITH members AS MATERIALIZED ({}), {} SELECT id, revision, sequence, repository, \
                 (SELECT count(*) FROM recorded WHERE recorded.channel_id = advanced.id) \
             FROM advanced",
            members(dialect),
            postgres_writes("", GROUP),
        )),
        Dialect::Sqlite => binds.fill(&sqlite_group_writes(&format!(
            "WITH members AS ({}) ",
            members(dialect)
        ))),
    }
}

/// The query whose rows are a group's members, read from the JSON array bound as `$1`: one
/// column per value, `given_` and its name, bytes decoded from hex.
fn members(dialect: Dialect) -> String {
    let read = |name: &str, kind: Kind| {
        let value = match dialect {
            Dialect::Postgres => format!("given_{name}"),
            Dialect::Sqlite => format!("value ->> 'given_{name}'"),
        };
        match (kind, dialect) {
            (Kind::Text | Kind::Number, Dialect::Postgres) => value,
            (Kind::Text | Kind::Number, Dialect::Sqlite) => format!("{value} AS given_{name}"),
            (Kind::Bytes, Dialect::Postgres) => format!("decode({value}, 'hex') AS given_{name}"),
            (Kind::Bytes, Dialect::Sqlite) => format!("unhex({value}) AS given_{name}"),
        }
    };
    let columns: Vec<String> = NAMES.iter().map(|&(name, kind)| read(name, kind)).collect();
    match dialect {
        Dialect::Postgres => {
            let types: Vec<String> = NAMES
                .iter()
                .map(|(name, kind)| match kind {
                    Kind::Text | Kind::Bytes => format!("given_{name} text"),
                    Kind::Number => format!("given_{name} bigint"),
                })
                .collect();
            format!(
                "SELECT {} FROM jsonb_to_recordset($1::jsonb) AS given({})",
                columns.join(", "),
                types.join(", ")
            )
        }
        Dialect::Sqlite => format!("SELECT {} FROM json_each($1)", columns.join(", ")),
    }
}

/// Whether the group recorded a member's operation: its record is at the revision that follows
/// the channel's, which no earlier record of the channel can be.
const RECORDED_NOW: &str = "EXISTS (SELECT 1 FROM channel_operations \
                            WHERE channel_id = {channel} AND operation_id = {operation} \
                            AND channel_operations.revision = channels.revision + 1)";

/// The seven statements of a SQLite group, each after `members`, the `WITH` clause that reads
/// them; the answer is the fifth, one row for each member written.
fn sqlite_group_writes(members: &str) -> String {
    let member_channel = format!("FROM members m JOIN channels ON {EXPECTED}");
    let due = updated_at_due();
    format!(
        "{members}INSERT INTO channel_updates (channel_id, sequence, epoch, bytes) \
             SELECT id, sequence + 1, epoch, {{update}} {member_channel} \
             WHERE {{update}} IS NOT NULL AND {NEW_OPERATION}; \
         {members}INSERT INTO {STATE_COLUMNS} \
             SELECT id, {{version}}, {{json}}, {{unanswered}} {member_channel} \
             WHERE {{version}} IS NOT NULL AND {NEW_OPERATION} {UPSERT_STATE}; \
         {members}UPDATE document_search SET {SEARCH_SET} FROM members m \
             WHERE channel_id = {{channel}} AND {SEARCH_CHANGES} AND {NEW_OPERATION} \
             AND EXISTS (SELECT 1 FROM channels WHERE {EXPECTED}); \
         {members}INSERT INTO {OPERATION_COLUMNS} \
             SELECT id, {{operation}}, {{fingerprint}}, revision + 1, sequence + 1, \
                 CASE WHEN {{update}} IS NULL THEN NULL ELSE sequence + 1 END \
             {member_channel} WHERE {NEW_OPERATION}; \
         {members}SELECT id, revision + 1, sequence + 1, repository, 1 {member_channel} \
             WHERE {RECORDED_NOW}; \
         {members}UPDATE channels SET updated_at = {{clock}} FROM members m \
             WHERE {EXPECTED} AND {RECORDED_NOW} AND {due}; \
         {members}{ADVANCE} FROM members m WHERE {EXPECTED} AND {RECORDED_NOW}"
    )
}

/// The value of a rendering's covered shard for `fence`: null when it covers every shard; for
/// a fence that covers none (the coordinator's, a member's) a shard no document is in.
pub(crate) fn covered_shard(fence: &Fence) -> Option<i64> {
    match fence.coverage() {
        Coverage::Every => None,
        Coverage::One(shard) => Some(i64::from(shard.0)),
        Coverage::NoDocument => Some(-1),
    }
}

/// Binds the members of a group to `query` ([`render_group`]): one JSON array whose objects
/// carry each commit's [`values`] under the names the statement reads.
pub(crate) fn bind_group<'q>(
    query: Query<'q, Any, AnyArguments<'q>>,
    commits: &[&Commit],
) -> Query<'q, Any, AnyArguments<'q>> {
    let members: Vec<serde_json::Value> = commits
        .iter()
        .map(|commit| {
            let member = NAMES.iter().zip(values(commit)).map(|((name, _), value)| {
                let value = match value {
                    Value::Text(text) => serde_json::json!(text),
                    Value::Number(number) => serde_json::json!(number),
                    Value::Bytes(bytes) => serde_json::json!(bytes.map(hex::encode)),
                };
                (format!("given_{name}"), value)
            });
            serde_json::Value::Object(member.collect())
        })
        .collect();
    query.bind(serde_json::Value::Array(members).to_string())
}

/// Binds `commit`'s [`values`] to `query` in the order every rendering numbers them.
pub(crate) fn bind_commit<'q>(
    query: Query<'q, Any, AnyArguments<'q>>,
    commit: &Commit,
) -> Query<'q, Any, AnyArguments<'q>> {
    values(commit)
        .into_iter()
        .fold(query, |query, value| match value {
            Value::Text(text) => query.bind(text),
            Value::Number(number) => query.bind(number),
            Value::Bytes(bytes) => query.bind(bytes),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The placeholder numbers a statement uses, sorted and without repeats.
    fn placeholders(sql: &str) -> Vec<usize> {
        let mut numbers: Vec<usize> = sql
            .split('$')
            .skip(1)
            .filter_map(|rest| {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().ok()
            })
            .collect();
        numbers.sort_unstable();
        numbers.dedup();
        numbers
    }

    #[test]
    fn every_rendering_uses_each_bind_its_caller_gives() {
        // The callers bind the covered shard, bind_commit's ten values and the clock (render),
        // or the lease, the token, the covered shard and the ten values (render_fenced;
        // SQLite's then takes the clock last).
        let cases = [
            (render(Dialect::Postgres), 12),
            (render(Dialect::Sqlite), 12),
            (render_fenced(Dialect::Postgres), 13),
            (render_fenced(Dialect::Sqlite), 14),
            // The members' JSON, the clock and the covered shard.
            (render_group(Dialect::Postgres), 3),
            (render_group(Dialect::Sqlite), 3),
        ];
        for (sql, binds) in cases {
            assert_eq!(placeholders(&sql), (1..=binds).collect::<Vec<_>>(), "{sql}");
            assert!(
                !sql.contains('{'),
                "a template name was left unfilled: {sql}"
            );
        }
    }

    #[test]
    fn every_value_is_of_the_kind_its_name_says() {
        let commit = Commit {
            channel: fermata_store::ChannelId("d".to_owned()),
            operation: fermata_store::OperationId::new("op").unwrap(),
            expected_revision: 0,
            update: None,
            sidecar: None,
            events: Vec::new(),
            title: None,
            text: None,
        };
        let kinds: Vec<Kind> = values(&commit)
            .iter()
            .map(|value| match value {
                Value::Text(_) => Kind::Text,
                Value::Number(_) => Kind::Number,
                Value::Bytes(_) => Kind::Bytes,
            })
            .collect();
        let named: Vec<Kind> = NAMES.iter().map(|(_, kind)| *kind).collect();
        assert_eq!(kinds, named);
    }

    #[test]
    fn sqlite_advances_the_channel_last() {
        for sql in [
            render(Dialect::Sqlite),
            render_fenced(Dialect::Sqlite),
            render_group(Dialect::Sqlite),
        ] {
            let last = sql.rsplit(';').next().unwrap_or_default();
            // The group's statements each begin with the `WITH` that reads the members.
            let members = format!("WITH members AS ({}) ", members(Dialect::Sqlite));
            let last = last.trim_start();
            let last = last.strip_prefix(members.as_str()).unwrap_or(last);
            assert!(last.trim_start().starts_with("UPDATE channels"), "{sql}");
        }
    }
}
