#!/usr/bin/env python3
"""Streams groups (KIP-1071, group.protocol=streams) on a 3-node Strand cluster.

First the whole single-node Java driver (interop/java/streams-groups.sh: a word count on two
instances, the internal topics the broker creates for the group, describe, list, a member
leaving, committed offsets, then kafka-streams-groups --list/--describe/--delete) runs
against the cluster; its internal topics are created by the controller on the group's
behalf and __consumer_offsets has the cluster's replication factor.

Then the failover section: interop/java/streams-groups-failover.sh
(interop/java/src/StreamsGroupsFailover.java) runs a Kafka Streams 4.4.0 word count with
group.protocol=streams and processing.guarantee=exactly_once_v2 on two instances (two
members), no record cache, fed continuously by an idempotent producer; every topic has RF 3
and min.insync.replicas 2. Once the group is Stable with both members and the 6 tasks, the
node that is the group coordinator of the application id (FindCoordinator, as the Admin
client's describeStreamsGroups reports it; cross-checked with the leader of the id's
__consumer_offsets partition) is killed with kill -9. The new coordinator rebuilds the
group from its records in __consumer_offsets (types 17, 19-23): describeStreamsGroups
answered by it must show the group with the same members. The node is restarted after
DOWN_SECONDS (past broker_session_timeout_ms, so leadership moves, and past the streams
heartbeat interval, so both members heartbeat to the new coordinator); if it is the
preferred leader of that partition it gets it back (the leader imbalance check) and loads
the group again, from its log caught up meanwhile. Checked:
  * the app keeps processing (its committed count updates advance) and both instances are
    (back) RUNNING;
  * describeStreamsGroups after the restart: Stable, both members, all 6 active tasks split
    with no overlap, the same member ids as before the kill (Streams keeps its member id for
    the process's life, so a member that rejoined at epoch 0 keeps it too: the group and
    member epochs before and after, the rebalances and the members' fencing/rejoins in the
    client log are reported, not asserted);
  * after the input stops: exactly-once counts (the app's checks: every count update of a
    word once and in order, the latest count of every word equals its count in the input,
    the committed input offsets at the input's end);
  * the nodes stop cleanly and none panicked.

STRAND_BIN names the broker binary (default target/release/strand). Node logs n<id>.log and
the app's client log java.log are in the data directory printed first; it is removed after
a passing run (unless --keep) and kept after a failure. Every wait has a deadline.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

from confluent_kafka.admin import AdminClient

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import Cluster, coordinator_partition, fail, log, partition_leader  # noqa: E402
from java_app import JavaApp  # noqa: E402
from nemesis import SETTINGS  # noqa: E402

DRIVER = os.path.join(HERE, "..", "java", "streams-groups.sh")
APP = os.path.join(HERE, "..", "java", "streams-groups-failover.sh")
RUN = "-cluster"
APP_ID = "streams-groups-failover-app" + RUN
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 50
ALL_TASKS = {f"{s}_{p}" for s in (0, 1) for p in range(3)}
RATE = 100               # input lines per second (about 4 words each)
START_UPDATES = 1500     # committed count updates before the kill
AFTER_UPDATES = 1500     # more of them after the restart
DOWN_SECONDS = 7.0       # the coordinator's downtime: past broker_session_timeout_ms (2.5 s),
                         # so leadership moves, and past streams.heartbeat.interval.ms (5 s),
                         # so every member heartbeats to the new coordinator meanwhile
DRIVER_DEADLINE = 330    # the single-node driver (its own watchdog: 280 s)
START_DEADLINE = 150     # javac, JVM start, both instances RUNNING, the first updates
GROUP_DEADLINE = 90      # a description to show what is waited for
PROGRESS_DEADLINE = 120  # updates after the restart
FINAL_DEADLINE = 240     # the app's final checks after "stop"


class App(JavaApp):
    """streams-groups-failover.sh; "describe" answered by "group: ..." or "group-error: ..."."""
    ANSWERS = QUIET = ("group: ", "group-error: ")

    def __init__(self, bootstrap, root):
        super().__init__([APP, "--rate", str(RATE), "--replication", "3", "--min-isr", "2"], root,
                         STRAND_BOOTSTRAP=bootstrap, STREAMS_GROUPS_RUN=RUN)

    def wait_ready(self, timeout):
        deadline = time.time() + timeout
        with self.cond:
            while not self.ready and self.alive() and time.time() < deadline:
                self.cond.wait(1)
        self.require_alive("start")
        if not self.ready:
            fail(f"the app's instances were not RUNNING within {timeout} s")

    def states(self):
        with self.cond:
            return {k: self.progress.get(k) for k in ("a", "b")}

    def wait_running(self, timeout, what):
        deadline = time.time() + timeout
        while self.states() != {"a": "RUNNING", "b": "RUNNING"}:
            self.require_alive(what)
            if time.time() > deadline:
                fail(f"{what}: the instances are not both RUNNING within {timeout} s: {self.states()}")
            time.sleep(0.2)

    def describe(self, timeout=40):
        """The group as the app's Admin client describes it: a dict, or the error text."""
        reply = self.ask("describe", time.time() + timeout)
        if reply is None:
            return f"no answer to describe within {timeout} s"
        if reply.startswith("group-error: "):
            return reply[len("group-error: "):]
        fields = reply[len("group: "):].split()
        members = {}
        for item in fields[4:]:
            member_id, client, epoch, tasks, process = item.split("|")
            members[member_id] = {"client": client, "epoch": int(epoch), "process": process,
                                  "tasks": set() if tasks == "-" else set(tasks.split("+"))}
        return {"state": fields[0], "epoch": int(fields[1]), "assignment_epoch": int(fields[2]),
                "coordinator": int(fields[3]), "members": members}


def stable_full(group):
    """Stable, 2 members, the 6 active tasks each once."""
    if not isinstance(group, dict) or group["state"].lower() != "stable" or len(group["members"]) != 2:
        return False
    tasks = [t for m in group["members"].values() for t in m["tasks"]]
    return len(tasks) == len(ALL_TASKS) and set(tasks) == ALL_TASKS


def instance(client_id):
    """"a" or "b" from a member's client id (<application id>-a-StreamThread-1-consumer)."""
    return client_id[len(APP_ID) + 1:].split("-")[0] if client_id.startswith(APP_ID + "-") else client_id


def show(group):
    if not isinstance(group, dict):
        return group
    members = ", ".join(f"{mid[:8]}.. ({instance(m['client'])}) epoch {m['epoch']} "
                        f"tasks {'+'.join(sorted(m['tasks'])) or '-'}"
                        for mid, m in sorted(group["members"].items(), key=lambda kv: kv[1]["client"]))
    return (f"{group['state']}, group epoch {group['epoch']}, assignment epoch "
            f"{group['assignment_epoch']}, coordinator {group['coordinator']}, members [{members}]")


def wait_group(app, what, until, timeout=GROUP_DEADLINE):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = app.describe()
        if until(last):
            return last
        time.sleep(0.5)
    fail(f"{what} not reached within {timeout} s; last description: {show(last)}")


def last_load(root, node, partition):
    """The node's last "loaded consumer groups" line for the partition (its group load)."""
    wanted = f"partition={OFFSETS_TOPIC}-{partition} "
    with open(os.path.join(root, f"n{node}.log"), errors="replace") as f:
        loads = [line.strip() for line in f if "loaded consumer groups" in line and wanted in line]
    return loads[-1] if loads else f"no load of {OFFSETS_TOPIC}-{partition} logged"


def main():
    keep = "--keep" in sys.argv[1:]
    started = time.time()
    binary = os.path.abspath(os.environ.get("STRAND_BIN", "target/release/strand"))
    root = tempfile.mkdtemp(prefix="strand-streams-groups-")
    cluster = Cluster(binary, root, settings=SETTINGS)
    log(f"data and node logs in {root}; network namespaces: {cluster.use_netns}")
    app = None
    passed = False
    try:
        cluster.launch()
        bootstrap = cluster.bootstrap()
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})

        # 1. The whole single-node driver against the cluster.
        log(f"cluster up ({bootstrap}); the streams-groups driver against it")
        env = dict(os.environ, STRAND_BOOTSTRAP=bootstrap, STREAMS_GROUPS_RUN=RUN)
        try:
            code = subprocess.run([DRIVER], env=env, timeout=DRIVER_DEADLINE).returncode
        except subprocess.TimeoutExpired:
            fail(f"the streams-groups driver did not finish within {DRIVER_DEADLINE} s")
        if code != 0:
            fail(f"the streams-groups driver failed on the cluster (exit {code})")
        log("ok: the streams-groups driver passed against the 3-node cluster")
        for topic in (f"streams-groups-app{RUN}-counts-store-repartition",
                      f"streams-groups-app{RUN}-counts-store-changelog"):
            leader, replicas, isr = partition_leader(admin, topic, 0)
            log(f"  {topic}-0: leader {leader}, replicas {replicas}, ISR {isr}")

        # 2. Failover: kill -9 the group coordinator of a running streams group.
        log("failover: the exactly_once_v2 word count on two instances, input produced continuously")
        app = App(bootstrap, root)
        app.wait_ready(START_DEADLINE)
        app.wait_updates(START_UPDATES, START_DEADLINE, "start")
        before = wait_group(app, "Stable with 2 members and the 6 tasks", stable_full)
        log(f"ok: before the kill: {show(before)} ({app.updates()} updates)")
        partition = coordinator_partition(APP_ID, OFFSETS_PARTITIONS)

        def agreed():
            leader, replicas, isr = partition_leader(admin, OFFSETS_TOPIC, partition)
            group = app.describe()
            if isinstance(group, dict) and group["coordinator"] == leader:
                return leader, replicas, isr
            log(f"  coordinator {show(group)} vs {OFFSETS_TOPIC}-{partition} leader {leader}; again")
            return None

        deadline = time.time() + 30
        found = None
        while found is None and time.time() < deadline:
            found = agreed()
            if found is None:
                time.sleep(1)
        if found is None:
            fail(f"FindCoordinator's coordinator of {APP_ID} never matched the leader of "
                 f"{OFFSETS_TOPIC}-{partition} within 30 s")
        victim, replicas, isr = found
        log(f"ok: the group coordinator of {APP_ID} is node {victim} (FindCoordinator), leader of "
            f"{OFFSETS_TOPIC}-{partition} (replicas {replicas}, ISR {isr})")
        if len(replicas) < 2:
            fail(f"{OFFSETS_TOPIC}-{partition} has replicas {replicas}: no other node can take over")

        log(f"kill -9 node {victim}, the group coordinator (at {app.updates()} updates)")
        killed_at = time.time()
        cluster.kill(victim)
        during = wait_group(app, "a description from a new coordinator",
                            lambda g: isinstance(g, dict) and g["coordinator"] not in (victim, -1))
        same = set(during["members"]) == set(before["members"])
        log(f"{'ok' if same else 'observed'}: node {during['coordinator']} took over "
            f"{time.time() - killed_at:.1f} s after the kill and describes the group rebuilt from its "
            f"records: {show(during)}; member ids {'the same as' if same else 'NOT the same as'} before")
        if not same:
            fail(f"the new coordinator's group has members {sorted(during['members'])}, not "
                 f"{sorted(before['members'])}")
        log(f"  node {during['coordinator']}'s log: {last_load(root, during['coordinator'], partition)}")
        left = DOWN_SECONDS - (time.time() - killed_at)
        if left > 0:
            time.sleep(left)
        at_restart = app.updates()
        log(f"restart node {victim} after {time.time() - killed_at:.1f} s down (at {at_restart} updates)")
        cluster.start(victim)
        if not cluster.wait_port(victim, 60):
            fail(f"node {victim} did not come back; see {root}/n{victim}.log")
        app.wait_updates(at_restart + AFTER_UPDATES, PROGRESS_DEADLINE, "after the restart")
        log(f"ok: processing goes on after the restart ({app.updates()} updates)")
        if replicas[0] == victim:
            # The restarted node is the partition's preferred leader: the leader imbalance
            # check (every 5 s) gives it the partition back, and it loads the group again,
            # from its log caught up with what the other coordinator wrote meanwhile.
            deadline = time.time() + PROGRESS_DEADLINE
            while partition_leader(admin, OFFSETS_TOPIC, partition)[0] != victim:
                app.require_alive("waiting for the preferred leader")
                if time.time() > deadline:
                    fail(f"{OFFSETS_TOPIC}-{partition} did not move back to its preferred leader {victim} "
                         f"within {PROGRESS_DEADLINE} s")
                time.sleep(0.5)
            at_move = app.updates()
            log(f"{OFFSETS_TOPIC}-{partition} is back on node {victim} (its preferred leader; "
                f"{at_move} updates)")
            app.wait_updates(at_move + AFTER_UPDATES, PROGRESS_DEADLINE, "after the move back")
            log(f"ok: processing goes on with the group back on node {victim} ({app.updates()} updates)")
        app.wait_running(GROUP_DEADLINE, "after the restart")
        log(f"ok: both instances RUNNING ({app.states()})")
        after = wait_group(app, "Stable with 2 members and the 6 tasks after the restart", stable_full)
        log(f"  node {after['coordinator']}'s log: {last_load(root, after['coordinator'], partition)}")
        log(f"ok: after the restart: {show(after)}")
        if set(after["members"]) != set(before["members"]):
            fail(f"the members after the restart {sorted(after['members'])} are not those before the "
                 f"kill {sorted(before['members'])}")
        log("ok: the same member ids as before the kill: " + ", ".join(sorted(m[:8] + ".." for m in after["members"])))
        epochs = {mid[:8]: (before["members"][mid]["epoch"], during["members"][mid]["epoch"],
                            after["members"][mid]["epoch"]) for mid in before["members"]}
        leader, replicas, isr = partition_leader(admin, OFFSETS_TOPIC, partition)
        log(f"observed: group epoch {before['epoch']} -> {during['epoch']} (new coordinator) -> "
            f"{after['epoch']} (after the restart); member epochs (before, new coordinator, after) "
            f"{epochs}; coordinator {before['coordinator']} -> {during['coordinator']} -> "
            f"{after['coordinator']} ({OFFSETS_TOPIC}-{partition} leader {leader}, ISR {isr})")

        app.finish(FINAL_DEADLINE)
        log("ok: exactly-once counts through the coordinator's kill (the app's checks above)")

        # What the failover did to the app (reported, not checked).
        rebalances = app.rebalances("streams ")
        client_log = app.client_log()
        mentions = {w: client_log.count(w) for w in (
            "UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH", "ProducerFencedException", "TaskMigratedException")}
        # Per member (its main consumer): the coordinators it found and its joins (epoch 0).
        members = {}
        for line in client_log.splitlines():
            for name in ("a", "b"):
                if f"clientId={APP_ID}-{name}-StreamThread-1-consumer," not in line:
                    continue
                seen = members.setdefault(name, {"coordinators": [], "joins": 0})
                if "Discovered group coordinator" in line and "nodeId=" in line:
                    node = int(line.split("nodeId=")[1].split(",")[0])
                    if not seen["coordinators"] or seen["coordinators"][-1] != node:
                        seen["coordinators"].append(node)
                if "to JOINING" in line:
                    seen["joins"] += 1
        log(f"observed: {rebalances} REBALANCING transitions after the first RUNNING; per member the "
            "coordinators it found and how often it joined (UNSUBSCRIBED/FENCED -> JOINING): "
            + ", ".join(f"{n}: {' -> '.join(map(str, m['coordinators']))}, {m['joins']} join(s)"
                        for n, m in sorted(members.items()))
            + f"; client log mentions {mentions}")

        cluster.stop_checked()
        log("ok: the nodes stopped cleanly, none panicked")
        log(f"PASS ({time.time() - started:.0f} s)")
        passed = True
        return 0
    finally:
        if app is not None:
            app.stop()
        cluster.destroy()
        if passed and not keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            log(f"node logs and java.log kept in {root}")


if __name__ == "__main__":
    sys.exit(main())
