import type { InboxBatchHandler } from '@alternayte/queuebox-inbox';

// Every message of one claim (up to `batchSize`) in one transaction: these inserts and every
// `processed` mark commit together, or none does, and then each message is retried by the policy.
export const batchHandler: InboxBatchHandler = async (messages, tx) => {
  for (const message of messages) {
    await tx.query('INSERT INTO app_rows (message_id, note) VALUES ($1, $2)', [message.id, message.eventType ?? '']);
  }
};
