-- Version 2: create inbox
CREATE TABLE IF NOT EXISTS inbox (
    id               UUID         NOT NULL DEFAULT gen_random_uuid(),
    source           VARCHAR(255) NOT NULL,
    idempotency_key  VARCHAR(255) NOT NULL,
    aggregate_id     VARCHAR(255),
    event_type       VARCHAR(255),
    payload          JSONB        NOT NULL,
    headers          JSONB        NOT NULL DEFAULT '{}',
    state            VARCHAR(50)  NOT NULL DEFAULT 'pending',
    consumption      VARCHAR(4)   NOT NULL DEFAULT 'push',
    attempt          INTEGER      NOT NULL DEFAULT 0,
    scheduled_at     TIMESTAMPTZ  NOT NULL DEFAULT now(),
    created_at       TIMESTAMPTZ  NOT NULL DEFAULT now(),
    processed_at     TIMESTAMPTZ,
    claimed_at       TIMESTAMPTZ,
    claim_token      UUID,
    lease_expires_at TIMESTAMPTZ,
    correlation_id   VARCHAR(128),
    last_error       TEXT,
    CONSTRAINT pk_inbox PRIMARY KEY (id),
    CONSTRAINT uq_inbox_source_idempotency UNIQUE (source, idempotency_key),
    CONSTRAINT ck_inbox_state CHECK (state IN ('pending', 'processing', 'processed', 'dead')),
    CONSTRAINT ck_inbox_consumption CHECK (consumption IN ('push', 'pull')),
    CONSTRAINT ck_inbox_attempt CHECK (attempt >= 0),
    CONSTRAINT ck_inbox_headers CHECK (jsonb_typeof(headers) = 'object')
);

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
