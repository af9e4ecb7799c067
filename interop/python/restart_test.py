"""Restart test: records acknowledged before a SIGTERM, and before a kill -9 in the middle
of a produce stream, are all readable after the broker restarts; topics keep their ids
and partition counts. Starts and stops its own broker (STRAND_BIN)."""
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from dataset import check, fail, ok

BIN = os.environ.get("STRAND_BIN", "target/release/strand")
PARTITIONS = 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    def __init__(self, data_dir, port, advertise=None, config=None):
        self.data_dir, self.port, self.process, self.advertise = data_dir, port, None, advertise
        self.config = config

    def start(self):
        self.log = open(os.path.join(os.path.dirname(self.data_dir), f"broker-{time.time_ns()}.log"), "w")
        extra = ["--advertise", self.advertise] if self.advertise else []
        extra += ["--config", self.config] if self.config else []
        self.process = subprocess.Popen([BIN, "serve", "--listen", f"127.0.0.1:{self.port}", "--data-dir", self.data_dir] + extra,
                                        stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.process.poll() is not None:
                    fail(f"broker exited with {self.process.returncode}")
                time.sleep(0.05)
        fail("broker did not start listening")

    def stop(self, sig):
        self.process.send_signal(sig)
        code = self.process.wait(30)
        self.log.close()
        return code


def topic_state(admin, topic):
    meta = admin.list_topics(topic, timeout=10).topics[topic]
    return len(meta.partitions)


def consume_all(bootstrap, topic):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values = set()
    idle_since = time.time()
    while time.time() - idle_since < 3:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            fail(f"consume error {message.error()}")
        values.add(message.value())
        idle_since = time.time()
    consumer.close()
    return values


def produce(bootstrap, topic, values, acked, stop=None):
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "acks": "all",
                         "linger.ms": 2, "message.timeout.ms": 5000, "retries": 0})

    def delivered(error, message):
        if error is None:
            acked.add(message.value())

    for value in values:
        if stop is not None and stop.is_set():
            break
        while True:
            try:
                producer.produce(topic, value=value, partition=int(value) % PARTITIONS, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(10)


def main():
  with tempfile.TemporaryDirectory() as workdir:
    data_dir = os.path.join(workdir, "data")
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    broker = Broker(data_dir, port)
    broker.start()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = "restart-test"
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1,
                                  config={"retention.ms": "86400000"})])[topic].result(15)

    acked = set()
    produce(bootstrap, topic, [str(i).encode() for i in range(5000)], acked)
    check(len(acked) == 5000, "5000 records acknowledged before SIGTERM")
    check(broker.stop(signal.SIGTERM) == 0, "SIGTERM: broker exited 0")
    check(os.path.exists(os.path.join(data_dir, ".strand_clean_shutdown")), "SIGTERM: clean-shutdown marker written")

    broker.start()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    check(topic_state(admin, topic) == PARTITIONS, "after SIGTERM: topic and partition count kept")
    check(consume_all(bootstrap, topic) == acked, "after SIGTERM: every acknowledged record reads back")

    # kill -9 in the middle of a produce stream.
    stop = threading.Event()
    acked_during = set()
    writer = threading.Thread(target=produce, args=(bootstrap, topic, [str(i).encode() for i in range(5000, 200000)],
                                                     acked_during, stop))
    writer.start()
    deadline = time.time() + 10
    while len(acked_during) < 20000 and time.time() < deadline:
        time.sleep(0.05)
    broker.stop(signal.SIGKILL)
    stop.set()
    writer.join()
    ok(f"kill -9 after {len(acked_during)} acknowledged records of the second stream")
    check(len(acked_during) > 0, "some records were acknowledged before the kill")

    broker.start()
    survivors = consume_all(bootstrap, topic)
    lost = (acked | acked_during) - survivors
    check(not lost, f"after kill -9: every acknowledged record reads back ({len(lost)} lost)")
    check(broker.stop(signal.SIGTERM) == 0, "final SIGTERM: broker exited 0")
  print("PASS restart test")


if __name__ == "__main__":
    main()
