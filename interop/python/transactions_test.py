"""Interop test: Kafka transactions through librdkafka (confluent-kafka, Python).

Encodes what Apache Kafka does (validated against 4.1.1 and 4.4.0 through
interop/kafka/run-kafka.sh; the kafka-transactions tool it runs is the release
interop/kafka/kafka-cli.sh runs, 4.4.0 by default), so
Strand's transaction coordinator, LSO and read_committed fetch can be held to it:
commit/abort visibility, the LSO held behind an open transaction, consume-transform-
produce with send_offsets_to_transaction, zombie fencing, and the coordinator's abort of
a transaction left open past its timeout.

Every name carries a per-run suffix, so reruns against the same broker do not collide.
Every wait has a deadline; nothing asserts on how long an operation took.
"""
import os
import subprocess
import time
import uuid

from confluent_kafka import (Consumer, ConsumerGroupTopicPartitions, IsolationLevel, KafkaError,
                             KafkaException, Producer, TopicPartition, OFFSET_BEGINNING)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from dataset import bootstrap, check, fail, ok

BOOTSTRAP = bootstrap()
RUN = uuid.uuid4().hex[:10]
WAIT_S = 30
SENTINEL = b"sentinel-"

admin = AdminClient({"bootstrap.servers": BOOTSTRAP})


def name(kind):
    return f"txn-{kind}-{RUN}"


def create_topic(kind, partitions):
    topic = name(kind)
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(15)
    return topic


def txn_producer(transactional_id, **extra):
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "transactional.id": transactional_id, **extra})
    producer.init_transactions(WAIT_S)
    return producer


def plain_producer():
    return Producer({"bootstrap.servers": BOOTSTRAP, "enable.idempotence": True, "acks": "all"})


def produce_acked(producer, topic, records):
    """Produces (partition, value) pairs and flushes; returns the acknowledged offsets in
    order. A transactional producer's records are then written (not just buffered), which
    matters before an abort: librdkafka purges what it has not sent yet."""
    acked = {}

    def delivered(error, message):
        if error is not None:
            fail(f"delivery to {topic} failed: {error}")
        acked[message.value()] = message.offset()

    for partition, value in records:
        producer.produce(topic, value=value, partition=partition, on_delivery=delivered)
    if producer.flush(WAIT_S) != 0:
        fail(f"{topic}: records not acknowledged within {WAIT_S} s")
    return [acked[value] for _, value in records]


def consumer(isolation, **extra):
    return Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": name("reader"), "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "isolation.level": isolation, **extra})


def assigned_reader(topic, partitions, isolation):
    reader = consumer(isolation)
    reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    return reader


def poll_records(reader, seconds, want=None):
    """(partition, offset, value) of what the consumer delivers within `seconds`, stopping
    early once `want` records have arrived."""
    got = []
    deadline = time.monotonic() + seconds
    while (want is None or len(got) < want) and time.monotonic() < deadline:
        message = reader.poll(0.2)
        if message is None:
            continue
        if message.error():
            fail(f"consume error: {message.error()}")
        got.append((message.partition(), message.offset(), message.value()))
    return got


def read_to_end(topic, partitions, isolation):
    """Every record a fresh consumer at this isolation level is given, from the start of each
    partition to its end. "The end" is a sentinel written now by a non-transactional
    producer: once it arrives, nothing before it in that partition can still show up, so
    "exactly these records" holds without waiting out a quiet period. Only for partitions
    with no transaction open (a read_committed consumer never reaches the sentinel then)."""
    tag = SENTINEL + uuid.uuid4().hex.encode()
    writer = plain_producer()
    produce_acked(writer, topic, [(p, tag) for p in range(partitions)])
    reader = assigned_reader(topic, partitions, isolation)
    pending, got = set(range(partitions)), []
    deadline = time.monotonic() + WAIT_S
    while pending:
        if time.monotonic() > deadline:
            fail(f"{topic} ({isolation}): no end sentinel from partitions {sorted(pending)} within {WAIT_S} s")
        message = reader.poll(0.2)
        if message is None:
            continue
        if message.error():
            fail(f"consume error: {message.error()}")
        if message.value() == tag:
            pending.discard(message.partition())
        elif not message.value().startswith(SENTINEL):
            got.append((message.partition(), message.offset(), message.value()))
    reader.close()
    return got


def values(records):
    return sorted(value for _, _, value in records)


def latest(topic, partition, isolation):
    tp = TopicPartition(topic, partition)
    return admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=isolation,
                              request_timeout=10)[tp].result().offset


def wait_until(what, condition, seconds=WAIT_S):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            fail(f"{what}: not within {seconds} s")
        time.sleep(0.2)


def kafka_error(call):
    """Runs call, which must raise KafkaException; returns its KafkaError."""
    try:
        call()
    except KafkaException as exc:
        return exc.args[0]
    fail(f"{call} succeeded; an error was expected")


def commit_visible():
    topic = create_topic("commit", 3)
    producer = txn_producer(name("commit"))
    producer.begin_transaction()
    sent = [f"commit-{i}".encode() for i in range(10)]
    produce_acked(producer, topic, [(i % 3, v) for i, v in enumerate(sent)])
    producer.commit_transaction(WAIT_S)
    check(values(read_to_end(topic, 3, "read_committed")) == sorted(sent),
          "commit_visible: read_committed sees exactly the 10 committed records")
    check(values(read_to_end(topic, 3, "read_uncommitted")) == sorted(sent),
          "commit_visible: read_uncommitted sees the same 10")
    ok("commit_visible")


def abort_invisible():
    topic = create_topic("abort", 3)
    producer = txn_producer(name("abort"))
    producer.begin_transaction()
    aborted = [f"aborted-{i}".encode() for i in range(5)]
    produce_acked(producer, topic, [(i % 3, v) for i, v in enumerate(aborted)])
    producer.abort_transaction(WAIT_S)
    producer.begin_transaction()
    committed = [f"committed-{i}".encode() for i in range(3)]
    produce_acked(producer, topic, [(i % 3, v) for i, v in enumerate(committed)])
    producer.commit_transaction(WAIT_S)
    check(values(read_to_end(topic, 3, "read_committed")) == sorted(committed),
          "abort_invisible: read_committed sees only the 3 committed records")
    check(values(read_to_end(topic, 3, "read_uncommitted")) == sorted(aborted + committed),
          "abort_invisible: read_uncommitted sees all 8, aborted ones included")
    ok("abort_invisible")


def lso_blocks_read_committed():
    topic = create_topic("lso", 1)
    producer_a = txn_producer(name("lso"))
    producer_a.begin_transaction()
    txn_offsets = produce_acked(producer_a, topic, [(0, b"txn-0"), (0, b"txn-1")])
    plain_offsets = produce_acked(plain_producer(), topic, [(0, b"plain")])
    check(txn_offsets == [0, 1] and plain_offsets == [2],
          "lso: the open transaction's records at 0-1, the plain record after them at 2")

    # The last stable offset is the first offset of the open transaction: read_committed's
    # end stays there, while read_uncommitted's end is the high watermark.
    committed_end = latest(topic, 0, IsolationLevel.READ_COMMITTED)
    uncommitted_end = latest(topic, 0, IsolationLevel.READ_UNCOMMITTED)
    check((committed_end, uncommitted_end) == (0, 3),
          f"lso: latest offset is 0 under read_committed, 3 under read_uncommitted "
          f"(got {committed_end}, {uncommitted_end})")

    blocked = assigned_reader(topic, 1, "read_committed")
    check(poll_records(blocked, 3) == [],
          "lso: read_committed gets nothing in 3 s, the plain record included (held behind the LSO)")
    dirty = assigned_reader(topic, 1, "read_uncommitted")
    got = poll_records(dirty, WAIT_S, want=3)
    check([(o, v) for _, o, v in got] == [(0, b"txn-0"), (1, b"txn-1"), (2, b"plain")],
          "lso: read_uncommitted sees all 3 while the transaction is open")
    dirty.close()

    producer_a.commit_transaction(WAIT_S)
    # commit_transaction returns once the coordinator has logged PrepareCommit; the marker
    # reaches the partition afterwards, so the LSO catches up shortly after, not at once.
    wait_until("lso: read_committed end catches up with the high watermark after commit",
               lambda: latest(topic, 0, IsolationLevel.READ_COMMITTED)
               == latest(topic, 0, IsolationLevel.READ_UNCOMMITTED))
    # The commit marker is a control record at offset 3, so both ends are 4.
    check(latest(topic, 0, IsolationLevel.READ_COMMITTED) == 4,
          "lso: after commit both latest offsets are 4 (the commit marker took offset 3)")
    got = poll_records(blocked, WAIT_S, want=3)
    check([(o, v) for _, o, v in got] == [(0, b"txn-0"), (1, b"txn-1"), (2, b"plain")],
          "lso: the blocked read_committed consumer now gets all 3, in offset order")
    blocked.close()
    ok("lso_blocks_read_committed")


def committed_offsets(member, topic, partitions):
    found = member.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    return {tp.partition: tp.offset for tp in found}


def admin_committed_offsets(group, topic, partitions):
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    result = admin.list_consumer_group_offsets([request], require_stable=True, request_timeout=10)[group].result()
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def consume_transform_produce():
    source, sink = create_topic("ctp-in", 3), create_topic("ctp-out", 3)
    group = name("ctp-group")
    writer = plain_producer()
    inputs = [f"in-{i}".encode() for i in range(20)]
    produce_acked(writer, source, [(i % 3, v) for i, v in enumerate(inputs)])

    member = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group, "enable.auto.commit": False,
                       "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    member.subscribe([source])
    transformer = txn_producer(name("ctp"))

    def one_round(count):
        got = poll_records(member, WAIT_S, want=count)
        if len(got) != count:
            fail(f"ctp: the group member got {len(got)} of {count} input records")
        transformer.begin_transaction()
        produce_acked(transformer, sink, [(p, b"out-" + v) for p, _, v in got])
        transformer.send_offsets_to_transaction(member.position(member.assignment()),
                                                member.consumer_group_metadata(), WAIT_S)
        return got

    round_one = one_round(20)
    check(values(round_one) == sorted(inputs), "ctp: the group member read the 20 inputs")
    check(len(member.assignment()) == 3, "ctp: the member is assigned all 3 input partitions")
    transformer.commit_transaction(WAIT_S)
    ends = {p: latest(source, p, IsolationLevel.READ_UNCOMMITTED) for p in range(3)}
    # The offsets become stable only once the commit marker reaches __consumer_offsets;
    # both reads ask for stable offsets (librdkafka does for a read_committed consumer).
    wait_until("ctp: the group's committed offsets reach the end of the input",
               lambda: committed_offsets(member, source, 3) == ends)
    check(admin_committed_offsets(group, source, 3) == ends,
          f"ctp: committed offsets after the commit equal the input's end {ends} (AdminClient too)")

    more = [f"in2-{i}".encode() for i in range(5)]
    produce_acked(writer, source, [(i % 3, v) for i, v in enumerate(more)])
    round_two = one_round(5)
    check(values(round_two) == sorted(more), "ctp: the member read the 5 second-round inputs")
    transformer.abort_transaction(WAIT_S)
    check(committed_offsets(member, source, 3) == ends and admin_committed_offsets(group, source, 3) == ends,
          "ctp: after the abort the group's committed offsets have not moved")
    member.close()
    check(values(read_to_end(sink, 3, "read_committed")) == sorted(b"out-" + v for v in inputs),
          "ctp: read_committed sees the 20 committed outputs and none of the 5 aborted")
    ok("consume_transform_produce")


def zombie_fencing():
    topic = create_topic("fence", 1)
    shared_id = name("fence")
    zombie = txn_producer(shared_id)
    zombie.begin_transaction()
    produce_acked(zombie, topic, [(0, b"zombie-0"), (0, b"zombie-1")])

    # A second instance with the same transactional.id bumps the epoch and aborts the
    # zombie's open transaction; its init_transactions completes once that abort has.
    successor = txn_producer(shared_id)
    # On the wire Kafka 4.1.1 answers the zombie's EndTxn (librdkafka 2.x sends v1) with
    # INVALID_PRODUCER_EPOCH 47: versions below 2 cannot carry PRODUCER_FENCED 90.
    # librdkafka turns either into its local fatal error _FENCED (-144), which is what the
    # application sees and what is asserted here.
    error = kafka_error(lambda: zombie.commit_transaction(10))
    print(f"  zombie commit_transaction: {error.name()} ({error.code()}) fatal={error.fatal()}: {error.str()}")
    check(error.code() == KafkaError._FENCED and error.fatal(),
          "fence: the zombie's commit fails with librdkafka's fatal _FENCED error")
    error = kafka_error(lambda: zombie.begin_transaction())
    check(error.fatal(), "fence: the fenced producer stays failed (begin_transaction raises a fatal error)")

    successor.begin_transaction()
    produce_acked(successor, topic, [(0, b"successor-0")])
    successor.commit_transaction(WAIT_S)
    check(values(read_to_end(topic, 1, "read_committed")) == [b"successor-0"],
          "fence: read_committed sees the successor's record and none of the zombie's")
    check(values(read_to_end(topic, 1, "read_uncommitted")) == sorted([b"zombie-0", b"zombie-1", b"successor-0"]),
          "fence: the zombie's records were written (read_uncommitted sees them), then aborted")
    ok("zombie_fencing")


def timeout_abort():
    topic = create_topic("timeout", 1)
    producer = txn_producer(name("timeout"), **{"transaction.timeout.ms": 3000})
    producer.begin_transaction()
    produce_acked(producer, topic, [(0, b"stale-0"), (0, b"stale-1")])
    check(latest(topic, 0, IsolationLevel.READ_COMMITTED) == 0,
          "timeout: the open transaction holds read_committed's end at 0")

    # Kafka aborts expired transactions in a sweep every
    # transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s by default).
    wait_until("timeout: the coordinator aborts the expired transaction (read_committed end passes it)",
               lambda: latest(topic, 0, IsolationLevel.READ_COMMITTED) > 1, seconds=40)
    check(latest(topic, 0, IsolationLevel.READ_COMMITTED) == latest(topic, 0, IsolationLevel.READ_UNCOMMITTED) == 3,
          "timeout: after the abort both ends are 3 (the abort marker took offset 2)")

    # Kafka aborts an expired transaction by fencing it (epoch bump), exactly as a new
    # instance would: the late EndTxn v1 gets INVALID_PRODUCER_EPOCH 47 on the wire, which
    # librdkafka reports as the fatal _FENCED (-144), not as an abortable error.
    error = kafka_error(lambda: producer.commit_transaction(10))
    print(f"  commit after the timeout: {error.name()} ({error.code()}) fatal={error.fatal()}: {error.str()}")
    check(error.code() == KafkaError._FENCED and error.fatal(),
          "timeout: the late commit fails with librdkafka's fatal _FENCED error")
    check(read_to_end(topic, 1, "read_committed") == [],
          "timeout: the timed-out records are never delivered under read_committed")
    ok("timeout_abort")


def kafka_transactions(*args):
    """Kafka's own kafka-transactions tool against the broker: its stdout lines."""
    cli = os.path.join(os.path.dirname(__file__), "..", "kafka", "kafka-cli.sh")
    done = subprocess.run([cli, "kafka-transactions", "--bootstrap-server", BOOTSTRAP, *args],
                          capture_output=True, text=True, timeout=120)
    check(done.returncode == 0, f"kafka-transactions {' '.join(args)} exits 0 ({done.stderr[-500:]})")
    return [line.split() for line in done.stdout.splitlines() if line.strip()]


def kafka_transactions_tool():
    # confluent-kafka has no ListTransactions / DescribeTransactions / DescribeProducers
    # admin calls; Kafka's CLI has all of them, plus the abort of a hanging transaction.
    topic = create_topic("cli", 1)
    transactional_id = name("cli-app")
    producer = txn_producer(transactional_id, **{"transaction.timeout.ms": 600000})
    producer.begin_transaction()
    produce_acked(producer, topic, [(0, b"open-0")])
    listed = kafka_transactions("list")
    mine = [row for row in listed if row and row[0] == transactional_id]
    check(len(mine) == 1 and mine[0][3] == "Ongoing", f"cli: list shows {transactional_id} Ongoing ({mine})")
    described = kafka_transactions("describe", "--transactional-id", transactional_id)
    check(len(described) == 2 and described[1][4] == "Ongoing" and described[1][-1] == f"{topic}-0",
          f"cli: describe shows it Ongoing on {topic}-0 ({described})")
    producers = kafka_transactions("describe-producers", "--topic", topic, "--partition", "0")
    check(len(producers) == 2 and producers[1][5] == "0",
          f"cli: describe-producers shows the open transaction at offset 0 ({producers})")
    # The producer is alive and its coordinator knows the transaction: not hanging.
    hanging = kafka_transactions("find-hanging", "--broker-id", "1")
    check(not any(row and row[0] == topic for row in hanging),
          f"cli: find-hanging lists nothing on {topic} ({hanging})")
    # What an operator does with a hanging transaction: abort it at the partition.
    kafka_transactions("abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    producers = kafka_transactions("describe-producers", "--topic", topic, "--partition", "0")
    check(producers[1][5] == "None", f"cli: after abort no transaction is open ({producers})")
    wait_until("cli: read_committed's end passes the aborted record and its marker",
               lambda: latest(topic, 0, IsolationLevel.READ_COMMITTED) == 2)
    check(read_to_end(topic, 1, "read_committed") == [], "cli: the aborted record is not delivered")
    ok("cli: kafka-transactions list, describe, describe-producers and abort")


def main():
    print(f"transactions test against {BOOTSTRAP} (run {RUN})", flush=True)
    started = time.monotonic()
    for scenario in (commit_visible, abort_invisible, lso_blocks_read_committed, consume_transform_produce,
                     zombie_fencing, timeout_abort, kafka_transactions_tool):
        print(f"--- {scenario.__name__}", flush=True)
        scenario()
    print(f"PASS transactions (confluent-kafka) in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
