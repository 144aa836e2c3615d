-- Locking: DDL under the migration lock. Isolation: none (DDL commits at once).
-- DDL, run under the migration lock (SCH-47) and only when the table is missing (SCH-48).
CREATE TABLE IF NOT EXISTS queuebox_schema_history (
    version          INT          NOT NULL,
    description      VARCHAR(200) NOT NULL,
    kind             VARCHAR(10)  NOT NULL,
    checksum         CHAR(64)     NOT NULL,
    queuebox_version VARCHAR(50)  NOT NULL,
    applied_at       DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    duration_ms      INT          NOT NULL,
    CONSTRAINT pk_queuebox_schema_history PRIMARY KEY (version),
    CONSTRAINT ck_queuebox_schema_history_kind CHECK (kind IN ('applied', 'baseline'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
