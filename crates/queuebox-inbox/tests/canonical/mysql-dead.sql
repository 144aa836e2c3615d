UPDATE `inbox`
   SET `state` = 'dead', `attempt` = `attempt` + 1, `last_error` = :error,
       `claim_token` = NULL, `lease_expires_at` = NULL
 WHERE `id` = :id AND `consumption` = 'pull' AND `state` = 'processing'
   AND `claim_token` = :token AND `lease_expires_at` > UTC_TIMESTAMP(6)
