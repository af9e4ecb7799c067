"""Idempotent producers across a broker restart and lost responses: the Java producer with
its defaults and librdkafka with enable.idempotence=true each send 100,000 records
through a proxy that drops responses, while the broker is restarted mid-stream
(SIGTERM, then kill -9); a consumer then sees every acknowledged
record exactly once, in produce order per partition. Starts its own broker (STRAND_BIN).

    python3 idempotent_restart_test.py [librdkafka|java ...]
"""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from dataset import check, fail, ok
from fault_proxy import FaultProxy
from restart_test import Broker, free_port

COUNT = 100_000
PARTITIONS = 3
HERE = os.path.dirname(os.path.abspath(__file__))


def librdkafka_producer(bootstrap, topic, acked, progress):
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                         "batch.num.messages": 1000,
                         "message.timeout.ms": 120000, "reconnect.backoff.max.ms": 500})
    failures = []

    def delivered(error, message):
        if error is None:
            acked.append(message.value().decode())
        else:
            failures.append(error)

    for i in range(COUNT):
        value = str(i).encode()
        while True:
            try:
                producer.produce(topic, value=value, partition=i % PARTITIONS, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        progress[0] = i
    producer.flush(180)
    if failures:
        fail(f"librdkafka: {len(failures)} deliveries failed, first {failures[0]}")


def java_producer(bootstrap, topic, acked, progress, workdir):
    libs = subprocess.run([os.path.join(HERE, "..", "kafka", "fetch.sh")], check=True, capture_output=True,
                          text=True).stdout.strip().splitlines()[-1]
    classes = os.path.join(workdir, "classes")
    subprocess.run(["javac", "-cp", f"{libs}/*", "-d", classes,
                    os.path.join(HERE, "..", "java", "src", "IdempotentProducer.java")], check=True)
    ack_file = os.path.join(workdir, "java-acks.txt")
    process = subprocess.Popen(["java", "-cp", f"{classes}:{libs}/*", "IdempotentProducer", bootstrap, topic,
                                str(COUNT), ack_file], stdout=subprocess.PIPE, text=True)
    for line in process.stdout:
        if line.startswith("sent "):
            progress[0] = int(line.split()[1])
    code = process.wait(300)
    with open(ack_file) as f:
        acked.extend(line.strip() for line in f if line.strip())
    if code != 0:
        fail(f"java producer exited {code}")


def run(client, sig):
    with tempfile.TemporaryDirectory() as workdir:
        port, proxy_port = free_port(), free_port()
        # Clients talk through a proxy that loses responses (every 10th), so producers
        # retry batches the broker already wrote: only deduplication keeps them single.
        proxy = FaultProxy(proxy_port, port, drop_every=10)
        bootstrap = f"127.0.0.1:{proxy_port}"
        broker = Broker(os.path.join(workdir, "data"), port, advertise=bootstrap)
        broker.start()
        topic = f"idempotent-{client}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(15)
        acked, progress = [], [0]
        target = librdkafka_producer if client == "librdkafka" else java_producer
        args = (bootstrap, topic, acked, progress) + ((workdir,) if client == "java" else ())
        writer = threading.Thread(target=target, args=args)
        writer.start()
        deadline = time.time() + 120
        while progress[0] < COUNT // 3 and time.time() < deadline and writer.is_alive():
            time.sleep(0.02)
        code = broker.stop(sig)
        ok(f"{client}: broker stopped with {signal.Signals(sig).name} (exit {code}) after {progress[0]} records sent")
        time.sleep(0.5)
        broker.start()
        writer.join(300)
        check(not writer.is_alive(), f"{client}: the producer finished")
        check(len(acked) == COUNT, f"{client}: all {COUNT} records acknowledged ({len(acked)})")

        proxy.drop_every = 0  # read back without faults
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        seen = {p: [] for p in range(PARTITIONS)}
        idle_since = time.time()
        while time.time() - idle_since < 3:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                fail(f"consume error {message.error()}")
            seen[message.partition()].append(int(message.value()))
            idle_since = time.time()
        consumer.close()
        everything = [v for values in seen.values() for v in values]
        check(len(everything) == len(set(everything)), f"{client}: no record is in the log twice ({len(everything) - len(set(everything))} duplicates)")
        missing = set(int(v) for v in acked) - set(everything)
        check(not missing, f"{client}: every acknowledged record is in the log ({len(missing)} missing)")
        for partition, values in seen.items():
            check(values == sorted(values), f"{client}: partition {partition} is in produce order")
        check(proxy.dropped > 0, f"{client}: the proxy lost {proxy.dropped} of {proxy.responses} responses on the way")
        proxy.close()
        check(broker.stop(signal.SIGTERM) == 0, f"{client}: broker stopped cleanly")


clients = sys.argv[1:] or ["librdkafka", "java"]
for client in clients:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        run(client, sig)
print("PASS idempotent producers across restarts")
