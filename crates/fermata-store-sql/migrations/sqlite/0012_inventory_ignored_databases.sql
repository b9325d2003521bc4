-- The visible databases an inventory left out because `[schema] ignore_databases` names them, as
-- a JSON list of names in inventory order; NULL for inventories recorded before they were kept.
ALTER TABLE schema_inventory ADD COLUMN ignored_databases TEXT;
