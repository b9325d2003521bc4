//! The recovery read in one statement: a document's channel, sidecar, checkpoint, the journal
//! after the checkpoint and the operation records' update sequences, in one round trip.
//!
//! A single statement reads one consistent snapshot on both engines, so it needs no transaction
//! around it (the long way takes a repeatable-read transaction and seven statements or more; see
//! `collaboration.rs`). It covers the usual case, a checkpoint and a short tail of small updates
//! of the channel's epoch: the tail comes packed as one value, as a chunk of the long way's does
//! (see `journal_read.rs`). Anything else it only counts: events after the checkpoint, rows too
//! large to pack or of another epoch or past the channel's sequence. Then [`read_at_once`]
//! answers `None` and the caller takes the long way, which reads and reports all of it. A tail
//! longer than one chunk goes the long way too, and for it the statement reads only the channel
//! and the checkpoint's counters.

use fermata_store::{ChannelId, RecoverySnapshot, SidecarState, StoreResult};
use sqlx::AnyConnection;
use sqlx::any::AnyRow;

use crate::channel::{CHANNEL_COLUMNS, channel_from};
use crate::collaboration::checkpoint_from;
use crate::dialect::Dialect;
use crate::error::StoreContext;
use crate::journal_read::{
    CHUNK, Packing, SMALL, packing, small_rows, unpack_chunk, unpack_expected,
};
use crate::row::column;

/// The statement for one dialect, and how it packs the journal.
#[derive(Debug)]
pub(crate) struct RecoveryStatement {
    packing: Packing,
    sql: String,
    /// How many of the row's columns are the channel's: the rest come after them.
    channel_columns: usize,
}

/// The columns after the channel's: the sidecar (3), the checkpoint (11), then the packed tail,
/// the rows it could not pack, the packed update sequences and the events.
const SIDECAR_AT: usize = 0;
const CHECKPOINT_AT: usize = 3;
const TAIL_AT: usize = 14;
/// Where the checkpoint's covered sequence is among its columns.
const THROUGH: usize = 2;

impl RecoveryStatement {
    pub(crate) fn new(dialect: Dialect) -> Self {
        let (packing, entries, expected) = packing(dialect);
        let entries = entries.replace("{small}", &small_rows());
        // What the checkpoint covers; a channel without one starts at sequence 0.
        let after = "COALESCE(cp.through_sequence, 0)";
        // A tail longer than one chunk is read the long way, which reads everything again in a
        // transaction of its own: the statement then reads only the counters that say so, not
        // the checkpoint's contents, the sidecar or the journal (a 1 MB checkpoint or 100,000
        // operation records read for nothing).
        let short = |expression: &str| {
            format!("CASE WHEN c.sequence - {after} <= {CHUNK} THEN {expression} END")
        };
        let (sidecar, text, state, checkpoint_sidecar) = (
            short("s.sidecar"),
            short("cp.canonical_text"),
            short("cp.state"),
            short("cp.sidecar"),
        );
        let tail = short(&format!(
            "(SELECT {entries} FROM channel_updates \
               WHERE channel_id = c.id AND sequence > {after})"
        ));
        let unpacked = short(&format!(
            "(SELECT count(*) FROM channel_updates \
               WHERE channel_id = c.id AND sequence > {after} \
                 AND (epoch <> c.epoch OR length(bytes) > {SMALL} OR sequence > c.sequence))"
        ));
        let expected = short(&format!(
            "(SELECT {expected} FROM channel_operations \
               WHERE channel_id = c.id AND update_sequence > {after})"
        ));
        let events = short(&format!(
            "(SELECT count(*) FROM channel_events WHERE channel_id = c.id AND sequence > {after})"
        ));
        let sql = dialect.render(&format!(
            "SELECT {CHANNEL_COLUMNS}, \
                    s.version, {sidecar}, s.unanswered_decisions, \
                    cp.epoch, cp.generation, cp.through_sequence, cp.revision, {text}, \
                    cp.source_hash, {state}, cp.sidecar_version, {checkpoint_sidecar}, \
                    cp.sidecar_unanswered_decisions, cp.created_at, \
                    {tail}, {unpacked}, {expected}, {events} \
             FROM channels c \
             LEFT JOIN channel_state s ON s.channel_id = c.id \
             LEFT JOIN channel_snapshots cp ON cp.channel_id = c.id \
             WHERE c.id = $1"
        ));
        RecoveryStatement {
            packing,
            sql,
            channel_columns: CHANNEL_COLUMNS.split(',').count(),
        }
    }
}

/// The recovery snapshot of `id` read in one statement; `Ok(None)` when the channel does not
/// exist or its stored data is not the usual case (see the module's documentation), for the
/// caller to read the long way.
pub(crate) async fn read_at_once(
    conn: &mut AnyConnection,
    statement: &RecoveryStatement,
    id: &ChannelId,
    action: &str,
) -> StoreResult<Option<RecoverySnapshot>> {
    let Some(row) = sqlx::query(&statement.sql)
        .bind(&id.0)
        .fetch_optional(conn)
        .await
        .context(action)?
    else {
        return Ok(None);
    };
    let at = |offset: usize| statement.channel_columns + offset;
    let channel = channel_from(&row, action)?;
    // The statement read nothing more of a tail longer than one chunk.
    let after: Option<i64> = column(&row, at(CHECKPOINT_AT + THROUGH), action)?;
    if channel.sequence.saturating_sub(after.unwrap_or(0)) > CHUNK {
        return Ok(None);
    }
    let unpacked: i64 = column(&row, at(TAIL_AT + 1), action)?;
    let events: i64 = column(&row, at(TAIL_AT + 3), action)?;
    if unpacked > 0 || events > 0 {
        return Ok(None);
    }
    let checkpoint = match column::<Option<i64>>(&row, at(CHECKPOINT_AT), action)? {
        Some(_) => Some(checkpoint_from(&row, at(CHECKPOINT_AT), action)?),
        None => None,
    };
    let mut updates = Vec::new();
    if let Some(entries) = column::<Option<Vec<u8>>>(&row, at(TAIL_AT), action)? {
        unpack_chunk(
            statement.packing,
            &entries,
            channel.epoch,
            &mut updates,
            action,
        )?;
        updates.sort_by_key(|update| update.sequence);
    }
    let expected = unpack_expected(
        statement.packing,
        column(&row, at(TAIL_AT + 2), action)?,
        action,
    )?;
    Ok(Some(RecoverySnapshot {
        sidecar: sidecar_from(&row, at(SIDECAR_AT), action)?,
        channel,
        checkpoint,
        updates,
        events: Vec::new(),
        expected_update_sequences: expected,
    }))
}

/// The channel's own sidecar from the three columns at `at`, if it has one.
fn sidecar_from(row: &AnyRow, at: usize, action: &str) -> StoreResult<Option<SidecarState>> {
    let Some(version) = column::<Option<i64>>(row, at, action)? else {
        return Ok(None);
    };
    Ok(Some(SidecarState {
        version,
        json: column(row, at + 1, action)?,
        unanswered_decisions: column(row, at + 2, action)?,
    }))
}
