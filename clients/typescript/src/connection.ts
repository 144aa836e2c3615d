// The driver-neutral connection contract (pull.md PULL-73) and the pg adapter.
import type { Pool, PoolClient } from 'pg';

export interface QueryResult {
  rows: Record<string, unknown>[];
  /** Affected rows; null when the driver cannot tell (treated as a lost lease on Renew). */
  rowCount: number | null;
}

/** Why the worker asks for a connection. Lets a connection source (or a test) tell them apart. */
export type ConnectionPurpose = 'claim' | 'handler' | 'renew' | 'failure';

/** One connection lent to the library. */
export interface InboxConnection {
  /** `jsonText`: the worker's claim asks for JSON columns as text and times as UTC `Date`s. */
  query(sql: string, params?: readonly unknown[], options?: { timeoutMs?: number; jsonText?: boolean }): Promise<QueryResult>;
  begin(): Promise<void>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
  /** Returns the connection. With `broken`, it is closed instead of reused. Rolls back an open transaction. */
  release(broken?: boolean): Promise<void>;
}

/** Opens or lends a new connection on each call (never one shared connection, PULL-34). */
export interface ConnectionSource {
  readonly dialect: 'postgresql' | 'sqlserver' | 'mysql' | 'sqlite';
  connect(purpose: ConnectionPurpose): Promise<InboxConnection>;
}

/** What the handler sees of its transaction: it can only run statements (PULL-35, PULL-73). */
export interface HandlerTransaction {
  query(sql: string, params?: readonly unknown[]): Promise<QueryResult>;
}

class PgConnection implements InboxConnection {
  private inTransaction = false;
  private released = false;
  constructor(private readonly client: PoolClient) {}

  async query(sql: string, params: readonly unknown[] = [], options: { timeoutMs?: number } = {}): Promise<QueryResult> {
    const config: { text: string; values: unknown[]; query_timeout?: number } = { text: sql, values: [...params] };
    if (options.timeoutMs !== undefined) config.query_timeout = options.timeoutMs;
    const result = await this.client.query(config as never);
    return { rows: (result as { rows: Record<string, unknown>[] }).rows, rowCount: (result as { rowCount: number | null }).rowCount };
  }

  async begin(): Promise<void> {
    await this.client.query('BEGIN');
    this.inTransaction = true;
  }

  async commit(): Promise<void> {
    try {
      await this.client.query('COMMIT');
    } finally {
      this.inTransaction = false;
    }
  }

  async rollback(): Promise<void> {
    try {
      await this.client.query('ROLLBACK');
    } finally {
      this.inTransaction = false;
    }
  }

  async release(broken = false): Promise<void> {
    if (this.released) return;
    let destroy = broken;
    if (this.inTransaction && !destroy) {
      try {
        await this.rollback();
      } catch {
        destroy = true;
      }
    }
    this.released = true;
    this.client.release(destroy ? true : undefined);
  }
}

/**
 * The PostgreSQL adapter: a connection source over a `pg` Pool. Each call borrows a client;
 * release returns it (or destroys it when broken). Size the pool for
 * maxConcurrency handler transactions + renewals + one claim.
 */
export function fromPg(pool: Pool): ConnectionSource {
  return {
    dialect: 'postgresql',
    async connect(): Promise<InboxConnection> {
      return new PgConnection(await pool.connect());
    },
  };
}

/** The part of a better-sqlite3 `Database` the SQLite adapter uses (better-sqlite3 12). */
export interface SqliteDatabase {
  readonly name: string;
  readonly memory: boolean;
  prepare(sql: string): {
    readonly reader: boolean;
    all(...params: unknown[]): unknown[];
    run(...params: unknown[]): { changes: number };
  };
  pragma(source: string, options?: { simple?: boolean }): unknown;
  exec(sql: string): unknown;
  close(): unknown;
}

/** SQLite's busy timeout on every connection (pull.md §5.4, PULL-58). */
const SQLITE_BUSY_TIMEOUT_MS = 10000;

class SqliteConnection implements InboxConnection {
  private inTransaction = false;
  private released = false;
  constructor(private readonly db: SqliteDatabase) {}

  async query(sql: string, params: readonly unknown[] = []): Promise<QueryResult> {
    const statement = this.db.prepare(sql);
    if (statement.reader) {
      return { rows: statement.all(...params) as Record<string, unknown>[], rowCount: null };
    }
    return { rows: [], rowCount: statement.run(...params).changes };
  }

  async begin(): Promise<void> {
    // The write lock from the start: no other connection can take the row meanwhile (PULL-28).
    this.db.exec('BEGIN IMMEDIATE');
    this.inTransaction = true;
  }

  async commit(): Promise<void> {
    try {
      this.db.exec('COMMIT');
    } finally {
      this.inTransaction = false;
    }
  }

  async rollback(): Promise<void> {
    try {
      this.db.exec('ROLLBACK');
    } finally {
      this.inTransaction = false;
    }
  }

  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    // Closing a connection rolls back its open transaction.
    this.inTransaction = false;
    this.db.close();
  }
}

/**
 * The SQLite adapter: `database` is a better-sqlite3 (version 12) `Database` on the file that
 * holds the inbox table. Each connection the worker asks for is a new `Database` on the same
 * file (never the one given, PULL-34), with `busy_timeout = 10000`; the file must be in WAL
 * mode, as QueueBox creates it. better-sqlite3 is synchronous: a claim that waits for the write
 * lock blocks the event loop for up to the busy timeout.
 */
export function fromSqlite(database: SqliteDatabase): ConnectionSource {
  if (database.memory) {
    throw new Error('fromSqlite needs a database file: an in-memory database cannot be opened a second time.');
  }
  const Open = database.constructor as new (filename: string, options?: { fileMustExist?: boolean }) => SqliteDatabase;
  const filename = database.name;
  return {
    dialect: 'sqlite',
    async connect(): Promise<InboxConnection> {
      const db = new Open(filename, { fileMustExist: true });
      try {
        db.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
        const mode = String(db.pragma('journal_mode', { simple: true })).toLowerCase();
        if (mode !== 'wal') db.pragma('journal_mode = WAL');
      } catch (error) {
        db.close();
        throw error;
      }
      return new SqliteConnection(db);
    },
  };
}

/** The part of a mysql2/promise pool connection the MySQL adapter uses (mysql2 3). */
export interface MysqlPoolConnection {
  // `any`: mysql2's overloaded, generic `query` is assignable to no narrower structural type.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  query(options: any): Promise<any>;
  release(): void;
  destroy(): void;
}

/** The part of a mysql2/promise `Pool` the MySQL adapter uses. */
export interface MysqlPool {
  getConnection(): Promise<MysqlPoolConnection>;
}

interface MysqlField {
  type: string;
  string(): string | null;
}

/**
 * For the worker's claim: JSON stays text (the worker parses it, so a JSON string value is not
 * mistaken for text; MariaDB's JSON is a LONGTEXT, reported as BLOB, that mysql2 may parse), and
 * a DATETIME is read as UTC whatever the pool's `timezone` (schema.md SCH-3). The handler's own
 * statements get mysql2's defaults.
 */
function mysqlTypeCast(field: MysqlField, next: () => unknown): unknown {
  if (field.type === 'JSON' || field.type === 'BLOB') return field.string();
  if (field.type === 'DATETIME' || field.type === 'TIMESTAMP') {
    const text = field.string();
    return text === null ? null : new Date(text.replace(' ', 'T') + 'Z');
  }
  return next();
}

class MysqlConnection implements InboxConnection {
  private inTransaction = false;
  private released = false;
  constructor(private readonly conn: MysqlPoolConnection) {}

  async query(sql: string, params: readonly unknown[] = [], options: { jsonText?: boolean } = {}): Promise<QueryResult> {
    const query: { sql: string; values: unknown[]; typeCast?: unknown } = { sql, values: [...params] };
    if (options.jsonText) query.typeCast = mysqlTypeCast;
    const [result] = await this.conn.query(query);
    if (Array.isArray(result)) return { rows: result as Record<string, unknown>[], rowCount: null };
    // mysql2 connects with FOUND_ROWS by default: affectedRows counts the rows the fence matched (PULL-10).
    const header = result as { affectedRows?: number };
    return { rows: [], rowCount: typeof header.affectedRows === 'number' ? header.affectedRows : null };
  }

  async begin(): Promise<void> {
    this.inTransaction = true;
    await this.conn.query({ sql: 'START TRANSACTION' });
  }

  async commit(): Promise<void> {
    await this.conn.query({ sql: 'COMMIT' });
    this.inTransaction = false;
  }

  async rollback(): Promise<void> {
    try {
      await this.conn.query({ sql: 'ROLLBACK' });
    } finally {
      this.inTransaction = false;
    }
  }

  async release(broken = false): Promise<void> {
    if (this.released) return;
    this.released = true;
    // A connection inside a transaction, or after a failed claim that may hold the named lock,
    // is closed, not pooled: ending the session rolls back and releases the lock (PULL-20).
    if (broken || this.inTransaction) this.conn.destroy();
    else this.conn.release();
  }
}

/**
 * The MySQL 8 / MariaDB adapter: a mysql2 (version 3) promise pool on the database that holds
 * the inbox table. Keep mysql2's default `FOUND_ROWS` flag: the fence must count matched rows.
 */
export function fromMysql(pool: MysqlPool): ConnectionSource {
  return {
    dialect: 'mysql',
    async connect(): Promise<InboxConnection> {
      return new MysqlConnection(await pool.getConnection());
    },
  };
}
