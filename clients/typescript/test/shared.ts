// Scenarios shared by several cases.
import assert from 'node:assert/strict';
import type { HandlerTransaction, InboxMessage } from '../src/index.js';
import { start, stopAll, waitFor, type captureLogger, type TestDb } from './helpers.js';

export const insertApp = async (m: InboxMessage, tx: HandlerTransaction): Promise<void> =>
  void (await tx.query('INSERT INTO app_rows (message_id) VALUES ($1)', [m.id]));

export async function c3(db: TestDb, logger?: ReturnType<typeof captureLogger>): Promise<void> {
  await db.insert([{ ref: 'a' }]);
  const s = start(db, { logger }, async (m, tx) => {
    await insertApp(m, tx);
    throw new Error('handler failed');
  });
  await waitFor('retried', async () => (await db.row('a')).attempt === 1);
  await stopAll(s);
  assert.equal(await db.appRows('a'), 0);
  const r = await db.row('a');
  assert.notEqual(r.state, 'processed');
  assert.equal(r.state, 'pending');
}

