-- Claim step 4 of 7 (pull.md §5.3). Locking: row locks on the chosen rows, inside the claim transaction, under the named lock; the update repeats readiness but not the not-busy check, because only a claim makes a row busy and no other claim of this source runs meanwhile. :ids expands to one ? per id of step 3.
UPDATE `{inbox}` t
   SET t.`{state}` = 'processing',
       t.`{claim_token}` = :token,
       t.`{claimed_at}` = UTC_TIMESTAMP(6),
       t.`{lease_expires_at}` = UTC_TIMESTAMP(6) + INTERVAL :lease_ms * 1000 MICROSECOND
 WHERE t.`{id}` IN (:ids)
   AND t.`{consumption}` = 'pull' AND t.`{source}` = :source
       AND ((t.`{state}` = 'pending' AND t.`{scheduled_at}` <= UTC_TIMESTAMP(6))
         OR (t.`{state}` = 'processing' AND t.`{lease_expires_at}` <= UTC_TIMESTAMP(6)))
