// PULL-C40..C42: the opt-in batch handler (createBatchWorker) on PostgreSQL. SQLite and
// MySQL/MariaDB run the same cases through dialect-cases.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createBatchWorker, defaultRetryPolicy, type HandlerTransaction, type InboxBatchHandler, type InboxMessage, type WorkerOptions } from '../src/index.js';
import { readFileSync } from 'node:fs';
import { batchHandler } from '../examples/batch.js';
import { PACKAGE_DIR, schemaOf, sleep, stopAll, waitFor, withDb, type Started, type TestDb } from './helpers.js';

const insertApp = async (m: InboxMessage, tx: HandlerTransaction): Promise<void> =>
  void (await tx.query('INSERT INTO app_rows (message_id) VALUES ($1)', [m.id]));

function startBatched(db: TestDb, options: Partial<WorkerOptions>, handler: InboxBatchHandler): Started {
  const worker = createBatchWorker(db.source(), { source: 's', pollIntervalMs: 100, schema: schemaOf(db.names), ...options }, handler);
  db.workers.push(worker);
  return { worker, done: worker.run() };
}

const threeAggregates = (db: TestDb, attemptOfC = 0) =>
  db.insert([
    { ref: 'a', aggregate_id: 'agg-a' },
    { ref: 'b', aggregate_id: 'agg-b' },
    { ref: 'c', aggregate_id: 'agg-c', attempt: attemptOfC },
  ]);

// The proof of one transaction is xmin: every row version written carries the id of the
// transaction that wrote it, so the three marks and the three application rows share one.
test('PULL-C40 A batch handler completes its batch in one transaction', () =>
  withDb('c40', async (db) => {
    await threeAggregates(db);
    const calls: string[][] = [];
    const s = startBatched(db, {}, async (messages, tx) => {
      calls.push(messages.map((m) => m.id));
      for (const m of messages) await insertApp(m, tx);
    });
    await waitFor('processed', async () => {
      const r = await db.admin.query(`SELECT count(*)::int AS n FROM ${db.q('inbox')} WHERE ${db.q('state')} = 'processed'`);
      return r.rows[0].n === 3;
    });
    await stopAll(s);
    assert.deepEqual(calls, [['a', 'b', 'c'].map((r) => db.id(r))]);
    for (const ref of ['a', 'b', 'c']) {
      const r = await db.row(ref);
      assert.ok(r.processed_at !== null && r.claim_token === null && r.lease_expires_at === null);
      assert.deepEqual([await db.appRows(ref), r.attempt], [1, 0]);
    }
    const x = await db.admin.query(
      `SELECT count(DISTINCT x)::int AS n FROM (SELECT xmin::text AS x FROM ${db.q('inbox')} UNION ALL SELECT xmin::text FROM app_rows) v`,
    );
    assert.equal(x.rows[0].n, 1, 'the marks and the app rows share one transaction');
  }));

test('PULL-C41 A failed batch rolls back and every row is retried by the usual rules', () =>
  withDb('c41', async (db) => {
    await threeAggregates(db, 3);
    const policy = defaultRetryPolicy({ maxAttempts: 4, baseDelayMs: 60000, maxDelayMs: 60000, jitter: 0 });
    const s = startBatched(db, { retryPolicy: policy }, async (messages, tx) => {
      for (const m of messages) await insertApp(m, tx);
      throw new Error('boom');
    });
    await waitFor('failed', async () => (await db.row('c')).state === 'dead' && (await db.row('a')).attempt === 1 && (await db.row('b')).attempt === 1);
    await stopAll(s);
    const now = (await db.admin.query('SELECT clock_timestamp() AS t')).rows[0].t as Date;
    for (const [ref, state, attempt] of [['a', 'pending', 1], ['b', 'pending', 1], ['c', 'dead', 4]] as const) {
      const r = await db.row(ref);
      assert.deepEqual([r.state, r.attempt], [state, attempt], ref);
      assert.match(r.last_error, /boom/);
      assert.ok(r.claim_token === null && r.processed_at === null);
      assert.equal(await db.appRows(ref), 0);
      if (state === 'pending') assert.ok(r.scheduled_at.getTime() - now.getTime() > 30000);
    }
  }));

test('PULL-C42 A lost lease on one row of a batch completes none', () =>
  withDb('c42', async (db) => {
    await threeAggregates(db);
    let thief = '';
    let calls = 0;
    const s = startBatched(db, { leaseMs: 600000 }, async (messages, tx) => {
      calls++;
      thief = await db.steal('b');
      for (const m of messages) await insertApp(m, tx);
    });
    await waitFor('stolen', () => thief !== '');
    await sleep(300);
    await stopAll(s);
    assert.equal(calls, 1);
    const [a, b, c] = [await db.row('a'), await db.row('b'), await db.row('c')];
    assert.equal(b.claim_token, thief);
    assert.ok(a.claim_token !== null && a.claim_token === c.claim_token && a.claim_token !== thief);
    for (const [ref, r] of [['a', a], ['b', b], ['c', c]] as const) {
      assert.deepEqual([r.state, r.attempt, r.processed_at], ['processing', 0, null], ref);
      assert.equal(await db.appRows(ref), 0);
    }
  }));

test('The batch handler example runs, and docs/pull.md shows it verbatim', () =>
  withDb('batchexample', async (db) => {
    const example = readFileSync(new URL('examples/batch.ts', PACKAGE_DIR), 'utf8');
    const docs = readFileSync(new URL('../../docs/pull.md', PACKAGE_DIR), 'utf8');
    assert.ok(docs.includes('```ts\n' + example + '```'), 'docs/pull.md shows examples/batch.ts verbatim');
    await db.insert([{ ref: 'a' }, { ref: 'b' }, { ref: 'c' }]);
    const s = startBatched(db, {}, batchHandler);
    await waitFor('processed', async () => (await db.row('c')).state === 'processed' && (await db.row('a')).state === 'processed');
    await stopAll(s);
    for (const ref of ['a', 'b', 'c']) assert.equal(await db.appRows(ref), 1);
  }));
