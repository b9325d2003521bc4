//! The definitions of MariaDB sequences. They are not in `information_schema` (before MariaDB
//! 11.5), but a sequence reads as a one-row table of its settings, so one `UNION ALL` query reads
//! every sequence of the database at once, however many there are. `next_not_cached_value`, the
//! current value, is data and is not read. A sequence dropped since the tables query listed it,
//! or replaced by a table, is a schema change (retried), not a catalog this server cannot read.

use fermata_schema_core::{DatabaseName, ErrorCode, SafeError, Subject};
use sqlx::mysql::MySqlConnection;

use super::{unsupported, values};
use crate::safe_context::caused;
use crate::snapshot::model::Sequence;
use crate::snapshot::render::identifier;
use crate::source::{DriverContext, DriverFailure, mysql_error_number, query_error_about};

/// Fills in the settings of `sequences` (named, in name order).
pub(super) async fn read(
    connection: &mut MySqlConnection,
    database: &DatabaseName,
    sequences: &mut [Sequence],
) -> Result<(), SafeError> {
    if sequences.is_empty() {
        return Ok(());
    }
    let selects: Vec<String> = sequences
        .iter()
        .enumerate()
        .map(|(position, sequence)| {
            format!(
                "SELECT {position}, CAST(start_value AS CHAR), CAST(minimum_value AS CHAR), \
                 CAST(maximum_value AS CHAR), CAST(increment AS CHAR), CAST(cache_size AS CHAR), \
                 CAST(cycle_option AS CHAR) FROM {}.{}",
                identifier(database.as_str()),
                identifier(&sequence.name)
            )
        })
        .collect();
    let sql = selects.join(" UNION ALL ");
    let found = sqlx::query(&sql)
        .fetch_all(&mut *connection)
        .await
        .map_err(|error| match mysql_error_number(&error) {
            // ER_NO_SUCH_TABLE, ER_UNKNOWN_SEQUENCES: dropped since the tables query listed it;
            // ER_BAD_FIELD_ERROR: a table without a sequence's columns made in its place.
            Some(1146 | 4091 | 1054) => caused(
                SafeError::about(
                    ErrorCode::SchemaChanged,
                    Subject::Database(database.clone()),
                ),
                "read the sequences",
                DriverFailure::of(&error),
            ),
            _ => query_error_about(&error, "read the sequences", database),
        })?;
    if found.len() != sequences.len() {
        return Err(unsupported(database));
    }
    for row in found {
        let v = values(&row, database);
        let position: i64 = sqlx::Row::try_get(&row, 0).or_unreadable(|| unsupported(database))?;
        let sequence = usize::try_from(position)
            .ok()
            .and_then(|position| sequences.get_mut(position))
            .ok_or_else(|| unsupported(database))?;
        sequence.start = v.text(1)?;
        sequence.minimum = v.text(2)?;
        sequence.maximum = v.text(3)?;
        sequence.increment = v.text(4)?;
        sequence.cache = v.text(5)?;
        sequence.cycle = v.text(6)? == "1";
    }
    Ok(())
}
