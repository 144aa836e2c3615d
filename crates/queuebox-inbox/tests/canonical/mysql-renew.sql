UPDATE `inbox`
   SET `lease_expires_at` = UTC_TIMESTAMP(6) + INTERVAL :lease_ms * 1000 MICROSECOND
 WHERE `id` = :id AND `consumption` = 'pull' AND `state` = 'processing'
   AND `claim_token` = :token AND `lease_expires_at` > UTC_TIMESTAMP(6)
