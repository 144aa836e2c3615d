// The public API of @alternayte/queuebox-inbox: everything an application needs, nothing more.
// (package.json "exports" makes this the only entry point.)
export { createWorker, createBatchWorker, type InboxWorker, type InboxHandler, type InboxBatchHandler, type RunOptions } from './worker.js';
export { fromPg, fromSqlite, fromMysql, type SqliteDatabase, type MysqlPool, type MysqlPoolConnection, type ConnectionSource, type InboxConnection, type HandlerTransaction, type QueryResult, type ConnectionPurpose } from './connection.js';
export { retryAfter, deadLetter, defaultRetryPolicy, type FailureAction, type RetryPolicy, type DefaultRetryPolicyOptions } from './policy.js';
export { redact, errorText, redactedErrorText } from './redact.js';
export { InboxOptionsError, type WorkerOptions, type InboxSchema, type ColumnName, type Dialect } from './options.js';
export type { InboxMessage, JsonValue } from './message.js';
export type { Logger, LogFields, LogLevel } from './logger.js';
