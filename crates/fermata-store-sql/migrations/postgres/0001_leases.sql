-- Leases with fencing tokens, and the tenures processes served under them.
-- Instants are milliseconds since the Unix epoch on the database's clock.

CREATE TABLE leases (
    name TEXT PRIMARY KEY,
    -- Raised by one on every grant; never lowered.
    token BIGINT NOT NULL,
    holder TEXT NOT NULL,
    acquired_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    -- Set when the holder released the lease; cleared by the next grant.
    released_at BIGINT
);

CREATE TABLE lease_tenures (
    lease_name TEXT NOT NULL,
    token BIGINT NOT NULL,
    holder TEXT NOT NULL,
    version TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    ended_at BIGINT,
    end_reason TEXT CHECK (end_reason IN ('stopped', 'superseded')),
    PRIMARY KEY (lease_name, token)
);

CREATE INDEX lease_tenures_open ON lease_tenures (lease_name) WHERE end_reason IS NULL;
