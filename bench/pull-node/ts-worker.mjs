// The TypeScript worker of bench/pull.sh: the client's normal path (claim, then each row's no-op
// handler in its own transaction with the processed mark) for one source, until SIGTERM/SIGINT.
// Uses the built client in clients/typescript/dist (`npm run build` there) and its own `pg`.
// Prints "ready" once its pool holds a live connection.
// Usage: node ts-worker.mjs <url> <source> <batch> <concurrency> <pollMs>
import { createRequire } from 'node:module';

const [url, source, batch, concurrency, pollMs] = process.argv.slice(2);
const client = new URL('../../clients/typescript/', import.meta.url);
const { createWorker, fromPg } = await import(new URL('dist/src/index.js', client).href);
const pg = createRequire(new URL('package.json', client))('pg');

const c = Number(concurrency);
const b = Number(batch);
// The client's README: maxConcurrency + batchSize + 2 connections.
const pool = new pg.Pool({ connectionString: url, max: c + b + 2 });
(await pool.connect()).release();
const worker = createWorker(
  fromPg(pool),
  { source, batchSize: b, maxConcurrency: c, pollIntervalMs: Number(pollMs), shutdownGraceMs: 5000 },
  async () => {},
);
process.once('SIGINT', () => void worker.stop());
process.once('SIGTERM', () => void worker.stop());
console.log('ready');
await worker.run();
await pool.end();
