// The TypeScript worker of bench/pull.sh: the client's normal path (claim, then each row's no-op
// handler in its own transaction with the processed mark) for one source, until SIGTERM/SIGINT.
// Uses the built client in clients/typescript/dist (`npm run build` there) and its own `pg`.
// Prints "ready" once its pool holds a live connection.
// Usage: node ts-worker.mjs <url> <source> <batch> <concurrency> <pollMs> [batch]
// With the sixth argument `batch` (bench/pull-batch.sh) it runs the opt-in batch handler instead:
// `concurrency` batch workers in this process, each handing a whole claim to one no-op handler
// in one transaction completed by one statement.
import { createRequire } from 'node:module';

const [url, source, batch, concurrency, pollMs, mode] = process.argv.slice(2);
const client = new URL('../../clients/typescript/', import.meta.url);
const { createBatchWorker, createWorker, fromPg } = await import(new URL('dist/src/index.js', client).href);
const pg = createRequire(new URL('package.json', client))('pg');

const c = Number(concurrency);
const b = Number(batch);
// The client's README: maxConcurrency + batchSize + 2 connections.
const pool = new pg.Pool({ connectionString: url, max: c + b + 2 });
(await pool.connect()).release();
const options = { source, batchSize: b, maxConcurrency: c, pollIntervalMs: Number(pollMs), shutdownGraceMs: 5000 };
const workers =
  mode === 'batch'
    ? Array.from({ length: c }, () => createBatchWorker(fromPg(pool), options, async () => {}))
    : [createWorker(fromPg(pool), options, async () => {})];
const stop = () => workers.forEach((w) => void w.stop());
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
console.log('ready');
await Promise.all(workers.map((w) => w.run()));
await pool.end();
