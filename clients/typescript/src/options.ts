// Worker options, defaults and validation (pull.md §9, PULL-56..58; PULL-25 identifiers).
import { defaultRetryPolicy, type RetryPolicy } from './policy.js';
import type { Logger } from './logger.js';

export const COLUMNS = [
  'id',
  'source',
  'consumption',
  'state',
  'idempotency_key',
  'aggregate_id',
  'event_type',
  'payload',
  'headers',
  'correlation_id',
  'attempt',
  'scheduled_at',
  'created_at',
  'claim_token',
  'claimed_at',
  'lease_expires_at',
  'processed_at',
  'last_error',
] as const;
export type ColumnName = (typeof COLUMNS)[number];

/** Table and column names (PULL-5). Any name left out keeps its default. */
export interface InboxSchema {
  /** Table name. Default `inbox`. */
  table?: string;
  /** Column names by their default name, e.g. `{ claim_token: 'qb_claim_token' }`. */
  columns?: Partial<Record<ColumnName, string>>;
}

export type Dialect = 'postgresql' | 'sqlserver' | 'mysql' | 'sqlite';
export const DIALECTS: readonly Dialect[] = ['postgresql', 'sqlserver', 'mysql', 'sqlite'];

export interface WorkerOptions {
  /** The pull source to consume. Required: non-blank, at most 255 characters. */
  source: string;
  /** Rows per claim, 1 to 500. Default 10. */
  batchSize?: number;
  /** Lease in ms, 3 to 2147483647. Default 30000. Renewal runs every max(1, floor(lease / 3)) ms. */
  leaseMs?: number;
  /** Handlers running at once, at least 1 (effective: min(value, batchSize)). Default 1. */
  maxConcurrency?: number;
  /** Wait after an empty or failed claim, ms, greater than 0. Default 1000. */
  pollIntervalMs?: number;
  /** Time running handlers get after stop(), ms, 0 or more. Default 30000. */
  shutdownGraceMs?: number;
  /** SQL dialect. Default `postgresql`. */
  dialect?: Dialect;
  /** Table and column names. Default: the QueueBox names. */
  schema?: InboxSchema;
  /** Retry policy. Default: `defaultRetryPolicy()`. */
  retryPolicy?: RetryPolicy;
  /** Logger. Default: none (silent). */
  logger?: Logger;
}

export interface ResolvedOptions {
  source: string;
  batchSize: number;
  leaseMs: number;
  maxConcurrency: number;
  pollIntervalMs: number;
  shutdownGraceMs: number;
  dialect: Dialect;
  names: Record<'inbox' | ColumnName, string>;
  retryPolicy: RetryPolicy;
  logger: Logger | undefined;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** Thrown when options are invalid; `message` is the exact text of PULL-56. */
export class InboxOptionsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InboxOptionsError';
  }
}

function isNumber(v: unknown): v is number {
  return typeof v === 'number' && !Number.isNaN(v);
}

/** Validates options and fills defaults. Reports the first failing rule (PULL-57). */
export function resolveOptions(options: WorkerOptions): ResolvedOptions {
  const o = options ?? ({} as WorkerOptions);
  const source = o.source;
  if (typeof source !== 'string' || source.trim() === '' || [...source].length > 255) {
    throw new InboxOptionsError('The source is mandatory.');
  }
  const batchSize = o.batchSize ?? 10;
  if (!isNumber(batchSize) || !Number.isInteger(batchSize) || batchSize < 1 || batchSize > 500) {
    throw new InboxOptionsError('The batch size must be between 1 and 500.');
  }
  const leaseMs = o.leaseMs ?? 30000;
  if (!isNumber(leaseMs) || leaseMs < 3 || leaseMs > 2147483647) {
    throw new InboxOptionsError('The lease must be between 3 ms and 2147483647 ms.');
  }
  const maxConcurrency = o.maxConcurrency ?? 1;
  if (!isNumber(maxConcurrency) || !Number.isInteger(maxConcurrency) || maxConcurrency < 1) {
    throw new InboxOptionsError('The maximum concurrency must be at least 1.');
  }
  const pollIntervalMs = o.pollIntervalMs ?? 1000;
  if (!isNumber(pollIntervalMs) || !(pollIntervalMs > 0)) {
    throw new InboxOptionsError('The poll interval must be greater than 0.');
  }
  const shutdownGraceMs = o.shutdownGraceMs ?? 30000;
  if (!isNumber(shutdownGraceMs) || shutdownGraceMs < 0) {
    throw new InboxOptionsError('The shutdown grace must not be negative.');
  }
  const dialect = o.dialect ?? 'postgresql';
  if (!DIALECTS.includes(dialect)) {
    throw new InboxOptionsError(
      `The dialect ${String(dialect)} is unknown. Use postgresql, sqlserver, mysql or sqlite.`,
    );
  }
  const names = resolveNames(o.schema);
  return {
    source,
    batchSize,
    leaseMs: Math.floor(leaseMs),
    maxConcurrency: Math.min(maxConcurrency, batchSize),
    pollIntervalMs,
    shutdownGraceMs,
    dialect,
    names,
    retryPolicy: o.retryPolicy ?? defaultRetryPolicy(),
    logger: o.logger,
  };
}

/** Resolves and checks the table and column names (PULL-25). */
export function resolveNames(schema: InboxSchema | undefined): Record<'inbox' | ColumnName, string> {
  const names = { inbox: schema?.table ?? 'inbox' } as Record<'inbox' | ColumnName, string>;
  for (const column of COLUMNS) names[column] = schema?.columns?.[column] ?? column;
  for (const key of Object.keys(schema?.columns ?? {})) {
    if (!(COLUMNS as readonly string[]).includes(key)) {
      throw new InboxOptionsError(`The schema column ${key} is unknown.`);
    }
  }
  for (const name of Object.values(names)) {
    if (typeof name !== 'string' || !IDENTIFIER.test(name)) {
      throw new InboxOptionsError(`The schema name ${String(name)} is not a plain SQL identifier.`);
    }
  }
  return names;
}
