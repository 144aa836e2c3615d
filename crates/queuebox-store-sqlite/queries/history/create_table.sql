-- Locking: the write lock of the migration transaction (SCH-47). Isolation: serializable.
-- Run only when the table is missing (SCH-48), in the migration's BEGIN IMMEDIATE transaction.
CREATE TABLE IF NOT EXISTS queuebox_schema_history (
    version          INTEGER NOT NULL CONSTRAINT pk_queuebox_schema_history PRIMARY KEY,
    description      TEXT    NOT NULL,
    kind             TEXT    NOT NULL
                             CONSTRAINT ck_queuebox_schema_history_kind CHECK (kind IN ('applied', 'baseline')),
    checksum         TEXT    NOT NULL,
    queuebox_version TEXT    NOT NULL,
    applied_at       TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    duration_ms      INTEGER NOT NULL
) STRICT
