#!/usr/bin/env python3
"""Catch-up reads from tiered storage, against the store's own GET throughput in the same
run, and what copying costs the write path.

One Strand node with an S3 server on loopback (interop/python/s3_server.py): moto's, or
with `--weed PATH` SeaweedFS's S3 gateway (moto reads a whole object for every ranged GET,
so its ranged GETs are slow and a reader of 8 MiB ranges is measured against that):

  1. `--mb` MB are produced to a tiered topic (local.retention.ms=1000) and the node waits
     until every sealed segment is copied and deleted locally.
  2. Raw GET: every copied `.log` object is downloaded whole with boto3, one after another
     (what a single reader at the store can pull), MB/s.
  3. Catch-up: a librdkafka consumer reads the whole partition from offset 0 (all of it
     from the store but the newest segments), MB/s; repeated `--runs` times, median.
  4. Copy cost: `strand bench`-like produce throughput (librdkafka, acks=1) on a tiered
     topic while its segments are being copied, against an untiered topic on the same
     node, median of `--runs`.

Prints one line per measure and the ratios. Example:
  python3 bench/tiered_catchup.py --mb 512 --runs 3 [--weed /tmp/weed] [--client strand]
SeaweedFS is not in CI; built once here with `go mod download -json
github.com/seaweedfs/seaweedfs@v0.0.0-20261109003541-7506e5f91cd6`, then `go build -o
/tmp/weed ./weed` in a copy of that module (its go.mod has replace directives, so `go
install` refuses it).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "interop", "python"))
from s3_server import S3Server, free_port  # noqa: E402
from compare import proc_cpu_seconds  # noqa: E402

BIN = os.environ.get("STRAND_BIN", os.path.join(ROOT, "target", "release", "strand"))
# Large records, so the Python client's per-record cost does not bound the read rate.
RECORD = 16384


def produce(bootstrap, topic, mb):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                         "batch.size": 262144, "queue.buffering.max.kbytes": 262144})
    payload = b"x" * RECORD
    count = mb * 1024 * 1024 // RECORD
    started = time.time()
    for n in range(count):
        while True:
            try:
                producer.produce(topic, value=payload, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
        if n % 10000 == 0:
            producer.poll(0)
    producer.flush(120)
    return count, mb / (time.time() - started)


def offsets(bootstrap, topic):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    consumer.close()
    return low, high


def catch_up(bootstrap, topic, count):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"catchup-{time.time_ns()}",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800,
                         "max.partition.fetch.bytes": 4194304, "queued.max.messages.kbytes": 262144})
    consumer.assign([TopicPartition(topic, 0, 0)])
    read, size = 0, 0
    started = time.time()
    while read < count:
        for message in consumer.consume(10000, 1.0):
            if not message.error():
                read += 1
                size += len(message.value())
        if time.time() - started > 600:
            raise SystemExit(f"catch-up stalled at {read} of {count}")
    elapsed = time.time() - started
    consumer.close()
    return size / 1024 / 1024 / elapsed


def catch_up_java(bootstrap, topic, count):
    """kafka-consumer-perf-test (Kafka 4.4's Java consumer) reading the whole topic: MB/s."""
    cli = os.path.join(ROOT, "interop", "kafka", "kafka-cli.sh")
    out = subprocess.run([cli, "kafka-consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic,
                          "--messages", str(count), "--timeout", "600000", "--hide-header"],
                         capture_output=True, text=True, timeout=900)
    line = [l for l in out.stdout.splitlines() if l.strip()][-1]
    return float(line.split(",")[3])


def catch_up_strand(bootstrap, topic, count):
    """`strand bench` as a consumer only (Rust, one Fetch in flight, 8 MiB per partition,
    records walked but not copied): what the broker serves when the client is not the
    bound. MiB/s of record batches fetched, as the raw GETs count the same bytes."""
    out = subprocess.run([BIN, "bench", "--bootstrap", bootstrap, "--topic", topic, "--partitions", "1",
                          "--producers", "0", "--consumers", "1", "--from-beginning", "--records", str(count),
                          "--duration-secs", "600", "--quiet", "--json", "-"],
                         capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"strand bench failed: {out.stderr[-500:]}")
    report = json.loads(out.stdout[out.stdout.index("{"):])
    if report["consumed_records"] < count:
        raise SystemExit(f"strand bench read {report['consumed_records']} of {count}")
    return report["fetched_batch_bytes"] / 1024 / 1024 / report["seconds"]


def raw_get(s3):
    """Whole objects, one after another: MB/s, objects, bytes."""
    keys = s3.keys(suffix=".log")
    started = time.time()
    size = 0
    for key in keys:
        size += len(s3.client.get_object(Bucket=s3.bucket, Key=key)["Body"].read())
    return size / 1024 / 1024 / (time.time() - started), len(keys), size


def raw_ranged_get(s3, chunk=8 * 1024 * 1024, parallel=4):
    """The objects as Strand's reader gets them: ranges of `chunk` bytes, `parallel` at a
    time, in order: MB/s."""
    from concurrent.futures import ThreadPoolExecutor
    keys = s3.keys(suffix=".log")
    sizes = {k: s3.client.head_object(Bucket=s3.bucket, Key=k)["ContentLength"] for k in keys}
    ranges = [(k, start, min(start + chunk, sizes[k]) - 1) for k in keys for start in range(0, sizes[k], chunk)]

    def get(r):
        key, first, last = r
        return len(s3.client.get_object(Bucket=s3.bucket, Key=key, Range=f"bytes={first}-{last}")["Body"].read())

    started = time.time()
    with ThreadPoolExecutor(parallel) as pool:
        size = sum(pool.map(get, ranges))
    return size / 1024 / 1024 / (time.time() - started)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=512)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--weed", help="a SeaweedFS binary: its S3 gateway instead of moto's")
    parser.add_argument("--client", choices=["librdkafka", "java", "strand"], default="librdkafka",
                        help="the catch-up reader: librdkafka from Python, kafka-consumer-perf-test (Java), "
                             "or `strand bench` (Rust, raw Fetch)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        s3 = S3Server(d, "bench", weed=args.weed)
        port = free_port()
        bootstrap = f"127.0.0.1:{port}"
        config = os.path.join(d, "strand.toml")
        with open(config, "w") as f:
            f.write(f'remote_log_storage_system_enable = true\nremote_storage_url = "s3://bench/strand"\n'
                    f"remote_log_manager_task_interval_ms = 500\nretention_check_interval_ms = 500\n")
        log = open(os.path.join(d, "broker.log"), "w")
        broker = subprocess.Popen([BIN, "serve", "--listen", bootstrap, "--data-dir", os.path.join(d, "data"),
                                   "--http-listen", "none", "--config", config], stdout=log, stderr=subprocess.STDOUT,
                                  env={**os.environ, **s3.environment()})
        try:
            time.sleep(2)
            admin = AdminClient({"bootstrap.servers": bootstrap})
            segment = str(64 * 1024 * 1024)
            for topic, tiered in (("tiered", True), ("plain", False)):
                config = {"retention.ms": "-1", "segment.bytes": segment}
                if tiered:
                    config.update({"remote.storage.enable": "true", "local.retention.ms": "1000"})
                admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)

            writes = {"tiered": [], "plain": []}
            for run in range(args.runs):
                for topic in ("plain", "tiered"):
                    _, mb_s = produce(bootstrap, topic, args.mb // args.runs)
                    writes[topic].append(mb_s)
            _, end = offsets(bootstrap, "tiered")
            deadline = time.time() + 600
            while time.time() < deadline:
                copied = s3.keys(suffix=".json")
                local = [f for f in os.listdir(os.path.join(d, "data", "tiered-0")) if f.endswith(".log")]
                if copied and len(local) <= 1:
                    break
                time.sleep(1)
            get_mb_s, objects, size = raw_get(s3)
            ranged_mb_s = raw_ranged_get(s3)
            read = {"librdkafka": catch_up, "java": catch_up_java, "strand": catch_up_strand}[args.client]
            reads, cpu = [], {"broker": [], "store": [], "client": []}
            for _ in range(args.runs):
                pids = {"broker": broker.pid, "store": s3.process.pid}
                before = {who: proc_cpu_seconds(pid) for who, pid in pids.items()}
                client_before = resource.getrusage(resource.RUSAGE_CHILDREN)
                own_before = resource.getrusage(resource.RUSAGE_SELF)
                reads.append(read(bootstrap, "tiered", end))
                client_after = resource.getrusage(resource.RUSAGE_CHILDREN)
                own_after = resource.getrusage(resource.RUSAGE_SELF)
                gib = size / 1024 ** 3
                for who, pid in pids.items():
                    cpu[who].append((proc_cpu_seconds(pid) - before[who]) / gib)
                # The client: a child process (strand bench, Java) or this one (librdkafka).
                used = sum(getattr(a, f) - getattr(b, f) for a, b in ((client_after, client_before),
                           (own_after, own_before)) for f in ("ru_utime", "ru_stime"))
                cpu["client"].append(used / gib)
            _, plain_end = offsets(bootstrap, "plain")
            local_reads = [read(bootstrap, "plain", plain_end) for _ in range(args.runs)]
            print(f"copied: {objects} segments, {size / 1024 / 1024:.0f} MiB in the store")
            print(f"raw GET (boto3, whole objects, one at a time): {get_mb_s:.1f} MB/s")
            client = {"java": "kafka-consumer-perf-test", "strand": "strand bench"}.get(args.client, args.client)
            print(f"catch-up from offset 0 ({client}), median of {args.runs}: {statistics.median(reads):.1f} MB/s "
                  f"({', '.join(f'{r:.1f}' for r in reads)})")
            print("CPU s per GiB read from the store during catch-up, medians: " + ", ".join(
                f"{who} {statistics.median(v):.2f}" for who, v in cpu.items()))
            print(f"raw ranged GET (boto3, 8 MiB ranges, 4 at a time, as Strand's reader): {ranged_mb_s:.1f} MB/s")
            print(f"the same client reading an untiered topic from local disk (page cache), median: "
                  f"{statistics.median(local_reads):.1f} MB/s")
            print(f"catch-up / raw GET: {statistics.median(reads) / get_mb_s:.2f}; "
                  f"catch-up / raw ranged GET: {statistics.median(reads) / ranged_mb_s:.2f}")
            plain, tiered = statistics.median(writes["plain"]), statistics.median(writes["tiered"])
            print(f"produce, untiered topic: {plain:.1f} MB/s; tiered, while copying: {tiered:.1f} MB/s; "
                  f"ratio {tiered / plain:.3f}")
        finally:
            broker.terminate()
            broker.wait(60)
            s3.close()


if __name__ == "__main__":
    main()
