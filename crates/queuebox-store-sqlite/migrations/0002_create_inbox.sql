-- Version 2: create inbox
CREATE TABLE IF NOT EXISTS inbox (
    id               TEXT    NOT NULL CONSTRAINT pk_inbox PRIMARY KEY DEFAULT (lower(
                         hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' ||
                         substr(hex(randomblob(2)), 2) || '-' ||
                         substr('89ab', 1 + (abs(random()) % 4), 1) ||
                         substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))),
    source           TEXT    NOT NULL CHECK (length(source) <= 255),
    idempotency_key  TEXT    NOT NULL CHECK (length(idempotency_key) <= 255),
    aggregate_id     TEXT    CHECK (length(aggregate_id) <= 255),
    event_type       TEXT    CHECK (length(event_type) <= 255),
    payload          TEXT    NOT NULL CHECK (json_valid(payload)),
    headers          TEXT    NOT NULL DEFAULT '{}'
                             CONSTRAINT ck_inbox_headers CHECK (json_type(headers) = 'object'),
    state            TEXT    NOT NULL DEFAULT 'pending' CONSTRAINT ck_inbox_state
                             CHECK (state IN ('pending', 'processing', 'processed', 'dead')),
    consumption      TEXT    NOT NULL DEFAULT 'push'
                             CONSTRAINT ck_inbox_consumption CHECK (consumption IN ('push', 'pull')),
    attempt          INTEGER NOT NULL DEFAULT 0 CONSTRAINT ck_inbox_attempt CHECK (attempt >= 0),
    scheduled_at     TEXT    NOT NULL
                     DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
                     CHECK (scheduled_at GLOB
                       '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
    created_at       TEXT    NOT NULL
                     DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    processed_at     TEXT,
    claimed_at       TEXT,
    claim_token      TEXT,
    lease_expires_at TEXT,
    correlation_id   TEXT    CHECK (length(correlation_id) <= 128),
    last_error       TEXT,
    CONSTRAINT uq_inbox_source_idempotency UNIQUE (source, idempotency_key)
) STRICT;

CREATE INDEX IF NOT EXISTS idx_inbox_push_pending
    ON inbox (scheduled_at, created_at, id) WHERE consumption = 'push' AND state = 'pending';
CREATE INDEX IF NOT EXISTS idx_inbox_pull_pending
    ON inbox (source, scheduled_at, created_at, id) WHERE consumption = 'pull' AND state = 'pending';
CREATE INDEX IF NOT EXISTS idx_inbox_pull_busy
    ON inbox (source, aggregate_id, lease_expires_at) WHERE consumption = 'pull' AND state = 'processing';
CREATE INDEX IF NOT EXISTS idx_inbox_aggregate_state
    ON inbox (aggregate_id, state);
CREATE INDEX IF NOT EXISTS idx_inbox_state_created
    ON inbox (state, created_at);
