#!/usr/bin/env python3
"""The chaos ledger test (issue 17): replicas of `queuebox run` on a private PostgreSQL cluster
that this script starts itself (initdb into a temporary folder, its own port: never a shared
server), a receiver that records every request and fails or stalls a share of them, a producer
of keyed and unkeyed outbox rows and of webhooks through the push relay, and a fault schedule:
kill -9 and restart of a replica, SIGSTOP/SIGCONT longer than the lease, an immediate
PostgreSQL restart, row locks held by an outside session. At the end it prints the ledger and
exits 1 on any lost message or per-key order violation.

    bench/chaos/run.sh --short            # about a minute; scripts/test.sh runs this
    bench/chaos/run.sh --rows 100000 --webhooks 10000 --seconds 600   # the full run

Standard library only; PostgreSQL's own initdb, pg_ctl and psql. docs/reliability.md has the
ledger's definitions and the figures of the full run.
"""

import argparse
import http.server
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log(text):
    print(f"[chaos {time.strftime('%H:%M:%S')}] {text}", flush=True)


class PrivatePostgres:
    """A PostgreSQL cluster of this run only, owned by the postgres user (initdb refuses root)."""

    def __init__(self, root):
        self.dir = os.path.join(root, "pg")
        self.port = free_port()
        self.sockets = os.path.join(root, "pgsock")
        self.logfile = os.path.join(root, "pg.log")
        os.makedirs(self.dir)
        os.makedirs(self.sockets)
        for path in (self.dir, self.sockets):
            shutil.chown(path, "postgres", "postgres")
        open(self.logfile, "w").close()
        shutil.chown(self.logfile, "postgres", "postgres")
        self._as_postgres(["initdb", "-D", self.dir, "-A", "trust", "-U", "postgres"])

    def _as_postgres(self, argv, check=True):
        return subprocess.run(
            ["runuser", "-u", "postgres", "--"] + argv,
            check=check,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    def start(self):
        options = (
            f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 "
            "-c max_connections=100 -c fsync=on"
        )
        self._as_postgres(
            ["pg_ctl", "-D", self.dir, "-l", self.logfile, "-w", "-t", "60", "-o", options, "start"]
        )

    def stop(self, mode="fast"):
        self._as_postgres(["pg_ctl", "-D", self.dir, "-m", mode, "-w", "stop"], check=False)

    def url(self, db="chaos"):
        return f"postgres://postgres@127.0.0.1:{self.port}/{db}"

    def psql(self, sql, db="chaos", check=True, timeout=30):
        result = subprocess.run(
            ["psql", "-X", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", db,
             "-v", "ON_ERROR_STOP=1", "-Atq", "-c", sql],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise RuntimeError(result.stderr.strip())
        return result


class Receiver:
    """Records every delivery (2xx answered); fails `fail` of the requests with 500 and stalls
    `stall` of them for `stall_s` before answering 200."""

    def __init__(self, fail, stall, stall_s):
        self.lock = threading.Lock()
        self.deliveries = []  # (arrival index, payload) of the 2xx answers, in arrival order
        self.requests = 0
        self.rng = random.Random(7)
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with receiver.lock:
                    receiver.requests += 1
                    draw = receiver.rng.random()
                if draw < fail:
                    self._answer(500)
                    return
                if draw < fail + stall:
                    time.sleep(stall_s)
                try:
                    payload = json.loads(body)
                except ValueError:
                    payload = {"unparsed": body.decode("utf-8", "replace")}
                with receiver.lock:
                    receiver.deliveries.append(payload)
                self._answer(200)

            def _answer(self, status):
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # a sender killed mid-request resets its connection: expected here

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class Replica:
    def __init__(self, binary, root, index, database_url, receiver_port, lease_ms):
        self.binary = binary
        self.index = index
        self.port = free_port()
        self.dir = os.path.join(root, f"replica{index}")
        os.makedirs(self.dir)
        self.config = os.path.join(self.dir, "queuebox.yml")
        self.logfile = os.path.join(self.dir, "queuebox.log")
        with open(self.config, "w") as f:
            f.write(f"""database:
  url: "{database_url}"
  migrate: false
server:
  httpPort: {self.port}
outbox:
  pollIntervalMs: 50
  claimTimeoutMs: {lease_ms}
  retryBaseDelayMs: 100
  retryMaxDelayMs: 1000
  maxAttempts: 1000
inbox:
  relay:
    pollIntervalMs: 50
    claimTimeoutMs: {lease_ms}
    maxAttempts: 1000
sources:
  hooks:
    path: /hooks
    idempotencyKeyPath: $.id
    aggregateIdPath: $.agg
    topic: hook.event
destinations:
  receiver:
    type: http
    baseUrl: http://127.0.0.1:{receiver_port}/in
    timeoutMs: {lease_ms // 2}
routes:
  - topicPattern: "**"
    destination: receiver
log:
  level: warn
""")
        self.process = None
        self.stopped = False

    def start(self):
        out = open(self.logfile, "a")
        self.process = subprocess.Popen(
            [self.binary, "run", "--config", self.config],
            stdout=out,
            stderr=out,
            cwd=self.dir,
        )
        self.stopped = False

    def running(self):
        return self.process is not None and self.process.poll() is None

    def kill9(self):
        if self.running():
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def sigstop(self):
        if self.running():
            self.process.send_signal(signal.SIGSTOP)
            self.stopped = True

    def sigcont(self):
        if self.running() and self.stopped:
            self.process.send_signal(signal.SIGCONT)
        self.stopped = False

    def terminate(self):
        if self.process is None:
            return
        self.sigcont()
        if self.running():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Producer:
    """Inserts outbox rows (keyed and unkeyed, a per-key sequence in the payload) and posts
    webhooks to the replicas; remembers exactly what was committed or acknowledged."""

    def __init__(self, pg, replicas, rows, webhooks, keys, rng):
        self.pg = pg
        self.replicas = replicas
        self.rows = rows
        self.webhooks = webhooks
        self.keys = keys
        self.rng = rng
        self.committed = {}  # uid -> (key or None, n)
        self.acked = {}  # webhook id -> (aggregate, n)
        self.insert_failures = 0
        self.post_failures = 0
        self.stop = threading.Event()

    def insert_rows(self, rate_per_s):
        n = 0
        batch = max(50, min(500, int(rate_per_s // 2)))
        started = time.time()
        while n < self.rows and not self.stop.is_set():
            size = min(batch, self.rows - n)
            values, entries = [], []
            for i in range(n, n + size):
                key = None if self.rng.random() < 0.2 else f"k{self.rng.randrange(self.keys)}"
                uid = f"r{i}"
                payload = json.dumps({"kind": "row", "uid": uid, "k": key, "n": i})
                key_sql = "NULL" if key is None else f"'{key}'"
                values.append(f"('chaos.row', {key_sql}, '{payload}'::jsonb, 1000)")
                entries.append((uid, key, i))
            # 1000 attempts: with 10 % failures the column default of 5 lets about one row in
            # 100,000 go dead, which is not what this test looks for.
            sql = "INSERT INTO outbox (topic, key, payload, max_attempts) VALUES " + ", ".join(values)
            while True:
                try:
                    self.pg.psql(sql, timeout=20)
                    break
                except (RuntimeError, subprocess.TimeoutExpired):
                    self.insert_failures += 1
                    time.sleep(0.5)
                    # Committed after all? The first uid tells (one statement, all or none).
                    try:
                        found = self.pg.psql(
                            f"SELECT count(*) FROM outbox WHERE payload->>'uid' = '{entries[0][0]}'",
                            timeout=10,
                        ).stdout.strip()
                    except (RuntimeError, subprocess.TimeoutExpired):
                        continue
                    if found == "1":
                        break
            for uid, key, i in entries:
                self.committed[uid] = (key, i)
            n += size
            # Paced on a timeline: a slow insert (a fault, a loaded machine) is caught up on.
            ahead = started + n / rate_per_s - time.time()
            if ahead > 0:
                time.sleep(ahead)

    def post_webhooks(self, rate_per_s):
        started = time.time()
        for i in range(self.webhooks):
            if self.stop.is_set():
                break
            agg = f"a{self.rng.randrange(self.keys)}"
            hook_id = f"w{i}"
            body = json.dumps({"kind": "hook", "id": hook_id, "agg": agg, "n": i}).encode()
            deadline = time.time() + 120
            while time.time() < deadline:
                replica = self.rng.choice(self.replicas)
                request = urllib.request.Request(
                    f"http://127.0.0.1:{replica.port}/inbox/hooks",
                    data=body,
                    headers={"Content-Type": "application/json"},
                    method="POST",
                )
                try:
                    with urllib.request.urlopen(request, timeout=5) as answer:
                        if answer.status in (200, 202):
                            self.acked[hook_id] = (agg, i)
                            break
                except (urllib.error.URLError, OSError, TimeoutError):
                    pass
                self.post_failures += 1
                time.sleep(0.2)
            ahead = started + (i + 1) / rate_per_s - time.time()
            if ahead > 0:
                time.sleep(ahead)


def faults(pg, replicas, lease_ms, until, rng, events):
    """The fault schedule, round robin, one fault every few seconds, until `until`."""
    schedule = ["kill9", "sigstop", "rowlock", "pgrestart"]
    step = 0
    while time.time() < until:
        time.sleep(rng.uniform(3, 6))
        if time.time() >= until:
            break
        fault = schedule[step % len(schedule)]
        step += 1
        replica = rng.choice(replicas)
        if fault == "kill9":
            log(f"fault: kill -9 replica {replica.index}, restart after 1 s")
            replica.kill9()
            time.sleep(1)
            replica.start()
        elif fault == "sigstop":
            pause = lease_ms / 1000 + 2
            log(f"fault: SIGSTOP replica {replica.index} for {pause:.1f} s (lease {lease_ms} ms)")
            replica.sigstop()
            time.sleep(pause)
            replica.sigcont()
        elif fault == "rowlock":
            log("fault: an outside session holds FOR UPDATE on 5 pending outbox and inbox rows for 4 s")
            sql = (
                "BEGIN; SELECT id FROM outbox WHERE state = 'pending' ORDER BY sequence LIMIT 5 FOR UPDATE; "
                "SELECT id FROM inbox WHERE state = 'pending' ORDER BY created_at LIMIT 5 FOR UPDATE; "
                "SELECT pg_sleep(4); COMMIT;"
            )
            pg.psql(sql, check=False, timeout=30)
        elif fault == "pgrestart":
            log("fault: PostgreSQL stop -m immediate, start after 1 s")
            pg.stop("immediate")
            time.sleep(1)
            pg.start()
        events.append(fault)


def ledger(pg, receiver, producer):
    with receiver.lock:
        deliveries = list(receiver.deliveries)
    rows_seen, hooks_seen = {}, {}
    first_order = {}  # key -> list of n in first-arrival order
    late_duplicates = 0
    violations = []
    highest = {}  # key -> highest n delivered so far
    for payload in deliveries:
        kind = payload.get("kind")
        if kind == "row":
            uid, key, n = payload["uid"], payload.get("k"), payload["n"]
            seen = rows_seen
            ident = uid
        elif kind == "hook":
            ident, key, n = payload["id"], "agg:" + payload["agg"], payload["n"]
            seen = hooks_seen
        else:
            continue
        first = ident not in seen
        seen[ident] = seen.get(ident, 0) + 1
        if key is None:
            continue
        top = highest.get(key, -1)
        if n < top:
            if first:
                violations.append((key, n, top))
            else:
                late_duplicates += 1
        highest[key] = max(top, n)
        if first:
            first_order.setdefault(key, []).append(n)
    lost_rows = sorted(set(producer.committed) - set(rows_seen))
    lost_hooks = sorted(set(producer.acked) - set(hooks_seen))
    stored = pg.psql("SELECT idempotency_key FROM inbox WHERE source = 'hooks'").stdout.split()
    stored_set = set(stored)
    inbox_missing = sorted(set(producer.acked) - stored_set)
    inbox_twice = len(stored) - len(stored_set)
    stuck_outbox = int(pg.psql("SELECT count(*) FROM outbox WHERE state = 'processing'").stdout)
    stuck_inbox = int(pg.psql("SELECT count(*) FROM inbox WHERE state = 'processing'").stdout)
    dead = int(pg.psql("SELECT count(*) FROM outbox WHERE state = 'dead'").stdout)
    dead_examples = pg.psql(
        "SELECT coalesce(payload->>'uid', payload->>'id') || ': ' || coalesce(last_error, '') "
        "FROM outbox WHERE state = 'dead' LIMIT 5"
    ).stdout.splitlines()
    stuck_examples = pg.psql(
        "SELECT coalesce(payload->>'uid', payload->>'id') || ' attempt ' || attempt || ' ' || "
        "coalesce(last_error, '') FROM outbox WHERE state IN ('pending', 'processing') LIMIT 5"
    ).stdout.splitlines()
    sent = len(producer.committed) + len(producer.acked)
    delivered = len(rows_seen) + len(hooks_seen)
    duplicates = sum(c - 1 for c in rows_seen.values()) + sum(c - 1 for c in hooks_seen.values())
    return {
        "sent": sent,
        "outbox_rows_committed": len(producer.committed),
        "webhooks_acknowledged": len(producer.acked),
        "delivered": delivered,
        "lost": len(lost_rows) + len(lost_hooks),
        "lost_examples": (lost_rows + lost_hooks)[:10],
        "duplicates": duplicates,
        "late_duplicates_after_a_successor": late_duplicates,
        "order_violations": len(violations),
        "order_violation_examples": violations[:10],
        "acknowledged_webhooks_missing_from_inbox": len(inbox_missing),
        "inbox_rows_stored_twice": inbox_twice,
        "stuck_processing_outbox": stuck_outbox,
        "stuck_processing_inbox": stuck_inbox,
        "dead_outbox_rows": dead,
        "dead_examples": dead_examples,
        "open_outbox_examples": stuck_examples,
        "receiver_requests": receiver.requests,
        "insert_retries": producer.insert_failures,
        "webhook_post_retries": producer.post_failures,
    }


def drained(pg, producer):
    try:
        open_rows = int(pg.psql(
            "SELECT count(*) FROM outbox WHERE state IN ('pending', 'processing')", timeout=10
        ).stdout)
        open_hooks = int(pg.psql(
            "SELECT count(*) FROM inbox WHERE state IN ('pending', 'processing')", timeout=10
        ).stdout)
        relayed = int(pg.psql("SELECT count(*) FROM outbox WHERE topic = 'hook.event'", timeout=10).stdout)
    except (RuntimeError, subprocess.TimeoutExpired, ValueError):
        return False
    return open_rows == 0 and open_hooks == 0 and relayed >= len(producer.acked)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=os.environ.get("QUEUEBOX_BIN"))
    parser.add_argument("--short", action="store_true", help="the form scripts/test.sh runs")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--webhooks", type=int, default=10_000)
    parser.add_argument("--seconds", type=int, default=600, help="how long faults are injected")
    parser.add_argument("--keys", type=int, default=50)
    parser.add_argument("--lease-ms", type=int, default=3000)
    parser.add_argument("--fail", type=float, default=0.10)
    parser.add_argument("--stall", type=float, default=0.02)
    parser.add_argument("--drain-seconds", type=int, default=300)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args()
    if args.short:
        args.rows, args.webhooks, args.seconds, args.drain_seconds = 3000, 300, 40, 90
    if not args.binary or not os.access(args.binary, os.X_OK):
        sys.exit("chaos: give the queuebox binary with --binary or QUEUEBOX_BIN")
    rng = random.Random(args.seed)
    log(f"seed {args.seed}: {args.replicas} replicas, {args.rows} rows, {args.webhooks} webhooks, "
        f"{args.seconds} s of faults, lease {args.lease_ms} ms, receiver fails {args.fail:.0%}, stalls {args.stall:.0%}")
    root = tempfile.mkdtemp(prefix="queuebox-chaos-")
    os.chmod(root, 0o755)
    pg = PrivatePostgres(root)
    replicas = []
    ok_run = [False]  # the folder is kept for a look when the run failed
    try:
        pg.start()
        pg.psql("CREATE DATABASE chaos", db="postgres")
        log(f"private PostgreSQL on port {pg.port} in {pg.dir}")
        receiver = Receiver(args.fail, args.stall, 1.5)
        migrate = os.path.join(root, "migrate.yml")
        with open(migrate, "w") as f:
            f.write(f'database:\n  url: "{pg.url()}"\n')
        subprocess.run([args.binary, "migrate", "--config", migrate], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for i in range(args.replicas):
            replica = Replica(args.binary, root, i, pg.url(), receiver.port, args.lease_ms)
            replica.start()
            replicas.append(replica)
        time.sleep(2)
        producer = Producer(pg, replicas, args.rows, args.webhooks, args.keys, random.Random(args.seed + 1))
        started = time.time()
        until = started + args.seconds
        threads = [
            threading.Thread(target=producer.insert_rows, args=(args.rows / (args.seconds * 0.8),), daemon=True),
            threading.Thread(target=producer.post_webhooks, args=(args.webhooks / (args.seconds * 0.8),), daemon=True),
        ]
        for t in threads:
            t.start()
        events = []
        faults(pg, replicas, args.lease_ms, until, random.Random(args.seed + 2), events)
        # The producer gets a minute after the faults; then it stops, and what it did not
        # produce counts as unfinished (a failure: the run did not do what was asked).
        for t in threads:
            t.join(timeout=max(0, until + 60 - time.time()))
        producer.stop.set()
        for t in threads:
            t.join()
        producing = len(producer.committed) < args.rows or len(producer.acked) < args.webhooks
        for replica in replicas:
            replica.sigcont()
            if not replica.running():
                replica.start()
        log(f"faults done ({len(events)}: {', '.join(events)}); draining")
        drain_deadline = time.time() + args.drain_seconds
        while time.time() < drain_deadline and not drained(pg, producer):
            time.sleep(1)
        # Deliveries answered while the drain check ran have landed once the receiver is quiet.
        time.sleep(2)
        result = ledger(pg, receiver, producer)
        result["faults"] = events
        result["seconds"] = round(time.time() - started, 1)
        result["producer_unfinished"] = producing
        result["seed"] = args.seed
        print(json.dumps(result, indent=2))
        ok = result["lost"] == 0 and result["order_violations"] == 0 and not producing \
            and result["acknowledged_webhooks_missing_from_inbox"] == 0 and result["inbox_rows_stored_twice"] == 0
        log(f"ledger: sent {result['sent']}, delivered {result['delivered']}, lost {result['lost']}, "
            f"duplicates {result['duplicates']}, order violations {result['order_violations']}, "
            f"stuck processing {result['stuck_processing_outbox'] + result['stuck_processing_inbox']}")
        if not ok:
            for replica in replicas:
                log(f"replica {replica.index} log tail:")
                with open(replica.logfile, errors="replace") as f:
                    print("".join(f.readlines()[-20:]))
        ok_run[0] = ok
        if not ok:
            log(f"the run's folder is kept: {root}")
        print(f"chaos: {1 if ok else 0} passed, {0 if ok else 1} failed")
        return 0 if ok else 1
    finally:
        for replica in replicas:
            replica.terminate()
        pg.stop("fast")
        if os.environ.get("CHAOS_KEEP") != "1" and ok_run[0]:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
