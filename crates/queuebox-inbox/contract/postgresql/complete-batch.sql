-- Locking: row locks of the fenced rows, run INSIDE the one handler transaction of a batch handler, so every mark commits with the handler's writes or none does. :ids is the batch's ids as one text, joined by ',' (bound as text). Fenced per row exactly as complete.sql; the worker commits only when the count equals the number of ids. Isolation: as complete.sql (PULL-42).
UPDATE "{inbox}"
   SET "{state}" = 'processed', "{processed_at}" = clock_timestamp(),
       "{claim_token}" = NULL, "{lease_expires_at}" = NULL
 WHERE "{id}" = ANY (CAST(string_to_array(:ids, ',') AS uuid[])) AND "{consumption}" = 'pull' AND "{state}" = 'processing'
   AND "{claim_token}" = :token AND "{lease_expires_at}" > clock_timestamp()
