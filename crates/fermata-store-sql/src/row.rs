//! Reading typed values out of `Any` rows, with decode failures reported as corruption.

use fermata_store::{StoreError, StoreResult, UnixMillis};
use sqlx::any::AnyRow;
use sqlx::{Any, Decode, Row, Type};

use crate::error::StoreContext;

/// Column `index` of `row` as `T`.
pub(crate) fn column<'r, T>(row: &'r AnyRow, index: usize, action: &str) -> StoreResult<T>
where
    T: Decode<'r, Any> + Type<Any>,
{
    row.try_get(index).context(action)
}

pub(crate) fn instant(row: &AnyRow, index: usize, action: &str) -> StoreResult<UnixMillis> {
    column::<i64>(row, index, action).map(UnixMillis)
}

pub(crate) fn optional_instant(
    row: &AnyRow,
    index: usize,
    action: &str,
) -> StoreResult<Option<UnixMillis>> {
    Ok(column::<Option<i64>>(row, index, action)?.map(UnixMillis))
}

/// Whether an integer flag column (0 or 1) is set.
pub(crate) fn flag(row: &AnyRow, index: usize, action: &str) -> StoreResult<bool> {
    match column::<i64>(row, index, action)? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(StoreError::corrupt(format!(
            "{action}: a flag column is neither 0 nor 1"
        ))),
    }
}
