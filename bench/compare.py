#!/usr/bin/env python3
"""Strand vs Apache Kafka 4.4.0 on this machine: same disk, same settings, same clients.

Runs the workloads below against both brokers, alternating which broker goes first from
one run to the next, with a fresh data directory (and a freshly started broker) for
every run, and prints the medians and the Strand/Kafka ratios. W1-W4 are run with each
client chosen by --client, every one driving both brokers (W7 too): Kafka's own perf tools
(kafka-tools 4.4.0 through interop/kafka/kafka-cli.sh) and `strand bench` (this repo's
load generator); the start-up and partition-count workloads use confluent-kafka
(librdkafka), the transactional workload bench/TxnPerf.java (Kafka's Java producer).

  W1  6 partitions, 1 KiB records, acks=1, maximum throughput
  W2  acks=all: Strand --flush every-batch vs Kafka default and vs Kafka
      log.flush.interval.messages=1
  W3  acks=1 at a fixed rate, half of Kafka's W1 maximum: latency percentiles
  W4  consume a topic written just before (page cache), with the loopback bandwidth
      measured by iperf3 in the same run as the ceiling
  W5  time from process start to the first acknowledged produce; idle RSS
  W6  1,000 and 10,000 partitions: creation time, metadata request time, RSS
  W7  a cluster of 3 brokers on loopback: 6 partitions with RF=3, min.insync.replicas=2,
      1 KiB records, acks=all, maximum throughput (CPU and RSS summed over the nodes)
  W9  share groups (KIP-932): consume a topic written just before with Kafka's
      ShareConsumerPerformance (kafka-tools 4.4.0, one KafkaShareConsumer, implicit
      acknowledgement: every record acquired, delivered and acknowledged durably)
  W8  transactions: one Java producer with a transactional.id (kafka-clients 4.4.0 through
      bench/txn-perf.sh, its defaults otherwise: acks=all, idempotent), 6 partitions,
      1 KiB records, 100 records per transaction round-robin over all 6 partitions, a
      fixed number of transactions as fast as possible: records/s, MB/s, transactions/s,
      commitTransaction() latency p50/p99/max

For every measured phase the broker's CPU seconds (utime+stime from /proc/<pid>/stat,
before/after) are recorded, and its peak RSS (VmHWM from /proc/<pid>/status) at the end
of the run. The machine is checked for other load before every run (see --quiet-*), and
the CPU used by everything else during the measured phase is recorded ("other CPU").

Output: a table on stdout, bench/results/<timestamp>.json, PNG plots in docs/bench/,
and with --write-docs the "Strand vs Apache Kafka" section of docs/BENCHMARKS.md.

  bench/compare.py --quick                 # about 10 minutes per client (W1-W4)
  bench/compare.py --full --write-docs     # about an hour for both clients
  bench/compare.py --quick --workloads W1,W3 --runs 5 --client strand-bench
  bench/compare.py --smoke                 # seconds per workload; results in a temp dir

Kafka (broker, tools and Java clients) is the release interop/kafka/fetch.sh fetches:
4.4.0, or the one STRAND_KAFKA_VERSION names (e.g. 4.1.1). The Strand binary is
--strand-bin, default $STRAND_BIN, else target/release/strand; nothing is built here.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import concurrent.futures
import datetime as dt
import hashlib
import itertools
import json
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KAFKA_CLI = REPO / "interop" / "kafka" / "kafka-cli.sh"
RUN_KAFKA = REPO / "interop" / "kafka" / "run-kafka.sh"
DEFAULT_STRAND = Path(os.environ.get("STRAND_BIN") or REPO / "target" / "release" / "strand")
DEFAULT_DOCS = REPO / "docs" / "BENCHMARKS.md"
CLK_TCK = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024

# Run lengths. quick: a few minutes per client; full: W1 ~20-30 s per run, W4 ~5 GiB;
# smoke: one short run of everything, to check that the script works (not to quote).
QUICK = dict(
    runs=3,
    w1_records=400_000,
    w2_records=200_000,
    warmup_records=100_000,
    w3_seconds=12,
    w4_mib=512,
    w4_passes=2,
    w4_consumers=3,
    w5_runs=3,
    w5_idle_s=3.0,
    w6_partitions=[1000, 10000],
    w6_runs=1,
    w7_records=200_000,
    w8_transactions=2_000,
    w9_mib=256,
    iperf_seconds=3,
)
PROFILES = {
    "quick": QUICK,
    "full": dict(QUICK, runs=5, w1_records=2_500_000, w2_records=1_000_000,
                 warmup_records=300_000, w3_seconds=30, w4_mib=5120, w4_passes=3, w5_runs=5,
                 w5_idle_s=5.0, w6_runs=3, w7_records=1_000_000,
                 w8_transactions=10_000, w9_mib=1024, iperf_seconds=10),
    "smoke": dict(QUICK, runs=1, w1_records=20_000, w2_records=10_000, warmup_records=5_000,
                  w3_seconds=2, w4_mib=32, w4_passes=1, w5_runs=1, w5_idle_s=0.5,
                  w6_partitions=[1000], w7_records=10_000, w8_transactions=50,
                  w9_mib=8, iperf_seconds=1),
}
# W1-W4 and W7 run once per client (--client); W5 and W6 use confluent-kafka whatever it
# is, W8 the Java driver bench/TxnPerf.java.
CLIENT_WORKLOADS = ["W1", "W2", "W3", "W4", "W7"]
OTHER_CLIENT = "confluent-kafka"
FIXED_CLIENTS = {"W8": "TxnPerf", "W9": "ShareConsumerPerformance"}
ALL_WORKLOADS = ["W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9"]
RECORD_SIZE = 1024
PARTITIONS = 6
# Kafka's controller refuses one operation that would write more than 10,000 metadata
# records ("Unable to perform excessively large batch operation", POLICY_VIOLATION), so a
# 10,000-partition topic (10,001 records) cannot be created in one go; W6 creates its
# partitions as topics of at most this many partitions, one CreateTopics each, on both.
W6_TOPIC_PARTITIONS = 1000
# W8: records per transaction (round-robin over the PARTITIONS, so each one spans them
# all), and the Java driver (bench/TxnPerf.java, compiled once by its script).
W8_RECORDS_PER_TXN = 100
TXN_PERF = REPO / "bench" / "txn-perf.sh"

# Strand settings that differ from its defaults, to match run-kafka.sh's server.properties
# (group.initial.rebalance.delay.ms=0); everything else is the same default on both.
STRAND_TOML = "group_initial_rebalance_delay_ms = 0\n"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- /proc


def proc_cpu_split(pid: int) -> tuple[float, float]:
    """(utime, stime) of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def proc_cpu_seconds(pid: int) -> float:
    """utime+stime of a process (all its threads), in seconds."""
    return sum(proc_cpu_split(pid))


PF_KTHREAD = 0x00200000


def kernel_threads_cpu_seconds() -> float:
    """CPU of all kernel threads (kworkers, jbd2, ksoftirqd, ...): I/O and network work
    the brokers cause shows up there, so it is not counted as other processes' load."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                text = f.read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[6]) & PF_KTHREAD:
            total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def proc_status_kib(pid: int, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except FileNotFoundError:
        return None
    return None


def system_busy_seconds() -> float:
    """CPU seconds the whole machine (all cores) spent in user, nice, system and steal
    time since boot (not idle, iowait, irq or softirq)."""
    with open("/proc/stat") as f:
        parts = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, _irq, _softirq, steal = parts[:8]
    return (user + nice + system + steal) / CLK_TCK


def client_cpu_seconds() -> float:
    """CPU of the waited-for tools (children) and of this process (confluent-kafka)."""
    total = 0.0
    for who in (resource.RUSAGE_CHILDREN, resource.RUSAGE_SELF):
        r = resource.getrusage(who)
        total += r.ru_utime + r.ru_stime
    return total


class CpuWindow:
    """Broker, client (waited-for children) and whole-machine CPU over a phase."""

    def __init__(self, broker: "Broker"):
        self.broker = broker

    def __enter__(self):
        self.b0 = self.broker.cpu_split()
        self.c0 = client_cpu_seconds()
        self.k0 = kernel_threads_cpu_seconds()
        self.s0 = system_busy_seconds()
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc):
        self.wall = time.monotonic() - self.t0
        self.machine_cpu = system_busy_seconds() - self.s0
        b1 = self.broker.cpu_split()
        self.broker_user, self.broker_sys = b1[0] - self.b0[0], b1[1] - self.b0[1]
        self.broker_cpu = self.broker_user + self.broker_sys
        self.client_cpu = client_cpu_seconds() - self.c0
        self.kernel_cpu = kernel_threads_cpu_seconds() - self.k0
        return False

    def metrics(self) -> dict:
        return {
            "wall_s": self.wall,
            "broker_cpu_s": self.broker_cpu,
            "broker_user_s": self.broker_user,
            "broker_sys_s": self.broker_sys,
            "client_cpu_s": self.client_cpu,
            "kernel_threads_cpu_s": self.kernel_cpu,
            "other_cpu_s": max(0.0, self.machine_cpu - self.broker_cpu - self.client_cpu
                               - self.kernel_cpu),
        }


def wait_quiet(threshold: float, max_wait: float) -> dict:
    """Waits until the machine is below `threshold` busy (fraction of all cores) over one
    second, for at most max_wait seconds; returns what it saw."""
    ncpu = os.cpu_count() or 1
    start = time.monotonic()
    busy = 1.0
    while True:
        s0 = system_busy_seconds()
        time.sleep(1.0)
        busy = (system_busy_seconds() - s0) / ncpu
        if busy <= threshold or time.monotonic() - start >= max_wait:
            break
    waited = time.monotonic() - start
    if busy > threshold:
        log(f"machine still {busy:.0%} busy after {waited:.0f} s; running anyway")
    return {"busy_before": busy, "waited_s": waited}


# --------------------------------------------------------------------------- brokers

RUNNING: list["Broker"] = []


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def pick_port(need_plus_1000: bool) -> int:
    """A free loopback port (and port+1000 for Kafka's controller)."""
    import random

    for _ in range(200):
        p = random.randint(21000, 29999)
        if port_free(p) and (not need_plus_1000 or port_free(p + 1000)):
            return p
    raise RuntimeError("no free port found")


class Broker:
    """One broker process on a fresh data directory. kind: strand | kafka. As a node of a
    cluster (see Cluster) it gets extra arguments: `strand serve` flags or Kafka
    server.properties lines."""

    replication_factor = 1  # of the topics the workloads create
    topic_configs: tuple[str, ...] = ()

    def __init__(self, kind: str, variant: str, run_dir: Path, strand_bin: Path,
                 flush: str | None = None, kafka_props: tuple[str, ...] = (),
                 strand_args: tuple[str, ...] = ()):
        self.kind = kind
        self.variant = variant
        self.run_dir = run_dir
        self.strand_bin = strand_bin
        self.flush = flush
        self.kafka_props = kafka_props
        self.strand_args = strand_args
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.console = run_dir / "broker.out"
        self.argv: list[str] = []
        self.spawned_at = 0.0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def partitions_dir(self) -> Path:
        """Where the <topic>-<partition> directories live."""
        if self.kind == "kafka":
            return self.run_dir / "data" / "kafka-logs"
        return self.run_dir / "data"

    def spawn(self, port: int | None = None) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.port = port or pick_port(self.kind == "kafka")
        if self.kind == "strand":
            cfg = self.run_dir / "strand.toml"
            cfg.write_text(STRAND_TOML)
            self.argv = [str(self.strand_bin), "serve", "--listen", self.bootstrap,
                         "--data-dir", str(self.run_dir / "data"), "--config", str(cfg),
                         # metrics stay on, as by default, on a port of their own: a
                         # cluster's nodes share this machine and the default address
                         "--http-listen", "127.0.0.1:0"]
            if self.flush:
                self.argv += ["--flush", self.flush]
            self.argv += list(self.strand_args)
        else:
            self.argv = [str(RUN_KAFKA), str(self.run_dir / "data"), str(self.port),
                         *self.kafka_props]
        out = open(self.console, "wb")
        self.spawned_at = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        out.close()
        RUNNING.append(self)

    def wait_exec(self, timeout: float = 60.0) -> float:
        """Kafka: run-kafka.sh formats the data dir (one JVM) and then execs the broker's
        JVM in the same pid; returns the monotonic time that exec was first seen."""
        deadline = time.monotonic() + timeout
        path = f"/proc/{self.pid}/cmdline"
        while time.monotonic() < deadline:
            try:
                with open(path, "rb") as f:
                    cmd = f.read()
            except FileNotFoundError:
                raise RuntimeError(f"{self.variant}: process exited during start")
            if b"kafka.Kafka" in cmd:
                return time.monotonic()
            time.sleep(0.0005)
        raise RuntimeError(f"{self.variant}: broker JVM not exec'd after {timeout} s")

    def wait_ready(self, timeout: float = 120.0) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.variant} exited with {self.proc.returncode} during "
                                   f"start; see {self.console}:\n{tail(self.console)}")
            if self.kind == "kafka":
                if b"Kafka Server started" in self.console.read_bytes():
                    return time.monotonic() - self.spawned_at
            else:
                with socket.socket() as s:
                    s.settimeout(0.2)
                    if s.connect_ex(("127.0.0.1", self.port)) == 0:
                        return time.monotonic() - self.spawned_at
            time.sleep(0.02)
        raise RuntimeError(f"{self.variant} not ready after {timeout} s; see {self.console}")

    def start(self) -> float:
        self.spawn()
        return self.wait_ready()

    def cpu(self) -> float:
        return proc_cpu_seconds(self.pid)

    def cpu_split(self) -> tuple[float, float]:
        return proc_cpu_split(self.pid)

    @property
    def partitions_dirs(self) -> list[Path]:
        """Every directory that holds a replica of each partition."""
        return [self.partitions_dir]

    def rss_kib(self) -> int | None:
        return proc_status_kib(self.pid, "VmRSS")

    def hwm_kib(self) -> int | None:
        return proc_status_kib(self.pid, "VmHWM")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 60.0) -> dict:
        """SIGTERM (both shut down cleanly on it), SIGKILL to the group after `timeout`."""
        info: dict = {}
        if self.proc is None:
            return info
        if self.proc.poll() is not None:
            info["died"] = f"exited with {self.proc.returncode} before stop"
        else:
            t0 = time.monotonic()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
                info["stop_s"] = time.monotonic() - t0
                if self.proc.returncode not in (0, -signal.SIGTERM, 143):
                    info["exit"] = f"exit status {self.proc.returncode} after SIGTERM"
            except subprocess.TimeoutExpired:
                info["exit"] = f"did not stop within {timeout:.0f} s of SIGTERM; killed"
        try:  # anything left in its process group (the format JVM if stopped early)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        if self in RUNNING:
            RUNNING.remove(self)
        return info

    def log_files(self) -> list[Path]:
        files = [self.console]
        if self.kind == "kafka":
            files.append(self.run_dir / "data" / "server.log")
        return files

    def log_issues(self, upto: dict[Path, int] | None = None) -> list[str]:
        """WARN/ERROR/panic lines the broker wrote (deduplicated, with counts); with
        `upto`, only those within the first upto[file] bytes of each file."""
        texts = []
        for path in self.log_files():
            if path.exists():
                data = path.read_bytes()
                if upto is not None:
                    data = data[:upto.get(path, len(data))]
                texts.append(data.decode(errors="replace"))
        pattern = re.compile(r"\b(ERROR|WARN|FATAL)\b|panicked")
        counts: dict[str, int] = {}
        for text in texts:
            for line in text.splitlines():
                if pattern.search(line):
                    key = normalize_log_line(line)
                    counts[key] = counts.get(key, 0) + 1
        return [f"{n}x {k}" if n > 1 else k for k, n in counts.items()]


CLUSTER_NODES = 3
# How long the nodes of a Kafka cluster stopping together get before they are killed.
KAFKA_CLUSTER_STOP_S = 20.0


class Cluster:
    """Three brokers of one cluster on loopback, each on its own data directory, used
    where the workloads use one Broker: the bootstrap is the first node, CPU and RSS are
    the sums over the nodes, topics get RF=3 and min.insync.replicas=2. Kafka: KRaft with
    every node a controller and a broker (static voters, one shared cluster id). Strand:
    every node in the Raft quorum (`--controllers`)."""

    replication_factor = CLUSTER_NODES
    topic_configs = ("min.insync.replicas=2",)

    def __init__(self, kind: str, variant: str, run_dir: Path, strand_bin: Path):
        self.kind = kind
        self.variant = variant
        self.run_dir = run_dir
        ids = range(1, CLUSTER_NODES + 1)
        ports = {i: pick_port(kind == "kafka") for i in ids}
        while len(set(ports.values())) < len(ports):  # pick_port may repeat itself
            ports = {i: pick_port(kind == "kafka") for i in ids}
        self.ports = ports
        if kind == "kafka":
            cluster_id = kafka_random_uuid()
            voters = ",".join(f"{i}@127.0.0.1:{ports[i] + 1000}" for i in ids)
            self.nodes = []
            for i in ids:
                node_dir = run_dir / f"n{i}"
                (node_dir / "data").mkdir(parents=True)
                (node_dir / "data" / "cluster.id").write_text(cluster_id + "\n")
                self.nodes.append(Broker("kafka", f"{variant}-{i}", node_dir, strand_bin,
                                         kafka_props=(
                    f"node.id={i}", f"controller.quorum.voters={voters}",
                    f"offsets.topic.replication.factor={CLUSTER_NODES}",
                    f"transaction.state.log.replication.factor={CLUSTER_NODES}",
                    "transaction.state.log.min.isr=2")))
        else:
            quorum = {i: pick_port(False) for i in ids}
            controllers = ",".join(f"{i}@127.0.0.1:{quorum[i]}" for i in ids)
            self.nodes = [Broker("strand", f"{variant}-{i}", run_dir / f"n{i}", strand_bin,
                                 strand_args=("--node-id", str(i), "--controllers", controllers))
                          for i in ids]
        self.argv: list[str] = []

    @property
    def bootstrap(self) -> str:
        return self.nodes[0].bootstrap

    @property
    def console(self) -> Path:
        return self.nodes[0].console

    @property
    def partitions_dirs(self) -> list[Path]:
        return [n.partitions_dir for n in self.nodes]

    def start(self) -> float:
        t0 = time.monotonic()
        for i, node in enumerate(self.nodes, start=1):
            node.spawn(self.ports[i])
        for node in self.nodes:
            node.wait_ready()
        self.argv = [a for n in self.nodes for a in (n.argv + [";"])][:-1]
        return time.monotonic() - t0

    def cpu_split(self) -> tuple[float, float]:
        splits = [n.cpu_split() for n in self.nodes]
        return sum(u for u, _ in splits), sum(s for _, s in splits)

    def rss_kib(self) -> int | None:
        values = [n.rss_kib() for n in self.nodes]
        return None if None in values else sum(values)

    def hwm_kib(self) -> int | None:
        values = [n.hwm_kib() for n in self.nodes]
        return None if None in values else sum(values)

    def alive(self) -> bool:
        return all(n.alive() for n in self.nodes)

    def stop(self, timeout: float = 60.0) -> dict:
        """Stops every node at once. What they log from here on is not reported: when a
        whole cluster stops, its last nodes find no quorum to hand their leaderships to
        (Strand gives up after 30 s, Kafka keeps retrying until it is killed)."""
        self.stop_marks = {path: path.stat().st_size for n in self.nodes
                           for path in n.log_files() if path.exists()}
        if self.kind == "kafka":
            # A Kafka node whose peers are already gone may wait for its controlled
            # shutdown until it is killed: expected here, so not reported as an issue.
            timeout = min(timeout, KAFKA_CLUSTER_STOP_S)
        with concurrent.futures.ThreadPoolExecutor(len(self.nodes)) as pool:
            infos = list(pool.map(lambda n: n.stop(timeout), self.nodes))
        out: dict = {}
        if self.kind == "kafka":
            killed = [i for i, info in enumerate(infos, 1) if info.pop("exit", None)]
            if killed:
                out["killed_after_stop"] = killed
        for key in ("died", "exit"):
            found = [f"node {i}: {info[key]}" for i, info in enumerate(infos, 1) if key in info]
            if found:
                out[key] = "; ".join(found)
        stops = [info["stop_s"] for info in infos if "stop_s" in info]
        if stops:
            out["stop_s"] = max(stops)
        return out

    def log_issues(self) -> list[str]:
        marks = getattr(self, "stop_marks", None)
        return [f"node {i}: {line}" for i, n in enumerate(self.nodes, 1)
                for line in n.log_issues(marks)]


def raw_metadata_ms(bootstrap: str, timeout: float = 60.0) -> float:
    """Time from sending a Metadata v4 request for all topics to having its whole response,
    on a plain socket: the broker's work and the transfer, without any client decoding it
    (confluent-kafka's list_topics also builds Python objects for every partition)."""
    host, port = bootstrap.rsplit(":", 1)
    client_id = b"compare.py"
    # header v1: api key 3, version 4, correlation id, client id; body: topics null
    # (all), allow_auto_topic_creation false.
    body = (struct.pack(">hhih", 3, 4, 1, len(client_id)) + client_id
            + struct.pack(">i?", -1, False))
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        started = time.perf_counter()
        sock.sendall(struct.pack(">i", len(body)) + body)
        header = b""
        while len(header) < 4:
            chunk = sock.recv(4 - len(header))
            if not chunk:
                raise RuntimeError("connection closed before the Metadata response")
            header += chunk
        left = struct.unpack(">i", header)[0]
        while left > 0:
            chunk = sock.recv(min(left, 1 << 20))
            if not chunk:
                raise RuntimeError("connection closed inside the Metadata response")
            left -= len(chunk)
        return (time.perf_counter() - started) * 1000


def kafka_random_uuid() -> str:
    """What `kafka-storage random-uuid` prints (Kafka's Uuid: 16 random bytes in URL-safe
    base64 without padding, never starting with '-'), without starting a JVM."""
    while True:
        text = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def normalize_log_line(line: str) -> str:
    line = re.sub(r"^\[[^\]]*\]\s*", "", line)  # Kafka's [timestamp]
    line = re.sub(r"^\S*\d{4}-\d\d-\d\dT\S+\s+", "", line)  # tracing's timestamp
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)  # ANSI colours
    line = re.sub(r"/tmp/strand-vs-kafka-[^/\s]+", "<dir>", line)
    return line.strip()[:300]


def tail(path: Path, n: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except FileNotFoundError:
        return ""


def stop_all() -> None:
    for b in list(RUNNING):
        try:
            b.stop(timeout=30)
        except Exception as e:  # noqa: BLE001 - cleanup must go on
            log(f"stopping {b.variant} pid {b.proc.pid if b.proc else '?'}: {e}")


atexit.register(stop_all)


def _on_signal(signum, _frame):
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, _on_signal)


# --------------------------------------------------------------------------- tools


class ToolResult:
    def __init__(self, argv, rc, out, err, wall):
        self.argv, self.rc, self.out, self.err, self.wall = argv, rc, out, err, wall


def kafka_tool(tool: str, *args: str) -> list[str]:
    return [str(KAFKA_CLI), tool, *args]


def jars_version(libs: Path) -> str:
    """The Kafka release of fetch.sh's libs dir (its kafka-clients jar)."""
    for jar in sorted(libs.glob("kafka-clients-*.jar")):
        return jar.name[len("kafka-clients-"):-len(".jar")]
    return "?"


def run_tool(argv: list[str], timeout: float, env: dict | None = None) -> ToolResult:
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, start_new_session=True,
                         env={**os.environ, **(env or {})})
    try:
        out, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        rc = "timeout"
    return ToolResult(argv, rc, out.decode(errors="replace"), err.decode(errors="replace"),
                      time.monotonic() - t0)


def client_issues(res: ToolResult) -> list[str]:
    issues = []
    if res.rc != 0:
        issues.append(f"exit {res.rc}: {Path(res.argv[0]).name} {res.argv[1]}")
    counts: dict[str, int] = {}
    for line in res.err.splitlines():
        line = line.strip()
        if not line or line.startswith("at ") or line.startswith("..."):
            continue
        key = normalize_log_line(line)
        counts[key] = counts.get(key, 0) + 1
    issues += [f"{n}x {k}" if n > 1 else k for k, n in counts.items()]
    return issues


def create_topic(b: "Broker | Cluster", topic: str, partitions: int) -> ToolResult:
    configs = [a for c in b.topic_configs for a in ("--config", c)]
    res = run_tool(kafka_tool("kafka-topics", "--bootstrap-server", b.bootstrap, "--create",
                              "--topic", topic, "--partitions", str(partitions),
                              "--replication-factor", str(b.replication_factor), *configs),
                   timeout=120)
    if res.rc != 0:
        raise RuntimeError(f"{b.variant}: kafka-topics --create failed ({res.rc}):\n"
                           f"{res.out}\n{res.err}")
    # Kafka answers once the controller has committed the topic and makes the broker the
    # leader afterwards; a produce before that fails with NOT_LEADER_OR_FOLLOWER, which the
    # Java producer retries and strand bench does not. Kafka creates a partition's
    # directory while it holds the lock a produce waits for, so the topic is ready once
    # every directory is there. (Strand also answers first and creates the directories in
    # the background, but a produce before that just creates them itself.)
    deadline = time.monotonic() + 60
    dirs = [d / f"{topic}-{p}" for d in b.partitions_dirs for p in range(partitions)]
    while not all(d.is_dir() for d in dirs):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{b.variant}: {topic}'s partition directories not there "
                               "60 s after kafka-topics --create")
        time.sleep(0.01)
    return res


class Client:
    """A load generator run against both brokers: builds the command line of a produce
    or consume run and parses what the tool printed into the metrics of the table
    (records, records_per_s, mb_per_s with MB = 2^20 bytes, lat_*_ms; consumers also
    fetch_mb_per_s and fetch_records_per_s, without any group join)."""

    name = ""
    producer = consumer = ""  # what the tool is called in messages
    latency_resolution_ms = 1.0  # smallest latency step the tool reports

    def __init__(self, strand_bin: Path):
        self.strand_bin = strand_bin  # the Strand binary under test

    def produce_argv(self, b: Broker, topic: str, records: int, acks: str, throughput: int,
                     timeout: float) -> list[str]:
        raise NotImplementedError

    def consume_argv(self, b: Broker, topic: str, records: int, group: str,
                     timeout: float, consumers: int) -> list[str]:
        raise NotImplementedError

    def parse_produce(self, out: str) -> dict | None:
        raise NotImplementedError

    def parse_consume(self, out: str) -> dict | None:
        raise NotImplementedError

    def produce(self, b: Broker, topic: str, records: int, acks: str, throughput: int,
                timeout: float) -> tuple[ToolResult, dict | None]:
        """records of RECORD_SIZE bytes into topic; throughput -1: as fast as possible."""
        res = run_tool(self.produce_argv(b, topic, records, acks, throughput, timeout),
                       timeout + 60)
        return res, self.parse_produce(res.out)

    def consume(self, b: Broker, topic: str, records: int, group: str,
                timeout: float, consumers: int) -> tuple[ToolResult, dict | None]:
        """Reads topic from the beginning until `records` records have been read, with
        `consumers` consumers if the tool can split the partitions between them."""
        res = run_tool(self.consume_argv(b, topic, records, group, timeout, consumers),
                       timeout + 60)
        return res, self.parse_consume(res.out)


PERF_RE = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th")


# ProducerPerformance's report every 5 s: records, rate, average and max latency only.
PERF_WINDOW_RE = re.compile(
    r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg "
    r"latency, ([\d.]+) ms max latency\.\s*$", re.M)


class KafkaTools(Client):
    """Kafka's ProducerPerformance and ConsumerPerformance (kafka-tools 4.4.0) with their
    default client settings. Latencies are whole milliseconds from send() to the
    acknowledgement, so they include time queued in the client."""

    name = "kafka-tools"
    producer, consumer = "ProducerPerformance", "ConsumerPerformance"
    # Option names: Kafka 4.4's tools (not 4.1's) call --producer-props --command-property
    # and ConsumerPerformance's --messages --num-records, and warn about the old names.
    # detect_options() picks the names the tools on the classpath have.
    producer_props, consumer_records = "--producer-props", "--messages"

    @classmethod
    def detect_options(cls):
        def help_text(tool):
            p = subprocess.run(kafka_tool(tool, "--help"), capture_output=True, text=True,
                               timeout=120)
            return p.stdout + p.stderr  # --help prints on stderr and exits 1
        if "--command-property" in help_text("kafka-producer-perf-test"):
            cls.producer_props = "--command-property"
        if "--num-records" in help_text("kafka-consumer-perf-test"):
            cls.consumer_records = "--num-records"

    def produce_argv(self, b, topic, records, acks, throughput, timeout):
        return kafka_tool("kafka-producer-perf-test", "--topic", topic, "--num-records",
                          str(records), "--record-size", str(RECORD_SIZE), "--throughput",
                          str(throughput), self.producer_props,
                          f"bootstrap.servers={b.bootstrap}", f"acks={acks}")

    def consume_argv(self, b, topic, records, group, timeout, consumers):
        # One consumer: ConsumerPerformance has no way to split a topic between several
        # (4.x dropped --threads) and a count-ended run cannot be shared by a group whose
        # partitions hold unequal counts, so kafka-tools reads with one Java consumer.
        return kafka_tool("kafka-consumer-perf-test", "--bootstrap-server", b.bootstrap,
                          "--topic", topic, self.consumer_records, str(records), "--group", group,
                          "--timeout", "30000")

    def parse_produce(self, out):
        m = None
        for m in PERF_RE.finditer(out):
            pass
        if m is None:
            return None
        g = m.groups()
        result = {"records": int(g[0]), "records_per_s": float(g[1]), "mb_per_s": float(g[2]),
                  "lat_avg_ms": float(g[3]), "lat_max_ms": float(g[4]),
                  "lat_p50_ms": float(g[5]), "lat_p95_ms": float(g[6]),
                  "lat_p99_ms": float(g[7]), "lat_p999_ms": float(g[8])}
        # After the first window: without the Java client's cold start (class loading,
        # JIT, first metadata), whose queueing dominates the percentiles of a short run.
        windows = [w.groups() for w in PERF_WINDOW_RE.finditer(out)][1:]
        if windows:
            sent = sum(int(w[0]) for w in windows)
            if sent:
                result["lat_steady_avg_ms"] = sum(int(w[0]) * float(w[3])
                                                  for w in windows) / sent
            result["lat_steady_max_ms"] = max(float(w[4]) for w in windows)
        return result

    def parse_consume(self, out):
        lines = out.strip().splitlines()
        for i, line in enumerate(lines):
            if line.startswith("start.time") and i + 1 < len(lines):
                v = [x.strip() for x in lines[i + 1].split(",")]
                try:
                    return {"mb": float(v[2]), "mb_per_s": float(v[3]), "records": int(v[4]),
                            "records_per_s": float(v[5]), "rebalance_ms": float(v[6]),
                            "fetch_ms": float(v[7]), "fetch_mb_per_s": float(v[8]),
                            "fetch_records_per_s": float(v[9])}
                except (IndexError, ValueError):
                    return None
        return None


class StrandBench(Client):
    """`strand bench` from the Strand binary under test: one connection per producer or
    consumer, batches of --batch-size 16384 (16 records), 5 requests in flight, no
    compression, `--json -` report. Latencies come from an HdrHistogram in microseconds,
    per batch from its request being written to its response; the consumer fetches the
    partitions directly (no group). Its clock is read every 250 ms, so a run's length
    is rounded up by up to 0.25 s."""

    name = "strand-bench"
    producer = consumer = "strand bench"
    latency_resolution_ms = 0.001

    def argv(self, b: Broker, topic: str, timeout: float, *args: str) -> list[str]:
        # Its own deadline comes before run_tool's, so a slow run still reports.
        return [str(self.strand_bin), "bench", "--bootstrap", b.bootstrap, "--topic", topic,
                "--partitions", str(PARTITIONS), "--record-size", str(RECORD_SIZE),
                "--duration-secs", str(int(timeout)), "--quiet", "--json", "-", *args]

    def produce_argv(self, b, topic, records, acks, throughput, timeout):
        rate = ["--rate", str(throughput)] if throughput > 0 else []
        return self.argv(b, topic, timeout, "--acks", acks, "--records", str(records), *rate)

    def consume_argv(self, b, topic, records, group, timeout, consumers):
        # --consumers N: N connections in one process, each fetching its share of the
        # partitions (p mod N), so one connection's round trips do not bound the run.
        return self.argv(b, topic, timeout, "--producers", "0", "--consumers", str(consumers),
                         "--from-beginning", "--records", str(records))

    @staticmethod
    def report(out: str) -> dict | None:
        """The JSON report, printed after the human-readable lines."""
        try:
            return json.JSONDecoder().raw_decode(out, out.index("{"))[0]
        except ValueError:
            return None

    def parse_produce(self, out):
        r = self.report(out)
        if not r or not r.get("produced_records"):
            return None
        lat = r.get("produce_latency") or {}
        return {"records": r["produced_records"],
                "records_per_s": r["produced_records_per_second"],
                "mb_per_s": r["produced_mb_per_second"] * 1e6 / MIB,
                **{f"lat_{k}_ms": lat[f"{j}_us"] / 1000 for k, j in
                   (("avg", "mean"), ("p50", "p50"), ("p99", "p99"), ("p999", "p999"),
                    ("max", "max")) if f"{j}_us" in lat}}

    def parse_consume(self, out):
        r = self.report(out)
        if not r or not r.get("consumed_records"):
            return None
        mb_per_s = r["consumed_mb_per_second"] * 1e6 / MIB
        return {"records": r["consumed_records"], "mb": mb_per_s * r["seconds"],
                "fetch_ms": r["seconds"] * 1000, "fetch_mb_per_s": mb_per_s,
                "records_per_s": r["consumed_records_per_second"],
                "fetch_records_per_s": r["consumed_records_per_second"]}


CLIENTS = {c.name: c for c in (KafkaTools, StrandBench)}


def wkey(workload: str, client: str | None) -> str:
    """Key of a workload's results: W1-W4 once per client ("W1/strand-bench")."""
    return f"{workload}/{client}" if client else workload


# --------------------------------------------------------------------------- runs


class Bench:
    def __init__(self, args, prof: dict):
        self.args = args
        self.prof = prof
        self.root = Path(tempfile.mkdtemp(prefix="strand-vs-kafka-", dir=args.data_root))
        self.seq = 0
        self.results: dict = {"workloads": {}, "issues": [], "commands": {}}
        self.kafka_w1_rate: float | None = None
        self.kafka_w1_rate_from: str | None = None
        # A copy of the binary, so a rebuild during the run cannot mix two builds.
        self.strand_bin = self.root / "strand"
        shutil.copy2(args.strand_bin, self.strand_bin)
        self.clients = [CLIENTS[n](self.strand_bin) for n in args.clients]

    def new_dir(self, name: str) -> Path:
        self.seq += 1
        d = self.root / f"{self.seq:03d}-{name}"
        d.mkdir(parents=True)
        return d

    def broker(self, variant: str) -> Broker:
        specs = {
            "strand": dict(kind="strand"),
            "strand-every-batch": dict(kind="strand", flush="every-batch"),
            "kafka": dict(kind="kafka"),
            "kafka-default": dict(kind="kafka"),
            "kafka-flush1": dict(kind="kafka", kafka_props=("log.flush.interval.messages=1",)),
        }
        if variant in ("strand-cluster", "kafka-cluster"):
            return Cluster(variant.split("-")[0], variant, self.new_dir(variant),
                           self.strand_bin)
        return Broker(variant=variant, run_dir=self.new_dir(variant),
                      strand_bin=self.strand_bin, **specs[variant])

    def quiet(self) -> dict:
        os.sync()
        return wait_quiet(self.args.quiet_threshold, self.args.quiet_wait)

    def issue(self, workload: str, variant: str, what: str, details: list[str]) -> None:
        entry = {"workload": workload, "variant": variant, "what": what, "details": details}
        self.results["issues"].append(entry)
        log(f"ISSUE {workload} {variant}: {what}" + "".join(f"\n    {d}" for d in details[:10]))

    def note_command(self, workload: str, argv: list[str]) -> None:
        cmds = self.results["commands"].setdefault(workload, [])
        text = " ".join(shlex.quote(str(a)) for a in argv)
        text = text.replace(str(self.strand_bin), str(self.args.strand_bin))
        text = re.sub(r"(iperf3 .*-p) \d+", r"\1 $PORT", text)
        text = re.sub(re.escape(str(self.root)) + r"/\d+-", "$DIR/", text)
        text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:$PORT", text)
        text = re.sub(r"(run-kafka\.sh \S+) \d+", r"\1 $PORT", text)
        text = text.replace(str(REPO) + "/", "")
        if text not in cmds:
            cmds.append(text)

    def finish_broker(self, b: Broker, workload: str, run: dict) -> None:
        run["peak_rss_mib"] = (b.hwm_kib() or 0) / 1024 if b.alive() else None
        stop = b.stop()
        if stop.get("died") or stop.get("exit"):
            self.issue(workload, b.variant, stop.get("died") or stop.get("exit"),
                       tail(b.console).splitlines())
        run["stop_s"] = stop.get("stop_s")
        if stop.get("killed_after_stop"):
            run["killed_after_stop"] = stop["killed_after_stop"]
        issues = b.log_issues()
        run["broker_log_warnings"] = issues
        if issues and b.kind == "strand":
            self.issue(workload, b.variant, "broker logged warnings/errors", issues)
        if not self.args.keep_data:
            shutil.rmtree(b.run_dir, ignore_errors=True)

    def record(self, workload: str, variant: str, run: dict, extra: dict | None = None) -> None:
        w = self.results["workloads"].setdefault(workload, {"variants": {}})
        if extra:
            w.update(extra)
        w["variants"].setdefault(variant, []).append(run)

    def measure(self, workload: str, variant: str, fn, *fn_args) -> dict:
        """Runs fn (which records its run); when other processes used more than
        --contended-cores during a measured phase, discards the run (kept in the
        workload's "discarded" list) and repeats it, up to --retry-contended times."""
        for attempt in range(self.args.retry_contended + 1):
            run = fn(*fn_args)
            load = other_load(run)
            run["other_cores"] = load
            if load <= self.args.contended_cores or attempt == self.args.retry_contended:
                return run
            w = self.results["workloads"][workload]
            runs = w["variants"][variant]
            del runs[next(i for i, r in enumerate(runs) if r is run)]
            w.setdefault("discarded", []).append({"variant": variant, **run})
            log(f"{workload} {variant}: other processes used {load:.2f} cores during the "
                f"measurement; discarding the run and repeating it")
        return run

    @staticmethod
    def order(variants: list[str], i: int) -> list[str]:
        k = i % len(variants)
        return variants[k:] + variants[:k]

    # ---- W1/W2/W3: producer

    def produce_run(self, key: str, client: Client, variant: str, records: int, acks: str,
                    throughput: int) -> dict:
        quiet = self.quiet()
        b = self.broker(variant)
        run: dict = {"quiet": quiet}
        try:
            run["start_s"] = b.start()
            self.note_command(key, b.argv)
            t = create_topic(b, "bench", PARTITIONS)
            self.note_command(key, t.argv)
            timeout = max(300.0, records / 2000)
            if self.prof["warmup_records"] > 0:
                # Same producer settings into another topic, so Kafka's JIT is warm; then
                # sync so the warm-up's dirty pages are not written back during the run.
                create_topic(b, "warmup", PARTITIONS)
                wres, wperf = client.produce(b, "warmup", self.prof["warmup_records"], acks, -1,
                                             timeout)
                self.note_command(key, wres.argv)
                run["warmup"] = wperf
                if wperf is None or wres.rc != 0:
                    self.issue(key, variant, f"warm-up {client.producer} failed "
                               f"(exit {wres.rc})", (wres.out + wres.err).splitlines()[-15:])
                os.sync()
            with CpuWindow(b) as w:
                res, perf = client.produce(b, "bench", records, acks, throughput, timeout)
            self.note_command(key, res.argv)
            run.update(w.metrics())
            run["client_issues"] = client_issues(res)
            if perf is None or res.rc != 0:
                self.issue(key, variant, f"{client.producer} failed (exit {res.rc})",
                           (res.out + res.err).splitlines()[-15:])
            else:
                run.update(perf)
                if perf["records"] != records:
                    self.issue(key, variant,
                               f"{perf['records']} of {records} records acknowledged", [])
                if run["client_issues"]:
                    self.issue(key, variant, "client printed warnings/errors",
                               run["client_issues"])
                run["broker_cpu_s_per_gib"] = (run["broker_cpu_s"] / (records * RECORD_SIZE)
                                               * 1024 ** 3)
        finally:
            self.finish_broker(b, key, run)
        self.record(key, variant, run)
        summary = (f"{run.get('mb_per_s', float('nan')):.1f} MB/s p99 "
                   f"{run.get('lat_p99_ms', float('nan')):.3g} ms, CPU "
                   f"{run.get('broker_cpu_s', float('nan')):.1f} s")
        log(f"{key} {variant}: {summary}")
        return run

    def produce_workload(self, workload: str, client: Client, variants: list[str],
                         records: int, acks: str, throughput: int, extra: dict | None = None
                         ) -> None:
        """runs x variants produce runs, alternating which variant goes first."""
        key = wkey(workload, client.name)
        self.results["workloads"][key] = {
            "variants": {}, "client": client.name, "records": records,
            "record_size": RECORD_SIZE, "partitions": PARTITIONS, "acks": acks,
            "throughput": throughput, **(extra or {})}
        for i in range(self.prof["runs"]):
            for v in self.order(variants, i):
                self.measure(key, v, self.produce_run, key, client, v, records, acks,
                             throughput)

    def w1(self, client: Client) -> None:
        records = self.prof["w1_records"]
        log(f"W1 ({client.name}): {records} x 1 KiB, acks=1, max throughput, "
            f"{self.prof['runs']} runs per broker")
        self.produce_workload("W1", client, ["strand", "kafka"], records, "1", -1)
        self.note_kafka_w1_rate(client, wkey("W1", client.name))

    def note_kafka_w1_rate(self, client: Client, key: str) -> None:
        """W3's rate is half of Kafka's W1 median, of the first client that ran W1, so that
        every client runs W3 at the same rate."""
        rates = [r["records_per_s"] for r in self.results["workloads"][key]["variants"]
                 .get("kafka", []) if "records_per_s" in r]
        if rates and self.kafka_w1_rate is None:
            self.kafka_w1_rate = statistics.median(rates)
            self.kafka_w1_rate_from = client.name

    def w2(self, client: Client) -> None:
        records = self.prof["w2_records"]
        log(f"W2 ({client.name}): {records} x 1 KiB, acks=all, max throughput, "
            f"{self.prof['runs']} runs per broker")
        self.produce_workload("W2", client, ["strand-every-batch", "kafka-default",
                                             "kafka-flush1"], records, "all", -1)

    def w7(self, client: Client) -> None:
        records = self.prof["w7_records"]
        log(f"W7 ({client.name}): {CLUSTER_NODES} brokers, RF={CLUSTER_NODES}, "
            f"min.insync.replicas=2, {records} x 1 KiB, acks=all, max throughput, "
            f"{self.prof['runs']} runs per cluster")
        self.produce_workload("W7", client, ["strand-cluster", "kafka-cluster"], records,
                              "all", -1, {"nodes": CLUSTER_NODES,
                                          "replication_factor": CLUSTER_NODES})

    def w3(self, client: Client) -> None:
        rate = self.args.w3_rate
        rate_from = "--w3-rate"
        if rate is None:
            if self.kafka_w1_rate is None:
                log(f"W3: calibrating with one Kafka W1 run ({client.name}; W1 was not run)")
                key = wkey("W3-calibration", client.name)
                self.produce_run(key, client, "kafka", self.prof["w1_records"], "1", -1)
                self.note_kafka_w1_rate(client, key)
            if not self.kafka_w1_rate:
                self.issue(wkey("W3", client.name), "kafka",
                           "no Kafka W1 rate to derive W3's rate from", [])
                return
            rate = int(self.kafka_w1_rate / 2)
            rate_from = f"half of Kafka's W1 median ({self.kafka_w1_rate_from})"
        records = int(rate * self.prof["w3_seconds"])
        log(f"W3 ({client.name}): {records} x 1 KiB at {rate} records/s, acks=1, "
            f"{self.prof['runs']} runs per broker")
        self.produce_workload("W3", client, ["strand", "kafka"], records, "1", rate,
                              {"rate_from": rate_from})

    # ---- W4: consumers from page cache, iperf3 ceiling

    def iperf(self, key: str) -> dict:
        """Loopback bandwidth, one TCP stream, with no broker running."""
        port = pick_port(False)
        server = subprocess.Popen(["iperf3", "-s", "-p", str(port), "-B", "127.0.0.1"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True)
        try:
            for _ in range(100):  # listening once the port cannot be bound (no probe:
                if not port_free(port):  # a connection would count as a test)
                    break
                time.sleep(0.05)
            argv = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t",
                    str(self.prof["iperf_seconds"]), "-J"]
            p = subprocess.run(argv, capture_output=True, timeout=self.prof["iperf_seconds"] + 60)
            self.note_command(key, argv)
            data = json.loads(p.stdout)
            if "error" in data:
                raise RuntimeError(f"iperf3: {data['error']}")
            bps = data["end"]["sum_received"]["bits_per_second"]
            return {"mb_per_s": bps / 8 / MIB, "gbit_per_s": bps / 1e9}
        finally:
            server.terminate()
            try:
                server.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()

    def consume_run(self, key: str, client: Client, variant: str, records: int) -> dict:
        quiet = self.quiet()
        b = self.broker(variant)
        run: dict = {"quiet": quiet, "passes": []}
        try:
            run["start_s"] = b.start()
            self.note_command(key, b.argv)
            create_topic(b, "bench", PARTITIONS)
            with CpuWindow(b) as w:
                res, perf = client.produce(b, "bench", records, "1", -1,
                                           timeout=max(600.0, records / 1000))
            self.note_command(key, res.argv)
            run["write"] = {**(perf or {}), **w.metrics()}
            if perf is None or perf["records"] != records:
                self.issue(key, variant, f"writing the topic failed (exit {res.rc})",
                           (res.out + res.err).splitlines()[-15:])
                return run
            for p in range(self.prof["w4_passes"]):
                with CpuWindow(b) as w:
                    res, perf = client.consume(b, "bench", records, f"perf-{p}",
                                               timeout=max(600.0, records / 2000),
                                               consumers=self.prof["w4_consumers"])
                self.note_command(key, res.argv)
                entry = {**(perf or {}), **w.metrics(), "client_issues": client_issues(res)}
                run["passes"].append(entry)
                if perf is None or res.rc != 0 or perf["records"] < records:
                    self.issue(key, variant, f"{client.consumer} pass {p + 1} failed or "
                               f"short (exit {res.rc})", (res.out + res.err).splitlines()[-15:])
                elif entry["client_issues"]:
                    self.issue(key, variant, "consumer printed warnings/errors",
                               entry["client_issues"])
            # The figures of the run are those of the last pass (warm JIT, warm cache).
            last = run["passes"][-1] if run["passes"] else {}
            for k in ("mb_per_s", "fetch_mb_per_s", "records_per_s", "fetch_records_per_s",
                      "rebalance_ms", "broker_cpu_s", "client_cpu_s", "other_cpu_s", "wall_s"):
                if k in last:
                    run[k] = last[k]
            if "fetch_mb_per_s" in last:
                run["broker_cpu_s_per_gib"] = run["broker_cpu_s"] / (last["mb"] / 1024)
        finally:
            self.finish_broker(b, key, run)
        self.record(key, variant, run)
        log(f"{key} {variant}: fetch {run.get('fetch_mb_per_s', float('nan')):.0f} MB/s, CPU "
            f"{run.get('broker_cpu_s', float('nan')):.1f} s")
        return run

    def w4(self, client: Client) -> None:
        runs = self.prof["runs"]
        records = self.prof["w4_mib"] * MIB // RECORD_SIZE
        key = wkey("W4", client.name)
        log(f"W4 ({client.name}): write {self.prof['w4_mib']} MiB, then "
            f"{self.prof['w4_passes']} consumer passes; {runs} runs per broker")
        self.results["workloads"][key] = {
            "variants": {}, "client": client.name, "records": records,
            "record_size": RECORD_SIZE, "partitions": PARTITIONS,
            "passes": self.prof["w4_passes"], "loopback": []}
        for i in range(runs):
            self.quiet()
            lb = self.iperf(key)
            self.results["workloads"][key]["loopback"].append(lb)
            log(f"W4 loopback (iperf3, 1 stream): {lb['mb_per_s']:.0f} MB/s")
            for v in self.order(["strand", "kafka"], i):
                self.measure(key, v, self.consume_run, key, client, v, records)

    # ---- W5: start to first acknowledged produce; idle RSS

    def first_ack_run(self, variant: str) -> dict:
        from confluent_kafka import Producer

        quiet = self.quiet()
        b = self.broker(variant)
        run: dict = {"quiet": quiet}
        # The producer exists before the broker process does, so its creation is not timed.
        port = pick_port(b.kind == "kafka")
        try:
            errors: list[str] = []
            acked: dict = {}

            def on_delivery(err, msg):
                if err is None:
                    acked["t"] = time.monotonic()
                else:
                    errors.append(str(err))

            producer = Producer({
                "bootstrap.servers": f"127.0.0.1:{port}", "acks": "1", "linger.ms": 0,
                "enable.idempotence": False, "message.timeout.ms": 1000,
                "socket.connection.setup.timeout.ms": 1000, "reconnect.backoff.ms": 10,
                "reconnect.backoff.max.ms": 10, "retry.backoff.ms": 10,
                "retry.backoff.max.ms": 10, "topic.metadata.refresh.fast.interval.ms": 10,
                "log_level": 0, "error_cb": lambda e: None,
            })
            b.spawn(port)
            self.note_command("W5", b.argv)
            t_spawn = b.spawned_at
            t0 = b.wait_exec() if b.kind == "kafka" else t_spawn
            deadline = time.monotonic() + 120
            attempts = 0
            while "t" not in acked and time.monotonic() < deadline:
                attempts += 1
                pending = len(errors)
                producer.produce("first-ack", value=b"x" * 100, on_delivery=on_delivery)
                while "t" not in acked and len(errors) == pending and time.monotonic() < deadline:
                    producer.poll(0.001)
                if not b.alive():
                    raise RuntimeError(f"{variant} exited during start:\n{tail(b.console)}")
            producer.flush(5)
            if "t" not in acked:
                self.issue("W5", variant, "no acknowledged produce within 120 s", errors[-5:])
                return run
            run["first_ack_ms"] = (acked["t"] - t0) * 1000
            run["attempts"] = attempts
            run["timed_out_attempts"] = len(errors)
            if b.kind == "kafka":
                run["first_ack_incl_format_ms"] = (acked["t"] - t_spawn) * 1000
                run["format_ms"] = (t0 - t_spawn) * 1000
            run["cpu_to_first_ack_s"] = b.cpu()
            time.sleep(self.prof["w5_idle_s"])
            run["idle_rss_mib"] = (b.rss_kib() or 0) / 1024
            run["broker_cpu_s"] = b.cpu()
        finally:
            self.finish_broker(b, "W5", run)
        self.record("W5", variant, run, {"idle_s": self.prof["w5_idle_s"]})
        log(f"W5 {variant}: first ack {run.get('first_ack_ms', float('nan')):.0f} ms, "
            f"idle RSS {run.get('idle_rss_mib', float('nan')):.0f} MiB")
        return run

    def w5(self) -> None:
        runs = self.prof["w5_runs"]
        log(f"W5: start to first acknowledged produce, idle RSS; {runs} runs per broker")
        for i in range(runs):
            for v in self.order(["strand", "kafka"], i):
                self.first_ack_run(v)

    # ---- W6: many partitions

    def partitions_run(self, workload: str, variant: str, total: int) -> dict:
        from confluent_kafka.admin import AdminClient, NewTopic

        quiet = self.quiet()
        b = self.broker(variant)
        run: dict = {"quiet": quiet}
        try:
            run["start_s"] = b.start()
            self.note_command(workload, b.argv)
            admin = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 0})
            admin.list_topics(timeout=30)  # connected before the clock starts
            rss0 = b.rss_kib() or 0
            sizes = []
            left = total
            while left > 0:
                sizes.append(min(left, W6_TOPIC_PARTITIONS))
                left -= sizes[-1]
            errors = []
            with CpuWindow(b) as w:
                for i, n in enumerate(sizes):
                    fs = admin.create_topics([NewTopic(f"many-{i}", n, 1)],
                                             operation_timeout=600, request_timeout=600)
                    for name, f in fs.items():
                        try:
                            f.result()
                        except Exception as e:  # noqa: BLE001
                            errors.append(f"{name}: {e}")
                run["create_s"] = time.monotonic() - w.t0
                deadline = time.monotonic() + 900
                on_disk = 0
                while time.monotonic() < deadline:
                    on_disk = sum(1 for d in os.listdir(b.partitions_dir)
                                  if d.startswith("many-"))
                    if on_disk >= total:
                        break
                    time.sleep(0.05)
                run["on_disk_s"] = time.monotonic() - w.t0
                run["dirs_on_disk"] = on_disk
                while time.monotonic() < deadline:
                    md = admin.list_topics(timeout=60)
                    ready = sum(1 for t, tm in md.topics.items() if t.startswith("many-")
                                for p in tm.partitions.values() if p.leader >= 0 and not p.error)
                    if ready >= total:
                        break
                    time.sleep(0.05)
                run["all_leaders_s"] = time.monotonic() - w.t0
            run.update(w.metrics())
            if errors:
                self.issue(workload, variant, "CreateTopics failed", errors[:10])
            if on_disk < total:
                self.issue(workload, variant, f"only {on_disk} of {total} partition "
                           "directories on disk after 900 s", [])
            times = []
            for _ in range(7):
                t = time.monotonic()
                md = admin.list_topics(timeout=60)
                times.append((time.monotonic() - t) * 1000)
            run["metadata_ms"] = statistics.median(times)
            run["metadata_raw_ms"] = statistics.median(
                raw_metadata_ms(b.bootstrap) for _ in range(7))
            run["metadata_partitions"] = sum(len(tm.partitions) for t, tm in md.topics.items()
                                             if t.startswith("many-"))
            if run["metadata_partitions"] != total:
                self.issue(workload, variant, f"metadata lists {run['metadata_partitions']} of "
                           f"{total} partitions", [])
            time.sleep(2)
            run["rss_mib"] = (b.rss_kib() or 0) / 1024
            run["rss_growth_mib"] = run["rss_mib"] - rss0 / 1024
        finally:
            self.finish_broker(b, workload, run)
        self.record(workload, variant, run, {"partitions": total,
                                             "topic_partitions": W6_TOPIC_PARTITIONS})
        log(f"{workload} {variant}: created {run.get('create_s', float('nan')):.1f} s, on disk "
            f"{run.get('on_disk_s', float('nan')):.1f} s, metadata "
            f"{run.get('metadata_ms', float('nan')):.1f} ms, RSS "
            f"{run.get('rss_mib', float('nan')):.0f} MiB")
        return run

    def w6(self) -> None:
        for total in self.prof["w6_partitions"]:
            key = f"W6-{total}"
            log(f"{key}: {total} partitions in topics of <= {W6_TOPIC_PARTITIONS}; "
                f"{self.prof['w6_runs']} runs per broker")
            for i in range(self.prof["w6_runs"]):
                for v in self.order(["strand", "kafka"], i):
                    self.measure(key, v, self.partitions_run, key, v, total)

    # ---- W8: transactions

    @staticmethod
    def txn_perf_argv(b: Broker, topic: str, transactions: int, txn_id: str,
                      timeout: float) -> list[str]:
        return [str(TXN_PERF), "--bootstrap", b.bootstrap, "--topic", topic,
                "--transactions", str(transactions), "--records-per-txn",
                str(W8_RECORDS_PER_TXN), "--record-size", str(RECORD_SIZE), "--partitions",
                str(PARTITIONS), "--transactional-id", txn_id, "--timeout-s", str(int(timeout))]

    def end_offsets(self, b: Broker, topic: str) -> int | None:
        """Sum of the topic's log end offsets (kafka-get-offsets, latest), or None."""
        res = run_tool(kafka_tool("kafka-get-offsets", "--bootstrap-server", b.bootstrap,
                                  "--topic", topic), timeout=120)
        offsets = re.findall(rf"^{re.escape(topic)}:\d+:(\d+)\s*$", res.out, re.M)
        if res.rc != 0 or len(offsets) != PARTITIONS:
            return None
        return sum(int(o) for o in offsets)

    def txn_run(self, key: str, variant: str, transactions: int) -> dict:
        quiet = self.quiet()
        b = self.broker(variant)
        run: dict = {"quiet": quiet}
        records = transactions * W8_RECORDS_PER_TXN
        try:
            run["start_s"] = b.start()
            self.note_command(key, b.argv)
            t = create_topic(b, "bench", PARTITIONS)
            self.note_command(key, t.argv)
            timeout = max(300.0, transactions / 10)
            warmup = self.prof["warmup_records"] // W8_RECORDS_PER_TXN
            if warmup > 0:
                # The same driver into another topic with another transactional.id (JIT,
                # and the transaction state topic, which both brokers create on the first
                # FindCoordinator); then sync, as before W1-W3.
                create_topic(b, "warmup", PARTITIONS)
                wres = run_tool(self.txn_perf_argv(b, "warmup", warmup, "warmup-txn", timeout),
                                timeout + 60)
                self.note_command(key, wres.argv)
                wperf = parse_txn_perf(wres.out)
                run["warmup"] = wperf
                if wperf is None or wres.rc != 0:
                    self.issue(key, variant, f"warm-up TxnPerf failed (exit {wres.rc})",
                               (wres.out + wres.err).splitlines()[-15:])
                os.sync()
            with CpuWindow(b) as w:
                res = run_tool(self.txn_perf_argv(b, "bench", transactions, "bench-txn",
                                                  timeout), timeout + 60)
            self.note_command(key, res.argv)
            perf = parse_txn_perf(res.out)
            run.update(w.metrics())
            run["client_issues"] = client_issues(res)
            if perf is None or res.rc != 0:
                self.issue(key, variant, f"TxnPerf failed (exit {res.rc})",
                           (res.out + res.err).splitlines()[-15:])
            else:
                run.update(perf)
                if perf["records"] != records:
                    self.issue(key, variant, f"{perf['records']} of {records} records "
                               "committed", [])
                if run["client_issues"]:
                    self.issue(key, variant, "client printed warnings/errors",
                               run["client_issues"])
                run["broker_cpu_s_per_gib"] = (run["broker_cpu_s"] / (records * RECORD_SIZE)
                                               * 1024 ** 3)
                # Every committed transaction leaves its records and one commit marker on
                # each partition; the markers of the last one may still be on their way.
                expected = records + transactions * PARTITIONS
                deadline = time.monotonic() + 15
                while True:
                    run["end_offsets"] = self.end_offsets(b, "bench")
                    if run["end_offsets"] == expected or time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
                if run["end_offsets"] != expected:
                    self.issue(key, variant, f"end offsets sum to {run['end_offsets']}, not "
                               f"{expected} ({records} records + a commit marker per "
                               "partition and transaction)", [])
        finally:
            self.finish_broker(b, key, run)
        self.record(key, variant, run)
        log(f"{key} {variant}: {run.get('txn_per_s', float('nan')):.0f} txn/s, "
            f"{run.get('mb_per_s', float('nan')):.1f} MB/s, commit p50/p99 "
            f"{run.get('commit_p50_ms', float('nan')):.3g}/"
            f"{run.get('commit_p99_ms', float('nan')):.3g} ms, CPU "
            f"{run.get('broker_cpu_s', float('nan')):.1f} s")
        return run

    def w8(self) -> None:
        transactions = self.prof["w8_transactions"]
        key = "W8"
        log(f"W8 (TxnPerf): {transactions} transactions of {W8_RECORDS_PER_TXN} x 1 KiB "
            f"round-robin over {PARTITIONS} partitions, acks=all, idempotent, max "
            f"throughput, {self.prof['runs']} runs per broker")
        self.results["workloads"][key] = {
            "variants": {}, "client": FIXED_CLIENTS[key], "transactions": transactions,
            "records_per_txn": W8_RECORDS_PER_TXN, "records": transactions * W8_RECORDS_PER_TXN,
            "record_size": RECORD_SIZE, "partitions": PARTITIONS, "acks": "all",
            "warmup_transactions": self.prof["warmup_records"] // W8_RECORDS_PER_TXN}
        for i in range(self.prof["runs"]):
            for v in self.order(["strand", "kafka"], i):
                self.measure(key, v, self.txn_run, key, v, transactions)


    # ---- W9: share-group consumption

    def share_run(self, key: str, variant: str, records: int) -> dict:
        quiet = self.quiet()
        b = self.broker(variant)
        run: dict = {"quiet": quiet}
        tools = KafkaTools(self.strand_bin)
        group = "share-perf"
        try:
            run["start_s"] = b.start()
            self.note_command(key, b.argv)
            create_topic(b, "bench", PARTITIONS)
            res, perf = tools.produce(b, "bench", records, "1", -1,
                                      timeout=max(600.0, records / 1000))
            self.note_command(key, res.argv)
            if perf is None or perf["records"] != records:
                self.issue(key, variant, f"writing the topic failed (exit {res.rc})",
                           (res.out + res.err).splitlines()[-15:])
                return run
            # A share group starts at the end of the log unless told otherwise.
            argv = kafka_tool("kafka-configs", "--bootstrap-server", b.bootstrap, "--alter",
                              "--entity-type", "groups", "--entity-name", group,
                              "--add-config", "share.auto.offset.reset=earliest")
            res = run_tool(argv, 120)
            self.note_command(key, argv)
            if res.rc != 0:
                self.issue(key, variant, "setting share.auto.offset.reset failed",
                           (res.out + res.err).splitlines()[-15:])
                return run
            argv = kafka_tool("kafka-share-consumer-perf-test", "--bootstrap-server",
                              b.bootstrap, "--topic", "bench", "--group", group,
                              "--num-records", str(records), "--timeout", "60000")
            with CpuWindow(b) as w:
                res = run_tool(argv, max(600.0, records / 500))
            self.note_command(key, argv)
            perf = parse_share_perf(res.out)
            run.update({**(perf or {}), **w.metrics(), "client_issues": client_issues(res)})
            if perf is None or res.rc != 0 or perf["records"] < records:
                self.issue(key, variant, f"ShareConsumerPerformance failed or short "
                           f"(exit {res.rc})", (res.out + res.err).splitlines()[-15:])
            elif perf.get("mb"):
                run["broker_cpu_s_per_gib"] = run["broker_cpu_s"] / (perf["mb"] / 1024)
        finally:
            self.finish_broker(b, key, run)
        self.record(key, variant, run)
        log(f"{key} {variant}: {run.get('mb_per_s', float('nan')):.0f} MB/s, CPU "
            f"{run.get('broker_cpu_s', float('nan')):.1f} s")
        return run

    def w9(self) -> None:
        records = self.prof["w9_mib"] * MIB // RECORD_SIZE
        key = "W9"
        log(f"W9 (ShareConsumerPerformance): write {self.prof['w9_mib']} MiB, then one "
            f"share consumer reads it all; {self.prof['runs']} runs per broker")
        self.results["workloads"][key] = {
            "variants": {}, "client": FIXED_CLIENTS[key], "records": records,
            "record_size": RECORD_SIZE, "partitions": PARTITIONS}
        for i in range(self.prof["runs"]):
            for v in self.order(["strand", "kafka"], i):
                self.measure(key, v, self.share_run, key, v, records)


def parse_share_perf(out: str) -> dict | None:
    """ShareConsumerPerformance's summary: start.time, end.time, data.consumed.in.MB,
    MB.sec, nMsg.sec, data.consumed.in.nMsg, fetch.time.ms (from the consumer's start,
    so the group join and the first assignment are in it)."""
    lines = out.strip().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("start.time") and i + 1 < len(lines):
            v = [x.strip() for x in lines[i + 1].split(",")]
            try:
                return {"mb": float(v[2]), "mb_per_s": float(v[3]), "records_per_s": float(v[4]),
                        "records": int(v[5]), "fetch_ms": float(v[6])}
            except (IndexError, ValueError):
                return None
    return None


TXN_PERF_RE = re.compile(r"^TXNPERF (.*)$", re.M)


def parse_txn_perf(out: str) -> dict | None:
    """TxnPerf's summary line: records, seconds, records_per_s, mb_per_s (2^20 bytes),
    txn_per_s, commit_{avg,p50,p99,max}_ms, txn_{p50,p99}_ms, init_ms."""
    m = None
    for m in TXN_PERF_RE.finditer(out):
        pass
    if m is None:
        return None
    result: dict = {}
    for kv in m.group(1).split():
        k, _, v = kv.partition("=")
        try:
            result[k] = int(v) if re.fullmatch(r"-?\d+", v) else float(v)
        except ValueError:
            result[k] = v  # mode=transactions
    rate = result.get("records_per_s")
    return result if isinstance(rate, (int, float)) and not isinstance(rate, bool) else None


# --------------------------------------------------------------------------- summary

# (workload, metric, label, strand variant, kafka variant, better: "up"/"down"/None)
ROWS = [
    ("W1", "records_per_s", "records/s", "strand", "kafka", "up"),
    ("W1", "mb_per_s", "MB/s", "strand", "kafka", "up"),
    ("W1", "lat_avg_ms", "latency avg ms", "strand", "kafka", "down"),
    ("W1", "lat_p50_ms", "latency p50 ms", "strand", "kafka", "down"),
    ("W1", "lat_p99_ms", "latency p99 ms", "strand", "kafka", "down"),
    ("W1", "lat_p999_ms", "latency p99.9 ms", "strand", "kafka", "down"),
    ("W1", "lat_max_ms", "latency max ms", "strand", "kafka", "down"),
    ("W1", "broker_cpu_s", "broker CPU s", "strand", "kafka", "down"),
    ("W1", "broker_cpu_s_per_gib", "broker CPU s per GiB", "strand", "kafka", "down"),
    ("W1", "peak_rss_mib", "peak RSS MiB", "strand", "kafka", "down"),
]
for _kv, _name in (("kafka-default", "Kafka default"), ("kafka-flush1", "Kafka flush.messages=1")):
    ROWS += [
        (f"W2 vs {_name}", "records_per_s", "records/s", "strand-every-batch", _kv, "up"),
        (f"W2 vs {_name}", "mb_per_s", "MB/s", "strand-every-batch", _kv, "up"),
        (f"W2 vs {_name}", "lat_avg_ms", "latency avg ms", "strand-every-batch", _kv, "down"),
        (f"W2 vs {_name}", "lat_p50_ms", "latency p50 ms", "strand-every-batch", _kv, "down"),
        (f"W2 vs {_name}", "lat_p99_ms", "latency p99 ms", "strand-every-batch", _kv, "down"),
        (f"W2 vs {_name}", "lat_p999_ms", "latency p99.9 ms", "strand-every-batch", _kv, "down"),
        (f"W2 vs {_name}", "lat_max_ms", "latency max ms", "strand-every-batch", _kv, "down"),
        (f"W2 vs {_name}", "broker_cpu_s", "broker CPU s", "strand-every-batch", _kv, "down"),
        (f"W2 vs {_name}", "peak_rss_mib", "peak RSS MiB", "strand-every-batch", _kv, "down"),
    ]
ROWS += [
    ("W3", "records_per_s", "records/s achieved", "strand", "kafka", None),
    ("W3", "lat_avg_ms", "latency avg ms", "strand", "kafka", "down"),
    ("W3", "lat_p50_ms", "latency p50 ms", "strand", "kafka", "down"),
    ("W3", "lat_p99_ms", "latency p99 ms", "strand", "kafka", "down"),
    ("W3", "lat_p999_ms", "latency p99.9 ms", "strand", "kafka", "down"),
    ("W3", "lat_max_ms", "latency max ms", "strand", "kafka", "down"),
    ("W3", "lat_steady_avg_ms", "latency avg ms after the first 5 s", "strand", "kafka", "down"),
    ("W3", "lat_steady_max_ms", "latency max ms after the first 5 s", "strand", "kafka", "down"),
    ("W3", "broker_cpu_s", "broker CPU s", "strand", "kafka", "down"),
    ("W3", "peak_rss_mib", "peak RSS MiB", "strand", "kafka", "down"),
    ("W4", "fetch_mb_per_s", "consume MB/s (no group join)", "strand", "kafka", "up"),
    ("W4", "mb_per_s", "consume MB/s incl. group join", "strand", "kafka", "up"),
    ("W4", "fetch_records_per_s", "consume records/s", "strand", "kafka", "up"),
    ("W4", "ceiling_fraction", "fraction of loopback ceiling", "strand", "kafka", "up"),
    ("W4", "rebalance_ms", "group join ms", "strand", "kafka", "down"),
    ("W4", "broker_cpu_s", "broker CPU s (one pass)", "strand", "kafka", "down"),
    ("W4", "broker_cpu_s_per_gib", "broker CPU s per GiB read", "strand", "kafka", "down"),
    ("W4", "peak_rss_mib", "peak RSS MiB", "strand", "kafka", "down"),
    ("W5", "first_ack_ms", "start to first ack ms", "strand", "kafka", "down"),
    ("W5", "idle_rss_mib", "idle RSS MiB", "strand", "kafka", "down"),
    ("W5", "cpu_to_first_ack_s", "CPU s to first ack", "strand", "kafka", "down"),
    ("W5", "peak_rss_mib", "peak RSS MiB", "strand", "kafka", "down"),
]
for _n in (1000, 10000):
    ROWS += [
        (f"W6-{_n}", "create_s", "create (API returns) s", "strand", "kafka", "down"),
        (f"W6-{_n}", "on_disk_s", "all partition dirs on disk s", "strand", "kafka", "down"),
        (f"W6-{_n}", "metadata_ms", "metadata request ms", "strand", "kafka", "down"),
        (f"W6-{_n}", "metadata_raw_ms", "metadata raw response ms", "strand", "kafka",
         "down"),
        (f"W6-{_n}", "rss_mib", "RSS after creation MiB", "strand", "kafka", "down"),
        (f"W6-{_n}", "broker_cpu_s", "broker CPU s creating", "strand", "kafka", "down"),
    ]


ROWS += [
    ("W7", "records_per_s", "records/s", "strand-cluster", "kafka-cluster", "up"),
    ("W7", "mb_per_s", "MB/s", "strand-cluster", "kafka-cluster", "up"),
    ("W7", "lat_avg_ms", "latency avg ms", "strand-cluster", "kafka-cluster", "down"),
    ("W7", "lat_p50_ms", "latency p50 ms", "strand-cluster", "kafka-cluster", "down"),
    ("W7", "lat_p99_ms", "latency p99 ms", "strand-cluster", "kafka-cluster", "down"),
    ("W7", "lat_p999_ms", "latency p99.9 ms", "strand-cluster", "kafka-cluster", "down"),
    ("W7", "lat_max_ms", "latency max ms", "strand-cluster", "kafka-cluster", "down"),
    ("W7", "broker_cpu_s", "CPU s of the 3 brokers", "strand-cluster", "kafka-cluster", "down"),
    ("W7", "broker_cpu_s_per_gib", "CPU s of the 3 brokers per GiB", "strand-cluster",
     "kafka-cluster", "down"),
    ("W7", "peak_rss_mib", "peak RSS MiB, 3 brokers summed", "strand-cluster",
     "kafka-cluster", "down"),
    ("W8", "records_per_s", "records/s", "strand", "kafka", "up"),
    ("W8", "mb_per_s", "MB/s", "strand", "kafka", "up"),
    ("W8", "txn_per_s", "transactions/s", "strand", "kafka", "up"),
    ("W8", "commit_avg_ms", "commit latency avg ms", "strand", "kafka", "down"),
    ("W8", "commit_p50_ms", "commit latency p50 ms", "strand", "kafka", "down"),
    ("W8", "commit_p99_ms", "commit latency p99 ms", "strand", "kafka", "down"),
    ("W8", "commit_max_ms", "commit latency max ms", "strand", "kafka", "down"),
    ("W8", "broker_cpu_s", "broker CPU s", "strand", "kafka", "down"),
    ("W8", "broker_cpu_s_per_gib", "broker CPU s per GiB", "strand", "kafka", "down"),
    ("W8", "peak_rss_mib", "peak RSS MiB", "strand", "kafka", "down"),
    ("W9", "mb_per_s", "share consume MB/s", "strand", "kafka", "up"),
    ("W9", "records_per_s", "share consume records/s", "strand", "kafka", "up"),
    ("W9", "broker_cpu_s", "broker CPU s", "strand", "kafka", "down"),
    ("W9", "broker_cpu_s_per_gib", "broker CPU s per GiB read", "strand", "kafka", "down"),
    ("W9", "peak_rss_mib", "peak RSS MiB", "strand", "kafka", "down"),
]


def median_of(runs: list[dict], key: str) -> float | None:
    vals = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
    return statistics.median(vals) if vals else None


def workload_of(row_workload: str) -> str:
    """"W2 vs Kafka default" and "W2/strand-bench" -> "W2"."""
    return re.split(r"[ /]", row_workload)[0]


def upgrade(results: dict) -> dict:
    """Results files from before --client ran W1-W4 with kafka-tools only, keyed "W1"."""
    if "clients" in results["meta"]:
        return results
    results["meta"]["clients"] = [KafkaTools.name]

    def key(k: str) -> str:
        old = k.split("-")[0] in CLIENT_WORKLOADS and "/" not in k
        return wkey(k, KafkaTools.name) if old else k

    for section in ("workloads", "commands", "contention"):
        if section in results:
            results[section] = {key(k): v for k, v in results[section].items()}
    for i in results["issues"]:
        i["workload"] = key(i["workload"])
    return results


def client_keys(results: dict, workload: str) -> list[tuple[str, str | None]]:
    """(results key, client) of a workload's runs: W1-W4 one per client, else one."""
    if workload not in CLIENT_WORKLOADS:
        return [(workload, None)]
    return [(wkey(workload, c), c) for c in results["meta"]["clients"]]


def summarize(results: dict) -> list[dict]:
    for key, w in results["workloads"].items():
        if workload_of(key) == "W4" and w.get("loopback"):
            ceiling = statistics.median(x["mb_per_s"] for x in w["loopback"])
            w["loopback_mb_per_s"] = ceiling
            for runs in w["variants"].values():
                for r in runs:
                    if "fetch_mb_per_s" in r:
                        r["ceiling_fraction"] = r["fetch_mb_per_s"] / ceiling
    table = []
    for wl, rows in itertools.groupby(ROWS, key=lambda row: row[0]):
        rows = list(rows)
        for wk, client in client_keys(results, workload_of(wl)):
            w = results["workloads"].get(wk)
            if not w:
                continue
            for _, key, label, sv, kv, better in rows:
                s_runs, k_runs = w["variants"].get(sv, []), w["variants"].get(kv, [])
                s, k = median_of(s_runs, key), median_of(k_runs, key)
                if s is None and k is None:
                    continue
                ratio = s / k if s is not None and k not in (None, 0) else None
                table.append({"workload": wl, "metric": key,
                              "client": client or FIXED_CLIENTS.get(wl, OTHER_CLIENT),
                              "label": label, "strand": s, "kafka": k, "ratio": ratio,
                              "better": better,
                              "n": [len([r for r in s_runs if key in r]),
                                    len([r for r in k_runs if key in r])]})
    return table


def fmt(v: float | None) -> str:
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def fmt_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}"


def arrow(better: str | None) -> str:
    return {"up": " (higher is better)", "down": " (lower is better)"}.get(better or "", "")


def other_load(run: dict) -> float:
    """Largest average number of cores other processes used during a measured phase."""
    loads = [ph.get("other_cpu_s", 0.0) / ph["wall_s"]
             for ph in (run.get("passes") or [run]) if ph.get("wall_s")]
    return max(loads, default=0.0)


def contention(results: dict, limit: float = 0.25) -> dict:
    """Per workload: runs during whose measured phase other processes used more than
    `limit` cores on average (the machine is shared; see other_cpu_s)."""
    out = {}
    for wl, w in results["workloads"].items():
        total = busy = 0
        for runs in w.get("variants", {}).values():
            for r in runs:
                phases = r.get("passes") or [r]
                for ph in phases:
                    if ph.get("wall_s"):
                        total += 1
                        if ph.get("other_cpu_s", 0) / ph["wall_s"] > limit:
                            busy += 1
        if total:
            out[wl] = {"phases": total, "contended": busy}
    return out


CLIENT_NOTE = ("client = the load generator that drove both brokers for the row; latencies:\n"
               "  kafka-tools: ProducerPerformance's, whole ms from send() to the ack "
               "(includes time queued in the client)\n"
               "  strand-bench: per batch from request to response (HdrHistogram, microseconds)\n"
               "  TxnPerf (W8): bench/TxnPerf.java, Kafka's Java producer with a transactional.id;"
               " commit latency\n  is commitTransaction() from the call to its return")


def workload_notes(results: dict) -> list[str]:
    """W4's loopback ceiling and W3's rate, per client that ran them."""
    lines = []
    for key, w in results["workloads"].items():
        if workload_of(key) == "W4" and w.get("loopback_mb_per_s"):
            lines.append(f"{key} ceiling: loopback measured with iperf3 (one TCP stream) in "
                         f"the same runs, median {fmt(w['loopback_mb_per_s'])} MB/s.")
        elif workload_of(key) == "W3" and "throughput" in w:
            rate_from = w.get("rate_from", "half of Kafka's W1 median")
            lines.append(f"{key} rate: {w['throughput']:,} records/s, {rate_from}.")
    return lines


def rows_with_groups(table: list[dict]):
    """(workload shown, client shown, row): each only where it changes."""
    last = (None, None)
    for row in table:
        wl = row["workload"] if row["workload"] != last[0] else ""
        client = row["client"] if (row["workload"], row["client"]) != last else ""
        last = (row["workload"], row["client"])
        yield wl, client, row


def text_table(table: list[dict], results: dict) -> str:
    lines = []
    header = (f"{'workload':<28} {'client':<15} {'metric':<32} {'Strand':>10} {'Kafka':>10} "
              f"{'S/K':>6}  n")
    lines.append(header)
    lines.append("-" * len(header))
    for wl, client, row in rows_with_groups(table):
        mark = {"up": "+", "down": "-"}.get(row["better"] or "", " ")
        lines.append(f"{wl:<28} {client:<15} {row['label'][:31]:<31}{mark} "
                     f"{fmt(row['strand']):>10} {fmt(row['kafka']):>10} "
                     f"{fmt_ratio(row['ratio']):>6}  {row['n'][0]}/{row['n'][1]}")
    lines += workload_notes(results)
    cont = results.get("contention", {})
    busy = {k: v for k, v in cont.items() if v["contended"]}
    if busy:
        lines.append("measured phases kept although other processes used more than "
                     f"{results['meta']['contended_cores']} core: " +
                     ", ".join(f"{k} {v['contended']}/{v['phases']}" for k, v in busy.items()))
    dropped = {k: len(w["discarded"]) for k, w in results["workloads"].items()
               if w.get("discarded")}
    if dropped:
        lines.append("contended runs discarded and repeated: " +
                     ", ".join(f"{k} {n}" for k, n in dropped.items()))
    lines.append("S/K = Strand/Kafka of the medians; '+' higher is better, '-' lower is "
                 "better; n = runs per broker; MB = 2^20 bytes (as the Kafka tools print)")
    lines.append(CLIENT_NOTE)
    return "\n".join(lines)


def markdown_table(table: list[dict], results: dict) -> str:
    out = ["| workload | client | metric | Strand | Kafka | Strand/Kafka |",
           "|---|---|---|---:|---:|---:|"]
    for wl, client, row in rows_with_groups(table):
        better = {"up": " (↑)", "down": " (↓)"}.get(row["better"] or "", "")
        out.append(f"| {wl} | {client} | {row['label']}{better} | {fmt(row['strand'])} | "
                   f"{fmt(row['kafka'])} | {fmt_ratio(row['ratio'])} |")
    return "\n".join(out)


# --------------------------------------------------------------------------- plots


def plot(results: dict, plots_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots_dir.mkdir(parents=True, exist_ok=True)
    kafka = results["meta"].get("kafka", "?")
    colors = {"strand": "#d95f02", "strand-every-batch": "#f4a261", "kafka": "#1b9e77",
              "kafka-default": "#1b9e77", "kafka-flush1": "#7570b3",
              "strand-cluster": "#e7298a", "kafka-cluster": "#66a61e"}
    names = {"strand": "Strand", "strand-every-batch": "Strand --flush every-batch",
             "kafka": "Kafka", "kafka-default": "Kafka default",
             "kafka-flush1": "Kafka flush.messages=1",
             "strand-cluster": "Strand, 3 brokers RF=3", "kafka-cluster": "Kafka, 3 brokers RF=3"}
    wls = results["workloads"]
    written = []

    def bars(ax, client, groups, metric, ylabel, log_scale=False):
        """groups: [(title, workload, [variants])] -> bar per variant, median with min-max."""
        # Below the client's resolution ("0 ms") cannot sit on a log axis: drawn as half.
        step = CLIENTS[client].latency_resolution_ms
        x = 0
        ticks, labels, seen = [], [], set()
        for title, wl, variants in groups:
            w = wls.get(wkey(wl, client))
            if not w:
                continue
            start = x
            for v in variants:
                vals = [r[metric] for r in w["variants"].get(v, []) if metric in r]
                if not vals:
                    x += 1
                    continue
                med = statistics.median(vals)
                shown = max(med, step / 2) if log_scale else med
                ax.bar(x, shown, color=colors[v], label=names[v] if v not in seen else None,
                       yerr=[[max(0.0, shown - min(vals))], [max(0.0, max(vals) - shown)]],
                       capsize=3)
                text = f"<{step:g}" if log_scale and med < step else fmt(med)
                ax.text(x + 0.08, shown, text, ha="left", va="bottom", fontsize=7)
                seen.add(v)
                x += 1
            ticks.append((start + x - 1) / 2)
            labels.append(title)
            x += 1
        ax.set_xticks(ticks)
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel(ylabel)
        if log_scale:
            ax.set_yscale("log")
        if seen:
            ax.legend(fontsize=6, framealpha=0.6)
        ax.grid(axis="y", alpha=0.3)

    def clients_with(workloads: tuple[str, ...]) -> list[str]:
        return [c for c in results["meta"]["clients"]
                if any(wkey(w, c) in wls for w in workloads)]

    # Throughput, one row per client: producer MB/s (W1, W2), consumer MB/s (W4) with the
    # loopback ceiling.
    clients = clients_with(("W1", "W2", "W4", "W7"))
    if clients:
        fig, axes = plt.subplots(len(clients), 2, figsize=(11, 4 * len(clients)),
                                 gridspec_kw={"width_ratios": [3, 1.3]}, squeeze=False)
        for (ax0, ax1), client in zip(axes, clients):
            bars(ax0, client, [("W1 acks=1", "W1", ["strand", "kafka"]),
                               ("W2 acks=all", "W2", ["strand-every-batch", "kafka-default",
                                                       "kafka-flush1"]),
                               ("W7 3 brokers acks=all", "W7", ["strand-cluster",
                                                                "kafka-cluster"])],
                 "mb_per_s", f"produce MB/s ({client})")
            ax0.set_title(f"{client}: produce, 6 partitions, 1 KiB records, max throughput",
                          fontsize=9)
            bars(ax1, client, [("W4 consume", "W4", ["strand", "kafka"])], "fetch_mb_per_s",
                 f"consume MB/s ({client})")
            ceiling = wls.get(wkey("W4", client), {}).get("loopback_mb_per_s")
            if ceiling:
                ax1.axhline(ceiling, color="grey", ls="--", lw=1)
                ax1.text(-0.4, ceiling, f"iperf3 loopback {fmt(ceiling)}", fontsize=7,
                         va="bottom")
                ax1.set_ylim(0, ceiling * 1.15)
            ax1.set_title(f"{client}: consume from page cache", fontsize=9)
        fig.suptitle(f"Strand vs Apache Kafka {kafka}: throughput (median, min-max bars)",
                     fontsize=10)
        fig.tight_layout()
        path = plots_dir / "throughput.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    # Latency percentiles per workload and broker, one row per client.
    lat_groups = [("W1", "W1", ["strand", "kafka"]),
                  ("W2 acks=all", "W2", ["strand-every-batch", "kafka-default",
                                         "kafka-flush1"]),
                  ("W3 rate", "W3", ["strand", "kafka"]),
                  ("W7 3 brokers", "W7", ["strand-cluster", "kafka-cluster"])]
    clients = clients_with(tuple(g[1] for g in lat_groups))
    if clients:
        metrics = [("lat_p50_ms", "p50"), ("lat_p99_ms", "p99"), ("lat_p999_ms", "p99.9")]
        fig, axes = plt.subplots(len(clients), len(metrics), figsize=(13, 4 * len(clients)),
                                 squeeze=False)
        for row, client in zip(axes, clients):
            for ax, (m, name) in zip(row, metrics):
                bars(ax, client, lat_groups, m, f"{name} latency ms (log)", log_scale=True)
                ax.set_title(f"{client}: produce latency {name}", fontsize=9)
        fig.suptitle(f"Strand vs Apache Kafka {kafka}: produce latency, median of runs "
                     "(kafka-tools: whole ms from send(); strand-bench: request to response)",
                     fontsize=10)
        fig.tight_layout()
        path = plots_dir / "latency.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


# --------------------------------------------------------------------------- docs

DOC_BEGIN = "<!-- bench/compare.py: begin latest -->"
DOC_END = "<!-- bench/compare.py: end latest -->"
DOC_HEADING = "## Strand vs Apache Kafka"


def machine_info(args) -> dict:
    info: dict = {"kernel": platform.release(), "cpus": os.cpu_count()}
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                info["mem_gib"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    try:
        df = subprocess.run(["df", "-T", str(args.data_root or tempfile.gettempdir())],
                            capture_output=True, text=True).stdout.splitlines()[-1].split()
        info["data_fs"] = f"{df[1]} on {df[0]}"
    except (IndexError, OSError):
        pass
    try:
        info["java"] = subprocess.run(["java", "-version"], capture_output=True,
                                      text=True).stderr.splitlines()[0]
    except (OSError, IndexError):
        pass
    try:
        import confluent_kafka

        v = confluent_kafka.version()
        info["confluent_kafka"] = v if isinstance(v, str) else v[0]
        info["librdkafka"] = confluent_kafka.libversion()[0]
    except ImportError:
        pass
    try:
        info["iperf3"] = subprocess.run(["iperf3", "--version"], capture_output=True,
                                        text=True).stdout.split("\n")[0]
    except OSError:
        pass
    return info


def strand_info(strand_bin: Path) -> dict:
    info: dict = {"binary": str(strand_bin)}
    try:
        data = strand_bin.read_bytes()
        info["sha256"] = hashlib.sha256(data).hexdigest()[:16]
        info["mtime"] = dt.datetime.fromtimestamp(strand_bin.stat().st_mtime).isoformat(
            timespec="seconds")
        info["version"] = subprocess.run([str(strand_bin), "--version"], capture_output=True,
                                         text=True).stdout.strip()
    except OSError as e:
        info["error"] = str(e)
    try:
        info["git_commit"] = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short",
                                             "HEAD"], capture_output=True,
                                            text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True,
                               text=True).stdout.strip()
        info["git_dirty"] = bool(dirty)
    except OSError:
        pass
    return info


def docs_section(results: dict, table: list[dict], plots: list[Path], docs_path: Path) -> str:
    m = results["meta"]
    mach = m["machine"]
    s = m["strand"]
    prof = m["profile"]
    rel = [os.path.relpath(p, docs_path.parent) for p in plots]
    out = [DOC_BEGIN, ""]
    out.append(f"Latest: {m['started'][:10]}, `--{m['mode']}` "
               f"({', '.join(f'{k}={v}' for k, v in prof.items())}); "
               f"Strand {s.get('git_commit', '?')}{' (dirty tree)' if s.get('git_dirty') else ''}"
               f" release build, Apache Kafka {m.get('kafka', '?')} (kafka_2.13 jars from Maven Central, "
               f"`-Xmx1g -Xms1g`, G1). Machine: {mach.get('cpus')}-core "
               f"{mach.get('cpu', '?')} VM, {mach.get('mem_gib')} GiB RAM, Linux "
               f"{mach.get('kernel')}, data on {mach.get('data_fs', '?')} (both brokers), "
               f"clients on the same cores over loopback; {mach.get('java', '')}, "
               f"confluent-kafka {mach.get('confluent_kafka', '?')} "
               f"(librdkafka {mach.get('librdkafka', '?')}). W1-W4 clients: "
               f"{', '.join(m['clients'])}.")
    out.append("")
    out.append("Medians over runs; Strand/Kafka is the ratio of the medians (↑ higher is "
               "better, ↓ lower is better). MB = 2^20 bytes, as the Kafka tools print it. "
               "The client column names the load generator that drove both brokers for the "
               "row: kafka-tools is Kafka's `ProducerPerformance` / `ConsumerPerformance` "
               "(latencies in whole milliseconds from send() to the acknowledgement, so they "
               "include time queued in the client), strand-bench is `strand bench` "
               "(latencies per batch from request to response, in microseconds; no consumer "
               "group), confluent-kafka is librdkafka driven by the script (W5, W6), TxnPerf is "
               "`bench/TxnPerf.java`, Kafka's Java producer with a `transactional.id` (W8; "
               "commit latency is `commitTransaction()` from the call to its return).")
    out.append("")
    out.append(markdown_table(table, results))
    out.append("")
    for line in workload_notes(results):
        out.append(line + "  ")
    out.append("")
    busy = {k: v for k, v in results.get("contention", {}).items() if v["contended"]}
    dropped = {k: len(w["discarded"]) for k, w in results["workloads"].items()
               if w.get("discarded")}
    if dropped:
        out.append("Runs discarded and repeated because other processes on this shared machine "
                   f"used more than {m['contended_cores']} core during the measurement: " +
                   ", ".join(f"{k} {n}" for k, n in dropped.items()) + ".")
        out.append("")
    if busy:
        out.append("Measured phases kept although still contended (after the retries): " +
                   ", ".join(f"{k} {v['contended']} of {v['phases']}" for k, v in busy.items())
                   + ".")
        out.append("")
    if results["issues"]:
        out.append("Problems seen during this run:")
        out.append("")
        for i in results["issues"]:
            details = "; ".join(i["details"][:3])
            out.append(f"- {i['workload']} {i['variant']}: {i['what']}"
                       + (f" ({details[:400]})" if details else ""))
        out.append("")
    for p in rel:
        out.append(f"![{Path(p).stem}]({p})")
        out.append("")
    out.append("Commands (one run of each; `$DIR` is a fresh directory per run, `$PORT` a "
               "free port):")
    out.append("")
    out.append("```sh")
    for wl, cmds in results["commands"].items():
        out.append(f"# {wl}")
        out.extend(cmds)
        if wl == "W5":
            out.append("# then, in bench/compare.py: confluent_kafka.Producer(acks=1, "
                       "message.timeout.ms=1000, 10 ms backoffs).produce('first-ack', ...) "
                       "until one is acknowledged")
        elif wl.startswith("W6"):
            out.append("# then, in bench/compare.py: AdminClient.create_topics([NewTopic("
                       "'many-<i>', 1000, 1)]) per 1,000 partitions; AdminClient.list_topics(); "
                       "a Metadata v4 request for all topics on a plain socket")
    out.append("```")
    out.append("")
    out.append(f"Raw numbers: [{m['results_file']}](../{m['results_file']}).")
    out.append("")
    out.append(DOC_END)
    return "\n".join(out)


def write_docs(docs_path: Path, section: str) -> None:
    """Rewrites this script's own section ("## Strand vs Apache Kafka" to the end marker),
    or appends it; the rest of the file is left alone."""
    text = docs_path.read_text() if docs_path.exists() else "# Benchmarks\n"
    ours = DOC_HEADING + "\n\n" + INTRO + "\n\n" + section
    head = f"\n{DOC_HEADING}\n"
    if head in text and DOC_END in text and text.index(head) < text.index(DOC_END):
        a = text.index(head) + 1
        b = text.index(DOC_END) + len(DOC_END)
        text = text[:a] + ours + text[b:]
    else:
        text = text.rstrip("\n") + "\n\n" + ours + "\n"
    docs_path.write_text(text)


INTRO = """\
`bench/compare.py` runs the same workloads against Apache Kafka 4.4.0 (the release
`interop/kafka/fetch.sh` fetches; the "Latest" line below names the one measured) and
Strand on the same machine, the same disk and with the same topic settings, driven by the
same clients: W1-W4 once with Kafka's own `ProducerPerformance` and `ConsumerPerformance`
from that release's kafka-tools and once with `strand bench` (Strand's load generator),
each against both brokers; confluent-kafka for start-up and partition counts; `bench/TxnPerf.java`
(Kafka's Java producer with a `transactional.id`) for transactions. Each run starts a fresh
broker on a fresh data directory; runs alternate which broker goes first. For each
measured phase it records the broker's CPU seconds (utime+stime from `/proc/<pid>/stat`,
before/after) and its peak RSS (`VmHWM`). The machine these figures come from is shared
with other work, so the script also measures the CPU other processes used during each
measured phase and repeats runs where they took more than a quarter of a core. See
[bench/README.md](../bench/README.md) for the workloads, the clients, the fairness rules
and options.

```sh
bench/compare.py --quick                  # about 10 minutes per client on an idle machine
bench/compare.py --full --write-docs      # about an hour for both clients; rewrites this section
bench/compare.py --replot bench/results/<timestamp>.json --write-docs   # plots + docs again
```"""


# --------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_const", dest="mode", const="quick",
                      help="short runs, a few minutes in total (default)")
    mode.add_argument("--full", action="store_const", dest="mode", const="full",
                      help="W1 ~20-30 s per run, W4 over ~5 GiB, more runs")
    mode.add_argument("--smoke", action="store_const", dest="mode", const="smoke",
                      help="one tiny run of everything, to check the script works; results "
                      "and plots go to a temporary directory unless given")
    ap.add_argument("--client", choices=[*CLIENTS, "both"], default="both",
                    help="what drives W1-W4 against both brokers: Kafka's ProducerPerformance/"
                    "ConsumerPerformance (kafka-tools), strand bench (strand-bench) or each in "
                    "turn (both, the default); W5 and W6 use confluent-kafka either way")
    ap.add_argument("--workloads", default=",".join(ALL_WORKLOADS),
                    help="comma-separated subset of W1..W8 (default: all)")
    ap.add_argument("--runs", type=int, help="runs per broker for W1-W4, W7 and W8")
    ap.add_argument("--warmup-records", type=int,
                    help="W1-W3: records produced to another topic before the measured run "
                    "(JIT warm-up; 0 for none); W8: as many records in transactions of 100")
    ap.add_argument("--w1-records", type=int)
    ap.add_argument("--w2-records", type=int)
    ap.add_argument("--w3-seconds", type=float, help="length of a W3 run at its rate")
    ap.add_argument("--w3-rate", type=int, help="W3 records/s (default: half of Kafka's W1)")
    ap.add_argument("--w4-mib", type=int, help="MiB written, then consumed, per W4 run")
    ap.add_argument("--w4-passes", type=int, help="consumer passes per W4 run (last counts)")
    ap.add_argument("--w4-consumers", type=int,
                    help="W4 consumers in the strand-bench process (kafka-tools: always 1)")
    ap.add_argument("--w5-runs", type=int)
    ap.add_argument("--w6-partitions", help="comma-separated partition counts")
    ap.add_argument("--w6-runs", type=int)
    ap.add_argument("--w7-records", type=int, help="records per W7 run (3-broker cluster)")
    ap.add_argument("--w8-transactions", type=int,
                    help=f"transactions per W8 run ({W8_RECORDS_PER_TXN} records each)")
    ap.add_argument("--strand-bin", type=Path, default=DEFAULT_STRAND)
    ap.add_argument("--data-root", help="where run directories go (default: $TMPDIR); "
                    "must be a real disk, and the same one for both brokers")
    ap.add_argument("--keep-data", action="store_true", help="keep run directories")
    ap.add_argument("--results-dir", type=Path,
                    help="default: bench/results (--smoke: a temporary directory)")
    ap.add_argument("--plots-dir", type=Path,
                    help="default: docs/bench (--smoke: a temporary directory)")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--fail-on-issues", action="store_true",
                    help="exit 1 if any run reported an issue (a failed tool, a short count, "
                         "broker warnings, an aborted workload): for CI's smoke run")
    ap.add_argument("--replot", type=Path, metavar="RESULTS_JSON",
                    help="run nothing: print the table, draw the plots (and with "
                    "--write-docs the docs) again from a results file")
    ap.add_argument("--write-docs", action="store_true",
                    help="write the table into docs/BENCHMARKS.md (its own section only)")
    ap.add_argument("--docs", type=Path, default=DEFAULT_DOCS)
    ap.add_argument("--quiet-threshold", type=float, default=0.15,
                    help="before each run, wait until the machine is at most this busy "
                    "(fraction of all cores) over 1 s (default 0.15)")
    ap.add_argument("--quiet-wait", type=float, default=60,
                    help="longest wait for that, seconds (default 60)")
    ap.add_argument("--contended-cores", type=float, default=0.25,
                    help="a run is contended when other processes used more than this many "
                    "cores on average during a measured phase (default 0.25)")
    ap.add_argument("--retry-contended", type=int, default=2,
                    help="repeat a contended run up to this many times (default 2); the "
                    "discarded runs stay in the JSON")
    args = ap.parse_args()
    args.clients = list(CLIENTS) if args.client == "both" else [args.client]
    if args.replot:
        results = upgrade(json.loads(args.replot.read_text()))
        args.mode = results["meta"]["mode"]
    args.mode = args.mode or "quick"
    scratch = Path(tempfile.gettempdir()) / "strand-vs-kafka-smoke"
    args.results_dir = args.results_dir or (scratch if args.mode == "smoke" else
                                            REPO / "bench" / "results")
    args.plots_dir = args.plots_dir or (scratch if args.mode == "smoke" else
                                        REPO / "docs" / "bench")
    if args.write_docs and args.mode == "smoke" and args.docs == DEFAULT_DOCS:
        ap.error("--smoke figures are not for docs/BENCHMARKS.md (give --docs elsewhere)")
    if args.replot:
        table = summarize(results)
        plots = [] if args.no_plots else plot(results, args.plots_dir)
        print(text_table(table, results))
        for p in plots:
            print(f"plot:    {p}")
        if args.write_docs:
            write_docs(args.docs, docs_section(results, table, plots, args.docs))
            print(f"docs:    {args.docs}")
        return 0
    prof = dict(PROFILES[args.mode])
    for key in ("runs", "warmup_records", "w1_records", "w2_records", "w3_seconds", "w4_mib", "w4_passes",
                "w4_consumers", "w5_runs", "w6_runs", "w7_records", "w8_transactions"):
        if getattr(args, key) is not None:
            prof[key] = getattr(args, key)
    if args.w6_partitions:
        prof["w6_partitions"] = [int(x) for x in args.w6_partitions.split(",")]
    workloads = [w.strip().upper() for w in args.workloads.split(",") if w.strip()]
    for w in workloads:
        if w not in ALL_WORKLOADS:
            ap.error(f"unknown workload {w}")
    if not args.strand_bin.exists():
        ap.error(f"{args.strand_bin} not found (cargo build --release)")
    if "W4" in workloads and not shutil.which("iperf3"):
        ap.error("W4 needs iperf3 (apt-get install iperf3)")
    if {"W5", "W6"} & set(workloads):
        try:
            import confluent_kafka  # noqa: F401
        except ImportError:
            ap.error("W5 and W6 need confluent-kafka (pip install confluent-kafka)")
    if "W8" in workloads and not shutil.which("javac"):
        ap.error("W8 needs javac (a JDK 17+) to build bench/TxnPerf.java")
    libs = subprocess.run([str(REPO / "interop" / "kafka" / "fetch.sh")], check=True,
                          stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1]
    kafka_version = jars_version(Path(libs))
    KafkaTools.detect_options()
    if "W8" in workloads:  # compiled now, so no run includes javac
        subprocess.run([str(TXN_PERF), "--compile-only"], check=True)

    started = dt.datetime.now()
    stamp = started.strftime("%Y%m%d-%H%M%S")
    bench = Bench(args, prof)
    results = bench.results
    results_file = args.results_dir / f"{stamp}.json"
    results["meta"] = {
        "started": started.isoformat(timespec="seconds"), "mode": args.mode,
        "profile": {k: v for k, v in prof.items()}, "workloads": workloads,
        "machine": machine_info(args), "strand": strand_info(args.strand_bin),
        "kafka": kafka_version, "strand_config": STRAND_TOML.strip(),
        "results_file": os.path.relpath(results_file, REPO),
        "argv": sys.argv[1:], "contended_cores": args.contended_cores,
        "retry_contended": args.retry_contended, "clients": args.clients,
    }
    log(f"run directories under {bench.root}; results -> {results_file}")
    failed = None
    try:
        # W1-W4 once per client, one client after the other; W5, W6 once.
        for w in workloads:
            for client in (bench.clients if w in CLIENT_WORKLOADS else [None]):
                try:
                    getattr(bench, w.lower())(*([client] if client else []))
                except (KeyboardInterrupt, SystemExit):
                    raise
                except Exception as e:  # noqa: BLE001 - record and go on with the next one
                    bench.issue(wkey(w, client and client.name), "-",
                                f"workload aborted: {type(e).__name__}: {e}", [])
                    stop_all()
    except (KeyboardInterrupt, SystemExit) as e:
        failed = e
        log("interrupted; stopping brokers and writing what was measured")
    finally:
        stop_all()
        if not args.keep_data:
            shutil.rmtree(bench.root, ignore_errors=True)

    end_info = strand_info(args.strand_bin)
    if end_info.get("sha256") != results["meta"]["strand"].get("sha256"):
        log(f"note: {args.strand_bin} was rebuilt during the run; the results are for the copy "
            f"taken at the start (sha256 {results['meta']['strand'].get('sha256')})")
        results["meta"]["strand"]["rebuilt_during_run"] = True
    results["meta"]["finished"] = dt.datetime.now().isoformat(timespec="seconds")
    table = summarize(results)
    results["summary"] = table
    results["contention"] = contention(results, args.contended_cores)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    results_file.write_text(json.dumps(results, indent=1, default=str) + "\n")
    plots = [] if args.no_plots else plot(results, args.plots_dir)

    print()
    print(text_table(table, results))
    if results["issues"]:
        print("\nIssues:")
        for i in results["issues"]:
            print(f"  {i['workload']} {i['variant']}: {i['what']}")
            for d in i["details"][:8]:
                print(f"      {d}")
    print(f"\nresults: {results_file}")
    for p in plots:
        print(f"plot:    {p}")
    if args.write_docs:
        write_docs(args.docs, docs_section(results, table, plots, args.docs))
        print(f"docs:    {args.docs}")
    if failed is not None:
        return 130
    if args.fail_on_issues and results["issues"]:
        print(f"\n{len(results['issues'])} issue(s); failing (--fail-on-issues)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
