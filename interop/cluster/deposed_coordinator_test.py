#!/usr/bin/env python3
"""A deposed group coordinator does not answer committed offsets from before its fall.

The transactional nemesis (seed 175518002) found it: the node coordinating the workers'
group was SIGSTOPped past its session, the controller fenced it and another node took the
group over, and the workers committed there. Resumed, the old node still believed its
image for 1.4 s and answered a worker's OffsetFetch from the state it had when it froze:
the worker rewound to offsets two committed transactions old and transformed 100 input
records a second time.

Here: a group commits offset 10 on its coordinator; an OffsetFetch connection to that
node is opened; the node is SIGSTOPped until another node leads the group's
`__consumer_offsets` partition; offset 20 is committed through the new coordinator; the
OffsetFetch is sent to the frozen node (it waits in the socket) and the node resumed. Its
answer must not be 10: NOT_COORDINATOR (or COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS)
until it has heard from the controller, or 20. Before the leadership lease the frozen
node answered 10 as soon as it woke up.
"""

import os
import socket
import struct
import sys
import tempfile
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import Cluster, coordinator_partition, fail, log  # noqa: E402
from nemesis import SETTINGS  # noqa: E402

TOPIC = "deposed"
GROUP = "deposed-coordinator"
OFFSET_FETCH = 9
NOT_COORDINATOR = 16
RETRIABLE = {14, 15, NOT_COORDINATOR}  # load in progress, not available, not coordinator
GUARD_S = 60


def string(text):
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def offset_fetch_v3(correlation_id, group, topic, partition):
    body = string(group) + struct.pack(">i", 1) + string(topic) + struct.pack(">ii", 1, partition)
    header = struct.pack(">hhi", OFFSET_FETCH, 3, correlation_id) + string("deposed-test")
    message = header + body
    return struct.pack(">i", len(message)) + message


def read_exactly(sock, count):
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("connection closed")
        data += chunk
    return data


def read_offset_fetch_v3(sock):
    """(top-level error, [(partition, offset, error)])."""
    size = struct.unpack(">i", read_exactly(sock, 4))[0]
    data = read_exactly(sock, size)
    at = 4 + 4  # correlation id, throttle time
    rows = []
    (topics,) = struct.unpack_from(">i", data, at)
    at += 4
    for _ in range(topics):
        (length,) = struct.unpack_from(">h", data, at)
        at += 2 + length
        (partitions,) = struct.unpack_from(">i", data, at)
        at += 4
        for _ in range(partitions):
            partition, offset, metadata_length = struct.unpack_from(">iqh", data, at)
            at += 14 + max(metadata_length, 0)
            (error,) = struct.unpack_from(">h", data, at)
            at += 2
            rows.append((partition, offset, error))
    (error,) = struct.unpack_from(">h", data, at)
    return error, rows


def commit(bootstrap, offset):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False, "log_level": 2})
    try:
        deadline = time.time() + GUARD_S
        while True:
            try:
                consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
                committed = consumer.committed([TopicPartition(TOPIC, 0)], timeout=10)[0].offset
                if committed == offset:
                    return
            except Exception as exc:  # retriable while the group moves
                if time.time() > deadline:
                    fail(f"committing offset {offset}: {exc}")
            if time.time() > deadline:
                fail(f"committed offset {offset}, read back another")
            time.sleep(0.5)
    finally:
        consumer.close()


def offsets_leader(admin):
    topics = admin.list_topics("__consumer_offsets", timeout=10).topics
    partition = topics["__consumer_offsets"].partitions[coordinator_partition(GROUP)]
    return partition.leader


def main():
    binary = os.path.abspath(os.environ.get("STRAND_BIN", "target/release/strand"))
    root = tempfile.mkdtemp(prefix="strand-deposed-")
    cluster = Cluster(binary, root, settings=SETTINGS)
    frozen = None
    try:
        cluster.launch()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap(), "log_level": 2})
        admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(timeout=30)
        commit(cluster.bootstrap(), 10)
        coordinator = offsets_leader(admin)
        host, port, _ = cluster.addr[coordinator]
        log(f"offset 10 committed; node {coordinator} coordinates {GROUP}")
        sock = socket.create_connection((host, port), timeout=GUARD_S)

        others = [i for i in cluster.ids if i != coordinator]
        others_bootstrap = ",".join(f"{cluster.addr[i][0]}:{cluster.addr[i][1]}" for i in others)
        others_admin = AdminClient({"bootstrap.servers": others_bootstrap, "log_level": 2})
        cluster.pause(coordinator)
        frozen = coordinator
        deadline = time.time() + GUARD_S
        while offsets_leader(others_admin) in (coordinator, -1):
            if time.time() > deadline:
                fail("no other node took the group's partition over")
            time.sleep(0.2)
        new_coordinator = offsets_leader(others_admin)
        commit(others_bootstrap, 20)
        log(f"node {coordinator} frozen; node {new_coordinator} coordinates now and has offset 20")

        # The request waits in the frozen node's socket and is the first thing it reads.
        sock.sendall(offset_fetch_v3(1, GROUP, TOPIC, 0))
        cluster.resume(coordinator)
        frozen = None
        error, rows = read_offset_fetch_v3(sock)
        sock.close()
        log(f"the resumed node answered error {error}, partitions {rows}")
        if error == 0 and rows and rows[0][1] == 10:
            fail("the deposed coordinator answered the committed offset from before its fall (10)")
        if error not in RETRIABLE and not (error == 0 and rows and rows[0][1] == 20):
            fail(f"unexpected answer: error {error}, partitions {rows}")

        # Once it has heard from the controller it knows it does not coordinate.
        deadline = time.time() + GUARD_S
        while True:
            sock = socket.create_connection((host, port), timeout=GUARD_S)
            sock.sendall(offset_fetch_v3(2, GROUP, TOPIC, 0))
            error, rows = read_offset_fetch_v3(sock)
            sock.close()
            if error == NOT_COORDINATOR or (error == 0 and rows and rows[0][1] == 20):
                break  # 20: leadership came back to it (preferred leader), caught up
            if error == 0:
                fail(f"the old coordinator answered {rows} after resuming")
            if time.time() > deadline:
                fail(f"the old coordinator still answers error {error}, {rows}")
            time.sleep(0.2)
        log(f"then the old coordinator answers error {error}, partitions {rows}")
        codes = cluster.stop_all()
        if any(code != 0 for code in codes.values()):
            fail(f"nodes did not stop cleanly: {codes}")
        log("PASS")
    finally:
        if frozen is not None:
            cluster.resume(frozen)
        cluster.destroy()


if __name__ == "__main__":
    main()
