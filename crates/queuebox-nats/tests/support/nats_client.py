"""The standard client of the NATS tests: nats-py (PyPI, pinned in scripts/test-requirements.txt),
a client nobody here wrote, so what QueueBox publishes and consumes is checked against another
implementation of the protocol.

Usage (one command per run; JSON on standard output):
  nats_client.py URL create-stream NAME SUBJECT [SUBJECT...]   [--duplicate-window SECONDS]
  nats_client.py URL delete-stream NAME
  nats_client.py URL stream-exists NAME          -> {"exists": true|false}
  nats_client.py URL stream-info NAME            -> {"messages": n}
  nats_client.py URL read-stream NAME            -> one JSON object per stored message
  nats_client.py URL publish FILE                -> FILE holds JSON lines
      {"subject": ..., "data": <text>, "data_b64": <base64>, "headers": {...}}; JetStream
      publish with acknowledgement, one after the other
  nats_client.py URL consumer-info STREAM DURABLE -> the consumer's config and counts
"""

import asyncio
import base64
import json
import sys

import nats
from nats.js.api import StreamConfig


async def main(argv):
    url, command, *args = argv
    # No reconnect loop: a test's client either reaches its server at once or fails.
    nc = await nats.connect(url, connect_timeout=5, allow_reconnect=False, max_reconnect_attempts=0)
    js = nc.jetstream()
    try:
        if command == "create-stream":
            window = None
            if "--duplicate-window" in args:
                i = args.index("--duplicate-window")
                window = float(args[i + 1])
                args = args[:i] + args[i + 2 :]
            name, *subjects = args
            config = StreamConfig(name=name, subjects=subjects)
            if window is not None:
                config.duplicate_window = window
            await js.add_stream(config)
            print(json.dumps({"created": name}))
        elif command == "delete-stream":
            try:
                await js.delete_stream(args[0])
            except nats.js.errors.NotFoundError:
                pass
            print(json.dumps({"deleted": args[0]}))
        elif command == "stream-exists":
            try:
                await js.stream_info(args[0])
                print(json.dumps({"exists": True}))
            except nats.js.errors.NotFoundError:
                print(json.dumps({"exists": False}))
        elif command == "stream-info":
            info = await js.stream_info(args[0])
            print(json.dumps({"messages": info.state.messages}))
        elif command == "read-stream":
            info = await js.stream_info(args[0])
            last = info.state.last_seq
            seq = info.state.first_seq
            while last and seq <= last:
                try:
                    msg = await js.get_msg(args[0], seq)
                except nats.js.errors.NotFoundError:
                    seq += 1
                    continue
                print(
                    json.dumps(
                        {
                            "seq": msg.seq,
                            "subject": msg.subject,
                            "headers": dict(msg.headers or {}),
                            "data": (msg.data or b"").decode("utf-8", "replace"),
                        }
                    )
                )
                seq += 1
        elif command == "publish":
            count = 0
            with open(args[0]) as lines:
                for line in lines:
                    if not line.strip():
                        continue
                    m = json.loads(line)
                    if "data_b64" in m:
                        data = base64.b64decode(m["data_b64"])
                    else:
                        data = m["data"].encode("utf-8")
                    await js.publish(m["subject"], data, headers=m.get("headers") or None)
                    count += 1
            print(json.dumps({"published": count}))
        elif command == "consumer-info":
            info = await js.consumer_info(args[0], args[1])
            print(
                json.dumps(
                    {
                        "ack_policy": str(info.config.ack_policy),
                        "ack_wait": info.config.ack_wait,
                        "filter_subject": info.config.filter_subject,
                        "num_ack_pending": info.num_ack_pending,
                        "num_pending": info.num_pending,
                        "num_redelivered": info.num_redelivered,
                    }
                )
            )
        else:
            raise SystemExit(f"unknown command {command}")
    finally:
        # A close that does not finish (nats-py has had such hangs) must not keep the test
        # waiting: what the command printed is its answer either way.
        try:
            await asyncio.wait_for(nc.close(), 5)
        except Exception as err:  # noqa: BLE001 - the answer is already printed
            print(f"nats_client.py: close did not finish: {err!r}", file=sys.stderr)


asyncio.run(main(sys.argv[1:]))
