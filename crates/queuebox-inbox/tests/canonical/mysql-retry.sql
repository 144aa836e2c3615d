UPDATE `inbox`
   SET `state` = 'pending', `scheduled_at` = UTC_TIMESTAMP(6) + INTERVAL :delay_ms * 1000 MICROSECOND,
       `attempt` = `attempt` + 1, `last_error` = :error,
       `claim_token` = NULL, `lease_expires_at` = NULL
 WHERE `id` = :id AND `consumption` = 'pull' AND `state` = 'processing'
   AND `claim_token` = :token AND `lease_expires_at` > UTC_TIMESTAMP(6)
