export { createWorker, InboxWorker, candLimit, renewalIntervalMs, CLAIM_TIMEOUT_MS, type InboxHandler } from './worker.js';
export { fromPg, type ConnectionSource, type InboxConnection, type HandlerTransaction, type QueryResult, type ConnectionPurpose } from './connection.js';
export { retryAfter, deadLetter, defaultRetryPolicy, type FailureAction, type RetryPolicy, type DefaultRetryPolicyOptions } from './policy.js';
export { redact, errorText, redactedErrorText, INPUT_BOUND, MAX_LENGTH, TRUNCATION_MARKER } from './redact.js';
export { InboxOptionsError, resolveOptions, COLUMNS, type WorkerOptions, type InboxSchema, type ColumnName, type Dialect } from './options.js';
export type { InboxMessage, JsonValue } from './message.js';
export type { Logger, LogFields, LogLevel } from './logger.js';
