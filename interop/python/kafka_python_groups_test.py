"""Consumer groups with kafka-python (KafkaConsumer(group_id=...), classic protocol, default
assignors [range, roundrobin]) against a broker this test starts (Strand, or Apache Kafka
4.4.0 with --kafka):

  - two consumers (each in its own thread) split a 6-partition topic 3/3 and consume 600
    keyed records exactly once, committing (commit()) after every poll and in
    on_partitions_revoked;
  - committed offsets (OffsetFetch through a fresh consumer's committed()) equal the end
    offsets;
  - one consumer closes (LeaveGroup): the other takes all 6 partitions and consumes new
    records exactly once;
  - a consumer restarted in the same group resumes at the committed offsets and reads only
    the records produced after them;
  - the empty group: describe_groups (Empty, no members, authorized operations, which
    kafka-python asks for), delete_groups, list_groups.

Prints "ok: ..." per check; exits 1 after "FAIL: ..." on the first failure. Every wait has a
deadline; the broker is stopped (and must exit cleanly) whatever happens.

    python3 interop/python/kafka_python_groups_test.py [--kafka]
"""
import collections
import os
import signal
import sys
import tempfile
import threading
import time

from kafka import ConsumerRebalanceListener, KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from group_brokers import _tail, make_broker  # noqa: E402

PARTITIONS = 6
STEP = 60
# Generous: kafka-python heartbeats from a Python thread, which a loaded machine (CI
# with other work, two cores) can starve for seconds; this test checks no evictions.
SESSION_MS = 20000


class Failure(Exception):
    pass


def ok(message):
    print(f"ok: {message}", flush=True)


def check(condition, message):
    if not condition:
        raise Failure(message)
    ok(message)


class Member:
    """A KafkaConsumer in the group, polled by its own thread."""

    def __init__(self, bootstrap, group, topic, name):
        self.name, self.topic = name, topic
        self.lock = threading.Lock()
        self.records = []  # (partition, offset)
        self.errors = []
        self.assigned = set()
        self.pending = {}
        self.stop = threading.Event()
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=name,
                                      enable_auto_commit=False, auto_offset_reset="earliest",
                                      session_timeout_ms=SESSION_MS, heartbeat_interval_ms=1000,
                                      request_timeout_ms=30000)
        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                mine = {tp: member.pending.pop(tp) for tp in list(member.pending) if tp in revoked}
                if mine:
                    member.commit(mine, "revoke")
                with member.lock:
                    member.assigned -= {tp.partition for tp in revoked}

            def on_partitions_assigned(self, assigned):
                with member.lock:
                    member.assigned |= {tp.partition for tp in assigned}

        self.consumer.subscribe([topic], listener=Listener())
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def commit(self, offsets, when):
        try:
            self.consumer.commit(offsets)
            return True
        except Exception as error:  # noqa: BLE001 -- reported by the checks
            with self.lock:
                self.errors.append(f"commit ({when}): {error!r}")
            return False

    def loop(self):
        while not self.stop.is_set():
            try:
                batch = self.consumer.poll(timeout_ms=200)
            except Exception as error:  # noqa: BLE001
                with self.lock:
                    self.errors.append(f"poll: {error!r}")
                time.sleep(0.2)
                continue
            got = []
            for tp, records in batch.items():
                for r in records:
                    got.append((r.partition, r.offset))
                    self.pending[tp] = OffsetAndMetadata(r.offset + 1, "", -1)
            if got:
                with self.lock:
                    self.records.extend(got)
            if self.pending:
                offsets = dict(self.pending)
                if self.commit(offsets, "poll"):
                    for tp, o in offsets.items():
                        if self.pending.get(tp) == o:
                            del self.pending[tp]

    def close(self):
        self.stop.set()
        self.thread.join(STEP)
        check(not self.thread.is_alive(), f"{self.name}: poll loop stopped")
        self.consumer.close(autocommit=False)

    def assignment(self):
        with self.lock:
            return set(self.assigned)


def wait_split(members, sizes, what):
    deadline = time.time() + STEP
    while True:
        for m in members:
            if m.errors:
                raise Failure(f"{what}: {m.name}: {m.errors[:3]}")
        got = [m.assignment() for m in members]
        if [len(a) for a in got] == sizes and set().union(*got) == set(range(PARTITIONS)):
            return got
        if time.time() > deadline:
            raise Failure(f"{what}: no split {sizes} within {STEP}s: {got}")
        time.sleep(0.05)


def counts(members):
    c = collections.Counter()
    for m in members:
        with m.lock:
            c.update(m.records)
    return c


def wait_consumed(members, want, what):
    deadline = time.time() + STEP
    while True:
        seen = counts(members)
        missing = [a for a in want.values() if a not in seen]
        if not missing:
            return
        if time.time() > deadline:
            errors = [e for m in members for e in m.errors][:3]
            raise Failure(f"{what}: {len(missing)} of {len(want)} records not consumed within {STEP}s; errors {errors}")
        time.sleep(0.1)


def check_exactly_once(members, want, what):
    seen = counts(members)
    expected = set(want.values())
    duplicated = [a for a, n in seen.items() if n > 1]
    missing = expected - set(seen)
    unexpected = set(seen) - expected
    errors = [e for m in members for e in m.errors][:3]
    check(not duplicated and not missing and not unexpected,
          f"{what}: {len(expected)} records consumed exactly once across {', '.join(m.name for m in members)} "
          f"({len(duplicated)} duplicated, {len(missing)} missing, {len(unexpected)} unexpected; errors {errors})")


def produce(producer, topic, start, count):
    futures = {i: producer.send(topic, key=f"k-{i}".encode(), value=f"v-{i}".encode()) for i in range(start, start + count)}
    producer.flush(STEP)
    out = {}
    for i, future in futures.items():
        metadata = future.get(timeout=STEP)
        out[i] = (metadata.partition, metadata.offset)
    return out


def end_offsets(produced):
    ends = {p: 0 for p in range(PARTITIONS)}
    for p, o in produced.values():
        ends[p] = max(ends[p], o + 1)
    return ends


def committed(bootstrap, group, topic):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        out = {}
        for p in range(PARTITIONS):
            value = consumer.committed(TopicPartition(topic, p))
            out[p] = -1 if value is None else value
        return out
    finally:
        consumer.close(autocommit=False)


def run(bootstrap):
    topic = f"kafka-python-groups-{time.time_ns()}"
    group = f"{topic}-group"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
    ok(f"created {topic} with {PARTITIONS} partitions")
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    members = []
    try:
        produced = produce(producer, topic, 0, 300)
        a = Member(bootstrap, group, topic, "kp-a")
        members.append(a)
        b = Member(bootstrap, group, topic, "kp-b")
        members.append(b)
        split = wait_split([a, b], [3, 3], "two members")
        ok(f"two consumers split the partitions 3/3: {sorted(split[0])} / {sorted(split[1])}")
        second = produce(producer, topic, 300, 300)
        produced.update(second)
        wait_consumed([a, b], produced, "600 records")
        time.sleep(1)
        check_exactly_once([a, b], produced, "600 records (300 produced before the group formed)")
        owner = {p: m for m, parts in zip((a, b), split) for p in parts}
        wrong = [i for i, (p, o) in second.items() if (p, o) not in set(owner[p].records)]
        check(not wrong, f"each of the 300 records produced after the split was consumed by its partition's owner "
                         f"({len(wrong)} not)")
        ends = end_offsets(produced)
        got = committed(bootstrap, group, topic)
        check(got == ends, f"committed offsets = end offsets: {got}")

        b.close()
        wait_split([a], [6], "after kp-b left")
        ok("kp-b closed (LeaveGroup): kp-a holds all 6 partitions")
        third = produce(producer, topic, 600, 60)
        produced.update(third)
        wait_consumed([a, b], produced, "after leave")
        time.sleep(1)
        check_exactly_once([a, b], produced, "660 records after kp-b left")

        a.close()
        ends = end_offsets(produced)
        got = committed(bootstrap, group, topic)
        check(got == ends, f"after kp-a closed, committed offsets = end offsets: {got}")
        fourth = produce(producer, topic, 660, 60)
        c = Member(bootstrap, group, topic, "kp-a-restarted")
        members.append(c)
        wait_split([c], [6], "restarted consumer")
        wait_consumed([c], fourth, "restarted consumer")
        time.sleep(1.5)
        check_exactly_once([c], fourth, "restarted consumer reads only the 60 records after the commit")
        first = {}
        for p, o in c.records:
            first.setdefault(p, o)
        check(all(o == ends[p] for p, o in first.items()),
              f"restarted consumer started each partition at its committed offset {ends}")
        c.close()
        produced.update(fourth)
        got = committed(bootstrap, group, topic)
        check(got == end_offsets(produced), f"final committed offsets = end offsets: {got}")
        described = admin.describe_groups([group]).get(group, {})
        check(described.get("group_state") == "Empty" and described.get("members") == []
              and described.get("protocol_type") == "consumer" and described.get("error") is None,
              f"describe_groups after every member left: Empty, no members: {described}")
        # kafka-python sends DescribeGroups with include_authorized_operations=true; a broker
        # without an authorizer answers with every operation a group supports.
        check(sorted(described.get("authorized_operations") or [])
              == sorted(["READ", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"]),
              f"describe_groups: authorized_operations {described.get('authorized_operations')}")
        result = admin.delete_groups([group])
        check(result == {group: "OK"}, f"delete_groups: {result}")
        listed = admin.list_groups()
        check(group not in str(listed), f"deleted group no longer listed")
    finally:
        for m in members:
            m.stop.set()
        producer.close()
        admin.close()


def main():
    kind = "kafka" if "--kafka" in sys.argv[1:] else "strand"
    started = time.time()
    status = 0
    with tempfile.TemporaryDirectory(prefix="kafka-python-groups-") as workdir:
        broker = make_broker(kind, workdir, min_session_timeout_ms=6000)
        broker.start()
        print(f"=== {kind} broker on {broker.bootstrap}", flush=True)
        try:
            run(broker.bootstrap)
        except Failure as error:
            print(f"FAIL: {error}", flush=True)
            status = 1
        except Exception as error:  # noqa: BLE001 -- any client error fails the test
            print(f"FAIL: {error!r}", flush=True)
            status = 1
        finally:
            code = broker.stop(signal.SIGTERM)
            if code != broker.clean_stop_code():
                print(f"FAIL: broker exit status after SIGTERM was {code}", flush=True)
                status = 1
            if broker.panics():
                print("FAIL: broker panicked", flush=True)
                status = 1
            if status:
                print(f"--- broker log tail:\n{_tail(broker.log_path)}", flush=True)
    print(f"kafka-python groups: {'all checks passed' if status == 0 else 'FAILED'} in {time.time() - started:.1f}s",
          flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
