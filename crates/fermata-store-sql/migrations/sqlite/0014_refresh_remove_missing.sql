-- Whether a refresh also proposes removing from the package the registered databases its
-- inventory no longer lists (`--remove-missing`); 0 for every operation recorded before.
ALTER TABLE schema_operation ADD COLUMN remove_missing INTEGER NOT NULL DEFAULT 0;
