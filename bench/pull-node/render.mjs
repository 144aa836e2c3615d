// Renders the "Pull" section of docs/benchmarks.md from bench/pull.sh's results (one JSON object
// per phase) and writes it between the pull-benchmark markers, appending it when they are
// missing; the rest of the page is left alone. Figures are cut, never rounded up.
// Usage: node render.mjs <results.jsonl> <page.md> key=value...
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

const [resultsPath, pagePath, ...pairs] = process.argv.slice(2);
const f = Object.fromEntries(pairs.map((p) => [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)]));
const results = readFileSync(resultsPath, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));

const cut = (x, d) => Math.floor(x * 10 ** d + 1e-9) / 10 ** d;
const fixed = (x, d) => cut(x, d).toFixed(d);
const int = (x) => Math.floor(x).toLocaleString('en-US');
const mb = (kb) => fixed((kb * 1024) / 1e6, 1);
const rate = (r) => Number(f.rows) / (r.first_to_last_ms / 1000);
const levels = [...new Set(results.map((r) => r.concurrency))];
const find = (client, c) => results.find((r) => r.client === client && r.concurrency === c);
const names = {
  pgboss_work: `pg-boss ${f.boss_version} \`work()\``,
  rust: 'Rust `queuebox-inbox`',
  go: 'Go `clients/go`',
  ts: 'TypeScript `clients/typescript`',
  pgboss_loop: `pg-boss ${f.boss_version} \`fetch\` + \`complete\` loop`,
  row_floor: 'per-row transaction floor (`qb-pull-floor`)',
};
const order = ['rust', 'go', 'ts', 'pgboss_work', 'pgboss_loop', 'row_floor'];
const [pgVersion, pgSb, pgSc, pgFsync, pgAv, pgMax] = f.pg_facts.split('|');
const load = (u) => u.replace(/.*load average: /, '').replaceAll(',', '');

const lines = [];
const p = (s = '') => lines.push(s);
p('<!-- pull-benchmark:begin: written by bench/pull.sh; edits inside are overwritten -->');
p('## Pull: client libraries beside pg-boss');
p();
p('Command: `bench/pull.sh` (what it does: the comment at its top).');
p();
p(`- Run: ${f.date_run} UTC, commit ${f.commit}.`);
p(`- Machine: ${f.cores} cores (${f.cpu_model}), ${fixed(Number(f.mem_gb), 1)} GB memory.`);
p(`- PostgreSQL ${pgVersion} on the same machine (127.0.0.1), untuned: \`shared_buffers\` ${pgSb}, \`synchronous_commit\` ${pgSc}, \`fsync\` ${pgFsync}, \`autovacuum\` ${pgAv}, \`max_connections\` ${pgMax}. Every worker runs on the same machine; the driver waited until no other benchmark (\`qb-bench\`, \`wrk\`, \`pgbench\`) ran, but other engineers compile and test on these cores.`);
p(`- Load average (1, 5, 15 min) at the start: ${load(f.uptime_before)}; at the end: ${load(f.uptime_after)} (\`uptime\` before: \`${f.uptime_before.trim()}\`; after: \`${f.uptime_after.trim()}\`).`);
p(`- Rows: ${int(Number(f.rows))} pending pull rows of the source \`bench\` (\`consumption = 'pull'\`), each with its **own distinct aggregate id** (\`a1\`..\`a${f.rows}\`, so the one-per-aggregate rule never holds a row back but its \`NOT EXISTS\` checks still run), a JSON payload of about 200 bytes; inserted in one transaction with \`ANALYZE inbox\` (autovacuum is off), into a table created from \`clients/contract/fixtures/postgresql.sql\` in a fresh schema, reached through \`options=-c search_path=…\`.`);
p(`- QueueBox clients: each the client's normal path, a no-op handler that returns at once: claim (one short transaction), then for every row a handler transaction in which the \`processed\` mark (\`complete.sql\`) commits. Batch size ${f.batch}; poll interval ${f.poll_ms} ms; lease 30 s (default, so no renewal fires); pools as each README says: Rust and Go \`concurrency + 2\` connections, TypeScript \`concurrency + batch + 2\`. Rust: \`qb-pull-rust\` (release, \`bench/queuebox-bench\`); Go: \`bench/pull-go\` (${f.go_version}, pgx v4 through \`database/sql\`); TypeScript: \`bench/pull-node/ts-worker.mjs\` on \`clients/typescript/dist\` (Node ${f.node_version}).${f.ts_ok === '1' ? '' : ' **TypeScript: not measured** (`npm run build` failed in clients/typescript).'}`);
p(`- Peer: pg-boss ${f.boss_version} from npm (the last line that runs on Node 20; \`bench/pull-node/package.json\`), in its own schema of the same database, same run; the queue \`bench\` (standard policy), ${int(Number(f.rows))} jobs inserted with \`boss.insert\` (one statement), then \`ANALYZE\` of its job table; \`supervise\` and \`schedule\` off. Two ways: **\`work()\`**, its normal worker (\`batchSize\` ${f.batch}, \`pollingIntervalSeconds\` ${Number(f.boss_poll_ms) / 1000}, its minimum; one \`work()\` registration per unit of concurrency, pg-boss 10 having no \`teamSize\`), and a **\`fetch\` + \`complete\` loop** (\`boss.fetch(queue, { batchSize: ${f.batch} })\` then an awaited \`boss.complete(queue, ids)\`, one loop per unit of concurrency, no delay while jobs are found): its floor. pg-boss has no handler transaction: it marks a batch \`active\` in one statement and \`completed\` in one more.`);
p('- Per-row transaction floor: `qb-pull-floor` (`bench/queuebox-bench`), on the same rows inserted already claimed (`processing`, one token, a 1 h lease), marks each one `processed` in a transaction of its own: BEGIN, the contract\'s `complete.sql`, COMMIT, on as many connections as the concurrency, each with its share of the rows, no claim and no handler. It is what one transaction per row, which the pull contract requires, costs on this machine; its rows/s is rows ÷ its own elapsed time.');
p('- **rows/s** = rows ÷ (last completion − first claim), both from the database clock (QueueBox: `min(claimed_at)` → `max(processed_at)`; pg-boss: `min(started_on)` → `max(completed_on)`), so the wait for the first poll is not in it. "Wall" is the driver\'s time from the start of the insert to the poll that saw every row done (100 ms polls; it includes the insert, the first poll wait and up to one poll).');
p('- Memory is in MB of 10^6 bytes: idle RSS is `VmRSS` of the worker process 2 s after it printed `ready`, on an empty table; peak RSS is `VmHWM` when every row was done. CPU time is user + system of the worker process over its whole life.');
p();

const ratio = (r, peer) => (peer ? fixed(rate(r) / rate(peer), 2) : 'n/a');
for (const c of levels) {
  const work = find('pgboss_work', c);
  const loop = find('pgboss_loop', c);
  p(`### Concurrency ${c}`);
  p();
  p('| | rows/s | ratio to pg-boss `work()` | ratio to pg-boss loop | first claim → last completion | wall | idle / peak RSS | CPU time | done / not done or retried | `idx_inbox_pull_pending` scans (pg_stat; 0 when the claim plan used another path) | load average before → after |');
  p('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const client of order) {
    const r = find(client, c);
    if (!r) {
      if (client === 'ts') p(`| ${names.ts} | not measured | | | | | | | | | |`);
      continue;
    }
    const bold = client === 'rust' ? (s) => `**${s}**` : (s) => s;
    const process = r.idle_kb > 0;
    p(`| ${names[client]} | ${bold(int(rate(r)))} | ${bold(ratio(r, work))} | ${bold(ratio(r, loop))} | ${fixed(r.first_to_last_ms / 1000, 2)} s | ${process ? `${fixed(r.wall_ms / 1000, 2)} s` : 'n/a'} | ${process ? `${mb(r.idle_kb)} / ${mb(r.peak_kb)} MB` : 'n/a'} | ${process ? `${fixed(r.cpu_s, 2)} s` : 'n/a'} | ${int(r.done)} / ${r.other} | ${r.claims === '' ? 'n/a' : int(Number(r.claims))} | ${r.load_before} → ${r.load_after} |`);
  }
  p();
}

p('| Aim | Measured | Met |');
p('|---|---|---|');
const shortfalls = [];
for (const c of levels) {
  const rust = find('rust', c);
  for (const [key, label] of [['pgboss_work', '`work()`'], ['pgboss_loop', '`fetch` + `complete` loop']]) {
    const peer = find(key, c);
    if (!rust || !peer) continue;
    const met = rate(rust) >= rate(peer);
    p(`| Rust ≥ pg-boss ${label}, concurrency ${c} | ${int(rate(rust))} vs ${int(rate(peer))} rows/s (${ratio(rust, peer)} ×) | ${met ? 'yes' : '**no**'} |`);
    if (!met) shortfalls.push(`at concurrency ${c} the Rust client drained ${int(rate(rust))} rows/s, ${ratio(rust, peer)} × pg-boss's ${label} (${int(rate(peer))} rows/s)`);
  }
}
p();
const below = [];
for (const c of levels) {
  for (const client of ['go', 'ts']) {
    const r = find(client, c);
    const work = find('pgboss_work', c);
    const loop = find('pgboss_loop', c);
    if (!r) continue;
    const peers = [];
    if (work && rate(r) < rate(work)) peers.push(`\`work()\` (${ratio(r, work)} ×)`);
    if (loop && rate(r) < rate(loop)) peers.push(`\`fetch\` + \`complete\` loop (${ratio(r, loop)} ×)`);
    if (peers.length) below.push(`${names[client]} at concurrency ${c}: ${int(rate(r))} rows/s, below pg-boss's ${peers.join(' and its ')}`);
  }
}
p('### Where it falls short');
p();
const s1 = shortfalls.length
  ? `In this run ${shortfalls.join('; ')}.`
  : 'In this run the Rust client matched or beat both pg-boss ways at every concurrency.';
const s2 = below.length ? ` Below pg-boss as well: ${below.join('; ')}.` : '';
const floors = levels
  .map((c) => [c, find('rust', c), find('row_floor', c)])
  .filter(([, rust, floor]) => rust && floor)
  .map(([c, rust, floor]) => `${int(rate(floor))} rows/s at concurrency ${c}, of which the Rust client reached ${fixed(rate(rust) / rate(floor), 2)} ×`);
const s3 = floors.length ? ` The per-row transaction floor, the same transactions with no claim and no worker, ran ${floors.join('; ')}.` : '';
p(`${s1}${s2}${s3} The comparison favours pg-boss: every QueueBox row is its own handler transaction (BEGIN, the fenced \`UPDATE … processed\`, COMMIT: one synchronous WAL flush per row with \`synchronous_commit\` on), while pg-boss completes a whole batch of ${f.batch} with one autocommitted statement (one flush per batch) and runs no handler transaction at all. All QueueBox clients also claim the next batch only after every row of the current one has an outcome, so the slots idle during each claim and behind the slowest row of a batch. pg-boss's \`work()\`, for its part, sleeps \`pollingIntervalSeconds\` − the loop's duration after every fetch, also after a full batch (\`src/worker.js\`, \`Worker.start\`), so one \`work()\` registration drains at most \`batchSize\` jobs per 0.5 s; the loop shows what its statements do without that sleep.`);
if (f.ts_ok !== '1') {
  p();
  p('The TypeScript client was not measured: `npm run build` failed in `clients/typescript`.');
}
p('<!-- pull-benchmark:end -->');

const section = lines.join('\n');
// A page that does not exist yet (a quick try with --out) gets just the section.
let page = existsSync(pagePath) ? readFileSync(pagePath, 'utf8') : '';
const begin = page.indexOf('<!-- pull-benchmark:begin');
const endMarker = '<!-- pull-benchmark:end -->';
const end = page.indexOf(endMarker);
if (begin >= 0 && end > begin) {
  page = page.slice(0, begin) + section + page.slice(end + endMarker.length);
} else {
  page = page ? `${page.replace(/\n*$/, '\n')}\n${section}\n` : `${section}\n`;
}
writeFileSync(pagePath, page);
