// The peer of bench/peer.sh: the npm package pg-transactional-outbox (polling listener, its own
// table and `next_outbox_messages` function, created with its `DatabaseSetup` helper) drains
// ROWS pending rows into qb-receiver, one HTTP POST per message with `X-Message-Id` = the
// message id. Prints `rows= seconds= cpu_s= db_cpu_s=` (this process's CPU, and the CPU of the
// database backends whose application_name is `qb_peer`, read from /proc at the end).
//
// Usage: node peer.mjs <pg host> <pg port> <database> <schema> <rows> <receiver url> <batch> <poll ms>
import { readFileSync } from 'node:fs';
import pg from 'pg';
import {
  DatabaseSetup,
  getDefaultLogger,
  initializePollingMessageListener,
} from 'pg-transactional-outbox';

const [host, port, database, schema, rowsText, receiver, batchText, pollText] =
  process.argv.slice(2);
const rows = Number(rowsText);
const application_name = 'qb_peer';
const db = { host, port: Number(port), user: 'postgres', database, application_name };
const setup = {
  outboxOrInbox: 'outbox',
  database,
  schema,
  table: 'outbox',
  listenerRole: 'postgres',
  nextMessagesName: 'next_outbox_messages',
  nextMessagesSchema: schema,
};

const admin = new pg.Client({ ...db, application_name: 'qb_peer_driver' });
await admin.connect();
await admin.query(DatabaseSetup.dropAndCreateTable(setup));
await admin.query(DatabaseSetup.createPollingFunction(setup));
await admin.query(DatabaseSetup.setupPollingIndexes(setup));
// The same shape as QueueBox's rows: every tenth row without a key (its own segment), the
// others k0..k999 round robin as the segment, sequential per segment; ~200 bytes of JSON.
await admin.query(
  `INSERT INTO ${schema}.outbox (id, aggregate_type, aggregate_id, message_type, segment, payload, created_at)
   SELECT gen_random_uuid(), 'order', i::text, 'bench.order.created',
          CASE WHEN i % 10 = 0 THEN 'none-' || i ELSE 'k' || ((i - i / 10) % 1000) END,
          jsonb_build_object('orderId', i, 'customerId', 'customer-' || (i % 5000),
            'status', 'created', 'currency', 'EUR', 'amountCents', (i * 7919) % 100000,
            'lineCount', 1 + i % 7, 'channel', 'web', 'note', repeat('x', 44)),
          clock_timestamp()
   FROM generate_series(1, $1::int8) AS g(i)`,
  [rows],
);
await admin.query(`ANALYZE ${schema}.outbox`);

const logger = getDefaultLogger('peer');
logger.level = 'error';
const publisher = {
  handle: async (message) => {
    const res = await fetch(`${receiver}/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-message-id': message.id },
      body: JSON.stringify(message.payload),
    });
    await res.arrayBuffer();
    if (res.status >= 300) throw new Error(`receiver answered ${res.status}`);
  },
};
const cpuStart = process.cpuUsage();
const started = performance.now();
const [shutdown] = initializePollingMessageListener(
  {
    outboxOrInbox: 'outbox',
    dbListenerConfig: db,
    dbHandlerConfig: db,
    settings: {
      dbSchema: schema,
      dbTable: 'outbox',
      enableMaxAttemptsProtection: false,
      enablePoisonousMessageProtection: false,
      nextMessagesFunctionName: 'next_outbox_messages',
      nextMessagesFunctionSchema: schema,
      nextMessagesBatchSize: Number(batchText),
      nextMessagesPollingIntervalInMs: Number(pollText),
      messageCleanupIntervalInMs: 0,
    },
  },
  publisher,
  logger,
);
let done = 0;
let last = performance.now();
let lastDone = 0;
for (;;) {
  await new Promise((r) => setTimeout(r, 100));
  const r = await admin.query(
    `SELECT count(*)::int AS n FROM ${schema}.outbox WHERE processed_at IS NOT NULL`,
  );
  done = r.rows[0].n;
  if (done >= rows) break;
  if (done > lastDone) {
    lastDone = done;
    last = performance.now();
  } else if (performance.now() - last > 120_000) {
    console.error(`peer stalled at ${done} of ${rows}`);
    process.exit(1);
  }
}
const seconds = (performance.now() - started) / 1000;
const cpu = process.cpuUsage(cpuStart);
const ticks = 100; // USER_HZ on Linux
const backends = await admin.query(
  `SELECT pid FROM pg_stat_activity WHERE application_name = $1`,
  [application_name],
);
let dbCpu = 0;
for (const { pid } of backends.rows) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    dbCpu += (Number(fields[11]) + Number(fields[12])) / ticks;
  } catch {
    // a backend that ended meanwhile
  }
}
await shutdown();
await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
await admin.end();
console.log(
  `rows=${done} seconds=${seconds.toFixed(3)} cpu_s=${((cpu.user + cpu.system) / 1e6).toFixed(2)} db_cpu_s=${dbCpu.toFixed(2)} backends=${backends.rows.length}`,
);
process.exit(0);
