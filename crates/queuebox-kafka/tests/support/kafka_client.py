"""The standard Kafka client of the tests: Confluent's confluent-kafka from PyPI (pinned in
scripts/test-requirements.txt). It creates and deletes topics, publishes records with keys and
headers, reads every record of a topic back, reports the offsets a consumer group committed,
and computes the partition of a key with the Java client's default partitioner (murmur2), the
standard DST-41 refers to. Output: one JSON object per line.

Usage: kafka_client.py BOOTSTRAP COMMAND ARGS...
  create-topic TOPIC PARTITIONS
  delete-topic TOPIC
  publish FILE          one JSON object per line: topic, key | key_b64 (optional),
                        value | value_b64 | null value (a tombstone), headers (object), partition
  read TOPIC            every record of TOPIC, in partition and offset order
  committed GROUP TOPIC the committed offset of each partition (-1001: none)
  partition-for KEY N   the partition of KEY among N by Kafka's default partitioner
  fill TOPIC N          (bench) N JSON records of about 190 bytes, batched, acks=all
  floor-consume TOPIC N POLL  (bench) the raw consumer floor: a consumer group reads N records,
                        at most POLL per poll, and commits synchronously after each poll
  floor-produce TOPIC N WINDOW  (bench) the raw producer floor: idempotent, acks=all, linger 1 ms,
                        at most WINDOW records waiting for their acknowledgement
"""

import base64
import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def out(value):
    print(json.dumps(value), flush=True)


def murmur2(data: bytes) -> int:
    """org.apache.kafka.common.utils.Utils.murmur2, as a signed 32-bit value."""
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    r = 24
    h = (seed ^ length) & 0xFFFFFFFF
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = (data[i4] & 0xFF) + ((data[i4 + 1] & 0xFF) << 8) + ((data[i4 + 2] & 0xFF) << 16) + ((data[i4 + 3] & 0xFF) << 24)
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    if rest == 3:
        h ^= (data[(length & ~3) + 2] & 0xFF) << 16
    if rest >= 2:
        h ^= (data[(length & ~3) + 1] & 0xFF) << 8
    if rest >= 1:
        h ^= data[length & ~3] & 0xFF
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def java_partition(key: bytes, partitions: int) -> int:
    """BuiltInPartitioner.partitionForKey: toPositive(murmur2(key)) % partitions."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap, topic, partitions):
    client = admin(bootstrap)
    futures = client.create_topics([NewTopic(topic, num_partitions=int(partitions), replication_factor=1)])
    wanted = int(partitions)
    for future in futures.values():
        try:
            future.result(30)
        except KafkaException as err:
            # A client's metadata request may have created it already (auto-creation, with the
            # broker's default partition count).
            if err.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
            wanted = None
    # The topic is usable once its metadata lists every partition.
    deadline = time.time() + 30
    while time.time() < deadline:
        meta = client.list_topics(topic, timeout=10)
        found = meta.topics.get(topic)
        if found is not None and found.error is None and len(found.partitions) in (wanted, len(found.partitions) if wanted is None else wanted):
            out({"created": topic, "partitions": len(found.partitions)})
            return
        time.sleep(0.2)
    raise SystemExit(f"topic {topic} has no metadata after 30 s")


def delete_topic(bootstrap, topic):
    client = admin(bootstrap)
    futures = client.delete_topics([topic])
    for future in futures.values():
        try:
            future.result(30)
        except KafkaException:
            pass
    out({"deleted": topic})


def decode(record, name):
    if f"{name}_b64" in record:
        return base64.b64decode(record[f"{name}_b64"])
    value = record.get(name)
    return None if value is None else value.encode()


def publish(bootstrap, path):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    failures = []

    def report(err, _msg):
        if err is not None:
            failures.append(str(err))

    count = 0
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            kwargs = {"value": decode(record, "value"), "on_delivery": report}
            key = decode(record, "key")
            if key is not None:
                kwargs["key"] = key
            if record.get("headers"):
                kwargs["headers"] = [(k, v.encode()) for k, v in record["headers"].items()]
            if "partition" in record:
                kwargs["partition"] = record["partition"]
            while True:
                try:
                    producer.produce(record["topic"], **kwargs)
                    break
                except BufferError:
                    producer.poll(0.1)
            count += 1
            producer.poll(0)
    remaining = producer.flush(60)
    if remaining or failures:
        raise SystemExit(f"publish failed: {remaining} unflushed, {failures[:3]}")
    out({"published": count})


def text(value):
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(value).decode()


def read(bootstrap, topic):
    """Every record of the topic. tansu's high watermark can lag its log (it reported 1 for a
    partition holding 2000 records), so the read ends after 2 s without a record, not at it."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"qb-reader-{time.time_ns()}", "enable.auto.commit": False})
    meta = consumer.list_topics(topic, timeout=10)
    partitions = sorted(meta.topics[topic].partitions)
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    records = []
    idle_since = time.time()
    deadline = time.time() + 120
    while time.time() - idle_since < 2.0 and time.time() < deadline:
        msg = consumer.poll(0.25)
        if msg is None:
            continue
        if msg.error():
            raise SystemExit(str(msg.error()))
        records.append(msg)
        idle_since = time.time()
    consumer.close()
    records.sort(key=lambda m: (m.partition(), m.offset()))
    for m in records:
        out({
            "partition": m.partition(),
            "offset": m.offset(),
            "key": text(m.key()),
            "value": text(m.value()),
            "headers": [[k, text(v)] for k, v in (m.headers() or [])],
        })


def committed(bootstrap, group, topic):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    meta = consumer.list_topics(topic, timeout=10)
    partitions = [TopicPartition(topic, p) for p in sorted(meta.topics[topic].partitions)]
    for tp in consumer.committed(partitions, timeout=10):
        out({"partition": tp.partition, "offset": tp.offset})
    consumer.close()


def bench_value(i):
    return json.dumps({"id": f"m-{i}", "n": i, "pad": "x" * 150}).encode()


def fill(bootstrap, topic, n):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    for i in range(int(n)):
        while True:
            try:
                producer.produce(topic, value=bench_value(i), partition=0)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(120):
        raise SystemExit("fill: records left unflushed")
    out({"filled": int(n)})


def floor_consume(bootstrap, topic, n, poll):
    n, poll = int(n), int(poll)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"qb-floor-{time.time_ns()}",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
                         "heartbeat.interval.ms": 1000})
    consumer.subscribe([topic])
    seen = 0
    started = None
    deadline = time.time() + 600
    while seen < n and time.time() < deadline:
        batch = consumer.consume(num_messages=poll, timeout=0.5)
        if not batch:
            continue
        if started is None:
            started = time.time()
        seen += len(batch)
        last = batch[-1]
        consumer.commit(offsets=[TopicPartition(topic, last.partition(), last.offset() + 1)], asynchronous=False)
    seconds = time.time() - (started or time.time())
    consumer.close()
    print(f"records={seen} seconds={seconds:.3f}")


def floor_produce(bootstrap, topic, n, window):
    n, window = int(n), int(window)
    # The settings of QueueBox's Kafka destination (destination.rs, producer_config), linger 1 ms
    # included (issue 11), so the floor measures librdkafka as QueueBox drives it.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 1})
    waiting = [0]
    failed = []

    def report(err, _msg):
        waiting[0] -= 1
        if err is not None:
            failed.append(str(err))

    started = time.time()
    for i in range(n):
        while waiting[0] >= window:
            producer.poll(0.01)
        producer.produce(topic, value=bench_value(i), partition=0, on_delivery=report)
        waiting[0] += 1
        producer.poll(0)
    producer.flush(120)
    seconds = time.time() - started
    if failed:
        raise SystemExit(f"floor-produce: {len(failed)} failed: {failed[:3]}")
    print(f"records={n} seconds={seconds:.3f}")


def main():
    bootstrap, command, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if command == "create-topic":
        create_topic(bootstrap, *args)
    elif command == "delete-topic":
        delete_topic(bootstrap, *args)
    elif command == "publish":
        publish(bootstrap, *args)
    elif command == "read":
        read(bootstrap, *args)
    elif command == "committed":
        committed(bootstrap, *args)
    elif command == "fill":
        fill(bootstrap, *args)
    elif command == "floor-consume":
        floor_consume(bootstrap, *args)
    elif command == "floor-produce":
        floor_produce(bootstrap, *args)
    elif command == "partition-for":
        out({"partition": java_partition(args[0].encode(), int(args[1]))})
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main()
