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

export type RenderedStatements = Record<StatementName, string>;

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
    out[name] = renderPgParameters(renderNames(CONTRACT_SQL.postgresql[name], names), PARAMETERS[name]);
  }
  return out;
}
