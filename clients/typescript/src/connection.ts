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
  query(sql: string, params?: readonly unknown[], options?: { timeoutMs?: number }): Promise<QueryResult>;
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
