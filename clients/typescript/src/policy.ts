// Failure actions and the default retry policy (pull.md §10, PULL-60..62).
import type { InboxMessage } from './message.js';

export const MAX_DELAY_MS = 2147483647;

/** What the worker does after a handler failure. */
export type FailureAction =
  | { readonly kind: 'retry'; readonly delayMs: number }
  | { readonly kind: 'dead' };

/** A retry policy maps (message, error) to an action (PULL-60). */
export type RetryPolicy = (message: InboxMessage, error: unknown) => FailureAction;

/** Clamp whole milliseconds to [0, 2147483647] (PULL-15). */
export function clampMs(ms: number): number {
  if (Number.isNaN(ms)) return 0;
  return Math.min(Math.max(Math.floor(ms), 0), MAX_DELAY_MS);
}

/**
 * Retry after `ms` milliseconds. A negative or non-finite `ms` throws a RangeError; a fraction
 * is rounded; the delay is clamped to at most 2147483647 ms (PULL-62).
 */
export function retryAfter(ms: number): FailureAction {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    throw new RangeError('The retry delay must be a finite number of milliseconds, 0 or more.');
  }
  return Object.freeze({ kind: 'retry' as const, delayMs: clampMs(Math.round(ms)) });
}

/** Move the message to the dead letter (state `dead`). */
export function deadLetter(): FailureAction {
  return DEAD;
}
const DEAD: FailureAction = Object.freeze({ kind: 'dead' as const });

export interface DefaultRetryPolicyOptions {
  /** Total deliveries a message gets (at least 1). Default 5. */
  maxAttempts?: number;
  /** Delay before the second delivery, ms (0 or more). Default 1000. */
  baseDelayMs?: number;
  /** Upper bound of the delay, ms (at least baseDelayMs). Default 300000. */
  maxDelayMs?: number;
  /** Random extra fraction, from 0 to 1. Default 0.25. */
  jitter?: number;
}

/**
 * The default policy (PULL-61): with `n = attempt + 1`, dead-letter when `n >= maxAttempts`,
 * else retry after `min(baseDelay × 2^min(n − 1, 30), maxDelay) × (1 + U[0, jitter))`.
 */
export function defaultRetryPolicy(options: DefaultRetryPolicyOptions = {}): RetryPolicy {
  const maxAttempts = options.maxAttempts ?? 5;
  const baseDelayMs = options.baseDelayMs ?? 1000;
  const maxDelayMs = options.maxDelayMs ?? 300000;
  const jitter = options.jitter ?? 0.25;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) {
    throw new RangeError('The maximum attempts must be at least 1.');
  }
  if (!Number.isFinite(baseDelayMs) || baseDelayMs < 0) {
    throw new RangeError('The base delay must not be negative.');
  }
  if (!Number.isFinite(maxDelayMs) || maxDelayMs < baseDelayMs) {
    throw new RangeError('The maximum delay must be at least the base delay.');
  }
  if (!Number.isFinite(jitter) || jitter < 0 || jitter > 1) {
    throw new RangeError('The jitter must be from 0 to 1.');
  }
  return (message) => {
    const n = message.attempt + 1;
    if (n >= maxAttempts) return DEAD;
    let d = Math.min(baseDelayMs * 2 ** Math.min(n - 1, 30), maxDelayMs);
    if (jitter > 0) d = d * (1 + Math.random() * jitter);
    return Object.freeze({ kind: 'retry' as const, delayMs: clampMs(Math.floor(d)) });
  };
}
