"""Transactions across a kill -9 of the broker (one node, the coordinator and the leader of
every partition at once). Starts and stops its own broker (STRAND_BIN).

1. A transaction open when the broker dies: its producer, on the restarted broker, goes
   on and commits it (the coordinator reloads it Ongoing from __transaction_state, each
   partition's producer state has it open again); read_committed then sees all of it, and
   the last stable offset was held behind it until then.
2. A transaction committed just before the kill: visible whole after the restart, its
   offsets sent with send_offsets_to_transaction committed for the group.
3. A transaction left open by a producer that never comes back: after the restart the
   coordinator aborts it at its timeout, and read_committed moves past it.
"""
import atexit
import os
import signal
import tempfile
import time

from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from confluent_kafka import ConsumerGroupTopicPartitions

from dataset import check, fail, ok
from restart_test import Broker, free_port

WAIT_S = 60
PARTITIONS = 3


def wait_until(what, condition, seconds=WAIT_S):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            fail(f"{what}: not within {seconds} s")
        time.sleep(0.2)
    ok(what)


def latest(admin, topic, partition, isolation):
    tp = TopicPartition(topic, partition)
    result = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=isolation, request_timeout=10)
    return result[tp].result().offset


def ends(admin, topic, isolation):
    return [latest(admin, topic, p, isolation) for p in range(PARTITIONS)]


def read_committed(bootstrap, topic):
    """Values a read_committed consumer gets from the start. "The end" is a sentinel each
    partition gets now from a plain producer: once it arrives, nothing before it can still
    show up (markers take offsets, so a position says nothing about the records)."""
    sentinel = f"end-{time.time_ns()}"
    plain = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for p in range(PARTITIONS):
        plain.produce(topic, value=sentinel.encode(), partition=p)
    if plain.flush(WAIT_S) != 0:
        fail("sentinels not acknowledged")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got, pending = [], set(range(PARTITIONS))
    deadline = time.monotonic() + WAIT_S
    while pending:
        if time.monotonic() > deadline:
            fail(f"read_committed of {topic}: no sentinel from partitions {sorted(pending)}")
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error():
            fail(f"consume error {message.error()}")
        value = message.value().decode()
        if value == sentinel:
            pending.discard(message.partition())
        else:
            got.append(value)
    consumer.close()
    return got


def producer(bootstrap, transactional_id, **extra):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **extra})
    p.init_transactions(WAIT_S)
    return p


def send(p, topic, values):
    for i, value in enumerate(values):
        p.produce(topic, value=value.encode(), partition=i % PARTITIONS)
    if p.flush(WAIT_S) != 0:
        fail(f"{topic}: records not acknowledged")


def main():
    root = tempfile.mkdtemp(prefix="strand-txn-restart-")
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    broker = Broker(os.path.join(root, "data"), port)
    # fail() exits: the broker must not outlive a failed run.
    atexit.register(lambda: broker.process and broker.process.poll() is None and broker.process.kill())
    broker.start()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("out", PARTITIONS, 1), NewTopic("in", 1, 1)]).values():
        future.result()

    # Input for the committed consume-transform-produce transaction.
    plain = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(5):
        plain.produce("in", value=f"in-{i}".encode(), partition=0)
    plain.flush(WAIT_S)

    committed = producer(bootstrap, "committer")
    committed.begin_transaction()
    send(committed, "out", [f"done-{i}" for i in range(6)])
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False})
    committed.send_offsets_to_transaction([TopicPartition("in", 0, 5)], member.consumer_group_metadata(), WAIT_S)
    committed.commit_transaction(WAIT_S)
    ok("a transaction with its group offsets committed before the kill")

    spanning = producer(bootstrap, "spanning", **{"transaction.timeout.ms": 120000})
    spanning.begin_transaction()
    send(spanning, "out", [f"span-{i}" for i in range(6)])
    abandoned = producer(bootstrap, "abandoned", **{"transaction.timeout.ms": 5000})
    abandoned.begin_transaction()
    send(abandoned, "out", [f"gone-{i}" for i in range(3)])
    ok("two transactions open: one to continue, one to abandon")

    check(broker.stop(signal.SIGKILL) == -signal.SIGKILL, "kill -9 of the broker")
    broker.start()
    ok("the broker restarted")

    # The spanning producer goes on where it was: more records, then the commit.
    send(spanning, "out", [f"span-{i}" for i in range(6, 9)])
    wait_until("read_committed is held behind the open transactions",
               lambda: ends(admin, "out", IsolationLevel.READ_COMMITTED)
               < ends(admin, "out", IsolationLevel.READ_UNCOMMITTED))
    spanning.commit_transaction(WAIT_S)
    ok("the transaction that spanned the kill commits")

    # The abandoned one times out on the restarted coordinator (its abort sweep runs every
    # 10 s), which lets read_committed reach the end.
    wait_until("the abandoned transaction is aborted and read_committed reaches the end",
               lambda: ends(admin, "out", IsolationLevel.READ_COMMITTED)
               == ends(admin, "out", IsolationLevel.READ_UNCOMMITTED), seconds=90)
    values = read_committed(bootstrap, "out")
    want = sorted([f"done-{i}" for i in range(6)] + [f"span-{i}" for i in range(9)])
    check(sorted(values) == want, f"read_committed sees both committed transactions whole and nothing abandoned "
                                  f"({sorted(values)})")
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("g", [TopicPartition("in", 0)])],
                                                require_stable=True)
    committed_offset = list(offsets.values())[0].result().topic_partitions[0].offset
    check(committed_offset == 5, f"the group's offset committed in the transaction survived ({committed_offset})")
    member.close()
    check(broker.stop(signal.SIGTERM) == 0, "SIGTERM exits 0")
    print("PASS transactions across kill -9")


if __name__ == "__main__":
    main()
