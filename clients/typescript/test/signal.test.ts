// run({ signal }): aborting the signal is a stop request (PULL-48 through an AbortSignal).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createWorker } from '../src/index.js';
import { faultySource, schemaOf, sleep, waitFor, withDb } from './helpers.js';

test('run({ signal }) with an aborted signal returns at once and claims nothing', () =>
  withDb('sig1', async (db) => {
    await db.insert([{ ref: 'a' }]);
    const source = faultySource(db.source(), () => false);
    const worker = createWorker(source, { source: 's', pollIntervalMs: 50, schema: schemaOf(db.names) }, async () => {});
    db.workers.push(worker);
    await worker.run({ signal: AbortSignal.abort() });
    assert.deepEqual(source.counts, {});
    assert.equal((await db.row('a')).state, 'pending');
  }));

test('aborting the run signal stops the worker gracefully: the running handler completes', () =>
  withDb('sig2', async (db) => {
    await db.insert([{ ref: 'a' }, { ref: 'b' }]);
    const source = faultySource(db.source(), () => false);
    const controller = new AbortController();
    let started = 0;
    const worker = createWorker(source, { source: 's', batchSize: 1, pollIntervalMs: 50, schema: schemaOf(db.names) }, async () => {
      started++;
      await sleep(300);
    });
    db.workers.push(worker);
    const done = worker.run({ signal: controller.signal });
    await waitFor('the first handler', () => started === 1);
    controller.abort();
    await done;
    const claims = source.counts.claim;
    assert.equal(started, 1, 'no handler starts after the abort');
    assert.equal((await db.row('a')).state, 'processed', 'the running handler finished within the grace');
    assert.equal((await db.row('b')).state, 'pending');
    await sleep(200);
    assert.equal(source.counts.claim, claims, 'no claim after run returned');
  }));
