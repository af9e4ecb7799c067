#!/usr/bin/env python3
"""Strand vs Apache Kafka over TLS: the same broker certificate (PEM key store), an SSL
listener on each, and Kafka's own ProducerPerformance and ConsumerPerformance (from the
release interop/kafka/fetch.sh caches) producing and then consuming the same records over
TLS. Per phase: throughput (MB/s as the tools print it) and the broker's CPU seconds per
GiB moved (utime+stime from /proc, before and after). Runs alternate which broker goes
first; medians over runs and Strand/Kafka ratios are printed as a Markdown table.

    bench/tls_compare.py                 # 3 runs of 1,000,000 records of 1 KiB
    bench/tls_compare.py --runs 1 --records 200000
    bench/tls_compare.py --shape w1      # bench/compare.py's W1 and W4 over TLS

--shape w1 runs the shape of bench/compare.py's W1 (6 partitions, 1 KiB records, acks=1,
maximum throughput, ProducerPerformance with its default client settings) and W4 (the
topic just written consumed from the page cache) over the SSL listeners: what
compare.py measures in the clear, here over TLS on both brokers.
"""
import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "interop" / "python"))
import certificates  # noqa: E402

KAFKA_CLI = ROOT / "interop" / "kafka" / "kafka-cli.sh"
RUN_KAFKA = ROOT / "interop" / "kafka" / "run-kafka.sh"
STRAND = Path(os.environ.get("STRAND_BIN", ROOT / "target" / "release" / "strand"))


def free_port(need_plus_1000=False):
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 64000 or not need_plus_1000:
            return port


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_port(port, timeout=90):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listens on {port}")


def start_strand_with(work, listeners, wait_for, settings=()):
    """Strand serving `listeners` from a server.properties in `work` with `settings`;
    returns once `wait_for` (a port) accepts connections."""
    properties = work / "server.properties"
    properties.write_text("\n".join([
        f"listeners={listeners}",
        f"log.dirs={work}/data",
        "group.initial.rebalance.delay.ms=0",  # as run-kafka.sh sets it for Kafka
        *settings,
    ]) + "\n")
    log = open(work / "broker.log", "a")
    process = subprocess.Popen([str(STRAND), "serve", "--config", str(properties)], stdout=log,
                               stderr=subprocess.STDOUT)
    wait_port(wait_for)
    time.sleep(0.5)
    return process


def start_strand(work, certs, plain_port, ssl_port):
    return start_strand_with(work, f"PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{ssl_port}", ssl_port, [
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={certs}/server-plain-keystore.pem",
    ])


def start_kafka(work, certs, plain_port, ssl_port):
    controller = plain_port + 1000
    log = open(work / "broker.log", "w")
    process = subprocess.Popen([
        str(RUN_KAFKA), str(work / "kafka"), str(plain_port),
        f"listeners=PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{ssl_port},CONTROLLER://127.0.0.1:{controller}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{ssl_port}",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={certs}/server-plain-keystore.pem",
    ], stdout=log, stderr=subprocess.STDOUT)
    wait_port(ssl_port, timeout=120)
    time.sleep(2)
    return process


def tool(*args, timeout=900):
    result = subprocess.run([str(KAFKA_CLI), *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"{args[0]}: {result.stderr[-2000:]}")
    return result.stdout


def stop(process):
    process.terminate()
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()


# The producer settings of each shape: tuned batches, or the tools' defaults (compare.py's W1).
PRODUCER_SETTINGS = {"batches": ["linger.ms=5", "batch.size=262144"], "w1": []}
PARTITIONS = {"batches": 1, "w1": 6}


def perf_phases(pid, bootstrap, topic, records, size, client_config=None, shape="batches"):
    """Kafka's ProducerPerformance then ConsumerPerformance on `topic`: MB/s (as the tools
    print it) and the broker's (`pid`) CPU seconds per GiB of each phase."""
    config = ["--command-config", client_config] if client_config else []
    gib = records * size / 2**30
    before = cpu_seconds(pid)
    out = tool("kafka-producer-perf-test", "--topic", topic, "--num-records", records, "--record-size", size,
               "--throughput", -1, *config, "--producer-props",
               f"bootstrap.servers={bootstrap}", "acks=1", *PRODUCER_SETTINGS[shape])
    produce_cpu = cpu_seconds(pid) - before
    last = [line for line in out.splitlines() if "records sent" in line][-1]
    produce_mb = float(re.search(r"\(([\d.]+) MB/sec\)", last).group(1))
    before = cpu_seconds(pid)
    out = tool("kafka-consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic,
               "--num-records", records, *config, "--timeout", 60000)
    consume_cpu = cpu_seconds(pid) - before
    header, values = [line for line in out.splitlines() if line.strip()][-2:]
    row = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in values.split(",")]))
    consume_mb = float(row["fetch.MB.sec"])  # from the first fetch: without the group join
    return {"produce MB/s": produce_mb, "produce broker CPU s/GiB": produce_cpu / gib,
            "consume MB/s": consume_mb, "consume broker CPU s/GiB": consume_cpu / gib}


def one_run(kind, records, size, certs, shape):
    work = Path(tempfile.mkdtemp(prefix=f"tls-{kind}-"))
    plain_port, ssl_port = free_port(True), free_port()
    process = (start_strand if kind == "strand" else start_kafka)(work, certs, plain_port, ssl_port)
    try:
        client = work / "client.properties"
        client.write_text("\n".join([
            "security.protocol=SSL",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={certs}/ca.pem",
        ]) + "\n")
        tool("kafka-topics", "--bootstrap-server", f"127.0.0.1:{plain_port}", "--create", "--topic", "tls",
             "--partitions", PARTITIONS[shape])
        # run-kafka.sh execs java: its pid is the broker's.
        return perf_phases(process.pid, f"127.0.0.1:{ssl_port}", "tls", records, size, client, shape)
    finally:
        stop(process)
        shutil.rmtree(work, ignore_errors=True)


def perf_arguments(doc, shapes=False):
    """--runs, --records and --size, as the side-by-side scripts take them (and --shape)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=1024)
    if shapes:
        parser.add_argument("--shape", choices=sorted(PRODUCER_SETTINGS), default="batches")
    return parser.parse_args()


def main():
    args = perf_arguments(__doc__, shapes=True)
    results = {"strand": [], "kafka": []}
    with tempfile.TemporaryDirectory() as certs:
        certificates.make_certificates(certs, "unused")
        for run in range(args.runs):
            order = ["strand", "kafka"] if run % 2 == 0 else ["kafka", "strand"]
            for kind in order:
                result = one_run(kind, args.records, args.size, Path(certs), args.shape)
                print(f"run {run + 1} {kind}: {result}", file=sys.stderr)
                results[kind].append(result)
    higher_is_better = {"produce MB/s", "consume MB/s"}
    print("| metric | Strand | Kafka | Strand/Kafka |\n|---|---:|---:|---:|")
    for metric in results["strand"][0]:
        strand = statistics.median(r[metric] for r in results["strand"])
        kafka = statistics.median(r[metric] for r in results["kafka"])
        arrow = "↑" if metric in higher_is_better else "↓"
        print(f"| {metric} ({arrow}) | {strand:.1f} | {kafka:.1f} | {strand / kafka:.2f} |")


if __name__ == "__main__":
    main()
