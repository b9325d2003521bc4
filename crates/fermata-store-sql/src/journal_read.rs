//! The recovery read of a document's journal, in chunks of rows.
//!
//! Recovery reads every journal row after the checkpoint, and the drivers' cost for each row they
//! return (on SQLite, a hand-off between its worker thread and the caller) was several times what
//! yrs needs to apply the small update most rows carry. So small rows come back in chunks: one
//! statement per [`CHUNK`] sequences up to the channel's last one, each answering with one text
//! value of `sequence hex` entries separated by commas, the chunk's least and greatest epoch, and
//! how many of its rows were too large for it. A chunk is a range of the journal's primary key,
//! so whatever plan the database picks reads only that range. Rows larger than [`SMALL`] bytes,
//! whose transfer outweighs any cost per row, come back as ordinary rows, as do rows past the
//! channel's sequence and the rows of a chunk whose epochs differ (stored data recovery refuses,
//! naming the row). The operation records' update sequences come back as one comma-separated
//! list. Anything that does not parse is reported as corrupt.

use fermata_store::{ChannelId, JournalUpdate, StoreError, StoreResult};
use sqlx::AnyConnection;

use crate::dialect::Dialect;
use crate::error::StoreContext;

/// The sequences one chunk covers.
const CHUNK: i64 = 4096;
/// The largest row read in a chunk, in bytes: a chunk's value stays under 32 MiB of text.
const SMALL: i64 = 4096;

/// The statements of the journal read, rendered for one dialect.
#[derive(Debug)]
pub(crate) struct JournalStatements {
    /// The rows of channel `$1` in sequences (`$2`, `$3`]: the least and greatest epoch and the
    /// entries of the small ones, and how many are large.
    chunk: String,
    /// The rows of channel `$1` in sequences (`$2`, `$3`] larger than `$4` bytes or not larger
    /// than `$5`, one row each.
    rows: &'static str,
    /// The update sequences after `$2` that the operation records of channel `$1` name.
    expected: &'static str,
}

impl JournalStatements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        let small = format!("FILTER (WHERE length(bytes) <= {SMALL})");
        JournalStatements {
            chunk: format!(
                "SELECT min(epoch) {small}, max(epoch) {small}, \
                        string_agg(CAST(sequence AS TEXT) || ' ' || {hex}, ',') {small}, \
                        count(*) FILTER (WHERE length(bytes) > {SMALL}) \
                 FROM channel_updates WHERE channel_id = $1 AND sequence > $2 AND sequence <= $3",
                hex = dialect.hex("bytes"),
            ),
            rows: "SELECT sequence, epoch, bytes FROM channel_updates \
                   WHERE channel_id = $1 AND sequence > $2 AND sequence <= $3 \
                     AND (length(bytes) > $4 OR length(bytes) <= $5) ORDER BY sequence",
            expected: "SELECT string_agg(CAST(update_sequence AS TEXT), ',') \
                       FROM channel_operations WHERE channel_id = $1 AND update_sequence > $2",
        }
    }
}

/// One chunk as the database returns it.
type Chunk = (Option<i64>, Option<i64>, Option<String>, i64);

/// The journal of `id` after sequence `after`, whose last sequence is `last`, and the update
/// sequences its operation records name after `after`, both in sequence order.
pub(crate) async fn read_journal(
    conn: &mut AnyConnection,
    sql: &JournalStatements,
    id: &ChannelId,
    after: i64,
    last: i64,
    action: &str,
) -> StoreResult<(Vec<JournalUpdate>, Vec<i64>)> {
    // Rows past the channel's sequence, which no chunk covers (recovery refuses them).
    let mut updates = rows(conn, sql, id, (last.max(after), i64::MAX), ALL, action).await?;
    let mut start = after;
    while start < last {
        let end = start.saturating_add(CHUNK).min(last);
        let (least_epoch, greatest_epoch, entries, large): Chunk = sqlx::query_as(&sql.chunk)
            .bind(&id.0)
            .bind(start)
            .bind(end)
            .fetch_one(&mut *conn)
            .await
            .context(action)?;
        match (least_epoch, greatest_epoch, entries) {
            (Some(epoch), Some(greatest), Some(entries)) if epoch == greatest => {
                parse_chunk(&entries, epoch, &mut updates, action)?;
                if large > 0 {
                    updates.extend(rows(conn, sql, id, (start, end), LARGE, action).await?);
                }
            }
            (None, None, None) if large > 0 => {
                updates.extend(rows(conn, sql, id, (start, end), LARGE, action).await?);
            }
            (None, None, None) => {}
            _ => updates.extend(rows(conn, sql, id, (start, end), ALL, action).await?),
        }
        start = end;
    }
    // A few sorted runs: the sort merges them.
    updates.sort_by_key(|update| update.sequence);
    let expected: Option<String> = sqlx::query_scalar(sql.expected)
        .bind(&id.0)
        .bind(after)
        .fetch_one(&mut *conn)
        .await
        .context(action)?;
    let mut expected = parse_sequences(expected.as_deref(), action)?;
    expected.sort_unstable();
    Ok((updates, expected))
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
    Ok(rows
        .into_iter()
        .map(|(sequence, epoch, bytes)| JournalUpdate {
            sequence,
            epoch,
            bytes,
        })
        .collect())
}

/// Appends the rows of one chunk, all of epoch `epoch`, to `updates`.
fn parse_chunk(
    entries: &str,
    epoch: i64,
    updates: &mut Vec<JournalUpdate>,
    action: &str,
) -> StoreResult<()> {
    for entry in entries.split(',') {
        let (sequence, hex) = entry.split_once(' ').ok_or_else(|| corrupt(action))?;
        updates.push(JournalUpdate {
            sequence: sequence.parse().map_err(|_| corrupt(action))?,
            epoch,
            bytes: hex::decode(hex).map_err(|_| corrupt(action))?,
        });
    }
    Ok(())
}

/// The sequences of one returned list.
fn parse_sequences(list: Option<&str>, action: &str) -> StoreResult<Vec<i64>> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    list.split(',')
        .map(|sequence| sequence.parse().map_err(|_| corrupt(action)))
        .collect()
}

fn corrupt(action: &str) -> StoreError {
    StoreError::corrupt(format!("{action}: a journal row does not read back"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_reads_back_in_either_case_and_refuses_what_does_not_parse() {
        let mut updates = Vec::new();
        parse_chunk("7 0aFF,8 ,9 00", 3, &mut updates, "reading").unwrap();
        let read: Vec<_> = updates
            .iter()
            .map(|u| (u.sequence, u.epoch, u.bytes.clone()))
            .collect();
        assert_eq!(
            read,
            [(7, 3, vec![0x0a, 0xff]), (8, 3, vec![]), (9, 3, vec![0])]
        );
        for bad in ["7", "x 00", "7 0", "7 zz", "", "7 00,"] {
            let error = parse_chunk(bad, 3, &mut Vec::new(), "reading").unwrap_err();
            assert!(
                error.to_string().contains("does not read back"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn a_list_of_sequences_reads_back() {
        assert_eq!(parse_sequences(None, "reading").unwrap(), Vec::<i64>::new());
        assert_eq!(
            parse_sequences(Some("10,3,4"), "reading").unwrap(),
            [10, 3, 4]
        );
        assert!(parse_sequences(Some("3,,4"), "reading").is_err());
    }
}
