"""Tiered storage against a real S3-compatible server, with real clients.

The store is moto's S3 server (PyPI `moto[server]`): it speaks the S3 REST API with
SigV4, multipart uploads and ListObjectsV2, starts in a second and needs nothing but
pip; SeaweedFS or MinIO would need a Go build of minutes. One Strand node (its own
metadata quorum) is configured as a Kafka operator would, in server.properties:
remote.log.storage.system.enable=true, strand.remote.storage.url=s3://BUCKET/PREFIX,
credentials and endpoint from the AWS environment.

  1. A topic with remote.storage.enable=true and local.retention.ms of one second: its
     sealed segments are copied to the bucket and deleted locally; kafka-get-offsets
     answers earliest-local (-4) and latest-tiered (-5); librdkafka and Kafka's Java
     console consumer read every record from offset 0, in order.
  2. kill -9 of the broker while copies are in flight, restart: every record is still
     read from offset 0, and every copy the bucket names has all its objects.
  3. The store stalled (SIGSTOP) mid-stream: producing goes on, nothing not yet copied is
     deleted locally; resumed (SIGCONT): copies catch up and everything reads back.
  4. Remote retention (retention.ms set by kafka-configs): copies are deleted from the
     bucket and the log start moves.
  5. remote.copy.lag.ms holds copies back; lowered with kafka-configs, they go; a lag
     above local retention is refused with Kafka's message.
  6. Deleting the topics deletes their objects.

Needs STRAND_BIN, moto[server], confluent-kafka and the Kafka jars (kafka-cli.sh)."""
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker_process import BIN, free_port, one_node_properties
from dataset import check, fail, ok
from s3_server import S3Server

HERE = os.path.dirname(os.path.abspath(__file__))
KAFKA_CLI = os.path.join(HERE, "..", "kafka", "kafka-cli.sh")
BUCKET = "strand-tiered"
TOPIC = "tiered"
RECORD_BYTES = 200


def value(n):
    return f"record-{n:08d}-".encode().ljust(RECORD_BYTES, b"x")


def wait_until(predicate, seconds, what):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    fail(f"timed out waiting for {what}")


class Node:
    """One Strand node run from a server.properties, restartable, killable."""

    def __init__(self, d, properties, env):
        self.d, self.properties, self.env, self.process, self.runs = d, properties, env, None, 0
        self.http_port = free_port()

    def metric(self, name, topic):
        """A BrokerTopicMetrics series of `topic` from /metrics (0 when absent)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/metrics", timeout=10) as response:
            text = response.read().decode()
        for line in text.splitlines():
            if line.startswith(f'{name}{{topic="{topic}"}} '):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def start(self):
        self.runs += 1
        log_path = os.path.join(self.d, f"broker-{self.runs}.log")
        self.log_path = log_path
        with open(log_path, "w") as log:
            self.process = subprocess.Popen([BIN, "serve", "--config", self.properties, "--http-listen",
                                             f"127.0.0.1:{self.http_port}"], stdout=log,
                                            stderr=subprocess.STDOUT, env=self.env)
        wait_until(lambda: "listening on" in open(log_path).read() or self.process.poll() is not None, 30,
                   "the broker to listen")
        if self.process.poll() is not None:
            fail(f"the broker did not start: {open(log_path).read()[-1500:]}")

    def kill9(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self):
        self.process.terminate()
        code = self.process.wait(60)
        check(code == 0, f"the broker stopped cleanly ({code})")
        for run in range(1, self.runs + 1):
            text = open(os.path.join(self.d, f"broker-{run}.log")).read()
            check("panicked" not in text, f"no panic in the broker log of run {run}")


def get_offset(bootstrap, spec, topic=TOPIC):
    """kafka-get-offsets --time SPEC for partition 0 (Kafka's own tool)."""
    out = subprocess.run([KAFKA_CLI, "kafka-get-offsets", "--bootstrap-server", bootstrap, "--topic", topic,
                          "--partitions", "0", "--time", spec], capture_output=True, text=True, timeout=120)
    for line in out.stdout.splitlines():
        if line.startswith(f"{topic}:0:"):
            return int(line.rsplit(":", 1)[1] or -1)
    fail(f"kafka-get-offsets --time {spec}: {out.stdout.strip()} {out.stderr.strip()[-500:]}")


def produce(bootstrap, start, count, topic=TOPIC):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 16384,
                         "enable.idempotence": True})
    for n in range(start, start + count):
        producer.produce(topic, key=str(n).encode(), value=value(n), partition=0)
        if n % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(60)
    check(remaining == 0, f"records {start}..{start + count} acknowledged")


def read_librdkafka(bootstrap, count, what, start=0):
    """Reads offsets start..count with librdkafka, checking each record in order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.time_ns()}",
                         "enable.auto.commit": False, "auto.offset.reset": "error"})
    consumer.assign([TopicPartition(TOPIC, 0, start)])
    expected = start
    deadline = time.time() + 120
    while expected < count and time.time() < deadline:
        for message in consumer.consume(1000, 1.0):
            if message.error():
                fail(f"{what}: librdkafka consumer error {message.error()}")
            if message.offset() != expected or message.value() != value(expected):
                fail(f"{what}: offset {message.offset()} where {expected} was due "
                     f"({message.value()[:20]!r})")
            expected += 1
    consumer.close()
    check(expected == count, f"{what}: librdkafka read offsets {start} to {expected} of {count}, in order")


def read_from_zero_java(bootstrap, count):
    out = subprocess.run([KAFKA_CLI, "kafka-console-consumer", "--bootstrap-server", bootstrap, "--topic", TOPIC,
                          "--partition", "0", "--offset", "earliest", "--max-messages", str(count),
                          "--timeout-ms", "60000"], capture_output=True, text=True, timeout=300)
    lines = out.stdout.splitlines()
    expected = [value(n).decode() for n in range(count)]
    check(lines == expected, f"Kafka's Java console consumer read {len(lines)} of {count} records from "
                             f"offset 0, in order ({out.stderr.strip()[-300:] if lines != expected else ''})")


with tempfile.TemporaryDirectory() as d:
    s3 = S3Server(d, BUCKET)
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    properties = one_node_properties(d, {"PLAINTEXT": port}, [
        "remote.log.storage.system.enable=true",
        f"strand.remote.storage.url=s3://{BUCKET}/cluster",
        "remote.log.manager.task.interval.ms=500",
        "log.retention.check.interval.ms=500",
    ])
    node = Node(d, properties, {**os.environ, **s3.environment()})
    node.start()
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1, config={
            "remote.storage.enable": "true", "local.retention.ms": "1000", "retention.ms": "-1",
            "internal.segment.bytes": str(256 * 1024)})])[TOPIC].result(30)

        # 1. Copies, local deletion, reads from offset 0.
        total = 20_000
        produce(bootstrap, 0, total)
        wait_until(lambda: len(s3.keys(suffix=".json")) >= 10, 60, "segments copied to the bucket")
        wait_until(lambda: get_offset(bootstrap, "earliest-local") > total // 2, 90,
                   "local segments deleted after their copy")
        local_start = get_offset(bootstrap, "earliest-local")
        tiered_end = get_offset(bootstrap, "latest-tiered")
        check(tiered_end >= local_start - 1, f"latest-tiered {tiered_end} reaches the local start {local_start}")
        check(get_offset(bootstrap, "earliest") == 0, "earliest is still 0: the bucket holds it")
        whole, why = s3.copies_are_whole()
        check(whole, f"every copy in the bucket is whole {why}")
        read_librdkafka(bootstrap, total, "after local deletion")
        read_from_zero_java(bootstrap, total)
        series = "kafka_server_brokertopicmetrics_"
        copied = node.metric(series + "remotecopybytes_total", TOPIC)
        fetched = node.metric(series + "remotefetchbytes_total", TOPIC)
        held = node.metric(series + "remotelogsizebytes", TOPIC)
        check(copied > 0 and fetched > 0 and held > 0 and node.metric(series + "remotecopyerrors_total", TOPIC) == 0,
              f"/metrics: {copied:.0f} bytes copied, {fetched:.0f} read from the store, {held:.0f} held there")

        # 2. kill -9 while copies are in flight.
        before = len(s3.keys(suffix=".json"))
        produce(bootstrap, total, 10_000)
        total += 10_000
        wait_until(lambda: len(s3.keys(suffix=".json")) >= before + 3, 60, "copies of the new segments under way")
        node.kill9()
        node.start()
        whole, why = s3.copies_are_whole()
        check(whole, f"after kill -9 every copy the bucket names is whole {why}")
        wait_until(lambda: get_offset(bootstrap, "latest-tiered") > total - 2_000, 90,
                   "copies resumed after the restart")
        read_librdkafka(bootstrap, total, "after kill -9 and restart")

        # 3. The store stalls mid-stream, then resumes.
        s3.process.send_signal(signal.SIGSTOP)
        tiered_during = get_offset(bootstrap, "latest-tiered")
        produce(bootstrap, total, 10_000)
        total += 10_000
        time.sleep(3)
        local_during = get_offset(bootstrap, "earliest-local")
        check(local_during <= tiered_during + 1,
              f"with the store stalled nothing uncopied is deleted (local start {local_during}, "
              f"copied to {tiered_during})")
        lag_segments = node.metric(series + "remotecopylagsegments", TOPIC)
        lag_bytes = node.metric(series + "remotecopylagbytes", TOPIC)
        check(lag_segments >= 3 and lag_bytes > 500_000,
              f"/metrics: RemoteCopyLagSegments {lag_segments:.0f}, RemoteCopyLagBytes {lag_bytes:.0f} while stalled")
        read_librdkafka(bootstrap, total, "the newest records while the store is stalled", start=total - 1_000)
        s3.process.send_signal(signal.SIGCONT)
        wait_until(lambda: get_offset(bootstrap, "latest-tiered") > total - 2_000, 180,
                   "copies caught up after the store resumed")
        wait_until(lambda: get_offset(bootstrap, "earliest-local") > tiered_during + 1, 60,
                   "local deletion resumed")
        read_librdkafka(bootstrap, total, "after the store stalled and resumed")

        # 4. Remote retention, set as an operator would (while the store is stalled, the
        # copies past it are counted as RemoteDeleteLag until the store lets them go).
        s3.process.send_signal(signal.SIGSTOP)
        out = subprocess.run([KAFKA_CLI, "kafka-configs", "--bootstrap-server", bootstrap, "--alter",
                              "--entity-type", "topics", "--entity-name", TOPIC, "--add-config",
                              "retention.bytes=2000000,local.retention.bytes=1000000"],
                             capture_output=True, text=True, timeout=120)
        check(out.returncode == 0, f"kafka-configs set retention.bytes ({out.stderr.strip()[-300:]})")
        wait_until(lambda: node.metric(series + "remotedeletelagsegments", TOPIC) > 0, 30,
                   "RemoteDeleteLagSegments to count the copies past retention.bytes")
        delete_lag = node.metric(series + "remotedeletelagbytes", TOPIC)
        check(delete_lag > 1_000_000, f"/metrics: RemoteDeleteLagBytes {delete_lag:.0f} while the store is stalled")
        s3.process.send_signal(signal.SIGCONT)
        wait_until(lambda: get_offset(bootstrap, "earliest") > 0, 60, "remote retention to move the log start")
        wait_until(lambda: node.metric(series + "remotedeletelagsegments", TOPIC) == 0, 30,
                   "no delete lag once the store is back")
        earliest = get_offset(bootstrap, "earliest")
        kept = len(s3.keys(suffix=".json"))
        check(0 < kept <= 12, f"remote retention left {kept} copies of about 2 MB (log start {earliest})")

        # 5. remote.copy.lag.ms holds copies back until it passes, or is lowered with
        # kafka-configs.
        lagging = "lagging"
        admin.create_topics([NewTopic(lagging, num_partitions=1, replication_factor=1, config={
            "remote.storage.enable": "true", "local.retention.ms": "600000", "retention.ms": "-1",
            "remote.copy.lag.ms": "600000", "internal.segment.bytes": str(256 * 1024)})])[lagging].result(30)
        produce(bootstrap, 0, 5_000, topic=lagging)
        wait_until(lambda: node.metric(series + "remotecopylagsegments", lagging) >= 3, 30,
                   "sealed segments of the lagging topic counted as copy lag")
        time.sleep(2)  # four passes of remote.log.manager.task.interval.ms
        held_back = s3.keys(prefix=f"cluster/{lagging}-", suffix=".json")
        check(not held_back, f"remote.copy.lag.ms=600000: no copy yet ({len(held_back)})")
        out = subprocess.run([KAFKA_CLI, "kafka-configs", "--bootstrap-server", bootstrap, "--alter",
                              "--entity-type", "topics", "--entity-name", lagging, "--add-config",
                              "remote.copy.lag.ms=0"], capture_output=True, text=True, timeout=120)
        check(out.returncode == 0, f"kafka-configs set remote.copy.lag.ms=0 ({out.stderr.strip()[-300:]})")
        wait_until(lambda: len(s3.keys(prefix=f"cluster/{lagging}-", suffix=".json")) >= 3, 60,
                   "copies once remote.copy.lag.ms is 0")
        wait_until(lambda: node.metric(series + "remotecopylagsegments", lagging) == 0, 30,
                   "no copy lag left")
        refused = subprocess.run([KAFKA_CLI, "kafka-configs", "--bootstrap-server", bootstrap, "--alter",
                                  "--entity-type", "topics", "--entity-name", lagging, "--add-config",
                                  "remote.copy.lag.bytes=999999999999,local.retention.bytes=1000000"],
                                 capture_output=True, text=True, timeout=120)
        check(refused.returncode != 0 and "Value must not exceed local.retention.bytes" in refused.stderr,
              f"a copy lag above local retention refused as Kafka does ({refused.stderr.strip()[-200:]})")

        # 6. Deleting the topics deletes their objects.
        for deleted in admin.delete_topics([TOPIC, lagging]).values():
            deleted.result(30)
        wait_until(lambda: not s3.keys(), 60, "the deleted topics' objects to go")
        ok("tiered storage: copies, reads from the store, kill -9, a stalled store, remote retention, "
           "copy lag, deletion")
    finally:
        if sys.exc_info()[0] is not None:
            print(f"--- broker log, last lines:\n{open(node.log_path).read()[-3000:]}")
        s3.process.send_signal(signal.SIGCONT)
        node.stop()
        s3.close()
