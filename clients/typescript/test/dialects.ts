// Test support for the SQLite and MySQL/MariaDB contract cases: a file database (SQLite, in a
// temporary folder) or a database `qb_clients_ts_<hex>` (MariaDB on 127.0.0.1:3306, or
// QUEUEBOX_TEST_MYSQL_URL) per test, created from clients/contract/fixtures/<dialect>.sql.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import assert from 'node:assert/strict';
import { createBatchWorker, createWorker, fromMysql, fromSqlite, type ConnectionSource, type HandlerTransaction, type InboxBatchHandler, type InboxHandler, type InboxMessage, type WorkerOptions } from '../src/index.js';
import { contractFile, DEFAULT_NAMES, schemaOf, sleep, waitFor, type Names } from './helpers.js';

export type Kind = 'sqlite' | 'mysql';

export const MYSQL_URL = process.env.QUEUEBOX_TEST_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306';

export interface NewRow {
  ref: string;
  [column: string]: unknown;
}

export interface Snap {
  state: string;
  attempt: number;
  claimToken: string | null;
  leaseSet: boolean;
  lastError: string | null;
  processedSet: boolean;
  scheduledInMs: number;
  createdAt: Date;
}

/** The fixture's statements: comment lines out, one statement per `;` at a line end. */
function statements(script: string): string[] {
  return script
    .split('\n')
    .filter((l) => !l.trimStart().startsWith('--'))
    .join('\n')
    .split(';\n')
    .map((s) => s.trim().replace(/;$/, '').trim())
    .filter((s) => s !== '');
}

export class DialectDb {
  readonly ids = new Map<string, string>();
  readonly workers: { stop(): Promise<void> }[] = [];
  private readonly tag = randomBytes(6).toString('hex');
  private index = 0;
  private sqlite?: Database.Database;
  private dir?: string;
  private pool?: mysql.Pool;
  private database?: string;

  private constructor(
    readonly kind: Kind,
    readonly names: Names,
  ) {}

  static async create(kind: Kind, names: Names = DEFAULT_NAMES): Promise<DialectDb> {
    const db = new DialectDb(kind, names);
    const script = contractFile(`fixtures/${kind}.sql`).replace(/\{([a-z_]+)\}/g, (_, n: string) => (names as Record<string, string>)[n]!);
    if (kind === 'sqlite') {
      db.dir = mkdtempSync(join(tmpdir(), 'qb_clients_ts_'));
      db.sqlite = new Database(join(db.dir, 'inbox.db'));
      db.sqlite.pragma('busy_timeout = 10000');
      for (const s of statements(script)) db.sqlite.exec(s);
    } else {
      const url = new URL(MYSQL_URL);
      const base = { host: url.hostname, port: Number(url.port || 3306), user: decodeURIComponent(url.username || 'root'), password: decodeURIComponent(url.password) };
      db.database = `qb_clients_ts_${db.tag}`;
      const admin = await mysql.createConnection(base);
      await admin.query(`CREATE DATABASE \`${db.database}\``);
      await admin.end();
      db.pool = mysql.createPool({ ...base, database: db.database, connectionLimit: 12 });
      for (const s of statements(script)) await db.pool.query(s);
    }
    return db;
  }

  source(): ConnectionSource {
    return this.kind === 'sqlite' ? fromSqlite(this.sqlite!) : fromMysql(this.pool!);
  }

  /** The stored source name. MySQL's claim lock is a named lock of the whole server
   * (`queuebox_pull:` + SHA-256 of `<table>:<source>`), so tests running at the same time use
   * their own source names there. */
  sourceName(source: string): string {
    return this.kind === 'mysql' ? `${source}_${this.tag}` : source;
  }

  q(name: keyof Names): string {
    const n = this.names[name];
    return this.kind === 'mysql' ? `\`${n}\`` : `"${n}"`;
  }

  /** The database clock plus `?` milliseconds (PULL-7). */
  nowPlus(): string {
    return this.kind === 'sqlite'
      ? "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', ? / 1000.0))"
      : 'UTC_TIMESTAMP(6) + INTERVAL ? * 1000 MICROSECOND';
  }

  async all(sql: string, params: unknown[] = []): Promise<Record<string, unknown>[]> {
    if (this.sqlite) return this.sqlite.prepare(sql).all(...params) as Record<string, unknown>[];
    const [rows] = await this.pool!.query(sql, params);
    return rows as Record<string, unknown>[];
  }

  async run(sql: string, params: unknown[] = []): Promise<number> {
    if (this.sqlite) return this.sqlite.prepare(sql).run(...params).changes;
    const [r] = await this.pool!.query(sql, params);
    return (r as { affectedRows: number }).affectedRows;
  }

  async insert(rows: NewRow[]): Promise<void> {
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
        scheduled_at: -1000,
        created_at: -60000 + i,
        ...spec,
      };
      delete row.ref;
      row.source = this.sourceName(String(row.source));
      this.ids.set(spec.ref, row.id as string);
      const cols: string[] = [];
      const vals: string[] = [];
      const params: unknown[] = [];
      for (const [k, v] of Object.entries(row)) {
        cols.push(this.q(k as keyof Names));
        if (k === 'scheduled_at' || k === 'created_at') vals.push(this.nowPlus());
        else vals.push('?');
        params.push(k === 'payload' || k === 'headers' ? JSON.stringify(v) : v);
      }
      await this.run(`INSERT INTO ${this.q('inbox')} (${cols.join(', ')}) VALUES (${vals.join(', ')})`, params);
    }
  }

  id(ref: string): string {
    return this.ids.get(ref)!;
  }

  async row(ref: string): Promise<Snap> {
    const ahead =
      this.kind === 'sqlite'
        ? `CAST((julianday(${this.q('scheduled_at')}) - julianday('now')) * 86400000 AS INTEGER)`
        : `TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), ${this.q('scheduled_at')}) DIV 1000`;
    const created = this.kind === 'sqlite' ? this.q('created_at') : `DATE_FORMAT(${this.q('created_at')}, '%Y-%m-%dT%H:%i:%s.%fZ')`;
    const [r] = await this.all(
      `SELECT ${this.q('state')} AS st, ${this.q('attempt')} AS att, ${this.q('claim_token')} AS tok,
              ${this.q('lease_expires_at')} IS NOT NULL AS lease, ${this.q('last_error')} AS err,
              ${this.q('processed_at')} IS NOT NULL AS done, ${ahead} AS ahead, ${created} AS created
         FROM ${this.q('inbox')} WHERE ${this.q('id')} = ?`,
      [this.id(ref)],
    );
    return {
      state: String(r!.st),
      attempt: Number(r!.att),
      claimToken: (r!.tok as string | null) ?? null,
      leaseSet: Number(r!.lease) === 1,
      lastError: (r!.err as string | null) ?? null,
      processedSet: Number(r!.done) === 1,
      scheduledInMs: Number(r!.ahead),
      createdAt: new Date(String(r!.created)),
    };
  }

  async states(): Promise<string[]> {
    const rows = await this.all(`SELECT ${this.q('state')} AS st FROM ${this.q('inbox')} ORDER BY 1`);
    return rows.map((r) => String(r.st));
  }

  async appRows(ref: string): Promise<number> {
    const [r] = await this.all('SELECT count(*) AS n FROM app_rows WHERE message_id = ?', [this.id(ref)]);
    return Number(r!.n);
  }

  /** The thief: a new token and a 600 s lease, written directly. */
  async steal(ref: string): Promise<string> {
    const token = randomUUID();
    await this.run(`UPDATE ${this.q('inbox')} SET ${this.q('claim_token')} = ?, ${this.q('lease_expires_at')} = ${this.nowPlus()} WHERE ${this.q('id')} = ?`, [
      token,
      600000,
      this.id(ref),
    ]);
    return token;
  }

  /** Holds the claim lock from an outside session: the named lock (MySQL), BEGIN IMMEDIATE (SQLite). */
  async holdClaimLock(): Promise<() => Promise<void>> {
    const lock = `CONCAT('queuebox_pull:', LEFT(SHA2(CONCAT('${this.names.inbox}', ':', ?), 256), 40))`;
    if (this.kind === 'mysql') {
      const conn = await this.pool!.getConnection();
      const [rows] = await conn.query(`SELECT GET_LOCK(${lock}, 0) AS got`, [this.sourceName('s')]);
      if (Number((rows as { got: number }[])[0]!.got) !== 1) throw new Error('the outside session did not get the lock');
      return async () => {
        await conn.query(`SELECT RELEASE_LOCK(${lock})`, [this.sourceName('s')]);
        conn.release();
      };
    }
    const holder = new Database(this.sqlite!.name);
    holder.exec('BEGIN IMMEDIATE');
    return async () => {
      holder.exec('ROLLBACK');
      holder.close();
    };
  }

  async close(): Promise<void> {
    const stopped = Promise.all(this.workers.map((w) => w.stop().catch(() => undefined)));
    await Promise.race([stopped, sleep(15000)]);
    if (this.sqlite) {
      this.sqlite.close();
      rmSync(this.dir!, { recursive: true, force: true });
    } else {
      await this.pool!.query(`DROP DATABASE IF EXISTS \`${this.database}\``).catch(() => undefined);
      await this.pool!.end().catch(() => undefined);
    }
  }
}

export interface Running {
  worker: ReturnType<typeof createWorker>;
  done: Promise<void>;
}

/** Starts a worker on source `s` (poll 50 ms unless given). */
export function run(db: DialectDb, options: Partial<WorkerOptions>, handler: InboxHandler, source?: ConnectionSource): Running {
  const worker = createWorker(
    source ?? db.source(),
    { source: db.sourceName('s'), pollIntervalMs: 50, schema: schemaOf(db.names), ...options },
    handler,
  );
  db.workers.push(worker);
  return { worker, done: worker.run() };
}

/** Starts a worker with the batch handler on source `s` (poll 50 ms unless given). */
export function runBatched(db: DialectDb, options: Partial<WorkerOptions>, handler: InboxBatchHandler): Running {
  const worker = createBatchWorker(db.source(), { source: db.sourceName('s'), pollIntervalMs: 50, schema: schemaOf(db.names), ...options }, handler);
  db.workers.push(worker);
  return { worker, done: worker.run() };
}

export async function withDialect(kind: Kind, body: (db: DialectDb) => Promise<void>, names?: Names): Promise<void> {
  const db = await DialectDb.create(kind, names);
  try {
    await body(db);
  } finally {
    await db.close();
  }
}

export const insertApp = async (m: InboxMessage, tx: HandlerTransaction): Promise<void> =>
  void (await tx.query('INSERT INTO app_rows (message_id) VALUES (?)', [m.id]));

export async function stopAll(...started: Running[]): Promise<void> {
  await Promise.all(started.map((s) => s.worker.stop()));
  await Promise.all(started.map((s) => s.done));
}

export async function c2(db: DialectDb): Promise<void> {
  await db.insert([{ ref: 'a' }]);
  const s = run(db, {}, insertApp);
  await waitFor('processed', async () => (await db.row('a')).state === 'processed');
  await stopAll(s);
  const r = await db.row('a');
  assert.equal(await db.appRows('a'), 1);
  assert.ok(r.processedSet && r.claimToken === null && !r.leaseSet);
}

export async function c3(db: DialectDb): Promise<void> {
  await db.insert([{ ref: 'a' }]);
  const s = run(db, {}, async (m, tx) => {
    await insertApp(m, tx);
    throw new Error('handler failed');
  });
  await waitFor('retried', async () => (await db.row('a')).attempt === 1);
  await stopAll(s);
  assert.equal(await db.appRows('a'), 0);
  assert.equal((await db.row('a')).state, 'pending');
}

