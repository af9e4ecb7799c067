#!/usr/bin/env python3
"""A static member that restarted keeps its place through a coordinator failover.

The simulator found it (seed 195302035, docs/FAULTS.md): a static member coming back to
a Stable group takes its place back under a new member id without a rebalance (KIP-345),
and Strand answered without writing the group, so the next coordinator loaded the old id
and fenced the running consumer with FENCED_INSTANCE_ID (librdkafka: a fatal error,
"Static consumer fenced by other consumer with same group.instance.id").

Here, on three nodes with librdkafka: consumers A and B with group.instance.id "a" and
"b" share a topic of six partitions; B restarts (a static member sends no LeaveGroup on
close; the new consumer takes B's place back and B's partitions, with no rebalance);
the node coordinating the group is killed (-9); records produced afterwards reach both
consumers, and neither hears a fatal error.

    python3 interop/cluster/static_member_failover_test.py [--kafka]

--kafka runs Apache Kafka 4.4 (interop/kafka) under the same steps: it passes too.
"""

import argparse
import os
import sys
import tempfile
import time

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import Cluster, coordinator_partition, fail, log, until  # noqa: E402
from nemesis import SETTINGS  # noqa: E402

TOPIC = "static-failover"
GROUP = "static-failover"
PARTITIONS = 6
RECORDS = 600


class Member:
    """A librdkafka consumer with a group.instance.id, and what it received."""

    def __init__(self, bootstrap, instance):
        self.instance = instance
        self.fatal = []
        self.received = set()
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "group.instance.id": instance,
            "session.timeout.ms": 30000,
            "heartbeat.interval.ms": 1000,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "error_cb": self.on_error,
            "log_level": 2,
        })
        self.consumer.subscribe([TOPIC])

    def on_error(self, error):
        if error.fatal() or error.code() == KafkaError._FATAL:
            self.fatal.append(str(error))

    def pump(self):
        message = self.consumer.poll(0.1)
        if message is None:
            return
        error = message.error()
        if error is None:
            self.received.add(message.value().decode())
        elif error.fatal() or error.code() == KafkaError._FATAL:
            self.fatal.append(str(error))

    def partitions(self):
        return {tp.partition for tp in self.consumer.assignment()}


def pump(members, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        for member in members:
            member.pump()


def settled(members):
    """Both consumers hold partitions and between them all six, each once."""
    owned = [member.partitions() for member in members]
    union = set().union(*owned)
    return all(owned) and len(union) == PARTITIONS and sum(map(len, owned)) == PARTITIONS


def offsets_leader(admin):
    topics = admin.list_topics("__consumer_offsets", timeout=10).topics
    return topics["__consumer_offsets"].partitions[coordinator_partition(GROUP)].leader


def group_members(admin):
    group = admin.describe_consumer_groups([GROUP])[GROUP].result(timeout=10)
    return {m.group_instance_id: m.member_id for m in group.members}, str(group.state)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kafka", action="store_true", help="run Apache Kafka 4.4 instead")
    parser.add_argument("--binary", default=os.environ.get("STRAND_BIN", "target/release/strand"))
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="strand-static-failover-")
    kafka = ["group.initial.rebalance.delay.ms=0"] if args.kafka else None
    cluster = Cluster(os.path.abspath(args.binary), root, settings=SETTINGS, kafka=kafka)
    members = []
    try:
        cluster.launch()
        bootstrap = cluster.bootstrap()
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(timeout=60)
        members = [Member(bootstrap, "a"), Member(bootstrap, "b")]

        def pumped_until_settled():
            pump(members, 1)
            return settled(members)

        until("both static members holding the six partitions", pumped_until_settled, 120)
        ids, state = group_members(admin)
        log(f"group {state}: {ids}; a owns {sorted(members[0].partitions())}, "
            f"b owns {sorted(members[1].partitions())}")

        # b restarts: closed (no LeaveGroup for a static member) and started again.
        b_partitions = members[1].partitions()
        members[1].consumer.close()
        members[1] = Member(bootstrap, "b")
        until("the restarted b holding its partitions again", pumped_until_settled, 120)
        rejoined, state = group_members(admin)
        if rejoined.get("b") == ids.get("b"):
            fail(f"b's member id did not change across its restart: {rejoined}")
        if members[1].partitions() != b_partitions:
            log(f"note: b came back with {sorted(members[1].partitions())}, "
                f"had {sorted(b_partitions)} (a rebalance ran)")
        log(f"b restarted: group {state}: {rejoined}")

        coordinator = offsets_leader(admin)
        log(f"killing node {coordinator}, the group's coordinator")
        cluster.kill(coordinator)
        others = [i for i in cluster.ids if i != coordinator]
        others_admin = AdminClient({"bootstrap.servers": ",".join(
            f"{cluster.addr[i][0]}:{cluster.addr[i][1]}" for i in others), "log_level": 2})
        until("another node coordinating the group",
              lambda: offsets_leader(others_admin) not in (coordinator, -1), 60)

        producer = Producer({"bootstrap.servers": ",".join(
            f"{cluster.addr[i][0]}:{cluster.addr[i][1]}" for i in others), "acks": "all"})
        for n in range(RECORDS):
            producer.produce(TOPIC, value=f"after-{n}".encode(), partition=n % PARTITIONS)
        if producer.flush(60) != 0:
            fail("records produced after the failover were not all acknowledged")
        expected = {f"after-{n}" for n in range(RECORDS)}

        def everything_read():
            pump(members, 1)
            for member in members:
                if member.fatal:
                    fail(f"consumer {member.instance} hit a fatal error: {member.fatal}")
            return expected <= members[0].received | members[1].received

        until("every record produced after the failover read", everything_read, 120)
        # A few more heartbeats to the new coordinator: still no fatal error.
        pump(members, 5)
        for member in members:
            if member.fatal:
                fail(f"consumer {member.instance} hit a fatal error: {member.fatal}")
        after, state = group_members(others_admin)
        log(f"after the failover: group {state}: {after}")
        if after.get("b") != rejoined.get("b"):
            fail(f"the new coordinator knows b as {after.get('b')}, not {rejoined.get('b')}")
        log(f"PASS: {'Apache Kafka' if args.kafka else 'Strand'}: the restarted static member "
            f"kept its place through the coordinator's failover; {RECORDS} records read")
    finally:
        for member in members:
            try:
                member.consumer.close()
            except Exception:
                pass
        cluster.destroy()


if __name__ == "__main__":
    main()
