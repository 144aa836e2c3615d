-- Locking: INSIDE the one handler transaction of a batch handler (BEGIN IMMEDIATE, PULL-28), so every mark commits with the handler's writes or none does. :ids is the batch's ids as a JSON array of strings. Fenced per row exactly as complete.sql (token, no lease: PULL-8); the worker commits only when the count equals the number of ids.
UPDATE "{inbox}"
   SET "{state}" = 'processed', "{processed_at}" = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
       "{claim_token}" = NULL, "{lease_expires_at}" = NULL
 WHERE "{id}" IN (SELECT value FROM json_each(:ids)) AND "{consumption}" = 'pull' AND "{state}" = 'processing'
   AND "{claim_token}" = :token
