//! Running a schema store query and decoding the rows it selects: the one place a query is
//! fetched, its driver error given the action as context, and each row decoded. Both engines go
//! through it alike: the query is the engine's own text (see `statements.rs`), run through
//! `sqlx::Any` on the pool or inside a write transaction.

use fermata_store::StoreResult;
use sqlx::any::{AnyArguments, AnyRow};
use sqlx::query::Query;
use sqlx::{Any, Executor};

use crate::error::StoreContext;

/// A query with its arguments bound.
pub(super) type AnyQuery<'q> = Query<'q, Any, AnyArguments<'q>>;

/// The row `query` selects, if it selects one, decoded by `decode`; failures name `action`.
pub(super) async fn fetch_optional<'q, 'c, T>(
    executor: impl Executor<'c, Database = Any>,
    query: AnyQuery<'q>,
    action: &str,
    decode: impl FnOnce(&AnyRow, &str) -> StoreResult<T>,
) -> StoreResult<Option<T>> {
    let row = query.fetch_optional(executor).await.context(action)?;
    row.map(|row| decode(&row, action)).transpose()
}

/// The one row `query` selects, decoded by `decode`; no row fails, as the driver does, naming
/// `action`.
pub(super) async fn fetch_one<'q, 'c, T>(
    executor: impl Executor<'c, Database = Any>,
    query: AnyQuery<'q>,
    action: &str,
    decode: impl FnOnce(&AnyRow, &str) -> StoreResult<T>,
) -> StoreResult<T> {
    let row = query.fetch_one(executor).await.context(action)?;
    decode(&row, action)
}

/// Every row `query` selects, in its order, each decoded by `decode`; failures name `action`.
pub(super) async fn fetch_all<'q, 'c, T>(
    executor: impl Executor<'c, Database = Any>,
    query: AnyQuery<'q>,
    action: &str,
    decode: impl Fn(&AnyRow, &str) -> StoreResult<T>,
) -> StoreResult<Vec<T>> {
    let rows = query.fetch_all(executor).await.context(action)?;
    rows.iter().map(|row| decode(row, action)).collect()
}
