import pg from 'pg';
import { createWorker, fromPg } from '@alternayte/queuebox-inbox';

// The connections need the inbox table on their search path.
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });

const worker = createWorker(fromPg(pool), { source: 'orders' }, async (message, tx) => {
  // Runs inside the handler transaction: this insert and the `processed` mark commit together.
  await tx.query('INSERT INTO app_rows (message_id, note) VALUES ($1, $2)', [message.id, message.eventType ?? '']);
});

// Ctrl-C or SIGTERM stops the worker gracefully: running handlers get the shutdown grace.
const shutdown = new AbortController();
process.once('SIGINT', () => shutdown.abort());
process.once('SIGTERM', () => shutdown.abort());

await worker.run({ signal: shutdown.signal });
await pool.end();
