// Test support: per-test schemas from clients/contract/fixtures/postgresql.sql (contract README).
import { readFileSync } from 'node:fs';
import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { fromPg, type ConnectionPurpose, type ConnectionSource, type LogFields, type Logger } from '../src/index.js';
import { COLUMNS, type ColumnName } from '../src/options.js';

export const CONTRACT_DIR = new URL('../../../contract/', import.meta.url);
export const PACKAGE_DIR = new URL('../../', import.meta.url);
export const PG_URL = process.env.QUEUEBOX_TEST_PG_URL ?? 'postgres://postgres:test@127.0.0.1:5432/test';

export function contractFile(path: string): string {
  return readFileSync(new URL(path, CONTRACT_DIR), 'utf8');
}

export type Names = Record<'inbox' | ColumnName, string>;
export const DEFAULT_NAMES: Names = Object.fromEntries([['inbox', 'inbox'], ...COLUMNS.map((c) => [c, c])]) as Names;
export function prefixedNames(table: string, prefix: string): Names {
  return Object.fromEntries([['inbox', table], ...COLUMNS.map((c) => [c, prefix + c])]) as Names;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function waitFor(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 15000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return;
    await sleep(25);
  }
  throw new Error(`timed out waiting for: ${what}`);
}

export interface RowSpec {
  ref: string;
  [column: string]: unknown;
}

/** One isolated schema with the fixture tables, plus a pool whose search_path is that schema. */
export class TestDb {
  readonly schema: string;
  readonly names: Names;
  pool!: pg.Pool;
  admin!: pg.Client;
  readonly ids = new Map<string, string>();
  /** Workers started on this database; close() stops any still running. */
  readonly workers: { stop(): Promise<void> }[] = [];
  private index = 0;

  constructor(tag: string, names: Names = DEFAULT_NAMES) {
    this.schema = `qb_ts_${tag.toLowerCase().replace(/[^a-z0-9]/g, '')}_${randomBytes(4).toString('hex')}`;
    this.names = names;
  }

  static async create(tag: string, names: Names = DEFAULT_NAMES, poolSize = 12): Promise<TestDb> {
    const db = new TestDb(tag, names);
    db.admin = new pg.Client({ connectionString: PG_URL });
    await db.admin.connect();
    const fixture = contractFile('fixtures/postgresql.sql')
      .split('\n')
      .filter((l) => !l.trimStart().startsWith('--'))
      .join('\n')
      .replace(/\{([a-z_]+)\}/g, (_, n: string) => (n === 'schema' ? db.schema : (names as Record<string, string>)[n]!));
    await db.admin.query(fixture);
    await db.admin.query(`SET search_path TO "${db.schema}"`);
    db.pool = new pg.Pool({ connectionString: PG_URL, max: poolSize, options: `-c search_path=${db.schema}` });
    return db;
  }

  source(): ConnectionSource {
    return fromPg(this.pool);
  }

  q(name: ColumnName | 'inbox'): string {
    return `"${this.names[name]}"`;
  }

  /** Inserts rows with the contract defaults (cases.json `defaults.row`). Times relative to the DB clock. */
  async insert(rows: RowSpec[]): Promise<void> {
    for (const spec of rows) {
      const i = this.index++;
      const row: Record<string, unknown> = {
        id: randomUUID(),
        source: 's',
        consumption: 'pull',
        state: 'pending',
        attempt: 0,
        payload: {},
        headers: {},
        idempotency_key: spec.ref,
        scheduled_at: '-1s',
        created_at: `${-60000 + i}ms`,
        ...spec,
      };
      delete row.ref;
      this.ids.set(spec.ref, row.id as string);
      const cols: string[] = [];
      const vals: string[] = [];
      const params: unknown[] = [];
      for (const [k, v] of Object.entries(row)) {
        cols.push(this.q(k as ColumnName));
        const rel = typeof v === 'string' && /^[+-]\d+(ms|s)$/.test(v) && k.endsWith('_at');
        if (rel) {
          const ms = v.endsWith('ms') ? Number(v.slice(0, -2)) : Number(v.slice(0, -1)) * 1000;
          params.push(ms);
          vals.push(`clock_timestamp() + $${params.length}::int8 * INTERVAL '1 millisecond'`);
        } else if (k === 'payload' || k === 'headers') {
          params.push(JSON.stringify(v));
          vals.push(`$${params.length}::jsonb`);
        } else {
          params.push(v);
          vals.push(`$${params.length}`);
        }
      }
      await this.admin.query(`INSERT INTO ${this.q('inbox')} (${cols.join(', ')}) VALUES (${vals.join(', ')})`, params);
    }
  }

  id(ref: string): string {
    return this.ids.get(ref)!;
  }

  /** The row with default column names as keys. */
  async row(ref: string): Promise<Record<string, any>> {
    const sel = Object.entries(this.names)
      .filter(([k]) => k !== 'inbox')
      .map(([k, v]) => `"${v}" AS "${k}"`)
      .join(', ');
    const r = await this.admin.query(`SELECT ${sel} FROM ${this.q('inbox')} WHERE ${this.q('id')} = $1`, [this.id(ref)]);
    return r.rows[0];
  }

  async appRows(messageRef: string): Promise<number> {
    const r = await this.admin.query('SELECT count(*)::int AS n FROM app_rows WHERE message_id = $1', [this.id(messageRef)]);
    return r.rows[0].n;
  }

  /** The thief: takes the row with a new token and a 600 s lease. */
  async steal(ref: string): Promise<string> {
    const token = randomUUID();
    await this.admin.query(
      `UPDATE ${this.q('inbox')} SET ${this.q('state')} = 'processing', ${this.q('claim_token')} = $1, ${this.q('lease_expires_at')} = clock_timestamp() + interval '600 s' WHERE ${this.q('id')} = $2`,
      [token, this.id(ref)],
    );
    return token;
  }

  async close(): Promise<void> {
    const stopped = Promise.all(this.workers.map((w) => w.stop().catch(() => undefined)));
    await Promise.race([stopped, sleep(15000)]);
    await Promise.race([this.pool.end(), sleep(5000)]).catch(() => undefined);
    await this.admin.query(`DROP SCHEMA IF EXISTS "${this.schema}" CASCADE`).catch(() => undefined);
    await this.admin.end().catch(() => undefined);
  }
}

export interface Line {
  level: string;
  message: string;
  fields: LogFields;
}

export function captureLogger(): Logger & { lines: Line[]; has(message: string): boolean } {
  const lines: Line[] = [];
  const at = (level: string) => (message: string, fields: LogFields) => void lines.push({ level, message, fields });
  return {
    lines,
    has: (message: string) => lines.some((l) => l.message === message),
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
  };
}

/** A connection source that can fail connections by purpose, and counts them. */
export function faultySource(
  inner: ConnectionSource,
  fail: (purpose: ConnectionPurpose) => boolean,
): ConnectionSource & { counts: Record<string, number> } {
  const counts: Record<string, number> = {};
  return {
    dialect: inner.dialect,
    counts,
    async connect(purpose) {
      counts[purpose] = (counts[purpose] ?? 0) + 1;
      if (fail(purpose)) throw new Error(`injected ${purpose} connection failure`);
      return inner.connect(purpose);
    },
  };
}

import { createWorker, type InboxHandler, type InboxWorker, type WorkerOptions } from '../src/index.js';

export interface Started {
  worker: InboxWorker;
  done: Promise<void>;
}

/** Starts a worker on source `s` (poll 100 ms unless given). */
export function start(db: TestDb, options: Partial<WorkerOptions>, handler: InboxHandler, source?: ConnectionSource): Started {
  const worker = createWorker(source ?? db.source(), { source: 's', pollIntervalMs: 100, schema: schemaOf(db.names), ...options }, handler);
  db.workers.push(worker);
  return { worker, done: worker.run() };
}

export function schemaOf(names: Names): WorkerOptions['schema'] {
  const columns = Object.fromEntries(Object.entries(names).filter(([k]) => k !== 'inbox'));
  return { table: names.inbox, columns };
}

export async function withDb(tag: string, body: (db: TestDb) => Promise<void>, names?: Names): Promise<void> {
  const db = await TestDb.create(tag, names);
  try {
    await body(db);
  } finally {
    await db.close();
  }
}

/** Stops every worker and waits for each run to return. */
export async function stopAll(...started: Started[]): Promise<void> {
  await Promise.all(started.map((s) => s.worker.stop()));
  await Promise.all(started.map((s) => s.done));
}
