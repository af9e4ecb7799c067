#!/usr/bin/env python3
"""A damaged replica steps down (3 nodes, RF=3).

A byte of a record is flipped in a sealed, flushed segment of the partition leader while
it is down; it restarts, catches up and, as the preferred replica, leads again. A
librdkafka consumer then reads the partition from the start: the leader's read finds the
damaged batch (CORRUPT_MESSAGE to the client), the broker reports its replica failed,
the controller moves leadership to a healthy in-sync replica and takes the damaged one
out of the ISR, and the consumer reads every record intact from the new leader. Before,
the damaged leader kept leading and the consumer never got past the damage.

The time limits are hang guards, not performance assertions.
"""

import glob
import os
import signal
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import Cluster, fail, log  # noqa: E402
from nemesis import SETTINGS  # noqa: E402
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from corruption_test import COUNT, DAMAGED, flip_byte, value  # noqa: E402

TOPIC = "damaged"
GUARD_S = 60


def describe(admin):
    return admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]


def wait_for(admin, what, predicate):
    deadline = time.time() + GUARD_S
    while True:
        partition = describe(admin)
        if predicate(partition):
            return partition
        if time.time() > deadline:
            fail(f"{what}: still {partition}")
        time.sleep(0.3)


def main():
    binary = os.path.abspath(os.environ.get("STRAND_BIN", "target/release/strand"))
    root = tempfile.mkdtemp(prefix="strand-damaged-replica-")
    settings = dict(SETTINGS, segment_bytes=32768)
    cluster = Cluster(binary, root, settings=settings)
    try:
        cluster.launch()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap(), "log_level": 2})
        admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(timeout=30)
        first = wait_for(admin, "a leader and a full ISR",
                         lambda p: p.leader > 0 and len(p.isrs) == 3)
        preferred = first.replicas[0]
        producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                             "linger.ms": 0, "log_level": 2})
        for n in range(COUNT):
            producer.produce(TOPIC, value=value(n), partition=0)
            if n % 100 == 0:
                producer.flush(10)
        if producer.flush(30):
            fail("records not acknowledged")
        log(f"{COUNT} records acknowledged; damaging node {preferred}'s copy")

        # A clean stop flushes every segment: the damage lies below the recovery point.
        cluster.kill(preferred, signal.SIGTERM)
        segments = sorted(glob.glob(os.path.join(root, f"n{preferred}", f"{TOPIC}-0", "*.log")))
        path = flip_byte(segments, value(DAMAGED))
        if path is None:
            fail(f"record {DAMAGED} not found in node {preferred}'s segments {segments}")
        log(f"flipped a byte of record {DAMAGED} in node {preferred}'s {os.path.basename(path)}")
        cluster.start(preferred)
        # Caught up and, as the preferred replica, leading again.
        wait_for(admin, f"node {preferred} leading again",
                 lambda p: p.leader == preferred and len(p.isrs) == 3)
        log(f"node {preferred} (damaged) leads again")

        consumer = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "reader",
                             "enable.auto.commit": False, "fetch.error.backoff.ms": 100,
                             "topic.metadata.refresh.interval.ms": 1000, "log_level": 2})
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        values, errors = [], []
        deadline = time.time() + GUARD_S
        while len(values) < COUNT and time.time() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                errors.append(message.error().name())
            else:
                values.append(message.value())
        consumer.close()
        expected = [value(n) for n in range(COUNT)]
        if values != expected:
            damaged = [v for v in values if v not in set(expected)]
            fail(f"read {len(values)} of {COUNT} records ({len(damaged)} damaged, errors "
                 f"{sorted(set(errors))}): the damaged leader did not step down")
        log(f"all {COUNT} records read intact (client errors on the way: {sorted(set(errors))})")

        moved = describe(admin)
        log(f"now: leader {moved.leader}, ISR {sorted(moved.isrs)}")
        # The damaged replica stops following: it neither rejoins the ISR nor wins
        # leadership back at the next preferred-leader check (every 5 s here).
        time.sleep(8)
        later = describe(admin)
        if later.leader == preferred or preferred in later.isrs:
            fail(f"the damaged replica came back: leader {later.leader}, ISR {later.isrs}")
        log(f"8 s later: leader {later.leader}, ISR {sorted(later.isrs)} (damaged node out)")
        with open(os.path.join(root, f"n{preferred}.log")) as f:
            text = f.read()
        for line in ("corrupt batch found by a read", "replica failed"):
            if line not in text:
                fail(f"node {preferred}'s log lacks {line!r}")
        log(f"node {preferred} logged the damage and reported its replica failed")
        codes = cluster.stop_all()
        if any(code != 0 for code in codes.values()):
            fail(f"nodes did not stop cleanly: {codes}")
        log("PASS")
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
