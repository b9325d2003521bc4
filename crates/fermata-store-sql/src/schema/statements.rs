//! The schema store's statements, rendered for one dialect.

use super::rows::{
    ARTIFACT_COLUMNS, AUDIT_COLUMNS, GRANT_COLUMNS, INVENTORY_COLUMNS, LEASE_COLUMNS,
    OPERATION_COLUMNS, RESULT_COLUMNS, REVIEW_COLUMNS, STEP_COLUMNS,
};
use crate::dialect::Dialect;

const TERMINAL: &str = "('succeeded', 'failed', 'rejected', 'expired')";
const FAILURES: &str = "('failed', 'rejected', 'expired')";

#[derive(Debug)]
pub(crate) struct Statements {
    pub(super) clock: String,
    pub(super) operation_by_request: String,
    pub(super) insert_operation: String,
    pub(super) insert_result: String,
    pub(super) insert_lease: String,
    pub(super) insert_audit: String,
    pub(super) operation: String,
    pub(super) recent_operations: String,
    pub(super) operation_counts: String,
    pub(super) transition: String,
    pub(super) bind_run: String,
    pub(super) bind_lease_run: String,
    pub(super) bound_run: String,
    pub(super) record_reviewed_base: String,
    pub(super) reviewed_base: String,
    pub(super) record_pull_request: String,
    pub(super) pull_request: String,
    pub(super) unsettled_pull_requests: String,
    pub(super) settle_pull_request: String,
    pub(super) published: String,
    pub(super) insert_inventory: String,
    pub(super) insert_inventory_database: String,
    pub(super) inventory: String,
    pub(super) inventory_of_operation: String,
    pub(super) inventory_names: String,
    pub(super) latest_inventory: String,
    pub(super) results: String,
    pub(super) result_exists: String,
    pub(super) begin_database: String,
    pub(super) finish_database: String,
    pub(super) database_history: String,
    pub(super) step: String,
    pub(super) steps: String,
    pub(super) upsert_step: String,
    pub(super) heartbeat_lease: String,
    pub(super) lease: String,
    pub(super) lease_for_clearing: String,
    pub(super) lock_operation: String,
    pub(super) extend_lease: String,
    pub(super) release_lease: String,
    pub(super) clear_lease: String,
    pub(super) fail_cleared: String,
    pub(super) open_review: String,
    pub(super) review: String,
    pub(super) decide_review: String,
    pub(super) insert_artifact: String,
    pub(super) artifact: String,
    pub(super) move_artifact: String,
    pub(super) artifact_cleanup: String,
    pub(super) insert_grant: String,
    pub(super) consume_grant: String,
    pub(super) audit_events: String,
}

impl Statements {
    pub(crate) fn new(dialect: Dialect) -> Self {
        let render = |template: &str| dialect.render(template);
        Statements {
            clock: render("SELECT {now}"),
            operation_by_request: render(&format!(
                "SELECT {OPERATION_COLUMNS} FROM schema_operation WHERE actor = $1 AND request_key = $2"
            )),
            insert_operation: render(
                "INSERT INTO schema_operation (id, kind, state, actor, request_key, inventory_id, \
                                               remove_missing, created_at, updated_at) \
                 VALUES ($1, $2, 'reserved', $3, $4, $5, $6, {now}, {now}) \
                 ON CONFLICT (actor, request_key) DO NOTHING",
            ),
            insert_result: render(
                "INSERT INTO schema_operation_database (operation_id, database_name, position) \
                 VALUES ($1, $2, $3)",
            ),
            // Each instant and the expiry derived from it come from one reading of the clock
            // (`WHERE true` lets SQLite parse the upsert after a SELECT).
            insert_lease: render(
                "INSERT INTO schema_lease (lease_key, operation_id, kind, acquired_at, heartbeat_at, \
                                           expires_at, status) \
                 SELECT 'schema-mutation', $1, $2, clock.now, clock.now, clock.now + $3, 'active' \
                 FROM (SELECT {now} AS now) AS clock WHERE true \
                 ON CONFLICT (lease_key) DO NOTHING",
            ),
            insert_audit: render(
                "INSERT INTO schema_audit_event (operation_id, action, actor, occurred_at) \
                 VALUES ($1, $2, $3, {now})",
            ),
            operation: render(&format!(
                "SELECT {OPERATION_COLUMNS} FROM schema_operation WHERE id = $1"
            )),
            recent_operations: render(&format!(
                "SELECT {OPERATION_COLUMNS} FROM schema_operation \
                 ORDER BY created_at DESC, id DESC LIMIT $1"
            )),
            operation_counts: render(
                "SELECT kind, state, COUNT(*) FROM schema_operation \
                 GROUP BY kind, state ORDER BY kind, state",
            ),
            transition: render(&format!(
                "UPDATE schema_operation SET state = $3, \
                        error = CASE WHEN $3 IN {FAILURES} THEN COALESCE($4, error) ELSE $4 END, \
                        updated_at = {{now}}, \
                        finished_at = CASE WHEN $3 IN {TERMINAL} THEN {{now}} ELSE finished_at END \
                 WHERE id = $1 AND state = $2 RETURNING {OPERATION_COLUMNS}"
            )),
            bind_run: render(&format!(
                "UPDATE schema_operation SET workflow_run_id = $2, updated_at = {{now}} \
                 WHERE id = $1 AND workflow_run_id IS NULL AND state NOT IN {TERMINAL}"
            )),
            bind_lease_run: render(
                "UPDATE schema_lease SET workflow_run_id = $2 WHERE operation_id = $1",
            ),
            bound_run: render("SELECT workflow_run_id FROM schema_operation WHERE id = $1"),
            record_reviewed_base: render(&format!(
                "UPDATE schema_operation SET reviewed_base_commit = $2, updated_at = {{now}} \
                 WHERE id = $1 AND reviewed_base_commit IS NULL AND state NOT IN {TERMINAL}"
            )),
            reviewed_base: render(
                "SELECT reviewed_base_commit FROM schema_operation WHERE id = $1",
            ),
            record_pull_request: render(
                "UPDATE schema_operation SET pull_request = $2, updated_at = {now} \
                 WHERE id = $1 AND pull_request IS NULL AND state = 'publishing'",
            ),
            pull_request: render("SELECT pull_request FROM schema_operation WHERE id = $1"),
            unsettled_pull_requests: render(&format!(
                "SELECT {OPERATION_COLUMNS} FROM schema_operation \
                 WHERE pull_request IS NOT NULL \
                   AND id NOT IN (SELECT operation_id FROM schema_pull_request_settled) \
                 ORDER BY created_at DESC, id DESC"
            )),
            settle_pull_request: render(
                "INSERT INTO schema_pull_request_settled (operation_id, settled_at) \
                 SELECT id, {now} FROM schema_operation \
                 WHERE id = $1 AND pull_request IS NOT NULL \
                 ON CONFLICT (operation_id) DO NOTHING",
            ),
            published: render(
                "SELECT COUNT(*) FROM schema_operation WHERE id = $1 AND pull_request IS NOT NULL",
            ),
            insert_inventory: render(
                "INSERT INTO schema_inventory (id, operation_id, actor, server_version, \
                                               discovered_at, expires_at, ignored_databases) \
                 SELECT $1, $2, $3, $4, clock.now, clock.now + $5, $6 \
                 FROM (SELECT {now} AS now) AS clock WHERE true \
                 ON CONFLICT (operation_id) DO NOTHING",
            ),
            insert_inventory_database: render(
                "INSERT INTO schema_inventory_database (inventory_id, database_name, position) \
                 VALUES ($1, $2, $3)",
            ),
            inventory: render(&format!(
                "SELECT {INVENTORY_COLUMNS} FROM schema_inventory WHERE id = $1"
            )),
            inventory_of_operation: render(&format!(
                "SELECT {INVENTORY_COLUMNS} FROM schema_inventory WHERE operation_id = $1"
            )),
            inventory_names: render(
                "SELECT database_name FROM schema_inventory_database WHERE inventory_id = $1 \
                 ORDER BY position",
            ),
            latest_inventory: render(&format!(
                "SELECT {INVENTORY_COLUMNS} FROM schema_inventory \
                 ORDER BY discovered_at DESC, id DESC LIMIT 1"
            )),
            results: render(&format!(
                "SELECT {RESULT_COLUMNS} FROM schema_operation_database WHERE operation_id = $1 \
                 ORDER BY position"
            )),
            result_exists: render(
                "SELECT count(*) FROM schema_operation_database \
                 WHERE operation_id = $1 AND database_name = $2",
            ),
            begin_database: render(
                "UPDATE schema_operation_database SET started_at = COALESCE(started_at, {now}) \
                 WHERE operation_id = $1 AND database_name = $2 AND finished_at IS NULL",
            ),
            finish_database: render(
                "UPDATE schema_operation_database \
                 SET outcome = $3, freshness = $4, object_counts = $5, snapshot_hash = $6, \
                     merged_hash = $7, error = $8, differences = $9, \
                     started_at = COALESCE(started_at, {now}), finished_at = {now} \
                 WHERE operation_id = $1 AND database_name = $2 AND finished_at IS NULL",
            ),
            database_history: render(&format!(
                "SELECT {RESULT_COLUMNS}, \
                        (SELECT o.kind FROM schema_operation o WHERE o.id = d.operation_id) \
                 FROM schema_operation_database d \
                 WHERE d.database_name = $1 AND d.finished_at IS NOT NULL \
                 ORDER BY d.finished_at DESC, d.operation_id DESC LIMIT $2"
            )),
            step: render(&format!(
                "SELECT {STEP_COLUMNS} FROM schema_operation_step \
                 WHERE operation_id = $1 AND step_key = $2"
            )),
            steps: render(&format!(
                "SELECT {STEP_COLUMNS} FROM schema_operation_step WHERE operation_id = $1 \
                 ORDER BY started_at, step_key"
            )),
            upsert_step: render(&format!(
                "INSERT INTO schema_operation_step AS s (operation_id, step_key, state, attempts, \
                                                        started_at, heartbeat_at, error, terminal_at) \
                 VALUES ($1, $2, $3, $4, {{now}}, {{now}}, $5, CASE WHEN $3 = 'running' THEN NULL ELSE {{now}} END) \
                 ON CONFLICT (operation_id, step_key) DO UPDATE \
                 SET state = excluded.state, attempts = s.attempts + excluded.attempts, \
                     heartbeat_at = excluded.heartbeat_at, error = COALESCE(excluded.error, s.error), \
                     terminal_at = excluded.terminal_at \
                 WHERE s.terminal_at IS NULL \
                 RETURNING {STEP_COLUMNS}"
            )),
            heartbeat_lease: render(
                "UPDATE schema_lease SET heartbeat_at = {now}, status = 'active', \
                        expires_at = CASE WHEN {now} + $2 > expires_at THEN {now} + $2 \
                                          ELSE expires_at END \
                 WHERE operation_id = $1 AND expires_at > {now}",
            ),
            lease: render(&format!("SELECT {LEASE_COLUMNS} FROM schema_lease")),
            lease_for_clearing: render(&format!(
                "SELECT {LEASE_COLUMNS}, {{now}} FROM schema_lease{{for_update}}"
            )),
            lock_operation: render("SELECT id FROM schema_operation WHERE id = $1{for_update}"),
            extend_lease: render(
                "UPDATE schema_lease SET heartbeat_at = {now}, status = 'awaiting_review', \
                        expires_at = CASE WHEN $2 > expires_at THEN $2 ELSE expires_at END \
                 WHERE operation_id = $1 AND expires_at > {now}",
            ),
            release_lease: render("DELETE FROM schema_lease WHERE operation_id = $1"),
            clear_lease: render(
                "DELETE FROM schema_lease WHERE operation_id = $1 AND expires_at <= {now}",
            ),
            fail_cleared: render(&format!(
                "UPDATE schema_operation SET state = 'failed', error = $2, updated_at = {{now}}, \
                        finished_at = {{now}} \
                 WHERE id = $1 AND state NOT IN {TERMINAL}"
            )),
            open_review: render(
                "INSERT INTO schema_review (operation_id, state, created_at, expires_at) \
                 SELECT $1, 'pending', clock.now, clock.now + $2 \
                 FROM (SELECT {now} AS now) AS clock WHERE true \
                 ON CONFLICT (operation_id) DO NOTHING",
            ),
            review: render(&format!(
                "SELECT {REVIEW_COLUMNS} FROM schema_review WHERE operation_id = $1"
            )),
            decide_review: render(&format!(
                "UPDATE schema_review SET state = $2, actor = $3, decided_at = {{now}} \
                 WHERE operation_id = $1 AND state = 'pending' \
                   AND CASE WHEN $2 = 'expired' THEN expires_at <= {{now}} ELSE expires_at > {{now}} END \
                 RETURNING {REVIEW_COLUMNS}"
            )),
            insert_artifact: render(
                "INSERT INTO schema_artifact (operation_id, blob_locator, key_version, iv, auth_tag, \
                                              ciphertext_hash, manifest, decision_expires_at, \
                                              cleanup_target, state, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'stored', {now}) \
                 ON CONFLICT (operation_id) DO NOTHING",
            ),
            artifact: render(&format!(
                "SELECT {ARTIFACT_COLUMNS} FROM schema_artifact WHERE operation_id = $1"
            )),
            move_artifact: render(
                "UPDATE schema_artifact SET state = $3 WHERE operation_id = $1 AND state = $2",
            ),
            artifact_cleanup: render(
                "UPDATE schema_artifact SET cleanup_result = $2 \
                 WHERE operation_id = $1 AND cleanup_result IS NULL",
            ),
            insert_grant: render(&format!(
                "INSERT INTO schema_cleanup_grant (token_hash, operation_id, actor, expires_at, allowed) \
                 VALUES ($1, $2, $3, {{now}} + $4, $5) RETURNING {GRANT_COLUMNS}"
            )),
            consume_grant: render(&format!(
                "UPDATE schema_cleanup_grant SET used_at = {{now}} \
                 WHERE token_hash = $1 AND used_at IS NULL AND expires_at > {{now}} \
                   AND (',' || allowed || ',') LIKE $2 \
                 RETURNING {GRANT_COLUMNS}"
            )),
            audit_events: render(&format!(
                "SELECT {AUDIT_COLUMNS} FROM schema_audit_event WHERE operation_id = $1 ORDER BY id"
            )),
        }
    }
}
