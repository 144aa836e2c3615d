// PULL-C contract cases on SQLite (better-sqlite3 12, a file database per test) and MySQL/MariaDB
// (mysql2, a database per test), registered by sqlite.test.ts and mysql.test.ts (one file per
// database, so each stays within the runner's per-file timeout). One test per case id and
// database, named "PULL-C<N> … (sqlite)" / "(mysql)"; a case that cases.json does not list for a
// database is registered with `skip` and the PULL-76 reason. The database-free unit cases
// (C28–C32) and the release case (C14) are in unit.test.ts and release.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { defaultRetryPolicy, deadLetter, type InboxMessage, type LogFields } from '../src/index.js';
import { renderDialect, type Statement } from '../src/sql.js';
import { createWorker } from '../src/index.js';
import { captureLogger, contractFile, DEFAULT_NAMES, faultySource, prefixedNames, sleep, waitFor } from './helpers.js';
import { c2, c3, insertApp, run, runBatched, stopAll, withDialect, type DialectDb, type Kind } from './dialects.js';


const policy = (maxAttempts: number, baseDelayMs: number, maxDelayMs: number) => defaultRetryPolicy({ maxAttempts, baseDelayMs, maxDelayMs, jitter: 0 });

type Case = (db: DialectDb, kind: Kind) => Promise<void>;

/** Three rows of three aggregates, in claim order (C40–C42); `c` at `attemptOfC`. */
const threeAggregates = (db: DialectDb, attemptOfC = 0) =>
  db.insert([
    { ref: 'a', aggregate_id: 'agg-a' },
    { ref: 'b', aggregate_id: 'agg-b' },
    { ref: 'c', aggregate_id: 'agg-c', attempt: attemptOfC },
  ]);

/** Every worker case, by id; the title comes from cases.json. */
const CASES: Record<string, Case> = {
  // Also PULL-6 (text UUIDs and UTC times round-trip) and PULL-55 (JSON text parsed).
  'PULL-C1': async (db) => {
    await db.insert([
      { ref: 'full', idempotency_key: 'key-full', aggregate_id: 'agg-1', event_type: 'order.created', payload: { n: 1, text: 'hé' },
        headers: { 'x-tenant': 'acme', 'content-type': 'application/json' }, correlation_id: 'corr-1' },
      { ref: 'bare', idempotency_key: 'key-bare', aggregate_id: null, event_type: null, correlation_id: null, headers: {} },
    ]);
    const seen = new Map<string, InboxMessage>();
    const s = run(db, {}, async (m) => void seen.set(m.idempotencyKey, m));
    await waitFor('both handled', () => seen.size === 2);
    await stopAll(s);
    const full = seen.get('key-full')!;
    assert.equal(full.id, db.id('full'));
    assert.equal(full.source, db.sourceName('s'));
    assert.equal(full.aggregateId, 'agg-1');
    assert.equal(full.eventType, 'order.created');
    assert.deepEqual(full.payload, { n: 1, text: 'hé' });
    assert.equal(full.attempt, 0);
    assert.equal(full.correlationId, 'corr-1');
    assert.deepEqual({ ...full.headers }, { 'x-tenant': 'acme', 'content-type': 'application/json' });
    assert.equal(full.createdAt.getTime(), (await db.row('full')).createdAt.getTime());
    const bare = seen.get('key-bare')!;
    assert.deepEqual([bare.aggregateId, bare.eventType, bare.correlationId, bare.attempt], [null, null, null, 0]);
    assert.deepEqual({ ...bare.headers }, {});
    assert.ok(!('token' in full));
  },
  'PULL-C2': (db) => c2(db),
  'PULL-C3': (db) => c3(db),
  'PULL-C4': async (db) => {
    await db.insert([{ ref: 'a' }]);
    let thief = '';
    const s = run(db, { leaseMs: 600000 }, async (m, tx) => {
      await tx.query('SELECT count(*) FROM app_rows');
      thief = await db.steal('a');
      await insertApp(m, tx);
    });
    await waitFor('stolen', () => thief !== '');
    await sleep(300);
    await stopAll(s);
    const r = await db.row('a');
    assert.equal(await db.appRows('a'), 0);
    assert.equal(r.state, 'processing');
    assert.equal(r.claimToken, thief);
  },
  'PULL-C5': async (db) => {
    await db.insert(Array.from({ length: 20 }, (_, i) => ({ ref: `r${i}` })));
    const seen: string[] = [];
    const h = async (m: InboxMessage) => void seen.push(m.id);
    const a = run(db, { batchSize: 3 }, h);
    const b = run(db, { batchSize: 3 }, h);
    await waitFor('all processed', async () => (await db.states()).every((s) => s === 'processed'), 60000);
    await stopAll(a, b);
    assert.equal(seen.length, 20);
    assert.equal(new Set(seen).size, 20);
  },
  // On SQLite also PULL-28: no renewal, and the second worker cannot take the row.
  'PULL-C6': async (db) => {
    await db.insert([{ ref: 'a' }]);
    const first: string[] = [];
    const second: string[] = [];
    const a = run(db, { leaseMs: 1000 }, async (m) => { first.push(m.id); await sleep(3000); });
    await sleep(300);
    const b = run(db, { leaseMs: 1000 }, async (m) => void second.push(m.id));
    await waitFor('processed', async () => (await db.row('a')).state === 'processed', 30000);
    await stopAll(a, b);
    assert.equal(first.length, 1);
    assert.equal(second.length, 0);
  },
  'PULL-C7': async (db) => {
    await db.insert([{ ref: 'a' }]);
    let thief = '';
    let waited = -1;
    const s = run(db, { leaseMs: 1000 }, async (m, tx, signal) => {
      thief = await db.steal('a');
      const at = Date.now();
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      waited = Date.now() - at;
      await insertApp(m, tx);
    });
    await waitFor('the signal', () => waited >= 0);
    await sleep(200);
    await stopAll(s);
    assert.ok(waited <= 2 * Math.floor(1000 / 3) + 500, `fired after ${waited} ms`);
    const r = await db.row('a');
    assert.equal(r.state, 'processing');
    assert.equal(r.claimToken, thief);
    assert.equal(await db.appRows('a'), 0);
  },
  'PULL-C8': async (db) => {
    await db.insert([{ ref: 'a' }]);
    let started = false;
    const a = run(db, { leaseMs: 1000, shutdownGraceMs: 0 }, (_m, _tx, signal) => {
      started = true;
      return new Promise<void>((_, reject) => signal.addEventListener('abort', () => reject(new Error('cancelled')), { once: true }));
    });
    await waitFor('started', () => started);
    await stopAll(a);
    const mid = await db.row('a');
    assert.deepEqual([mid.state, mid.attempt], ['processing', 0]);
    const attempts: number[] = [];
    const b = run(db, { leaseMs: 1000 }, async (m) => void attempts.push(m.attempt));
    await waitFor('processed', async () => (await db.row('a')).state === 'processed');
    await stopAll(b);
    assert.deepEqual(attempts, [0]);
  },
  'PULL-C9': async (db) => {
    await db.insert([{ ref: 'a' }]);
    const s = run(db, { retryPolicy: policy(5, 60000, 60000) }, async () => { throw new Error('boom'); });
    await waitFor('retried', async () => (await db.row('a')).attempt === 1);
    await stopAll(s);
    const r = await db.row('a');
    assert.equal(r.state, 'pending');
    assert.ok(r.lastError!.includes('boom'));
    assert.ok(r.scheduledInMs > 30000, `scheduled ${r.scheduledInMs} ms ahead`);
  },
  'PULL-C10': async (db) => {
    await db.insert([{ ref: 'a', attempt: 3 }]);
    const s = run(db, { retryPolicy: policy(3, 1000, 1000) }, async () => { throw new Error('boom'); });
    await waitFor('dead', async () => (await db.row('a')).state === 'dead');
    await stopAll(s);
    const r = await db.row('a');
    assert.equal(r.attempt, 4);
    assert.ok(r.lastError);
  },
  // Also PULL-8 (SQLite fences Complete, Retry and Dead on the token only) and PULL-10.
  'PULL-C11': async (db, kind) => {
    await db.insert([{ ref: 'a' }]);
    const st = renderDialect(kind, DEFAULT_NAMES);
    const thief = await db.steal('a');
    await db.run(`UPDATE ${db.q('inbox')} SET ${db.q('state')} = 'processing' WHERE ${db.q('id')} = ?`, [db.id('a')]);
    const before = await db.row('a');
    const old = '00000000-0000-4000-8000-000000000000';
    const conn = await db.source().connect('failure');
    const exec = async (s: Statement, values: Record<string, unknown>) => {
      const params = s.slots.map((n) => values[n]);
      return (await conn.query(s.text, params)).rowCount;
    };
    const id = db.id('a');
    const counts = [
      await exec(st.complete, { id, token: old }),
      await exec(st.retry, { delay_ms: 0, error: 'e', id, token: old }),
      await exec(st.dead, { error: 'e', id, token: old }),
      await exec(st.renew, { lease_ms: 1000, id, token: old }),
    ];
    // The owner's Renew matches, even when it writes what is there (CLIENT_FOUND_ROWS).
    const own = await exec(st.renew, { lease_ms: 600000, id, token: thief });
    await conn.release();
    assert.deepEqual(counts, [0, 0, 0, 0]);
    assert.equal(own, 1);
    const after = await db.row('a');
    assert.deepEqual([after.state, after.attempt, after.lastError, after.claimToken], [before.state, before.attempt, before.lastError, thief]);
  },
  'PULL-C12': async (db) => {
    await db.insert([{ ref: 'a' }, { ref: 'b' }]);
    let started = false;
    const s = run(db, { batchSize: 1, leaseMs: 60000, shutdownGraceMs: 0 }, (_m, _tx, signal) => {
      started = true;
      return new Promise<void>((_, reject) => signal.addEventListener('abort', () => reject(new Error('cancelled')), { once: true }));
    });
    await waitFor('started', () => started);
    await stopAll(s);
    assert.deepEqual(await db.states(), ['pending', 'processing']);
  },
  'PULL-C15': async (db) => {
    const log = captureLogger();
    await db.insert([{ ref: 'a' }]);
    const s = run(db, { logger: log }, async () => { throw new Error('Host=db;Password=hunter2;Database=app'); });
    await waitFor('retried', async () => (await db.row('a')).attempt === 1);
    await stopAll(s);
    const r = await db.row('a');
    assert.ok(!r.lastError!.includes('hunter2') && r.lastError!.includes('Password=[REDACTED]'));
    const text = JSON.stringify(log.lines);
    assert.ok(log.has('The message retries.'));
    assert.ok(text.includes('Password=[REDACTED]') && !text.includes('hunter2'));
  },
  'PULL-C16': async (db) => {
    const src = faultySource(db.source(), () => false);
    const s = run(db, { pollIntervalMs: 200 }, async () => {}, src);
    await sleep(2000);
    await stopAll(s);
    const claims = src.counts.claim ?? 0;
    assert.ok(claims >= 4 && claims <= 20, `${claims} claims`);
  },
  // On SQLite also PULL-28: the effective batch is 1.
  'PULL-C17': async (db, kind) => {
    await db.insert(Array.from({ length: 12 }, (_, i) => ({ ref: `r${i}` })));
    let held = 0;
    let maxHeld = 0;
    let heldAtClaim = 0;
    const processing = async () => Number((await db.all(`SELECT count(*) AS n FROM ${db.q('inbox')} WHERE ${db.q('state')} = 'processing'`))[0]!.n);
    const src = faultySource(db.source(), () => false);
    const inner = src.connect.bind(src);
    src.connect = async (purpose) => {
      if (purpose === 'claim') heldAtClaim += await processing();
      return inner(purpose);
    };
    const s = run(db, { batchSize: 3, maxConcurrency: 3 }, async () => {
      held = await processing();
      maxHeld = Math.max(maxHeld, held);
      await sleep(20);
    }, src);
    await waitFor('all processed', async () => (await db.states()).every((x) => x === 'processed'), 60000);
    await stopAll(s);
    assert.ok(maxHeld >= 1 && maxHeld <= (kind === 'sqlite' ? 1 : 3), `${maxHeld} held`);
    assert.equal(heldAtClaim, 0);
  },
  'PULL-C18': async (db, kind) => {
    // (a) one aggregate, two workers.
    await db.insert([0, 1, 2, 3].map((i) => ({ ref: `a${i + 1}`, aggregate_id: 'agg' })));
    const windows: [string, number, number][] = [];
    const h = async (m: InboxMessage) => {
      const at = Date.now();
      await sleep(200);
      windows.push([m.idempotencyKey, at, Date.now()]);
    };
    const a = run(db, { batchSize: 4, maxConcurrency: 4 }, h);
    const b = run(db, { batchSize: 4, maxConcurrency: 4 }, h);
    await waitFor('all processed', async () => (await db.states()).every((x) => x === 'processed'), 60000);
    await stopAll(a, b);
    windows.sort((x, y) => x[1] - y[1]);
    assert.deepEqual(windows.map((w) => w[0]), ['a1', 'a2', 'a3', 'a4']);
    for (let i = 1; i < windows.length; i++) assert.ok(windows[i - 1]![2] <= windows[i]![1], 'handler windows overlap');
    // (b) two aggregates of two rows, one worker: peak 2. Not on SQLite (concurrency 1, PULL-76).
    if (kind === 'sqlite') return;
    await withDialect(kind, async (db2) => {
      await db2.insert([['x1', 'x'], ['x2', 'x'], ['y1', 'y'], ['y2', 'y']].map(([ref, agg]) => ({ ref: ref!, aggregate_id: agg })));
      let cur = 0;
      let peak = 0;
      const s = run(db2, { batchSize: 4, maxConcurrency: 4 }, async () => {
        peak = Math.max(peak, ++cur);
        await sleep(200);
        cur--;
      });
      await waitFor('all processed', async () => (await db2.states()).every((x) => x === 'processed'), 30000);
      await stopAll(s);
      assert.equal(peak, 2);
    });
  },
  // Also PULL-19: transient; nothing touched while the lock is held.
  'PULL-C19': async (db, kind) => {
    const log = captureLogger();
    await db.insert([{ ref: 'a' }]);
    const release = await db.holdClaimLock();
    const s = run(db, { logger: log }, async () => {});
    const end = Date.now() + (kind === 'sqlite' ? 25000 : 35000);
    while (Date.now() < end) {
      await sleep(1000);
      const r = await db.row('a');
      assert.deepEqual([r.state, r.attempt, r.lastError], ['pending', 0, null]);
    }
    assert.ok(log.has('The claim failed.'));
    await release();
    await waitFor('processed', async () => (await db.row('a')).state === 'processed', 30000);
    await stopAll(s);
    assert.equal((await db.row('a')).attempt, 0);
  },
  'PULL-C20': async (db) => {
    const log = captureLogger();
    await db.insert([{ ref: 'a' }]);
    const release = await db.holdClaimLock();
    const at = Date.now();
    const s = run(db, { logger: log }, async () => {});
    await waitFor('the claim failure', () => log.has('The claim failed.'), 20000);
    const took = Date.now() - at;
    await stopAll(s);
    await release();
    assert.ok(took < 15000, `after ${took} ms`);
    const line = log.lines.find((l) => l.message === 'The claim failed.')!;
    assert.match(String((line.fields as LogFields).error), /GET_LOCK did not acquire the per-source claim lock/);
  },
  'PULL-C21': async (db) => {
    await db.insert([{ ref: 'mine' }, { ref: 'push', consumption: 'push' }, { ref: 'other', source: 't' }]);
    const seen: string[] = [];
    const s = run(db, {}, async (m) => void seen.push(m.idempotencyKey));
    await waitFor('processed', async () => (await db.row('mine')).state === 'processed');
    await sleep(300);
    await stopAll(s);
    assert.deepEqual(seen, ['mine']);
    for (const ref of ['push', 'other']) {
      const r = await db.row(ref);
      assert.deepEqual([r.state, r.claimToken, r.attempt], ['pending', null, 0]);
    }
  },
  'PULL-C22': async (db) => {
    const at = Date.now();
    await db.insert([{ ref: 'a', scheduled_at: 2000 }]);
    let handled = 0;
    const s = run(db, {}, async () => void (handled = Date.now()));
    await waitFor('processed', async () => (await db.row('a')).state === 'processed');
    await stopAll(s);
    assert.ok(handled - at >= 1950, `handled after ${handled - at} ms`);
  },
  'PULL-C23': async (db) => {
    await db.insert([{ ref: 'one', attempt: 1 }, { ref: 'two', attempt: 2 }]);
    const s = run(db, { retryPolicy: policy(3, 1000, 1000) }, async () => { throw new Error('boom'); });
    await waitFor('both failed', async () => (await db.row('one')).attempt === 2 && (await db.row('two')).state === 'dead');
    await stopAll(s);
    const [one, two] = [await db.row('one'), await db.row('two')];
    assert.deepEqual([one.state, one.attempt, two.state, two.attempt], ['pending', 2, 'dead', 3]);
  },
  'PULL-C24': async (db) => {
    const log = captureLogger();
    await db.insert([{ ref: 'a' }]);
    const until = Date.now() + 900;
    const src = faultySource(db.source(), (p) => p === 'renew' && Date.now() < until);
    let aborted = false;
    const s = run(db, { leaseMs: 1500, logger: log }, async (_m, _tx, signal) => {
      await sleep(2000);
      aborted = signal.aborted;
    }, src);
    await waitFor('processed', async () => (await db.row('a')).state === 'processed');
    await stopAll(s);
    assert.ok(log.has('The renewal failed.'));
    assert.equal(aborted, false);
  },
  'PULL-C25': async (db) => {
    await db.insert([0, 1, 2, 3].map((i) => ({ ref: `r${i}` })));
    let cur = 0;
    let peak = 0;
    const s = run(db, { batchSize: 4, maxConcurrency: 4 }, async () => {
      peak = Math.max(peak, ++cur);
      await sleep(200);
      cur--;
    });
    await waitFor('all processed', async () => (await db.states()).every((x) => x === 'processed'));
    await stopAll(s);
    assert.equal(peak, 4);
  },
  'PULL-C26': async (db) => {
    await db.insert([0, 1, 2].map((i) => ({ ref: `r${i}` })));
    const first: string[] = [];
    const second: string[] = [];
    const a = run(db, { batchSize: 3, maxConcurrency: 1, leaseMs: 1000 }, async (m) => { first.push(m.id); await sleep(800); });
    await sleep(100);
    const b = run(db, { batchSize: 3, maxConcurrency: 1, leaseMs: 1000, pollIntervalMs: 100 }, async (m) => void second.push(m.id));
    await waitFor('all processed', async () => (await db.states()).every((x) => x === 'processed'), 30000);
    await stopAll(a, b);
    assert.equal(first.length, 3);
    assert.equal(second.length, 0);
  },
  'PULL-C27': async (db) => {
    const log = captureLogger();
    await db.insert([{ ref: 'a' }]);
    let failOnce = true;
    const src = faultySource(db.source(), (p) => {
      if (p === 'handler' && failOnce) {
        failOnce = false;
        return true;
      }
      return false;
    });
    const s = run(db, { leaseMs: 1000, logger: log }, async () => {}, src);
    await waitFor('abandoned', () => log.has('The message was abandoned.'));
    const mid = await db.row('a');
    await waitFor('processed', async () => (await db.row('a')).state === 'processed');
    await stopAll(s);
    assert.deepEqual([mid.state, mid.attempt], ['processing', 0]);
    assert.equal((await db.row('a')).attempt, 0);
  },
  'PULL-C33': async (_db, kind) => {
    // C3 with no logger, in a child process whose stdout and stderr are checked: nothing written.
    const module = new URL('./dialects.js', import.meta.url).href;
    const script = `const d = await import(${JSON.stringify(module)}); await d.withDialect(${JSON.stringify(kind)}, d.c3);`;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60000 });
    assert.equal(child.status, 0, child.stderr);
    assert.deepEqual([child.stdout, child.stderr], ['', '']);
  },
  'PULL-C34': async (db) => {
    const text = 'Zoë – 東京 🚀';
    const payloads = [{ a: { b: [1, 2] } }, [1, 'two', null], 'plain', 12.5, true, null, { name: text }];
    await db.insert(payloads.map((payload, i) => ({ ref: `k${i}`, payload, headers: { 'x-name': text } })));
    const seen = new Map<string, InboxMessage>();
    const s = run(db, {}, async (m) => void seen.set(m.idempotencyKey, m));
    await waitFor('all handled', () => seen.size === payloads.length);
    await stopAll(s);
    payloads.forEach((p, i) => {
      assert.deepEqual(seen.get(`k${i}`)!.payload, p);
      assert.equal(seen.get(`k${i}`)!.headers['x-name'], text);
    });
  },
  'PULL-C35': async (db) => {
    await db.insert([{ ref: 'a' }]);
    let started = false;
    const s = run(db, { shutdownGraceMs: 10000 }, async () => { started = true; await sleep(500); });
    await waitFor('started', () => started);
    await stopAll(s);
    assert.equal((await db.row('a')).state, 'processed');
  },
  'PULL-C36': async (db) => {
    await db.insert([{ ref: 'a' }]);
    const s = run(db, { retryPolicy: () => deadLetter() }, async () => { throw new Error('boom'); });
    await waitFor('dead', async () => (await db.row('a')).state === 'dead');
    await stopAll(s);
    const r = await db.row('a');
    assert.equal(r.attempt, 1);
    assert.ok(r.lastError);
  },
  'PULL-C37': async (db) => {
    await db.insert([{ ref: 'a' }]);
    // Stop before run: run returns at once and claims nothing.
    const early = createWorker(db.source(), { source: db.sourceName('s'), pollIntervalMs: 50 }, async () => {});
    await early.stop();
    await early.stop();
    await early.run();
    assert.equal((await db.row('a')).state, 'pending');
    // Stop twice during a run: one return, no error.
    const again = run(db, {}, async () => { await sleep(300); });
    await waitFor('processed', async () => (await db.row('a')).state === 'processed');
    await Promise.all([again.worker.stop(), again.worker.stop()]);
    await again.done;
    await again.worker.stop();
  },
  // Also PULL-28: no renewal, a 500 ms lease, and nobody else takes the row meanwhile.
  'PULL-C39': async (db) => {
    await db.insert([{ ref: 'a' }]);
    const first: string[] = [];
    const second: string[] = [];
    const a = run(db, { leaseMs: 500 }, async (m) => { first.push(m.id); await sleep(1500); });
    await sleep(100);
    const b = run(db, { leaseMs: 500 }, async (m) => void second.push(m.id));
    await waitFor('processed', async () => (await db.row('a')).state === 'processed', 30000);
    await sleep(600);
    await stopAll(a, b);
    assert.equal(first.length, 1);
    assert.equal(second.length, 0);
  },
  // SQLite claims one row at a time (PULL-28): three calls of one message there.
  'PULL-C40': async (db, kind) => {
    await threeAggregates(db);
    const calls: string[][] = [];
    const s = runBatched(db, {}, async (messages, tx) => {
      calls.push(messages.map((m) => m.id));
      for (const m of messages) await insertApp(m, tx);
    });
    await waitFor('processed', async () => (await db.states()).every((st) => st === 'processed'));
    await stopAll(s);
    const ids = ['a', 'b', 'c'].map((r) => db.id(r));
    assert.deepEqual(calls, kind === 'sqlite' ? ids.map((id) => [id]) : [ids]);
    for (const ref of ['a', 'b', 'c']) {
      const r = await db.row(ref);
      assert.ok(r.processedSet && r.claimToken === null && !r.leaseSet);
      assert.deepEqual([await db.appRows(ref), r.attempt], [1, 0]);
    }
  },
  'PULL-C41': async (db) => {
    await threeAggregates(db, 3);
    const s = runBatched(db, { retryPolicy: policy(4, 60000, 60000) }, async (messages, tx) => {
      for (const m of messages) await insertApp(m, tx);
      throw new Error('boom');
    });
    await waitFor('failed', async () => (await db.row('c')).state === 'dead' && (await db.row('a')).attempt === 1 && (await db.row('b')).attempt === 1);
    await stopAll(s);
    for (const [ref, state, attempt] of [['a', 'pending', 1], ['b', 'pending', 1], ['c', 'dead', 4]] as const) {
      const r = await db.row(ref);
      assert.deepEqual([r.state, r.attempt], [state, attempt], ref);
      assert.match(r.lastError ?? '', /boom/);
      assert.ok(r.claimToken === null && !r.processedSet);
      assert.equal(await db.appRows(ref), 0);
      if (state === 'pending') assert.ok(r.scheduledInMs > 30000, `${r.scheduledInMs} ms`);
    }
  },
  'PULL-C42': async (db) => {
    await threeAggregates(db);
    let thief = '';
    let calls = 0;
    const s = runBatched(db, { leaseMs: 600000 }, async (messages, tx) => {
      calls++;
      await tx.query('SELECT count(*) FROM app_rows');
      thief = await db.steal('b');
      for (const m of messages) await insertApp(m, tx);
    });
    await waitFor('stolen', () => thief !== '');
    await sleep(300);
    await stopAll(s);
    assert.equal(calls, 1);
    const [a, b, c] = [await db.row('a'), await db.row('b'), await db.row('c')];
    assert.equal(b.claimToken, thief);
    assert.ok(a.claimToken !== null && a.claimToken === c.claimToken && a.claimToken !== thief);
    for (const [ref, r] of [['a', a], ['b', b], ['c', c]] as const) {
      assert.deepEqual([r.state, r.attempt, r.processedSet], ['processing', 0, false], ref);
      assert.equal(await db.appRows(ref), 0);
    }
  },
};

/** C13 repeats C2 with another table name and other names for every column (PULL-5, PULL-24). */
const MAPPED: Record<string, true> = { 'PULL-C13': true };
/** Cases proven without a database elsewhere (unit.test.ts, release.test.ts). */
const ELSEWHERE = new Set(['PULL-C14', 'PULL-C28', 'PULL-C29', 'PULL-C30', 'PULL-C31', 'PULL-C32']);

/** Registers every case for one database. */
export function registerCases(kind: Kind): void {
  const cases = JSON.parse(contractFile('cases.json')).cases as { id: string; title: string; databases: string[] }[];
  for (const c of cases) {
    if (ELSEWHERE.has(c.id)) continue;
    const name = `${c.id} ${c.title} (${kind})`;
    if (!c.databases.includes(kind)) {
      test(name, { skip: `not applicable on ${kind}: cases.json does not list it (PULL-76)` }, () => {});
      continue;
    }
    if (MAPPED[c.id]) {
      test(name, () => withDialect(kind, (db) => c2(db), prefixedNames('pull_jobs', 'qb_')));
      continue;
    }
    const body = CASES[c.id];
    test(name, () => {
      assert.ok(body, `no test body for ${c.id} on ${kind}`);
      return withDialect(kind, (db) => body!(db, kind));
    });
  }
  test(`PULL-C29 Rendered SQL equals the canonical text (${kind})`, () => checkCanonical(kind));
}

function checkCanonical(kind: Kind): void {
  const spec = (() => {
    try {
      return contractFile('../../../shared/spec/pull.md');
    } catch {
      return undefined;
    }
  })();
  const norm = (s: string) => s.replace(/\s+/g, ' ').trim();
  {
    const files = kind === 'mysql'
      ? ['claim-lock', 'claim-select', 'claim-update', 'claim-fetch', 'claim-unlock', 'renew', 'complete', 'retry', 'dead']
      : ['claim', 'renew', 'complete', 'retry', 'dead'];
    const canonical: Record<string, string> = {};
    for (const f of files) canonical[f] = contractFile(`${kind}/${f}.sql`).split('\n').filter((l) => !l.trimStart().startsWith('--')).join('\n').replace(/\{([a-z_]+)\}/g, '$1');
    if (spec !== undefined) {
      const section = spec.slice(spec.indexOf(kind === 'mysql' ? '### 5.3 MySQL' : '### 5.4 SQLite'), spec.indexOf(kind === 'mysql' ? '### 5.4 SQLite' : '## 6.'));
      const blocks = [...section.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1]!);
      assert.equal(blocks.length, files.length);
      files.forEach((f, i) => assert.equal(norm(canonical[f]!), norm(blocks[i]!), `${kind}/${f} differs from pull.md`));
    }
    const st = renderDialect(kind, DEFAULT_NAMES);
    const rendered: Record<string, Statement> = { renew: st.renew, complete: st.complete, retry: st.retry, dead: st.dead };
    if (st.mysql) Object.assign(rendered, { 'claim-select': st.claim, 'claim-lock': st.mysql.lock, 'claim-update': st.mysql.update, 'claim-fetch': st.mysql.fetch, 'claim-unlock': st.mysql.unlock });
    else rendered.claim = st.claim;
    for (const f of files) {
      const names = rendered[f]!.slots.filter((n) => n !== 'ids');
      let i = 0;
      const back = rendered[f]!.text.replace(/\?/g, () => `:${names[i++]}`);
      assert.equal(norm(back), norm(canonical[f]!), `${kind}/${f}`);
    }
  }
}
