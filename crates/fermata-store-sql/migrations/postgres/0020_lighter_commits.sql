-- Fewer index entries per document commit. A commit moves its document's updated_at only once
-- a second (UPDATED_AT_RESOLUTION_MS in the store), so most commits of a document being edited
-- change no indexed column of its channel row, and PostgreSQL can write the new row version in
-- place, on the same page, without an entry in any of the table's indexes (a heap-only tuple).
-- That needs room on the page: new pages of channels keep a tenth of their space for it.
ALTER TABLE channels SET (fillfactor = 90);
