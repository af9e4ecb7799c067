#!/usr/bin/env python3
"""Real clients through leader kills on a 3-node Strand cluster.

The Java producer (kafka-clients 4.4.0 defaults: idempotent, acks=all) and librdkafka's
(idempotent, acks=all) each stream records to their own RF=3, min.insync.replicas=2
topic while a Java consumer (kafka-console-consumer) and a librdkafka consumer read them
in consumer groups. Mid-stream the leader of a partition of each topic is killed with
kill -9 and restarted. Passes when both producers finish without a failed delivery and
each consumer has read every acknowledged record (none lost, none twice in the log).
"""

import collections
import os
import subprocess
import sys
import tempfile
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import Cluster, fail, log, watermarks  # noqa: E402
from nemesis import SETTINGS, leader_of_topic, wait_for_full_isr  # noqa: E402

COUNT = 150_000
PARTITIONS = 3
KAFKA_CLI = os.path.join(HERE, "..", "kafka", "kafka-cli.sh")


def java_producer(bootstrap, topic, acked, progress, workdir):
    libs = subprocess.run([os.path.join(HERE, "..", "kafka", "fetch.sh")], check=True,
                          capture_output=True, text=True).stdout.strip().splitlines()[-1]
    classes = os.path.join(workdir, "classes")
    subprocess.run(["javac", "-cp", f"{libs}/*", "-d", classes,
                    os.path.join(HERE, "..", "java", "src", "IdempotentProducer.java")], check=True)
    ack_file = os.path.join(workdir, "java-acks.txt")
    process = subprocess.Popen(["java", "-cp", f"{classes}:{libs}/*", "IdempotentProducer",
                                bootstrap, topic, str(COUNT), ack_file, "10000"],
                               stdout=subprocess.PIPE, text=True)
    for line in process.stdout:
        if line.startswith("sent "):
            progress["java"] = int(line.split()[1])
    code = process.wait(600)
    with open(ack_file) as f:
        acked.extend(line.strip() for line in f if line.strip())
    if code != 0:
        progress["java_failed"] = code


def librdkafka_producer(bootstrap, topic, acked, progress):
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5, "message.timeout.ms": 120000,
                         "log_level": 2})
    failures = []

    def delivered(error, message):
        if error is None:
            acked.append(message.value().decode())
        else:
            failures.append(error)

    for i in range(COUNT):
        while True:
            try:
                producer.produce(topic, value=str(i).encode(), partition=i % PARTITIONS,
                                 on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        progress["rdkafka"] = i
        if i % 500 == 0:
            time.sleep(0.05)  # spread the stream over the kills
    producer.flush(300)
    if failures:
        progress["rdkafka_failed"] = f"{len(failures)} failed deliveries, first {failures[0]}"


def java_consumer(bootstrap, topic, workdir):
    out = open(os.path.join(workdir, "java-consumed.txt"), "w")
    return subprocess.Popen([KAFKA_CLI, "kafka-console-consumer", "--bootstrap-server", bootstrap,
                             "--topic", topic, "--group", "java-failover", "--from-beginning",
                             "--timeout-ms", "20000"], stdout=out, stderr=subprocess.DEVNULL)


def librdkafka_consumer(bootstrap, topic, seen, stop):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rdkafka-failover",
                         "auto.offset.reset": "earliest", "log_level": 2})
    consumer.subscribe([topic])
    idle_since = None
    while True:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            seen.append(message.value().decode())
            idle_since = None
        elif stop.is_set():
            idle_since = idle_since or time.time()
            if time.time() - idle_since > 15:
                break
    consumer.close()


def main():
    binary = os.path.abspath(os.environ.get("STRAND_BIN", "target/release/strand"))
    root = tempfile.mkdtemp(prefix="strand-failover-")
    cluster = Cluster(binary, root, settings=SETTINGS)
    try:
        cluster.launch()
        bootstrap = cluster.bootstrap()
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
        topics = {"java": "failover-java", "rdkafka": "failover-rdkafka"}
        for topic in topics.values():
            for attempt in range(30):
                future = admin.create_topics([NewTopic(topic, PARTITIONS, 3,
                                                       config={"min.insync.replicas": "2"})])[topic]
                try:
                    future.result(30)
                    break
                except Exception as error:
                    if "already exists" in str(error):
                        break
                    time.sleep(1)
            wait_for_full_isr(admin, topic, 60)
        progress = collections.defaultdict(int)
        acked = {"java": [], "rdkafka": []}
        with tempfile.TemporaryDirectory() as workdir:
            java_reader = java_consumer(bootstrap, topics["java"], workdir)
            rdkafka_seen, stop = [], threading.Event()
            # A daemon: a fail() below must end the test, not wait for this reader.
            reader = threading.Thread(target=librdkafka_consumer,
                                      args=(bootstrap, topics["rdkafka"], rdkafka_seen, stop),
                                      daemon=True)
            reader.start()
            writers = [
                threading.Thread(target=java_producer,
                                 args=(bootstrap, topics["java"], acked["java"], progress, workdir)),
                threading.Thread(target=librdkafka_producer,
                                 args=(bootstrap, topics["rdkafka"], acked["rdkafka"], progress)),
            ]
            for w in writers:
                w.start()
            for client, partition in (("java", 0), ("rdkafka", 1)):
                # The Java producer reports what it sent; librdkafka's what was acknowledged.
                done = (lambda: progress["java"]) if client == "java" else (lambda: len(acked["rdkafka"]))
                deadline = time.time() + 300
                while done() < COUNT // 3 and time.time() < deadline:
                    time.sleep(0.05)
                node = leader_of_topic(admin, topics[client], partition)
                if node not in cluster.ids:
                    fail(f"no leader for {topics[client]}-{partition}")
                log(f"{client} producer at {done()}: kill -9 node {node}, "
                    f"leader of {topics[client]}-{partition}")
                cluster.kill(node)
                time.sleep(3)
                cluster.start(node)
            for w in writers:
                w.join(900)
            if progress.get("java_failed"):
                fail(f"the Java producer exited {progress['java_failed']}")
            if progress.get("rdkafka_failed"):
                fail(f"librdkafka producer: {progress['rdkafka_failed']}")
            log(f"acknowledged: java {len(acked['java'])}, librdkafka {len(acked['rdkafka'])}")
            stop.set()
            reader.join(600)
            code = java_reader.wait(900)
            with open(os.path.join(workdir, "java-consumed.txt")) as f:
                java_seen = [line.strip() for line in f if line.strip()]
        for client, seen in (("java", java_seen), ("rdkafka", rdkafka_seen)):
            missing = set(acked[client]) - set(seen)
            log(f"{client}: acked {len(acked[client])}, consumed {len(seen)} "
                f"({len(set(seen))} distinct), missing {len(missing)}")
            if len(acked[client]) != COUNT:
                fail(f"{client}: {COUNT - len(acked[client])} records never acknowledged")
            if missing:
                fail(f"{client}: acknowledged records not consumed, e.g. {sorted(missing)[:5]}")
        if code not in (0, 1):  # console consumer exits 1 after --timeout-ms with no data? keep lenient
            log(f"java consumer exited {code}")
        # Every acknowledged record is in the log exactly once (consumers may re-read).
        final = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover-final",
                          "log_level": 2})
        for client, topic in topics.items():
            values = []
            for partition in range(PARTITIONS):
                tp = TopicPartition(topic, partition, 0)
                low, high = watermarks(final, tp)
                tp.offset = low
                final.assign([tp])
                read = 0
                while read < high - low:
                    message = final.poll(1.0)
                    if message is None or message.error():
                        continue
                    values.append(message.value().decode())
                    read += 1
            duplicates = [v for v, n in collections.Counter(values).items() if n > 1]
            if duplicates:
                fail(f"{client}: duplicated in the log, e.g. {duplicates[:5]}")
            log(f"{client}: {len(values)} records in the log, no duplicates")
        final.close()
        log("PASS")
        return 0
    finally:
        cluster.destroy()


if __name__ == "__main__":
    sys.exit(main())
