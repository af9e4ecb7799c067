#!/usr/bin/env python3
"""A restarted broker acts on no metadata until it has caught up (3 nodes, RF=3).

Every node is killed with kill -9 and loses its metadata commit hint
(`__cluster_metadata/committed.json`, written without fsync by design, so a power cut
empties it), then all start again. Each node's quorum now replays its metadata log from
the beginning, publishing every intermediate image on the way: first the empty one, in
which the topic does not exist yet. Brokers that acted on those images deleted their copy
of the topic as "deleted" (all three copies, so every acknowledged record was gone) and
followed leaders of long ago. The nemesis found it under power loss
(`nemesis.py --faults power-loss`); here it is made certain.

Checked: every acknowledged record is read back, in order, and no node logged a topic
deletion. The time limits are hang guards, not performance assertions.
"""

import os
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import Cluster, fail, log, until  # noqa: E402
from nemesis import SETTINGS  # noqa: E402

TOPIC = "replayed"
PARTITIONS = 3
COUNT = 3000
GUARD_S = 90


def full_isr(admin):
    topic = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
    return (topic is not None and topic.error is None and len(topic.partitions) == PARTITIONS
            and all(p.leader > 0 and len(p.isrs) == 3 for p in topic.partitions.values()))


def read_all(bootstrap):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "replay-check",
                         "enable.auto.commit": False, "log_level": 2})
    got = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        deadline = time.time() + GUARD_S
        while sum(len(v) for v in got.values()) < COUNT and time.time() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            got[message.partition()].append(int(message.value()))
    finally:
        consumer.close()
    return got


def main():
    binary = os.path.abspath(os.environ.get("STRAND_BIN", "target/release/strand"))
    root = tempfile.mkdtemp(prefix="strand-metadata-replay-")
    cluster = Cluster(binary, root, settings=SETTINGS)
    try:
        cluster.launch()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap(), "log_level": 2})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(timeout=30)
        until("a leader and a full ISR for every partition", lambda: full_isr(admin), GUARD_S)
        producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5, "log_level": 2})
        sent = {p: [] for p in range(PARTITIONS)}
        for n in range(COUNT):
            producer.produce(TOPIC, value=str(n).encode(), partition=n % PARTITIONS)
            sent[n % PARTITIONS].append(n)
            if n % 500 == 0:
                producer.flush(30)
        if producer.flush(60):
            fail("records not acknowledged")
        log(f"{COUNT} records acknowledged; kill -9 of every node, commit hints lost")

        for i in cluster.ids:
            cluster.kill(i)
        for i in cluster.ids:
            hint = os.path.join(cluster.data_dir(i), "__cluster_metadata", "committed.json")
            if not os.path.exists(hint):
                fail(f"node {i} has no commit hint at {hint}: the test would prove nothing")
            os.remove(hint)
        marks = {i: os.path.getsize(os.path.join(root, f"n{i}.log")) for i in cluster.ids}
        cluster.start_all()
        for i in cluster.ids:
            if not cluster.wait_port(i):
                fail(f"node {i} did not restart; see {root}")
        until("a leader and a full ISR again", lambda: full_isr(admin), GUARD_S)

        got = read_all(cluster.bootstrap())
        for p in range(PARTITIONS):
            if got[p] != sent[p]:
                missing = len(set(sent[p]) - set(got[p]))
                fail(f"partition {p}: read {len(got[p])} of {len(sent[p])} records "
                     f"({missing} missing); see {root}")
        for i in cluster.ids:
            with open(os.path.join(root, f"n{i}.log"), errors="replace") as f:
                f.seek(marks[i])
                deleted = [line for line in f if "topic deleted" in line]
            if deleted:
                fail(f"node {i} deleted a topic while replaying its metadata: {deleted[0].strip()}")
        log(f"PASS: all {COUNT} records read back after the replay; no node deleted a topic")
        cluster.stop_checked()
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
