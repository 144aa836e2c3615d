// The peer of bench/pull.sh: pg-boss (version pinned in package.json), in its own schema.
//   node pgboss.mjs init <url> <schema> <queue>
//       starts pg-boss once (creating its schema) and creates the queue, then stops.
//   node pgboss.mjs insert <url> <schema> <queue> <rows>
//       inserts <rows> jobs with boss.insert (one statement), then stops.
//   node pgboss.mjs work <url> <schema> <queue> <batch> <workers> <pollMs>
//       pg-boss's normal worker: <workers> boss.work() registrations with batchSize <batch>;
//       a no-op handler; pg-boss completes the batch in one statement. Until SIGTERM/SIGINT.
//   node pgboss.mjs loop <url> <schema> <queue> <batch> <workers>
//       <workers> tight loops of boss.fetch(queue, {batchSize}) then awaited boss.complete(ids),
//       no polling delay; until SIGTERM/SIGINT.
// Prints "ready" when the workers are registered. No maintenance or scheduling runs.
import PgBoss from 'pg-boss';

const [mode, url, schema, queue, ...rest] = process.argv.slice(2);
const workers = mode === 'work' || mode === 'loop' ? Number(rest[1]) : 0;
const boss = new PgBoss({
  connectionString: url,
  schema,
  max: workers + 2,
  supervise: false,
  schedule: false,
  migrate: mode === 'init',
});
boss.on('error', (e) => console.error('pg-boss error:', e.message));
await boss.start();

if (mode === 'init') {
  await boss.createQueue(queue);
  await boss.stop({ graceful: false, wait: true });
} else if (mode === 'insert') {
  const rows = Number(rest[0]);
  const jobs = Array.from({ length: rows }, (_, i) => ({ name: queue, data: { n: i } }));
  await boss.insert(jobs);
  await boss.stop({ graceful: false, wait: true });
} else if (mode === 'work') {
  const batchSize = Number(rest[0]);
  const pollingIntervalSeconds = Number(rest[2]) / 1000;
  for (let i = 0; i < workers; i += 1) {
    await boss.work(queue, { batchSize, pollingIntervalSeconds }, async () => {});
  }
  console.log('ready');
  const stop = () => void boss.stop({ graceful: true, wait: true, timeout: 5000 }).then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
} else if (mode === 'loop') {
  const batchSize = Number(rest[0]);
  let stopping = false;
  const loop = async () => {
    while (!stopping) {
      const jobs = await boss.fetch(queue, { batchSize });
      if (jobs.length === 0) {
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      await boss.complete(queue, jobs.map((j) => j.id));
    }
  };
  const loops = Array.from({ length: workers }, loop);
  console.log('ready');
  const stop = () => {
    stopping = true;
    void Promise.all(loops).then(() => boss.stop({ graceful: false, wait: true })).then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
} else {
  console.error(`unknown mode ${mode}`);
  process.exit(2);
}
