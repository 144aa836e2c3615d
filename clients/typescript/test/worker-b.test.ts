// PULL-C contract cases, worker behaviour (second half). PostgreSQL.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deadLetter, defaultRetryPolicy, type ConnectionSource, type HandlerTransaction, type InboxMessage } from '../src/index.js';
import { captureLogger, faultySource, sleep, start, stopAll, waitFor, withDb, type TestDb } from './helpers.js';
import { c3 } from './shared.js';

const insertApp = async (m: InboxMessage, tx: HandlerTransaction): Promise<void> =>
  void (await tx.query('INSERT INTO app_rows (message_id) VALUES ($1)', [m.id]));

async function state(db: TestDb, ref: string): Promise<string> {
  return (await db.row(ref)).state;
}

/** Tracks concurrent handler windows. */
function tracker() {
  let now = 0;
  const t = {
    peak: 0,
    windows: [] as { key: string; start: number; end: number }[],
    async run(key: string, ms: number) {
      now++;
      t.peak = Math.max(t.peak, now);
      const w = { key, start: performance.now(), end: 0 };
      t.windows.push(w);
      await sleep(ms);
      w.end = performance.now();
      now--;
    },
    get current() {
      return now;
    },
  };
  return t;
}

test('PULL-C15 Secrets never reach last_error or logs', () =>
  withDb('c15', async (db) => {
    await db.insert([{ ref: 'a' }]);
    const log = captureLogger();
    const s = start(db, { logger: log }, async () => {
      throw new Error('Host=db;Password=hunter2;Database=app');
    });
    await waitFor('retried', async () => (await db.row('a')).attempt === 1);
    await stopAll(s);
    const r = await db.row('a');
    assert.ok(!r.last_error.includes('hunter2'));
    assert.match(r.last_error, /Password=\[REDACTED\]/);
    const lines = log.lines.map((l) => JSON.stringify(l));
    assert.ok(lines.length > 0);
    assert.ok(lines.every((l) => !l.includes('hunter2')));
    assert.ok(lines.some((l) => l.includes('Password=[REDACTED]')));
  }));

test('PULL-C16 No polling storm', () =>
  withDb('c16', async (db) => {
    const source = faultySource(db.source(), () => false);
    const s = start(db, { pollIntervalMs: 200 }, async () => {}, source);
    await sleep(2000);
    await stopAll(s);
    const claims = source.counts.claim ?? 0;
    assert.ok(claims >= 4 && claims <= 20, `${claims} claims`);
  }));

test('PULL-C17 No more than the batch in memory', () =>
  withDb('c17', async (db) => {
    await db.insert(Array.from({ length: 12 }, (_, i) => ({ ref: `r${i + 1}` })));
    let held = 0;
    let peakHeld = 0;
    let claimsDuringBatch = 0;
    let handled = 0;
    // Every claimed row counts as held from the claim's return until its handler ends.
    let claimedRows = 0;
    let maxClaimRows = 0;
    const inner = db.source();
    const source: ConnectionSource = {
      dialect: 'postgresql',
      async connect(purpose) {
        if (purpose === 'claim' && held + pending > 0) claimsDuringBatch++;
        const conn = await inner.connect(purpose);
        if (purpose !== 'claim') return conn;
        return {
          ...conn,
          query: async (sql, params, options) => {
            const r = await conn.query(sql, params, options);
            pending += r.rows.length;
            claimedRows += r.rows.length;
            maxClaimRows = Math.max(maxClaimRows, r.rows.length);
            peakHeld = Math.max(peakHeld, held + pending);
            return r;
          },
          begin: () => conn.begin(),
          commit: () => conn.commit(),
          rollback: () => conn.rollback(),
          release: (broken) => conn.release(broken),
        };
      },
    };
    let pending = 0;
    // "Held" = claimed and not yet given an outcome: counted from handler start to the end of
    // its outcome, plus rows waiting in the batch (each claim returns at most batchSize rows).
    const s = start(db, { batchSize: 3, maxConcurrency: 3 }, async () => {
      pending--;
      held++;
      peakHeld = Math.max(peakHeld, held + pending);
      await sleep(30);
      held--;
      handled++;
    }, source);
    await waitFor('12 handled', () => handled === 12);
    await stopAll(s);
    assert.ok(peakHeld <= 3, `peak ${peakHeld}`);
    assert.ok(maxClaimRows <= 3 && maxClaimRows > 0, `claim returned ${maxClaimRows}`);
    assert.equal(claimedRows, 12);
    assert.equal(claimsDuringBatch, 0);
    const r = await db.admin.query(`SELECT count(*)::int AS n FROM inbox WHERE state = 'processed'`);
    assert.equal(r.rows[0].n, 12);
  }));

test('PULL-C18 One message per aggregate in flight', async (t) => {
  await t.test('(a) one aggregate, two workers', () =>
    withDb('c18a', async (db) => {
      await db.insert(['r1', 'r2', 'r3', 'r4'].map((ref) => ({ ref, aggregate_id: 'agg' })));
      const tr = tracker();
      const h = (m: InboxMessage) => tr.run(m.idempotencyKey, 200);
      const a = start(db, { batchSize: 4, maxConcurrency: 4, pollIntervalMs: 50 }, h);
      const b = start(db, { batchSize: 4, maxConcurrency: 4, pollIntervalMs: 50 }, h);
      await waitFor('4 handled', () => tr.windows.filter((w) => w.end > 0).length === 4, 10000);
      await stopAll(a, b);
      assert.equal(tr.peak, 1);
      assert.deepEqual(tr.windows.map((w) => w.key), ['r1', 'r2', 'r3', 'r4']);
      for (let i = 1; i < 4; i++) assert.ok(tr.windows[i]!.start >= tr.windows[i - 1]!.end);
    }));
  await t.test('(b) two aggregates, one worker', () =>
    withDb('c18b', async (db) => {
      await db.insert([
        { ref: 'x1', aggregate_id: 'x' },
        { ref: 'y1', aggregate_id: 'y' },
        { ref: 'x2', aggregate_id: 'x' },
        { ref: 'y2', aggregate_id: 'y' },
      ]);
      const tr = tracker();
      const s = start(db, { batchSize: 4, maxConcurrency: 4, pollIntervalMs: 50 }, (m) => tr.run(m.idempotencyKey, 200));
      await waitFor('4 handled', () => tr.windows.filter((w) => w.end > 0).length === 4, 10000);
      await stopAll(s);
      assert.equal(tr.peak, 2);
    }));
});

test('PULL-C19 A claim lock failure is transient', { skip: 'not applicable on postgresql: PostgreSQL takes no claim lock (PULL-76)' }, () => {});

test('PULL-C20 The lock timeout beats the caller\'s deadline', { skip: 'not applicable on postgresql: no claim lock (PULL-76)' }, () => {});

test('PULL-C21 Only pull rows of the worker\'s source are claimed', () =>
  withDb('c21', async (db) => {
    await db.insert([{ ref: 'a' }, { ref: 'push', consumption: 'push' }, { ref: 'other', source: 't' }]);
    const handled: string[] = [];
    const s = start(db, {}, async (m) => void handled.push(m.idempotencyKey));
    await waitFor('a processed', async () => (await state(db, 'a')) === 'processed');
    await sleep(300);
    await stopAll(s);
    assert.deepEqual(handled, ['a']);
    for (const ref of ['push', 'other']) {
      const r = await db.row(ref);
      assert.equal(r.state, 'pending');
      assert.equal(r.claim_token, null);
      assert.equal(r.attempt, 0);
    }
  }));

test('PULL-C22 A row is not claimed before it is due', () =>
  withDb('c22', async (db) => {
    await db.insert([{ ref: 'a', scheduled_at: '+2s' }]);
    const begun = Date.now();
    let at = 0;
    const s = start(db, {}, async () => void (at = Date.now()));
    await waitFor('handled', () => at > 0, 6000);
    await stopAll(s);
    assert.ok(at - begun >= 1900, `handled after ${at - begun} ms`);
  }));

test('PULL-C23 The attempt boundary', () =>
  withDb('c23', async (db) => {
    await db.insert([{ ref: 'one', attempt: 1 }, { ref: 'two', attempt: 2 }]);
    const s = start(db, { retryPolicy: defaultRetryPolicy({ maxAttempts: 3, baseDelayMs: 1000, maxDelayMs: 1000, jitter: 0 }) }, async () => {
      throw new Error('fail');
    });
    await waitFor('both failed', async () => (await db.row('one')).attempt === 2 && (await db.row('two')).attempt === 3);
    await stopAll(s);
    assert.equal(await state(db, 'one'), 'pending');
    assert.equal(await state(db, 'two'), 'dead');
  }));

test('PULL-C24 A renewal error is not a lost lease', () =>
  withDb('c24', async (db) => {
    await db.insert([{ ref: 'a' }]);
    const log = captureLogger();
    const t0 = Date.now();
    const source = faultySource(db.source(), (p) => p === 'renew' && Date.now() - t0 < 900);
    let aborted = false;
    const s = start(db, { leaseMs: 1500, logger: log }, async (_m, _tx, signal) => {
      await sleep(2000);
      aborted = signal.aborted;
    }, source);
    await waitFor('processed', async () => (await state(db, 'a')) === 'processed', 8000);
    await stopAll(s);
    assert.ok(log.has('The renewal failed.'));
    assert.equal(aborted, false);
  }));

test('PULL-C25 Rows without aggregate run in parallel', () =>
  withDb('c25', async (db) => {
    await db.insert(['a', 'b', 'c', 'd'].map((ref) => ({ ref })));
    const tr = tracker();
    const s = start(db, { batchSize: 4, maxConcurrency: 4 }, (m) => tr.run(m.idempotencyKey, 200));
    await waitFor('4 handled', () => tr.windows.filter((w) => w.end > 0).length === 4);
    await stopAll(s);
    assert.equal(tr.peak, 4);
  }));

test('PULL-C26 Waiting rows keep their lease', () =>
  withDb('c26', async (db) => {
    await db.insert(['a', 'b', 'c'].map((ref) => ({ ref })));
    const first: string[] = [];
    const second: string[] = [];
    const a = start(db, { batchSize: 3, maxConcurrency: 1, leaseMs: 1000 }, async (m) => {
      first.push(m.idempotencyKey);
      await sleep(800);
    });
    await waitFor('first started', () => first.length === 1);
    const b = start(db, { pollIntervalMs: 100, leaseMs: 1000 }, async (m) => void second.push(m.idempotencyKey));
    await waitFor('all processed', async () => {
      const r = await db.admin.query(`SELECT count(*)::int AS n FROM inbox WHERE state = 'processed'`);
      return r.rows[0].n === 3;
    }, 10000);
    await stopAll(a, b);
    assert.deepEqual(first, ['a', 'b', 'c']);
    assert.deepEqual(second, []);
  }));

test('PULL-C27 A library failure abandons', () =>
  withDb('c27', async (db) => {
    await db.insert([{ ref: 'a' }]);
    const log = captureLogger();
    let failures = 1;
    const source = faultySource(db.source(), (p) => p === 'handler' && failures-- > 0);
    const handled: InboxMessage[] = [];
    const s = start(db, { leaseMs: 1000, logger: log }, async (m) => void handled.push(m), source);
    await waitFor('abandoned', () => log.has('The message was abandoned.'));
    const r = await db.row('a');
    assert.equal(r.state, 'processing');
    assert.equal(r.attempt, 0);
    await waitFor('processed', async () => (await state(db, 'a')) === 'processed', 5000);
    await stopAll(s);
    assert.equal(handled.length, 1);
    assert.equal(handled[0]!.attempt, 0);
    assert.equal((await db.row('a')).attempt, 0);
  }));

test('PULL-C33 Silent by default', () =>
  withDb('c33', async (db) => {
    const written: string[] = [];
    const out = process.stdout.write.bind(process.stdout);
    const err = process.stderr.write.bind(process.stderr);
    const capture = (chunk: unknown) => (written.push(String(chunk)), true);
    const origConsole = { ...console };
    process.stdout.write = capture as typeof process.stdout.write;
    process.stderr.write = capture as typeof process.stderr.write;
    for (const k of ['log', 'info', 'warn', 'error', 'debug'] as const) console[k] = (...a: unknown[]) => void written.push(a.join(' '));
    try {
      await c3(db);
    } finally {
      process.stdout.write = out;
      process.stderr.write = err;
      Object.assign(console, origConsole);
    }
    assert.deepEqual(written, []);
  }));

test('PULL-C34 Payloads and text round-trip', () =>
  withDb('c34', async (db) => {
    const payloads: Record<string, unknown> = {
      object: { a: 1, b: [true, null], c: 'ü' },
      array: [1, 'two', { three: 3 }],
      string: 'just text',
      number: 42.5,
      true: true,
      null: null,
      unicode: { text: 'héllo wörld — 日本語 😀' },
    };
    await db.insert(
      Object.entries(payloads).map(([ref, payload]) => ({
        ref,
        payload,
        headers: ref === 'unicode' ? { 'x-name': 'Zoë 😀', 'x-city': 'Köln' } : {},
        event_type: ref === 'unicode' ? 'événement' : null,
      })),
    );
    const seen = new Map<string, InboxMessage>();
    const s = start(db, {}, async (m) => void seen.set(m.idempotencyKey, m));
    await waitFor('all handled', () => seen.size === Object.keys(payloads).length);
    await stopAll(s);
    for (const [ref, payload] of Object.entries(payloads)) assert.deepEqual(seen.get(ref)!.payload, payload, ref);
    assert.deepEqual({ ...seen.get('unicode')!.headers }, { 'x-name': 'Zoë 😀', 'x-city': 'Köln' });
    assert.equal(seen.get('unicode')!.eventType, 'événement');
  }));

test('PULL-C35 A handler that finishes within the grace commits', () =>
  withDb('c35', async (db) => {
    await db.insert([{ ref: 'a' }]);
    let started = false;
    const s = start(db, { shutdownGraceMs: 10000 }, async (m, tx) => {
      started = true;
      await sleep(500);
      await insertApp(m, tx);
    });
    await waitFor('started', () => started);
    await s.worker.stop();
    await s.done;
    assert.equal(await state(db, 'a'), 'processed');
    assert.equal(await db.appRows('a'), 1);
  }));

test('PULL-C36 A policy dead letter counts the attempt', () =>
  withDb('c36', async (db) => {
    await db.insert([{ ref: 'a' }]);
    const s = start(db, { retryPolicy: () => deadLetter() }, async () => {
      throw new Error('no');
    });
    await waitFor('dead', async () => (await state(db, 'a')) === 'dead');
    await stopAll(s);
    const r = await db.row('a');
    assert.equal(r.attempt, 1);
    assert.ok(r.last_error);
  }));

test('PULL-C37 Stop is idempotent', () =>
  withDb('c37', async (db) => {
    const before = start(db, {}, async () => {});
    await before.worker.stop();
    await before.worker.stop();
    await before.done;
    const { createWorker } = await import('../src/index.js');
    const w = createWorker(db.source(), { source: 's' }, async () => {});
    await w.stop();
    await w.stop();
    await w.run(); // returns at once after a stop before run
    await db.insert([{ ref: 'a' }]);
    let started = false;
    const s = start(db, {}, async () => {
      started = true;
      await sleep(200);
    });
    await waitFor('started', () => started);
    let returns = 0;
    const watched = s.done.then(() => returns++);
    await Promise.all([s.worker.stop(), s.worker.stop()]);
    await watched;
    await s.worker.stop();
    assert.equal(returns, 1);
    assert.equal(await state(db, 'a'), 'processed');
  }));

test('PULL-C38 An invalid JSON payload is dead-lettered', { skip: 'not applicable on postgresql: jsonb rejects invalid JSON (PULL-76)' }, () => {});

test('PULL-C39 SQLite: a long handler still completes', { skip: 'not applicable on postgresql: SQLite only (PULL-76)' }, () => {});

test('PULL-36 a failed claim is logged and waits the poll interval', () =>
  withDb('claimfail', async (db) => {
    const log = captureLogger();
    const source = faultySource(db.source(), (p) => p === 'claim');
    const s = start(db, { pollIntervalMs: 200, logger: log }, async () => {}, source);
    await sleep(1000);
    await stopAll(s);
    const claims = source.counts.claim ?? 0;
    assert.ok(claims >= 2 && claims <= 7, `${claims} claims`);
    const line = log.lines.find((l) => l.message === 'The claim failed.');
    assert.equal(line?.level, 'warn');
    assert.match(line!.fields.error!, /injected claim connection failure/);
    assert.equal(line!.fields.source, 's');
  }));

test('PULL-35 the handler transaction only runs statements, and only while the handler runs', () =>
  withDb('txonly', async (db) => {
    await db.insert([{ ref: 'a', correlation_id: 'corr-a' }]);
    const log = captureLogger();
    let kept: HandlerTransaction | undefined;
    const s = start(db, { logger: log }, async (m, tx) => {
      assert.deepEqual(Object.keys(tx), ['query']);
      assert.ok(Object.isFrozen(tx));
      kept = tx;
      await insertApp(m, tx);
    });
    await waitFor('processed', async () => (await state(db, 'a')) === 'processed');
    await stopAll(s);
    await assert.rejects(kept!.query('SELECT 1'), /The handler transaction is over/);
    const processed = log.lines.find((l) => l.message === 'The message was processed.');
    assert.equal(processed?.level, 'debug');
    assert.deepEqual(processed?.fields, { source: 's', messageId: db.id('a'), attempt: 0, correlationId: 'corr-a' });
  }));
