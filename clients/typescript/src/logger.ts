// Logging (pull.md §7.9, PULL-53). Silent unless the application gives a logger.

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** Fields of a log line. The token and the payload are never logged. */
export interface LogFields {
  source: string;
  messageId?: string;
  attempt?: number;
  correlationId?: string;
  /** The redacted error text. */
  error?: string;
  delayMs?: number;
}

/**
 * A logger: one function per level, each optional. `console` fits
 * (`logger: console` prints `message` and the fields object).
 */
export interface Logger {
  debug?(message: string, fields: LogFields): void;
  info?(message: string, fields: LogFields): void;
  warn?(message: string, fields: LogFields): void;
  error?(message: string, fields: LogFields): void;
}
