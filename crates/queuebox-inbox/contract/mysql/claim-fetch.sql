-- Claim step 5 of 7 (pull.md §5.3). Locking: reads the rows the update just took (their token), inside the claim transaction; then COMMIT (step 6) and unlock (step 7). :ids expands to one ? per id of step 3.
SELECT `{id}`, `{source}`, `{idempotency_key}`, `{aggregate_id}`, `{event_type}`, `{payload}`, `{attempt}`, `{correlation_id}`, `{headers}`, `{scheduled_at}`, `{created_at}`
  FROM `{inbox}`
 WHERE `{claim_token}` = :token AND `{state}` = 'processing' AND `{id}` IN (:ids)
 ORDER BY `{scheduled_at}`, `{created_at}`, `{id}`
