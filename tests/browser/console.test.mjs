// The web console in a real browser (issue 13 part 3): Debian's headless Chromium, driven by
// playwright-core, opens the console of a running QueueBox binary on PostgreSQL with dead rows,
// sees the counts, opens a message with the keyboard, replays it with the confirmation that shows
// the count, and the receiver gets it with the same X-Message-Id. Screenshots go to
// target/console/ (desktop and phone widths).
//
// Env: QUEUEBOX_BIN (the binary), QUEUEBOX_TEST_PG_URL (default postgres://postgres@127.0.0.1:5432/test),
// CHROMIUM (default /usr/bin/chromium), QUEUEBOX_SCREENSHOTS (default ../../target/console).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { createServer } from "node:http";
import { mkdirSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { randomUUID } from "node:crypto";
import { chromium } from "playwright-core";

const BIN = process.env.QUEUEBOX_BIN;
const PG = process.env.QUEUEBOX_TEST_PG_URL || "postgres://postgres@127.0.0.1:5432/test";
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const SHOTS = resolve(process.env.QUEUEBOX_SCREENSHOTS || "../../target/console");
const TOKEN = "console-test-token";
const schema = `console_${process.pid}_${Date.now() % 100000}`;

let receiver, receiverPort, queuebox, port, scratch, browser;
const received = [];
const log = [];

function psql(sql) {
  return execFileSync("psql", [PG, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", `SET search_path TO ${schema}; ${sql}`], { encoding: "utf8" });
}

async function freePort() {
  const server = createServer();
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  const p = server.address().port;
  await new Promise((ok) => server.close(ok));
  return p;
}

// page.waitForFunction polls with eval, which the console's CSP forbids: poll with evaluate.
async function waitIn(page, fn, limitMs = 10000) {
  const end = Date.now() + limitMs;
  while (!(await page.evaluate(fn))) {
    if (Date.now() > end) throw new Error(`not true within ${limitMs} ms: ${fn}`);
    await new Promise((ok) => setTimeout(ok, 100));
  }
}

async function until(what, limitMs, check) {
  const end = Date.now() + limitMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value) return value;
    if (Date.now() > end || queuebox?.exitCode !== null) throw new Error(`${what} within ${limitMs} ms; QueueBox log:\n${log.join("")}`);
    await new Promise((ok) => setTimeout(ok, 100));
  }
}

before(async () => {
  assert.ok(BIN, "QUEUEBOX_BIN names the queuebox binary (tests/browser/run.sh builds it)");
  execFileSync("psql", [PG, "-qc", `CREATE SCHEMA ${schema}`]);
  receiver = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      received.push({ url: req.url, headers: req.headers, body });
      res.writeHead(200).end();
    });
  });
  await new Promise((ok) => receiver.listen(0, "127.0.0.1", ok));
  receiverPort = receiver.address().port;
  port = await freePort();
  scratch = mkdtempSync(join(tmpdir(), "queuebox-console-"));
  const separator = PG.includes("?") ? "&" : "?";
  const url = `${PG}${separator}sslmode=disable&options=-c%20search_path%3D${schema}`;
  writeFileSync(join(scratch, "queuebox.yml"), `database:
  url: "${url}"
server:
  httpPort: ${port}
outbox:
  pollIntervalMs: 100
destinations:
  receiver:
    type: http
    baseUrl: http://127.0.0.1:${receiverPort}
routes:
  - topicPattern: "**"
    destination: receiver
admin:
  enabled: true
  auth:
    type: bearer
    token: ${TOKEN}
`);
  // QueueBox refuses QUEUEBOX_* variables it does not know (the test's own are among them).
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("QUEUEBOX_")));
  queuebox = spawn(BIN, ["run", "--config", join(scratch, "queuebox.yml")], { cwd: scratch, env, stdio: ["ignore", "pipe", "pipe"] });
  queuebox.stdout.on("data", (d) => log.push(String(d)));
  queuebox.stderr.on("data", (d) => log.push(String(d)));
  await until("QueueBox ready", 60000, async () => (await fetch(`http://127.0.0.1:${port}/health/ready`)).ok);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox"] });
});

after(async () => {
  await browser?.close();
  if (queuebox && queuebox.exitCode === null) {
    queuebox.kill("SIGTERM");
    await new Promise((ok) => queuebox.once("exit", ok));
  }
  receiver?.close();
  try { execFileSync("psql", [PG, "-qc", `DROP SCHEMA IF EXISTS ${schema} CASCADE`]); } catch {}
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

test("the console is off the data it shows: the page loads, the API refuses without the token", async () => {
  const page = await fetch(`http://127.0.0.1:${port}/admin/console`);
  assert.equal(page.status, 200);
  assert.match(page.headers.get("content-type"), /text\/html/);
  assert.match(page.headers.get("content-security-policy"), /script-src 'self'/);
  const stats = await fetch(`http://127.0.0.1:${port}/admin/stats`);
  assert.equal(stats.status, 401);
});

test("counts, a message, a replay with its count, and the receiver gets it", async () => {
  const first = randomUUID();
  const second = randomUUID();
  psql(`INSERT INTO outbox (id, topic, key, payload, headers, state, attempt, last_error) VALUES
    ('${first}', 'orders.created', 'order-1', '{"order": 1, "total": 12.5}', '{"x-tenant": "acme"}', 'dead', 5, 'HTTP 500 from https://hooks.example.com/orders'),
    ('${second}', 'orders.paid', 'order-2', '{"order": 2}', '{}', 'dead', 5, 'HTTP 410 Gone');
    INSERT INTO inbox (source, idempotency_key, payload, state, consumption, last_error) VALUES
    ('stripe', 'evt_1', '{"type": "charge.failed"}', 'dead', 'push', 'topic rendered empty');`);

  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(`http://127.0.0.1:${port}/admin/console`);
  await page.selectOption("#auth-kind", "bearer");
  await page.fill("#auth-secret", TOKEN);
  await page.keyboard.press("Enter"); // submits the credentials form from the keyboard
  await page.waitForSelector("#auth-status:has-text('connected')");
  await waitIn(page, () => document.querySelector("#depth-outbox tr.dead td.num")?.textContent === "2");
  assert.equal(await page.textContent("#depth-inbox tr.dead td.num"), "1");
  await page.waitForSelector(`button[data-id="${first}"]`);
  assert.equal(await page.locator("#dead-table tbody tr").count(), 2);

  // Filter by topic: only the first row is left.
  await page.fill("#filters input[name=topic]", "orders.created");
  await page.click("#filters button[type=submit]");
  await waitIn(page, () => document.querySelectorAll("#dead-table tbody tr").length === 1);
  mkdirSync(SHOTS, { recursive: true });

  // Open the message with the keyboard, read it, close it with Escape.
  await page.focus(`button[data-id="${first}"]`);
  await page.keyboard.press("Enter");
  await page.waitForSelector("#message[open]");
  assert.match(await page.textContent("#message-payload"), /"total": 12\.5/);
  assert.match(await page.textContent("#message-headers"), /"x-tenant": "acme"/);
  assert.match(await page.textContent("#message-error"), /HTTP 500/);
  await page.screenshot({ path: join(SHOTS, "console-message.png") });
  await page.keyboard.press("Escape");
  await page.waitForSelector("#message[open]", { state: "detached" });

  // Clear the filter and take the overview screenshot.
  await page.fill("#filters input[name=topic]", "");
  await page.click("#filters button[type=submit]");
  await waitIn(page, () => document.querySelectorAll("#dead-table tbody tr").length === 2);
  await page.screenshot({ path: join(SHOTS, "console.png"), fullPage: true });

  // Replay the first one from its message view; the confirmation names the count.
  await page.click(`button[data-id="${first}"]`);
  await page.waitForSelector("#message[open]");
  await page.click("#message-replay");
  await page.waitForSelector("#confirm[open]");
  assert.match(await page.textContent("#confirm-text"), /^Replay 1 outbox row\?/);
  await page.click("#confirm-yes");
  const delivered = await until("the replayed row at the receiver", 15000, async () =>
    received.find((r) => r.headers["x-message-id"] === first));
  assert.deepEqual(JSON.parse(delivered.body), { order: 1, total: 12.5 });
  await waitIn(page, () => document.querySelector("#depth-outbox tr.dead td.num")?.textContent === "1", 15000);
  await waitIn(page, () => document.querySelectorAll("#dead-table tbody tr").length === 1);

  // "Replay all matching" counts first: cancel leaves the row dead.
  await page.click("#act-replay-all");
  await page.waitForSelector("#confirm[open]");
  assert.match(await page.textContent("#confirm-text"), /^Replay 1 outbox row\?/);
  await page.click("#confirm-no");
  assert.equal(psql(`SELECT state FROM outbox WHERE id = '${second}'`).trim(), "dead");

  // The inbox tab lists the inbox dead row.
  await page.click("#tab-inbox");
  await waitIn(page, () => document.querySelector("#dead-table tbody")?.textContent.includes("stripe"));
  assert.equal(await page.locator("#dead-table tbody tr").count(), 1);
  assert.match(await page.textContent("#act-replay-all"), /Requeue all matching/);

  // The transform tester.
  await page.click("#transform button[type=submit]");
  await waitIn(page, () => document.querySelector("#transform-result").textContent.includes("1250"));

  // Readable on a phone: nothing wider than the screen but the scrolling table.
  await page.setViewportSize({ width: 390, height: 844 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `the page is ${overflow}px wider than a phone`);
  await page.screenshot({ path: join(SHOTS, "console-phone.png"), fullPage: true });
  assert.deepEqual(errors, [], "no script error");
  await context.close();
});
