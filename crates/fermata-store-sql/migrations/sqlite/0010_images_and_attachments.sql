-- A document's images (plan_images) and the files sent with Chat messages (chat_attachments).
-- Both keep the bytes as they were accepted: the type is sniffed from the bytes before a row is
-- written, and size is always the length of the bytes. Rows go with the document.

CREATE TABLE plan_images (
    channel_id TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    -- SHA-256 of bytes, lowercase hex: the image's address within its document.
    sha256 TEXT NOT NULL CHECK (length(sha256) = 64),
    image_type TEXT NOT NULL
        CHECK (image_type IN ('png', 'jpeg', 'webp', 'gif', 'avif', 'bmp', 'ico')),
    bytes BLOB NOT NULL,
    size INTEGER NOT NULL CHECK (size = length(bytes) AND size > 0),
    stored_by TEXT NOT NULL,
    stored_at INTEGER NOT NULL,
    PRIMARY KEY (channel_id, sha256)
) STRICT;

CREATE TABLE chat_attachments (
    id TEXT PRIMARY KEY NOT NULL,
    channel_id TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    bytes BLOB NOT NULL,
    -- Never HTML or SVG.
    attachment_type TEXT NOT NULL
        CHECK (attachment_type IN ('png', 'jpeg', 'webp', 'gif', 'text')),
    name TEXT NOT NULL,
    size INTEGER NOT NULL CHECK (size = length(bytes) AND size > 0),
    -- What the sender's file was, where the stored image is a smaller copy of it.
    original_size INTEGER,
    original_width INTEGER,
    original_height INTEGER,
    uploaded_by TEXT NOT NULL,
    uploaded_at INTEGER NOT NULL,
    -- The message it was sent with and its place there; both absent until then.
    message_request_id TEXT,
    message_place INTEGER,
    CHECK (
        (original_size IS NULL AND original_width IS NULL AND original_height IS NULL)
        OR (attachment_type <> 'text' AND original_size > 0 AND original_width > 0
            AND original_height > 0)
    ),
    CHECK ((message_request_id IS NULL) = (message_place IS NULL)),
    CHECK (message_place IS NULL OR message_place >= 0),
    UNIQUE (channel_id, message_request_id, message_place)
) STRICT;

-- The sweep of files nobody sent.
CREATE INDEX chat_attachments_unsent ON chat_attachments (uploaded_at)
    WHERE message_request_id IS NULL;
