//! Test seeding of an earlier release's Planner rows, with plain statements: the deferred turns
//! this release never writes, and the reserved summary and transcript cursor it never advances.

use fermata_store::{ChannelId, DeferredTurn, DeferredTurnState, FencingToken, UnixMillis};
use sqlx::Row;

use crate::SqlStorage;

/// Stores deferred turns as an earlier release left them.
pub async fn seed_deferred_turns(storage: &SqlStorage, turns: &[DeferredTurn]) {
    let insert = storage.dialect().render(
        "INSERT INTO planner_deferred_turns \
         (id, channel_id, kind, state, fencing_token, created_at, resolved_at) \
         VALUES ($1, $2, $3, $4, $5, {now}, $6)",
    );
    for turn in turns {
        sqlx::query(&insert)
            .bind(&turn.id)
            .bind(&turn.channel.0)
            .bind(&turn.kind)
            .bind(turn.state.as_str())
            .bind(turn.fencing_token.0)
            .bind(turn.resolved_at.map(|at| at.0))
            .execute(storage.pool())
            .await
            .expect("seed a deferred turn");
    }
}

/// Every deferred turn, by ID.
pub async fn deferred_turns(storage: &SqlStorage) -> Vec<DeferredTurn> {
    let rows = sqlx::query(
        "SELECT id, channel_id, kind, state, fencing_token, resolved_at \
         FROM planner_deferred_turns ORDER BY id",
    )
    .fetch_all(storage.pool())
    .await
    .expect("read the deferred turns");
    rows.iter()
        .map(|row| DeferredTurn {
            id: row.get(0),
            channel: ChannelId(row.get(1)),
            kind: row.get(2),
            state: DeferredTurnState::parse(&row.get::<String, _>(3)).expect("a known state"),
            fencing_token: FencingToken(row.get(4)),
            resolved_at: row.get::<Option<i64>, _>(5).map(UnixMillis),
        })
        .collect()
}

/// Sets a document's reserved summary and transcript cursor, as an earlier release could.
pub async fn seed_reserved_context(
    storage: &SqlStorage,
    channel: &ChannelId,
    summary: &str,
    cursor: i64,
) {
    let upsert = storage.dialect().render(
        "INSERT INTO agent_state \
         (channel_id, owner_session_id, status, summary, transcript_cursor, generation, updated_at) \
         VALUES ($1, NULL, 'unavailable', $2, $3, 0, {now}) \
         ON CONFLICT (channel_id) DO UPDATE SET summary = excluded.summary, \
         transcript_cursor = excluded.transcript_cursor",
    );
    sqlx::query(&upsert)
        .bind(&channel.0)
        .bind(summary)
        .bind(cursor)
        .execute(storage.pool())
        .await
        .expect("seed a reserved summary and cursor");
}
