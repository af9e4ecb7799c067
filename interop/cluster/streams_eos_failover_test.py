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
import sys
import tempfile
import time

from confluent_kafka.admin import AdminClient

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import Cluster, coordinator_partition, fail, log, partition_leader  # noqa: E402
from java_app import JavaApp  # noqa: E402
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


class App(JavaApp):
    """streams-eos-cluster.sh --controlled; "ids" answered by "txn-ids: ..." or "txn-ids-error: ..."."""
    ANSWERS = ("txn-ids",)
    QUIET = ("txn-ids: ",)

    def __init__(self, bootstrap, root, strict):
        super().__init__(
            [APP, "--controlled", "--replication", "3", "--min-isr", "2", "--threads", "2",
             "--rate", str(RATE), "--transaction-timeout-ms", str(TXN_TIMEOUT_MS)]
            + (["--strict-txn-state"] if strict else []),
            root, STRAND_BOOTSTRAP=bootstrap)

    def diagnose(self):
        self.transactions()  # printed, for the diagnosis

    def transactions(self, timeout=60):
        """[(transactional id, state, coordinator id)] of the app, via "ids"."""
        deadline = time.time() + timeout
        while True:
            reply = self.ask("ids", deadline)
            if reply is not None and reply.startswith("txn-ids: "):
                found = []
                for item in reply[len("txn-ids: "):].split():
                    txn_id, state, coordinator = item.split("|")[:3]
                    found.append((txn_id, state, int(coordinator)))
                return found
            if time.time() > deadline:
                fail(f"the app's transactions not listed within {timeout} s: {reply}")
            time.sleep(1)


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
            victim, _, isr = partition_leader(admin, STATE_TOPIC, partition)
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
            leader, _, isr = partition_leader(admin, STATE_TOPIC, partition)
            log(f"round {r + 1}: processing goes on ({app.updates()} updates); "
                f"{STATE_TOPIC}-{partition} leader {leader} (ISR {isr})")
        wait_whole(admin, HEALTH_DEADLINE)
        app.finish(FINAL_DEADLINE)
        cluster.stop_checked()
        log(f"killed (transactional id, its state then, node): {kills}")
        # What the faults did to the app (reported, not checked): rebalances after the
        # first RUNNING (a fenced producer's tasks migrate), fencing in the client log,
        # records of aborted transactions in the output.
        rebalances = app.rebalances("streams: ")
        client_log = app.client_log()
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
