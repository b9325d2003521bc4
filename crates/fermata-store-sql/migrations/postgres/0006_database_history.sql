-- The files a verification found changed, as a JSON list of {path, change}; NULL when none.
ALTER TABLE schema_operation_database ADD COLUMN differences TEXT;

-- A database's history: its terminal results across operations, the latest first.
CREATE INDEX schema_operation_database_history
    ON schema_operation_database (database_name, finished_at);
