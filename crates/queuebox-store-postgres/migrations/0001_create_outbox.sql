-- Version 1: create outbox
CREATE SEQUENCE IF NOT EXISTS outbox_sequence_seq AS BIGINT;

CREATE TABLE IF NOT EXISTS outbox (
    id               UUID         NOT NULL DEFAULT gen_random_uuid(),
    topic            VARCHAR(255) NOT NULL,
    key              VARCHAR(255),
    payload          JSONB        NOT NULL,
    headers          JSONB        NOT NULL DEFAULT '{}',
    aggregate_type   VARCHAR(255),
    state            VARCHAR(50)  NOT NULL DEFAULT 'pending',
    attempt          INTEGER      NOT NULL DEFAULT 0,
    max_attempts     INTEGER      NOT NULL DEFAULT 5,
    scheduled_at     TIMESTAMPTZ  NOT NULL DEFAULT now(),
    created_at       TIMESTAMPTZ  NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ  NOT NULL DEFAULT now(),
    claimed_at       TIMESTAMPTZ,
    claim_token      UUID,
    lease_expires_at TIMESTAMPTZ,
    last_error       TEXT,
    sequence         BIGINT       NOT NULL DEFAULT nextval('outbox_sequence_seq'),
    CONSTRAINT pk_outbox PRIMARY KEY (id),
    CONSTRAINT ck_outbox_state CHECK (state IN ('pending', 'processing', 'sent', 'dead')),
    CONSTRAINT ck_outbox_attempt CHECK (attempt >= 0),
    CONSTRAINT ck_outbox_max_attempts CHECK (max_attempts > 0),
    CONSTRAINT ck_outbox_headers CHECK (jsonb_typeof(headers) = 'object')
);

ALTER SEQUENCE outbox_sequence_seq OWNED BY outbox.sequence;

CREATE INDEX IF NOT EXISTS idx_outbox_pending
    ON outbox (scheduled_at, sequence) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS idx_outbox_key_sequence
    ON outbox (key, sequence) WHERE state IN ('pending', 'processing');
CREATE INDEX IF NOT EXISTS idx_outbox_state_updated
    ON outbox (state, updated_at);
