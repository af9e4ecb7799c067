#!/usr/bin/env python3
"""Stalled senders against a cluster's partition leader (3 nodes, RF=3, acks=all).

Before the fix, six connections that announced 100 MiB requests and stalled froze the
leader: acks went to zero and, since followers fetch over the same port, the ISR shrank
to the leader. Here 20 such connections and 600 with 1 MiB prefixes stall on the leader
for longer than replica.lag.time.max.ms (3 s in these settings); meanwhile a fresh
librdkafka producer's acks=all writes are acknowledged, a consumer reads them back, and
the ISR stays whole. The time limits are hang guards, not performance assertions.
"""

import os
import socket
import struct
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import Cluster, fail, log  # noqa: E402
from nemesis import SETTINGS  # noqa: E402

TOPIC = "stalled"
GUARD_S = 15
STALL_S = 8  # over replica_lag_time_max_ms (3 s): a frozen leader would shrink its ISR


def describe(admin):
    return admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]


def stall(host, port):
    """Opens the hostile connections; returns them (closing them ends the attack)."""
    sockets = []
    for size, count in ((100 * 1024 * 1024, 20), (1024 * 1024, 600)):
        for _ in range(count):
            s = socket.create_connection((host, port), timeout=5)
            s.sendall(struct.pack(">i", size) + b"\x00")
            sockets.append(s)
    return sockets


def main():
    binary = os.path.abspath(os.environ.get("STRAND_BIN", "target/release/strand"))
    root = tempfile.mkdtemp(prefix="strand-stall-")
    cluster = Cluster(binary, root, settings=SETTINGS)
    attackers = []
    try:
        cluster.launch()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap(), "log_level": 2})
        admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(timeout=30)
        deadline = time.time() + 60
        while True:
            partition = describe(admin)
            if partition.leader > 0 and len(partition.isrs) == 3:
                break
            if time.time() > deadline:
                fail(f"partition never got a leader and a full ISR: {partition}")
            time.sleep(0.3)
        leader = partition.leader
        host, port, _ = cluster.addr[leader]
        log(f"leader is node {leader}; opening stalled connections to {host}:{port}")
        attackers = stall(host, port)
        started = time.time()

        producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                             "message.timeout.ms": GUARD_S * 1000, "log_level": 2})
        acked, failed = [], []

        def report(error, message):
            (failed if error else acked).append(error or message.offset())

        for i in range(100):
            producer.produce(TOPIC, value=b"during-stall-%d" % i, partition=0, on_delivery=report)
        remaining = producer.flush(GUARD_S)
        if remaining or failed or len(acked) != 100:
            fail(f"acks=all under the stall: {len(acked)} acked, {failed[:3]} failed, "
                 f"{remaining} unsent")
        log(f"100 acks=all writes acknowledged {time.time() - started:.2f} s into the stall")

        consumer = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "stall-reader",
                             "enable.auto.commit": False, "log_level": 2})
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        values = []
        read_deadline = time.time() + GUARD_S
        while len(values) < 100 and time.time() < read_deadline:
            message = consumer.poll(1)
            if message is not None and not message.error():
                values.append(message.value())
        consumer.close()
        if sorted(values) != sorted(b"during-stall-%d" % i for i in range(100)):
            fail(f"read back {len(values)} of 100 records during the stall")

        time.sleep(max(0.0, STALL_S - (time.time() - started)))
        partition = describe(admin)
        if partition.leader != leader or len(partition.isrs) != 3:
            fail(f"after {STALL_S} s of stalled connections: leader {partition.leader}, "
                 f"ISR {partition.isrs} (followers could not fetch)")
        log(f"after {time.time() - started:.1f} s of stalled connections the ISR is still "
            f"{sorted(partition.isrs)}")
        for s in attackers:
            s.close()
        attackers = []
        codes = cluster.stop_all()
        if any(code != 0 for code in codes.values()):
            fail(f"nodes did not stop cleanly: {codes}")
        log("PASS")
    finally:
        for s in attackers:
            s.close()
        cluster.destroy()


if __name__ == "__main__":
    main()
