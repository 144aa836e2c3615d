-- Locking: the row locks of the expired rows. Isolation: READ COMMITTED.
-- Reclaim of expired leases (OUT-46/47, SCH-15). One statement, not fenced: it matches expired
-- leases only, so any replica may run it. Locking: row locks on the expired rows, found through
-- idx_outbox_state_updated (state first); a row being written meanwhile (a late terminal write
-- of its owner) is waited for and re-checked in its committed version, so a row that left
-- processing is not touched. attempt, scheduled_at and last_error stay as they are (OUT-27).
UPDATE `{outbox}`
SET `{state}` = 'pending',
    `{claim_token}` = NULL,
    `{lease_expires_at}` = NULL,
    `{updated_at}` = UTC_TIMESTAMP(6)
WHERE `{state}` = 'processing'
  AND `{lease_expires_at}` <= UTC_TIMESTAMP(6)
