// PULL-C14: the README example, installed from the packed artifact into an empty project.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PACKAGE_DIR, PG_URL, waitFor, withDb } from './helpers.js';

const pkgDir = fileURLToPath(PACKAGE_DIR);
const example = readFileSync(join(pkgDir, 'examples', 'basic.ts'), 'utf8');

test('README example is examples/basic.ts verbatim', () => {
  const readme = readFileSync(join(pkgDir, 'README.md'), 'utf8');
  const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
  assert.equal(blocks.length, 1);
  assert.equal(blocks[0], example);
});

test('PULL-C14 The README example runs', { timeout: 180000 }, () =>
  withDb('c14', async (db) => {
    await db.insert([{ ref: 'a', source: 'orders', event_type: 'order.created' }]);
    const work = mkdtempSync(join(tmpdir(), 'qb-ts-c14-'));
    try {
      // The artifact exactly as it would be published (dist is already built by `npm test`).
      const out = execFileSync('npm', ['pack', '--ignore-scripts', '--pack-destination', work, '--json'], { cwd: pkgDir, encoding: 'utf8' });
      const tgz = join(work, JSON.parse(out)[0].filename as string);
      const project = join(work, 'app');
      execFileSync('mkdir', ['-p', project]);
      writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'c14-app', private: true, type: 'module' }));
      execFileSync('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tgz, 'pg'], { cwd: project, stdio: 'ignore' });
      const files = readdirSync(join(project, 'node_modules', '@alternayte', 'queuebox-inbox'));
      assert.ok(!files.includes('src') && !files.includes('test'), `packed files: ${files}`);
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
