-- Full-text search of documents: one row per document with its title and its text (at most
-- 100,000 characters), indexed by FTS5 with the unicode61 tokenizer (words of letters and
-- digits, compared without case, accents kept). document_search_index is an external-content
-- FTS5 table over document_search, kept in step by the triggers below, so every write of a row
-- (a commit's text or title, a created document, a deletion's cascade) updates the index in the
-- same transaction.
--
-- A live room's commits do not carry the text: each marks its document's channel row
-- (channels.search_stale_since, set in the commit's own statement) and the room indexes the text
-- once its writers pause, before any search, and when it closes; a process that stops first
-- leaves the mark, and the next start indexes those documents from their journal. Existing
-- documents are indexed here from their last checkpoint's text, and marked where commits
-- followed that checkpoint.

CREATE TABLE document_search (
    -- The index's rowid: an alias of rowid, which VACUUM never renumbers.
    id INTEGER PRIMARY KEY,
    channel_id TEXT NOT NULL UNIQUE REFERENCES channels (id) ON DELETE CASCADE,
    title TEXT NOT NULL,
    body TEXT NOT NULL
) STRICT;

-- Since when the document's indexed text may be behind its journal; NULL when it is current.
ALTER TABLE channels ADD COLUMN search_stale_since INTEGER;

CREATE INDEX channels_search_stale ON channels (id) WHERE search_stale_since IS NOT NULL;

CREATE VIRTUAL TABLE document_search_index USING fts5 (
    title, body,
    content = 'document_search', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 0'
);

CREATE TRIGGER document_search_added AFTER INSERT ON document_search
BEGIN
    INSERT INTO document_search_index (rowid, title, body) VALUES (new.id, new.title, new.body);
END;

CREATE TRIGGER document_search_removed AFTER DELETE ON document_search
BEGIN
    INSERT INTO document_search_index (document_search_index, rowid, title, body)
    VALUES ('delete', old.id, old.title, old.body);
END;

CREATE TRIGGER document_search_changed AFTER UPDATE OF title, body ON document_search
WHEN old.title IS NOT new.title OR old.body IS NOT new.body
BEGIN
    INSERT INTO document_search_index (document_search_index, rowid, title, body)
    VALUES ('delete', old.id, old.title, old.body);
    INSERT INTO document_search_index (rowid, title, body) VALUES (new.id, new.title, new.body);
END;

INSERT INTO document_search (channel_id, title, body)
SELECT c.id, c.title,
       substr(replace(replace(COALESCE(s.canonical_text, ''), char(1), ' '), char(2), ' '), 1, 100000)
FROM channels c LEFT JOIN channel_snapshots s ON s.channel_id = c.id;

UPDATE channels SET search_stale_since = CAST(unixepoch('subsec') * 1000 AS INTEGER)
WHERE sequence > COALESCE(
    (SELECT through_sequence FROM channel_snapshots s WHERE s.channel_id = channels.id), 0);
