SELECT `id`, `source`, `idempotency_key`, `aggregate_id`, `event_type`, `payload`, `attempt`, `correlation_id`, `headers`, `scheduled_at`, `created_at`
  FROM `inbox`
 WHERE `claim_token` = :token AND `state` = 'processing' AND `id` IN (:ids)
 ORDER BY `scheduled_at`, `created_at`, `id`
