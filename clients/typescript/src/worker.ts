// The worker loop (pull.md §7, PULL-34..53).
import { randomUUID } from 'node:crypto';
import type { ConnectionSource, HandlerTransaction, InboxConnection } from './connection.js';
import type { LogFields, LogLevel } from './logger.js';
import type { InboxMessage, JsonValue } from './message.js';
import { resolveOptions, type ResolvedOptions, type WorkerOptions } from './options.js';
import { clampMs, type FailureAction } from './policy.js';
import { redactedErrorText } from './redact.js';
import { bind, renderDialect, type DialectStatements } from './sql.js';

/**
 * The application's handler. It runs inside the handler transaction: write through `tx` and
 * return to complete the message (the completion commits with the writes); throw to fail it.
 * `signal` aborts when the lease is lost or the shutdown grace expires. Never commit or roll
 * back yourself.
 */
export type InboxHandler = (message: InboxMessage, tx: HandlerTransaction, signal: AbortSignal) => Promise<void> | void;

/**
 * The opt-in batch handler (`createBatchWorker`): every message of one claim (up to `batchSize`,
 * at most one per aggregate, in claim order) in one handler transaction. Return to complete them
 * all together in one fenced statement; throw to fail each of them by the retry policy.
 * `signal` aborts when any message's lease is lost or the shutdown grace expires.
 */
export type InboxBatchHandler = (
  messages: readonly InboxMessage[],
  tx: HandlerTransaction,
  signal: AbortSignal,
) => Promise<void> | void;

/** What `run` accepts. */
export interface RunOptions {
  /** Aborting it is a stop request: the same as calling `stop()` (already aborted: run returns at once). */
  signal?: AbortSignal;
}

/** Node timers cap at 2^31 - 1 ms. */
const MAX_TIMER_MS = 2147483647;

/** The claim's client-side timeout (PULL-20). */
export const CLAIM_TIMEOUT_MS = 30000;

/** `min(max(3 × batch, 50), 500)` (PULL-14). */
export function candLimit(batch: number): number {
  return Math.min(Math.max(3 * batch, 50), 500);
}

/** `max(1 ms, floor(leaseMs / 3))` (PULL-43). */
export function renewalIntervalMs(leaseMs: number): number {
  return Math.max(1, Math.floor(leaseMs / 3));
}

interface Claimed {
  message: InboxMessage;
  token: string;
  scheduledAt: Date;
  lost: boolean;
  started: boolean;
  abort: AbortController;
  renewStop: () => Promise<void>;
}

/** A cancellable sleep; `wake()` ends it early. */
class Sleeper {
  private timer: NodeJS.Timeout | undefined;
  private resolve: (() => void) | undefined;
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.resolve = resolve;
      this.timer = setTimeout(() => this.wake(), Math.min(ms, MAX_TIMER_MS));
    });
  }
  wake(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    const r = this.resolve;
    this.resolve = undefined;
    r?.();
  }
}

/**
 * A pull worker for one source. Build it with `createWorker`; `run()` loops until `stop()`.
 */
export class InboxWorker {
  private readonly o: ResolvedOptions;
  private readonly sql: DialectStatements;
  private readonly dialect: 'postgresql' | 'mysql' | 'sqlite';
  private stopping = false;
  private graceExpired = false;
  private running: Promise<void> | undefined;
  private readonly poll = new Sleeper();
  private graceTimer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<Claimed>();
  private readonly handler: InboxHandler;
  private readonly batchHandler: InboxBatchHandler | undefined;

  constructor(
    private readonly connections: ConnectionSource,
    options: WorkerOptions,
    handler: InboxHandler | { batch: InboxBatchHandler },
  ) {
    this.o = resolveOptions(options);
    // The dialect option, or the connection source's when the option is not given.
    const dialect = options.dialect ?? connections.dialect ?? 'postgresql';
    if (connections.dialect !== undefined && connections.dialect !== dialect) {
      throw new Error(`The dialect ${dialect} does not match the connection source, which is ${connections.dialect}.`);
    }
    if (dialect !== 'postgresql' && dialect !== 'mysql' && dialect !== 'sqlite') {
      throw new Error(`The dialect ${dialect} is not supported by this version of the client yet.`);
    }
    if (typeof handler === 'function') {
      this.handler = handler;
    } else if (handler !== null && typeof handler === 'object' && typeof handler.batch === 'function') {
      this.batchHandler = handler.batch;
      this.handler = async () => undefined;
    } else {
      throw new TypeError('The handler must be a function.');
    }
    this.dialect = dialect;
    this.o.dialect = dialect;
    if (dialect === 'sqlite') {
      // One row at a time: SQLite's single write lock would make a second claimed row wait for
      // the first row's handler (PULL-28).
      this.o.batchSize = 1;
      this.o.maxConcurrency = 1;
    }
    this.sql = renderDialect(dialect, this.o.names);
  }

  /**
   * Runs the loop until stop() or until `signal` aborts; resolves (without error) once every
   * handler has returned. A second call while running returns the same promise.
   */
  run(options: RunOptions = {}): Promise<void> {
    const { signal } = options;
    // Before the loop starts, so an aborted signal claims nothing.
    if (signal?.aborted) void this.stop();
    this.running ??= this.loop();
    if (signal !== undefined && !signal.aborted) {
      const onAbort = () => void this.stop();
      signal.addEventListener('abort', onAbort, { once: true });
      const forget = () => signal.removeEventListener('abort', onAbort);
      this.running.then(forget, forget);
    }
    return this.running;
  }

  /**
   * Stops claiming, abandons claimed rows whose handler has not started, and gives running
   * handlers `shutdownGraceMs` before aborting them. Idempotent. Resolves when run() has returned.
   */
  stop(): Promise<void> {
    if (!this.stopping) {
      this.stopping = true;
      this.poll.wake();
      this.graceTimer = setTimeout(() => this.expireGrace(), Math.min(this.o.shutdownGraceMs, MAX_TIMER_MS));
      this.graceTimer.unref?.();
    }
    return this.running ? this.running.then(() => undefined) : Promise.resolve();
  }

  private expireGrace(): void {
    this.graceExpired = true;
    for (const c of this.inFlight) c.abort.abort(new Error('The shutdown grace expired.'));
  }

  private log(level: LogLevel, message: string, fields: LogFields): void {
    const logger = this.o.logger;
    if (!logger) return;
    try {
      logger[level]?.call(logger, message, fields);
    } catch {
      // A failing logger never breaks the worker.
    }
  }

  private fields(m?: InboxMessage, error?: unknown): LogFields {
    const f: LogFields = { source: this.o.source };
    if (m) {
      f.messageId = m.id;
      f.attempt = m.attempt;
      if (m.correlationId !== null) f.correlationId = m.correlationId;
    }
    if (error !== undefined) f.error = redactedErrorText(error);
    return f;
  }

  private async loop(): Promise<void> {
    try {
      while (!this.stopping) {
        let batch: Claimed[];
        try {
          batch = await this.claim();
        } catch (error) {
          this.log('warn', 'The claim failed.', this.fields(undefined, error));
          if (!this.stopping) await this.poll.sleep(this.o.pollIntervalMs);
          continue;
        }
        if (batch.length === 0) {
          if (!this.stopping) await this.poll.sleep(this.o.pollIntervalMs);
          continue;
        }
        if (this.batchHandler !== undefined) await this.runWholeBatch(batch, this.batchHandler);
        else await this.runBatch(batch);
      }
    } finally {
      if (this.graceTimer !== undefined) clearTimeout(this.graceTimer);
    }
  }

  private async claim(): Promise<Claimed[]> {
    const token = randomUUID();
    const conn = await this.connections.connect('claim');
    let broken = false;
    let rows: Record<string, unknown>[];
    const batch = this.o.batchSize;
    const values = { source: this.o.source, batch, lease_ms: clampMs(this.o.leaseMs), cand_limit: candLimit(batch), token };
    const timeout = { timeoutMs: CLAIM_TIMEOUT_MS, jsonText: true };
    try {
      if (this.sql.mysql) {
        rows = await this.claimMysql(conn, values);
      } else {
        // SQLite's adapter begins with BEGIN IMMEDIATE: the write lock for the claim (§5.4).
        await conn.begin();
        const { text, params } = bind(this.sql.claim, values);
        const result = await conn.query(text, params, timeout);
        await conn.commit();
        rows = result.rows;
      }
    } catch (error) {
      broken = true;
      throw error;
    } finally {
      await conn.release(broken).catch(() => undefined);
    }
    const claimed = rows.map((row) => this.toClaimed(row, token));
    claimed.sort(
      (a, b) =>
        a.scheduledAt.getTime() - b.scheduledAt.getTime() ||
        a.message.createdAt.getTime() - b.message.createdAt.getTime() ||
        (a.message.id < b.message.id ? -1 : a.message.id > b.message.id ? 1 : 0),
    );
    // Renewal starts as soon as the claim commits (PULL-39).
    if (claimed.length > 0) this.startRenewal(claimed);
    return claimed;
  }

  /**
   * The seven steps of pull.md §5.3 on one connection. A failure once the lock is held throws,
   * and the caller then releases the connection as broken (closed, not pooled), which releases
   * the named lock (PULL-20).
   */
  private async claimMysql(conn: InboxConnection, values: Record<string, unknown>): Promise<Record<string, unknown>[]> {
    const m = this.sql.mysql!;
    const timeout = { timeoutMs: CLAIM_TIMEOUT_MS, jsonText: true };
    const lock = bind(m.lock, values);
    const locked = await conn.query(lock.text, lock.params, timeout);
    const got = locked.rows[0] === undefined ? undefined : Object.values(locked.rows[0])[0];
    if (Number(got) !== 1 || got === null) {
      throw new Error('inbox pull claim: GET_LOCK did not acquire the per-source claim lock');
    }
    await conn.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED', [], timeout);
    await conn.begin();
    const select = bind(this.sql.claim, values);
    const ids = (await conn.query(select.text, select.params, timeout)).rows.map((r) => Object.values(r)[0]);
    let rows: Record<string, unknown>[] = [];
    if (ids.length > 0) {
      const update = bind(m.update, values, ids);
      await conn.query(update.text, update.params, timeout);
      const fetch = bind(m.fetch, values, ids);
      rows = (await conn.query(fetch.text, fetch.params, timeout)).rows;
    }
    await conn.commit();
    const unlock = bind(m.unlock, values);
    await conn.query(unlock.text, unlock.params, timeout);
    return rows;
  }

  private toClaimed(row: Record<string, unknown>, token: string): Claimed {
    const n = this.o.names;
    const message: InboxMessage = Object.freeze({
      id: String(row[n.id]).toLowerCase(),
      source: String(row[n.source]),
      idempotencyKey: String(row[n.idempotency_key]),
      aggregateId: nullableText(row[n.aggregate_id]),
      eventType: nullableText(row[n.event_type]),
      payload: parsePayload(row[n.payload], this.dialect),
      attempt: Number(row[n.attempt]),
      correlationId: nullableText(row[n.correlation_id]),
      headers: Object.freeze(toHeaders(this.dialect === 'postgresql' ? row[n.headers] : parseJsonText(row[n.headers]))),
      createdAt: toDate(row[n.created_at]),
    });
    return {
      message,
      token,
      scheduledAt: toDate(row[n.scheduled_at]),
      lost: false,
      started: false,
      abort: new AbortController(),
      renewStop: async () => undefined,
    };
  }

  /**
   * Renewal for one batch (PULL-39, PULL-43, PULL-44): every max(1, floor(lease / 3)) ms, one
   * connection in autocommit mode renews each row of the batch that has no outcome yet. Returns
   * one stop function per row; stopping a row waits for its renewal statement in flight.
   */
  private startRenewal(batch: Claimed[]): void {
    // No renewal on SQLite: while the handler transaction holds the write lock no other
    // connection can take the row or renew it (PULL-28, PULL-39).
    if (this.dialect === 'sqlite') return;
    const active = new Set(batch);
    const sleeper = new Sleeper();
    const interval = renewalIntervalMs(this.o.leaseMs);
    let current: { row: Claimed; done: Promise<void> } | undefined;
    const renewOne = async (conn: InboxConnection, c: Claimed): Promise<void> => {
      try {
        const renew = bind(this.sql.renew, { lease_ms: clampMs(this.o.leaseMs), id: c.message.id, token: c.token });
        const result = await conn.query(renew.text, renew.params);
        if (result.rowCount !== 1) {
          active.delete(c);
          c.lost = true;
          this.log('warn', 'The lease was lost to another worker.', this.fields(c.message));
          c.abort.abort(new Error('The lease was lost to another worker.'));
        }
      } catch (error) {
        this.log('warn', 'The renewal failed.', this.fields(c.message, error));
        throw error;
      }
    };
    const loop = async (): Promise<void> => {
      while (active.size > 0) {
        await sleeper.sleep(interval);
        if (active.size === 0) break;
        let conn: InboxConnection | undefined;
        let broken = false;
        try {
          conn = await this.connections.connect('renew');
        } catch (error) {
          for (const c of active) this.log('warn', 'The renewal failed.', this.fields(c.message, error));
          continue;
        }
        try {
          for (const c of [...active]) {
            if (!active.has(c)) continue;
            const done = renewOne(conn, c).catch(() => {
              broken = true;
            });
            current = { row: c, done };
            await done;
            current = undefined;
            if (broken) break;
          }
        } finally {
          await conn.release(broken).catch(() => undefined);
        }
      }
    };
    const running = loop();
    for (const c of batch) {
      c.renewStop = async () => {
        active.delete(c);
        if (current?.row === c) await current.done;
        if (active.size === 0) {
          sleeper.wake();
          await running;
        }
      };
    }
  }

  private async runBatch(batch: Claimed[]): Promise<void> {
    const slots = Math.min(this.o.maxConcurrency, this.o.batchSize, batch.length);
    let next = 0;
    const slot = async (): Promise<void> => {
      while (next < batch.length) {
        const c = batch[next++]!;
        await this.processOne(c);
      }
    };
    const running: Promise<void>[] = [];
    for (let i = 0; i < slots; i++) running.push(slot());
    await Promise.all(running);
  }

  private async processOne(c: Claimed): Promise<void> {
    const m = c.message;
    if (this.stopping) {
      // PULL-48 step 2: a row whose handler has not started is abandoned.
      await c.renewStop();
      this.log('info', 'The shutdown abandoned the message, so it spends no attempt.', this.fields(m));
      return;
    }
    if (c.lost) {
      // PULL-39: a waiting row whose lease was lost is skipped.
      await c.renewStop();
      return;
    }
    c.started = true;
    this.inFlight.add(c);
    try {
      await this.handle(c);
    } finally {
      this.inFlight.delete(c);
      await c.renewStop();
    }
  }

  private async handle(c: Claimed): Promise<void> {
    const m = c.message;
    let conn: InboxConnection;
    try {
      conn = await this.connections.connect('handler');
    } catch (error) {
      this.log('error', 'The message was abandoned.', this.fields(m, error));
      return;
    }
    let broken = false;
    let retryFailure: { error: unknown } | undefined;
    try {
      try {
        await conn.begin();
      } catch (error) {
        broken = true;
        this.log('error', 'The message was abandoned.', this.fields(m, error));
        return;
      }
      if (this.graceExpired) c.abort.abort(new Error('The shutdown grace expired.'));
      let open = true;
      const tx: HandlerTransaction = Object.freeze({
        query: async (sql: string, params?: readonly unknown[]) => {
          if (!open) throw new Error('The handler transaction is over: the handler has returned.');
          return conn.query(sql, params ?? []);
        },
      });
      let failed = false;
      let failure: unknown;
      try {
        await this.handler(m, tx, c.abort.signal);
      } catch (error) {
        failed = true;
        failure = error;
      }
      open = false;
      // PULL-40 step 3: stop the renewal and wait for a renewal in flight.
      await c.renewStop();

      if (this.graceExpired) {
        await this.rollbackOrBreak(conn, m).catch(() => (broken = true));
        this.log('info', 'The shutdown abandoned the message, so it spends no attempt.', this.fields(m));
        return;
      }
      if (c.lost) {
        await this.rollbackOrBreak(conn, m).catch(() => (broken = true));
        if (failed) this.log('warn', 'The lease was lost, so nothing was written.', this.fields(m, failure));
        else this.log('warn', 'The lease was lost, so the work was rolled back.', this.fields(m));
        return;
      }
      if (failed) {
        try {
          await conn.rollback();
        } catch (error) {
          broken = true;
          this.log('error', 'The message was abandoned.', this.fields(m, error));
          return;
        }
        retryFailure = { error: failure };
      }
      // Success: Complete inside the handler transaction, under the fence.
      else try {
        const complete = bind(this.sql.complete, { id: m.id, token: c.token });
        const result = await conn.query(complete.text, complete.params);
        if (result.rowCount === 1) {
          await conn.commit();
          this.log('debug', 'The message was processed.', this.fields(m));
        } else {
          await conn.rollback();
          this.log('warn', 'The completion affected no row, so the work was rolled back.', this.fields(m));
        }
      } catch (error) {
        broken = true;
        this.log('error', 'The message was abandoned.', this.fields(m, error));
      }
    } finally {
      await conn.release(broken).catch(() => undefined);
    }
    if (retryFailure !== undefined) await this.fail(c, retryFailure.error);
  }

  /**
   * The batch handler: one transaction for the whole claim, one fenced completion for every row
   * (`complete-batch.sql`), committed only when it matched every row; else nothing is kept.
   */
  private async runWholeBatch(claimed: Claimed[], handler: InboxBatchHandler): Promise<void> {
    // One signal for the batch: any row's lost lease or the grace aborts the handler. Set
    // before the first renewal tick can run (no await since the claim returned).
    const abort = new AbortController();
    for (const c of claimed) c.abort = abort;
    const stopRenewals = () => Promise.all(claimed.map((c) => c.renewStop()));
    if (this.stopping) {
      await stopRenewals();
      for (const c of claimed) this.log('info', 'The shutdown abandoned the message, so it spends no attempt.', this.fields(c.message));
      return;
    }
    const batch = claimed.filter((c) => !c.lost);
    if (batch.length === 0) return;
    const messages = Object.freeze(batch.map((c) => c.message));
    const abandon = (error: unknown) => {
      for (const m of messages) this.log('error', 'The message was abandoned.', this.fields(m, error));
    };
    let conn: InboxConnection;
    try {
      conn = await this.connections.connect('handler');
    } catch (error) {
      await stopRenewals();
      abandon(error);
      return;
    }
    let broken = false;
    let failure: { error: unknown } | undefined;
    for (const c of batch) {
      c.started = true;
      this.inFlight.add(c);
    }
    try {
      try {
        await conn.begin();
      } catch (error) {
        broken = true;
        abandon(error);
        return;
      }
      if (this.graceExpired) abort.abort(new Error('The shutdown grace expired.'));
      let open = true;
      const tx: HandlerTransaction = Object.freeze({
        query: async (sql: string, params?: readonly unknown[]) => {
          if (!open) throw new Error('The handler transaction is over: the handler has returned.');
          return conn.query(sql, params ?? []);
        },
      });
      try {
        await handler(messages, tx, abort.signal);
      } catch (error) {
        failure = { error };
      }
      open = false;
      await stopRenewals();
      if (this.graceExpired) {
        failure = undefined;
        await conn.rollback().catch(() => (broken = true));
        for (const m of messages) this.log('info', 'The shutdown abandoned the message, so it spends no attempt.', this.fields(m));
        return;
      }
      const anyLost = batch.some((c) => c.lost);
      if (failure !== undefined || anyLost) {
        // Nothing of the work is kept. On failure, each row still owned then fails as a single
        // row would; after a success with a lost row, the owned rows return after their lease.
        try {
          await conn.rollback();
        } catch (error) {
          broken = true;
          failure = undefined;
          abandon(error);
          return;
        }
        for (const c of batch) {
          if (c.lost) {
            if (failure !== undefined) this.log('warn', 'The lease was lost, so nothing was written.', this.fields(c.message, failure.error));
            else this.log('warn', 'The lease was lost, so the work was rolled back.', this.fields(c.message));
          } else if (failure === undefined) {
            this.log('warn', 'Another message of the batch lost its lease, so the work was rolled back.', this.fields(c.message));
          }
        }
      } else try {
        // Every row of a batch comes from one claim call, so they share its token (PULL-13).
        const token = batch[0]!.token;
        const ids = batch.map((c) => c.message.id);
        // bind() fills an `ids` slot from its list: one value per id on MySQL (`:ids` expands),
        // one text on PostgreSQL (joined by ',') and SQLite (a JSON array).
        const list = this.dialect === 'mysql' ? ids : [this.dialect === 'sqlite' ? JSON.stringify(ids) : ids.join(',')];
        const complete = bind(this.sql.completeBatch, { token }, list);
        const result = await conn.query(complete.text, complete.params);
        if (result.rowCount === batch.length) {
          await conn.commit();
          for (const m of messages) this.log('debug', 'The message was processed.', this.fields(m));
        } else {
          await conn.rollback();
          for (const m of messages) {
            this.log('warn', 'The batch completion affected fewer rows than the batch, so the work was rolled back.', this.fields(m));
          }
        }
      } catch (error) {
        broken = true;
        abandon(error);
      }
    } finally {
      for (const c of batch) this.inFlight.delete(c);
      await conn.release(broken).catch(() => undefined);
    }
    if (failure !== undefined) {
      for (const c of batch) if (!c.lost) await this.fail(c, failure.error);
    }
  }

  private async rollbackOrBreak(conn: InboxConnection, _m: InboxMessage): Promise<void> {
    await conn.rollback();
  }

  /** Retry or Dead outside the rolled-back transaction (PULL-45/46). */
  private async fail(c: Claimed, failure: unknown): Promise<void> {
    const m = c.message;
    let action: FailureAction;
    try {
      action = this.o.retryPolicy(m, failure);
      if (action === null || typeof action !== 'object' || (action.kind !== 'retry' && action.kind !== 'dead')) {
        throw new TypeError('The retry policy returned no failure action.');
      }
    } catch (error) {
      this.log('error', 'The message was abandoned.', this.fields(m, error));
      return;
    }
    const text = redactedErrorText(failure);
    let conn: InboxConnection | undefined;
    let broken = false;
    try {
      conn = await this.connections.connect('failure');
      const write =
        action.kind === 'retry'
          ? bind(this.sql.retry, { delay_ms: clampMs(action.delayMs), error: text, id: m.id, token: c.token })
          : bind(this.sql.dead, { error: text, id: m.id, token: c.token });
      const result = await conn.query(write.text, write.params);
      const fields = this.fields(m);
      fields.error = text;
      if (result.rowCount !== 1) {
        this.log('warn', 'The failure changed nothing, because the claim was lost.', fields);
      } else if (action.kind === 'retry') {
        fields.delayMs = clampMs(action.delayMs);
        this.log('warn', 'The message retries.', fields);
      } else {
        this.log('error', 'The message reached the dead letter.', fields);
      }
    } catch (error) {
      broken = true;
      this.log('error', 'The message was abandoned.', this.fields(m, error));
    } finally {
      await conn?.release(broken).catch(() => undefined);
    }
  }
}

/**
 * Builds a worker with the opt-in batch handler: each claim's messages go to one handler call in
 * one transaction and complete together, or none does. `maxConcurrency` does not apply.
 */
export function createBatchWorker(connections: ConnectionSource, options: WorkerOptions, handler: InboxBatchHandler): InboxWorker {
  return new InboxWorker(connections, options, { batch: handler });
}

/** Builds a worker. Options are validated here, before any connection is opened (PULL-57). */
export function createWorker(connections: ConnectionSource, options: WorkerOptions, handler: InboxHandler): InboxWorker {
  return new InboxWorker(connections, options, handler);
}

function nullableText(v: unknown): string | null {
  return v === null || v === undefined ? null : String(v);
}

function toDate(v: unknown): Date {
  return v instanceof Date ? v : new Date(String(v));
}

function parsePayload(v: unknown, dialect: string): JsonValue {
  // PostgreSQL's jsonb arrives parsed by the driver: taken as is. SQLite and MySQL/MariaDB give
  // JSON text (the MySQL adapter keeps JSON columns as text), which is parsed (PULL-55).
  if (dialect !== 'postgresql') return parseJsonText(v) as JsonValue;
  return (v === undefined ? null : v) as JsonValue;
}

function parseJsonText(v: unknown): unknown {
  if (typeof v === 'string') return JSON.parse(v);
  if (Buffer.isBuffer(v)) return JSON.parse(v.toString('utf8'));
  return v === undefined ? null : v;
}

function toHeaders(v: unknown): Record<string, string> {
  const value = v;
  const out: Record<string, string> = {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return out;
  for (const [k, x] of Object.entries(value as Record<string, unknown>)) {
    out[k] = typeof x === 'string' ? x : JSON.stringify(x);
  }
  return out;
}
