import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  createWorker,
  defaultRetryPolicy,
  deadLetter,
  errorText,
  redact,
  retryAfter,
  type ConnectionSource,
  type InboxMessage,
  type WorkerOptions,
} from '../src/index.js';
import { INPUT_BOUND, MAX_LENGTH, TRUNCATION_MARKER } from '../src/redact.js';
import { candLimit, renewalIntervalMs } from '../src/worker.js';
import { renderNames, renderPgParameters, renderPostgresql, PARAMETERS, type StatementName } from '../src/sql.js';
import { CONTRACT_SQL } from '../src/generated/sql.js';
import { contractFile, DEFAULT_NAMES, prefixedNames, PACKAGE_DIR } from './helpers.js';

const noConnections: ConnectionSource = {
  dialect: 'postgresql',
  connect: () => {
    throw new Error('no connection may be opened');
  },
};

function msg(attempt: number): InboxMessage {
  return {
    id: '00000000-0000-4000-8000-000000000000',
    source: 's',
    idempotencyKey: 'k',
    aggregateId: null,
    eventType: null,
    payload: {},
    attempt,
    correlationId: null,
    headers: {},
    createdAt: new Date(),
  };
}

test('PULL-C28 Options are validated', () => {
  const cases = JSON.parse(contractFile('cases.json')).cases.find((c: { id: string }) => c.id === 'PULL-C28');
  let opened = 0;
  const counting: ConnectionSource = { dialect: 'postgresql', connect: async () => (opened++, noConnections.connect('claim')) };
  for (const e of cases.expected.errors as { option: string; value: unknown; message: string }[]) {
    const value = e.value === "256 x 'a'" ? 'a'.repeat(256) : e.value;
    const options: WorkerOptions = { source: 's' };
    if (e.option === 'schema.column') options.schema = { columns: { payload: value as string } };
    else (options as unknown as Record<string, unknown>)[e.option] = value;
    assert.throws(() => createWorker(counting, options, async () => {}), { message: e.message }, `${e.option}=${String(value)}`);
  }
  assert.throws(() => createWorker(counting, { source: 's', schema: { table: 'bad-name' } }, async () => {}), {
    message: 'The schema name bad-name is not a plain SQL identifier.',
  });
  assert.throws(() => createWorker(counting, { source: 's', batchSize: 1.5 }, async () => {}), {
    message: 'The batch size must be between 1 and 500.',
  });
  // 255 characters is fine; defaults build.
  createWorker(counting, { source: 'a'.repeat(255) }, async () => {});
  assert.equal(opened, 0);
});

const norm = (s: string) => s.replace(/\s+/g, ' ').trim();

test('PULL-C29 Rendered SQL equals the canonical text', () => {
  const canonical = JSON.parse(readFileSync(new URL('test/canonical/postgresql.json', PACKAGE_DIR), 'utf8')).postgresql as Record<
    StatementName,
    string
  >;
  // The copy in test/canonical is checked against pull.md itself when the spec is at hand.
  const specPaths = [process.env.QUEUEBOX_SPEC_PULL, '../../../shared/spec/pull.md', '../../../../shared/spec/pull.md']
    .filter((x): x is string => !!x)
    .map((x) => (x.startsWith('/') ? x : fileURLToPath(new URL(x, PACKAGE_DIR))));
  const spec = specPaths.find((x) => existsSync(x));
  if (spec) {
    const text = readFileSync(spec, 'utf8');
    const section = text.slice(text.indexOf('### 5.1 PostgreSQL'), text.indexOf('### 5.2 SQL Server'));
    let compared = 0;
    for (const [, name, body] of section.matchAll(/\n(\w+):\n\n```sql\n([\s\S]*?)```/g)) {
      assert.equal(canonical[name!.toLowerCase() as StatementName], body, `test/canonical copy of ${name} differs from ${spec}`);
      compared++;
    }
    assert.equal(compared, 5);
  }
  const mapped = prefixedNames('pull_jobs', 'qb_');
  const renderedDefault = renderPostgresql(DEFAULT_NAMES);
  const renderedMapped = renderPostgresql(mapped);
  for (const name of Object.keys(PARAMETERS) as StatementName[]) {
    // The embedded text is exactly the contract file (no drift).
    assert.equal(CONTRACT_SQL.postgresql![name]!, contractFile(`postgresql/${name}.sql`), `${name}: embedded copy is stale`);
    // Default names, :name form equals pull.md §5.1.
    assert.equal(norm(renderNames(CONTRACT_SQL.postgresql![name]!, DEFAULT_NAMES)), norm(canonical[name]), name);
    // Rendered with $n equals the canonical text with $n.
    assert.equal(norm(renderedDefault[name]), norm(renderPgParameters(canonical[name], PARAMETERS[name])), name);
    // Mapped names: the canonical text with every quoted name substituted.
    const canonicalMapped = canonical[name].replace(/"([a-z_]+)"/g, (_, n: string) => `"${(mapped as Record<string, string>)[n]}"`);
    assert.equal(norm(renderedMapped[name]), norm(renderPgParameters(canonicalMapped, PARAMETERS[name])), `${name} mapped`);
    assert.ok(!/(?<!:):[a-z]/.test(renderedDefault[name]), `${name}: a parameter was left unbound`);
  }
  assert.match(renderedDefault.claim, /'#' \|\| r\."id"::text/);
  assert.match(renderedDefault.retry, /"scheduled_at" = clock_timestamp\(\) \+ \$1 \* INTERVAL/);
});

test('PULL-C30 The default retry policy', () => {
  const p = defaultRetryPolicy({ jitter: 0 });
  assert.deepEqual([0, 1, 2, 3].map((a) => p(msg(a), new Error('x'))), [1000, 2000, 4000, 8000].map((d) => ({ kind: 'retry', delayMs: d })));
  assert.deepEqual(p(msg(4), new Error('x')), { kind: 'dead' });
  const capped = defaultRetryPolicy({ maxAttempts: 1000, baseDelayMs: 1000, maxDelayMs: 5000, jitter: 0 });
  assert.deepEqual(capped(msg(10), null), { kind: 'retry', delayMs: 5000 });
  const big = defaultRetryPolicy({ maxAttempts: 1000, jitter: 0 });
  assert.deepEqual(big(msg(100), null), { kind: 'retry', delayMs: 300000 });
  const huge = defaultRetryPolicy({ maxAttempts: 1000, baseDelayMs: 2147483647, maxDelayMs: Number.MAX_SAFE_INTEGER, jitter: 0 });
  assert.deepEqual(huge(msg(100), null), { kind: 'retry', delayMs: 2147483647 });
  const j = defaultRetryPolicy();
  for (let i = 0; i < 1000; i++) {
    const a = j(msg(0), null);
    assert.equal(a.kind, 'retry');
    if (a.kind === 'retry') assert.ok(a.delayMs >= 1000 && a.delayMs < 1250 && Number.isInteger(a.delayMs), String(a.delayMs));
  }
  assert.throws(() => defaultRetryPolicy({ maxAttempts: 0 }), RangeError);
  assert.throws(() => defaultRetryPolicy({ baseDelayMs: -1 }), RangeError);
  assert.throws(() => defaultRetryPolicy({ baseDelayMs: 1000, maxDelayMs: 999 }), RangeError);
  assert.throws(() => defaultRetryPolicy({ jitter: -0.1 }), RangeError);
  assert.throws(() => defaultRetryPolicy({ jitter: 1.1 }), RangeError);
  assert.throws(() => defaultRetryPolicy({ jitter: Number.NaN }), RangeError);
  defaultRetryPolicy({ maxAttempts: 1, baseDelayMs: 0, maxDelayMs: 0, jitter: 1 });
});

test('PULL-62 retryAfter and deadLetter', () => {
  assert.deepEqual(retryAfter(1500.6), { kind: 'retry', delayMs: 1501 });
  assert.deepEqual(retryAfter(0), { kind: 'retry', delayMs: 0 });
  assert.deepEqual(retryAfter(1e12), { kind: 'retry', delayMs: 2147483647 });
  assert.throws(() => retryAfter(-1), RangeError);
  assert.throws(() => retryAfter(Number.NaN), RangeError);
  assert.throws(() => retryAfter(Number.POSITIVE_INFINITY), RangeError);
  assert.deepEqual(deadLetter(), { kind: 'dead' });
});

test('PULL-14 PULL-43 derived values', () => {
  assert.equal(candLimit(1), 50);
  assert.equal(candLimit(10), 50);
  assert.equal(candLimit(20), 60);
  assert.equal(candLimit(500), 500);
  assert.equal(renewalIntervalMs(30000), 10000);
  assert.equal(renewalIntervalMs(3), 1);
  assert.equal(renewalIntervalMs(1000), 333);
});

test('PULL-C31 Redaction corpus and the input bound', () => {
  const corpus = JSON.parse(contractFile('redaction-corpus.json'));
  assert.equal(corpus.version, 1);
  assert.equal(corpus.inputBound, INPUT_BOUND);
  assert.equal(corpus.maxLength, MAX_LENGTH);
  assert.equal(corpus.truncationMarker, TRUNCATION_MARKER);
  const failures: string[] = [];
  for (const c of corpus.cases as { name: string; input: string; expected: string; secrets: string[] }[]) {
    const out = redact(c.input);
    if (out !== c.expected) failures.push(`${c.name}: got ${JSON.stringify(out)} expected ${JSON.stringify(c.expected)}`);
    for (const s of c.secrets) if (out.includes(s)) failures.push(`${c.name}: leaks ${JSON.stringify(s)}`);
  }
  assert.deepEqual(failures, []);
  assert.ok(corpus.cases.length > 0);
  const big = 'password=x@'.repeat(Math.ceil((10 * 1024 * 1024) / 11));
  const started = Date.now();
  assert.equal(redact(big), redact(big.slice(0, INPUT_BOUND)));
  assert.ok(Date.now() - started < 2000, 'the bound keeps a 10 MB input cheap');
  // Bound counts code points, not UTF-16 units.
  const emoji = '😀'.repeat(3000);
  assert.equal(redact(emoji), '😀'.repeat(1986) + TRUNCATION_MARKER);
});

test('PULL-C32 Error chain text', () => {
  let e: Error = new Error('l7');
  for (let i = 6; i >= 1; i--) e = new Error(`l${i}`, { cause: e });
  assert.equal(errorText(e), 'l1 | caused by l2 | caused by l3 | caused by l4 | caused by l5');
  const self = new Error('loop');
  (self as { cause?: unknown }).cause = self;
  assert.equal(errorText(self), 'loop');
  assert.equal(errorText('plain'), 'plain');
  assert.equal(errorText(new Error('top', { cause: 'why' })), 'top | caused by why');
  assert.equal(errorText(new Error('top', { cause: { toString: () => 'obj' } })), 'top | caused by obj');
});

test('every case id in clients/contract/cases.json has a test', () => {
  const ids: string[] = JSON.parse(contractFile('cases.json')).cases.map((c: { id: string }) => c.id);
  const sources = readdirSync(new URL('test/', PACKAGE_DIR))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => readFileSync(new URL(`test/${f}`, PACKAGE_DIR), 'utf8'))
    .join('\n');
  const missing = ids.filter((id) => !new RegExp(`test\\(\\s*'${id} `).test(sources));
  assert.deepEqual(missing, []);
});
