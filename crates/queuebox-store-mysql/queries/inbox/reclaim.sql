-- Locking: the row locks of the expired push rows. Isolation: READ COMMITTED.
-- Relay reclaim of expired leases (RLY-8, INB-3), one statement, not fenced: it matches
-- expired push leases only, so any replica may run it, and it never touches a pull row (the
-- pull claim takes over expired pull leases itself). Locking: row locks on the expired rows,
-- found through idx_inbox_state_created (state first); a row being written meanwhile (a late
-- forward of its owner) is waited for and re-checked on its committed version.
-- attempt, scheduled_at and last_error stay as they are.
UPDATE `{inbox}`
SET `{state}` = 'pending',
    `{claim_token}` = NULL,
    `{lease_expires_at}` = NULL
WHERE `{state}` = 'processing'
  AND `{consumption}` = 'push'
  AND `{lease_expires_at}` <= UTC_TIMESTAMP(6)
