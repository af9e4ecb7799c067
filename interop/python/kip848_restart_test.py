"""KIP-848 consumer groups outlive their coordinator (librdkafka, group.protocol=consumer).

Two members split a 4-partition topic and consume it; the broker is killed with kill -9
and restarted. The group's state is in `__consumer_offsets` (Kafka's records 3, 5-8), so
the restarted coordinator knows both members at their epochs: neither is fenced (no
lost-partitions callback, same member ids), and the records produced after the restart
are consumed exactly once between them. Without the group's records a restarted
coordinator answers UNKNOWN_MEMBER_ID and both members lose their partitions.

Starts and stops its own broker (STRAND_BIN). Every wait has a deadline; nothing asserts
on how long anything took.
"""
import os
import signal
import tempfile
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from dataset import fail, ok
from restart_test import Broker, free_port

TOPIC = "kip848-restart"
PARTITIONS = 4
BEFORE, AFTER = 200, 200
# Enough heartbeats after the restart (librdkafka's interval is the broker's 5 s) for a
# fenced member to find out.
AFTER_RESTART_SECONDS = 20


def produce(bootstrap, first, count):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(first, first + count):
        producer.produce(TOPIC, key=str(i).encode(), value=str(i).encode())
    if producer.flush(30) != 0:
        fail("records not acknowledged")


class Member:
    def __init__(self, bootstrap, name):
        self.name, self.lost, self.seen = name, 0, []
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kip848-restart",
                                  "group.protocol": "consumer", "auto.offset.reset": "earliest",
                                  "enable.auto.commit": True, "auto.commit.interval.ms": 500,
                                  "log_level": 3})
        self.consumer.subscribe([TOPIC], on_lost=self.on_lost)

    def on_lost(self, consumer, partitions):
        self.lost += 1
        print(f"  {self.name}: partitions lost: {[p.partition for p in partitions]}", flush=True)

    def poll(self):
        message = self.consumer.poll(0.2)
        if message is not None and message.error() is None:
            self.seen.append(int(message.value()))


def poll_until(members, done, deadline, what):
    end = time.time() + deadline
    while time.time() < end:
        for member in members:
            member.poll()
        if done():
            return
    fail(f"{what} within {deadline} s")


def main():
    root = tempfile.mkdtemp(prefix="strand-kip848-")
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    broker = Broker(os.path.join(root, "data"), port)
    broker.start()
    members = []
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        produce(bootstrap, 0, BEFORE)
        members = [Member(bootstrap, "a"), Member(bootstrap, "b")]
        seen = lambda: sorted(v for m in members for v in m.seen)  # noqa: E731
        poll_until(members, lambda: len(seen()) >= BEFORE and all(m.consumer.assignment() for m in members),
                   90, "both members assigned and every record consumed")
        if seen() != list(range(BEFORE)):
            fail(f"before the restart: {len(seen())} records, expected each of {BEFORE} once")
        ids = [m.consumer.memberid() for m in members]
        ok(f"two members ({', '.join(ids)}), {BEFORE} records consumed once")
        # Let the auto-commit and the last heartbeats settle, then kill the coordinator.
        end = time.time() + 2
        while time.time() < end:
            for m in members:
                m.poll()
        broker.stop(signal.SIGKILL)
        broker.start()
        produce(bootstrap, BEFORE, AFTER)
        poll_until(members, lambda: len(seen()) >= BEFORE + AFTER, 90, "the records produced after the restart consumed")
        end = time.time() + AFTER_RESTART_SECONDS
        while time.time() < end:
            for m in members:
                m.poll()
        lost = {m.name: m.lost for m in members}
        if any(lost.values()):
            fail(f"a member lost its partitions across the restart: {lost}")
        after = [m.consumer.memberid() for m in members]
        if after != ids:
            fail(f"member ids changed across the restart: {ids} -> {after}")
        extra = sorted(v for m in members for v in m.seen if v >= BEFORE)
        if extra != list(range(BEFORE, BEFORE + AFTER)):
            fail(f"after the restart: {len(extra)} records, expected each of {AFTER} once")
        owned = sorted(p.partition for m in members for p in m.consumer.assignment())
        if owned != list(range(PARTITIONS)):
            fail(f"assignment after the restart: {owned}")
        ok(f"the restarted coordinator kept both members at their epochs; {AFTER} more records consumed once")
    finally:
        for member in members:
            member.consumer.close()
        code = broker.stop(signal.SIGTERM)
        if code != 0:
            fail(f"broker exited with {code}")
    print("PASS")


if __name__ == "__main__":
    main()
