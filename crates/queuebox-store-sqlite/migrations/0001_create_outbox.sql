-- Version 1: create outbox
CREATE TABLE IF NOT EXISTS outbox (
    id               TEXT    NOT NULL DEFAULT (lower(
                         hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' ||
                         substr(hex(randomblob(2)), 2) || '-' ||
                         substr('89ab', 1 + (abs(random()) % 4), 1) ||
                         substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))),
    topic            TEXT    NOT NULL CHECK (length(topic) <= 255),
    "key"            TEXT    CHECK (length("key") <= 255),
    payload          TEXT    NOT NULL CHECK (json_valid(payload)),
    headers          TEXT    NOT NULL DEFAULT '{}'
                             CONSTRAINT ck_outbox_headers CHECK (json_type(headers) = 'object'),
    aggregate_type   TEXT    CHECK (length(aggregate_type) <= 255),
    state            TEXT    NOT NULL DEFAULT 'pending' CONSTRAINT ck_outbox_state
                             CHECK (state IN ('pending', 'processing', 'sent', 'dead')),
    attempt          INTEGER NOT NULL DEFAULT 0 CONSTRAINT ck_outbox_attempt CHECK (attempt >= 0),
    max_attempts     INTEGER NOT NULL DEFAULT 5
                             CONSTRAINT ck_outbox_max_attempts CHECK (max_attempts > 0),
    scheduled_at     TEXT    NOT NULL
                     DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
                     CHECK (scheduled_at GLOB
                       '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
    created_at       TEXT    NOT NULL
                     DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at       TEXT    NOT NULL
                     DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    claimed_at       TEXT,
    claim_token      TEXT,
    lease_expires_at TEXT,
    last_error       TEXT,
    sequence         INTEGER CONSTRAINT pk_outbox PRIMARY KEY AUTOINCREMENT,
    CONSTRAINT uq_outbox_id UNIQUE (id)
) STRICT;

CREATE INDEX IF NOT EXISTS idx_outbox_pending
    ON outbox (scheduled_at, sequence) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS idx_outbox_key_sequence
    ON outbox ("key", sequence) WHERE state IN ('pending', 'processing');
CREATE INDEX IF NOT EXISTS idx_outbox_state_updated
    ON outbox (state, updated_at);
