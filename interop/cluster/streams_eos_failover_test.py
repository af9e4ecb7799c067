#!/usr/bin/env python3
"""Kafka Streams exactly_once_v2 through kills of its transaction coordinator (3 nodes).

interop/java/streams-eos-cluster.sh (interop/java/src/StreamsEosCluster.java) runs a Kafka
Streams 4.4.0 word count with processing.guarantee=exactly_once_v2, commit.interval.ms
100, two stream threads (two transactional producers) and no record cache, fed
continuously by an idempotent producer; its input, output and internal (repartition,
changelog) topics have RF 3 and min.insync.replicas 2. While it processes, --rounds times:
the node leading the __transaction_state partition of one of the application's
transactional ids (taken from ListTransactions and DescribeTransactions; partition
abs(javaHash(id)) % 50, as Kafka places it) is killed with kill -9 and restarted after
--down-seconds (4; past broker_session_timeout_ms, so leadership moves), waiting (a few
polls) for that transaction to be Ongoing first; the application must go on processing
afterwards. Round r takes the r-th id (sorted, round-robin): with the default 4 rounds each
thread's coordinator dies twice. The app's transaction.timeout.ms (3 s) is below the
downtime and the nodes sweep for timed-out transactions every 0.5 s, so the coordinator
that takes over may abort a transaction left open (bumping the epoch): the producer is
fenced and Streams recovers its tasks (state from the changelog, input again from the
committed offsets) -- the path exactly-once really rests on. Rebalances, fencing and
aborted output records are reported at the end, not checked (they depend on timing).

KAFKA-20785: a commit racing that timeout abort may get INVALID_TXN_STATE (the abort's
one-step epoch bump makes the commit look like a retry), which the producer treats as
fatal, so the Streams thread dies. Kafka 4.1.1 and 4.4.0 answer the same (fixed upstream
later with PRODUCER_FENCED); the app replaces such a thread (printed "known: KAFKA-20785")
and every check still applies. --strict-txn-state makes it a failure instead.

Then the input stops and the app's checks run (see its header): a read_committed reader
saw every count update of every word exactly once and in order (1, 2, 3, ..., the word's
count in the input) -- no input record lost or counted twice, nothing from an aborted
transaction; the input holds each line at most once and every acknowledged one (the
expected counts are those of the lines it holds: a send may time out and still have been
written); the changelog ends at the counts; the committed offsets are the input's end. Last, the nodes stop cleanly and none panicked.

STRAND_BIN (or --binary) names the broker binary (default target/release/strand);
STRAND_LOG=info,openraft=off,strand_broker::txn=debug adds the nodes' transaction logs
(n<id>.log in the data directory printed first; the app's client logs, WARN and above,
are java.log there). Every wait has a deadline; nothing asserts on how long an operation
took.
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

from confluent_kafka.admin import AdminClient

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import Cluster, coordinator_partition, fail, log  # noqa: E402
from nemesis import SETTINGS  # noqa: E402

APP = os.path.join(HERE, "..", "java", "streams-eos-cluster.sh")
STATE_TOPIC = "__transaction_state"
STATE_PARTITIONS = 50
RATE = 100               # input lines per second (about 4 words each)
START_UPDATES = 2000     # committed count updates before the first kill
ROUND_UPDATES = 1500     # more of them after each restart before the next step
START_DEADLINE = 180     # JVM start, javac, Streams' first rebalance, the first updates
ROUND_DEADLINE = 120     # progress after a restart
TXN_TIMEOUT_MS = 3000    # the app's transaction.timeout.ms, below DOWN_SECONDS
ABORT_SWEEP_MS = 500     # the nodes' transaction.abort.timed.out.transaction.cleanup.interval.ms
ONGOING_TRIES = 20       # ids polls for the victim's transaction to be Ongoing
HEALTH_DEADLINE = 120    # full ISRs
FINAL_DEADLINE = 300     # the app's final checks (its own deadlines are shorter)


class App:
    """The Java app as a child process: its stdout parsed by a thread, commands on stdin."""

    def __init__(self, bootstrap, root, strict):
        self.lines = []
        self.progress = {}
        self.replies = []
        self.cond = threading.Condition()
        self.ready = None
        self.shown_progress = 0.0
        self.stderr = open(os.path.join(root, "java.log"), "w")
        env = dict(os.environ, STRAND_BOOTSTRAP=bootstrap)
        self.proc = subprocess.Popen(
            [APP, "--controlled", "--replication", "3", "--min-isr", "2", "--threads", "2",
             "--rate", str(RATE), "--transaction-timeout-ms", str(TXN_TIMEOUT_MS)]
            + (["--strict-txn-state"] if strict else []),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True,
            env=env, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            with self.cond:
                self.lines.append(line)
                if line.startswith("progress: "):
                    self.progress = dict(kv.split("=", 1) for kv in line[len("progress: "):].split())
                elif line.startswith("txn-ids"):
                    self.replies.append(line)
                elif line.startswith("ready: "):
                    self.ready = dict(kv.split("=", 1) for kv in line[len("ready: "):].split())
                self.cond.notify_all()
            if line.startswith("txn-ids: "):
                continue  # the test logs what it uses
            if not line.startswith("progress: ") or time.time() - self.shown_progress > 5:
                if line.startswith("progress: "):
                    self.shown_progress = time.time()
                log(f"  app: {line}")

    def alive(self):
        return self.proc.poll() is None

    def updates(self):
        with self.cond:
            return int(self.progress.get("updates", 0))

    def require_alive(self, what):
        if not self.alive():
            self.reader.join(10)
            fails = [line for line in self.lines if line.startswith("FAIL")]
            fail(f"{what}: the app exited {self.proc.returncode}"
                 + (f" ({fails[0]})" if fails else ""))

    def send(self, command):
        try:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.require_alive(f"command {command}")

    def wait_updates(self, target, timeout, what):
        deadline = time.time() + timeout
        while self.updates() < target:
            self.require_alive(what)
            if time.time() > deadline:
                with self.cond:
                    progress = dict(self.progress)
                self.transactions()  # printed, for the diagnosis
                fail(f"{what}: {self.updates()} committed count updates read, not {target}, "
                     f"within {timeout} s (progress {progress})")
            time.sleep(0.2)

    def transactions(self, timeout=60):
        """[(transactional id, state, coordinator id)] of the app, via "ids"."""
        deadline = time.time() + timeout
        while True:
            with self.cond:
                seen = len(self.replies)
            self.send("ids")
            with self.cond:
                while len(self.replies) == seen and self.alive() and time.time() < deadline:
                    self.cond.wait(1)
                reply = self.replies[-1] if len(self.replies) > seen else None
            self.require_alive("ids")
            if reply is not None and reply.startswith("txn-ids: "):
                found = []
                for item in reply[len("txn-ids: "):].split():
                    txn_id, state, coordinator = item.split("|")[:3]
                    found.append((txn_id, state, int(coordinator)))
                return found
            if time.time() > deadline:
                fail(f"the app's transactions not listed within {timeout} s: {reply}")
            time.sleep(1)

    def stop(self):
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        self.stderr.close()


def wait_whole(admin, timeout):
    """Every partition of every topic (internal ones too) with a leader and 3 in its ISR."""
    deadline = time.time() + timeout
    short = None
    while time.time() < deadline:
        try:
            topics = admin.list_topics(timeout=5).topics
            short = sorted(f"{t}-{p} isr {sorted(m.isrs)} leader {m.leader}"
                           for t, meta in topics.items() for p, m in meta.partitions.items()
                           if len(m.isrs) != 3 or m.leader < 0)
            if not short and STATE_TOPIC in topics:
                return
        except Exception as error:
            short = [str(error)]
        time.sleep(0.5)
    fail(f"the ISRs did not become full within {timeout} s: {short[:10] if short else short}")


def leader_of(admin, topic, partition, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            meta = admin.list_topics(topic, timeout=5).topics[topic]
            if meta.error is None and partition in meta.partitions:
                leader = meta.partitions[partition].leader
                if leader >= 0:
                    return leader, sorted(meta.partitions[partition].isrs)
        except Exception:
            pass
        time.sleep(0.5)
    fail(f"no leader for {topic}-{partition} within {timeout} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", default=os.environ.get("STRAND_BIN", "target/release/strand"))
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--down-seconds", type=float, default=4.0,
                        help="how long a killed node stays down (past broker_session_timeout_ms)")
    parser.add_argument("--strict-txn-state", action="store_true",
                        help="a Streams thread dying of KAFKA-20785 fails the run (default: replaced)")
    args = parser.parse_args()
    started = time.time()
    root = tempfile.mkdtemp(prefix="strand-streams-eos-")
    settings = dict(SETTINGS, transaction_abort_timed_out_transaction_cleanup_interval_ms=ABORT_SWEEP_MS)
    cluster = Cluster(os.path.abspath(args.binary), root, settings=settings)
    log(f"data and node logs in {root}; network namespaces: {cluster.use_netns}")
    app = None
    try:
        cluster.launch()
        bootstrap = cluster.bootstrap()
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
        log(f"cluster up ({bootstrap}); starting the Streams app")
        app = App(bootstrap, root, args.strict_txn_state)
        app.wait_updates(START_UPDATES, START_DEADLINE, "start")
        kills = []
        for r in range(args.rounds):
            wait_whole(admin, HEALTH_DEADLINE)
            txns = app.transactions()
            if not txns:
                fail("ListTransactions shows none of the app's transactional ids")
            log(f"round {r + 1}: the app's transactions {txns}")
            txn_id, state, described = txns[r % len(txns)]
            # Best effort: the kill lands while the victim's transaction is open.
            for _ in range(ONGOING_TRIES):
                if state == "Ongoing":
                    break
                state, described = {t: (s, c) for t, s, c in app.transactions()}.get(
                    txn_id, (state, described))
            partition = coordinator_partition(txn_id, STATE_PARTITIONS)
            victim, isr = leader_of(admin, STATE_TOPIC, partition)
            log(f"round {r + 1}: {txn_id} ({state}) -> {STATE_TOPIC}-{partition}, leader "
                f"{victim} (ISR {isr}; DescribeTransactions' coordinator {described}); "
                f"kill -9 node {victim} at {app.updates()} updates")
            cluster.kill(victim)
            kills.append((txn_id[-38:], state, victim))
            time.sleep(args.down_seconds)
            log(f"round {r + 1}: restart node {victim} (at {app.updates()} updates)")
            cluster.start(victim)
            if not cluster.wait_port(victim, 60):
                fail(f"node {victim} did not come back; see {root}/n{victim}.log")
            target = app.updates() + ROUND_UPDATES
            app.wait_updates(target, ROUND_DEADLINE, f"round {r + 1}: after the restart")
            leader, isr = leader_of(admin, STATE_TOPIC, partition)
            log(f"round {r + 1}: processing goes on ({app.updates()} updates); "
                f"{STATE_TOPIC}-{partition} leader {leader} (ISR {isr})")
        wait_whole(admin, HEALTH_DEADLINE)
        log("stopping the input; the app's final checks")
        app.send("stop")
        try:
            code = app.proc.wait(FINAL_DEADLINE)
        except subprocess.TimeoutExpired:
            fail(f"the app did not finish within {FINAL_DEADLINE} s of stop")
        app.reader.join(10)
        passed = [line for line in app.lines if line.startswith("PASS")]
        if code != 0 or not passed:
            fails = [line for line in app.lines if line.startswith("FAIL")]
            fail(f"the app exited {code}: {fails[0] if fails else 'no PASS line'}; "
                 f"client log {root}/java.log")
        codes = cluster.stop_all()
        panicked = [i for i in cluster.ids
                    if "panicked" in open(os.path.join(root, f"n{i}.log"), errors="replace").read()]
        if panicked:
            fail(f"nodes {panicked} panicked; see {root}")
        if any(code != 0 for code in codes.values()):
            fail(f"nodes did not stop cleanly: {codes}")
        log(f"killed (transactional id, its state then, node): {kills}")
        # What the faults did to the app (reported, not checked): rebalances after the
        # first RUNNING (a fenced producer's tasks migrate), fencing in the client log,
        # records of aborted transactions in the output.
        states = [line for line in app.lines if line.startswith("streams: ")]
        first = next((k for k, line in enumerate(states) if line.endswith("-> RUNNING")), len(states))
        rebalances = sum(1 for line in states[first:] if line.endswith("-> REBALANCING"))
        with open(os.path.join(root, "java.log"), errors="replace") as f:
            client_log = f.read()
        fenced = sum(client_log.count(w) for w in ("ProducerFencedException", "InvalidProducerEpochException",
                                                   "TaskMigratedException"))
        aborted = [line.split("records, ")[1].split(" more")[0] for line in app.lines
                   if line.startswith("ok: read_uncommitted output")]
        known = sum(1 for line in app.lines if line.startswith("known: KAFKA-20785"))
        log(f"effects: {rebalances} rebalances after the first RUNNING, {fenced} fencing/task-migration "
            f"mentions in java.log, {aborted[0] if aborted else '?'} output records of aborted transactions, "
            f"{known} stream threads replaced after KAFKA-20785")
        log(f"PASS ({time.time() - started:.0f} s)")
        return 0
    finally:
        if app is not None:
            app.stop()
        cluster.destroy()


if __name__ == "__main__":
    sys.exit(main())
