// graphile-worker, the peer of bench/pull-batch.sh (issue 16 item 5 names it): the same 10,000
// no-op jobs drained by its worker pool, with its defaults and with its batching (a local queue
// of `batch` jobs fetched and locked at once, and completions batched, `completeJobBatchDelay`
// 0). Its schema lives in SCHEMA of the same database.
//
//   node graphile.mjs init URL SCHEMA                  installs graphile-worker's schema
//   node graphile.mjs insert URL SCHEMA N              adds N jobs of task `bench` (payloads of
//                                                      about 200 bytes), one add_jobs statement
//   node graphile.mjs run URL SCHEMA C BATCH MODE N    MODE: defaults | batched; prints `ready`,
//                                                      and once N jobs ran and none is left,
//                                                      `ms=<first job start -> no job left>`
//
// graphile-worker deletes a job when it completes, so the database keeps no completion time:
// the time is the driver's wall clock, from the start of the first job to the moment a query of
// the pool sees no job left (every completion committed), checked every 5 ms once every job ran.
import { Logger, run, runMigrations } from "graphile-worker";
import pg from "pg";

const [mode, url, schema, ...rest] = process.argv.slice(2);
const quoted = `"${schema.replaceAll('"', '""')}"`;

if (mode === "init") {
    await runMigrations({ connectionString: url, schema });
} else if (mode === "insert") {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(
        `SELECT count(*) FROM ${quoted}.add_jobs(ARRAY(
             SELECT ROW('bench', json_build_object('id', i, 'kind', 'bench.pulled', 'note', repeat('x', 150)),
                        NULL, NULL, NULL, NULL, NULL, NULL)::${quoted}.job_spec
             FROM generate_series(1, $1::int) AS i))`,
        [Number(rest[0])],
    );
    await client.end();
} else if (mode === "run") {
    const [concurrency, batch, flavour, jobs] = [Number(rest[0]), Number(rest[1]), rest[2], Number(rest[3])];
    let started = 0;
    let ran = 0;
    let allRan;
    const everyJobRan = new Promise((resolve) => (allRan = resolve));
    const preset =
        flavour === "batched"
            ? { worker: { localQueue: { size: batch }, completeJobBatchDelay: 0 } }
            : undefined;
    const runner = await run({
        connectionString: url,
        schema,
        concurrency,
        pollInterval: 100,
        noHandleSignals: true,
        // Errors only, on stderr: stdout carries `ready` and the result.
        logger: new Logger(() => (level, message) => {
            if (level === "error") console.error(message);
        }),
        ...(preset ? { preset } : {}),
        taskList: {
            bench: async () => {
                if (started === 0) started = performance.now();
                ran += 1;
                if (ran === jobs) allRan();
            },
        },
    });
    console.log("ready");
    await everyJobRan;
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const left = async () =>
        (await client.query(`SELECT count(*)::int AS n FROM ${quoted}._private_jobs`)).rows[0].n;
    while ((await left()) > 0) await new Promise((r) => setTimeout(r, 5));
    console.log(`ms=${(performance.now() - started).toFixed(1)}`);
    await client.end();
    // The driver reads this process's CPU time, then stops it with SIGTERM.
    await runner.promise;
} else {
    console.error(`graphile.mjs: unknown mode ${mode}`);
    process.exit(2);
}

