"""Retention and compaction with real clients (librdkafka): a topic with retention.ms of
two seconds loses its old segments, ListOffsets earliest moves, and a consumer at a
deleted offset gets OFFSET_OUT_OF_RANGE and follows auto.offset.reset; a compacted topic
with many versions per key reads back only the latest value per key, and a tombstone
stays readable until delete.retention.ms. Starts its own broker (STRAND_BIN)."""
import os
import signal
import tempfile
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from dataset import check, fail, ok
from restart_test import Broker, free_port


def wait_until(predicate, seconds, what):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.25)
    fail(f"timed out waiting for {what}")


with tempfile.TemporaryDirectory() as workdir:
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    config = os.path.join(workdir, "strand.toml")
    with open(config, "w") as f:
        f.write("retention_check_interval_ms = 250\ncleaner_backoff_ms = 250\n")
    broker = Broker(os.path.join(workdir, "data"), port, config=config)
    broker.start()
    admin = AdminClient({"bootstrap.servers": bootstrap})

    # Retention by time.
    topic = "short-lived"
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1,
                                  config={"retention.ms": "2000", "internal.segment.bytes": "1000"})])[topic].result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(100):
        producer.produce(topic, value=f"old-{i}-".encode() + b"x" * 50, partition=0)
        producer.flush(10)  # one batch each, so segment.bytes rolls often
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    low, high = probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    check((low, high) == (0, 100), f"100 records written, watermarks ({low}, {high})")
    time.sleep(2.5)
    for i in range(5):
        producer.produce(topic, value=f"new-{i}".encode(), partition=0)
    producer.flush(10)
    wait_until(lambda: probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0] >= 100, 15,
               "retention to delete the expired segments")
    low, high = probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    check(low >= 100 and high == 105, f"retention moved the log start: watermarks ({low}, {high})")

    # A consumer positioned at a deleted offset follows auto.offset.reset.
    for reset, expect_first in (("earliest", low), ("latest", None)):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reset-{reset}",
                             "auto.offset.reset": reset, "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, 0, 5)])
        if reset == "latest":
            time.sleep(2)
            producer.produce(topic, value=b"after-reset", partition=0)
            producer.flush(10)
        message = None
        deadline = time.time() + 15
        while time.time() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                break
        consumer.close()
        if message is None or message.error():
            fail(f"auto.offset.reset={reset}: nothing consumed ({message.error() if message else None})")
        if reset == "earliest":
            check(message.offset() == expect_first, f"offset 5 was deleted; auto.offset.reset=earliest resumed at {message.offset()}")
        else:
            check(message.value() == b"after-reset", "auto.offset.reset=latest resumed at the end")

    # Compaction.
    compacted = "latest-only"
    admin.create_topics([NewTopic(compacted, num_partitions=1, replication_factor=1, config={
        "cleanup.policy": "compact", "segment.ms": "200", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "86400000"})])[compacted].result(15)
    keyless = []
    producer.produce(compacted, value=b"no key", partition=0, on_delivery=lambda e, m: keyless.append(e))
    producer.flush(10)
    check(keyless[0] is not None and keyless[0].code() == KafkaError.INVALID_RECORD,
          f"a keyless record on a compacted topic -> INVALID_RECORD ({keyless[0]})")
    versions, keys = 50, 20
    for version in range(versions):
        for key in range(keys):
            producer.produce(compacted, key=f"key-{key}".encode(), value=f"v{version}".encode(), partition=0)
        producer.flush(10)
        time.sleep(0.02)
    producer.produce(compacted, key=b"key-0", value=None, partition=0)  # tombstone
    producer.flush(10)
    time.sleep(0.3)
    for i in range(3):  # roll the segment holding the last versions
        producer.produce(compacted, key=b"filler", value=str(i).encode(), partition=0)
        producer.flush(10)
        time.sleep(0.3)

    def read_all():
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.time_ns()}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.assign([TopicPartition(compacted, 0, 0)])
        records = []
        idle = time.time()
        while time.time() - idle < 2:
            message = consumer.poll(0.3)
            if message is not None and not message.error():
                records.append((message.offset(), message.key(), message.value()))
                idle = time.time()
        consumer.close()
        return records

    total = versions * keys + 1 + 3
    wait_until(lambda: len(read_all()) < total // 4, 30, "the cleaner to compact the topic")
    records = read_all()
    latest = {}
    for offset, key, value in records:
        latest[key] = value
    check(all(latest[f"key-{k}".encode()] == f"v{versions - 1}".encode() for k in range(1, keys)),
          f"compacted: every key reads back its latest value ({len(records)} of {total} records left)")
    check(b"key-0" in latest and latest[b"key-0"] is None, "the tombstone is still readable before delete.retention.ms")
    offsets = [offset for offset, _, _ in records]
    check(offsets == sorted(offsets) and len(set(offsets)) == len(offsets), "offsets kept their order, no duplicates")
    check(broker.stop(signal.SIGTERM) == 0, "broker stopped cleanly")
    broker.start()
    check(read_all() == records, "the compacted log reads the same after a restart")
    check(broker.stop(signal.SIGTERM) == 0, "broker stopped cleanly again")
print("PASS retention and compaction (librdkafka)")
