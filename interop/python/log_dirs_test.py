"""Several log directories, driven by Kafka 4.4.0's own tools against a Strand broker whose
server.properties lists two in log.dirs:

- kafka-log-dirs --describe: the topic's partitions spread over both directories;
- kafka-reassign-partitions --execute with "log_dirs" (and --replica-alter-log-dirs-throttle)
  moves every partition to the other directory while a librdkafka producer keeps writing
  to them; --verify reports the moves complete and removes the throttle;
- kafka-log-dirs --describe then shows each partition in its new directory, and a
  librdkafka consumer reads every acknowledged record back, in order, with no gap;
- after a restart the partitions are still where they were moved, with every record;
- a move killed (SIGKILL) while it copies resumes after the restart and completes, as
  Kafka resumes a future replica.

Runs its own broker (STRAND_BIN, default target/release/strand).
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from dataset import check, fail, ok

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("STRAND_BIN", os.path.join(HERE, "../../target/release/strand"))
KAFKA_CLI = os.path.join(HERE, "..", "kafka", "kafka-cli.sh")
TOPIC = "log-dirs"
PARTITIONS = 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tool(name, bootstrap, *args):
    run = subprocess.run([KAFKA_CLI, name, "--bootstrap-server", bootstrap] + list(args),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
    return run.returncode, run.stdout


def layout(bootstrap):
    """{partition: log dir} and the future replicas, from kafka-log-dirs --describe."""
    code, out = tool("kafka-log-dirs", bootstrap, "--describe", "--topic-list", TOPIC)
    if code != 0:
        fail(f"kafka-log-dirs --describe: exit {code}\n{out}")
    described = json.loads(out.strip().splitlines()[-1])
    where, futures = {}, []
    for broker in described["brokers"]:
        for log_dir in broker["logDirs"]:
            if log_dir["error"] is not None:
                fail(f"log dir {log_dir['logDir']} reports {log_dir['error']}")
            for p in log_dir["partitions"]:
                index = int(p["partition"].rsplit("-", 1)[1])
                if p["isFuture"]:
                    futures.append(index)
                else:
                    where[index] = log_dir["logDir"]
    return where, futures


def start(properties, log_path):
    with open(log_path, "a") as log:
        return subprocess.Popen([BIN, "serve", "--config", properties], stdout=log, stderr=subprocess.STDOUT)


def wait_up(bootstrap, broker, log_path):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.time() + 30
    while True:
        try:
            admin.list_topics(timeout=2)
            return admin
        except Exception:
            if time.time() > deadline or broker.poll() is not None:
                fail(f"the broker did not come up on {bootstrap}: {open(log_path).read()[-2000:]}")
            time.sleep(0.3)


def stop(broker):
    broker.send_signal(signal.SIGTERM)
    code = broker.wait(30)
    check(code == 0, f"the broker stopped cleanly (exit {code})")


def read_all(bootstrap, expected):
    """Every record of every partition from the start: {partition: [values]}."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"log-dirs-{time.time_ns()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got = {p: [] for p in range(PARTITIONS)}
    deadline = time.time() + 60
    while sum(len(v) for v in got.values()) < expected and time.time() < deadline:
        message = consumer.poll(1.0)
        if message is None:
            continue
        if message.error():
            fail(f"consumer error: {message.error()}")
        got[message.partition()].append((message.offset(), message.value()))
    consumer.close()
    return got


def move_through_a_kill(bootstrap, broker, properties, log_path, tmp, where, expected):
    """A move of partition 0 back at 100 kB/s, the broker killed (SIGKILL) while it copies:
    after the restart the move resumes and completes, and every record is read back."""
    code, out = tool("kafka-configs", bootstrap, "--entity-type", "brokers", "--entity-name", "1", "--alter",
                     "--add-config", "replica.alter.log.dirs.io.max.bytes.per.second=100000")
    check(code == 0, f"kafka-configs sets the move rate to 100 kB/s ({out.strip()[-200:]})")
    real = {os.path.realpath(d) for d in where.values()}
    destination = next(d for d in real if d != os.path.realpath(where[0]))
    plan_path = os.path.join(tmp, "back.json")
    with open(plan_path, "w") as f:
        json.dump({"version": 1, "partitions": [
            {"topic": TOPIC, "partition": 0, "replicas": [1], "log_dirs": [destination]}]}, f)
    code, out = tool("kafka-reassign-partitions", bootstrap, "--execute", "--reassignment-json-file", plan_path)
    check(code == 0, f"kafka-reassign-partitions --execute moves partition 0 back ({out.strip()[-200:]})")
    deadline = time.time() + 30
    while 0 not in layout(bootstrap)[1]:
        if time.time() > deadline:
            fail("partition 0 never showed as a future replica")
        time.sleep(0.2)
    broker.send_signal(signal.SIGKILL)
    broker.wait(30)
    ok("the broker killed (SIGKILL) while partition 0's copy is under way")
    broker = start(properties, log_path)
    wait_up(bootstrap, broker, log_path)
    deadline = time.time() + 90
    while True:
        now, futures = layout(bootstrap)
        if os.path.realpath(now.get(0, "")) == destination and not futures:
            break
        if time.time() > deadline:
            fail(f"the interrupted move never completed ({now}, futures {futures})")
        time.sleep(0.5)
    ok("after the restart the interrupted move resumed and completed")
    got = read_all(bootstrap, len(expected))
    read = sorted((p, offset, value) for p, records in got.items() for offset, value in records)
    check(read == expected, f"after the interrupted move every acknowledged record is read back ({len(read)})")
    return broker


def main():
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        bootstrap = f"127.0.0.1:{port}"
        dirs = [os.path.join(tmp, "disk-a"), os.path.join(tmp, "disk-b")]
        properties = os.path.join(tmp, "server.properties")
        with open(properties, "w") as f:
            f.write("\n".join([
                "node.id=1",
                f"listeners=PLAINTEXT://127.0.0.1:{port}",
                f"log.dirs={','.join(dirs)}",
                "log.segment.bytes=262144",
            ]) + "\n")
        log_path = os.path.join(tmp, "broker.log")
        broker = start(properties, log_path)
        try:
            admin = wait_up(bootstrap, broker, log_path)
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(15)
            acked = []
            lock = threading.Lock()

            def delivered(error, message):
                if error is None:
                    with lock:
                        acked.append((message.partition(), message.offset(), message.value()))

            producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
            for n in range(8000):
                producer.produce(TOPIC, value=b"%06d" % n + b"." * 200, partition=n % PARTITIONS,
                                 on_delivery=delivered)
                producer.poll(0)
            check(producer.flush(30) == 0, "8000 records written before the moves")

            before, futures = layout(bootstrap)
            real = {os.path.realpath(d) for d in dirs}
            check(sorted(before) == list(range(PARTITIONS)) and not futures,
                  f"kafka-log-dirs lists the {PARTITIONS} partitions ({before})")
            check({os.path.realpath(d) for d in before.values()} == real,
                  "the partitions are spread over both log directories")

            # Move every partition to the other directory while a producer keeps writing.
            other = {p: next(d for d in real if d != os.path.realpath(before[p])) for p in before}
            plan = {"version": 1, "partitions": [
                {"topic": TOPIC, "partition": p, "replicas": [1], "log_dirs": [other[p]]} for p in other]}
            plan_path = os.path.join(tmp, "moves.json")
            with open(plan_path, "w") as f:
                json.dump(plan, f)
            writing = threading.Event()
            writing.set()

            def keep_writing():
                n = 8000
                while writing.is_set():
                    producer.produce(TOPIC, value=b"%06d" % n + b"." * 200, partition=n % PARTITIONS,
                                     on_delivery=delivered)
                    producer.poll(0)
                    n += 1
                    time.sleep(0.001)

            writer = threading.Thread(target=keep_writing)
            writer.start()
            try:
                code, out = tool("kafka-reassign-partitions", bootstrap, "--execute", "--reassignment-json-file",
                                 plan_path, "--replica-alter-log-dirs-throttle", "50000000")
                if code != 0:
                    fail(f"kafka-reassign-partitions --execute: exit {code}\n{out}")
                ok("kafka-reassign-partitions --execute with log_dirs and --replica-alter-log-dirs-throttle")
                deadline = time.time() + 120
                while True:
                    code, out = tool("kafka-reassign-partitions", bootstrap, "--verify", "--reassignment-json-file",
                                     plan_path)
                    moved = out.count("is completed") + out.count("completed successfully")
                    if code == 0 and moved >= 2 * PARTITIONS and "in progress" not in out:
                        break
                    if time.time() > deadline:
                        fail(f"kafka-reassign-partitions --verify never reported the moves complete:\n{out}")
                    time.sleep(1)
                ok(f"kafka-reassign-partitions --verify: the {PARTITIONS} replica moves are complete")
                check("Clearing broker-level throttles on broker 1" in out, "--verify cleared the move throttle")
            finally:
                writing.clear()
                writer.join()
            check(producer.flush(30) == 0, "every record written during the moves acknowledged")

            after, futures = layout(bootstrap)
            check(not futures, "no future replica left")
            check({p: os.path.realpath(d) for p, d in after.items()} == other,
                  f"kafka-log-dirs shows every partition in its new directory ({after})")
            with lock:
                expected = sorted(acked)
            ok(f"{len(expected)} records acknowledged, {len(expected) - 8000} of them during the moves")
            for label in ("after the moves", "after a restart"):
                got = read_all(bootstrap, len(expected))
                read = sorted((p, offset, value) for p, records in got.items() for offset, value in records)
                check(read == expected, f"{label}: every acknowledged record read back, nothing else "
                                        f"({len(read)} of {len(expected)})")
                for p, records in got.items():
                    offsets = [offset for offset, _ in records]
                    check(offsets == list(range(len(offsets))), f"{label}: partition {p} has no gap")
                if label == "after the moves":
                    stop(broker)
                    broker = start(properties, log_path)
                    wait_up(bootstrap, broker, log_path)
                    again, _ = layout(bootstrap)
                    check(again == after, "after a restart the partitions are where they were moved")
            broker = move_through_a_kill(bootstrap, broker, properties, log_path, tmp, after, expected)
        finally:
            if broker.poll() is None:
                stop(broker)
        if "panicked" in open(log_path).read():
            fail("the broker panicked")
    print("PASS log dirs (kafka-log-dirs, kafka-reassign-partitions with log_dirs)")


if __name__ == "__main__":
    sys.exit(main())
