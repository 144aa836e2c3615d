// Renders the contract statements (clients/contract/README.md, "Loading a statement").
// The SQL text comes only from the contract files, embedded by scripts/gen-sql.mjs.
import { CONTRACT_SQL } from './generated/sql.js';
import type { ColumnName } from './options.js';

export type StatementName = 'claim' | 'renew' | 'complete' | 'retry' | 'dead';

/** Canonical parameter order (PULL-11). */
export const PARAMETERS: Record<StatementName, readonly string[]> = {
  claim: ['source', 'batch', 'lease_ms', 'cand_limit', 'token'],
  renew: ['lease_ms', 'id', 'token'],
  complete: ['id', 'token'],
  retry: ['delay_ms', 'error', 'id', 'token'],
  dead: ['error', 'id', 'token'],
};

/** The batch handler's Complete of a whole batch (`complete-batch.sql`): `:ids`, then `:token`. */
export const COMPLETE_BATCH_PARAMETERS: readonly string[] = ['ids', 'token'];

export type RenderedStatements = Record<StatementName, string>;

/** One statement for the driver: its text and the parameter names in binding order. */
export interface Statement {
  text: string;
  /** Canonical names in the driver's order; `ids` where MySQL expands the claimed ids. */
  slots: readonly string[];
}

/** The statements of one dialect. On MySQL `claim` is the select of step 3 (pull.md §5.3). */
export interface DialectStatements {
  claim: Statement;
  renew: Statement;
  complete: Statement;
  retry: Statement;
  dead: Statement;
  /** The batch handler's Complete; `:ids` is one text on PostgreSQL (ids joined by `,`) and
   *  SQLite (a JSON array), and one `?` per id on MySQL. */
  completeBatch: Statement;
  mysql?: { lock: Statement; update: Statement; fetch: Statement; unlock: Statement };
}

/** The text (MySQL's `:ids` expanded to one `?` per id) and the parameters in driver order. */
export function bind(st: Statement, values: Record<string, unknown>, ids: readonly unknown[] = []): { text: string; params: unknown[] } {
  const params: unknown[] = [];
  for (const slot of st.slots) {
    if (slot === 'ids') params.push(...ids);
    else params.push(values[slot]);
  }
  const text = st.slots.includes('ids') ? st.text.replace(':ids', ids.map(() => '?').join(', ')) : st.text;
  return { text, params };
}

/**
 * Renders one contract text for a dialect: names substituted, then `:name` parameters as `$n`
 * in canonical order (PostgreSQL), or `?` per occurrence (MySQL, with `:ids` kept for
 * expansion; SQLite, because better-sqlite3 binds an array only to anonymous parameters).
 */
export function renderStatement(dialect: 'postgresql' | 'mysql' | 'sqlite', template: string, names: Record<string, string>, order: readonly string[]): Statement {
  const named = renderNames(template, names);
  if (dialect === 'postgresql') return { text: renderPgParameters(named, order), slots: order };
  const slots: string[] = [];
  const text = named.replace(/(?<!:):([a-z_][a-z0-9_]*)/g, (whole: string, name: string, offset: number) => {
    if (named[offset + whole.length] === ':') return whole;
    if (dialect === 'mysql' && name === 'ids') {
      slots.push('ids');
      return whole;
    }
    if (!order.includes(name)) throw new Error(`The contract SQL has an unknown parameter :${name}.`);
    slots.push(name);
    return '?';
  });
  return { text, slots };
}

/** The statements of `dialect` for the given names. */
export function renderDialect(dialect: 'postgresql' | 'mysql' | 'sqlite', names: Record<'inbox' | ColumnName, string>): DialectStatements {
  const files = CONTRACT_SQL[dialect]!;
  const r = (file: string, order: StatementName) => renderStatement(dialect, files[file]!, names, PARAMETERS[order]);
  const out: DialectStatements = {
    claim: r(dialect === 'mysql' ? 'claim-select' : 'claim', 'claim'),
    renew: r('renew', 'renew'),
    complete: r('complete', 'complete'),
    retry: r('retry', 'retry'),
    dead: r('dead', 'dead'),
    completeBatch: renderStatement(dialect, files['complete-batch']!, names, COMPLETE_BATCH_PARAMETERS),
  };
  if (dialect === 'mysql') {
    out.mysql = { lock: r('claim-lock', 'claim'), update: r('claim-update', 'claim'), fetch: r('claim-fetch', 'claim'), unlock: r('claim-unlock', 'claim') };
  }
  return out;
}

/** Drops comment lines and substitutes `{name}` placeholders with the mapped names. */
export function renderNames(template: string, names: Record<string, string>): string {
  const text = template
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('--'))
    .join('\n');
  return text.replace(/\{([a-z_]+)\}/g, (_, name: string) => {
    const mapped = names[name];
    if (mapped === undefined) throw new Error(`The contract SQL has an unknown placeholder {${name}}.`);
    return mapped;
  });
}

/** Maps `:name` parameters to PostgreSQL `$n` in canonical order. */
export function renderPgParameters(text: string, order: readonly string[]): string {
  return text.replace(/(?<!:):([a-z_][a-z0-9_]*)/g, (whole: string, name: string, offset: number) => {
    if (text[offset + whole.length] === ':' ) return whole;
    const n = order.indexOf(name);
    if (n < 0) throw new Error(`The contract SQL has an unknown parameter :${name}.`);
    return `$${n + 1}`;
  });
}

/** Renders the five PostgreSQL statements for the given names (default: QueueBox names). */
export function renderPostgresql(names: Record<'inbox' | ColumnName, string>): RenderedStatements {
  const out = {} as RenderedStatements;
  for (const name of Object.keys(PARAMETERS) as StatementName[]) {
    out[name] = renderPgParameters(renderNames(CONTRACT_SQL.postgresql![name]!, names), PARAMETERS[name]);
  }
  return out;
}
