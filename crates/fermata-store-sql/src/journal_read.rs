//! The recovery read of a document's journal, in chunks of rows.
//!
//! Recovery reads every journal row after the checkpoint, and the drivers' cost for each row they
//! return (on SQLite, a hand-off between its worker thread and the caller) was several times what
//! yrs needs to apply the small update most rows carry. So small rows come back in chunks: one
//! statement per [`CHUNK`] sequences up to the channel's last one, each answering with one value
//! that packs the entries of its rows (see [`Packing`]), the chunk's least and greatest epoch,
//! and how many of its rows were too large for it. A chunk is a range of the journal's primary
//! key, so whatever plan the database picks reads only that range; after an empty range the next
//! one starts at the next row. Rows larger than [`SMALL`]
//! bytes, whose transfer outweighs any cost per row, come back as ordinary rows, as do rows past
//! the channel's sequence and the rows of a chunk whose epochs differ (stored data recovery
//! refuses, naming the row). The operation records' update sequences come back packed in one
//! value. Anything that does not unpack is reported as corrupt.
//!
//! Each chunk goes to the recovery's receiver as soon as it is read, one run of the journal, so a
//! recovery on a thread of its own replays it while the next is read; the first chunks are
//! shorter, so that the replay starts early.

use fermata_store::{ChannelId, JournalUpdate, RecoveryReceiver, StoreError, StoreResult};
use sqlx::AnyConnection;

use crate::dialect::Dialect;
use crate::error::StoreContext;

/// The sequences one chunk covers.
pub(crate) const CHUNK: i64 = 4096;
/// The sequences the first chunk of a long journal covers; each next one covers twice as many,
/// up to [`CHUNK`].
const FIRST_CHUNK: i64 = 512;
/// The largest row read in a chunk, in bytes: a chunk's value stays under 32 MiB of text.
pub(crate) const SMALL: i64 = 4096;

/// How a dialect packs many entries into one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Packing {
    /// Text, on SQLite, which has no way to build binary values: the entries' sequences, then
    /// their lengths, as decimal lists separated by commas, then their bytes one after another
    /// (`7,8,9;2,0,1;` and three bytes), each part built by one aggregate over the rows rather
    /// than a text built for each row; sequences alone as one decimal list.
    Text,
    /// Binary, on PostgreSQL, which builds it at a fraction of the text's cost: each entry an
    /// 8-byte big-endian sequence, a 4-byte big-endian length and the bytes; each sequence 8
    /// bytes big-endian.
    Binary,
}

/// The statements of the journal read, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct JournalStatements {
    packing: Packing,
    /// The rows of channel `$1` in sequences (`$2`, `$3`]: the least and greatest epoch and the
    /// packed entries of the small ones, and how many are large.
    chunk: String,
    /// The rows of channel `$1` in sequences (`$2`, `$3`] larger than `$4` bytes or not larger
    /// than `$5`, one row each.
    rows: &'static str,
    /// The first journal sequence of channel `$1` after `$2`, if any.
    next: &'static str,
    /// The update sequences after `$2` that the operation records of channel `$1` name, packed.
    expected: String,
}

/// How `dialect` packs a journal: its [`Packing`], the aggregate that packs the rows of
/// `channel_updates` (`{small}` stands for the filter that keeps the small ones), and the one that
/// packs the `update_sequence` of `channel_operations`.
pub(crate) fn packing(dialect: Dialect) -> (Packing, &'static str, &'static str) {
    match dialect {
        // The bytes travel as text: SQLite copies a value's bytes as they are, by their length,
        // whether or not they are valid UTF-8, and the cast back to a blob keeps them.
        Dialect::Sqlite => (
            Packing::Text,
            "CAST(string_agg(sequence, ',') {small} || ';' || string_agg(length(bytes), ',') \
             {small} || ';' || string_agg(CAST(bytes AS TEXT), '') {small} AS BLOB)",
            "CAST(string_agg(update_sequence, ',') AS BLOB)",
        ),
        Dialect::Postgres => (
            Packing::Binary,
            "string_agg(int8send(sequence) || int4send(length(bytes)) || bytes, ''::bytea) {small}",
            "string_agg(int8send(update_sequence), ''::bytea)",
        ),
    }
}

/// The filter that keeps the rows small enough for a packed chunk.
pub(crate) fn small_rows() -> String {
    format!("FILTER (WHERE length(bytes) <= {SMALL})")
}

impl JournalStatements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        let (packing, entries, expected) = packing(dialect);
        let small = small_rows();
        let entries = entries.replace("{small}", &small);
        JournalStatements {
            packing,
            chunk: format!(
                "SELECT min(epoch) {small}, max(epoch) {small}, {entries}, \
                        count(*) FILTER (WHERE length(bytes) > {SMALL}) \
                 FROM channel_updates WHERE channel_id = $1 AND sequence > $2 AND sequence <= $3"
            ),
            rows: "SELECT sequence, epoch, bytes FROM channel_updates \
                   WHERE channel_id = $1 AND sequence > $2 AND sequence <= $3 \
                     AND (length(bytes) > $4 OR length(bytes) <= $5) ORDER BY sequence",
            next: "SELECT min(sequence) FROM channel_updates WHERE channel_id = $1 AND sequence > $2",
            expected: format!(
                "SELECT {expected} FROM channel_operations \
                 WHERE channel_id = $1 AND update_sequence > $2"
            ),
        }
    }
}

/// One chunk as the database returns it.
type Chunk = (Option<i64>, Option<i64>, Option<Vec<u8>>, i64);

/// Hands the journal of `id` after sequence `after`, whose last sequence is `last`, to
/// `receiver` one chunk's run at a time, in sequence order (rows past `last` come last, as a run
/// of their own).
pub(crate) async fn read_journal(
    conn: &mut AnyConnection,
    sql: &JournalStatements,
    id: &ChannelId,
    (after, last): (i64, i64),
    receiver: &mut dyn RecoveryReceiver,
    action: &str,
) -> StoreResult<()> {
    let mut start = after;
    // The first runs are short, so that recovery starts replaying while the rest is read.
    let mut size = FIRST_CHUNK;
    while start < last {
        let end = start.saturating_add(size).min(last);
        size = (size * 2).min(CHUNK);
        let (least_epoch, greatest_epoch, entries, large): Chunk = sqlx::query_as(&sql.chunk)
            .bind(&id.0)
            .bind(start)
            .bind(end)
            .fetch_one(&mut *conn)
            .await
            .context(action)?;
        let mut run = Vec::new();
        match (least_epoch, greatest_epoch, entries) {
            (Some(epoch), Some(greatest), Some(entries)) if epoch == greatest => {
                unpack_chunk(sql.packing, &entries, epoch, &mut run, action)?;
                if large > 0 {
                    run.extend(rows(conn, sql, id, (start, end), LARGE, action).await?);
                }
            }
            (None, None, None) if large > 0 => {
                run = rows(conn, sql, id, (start, end), LARGE, action).await?;
            }
            (None, None, None) => {
                // An empty range: the next one starts at the next row, so a long stretch of
                // sequences without updates (or a corrupt, far too large channel sequence) costs
                // one statement rather than one per range.
                let next: Option<i64> = sqlx::query_scalar(sql.next)
                    .bind(&id.0)
                    .bind(end)
                    .fetch_one(&mut *conn)
                    .await
                    .context(action)?;
                match next {
                    Some(next) if next <= last => {
                        start = next - 1;
                        continue;
                    }
                    _ => break,
                }
            }
            _ => run = rows(conn, sql, id, (start, end), ALL, action).await?,
        }
        // The small rows, then any large ones: two sorted runs the sort merges.
        run.sort_by_key(|update| update.sequence);
        receiver.journal(run);
        start = end;
    }
    // Rows past the channel's sequence, which no chunk covers (recovery refuses them).
    let past = rows(conn, sql, id, (last.max(after), i64::MAX), ALL, action).await?;
    if !past.is_empty() {
        receiver.journal(past);
    }
    Ok(())
}

/// The update sequences the operation records of `id` name after `after`, sorted.
pub(crate) async fn expected_sequences(
    conn: &mut AnyConnection,
    sql: &JournalStatements,
    id: &ChannelId,
    after: i64,
    action: &str,
) -> StoreResult<Vec<i64>> {
    let packed: Option<Vec<u8>> = sqlx::query_scalar(&sql.expected)
        .bind(&id.0)
        .bind(after)
        .fetch_one(&mut *conn)
        .await
        .context(action)?;
    unpack_expected(sql.packing, packed, action)
}

/// The packed update sequences of the operation records, sorted.
pub(crate) fn unpack_expected(
    packing: Packing,
    packed: Option<Vec<u8>>,
    action: &str,
) -> StoreResult<Vec<i64>> {
    let mut expected = match packed {
        Some(packed) => unpack_sequences(packing, &packed, action)?,
        None => Vec::new(),
    };
    expected.sort_unstable();
    Ok(expected)
}

/// The sizes of rows [`rows`] reads: larger than the first or not larger than the second.
type Sizes = (i64, i64);
/// Every row.
const ALL: Sizes = (i64::MAX, i64::MAX);
/// The rows too large for a chunk.
const LARGE: Sizes = (SMALL, -1);

/// The rows of `id` with sequences in (`sequences.0`, `sequences.1`] and sizes in `sizes`, one
/// row each.
async fn rows(
    conn: &mut AnyConnection,
    sql: &JournalStatements,
    id: &ChannelId,
    sequences: (i64, i64),
    sizes: Sizes,
    action: &str,
) -> StoreResult<Vec<JournalUpdate>> {
    let rows: Vec<(i64, i64, Vec<u8>)> = sqlx::query_as(sql.rows)
        .bind(&id.0)
        .bind(sequences.0)
        .bind(sequences.1)
        .bind(sizes.0)
        .bind(sizes.1)
        .fetch_all(&mut *conn)
        .await
        .context(action)?;
    Ok(journal_updates(rows))
}

/// Journal rows read one by one, as `(sequence, epoch, bytes)`.
pub(crate) fn journal_updates(rows: Vec<(i64, i64, Vec<u8>)>) -> Vec<JournalUpdate> {
    rows.into_iter()
        .map(|(sequence, epoch, bytes)| JournalUpdate {
            sequence,
            epoch,
            bytes,
        })
        .collect()
}

/// Appends the packed rows of one chunk, all of epoch `epoch`, to `updates`.
pub(crate) fn unpack_chunk(
    packing: Packing,
    mut entries: &[u8],
    epoch: i64,
    updates: &mut Vec<JournalUpdate>,
    action: &str,
) -> StoreResult<()> {
    match packing {
        Packing::Text => {
            let mut parts = entries.splitn(3, |byte| *byte == b';');
            let mut list = || parts.next().ok_or_else(|| corrupt(action));
            let (sequences, lengths) = (list()?, list()?);
            let mut bytes = list()?;
            let sequences = unpack_sequences(packing, sequences, action)?;
            let lengths = unpack_sequences(packing, lengths, action)?;
            if sequences.len() != lengths.len() {
                return Err(corrupt(action));
            }
            updates.reserve(sequences.len());
            for (sequence, length) in sequences.into_iter().zip(lengths) {
                let length = usize::try_from(length).map_err(|_| corrupt(action))?;
                let (these, rest) = bytes
                    .split_at_checked(length)
                    .ok_or_else(|| corrupt(action))?;
                bytes = rest;
                updates.push(JournalUpdate {
                    sequence,
                    epoch,
                    bytes: these.to_vec(),
                });
            }
            if !bytes.is_empty() {
                return Err(corrupt(action));
            }
        }
        Packing::Binary => {
            while !entries.is_empty() {
                let sequence = i64::from_be_bytes(take(&mut entries, action)?);
                let length = u32::from_be_bytes(take(&mut entries, action)?);
                let length = usize::try_from(length).map_err(|_| corrupt(action))?;
                if entries.len() < length {
                    return Err(corrupt(action));
                }
                let (bytes, rest) = entries.split_at(length);
                entries = rest;
                updates.push(JournalUpdate {
                    sequence,
                    epoch,
                    bytes: bytes.to_vec(),
                });
            }
        }
    }
    Ok(())
}

/// The sequences of one packed list.
fn unpack_sequences(packing: Packing, mut list: &[u8], action: &str) -> StoreResult<Vec<i64>> {
    match packing {
        Packing::Text => list
            .split(|byte| *byte == b',')
            .map(|sequence| decimal(sequence, action))
            .collect(),
        Packing::Binary => {
            let mut sequences = Vec::with_capacity(list.len() / 8);
            while !list.is_empty() {
                sequences.push(i64::from_be_bytes(take(&mut list, action)?));
            }
            Ok(sequences)
        }
    }
}

/// The first `N` bytes of `bytes`, which move past them.
fn take<const N: usize>(bytes: &mut &[u8], action: &str) -> StoreResult<[u8; N]> {
    let (head, rest) = bytes
        .split_first_chunk::<N>()
        .ok_or_else(|| corrupt(action))?;
    *bytes = rest;
    Ok(*head)
}

fn decimal(digits: &[u8], action: &str) -> StoreResult<i64> {
    std::str::from_utf8(digits)
        .ok()
        .and_then(|digits| digits.parse().ok())
        .ok_or_else(|| corrupt(action))
}

fn corrupt(action: &str) -> StoreError {
    StoreError::corrupt(format!("{action}: a journal row does not read back"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unpacked(packing: Packing, entries: &[u8]) -> StoreResult<Vec<(i64, i64, Vec<u8>)>> {
        let mut updates = Vec::new();
        unpack_chunk(packing, entries, 3, &mut updates, "reading")?;
        Ok(updates
            .into_iter()
            .map(|u| (u.sequence, u.epoch, u.bytes))
            .collect())
    }

    fn refused(outcome: StoreResult<impl std::fmt::Debug>) {
        let error = outcome.unwrap_err();
        assert!(error.to_string().contains("does not read back"), "{error}");
    }

    #[test]
    fn text_entries_unpack_and_refuse_what_does_not_parse() {
        let read = unpacked(Packing::Text, b"7,8,9;2,0,1;\x0a\xff\x00").unwrap();
        assert_eq!(
            read,
            [(7, 3, vec![0x0a, 0xff]), (8, 3, vec![]), (9, 3, vec![0])]
        );
        // The bytes may hold the separators themselves.
        let read = unpacked(Packing::Text, b"4;3;;,;").unwrap();
        assert_eq!(read, [(4, 3, b";,;".to_vec())]);
        for bad in [
            &b"7"[..],
            b"7;1",
            b"x;1;a",
            b"7;2;a",
            b"7;1;ab",
            b"7,8;1;a",
            b"7;-1;",
            b"7;;",
            b"",
        ] {
            refused(unpacked(Packing::Text, bad));
        }
    }

    #[test]
    fn binary_entries_unpack_and_refuse_a_short_value() {
        let mut packed = Vec::new();
        for (sequence, bytes) in [(7_i64, &[0x0a, 0xff][..]), (8, &[]), (9, &[0])] {
            packed.extend(sequence.to_be_bytes());
            packed.extend(u32::try_from(bytes.len()).unwrap().to_be_bytes());
            packed.extend(bytes);
        }
        let read = unpacked(Packing::Binary, &packed).unwrap();
        assert_eq!(
            read,
            [(7, 3, vec![0x0a, 0xff]), (8, 3, vec![]), (9, 3, vec![0])]
        );
        for cut in [1, 8, 11, packed.len() - 1] {
            refused(unpacked(Packing::Binary, &packed[..cut]));
        }
    }

    #[test]
    fn a_list_of_sequences_unpacks() {
        assert_eq!(
            unpack_sequences(Packing::Text, b"10,3,4", "reading").unwrap(),
            [10, 3, 4]
        );
        refused(unpack_sequences(Packing::Text, b"3,,4", "reading"));
        let packed: Vec<u8> = [10_i64, 3].iter().flat_map(|n| n.to_be_bytes()).collect();
        assert_eq!(
            unpack_sequences(Packing::Binary, &packed, "reading").unwrap(),
            [10, 3]
        );
        refused(unpack_sequences(Packing::Binary, &packed[..9], "reading"));
    }
}
