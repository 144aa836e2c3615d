// PULL-C14: the package installed the way the README says, into an empty project, offline, and
// the README example run unchanged against PostgreSQL.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PACKAGE_DIR, PG_URL, waitFor, withDb } from './helpers.js';

const pkgDir = fileURLToPath(PACKAGE_DIR);
const readme = readFileSync(join(pkgDir, 'README.md'), 'utf8');
const example = readFileSync(join(pkgDir, 'examples', 'basic.ts'), 'utf8');
const batchExample = readFileSync(join(pkgDir, 'examples', 'batch.ts'), 'utf8');

function blocks(lang: string): string[] {
  return [...readme.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1]!);
}

/** The one block of `lang` (sh); the ts blocks are the two examples, checked below. */
function block(lang: string): string {
  if (lang === 'ts') return blocks('ts')[0]!;
  assert.equal(blocks(lang).length, 1, `README.md has one ${lang} block`);
  return blocks(lang)[0]!;
}

/** What the package exports: exactly the public API (src/index.ts), and no deep import. */
const PUBLIC_API = [
  'InboxOptionsError',
  'createBatchWorker',
  'createWorker',
  'deadLetter',
  'defaultRetryPolicy',
  'errorText',
  'fromMysql',
  'fromPg',
  'fromSqlite',
  'redact',
  'redactedErrorText',
  'retryAfter',
];

test('README example is examples/basic.ts verbatim, and so is docs/pull.md §10', () => {
  assert.deepEqual(blocks('ts'), [example, batchExample], 'the README shows examples/basic.ts, then examples/batch.ts');
  const docs = readFileSync(join(pkgDir, '..', '..', 'docs', 'pull.md'), 'utf8');
  assert.ok(docs.includes('```ts\n' + example + '```'), 'docs/pull.md shows examples/basic.ts verbatim');
});

test('PULL-C14 The README example runs', { timeout: 240000 }, () =>
  withDb('c14', async (db) => {
    await db.insert([{ ref: 'a', source: 'orders', event_type: 'order.created' }]);
    const work = mkdtempSync(join(tmpdir(), 'qb-ts-c14-'));
    try {
      // git sends https://github.com/alternayte/queuebox to a snapshot of this checkout. npm
      // prefers its cache, which this suite's own `npm ci` filled with the package's build tools
      // and pg; only pg's registry metadata, which `npm ci` never needs, may be fetched once.
      const remote = join(work, 'remote');
      mkdirSync(remote);
      execFileSync('sh', [join(pkgDir, '..', 'install-test', 'local-remote.sh'), remote]);
      const env = { ...process.env, GIT_CONFIG_GLOBAL: join(remote, 'gitconfig'), npm_config_prefer_offline: 'true' };
      const project = join(work, 'app');
      mkdirSync(project);
      writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'c14-app', private: true, type: 'module' }));
      // The README's install commands, run as written.
      execFileSync('sh', ['-e', '-c', block('sh')], { cwd: project, env, stdio: 'pipe' });

      const installed = join(project, 'node_modules', '@alternayte', 'queuebox-inbox');
      const files = readdirSync(installed);
      assert.ok(files.includes('dist') && !files.includes('src') && !files.includes('test'), `installed files: ${files}`);
      const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8'));
      assert.equal(manifest.dependencies, undefined, 'no dependency of its own');
      assert.equal(manifest.peerDependencies?.pg, '^8.11.0', 'pg is a peer dependency with a range');
      assert.ok(!readdirSync(installed).includes('node_modules'), 'the application’s own pg is used');
      const probe = `
        const api = await import('@alternayte/queuebox-inbox');
        let deep = 'allowed';
        try { await import('@alternayte/queuebox-inbox/dist/src/worker.js'); } catch (e) { deep = e.code; }
        console.log(JSON.stringify({ names: Object.keys(api).sort(), deep }));`;
      writeFileSync(join(project, 'probe.mjs'), probe);
      const seen = JSON.parse(execFileSync(process.execPath, ['probe.mjs'], { cwd: project, encoding: 'utf8' }));
      assert.deepEqual(seen, { names: PUBLIC_API, deep: 'ERR_PACKAGE_PATH_NOT_EXPORTED' });

      // The example runs unchanged: its code is plain JavaScript.
      copyFileSync(join(pkgDir, 'examples', 'basic.ts'), join(project, 'example.mjs'));
      const url = new URL(PG_URL);
      url.searchParams.set('options', `-c search_path=${db.schema}`);
      const child = spawn(process.execPath, ['example.mjs'], {
        cwd: project,
        env: { ...process.env, DATABASE_URL: url.toString() },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += String(d)));
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      try {
        await waitFor('example processed the row', async () => (await db.row('a')).state === 'processed', 20000);
      } finally {
        child.kill('SIGTERM');
      }
      assert.equal(await exited, 0, stderr);
      const app = await db.admin.query('SELECT note FROM app_rows WHERE message_id = $1', [db.id('a')]);
      assert.deepEqual(app.rows, [{ note: 'order.created' }]);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }));
