// PULL-C contract cases, worker behaviour (first half). PostgreSQL.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { defaultRetryPolicy, type HandlerTransaction, type InboxMessage } from '../src/index.js';
import { renderPostgresql } from '../src/sql.js';
import { c3 } from './shared.js';
import { captureLogger, prefixedNames, sleep, start, stopAll, waitFor, withDb, type TestDb } from './helpers.js';

const insertApp = async (m: InboxMessage, tx: HandlerTransaction): Promise<void> => void await
  tx.query('INSERT INTO app_rows (message_id) VALUES ($1)', [m.id]);

async function state(db: TestDb, ref: string): Promise<string> {
  return (await db.row(ref)).state;
}

test('PULL-C1 Every field reaches the handler', () =>
  withDb('c1', async (db) => {
    await db.insert([
      {
        ref: 'full',
        idempotency_key: 'key-full',
        aggregate_id: 'agg-1',
        event_type: 'order.created',
        payload: { n: 1, text: 'hé' },
        headers: { 'x-tenant': 'acme', 'content-type': 'application/json' },
        correlation_id: 'corr-1',
      },
      { ref: 'bare', idempotency_key: 'key-bare', aggregate_id: null, event_type: null, correlation_id: null, headers: {} },
    ]);
    const seen = new Map<string, InboxMessage>();
    const s = start(db, {}, async (m) => void seen.set(m.idempotencyKey, m));
    await waitFor('both handled', () => seen.size === 2);
    await stopAll(s);
    const full = seen.get('key-full')!;
    const stored = await db.row('full');
    assert.deepEqual(Object.keys(full).sort(), [
      'aggregateId', 'attempt', 'correlationId', 'createdAt', 'eventType', 'headers', 'id', 'idempotencyKey', 'payload', 'source',
    ]);
    assert.equal(full.id, db.id('full'));
    assert.equal(full.source, 's');
    assert.equal(full.idempotencyKey, 'key-full');
    assert.equal(full.aggregateId, 'agg-1');
    assert.equal(full.eventType, 'order.created');
    assert.deepEqual(full.payload, { n: 1, text: 'hé' });
    assert.equal(full.attempt, 0);
    assert.equal(full.correlationId, 'corr-1');
    assert.deepEqual({ ...full.headers }, { 'x-tenant': 'acme', 'content-type': 'application/json' });
    assert.equal(full.createdAt.getTime(), stored.created_at.getTime());
    const bare = seen.get('key-bare')!;
    assert.equal(bare.aggregateId, null);
    assert.equal(bare.eventType, null);
    assert.equal(bare.correlationId, null);
    assert.equal(bare.attempt, 0);
    assert.deepEqual({ ...bare.headers }, {});
    assert.ok(!JSON.stringify(full).includes(stored.claim_token ?? 'no-token') && !('token' in full));
    assert.equal(await state(db, 'full'), 'processed');
    assert.equal(await state(db, 'bare'), 'processed');
  }));

async function c2(db: TestDb): Promise<void> {
  await db.insert([{ ref: 'a' }]);
  const s = start(db, {}, insertApp);
  await waitFor('processed', async () => (await state(db, 'a')) === 'processed');
  await stopAll(s);
  assert.equal(await db.appRows('a'), 1);
  const r = await db.row('a');
  assert.equal(r.state, 'processed');
  assert.ok(r.processed_at instanceof Date);
  assert.equal(r.claim_token, null);
  assert.equal(r.lease_expires_at, null);
}

test('PULL-C2 Handler writes and completion commit together', () => withDb('c2', c2));

test('PULL-C3 No write is left when the handler fails', () => withDb('c3', (db) => c3(db)));

test('PULL-C4 Completion on 0 rows rolls back', () =>
  withDb('c4', async (db) => {
    await db.insert([{ ref: 'a' }]);
    const log = captureLogger();
    let thief = '';
    let returned = false;
    const s = start(db, { leaseMs: 600000, logger: log }, async (m, tx) => {
      thief = await db.steal('a');
      await insertApp(m, tx);
      returned = true;
    });
    await waitFor('handler returned and outcome logged', () => returned && log.has('The completion affected no row, so the work was rolled back.'));
    await stopAll(s);
    assert.equal(await db.appRows('a'), 0);
    const r = await db.row('a');
    assert.equal(r.state, 'processing');
    assert.equal(r.claim_token, thief);
  }));

test('PULL-C5 No message goes to two workers', () =>
  withDb('c5', async (db) => {
    await db.insert(Array.from({ length: 20 }, (_, i) => ({ ref: `r${i}` })));
    const handled: string[] = [];
    const h = async (m: InboxMessage) => {
      handled.push(m.id);
      await sleep(5);
    };
    const a = start(db, { batchSize: 3 }, h);
    const b = start(db, { batchSize: 3 }, h);
    await waitFor('20 handled', () => handled.length >= 20);
    await sleep(200);
    await stopAll(a, b);
    assert.equal(handled.length, 20);
    assert.equal(new Set(handled).size, 20);
    assert.deepEqual([...new Set(handled)].sort(), [...db.ids.values()].sort());
  }));

test('PULL-C6 Ownership lasts across a long handler', () =>
  withDb('c6', async (db) => {
    await db.insert([{ ref: 'a' }]);
    const first: string[] = [];
    const second: string[] = [];
    const a = start(db, { leaseMs: 1000 }, async (m) => {
      first.push(m.id);
      await sleep(3000);
    });
    await waitFor('first has it', () => first.length === 1);
    const b = start(db, { leaseMs: 1000 }, async (m) => void second.push(m.id));
    await waitFor('processed', async () => (await state(db, 'a')) === 'processed', 8000);
    await stopAll(a, b);
    assert.deepEqual(second, []);
    assert.equal(first.length, 1);
  }));

test('PULL-C7 A lost renewal cancels the handler', () =>
  withDb('c7', async (db) => {
    await db.insert([{ ref: 'a' }]);
    let thief = '';
    let elapsed = -1;
    const log = captureLogger();
    const s = start(db, { leaseMs: 1000, logger: log }, async (m, tx, signal) => {
      thief = await db.steal('a');
      const stolenAt = Date.now();
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      elapsed = Date.now() - stolenAt;
      await insertApp(m, tx);
    });
    await waitFor('signal fired', () => elapsed >= 0, 5000);
    await waitFor('outcome', () => log.has('The lease was lost, so the work was rolled back.'));
    await stopAll(s);
    assert.ok(elapsed <= 2 * Math.floor(1000 / 3) + 500, `signal after ${elapsed} ms`);
    assert.ok(log.has('The lease was lost to another worker.'));
    assert.equal(await db.appRows('a'), 0);
    const r = await db.row('a');
    assert.equal(r.state, 'processing');
    assert.equal(r.claim_token, thief);
  }));

test('PULL-C8 An abandoned message comes back', () =>
  withDb('c8', async (db) => {
    await db.insert([{ ref: 'a' }]);
    let started = false;
    const a = start(db, { leaseMs: 1000, shutdownGraceMs: 0 }, async (_m, _tx, signal) => {
      started = true;
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    });
    await waitFor('handler started', () => started);
    await stopAll(a);
    let r = await db.row('a');
    assert.equal(r.state, 'processing');
    assert.equal(r.attempt, 0);
    const again: InboxMessage[] = [];
    const b = start(db, { leaseMs: 1000 }, async (m) => void again.push(m));
    await waitFor('received again', () => again.length === 1, 5000);
    await stopAll(b);
    assert.equal(again[0]!.attempt, 0);
    r = await db.row('a');
    assert.equal(r.state, 'processed');
  }));

test('PULL-C9 A retry records the attempt and the backoff', () =>
  withDb('c9', async (db) => {
    await db.insert([{ ref: 'a' }]);
    let failedAt = 0;
    const s = start(db, { retryPolicy: defaultRetryPolicy({ maxAttempts: 5, baseDelayMs: 60000, maxDelayMs: 60000, jitter: 0 }) }, async () => {
      failedAt = Date.now();
      throw new Error('boom');
    });
    await waitFor('retried', async () => (await db.row('a')).attempt === 1);
    await stopAll(s);
    const r = await db.row('a');
    assert.equal(r.state, 'pending');
    assert.equal(r.attempt, 1);
    assert.match(r.last_error, /boom/);
    const now = (await db.admin.query('SELECT clock_timestamp() AS t')).rows[0].t as Date;
    assert.ok(r.scheduled_at.getTime() - now.getTime() > 30000 - (Date.now() - failedAt));
    assert.ok(r.scheduled_at.getTime() - failedAt > 30000);
  }));

test('PULL-C10 Dead letter at the ceiling', () =>
  withDb('c10', async (db) => {
    await db.insert([{ ref: 'a', attempt: 3 }]);
    const s = start(db, { retryPolicy: defaultRetryPolicy({ maxAttempts: 3, baseDelayMs: 1000, maxDelayMs: 1000, jitter: 0 }) }, async () => {
      throw new Error('fail');
    });
    await waitFor('dead', async () => (await state(db, 'a')) === 'dead');
    await stopAll(s);
    const r = await db.row('a');
    assert.equal(r.attempt, 4);
    assert.ok(r.last_error);
  }));

test('PULL-C11 A stale token changes nothing', () =>
  withDb('c11', async (db) => {
    await db.insert([{ ref: 'a' }]);
    const sql = renderPostgresql(db.names);
    const t1 = randomUUID();
    const client = await db.pool.connect();
    try {
      const claimed = await client.query(sql.claim, ['s', 10, 30000, 50, t1]);
      assert.equal(claimed.rows.length, 1);
      const thief = await db.steal('a');
      const before = await db.row('a');
      const id = db.id('a');
      assert.equal((await client.query(sql.complete, [id, t1])).rowCount, 0);
      assert.equal((await client.query(sql.retry, [1000, 'err', id, t1])).rowCount, 0);
      assert.equal((await client.query(sql.dead, ['err', id, t1])).rowCount, 0);
      assert.equal((await client.query(sql.renew, [30000, id, t1])).rowCount, 0);
      const after = await db.row('a');
      assert.deepEqual(after, before);
      assert.equal(after.state, 'processing');
      assert.equal(after.claim_token, thief);
      assert.equal(after.attempt, 0);
      assert.equal(after.last_error, null);
      // The owner's token does change it.
      assert.equal((await client.query(sql.renew, [30000, id, thief])).rowCount, 1);
    } finally {
      client.release();
    }
  }));

test('PULL-C12 Stop claims nothing new and abandons in-flight work', () =>
  withDb('c12', async (db) => {
    await db.insert([{ ref: 'a' }, { ref: 'b' }]);
    let started = 0;
    const s = start(db, { batchSize: 1, leaseMs: 60000, shutdownGraceMs: 0 }, async (_m, _tx, signal) => {
      started++;
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    });
    await waitFor('first handler', () => started === 1);
    await stopAll(s);
    await sleep(200);
    const states = [(await db.row('a')).state, (await db.row('b')).state].sort();
    assert.deepEqual(states, ['pending', 'processing']);
    assert.equal(started, 1);
  }));

test('PULL-C13 Mapped names work', () => withDb('c13', c2, prefixedNames('pull_jobs', 'qb_')));

