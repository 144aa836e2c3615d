UPDATE `inbox` t
   SET t.`state` = 'processing',
       t.`claim_token` = :token,
       t.`claimed_at` = UTC_TIMESTAMP(6),
       t.`lease_expires_at` = UTC_TIMESTAMP(6) + INTERVAL :lease_ms * 1000 MICROSECOND
 WHERE t.`id` IN (:ids)
   AND t.`consumption` = 'pull' AND t.`source` = :source
       AND ((t.`state` = 'pending' AND t.`scheduled_at` <= UTC_TIMESTAMP(6))
         OR (t.`state` = 'processing' AND t.`lease_expires_at` <= UTC_TIMESTAMP(6)))
