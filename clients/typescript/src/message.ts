// The message a handler receives (pull.md §8, PULL-54/55). It carries no claim token.

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export interface InboxMessage {
  /** Inbox row id, canonical lower-case UUID text. */
  readonly id: string;
  readonly source: string;
  readonly idempotencyKey: string;
  readonly aggregateId: string | null;
  readonly eventType: string | null;
  /** The stored JSON value, parsed. */
  readonly payload: JsonValue;
  /** Failed deliveries so far: 0 on the first delivery. */
  readonly attempt: number;
  readonly correlationId: string | null;
  /** String-to-string map; never null. */
  readonly headers: Readonly<Record<string, string>>;
  /** UTC creation time. */
  readonly createdAt: Date;
}
