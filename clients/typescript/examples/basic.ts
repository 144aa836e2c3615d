import pg from 'pg';
import { createWorker, fromPg } from '@alternayte/queuebox-inbox';

// The connections need the inbox table on their search path.
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });

const worker = createWorker(fromPg(pool), { source: 'orders' }, async (message, tx) => {
  // Runs inside the handler transaction: this insert and the `processed` mark commit together.
  await tx.query('INSERT INTO app_rows (message_id, note) VALUES ($1, $2)', [message.id, message.eventType ?? '']);
});

process.once('SIGINT', () => void worker.stop());
process.once('SIGTERM', () => void worker.stop());

await worker.run();
await pool.end();
