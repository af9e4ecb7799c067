#!/usr/bin/env python3
"""Tiered storage on three nodes (RF 3, min ISR 2) against moto's S3 server.

  1. A tiered topic with local.retention.ms of one second: the leader copies sealed
     segments to the bucket, and every replica (followers too, from the bucket's listing)
     deletes its copied local segments; librdkafka reads every record from offset 0.
  2. kill -9 of the leader: the new leader serves offset 0 from the bucket, and copies
     what is produced after the failover.
  3. The killed node restarts behind the leader's local log start: the leader answers its
     fetches OFFSET_MOVED_TO_TIERED_STORAGE, it starts its log where the bucket ends
     instead of copying the whole log, and is back in the ISR.

The time limits are hang guards, not performance assertions."""

import glob
import os
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from cluster import Cluster, fail, log, partition_leader, until  # noqa: E402
from nemesis import SETTINGS  # noqa: E402
from s3_server import S3Server  # noqa: E402

TOPIC = "tiered"
BUCKET = "strand-cluster"
GUARD_S = 120


def value(n):
    return f"record-{n:08d}-".encode().ljust(200, b"x")


def produce(bootstrap, start, count):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "batch.size": 16384, "log_level": 2})
    for n in range(start, start + count):
        producer.produce(TOPIC, value=value(n), partition=0)
        if n % 1000 == 0:
            producer.poll(0)
    if producer.flush(60):
        fail(f"records {start}..{start + count} not acknowledged")


def read_all(bootstrap, count):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.time_ns()}",
                         "enable.auto.commit": False, "auto.offset.reset": "error", "log_level": 2})
    expected = 0
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.time() + GUARD_S
        while expected < count and time.time() < deadline:
            for message in consumer.consume(1000, 1.0):
                if message.error():
                    log(f"consumer: {message.error()}")
                    continue
                if message.offset() != expected or message.value() != value(expected):
                    fail(f"offset {message.offset()} where {expected} was due")
                expected += 1
    finally:
        consumer.close()
    if expected != count:
        fail(f"read {expected} of {count} records from offset 0")


def local_segments(cluster, i):
    return glob.glob(os.path.join(cluster.log_dir(i), f"{TOPIC}-0", "*.log"))


def main():
    binary = os.path.abspath(os.environ.get("STRAND_BIN", "target/release/strand"))
    root = tempfile.mkdtemp(prefix="strand-tiered-")
    s3 = S3Server(root, BUCKET)
    os.environ.update(s3.environment())
    settings = dict(SETTINGS, remote_log_storage_system_enable="true",
                    remote_storage_url=f'"s3://{BUCKET}/cluster"',
                    remote_log_manager_task_interval_ms=500, retention_check_interval_ms=500)
    # The store is on loopback: no network namespaces.
    cluster = Cluster(binary, root, settings=settings, use_netns=False)
    try:
        cluster.launch()
        bootstrap = cluster.bootstrap()
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
        admin.create_topics([NewTopic(TOPIC, 1, 3, config={
            "remote.storage.enable": "true", "local.retention.ms": "1000", "retention.ms": "-1",
            "min.insync.replicas": "2", "internal.segment.bytes": str(256 * 1024)})])[TOPIC].result(30)
        until("a full ISR", lambda: len(partition_leader(admin, TOPIC, 0)[2]) == 3, GUARD_S)

        total = 20_000
        produce(bootstrap, 0, total)
        until("segments copied", lambda: len(s3.keys(suffix=".json")) >= 10, GUARD_S)
        until("every replica deleted its copied local segments",
              lambda: all(len(local_segments(cluster, i)) <= 4 for i in cluster.ids), GUARD_S)
        whole, why = s3.copies_are_whole()
        if not whole:
            fail(why)
        read_all(bootstrap, total)
        log(f"{total} records read from offset 0; every replica keeps only its newest segments")

        leader, _, _ = partition_leader(admin, TOPIC, 0)
        cluster.kill(leader)
        until("a new leader", lambda: partition_leader(admin, TOPIC, 0)[0] not in (-1, leader), GUARD_S)
        new_leader = partition_leader(admin, TOPIC, 0)[0]
        read_all(bootstrap, total)
        log(f"node {leader} killed; node {new_leader} serves offset 0 from the bucket")
        copies = len(s3.keys(suffix=".json"))
        produce(bootstrap, total, 20_000)
        total += 20_000
        until("the new leader copies", lambda: len(s3.keys(suffix=".json")) >= copies + 10, GUARD_S)
        until("the new leader deleted copied segments locally",
              lambda: len(local_segments(cluster, new_leader)) <= 4, GUARD_S)

        cluster.start(leader)
        if not cluster.wait_port(leader):
            fail(f"node {leader} did not restart")
        until("the restarted node back in the ISR",
              lambda: leader in partition_leader(admin, TOPIC, 0)[2], GUARD_S)
        restarted = len(local_segments(cluster, leader))
        if restarted > 8:
            fail(f"the restarted node holds {restarted} segments: it copied the log instead of "
                 f"starting where the bucket ends")
        read_all(bootstrap, total)
        log(f"PASS: node {leader} rejoined from the tiered offset ({restarted} local segments); "
            f"{total} records read from offset 0")
        cluster.stop_checked()
    finally:
        cluster.destroy()
        s3.close()


if __name__ == "__main__":
    main()
