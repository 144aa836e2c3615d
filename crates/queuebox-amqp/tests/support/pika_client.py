"""The standard RabbitMQ client of the tests (pika, from PyPI, pinned in
scripts/test-requirements.txt): declares, publishes, reads back and deletes what a test names,
so QueueBox's AMQP side is checked against a client nobody here wrote.

Usage: pika_client.py URL COMMAND [ARGS]; JSON in on stdin, JSON lines out on stdout.
  declare          stdin {"exchanges":[{"name","type"}],"queues":[{"name","bind":[{"exchange","key"}]}]}
  publish          stdin: one JSON object a line {"queue","body"|"body_b64","message_id",
                   "correlation_id","timestamp","headers"}; publisher confirms on
  publish-many Q N publishes N bodies {"id":"m-<i>","n":i} to queue Q, confirmed
  get Q MAX WAIT   reads up to MAX messages, stopping after WAIT seconds without one; acks
  count Q          {"messages":n,"consumers":c}
  delete           stdin {"queues":[...],"exchanges":[...]}
"""

import base64
import datetime
import decimal
import json
import sys
import time

import pika


def connect(url):
    return pika.BlockingConnection(pika.URLParameters(url))


def typed(value):
    """Header values with a type tag, so a test can send every AMQP field type."""
    if isinstance(value, dict) and "$type" in value:
        kind, raw = value["$type"], value["value"]
        if kind == "decimal":
            return decimal.Decimal(raw)
        if kind == "timestamp":
            return datetime.datetime.fromtimestamp(raw, datetime.timezone.utc)
        if kind == "bytes":
            return base64.b64decode(raw)
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return value


def plain(value):
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, (decimal.Decimal, datetime.datetime)):
        return str(value)
    return value


def main():
    url, command, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    connection = connect(url)
    channel = connection.channel()
    if command == "declare":
        spec = json.load(sys.stdin)
        for exchange in spec.get("exchanges", []):
            channel.exchange_declare(exchange["name"], exchange.get("type", "topic"), durable=True)
        for queue in spec.get("queues", []):
            channel.queue_declare(queue["name"], durable=True, arguments=queue.get("arguments"))
            for bind in queue.get("bind", []):
                channel.queue_bind(queue["name"], bind["exchange"], routing_key=bind.get("key", ""))
    elif command == "publish":
        channel.confirm_delivery()
        for line in sys.stdin:
            if not line.strip():
                continue
            m = json.loads(line)
            body = base64.b64decode(m["body_b64"]) if "body_b64" in m else m["body"].encode()
            properties = pika.BasicProperties(
                message_id=m.get("message_id"),
                correlation_id=m.get("correlation_id"),
                timestamp=m.get("timestamp"),
                headers=typed(m.get("headers")) if m.get("headers") is not None else None,
                delivery_mode=2,
            )
            channel.basic_publish("", m["queue"], body, properties, mandatory=True)
    elif command == "publish-many":
        queue, count = args[0], int(args[1])
        channel.confirm_delivery()
        for i in range(count):
            body = json.dumps({"id": "m-%d" % i, "n": i}).encode()
            channel.basic_publish("", queue, body, pika.BasicProperties(delivery_mode=2))
    elif command == "get":
        queue, most, wait = args[0], int(args[1]), float(args[2])
        got, last = 0, time.monotonic()
        while got < most and time.monotonic() - last < wait:
            method, properties, body = channel.basic_get(queue)
            if method is None:
                time.sleep(0.05)
                continue
            got, last = got + 1, time.monotonic()
            print(json.dumps({
                "exchange": method.exchange,
                "routing_key": method.routing_key,
                "redelivered": method.redelivered,
                "body": body.decode("utf-8", "replace"),
                "message_id": properties.message_id,
                "content_type": properties.content_type,
                "delivery_mode": properties.delivery_mode,
                "headers": plain(properties.headers or {}),
                "header_types": {k: type(v).__name__ for k, v in (properties.headers or {}).items()},
            }), flush=True)
            channel.basic_ack(method.delivery_tag)
    elif command == "count":
        q = channel.queue_declare(args[0], passive=True)
        print(json.dumps({"messages": q.method.message_count, "consumers": q.method.consumer_count}))
    elif command == "delete":
        spec = json.load(sys.stdin)
        for queue in spec.get("queues", []):
            channel.queue_delete(queue)
        for exchange in spec.get("exchanges", []):
            channel.exchange_delete(exchange)
    else:
        sys.exit("unknown command " + command)
    connection.close()


if __name__ == "__main__":
    main()
