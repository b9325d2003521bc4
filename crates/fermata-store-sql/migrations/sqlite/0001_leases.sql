-- Leases with fencing tokens, and the tenures processes served under them.
-- Instants are milliseconds since the Unix epoch on the database's clock.

CREATE TABLE leases (
    name TEXT PRIMARY KEY NOT NULL,
    -- Raised by one on every grant; never lowered.
    token INTEGER NOT NULL,
    holder TEXT NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    -- Set when the holder released the lease; cleared by the next grant.
    released_at INTEGER
) STRICT;

CREATE TABLE lease_tenures (
    lease_name TEXT NOT NULL,
    token INTEGER NOT NULL,
    holder TEXT NOT NULL,
    version TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    end_reason TEXT CHECK (end_reason IN ('stopped', 'superseded')),
    PRIMARY KEY (lease_name, token)
) STRICT;

CREATE INDEX lease_tenures_open ON lease_tenures (lease_name) WHERE end_reason IS NULL;
