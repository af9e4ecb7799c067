#!/usr/bin/env python3
"""DescribeQuorum (API 55) and ElectLeaders (API 43) on 5 nodes with
auto.leader.rebalance.enable=false, driven by Kafka 4.4.0's kafka-metadata-quorum and
kafka-leader-election tools (the Java Admin client) and by librdkafka's
AdminClient.elect_leaders:

- the quorum: kafka-metadata-quorum describe --status names a leader among the 5 voters,
  its epoch and a high watermark; --replication lists the 5 voters, one Leader and four
  Followers, each with its log end and fetch times; a killed voter's log end stops while
  the others' move on, and it catches up when it is back;

- voters (KIP-853): kafka-metadata-quorum remove-controller takes a follower out of the
  voters with its directory id (a wrong one: VoterNotFoundException) and it shows as an
  observer; add-controller, reading the node's metadata directory id from the
  meta.properties Strand writes in Kafka's format, makes it a voter again (a voter:
  DuplicateVoterException); removing the leader hands leadership to another voter and
  the cluster keeps creating topics; it is added back;
- a voter's lost metadata disk: a follower killed, its __cluster_metadata removed and
  started again comes back on a new directory id; it takes the log, and --replication
  shows it a voter (Follower) again under the new directory id, caught up, with no
  operator step (Strand records it once the node caught up; it votes only then); its new
  directory is marked as replacing a lost one, and its /metrics shows it taking part
  again (strand_raft_awaiting_directory_record 0) and what it refused;

- preferred: a broker restarted after a controlled shutdown is back in the ISR but leads
  nothing; kafka-leader-election --election-type PREFERRED for one partition moves that
  leadership back (every broker's Metadata agrees), then --all-topic-partitions moves the
  rest; asking again answers ELECTION_NOT_NEEDED (librdkafka), an unknown partition
  UNKNOWN_TOPIC_OR_PARTITION;
- unclean: a 2-replica partition loses its follower and then its leader (the last
  leader leaves the ISR for the ELR, as on Kafka 4.4: kafka-topics --describe shows it),
  the follower comes back outside the ISR and the partition stays offline; PREFERRED then fails with PREFERRED_LEADER_NOT_AVAILABLE, UNCLEAN elects the
  out-of-sync replica (ISR = itself) and the partition takes writes and reads again; the
  old leader rejoins as its follower;
- eligible leader replicas (KIP-966): with min.insync.replicas=2 the follower that left
  the ISR below it is eligible; both replicas down, the follower alone comes back and
  leads with every acknowledged record (without ELR the partition would wait for the
  killed leader), which rejoins as its follower after its unclean restart.

Five nodes so that two can be down while the metadata quorum (all five vote) keeps its
majority.
"""

import os
import shutil
import signal
import subprocess
import urllib.request
import sys
import tempfile
import time

from confluent_kafka import Consumer, ElectionType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import Cluster, fail, log, until  # noqa: E402
from nemesis import SETTINGS  # noqa: E402

KAFKA_CLI = os.path.join(HERE, "..", "kafka", "kafka-cli.sh")


def partition(admin, topic, index):
    return admin.list_topics(topic, timeout=10).topics[topic].partitions[index]


def kafka_tool(tool, bootstrap, *args):
    """One of Kafka's tools; returns (exit code, stdout + stderr)."""
    run = subprocess.run([KAFKA_CLI, tool, "--bootstrap-server", bootstrap] + list(args),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    return run.returncode, run.stdout


def leader_election(bootstrap, *args):
    return kafka_tool("kafka-leader-election", bootstrap, *args)


def describe_partition(bootstrap, topic, index):
    """kafka-topics --describe's line of one partition as {field: value}."""
    code, out = kafka_tool("kafka-topics", bootstrap, "--describe", "--topic", topic)
    if code != 0:
        fail(f"kafka-topics --describe {topic}: exit {code}\n{out}")
    for line in out.splitlines():
        fields = dict(part.split(": ", 1) for part in line.strip().split("\t") if ": " in part)
        if fields.get("Partition") == str(index):
            return {k: v.strip() for k, v in fields.items()}
    fail(f"kafka-topics --describe {topic}: no partition {index}\n{out}")


def check_eligible_leader_replicas(cluster, admin, bootstrap):
    """KIP-966 on a 2-replica topic with min.insync.replicas=2: the follower stops cleanly
    (the ISR drops below min ISR, so it becomes an eligible leader replica and the high
    watermark stays), the leader is killed (the ISR empties, both are eligible); the
    follower alone comes back and leads with every acknowledged record, where without
    ELR the partition would wait for the killed leader. The killed leader restarts
    without a clean shutdown, so it leaves the ELR, and rejoins the ISR as a follower."""
    admin.create_topics([NewTopic("eligible", num_partitions=1, replica_assignment=[[1, 2]],
                                  config={"min.insync.replicas": "2"})])["eligible"].result(30)
    until("eligible-0 led by 1 with ISR [1, 2]",
          lambda: partition(admin, "eligible", 0).leader == 1
          and sorted(partition(admin, "eligible", 0).isrs) == [1, 2])
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all", "log_level": 2})
    acked = []
    for i in range(20):
        producer.produce("eligible", value=f"acked-{i}".encode(), partition=0,
                         on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
    if producer.flush(30) != 0 or len(acked) != 20:
        fail(f"acks=all records to eligible-0 with both replicas in sync: {len(acked)} of 20 acknowledged")
    cluster.kill(2, signal.SIGTERM)
    until("eligible-0's ISR to shrink to [1]", lambda: partition(admin, "eligible", 0).isrs == [1])
    described = describe_partition(bootstrap, "eligible", 0)
    if described.get("Elr") != "2":
        fail(f"node 2 left the ISR below min ISR: it should be eligible: {described}")
    log("eligible-0: node 2 stopped cleanly, ISR [1] below min.insync.replicas=2, Elr: 2")
    cluster.kill(1)
    until("eligible-0 to lose its leader", lambda: partition(admin, "eligible", 0).leader == -1)
    described = describe_partition(bootstrap, "eligible", 0)
    if (described.get("Isr") not in ("", None) or described.get("Elr") != "1,2"
            or described.get("LastKnownElr") != "1"):
        fail(f"eligible-0 after its leader was killed: want Isr empty, Elr 1,2, LastKnownElr 1: {described}")
    log("eligible-0: leader 1 killed: Isr empty, Elr: 1,2, LastKnownElr: 1")
    cluster.start(2)
    cluster.wait_port(2)
    until("node 2, an eligible leader replica, to lead eligible-0 with ISR [2]",
          lambda: partition(admin, "eligible", 0).leader == 2
          and partition(admin, "eligible", 0).isrs == [2], timeout=60)
    described = describe_partition(bootstrap, "eligible", 0)
    if described.get("Elr") != "1":
        fail(f"node 1 (killed) should still be eligible while node 2's ISR is below min ISR: {described}")
    log("eligible-0: node 2 came back alone and leads from the ELR; Elr: 1")
    cluster.start(1)
    cluster.wait_port(1)
    until("node 1 back in eligible-0's ISR as node 2's follower",
          lambda: sorted(partition(admin, "eligible", 0).isrs) == [1, 2], timeout=90)
    described = describe_partition(bootstrap, "eligible", 0)
    if described.get("Elr") not in ("", None):
        fail(f"eligible-0 back at min ISR: the ELR should be empty: {described}")
    # Read once the ISR is back at min ISR: below it the new leader's high watermark
    # stays where it was as a follower (Kafka's rule), so the tail may wait for this.
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "elr-check",
                         "enable.auto.commit": False, "log_level": 2})
    consumer.assign([TopicPartition("eligible", 0, 0)])
    read = []
    deadline = time.time() + 30
    while len(read) < 20 and time.time() < deadline:
        message = consumer.poll(1)
        if message is not None and not message.error():
            read.append(message.value())
    consumer.close()
    if read != acked:
        fail(f"eligible-0 led by node 2: want the 20 acknowledged records in order, read {read}")
    log("eligible-0: node 1 restarted after kill -9 and rejoined the ISR as node 2's follower; "
        "Elr empty; the 20 acknowledged records read in order from node 2")


def quorum_status(bootstrap):
    """kafka-metadata-quorum describe --status as {field: value}."""
    code, out = kafka_tool("kafka-metadata-quorum", bootstrap, "describe", "--status")
    if code != 0:
        fail(f"kafka-metadata-quorum describe --status: exit {code}\n{out}")
    fields = {}
    for line in out.splitlines():
        name, _, value = line.partition(":")
        if value and name.strip() and " " not in name.strip():
            fields[name.strip()] = value.strip()
    return fields, out


def quorum_replication(bootstrap):
    """kafka-metadata-quorum describe --replication as {node id: row}."""
    code, out = kafka_tool("kafka-metadata-quorum", bootstrap, "describe", "--replication")
    if code != 0:
        fail(f"kafka-metadata-quorum describe --replication: exit {code}\n{out}")
    lines = [line.split() for line in out.splitlines() if line.strip()]
    header = next((i for i, cols in enumerate(lines) if cols and cols[0] == "NodeId"), None)
    if header is None:
        fail(f"kafka-metadata-quorum describe --replication: no table\n{out}")
    names = lines[header]
    rows = {}
    for cols in lines[header + 1:]:
        if len(cols) >= len(names) and cols[0].isdigit():
            rows[int(cols[0])] = dict(zip(names, cols))
    return rows, out


def metadata_quorum(bootstrap, *args, config=None):
    """kafka-metadata-quorum with a --command-config written from `config`."""
    extra = []
    if config is not None:
        fd, path = tempfile.mkstemp(suffix=".properties")
        with os.fdopen(fd, "w") as f:
            f.write("".join(f"{k}={v}\n" for k, v in config.items()))
        extra = ["--command-config", path]
    return kafka_tool("kafka-metadata-quorum", bootstrap, *extra, *args)


def controller_config(cluster, i):
    """What kafka-metadata-quorum add-controller reads of node i: its id, its controller
    listener (the quorum address) and the metadata log directory with meta.properties."""
    host, _, quorum = cluster.addr[i]
    return {"node.id": i, "process.roles": "broker,controller",
            "controller.listener.names": "CONTROLLER", "listeners": f"CONTROLLER://{host}:{quorum}",
            "metadata.log.dir": os.path.join(cluster.root, f"n{i}", "__cluster_metadata")}


def voters_and_observers(bootstrap):
    rows, out = quorum_replication(bootstrap)
    voters = sorted(i for i, r in rows.items() if r.get("Status") in ("Leader", "Follower"))
    observers = sorted(i for i, r in rows.items() if r.get("Status") == "Observer")
    return voters, observers, rows, out


def check_voter_changes(cluster, admin, bootstrap):
    """remove-controller / add-controller of a follower and of the leader."""
    status, _ = quorum_status(bootstrap)
    leader = int(status["LeaderId"])
    _, _, rows, out = voters_and_observers(bootstrap)
    directories = {i: r.get("DirectoryId") for i, r in rows.items()}
    if any(not d or d == "AAAAAAAAAAAAAAAAAAAAAA" for d in directories.values()):
        fail(f"every voter should show the directory id it registered:\n{out}")
    follower = max(i for i in cluster.ids if i not in (leader, 3))

    code, out = metadata_quorum(bootstrap, "remove-controller", "--controller-id", str(follower),
                                "--controller-directory-id", "AAAAAAAAAAAAAAAAAAAAAQ")
    if code == 0 or "VoterNotFoundException" not in out:
        fail(f"remove-controller with a wrong directory id: want VoterNotFoundException, exit {code}\n{out}")
    code, out = metadata_quorum(bootstrap, "remove-controller", "--controller-id", str(follower),
                                "--controller-directory-id", directories[follower])
    if code != 0 or f"Removed KRaft controller {follower} with directory id {directories[follower]}" not in out:
        fail(f"remove-controller {follower}: exit {code}\n{out}")
    until(f"node {follower} an observer", lambda: voters_and_observers(bootstrap)[:2] == (
        sorted(i for i in cluster.ids if i != follower), [follower]))
    log(f"kafka-metadata-quorum remove-controller {follower}: 4 voters, {follower} observes "
        f"(a wrong directory id: VoterNotFoundException)")

    code, out = metadata_quorum(bootstrap, "add-controller", config=controller_config(cluster, 1))
    if code == 0 or "DuplicateVoterException" not in out:
        fail(f"add-controller of voter 1: want DuplicateVoterException, exit {code}\n{out}")
    code, out = metadata_quorum(bootstrap, "add-controller", config=controller_config(cluster, follower))
    if code != 0 or f"Added controller {follower} with directory id {directories[follower]}" not in out:
        fail(f"add-controller {follower}: exit {code}\n{out}")
    until(f"node {follower} a voter again", lambda: voters_and_observers(bootstrap)[:2] == (cluster.ids, []))
    log(f"kafka-metadata-quorum add-controller {follower} (directory id from its meta.properties): "
        f"5 voters again (voter 1: DuplicateVoterException)")

    code, out = metadata_quorum(bootstrap, "remove-controller", "--controller-id", str(leader),
                                "--controller-directory-id", directories[leader])
    if code != 0:
        fail(f"remove-controller of the leader {leader}: exit {code}\n{out}")
    until(f"a leader other than {leader}", lambda: int(quorum_status(bootstrap)[0]["LeaderId"]) != leader)
    admin.create_topics([NewTopic("after-resign", 1, 3)])["after-resign"].result(30)
    new_leader = int(quorum_status(bootstrap)[0]["LeaderId"])
    code, out = metadata_quorum(bootstrap, "add-controller", config=controller_config(cluster, leader))
    if code != 0:
        fail(f"add-controller {leader}: exit {code}\n{out}")
    until(f"node {leader} a voter again", lambda: voters_and_observers(bootstrap)[:2] == (cluster.ids, []))
    log(f"remove-controller of the leader {leader}: {new_leader} took over, a topic was created, "
        f"{leader} was added back")


def check_lost_metadata_disk(cluster, admin, bootstrap):
    """kill -9 of a follower, its metadata log directory removed, and a restart."""
    leader = int(quorum_status(bootstrap)[0]["LeaderId"])
    victim = max(i for i in cluster.ids if i not in (leader, 3))
    rows, _ = quorum_replication(bootstrap)
    old = rows[victim]["DirectoryId"]
    cluster.kill(victim)
    shutil.rmtree(os.path.join(cluster.root, f"n{victim}", "__cluster_metadata"))
    try:
        admin.create_topics([NewTopic("while-disk-lost", 1, 3)])["while-disk-lost"].result(60)
    except Exception as error:  # one run timed out at 30 s (cause not found): say where it stood
        fail(f"creating a topic with node {victim} down: {error!r}; quorum {quorum_status(bootstrap)[0]}\n"
             f"{quorum_replication(bootstrap)[1]}")
    cluster.start(victim)
    cluster.wait_port(victim)

    def recorded_anew():
        rows, _ = quorum_replication(bootstrap)
        row, lead = rows.get(victim, {}), rows[int(quorum_status(bootstrap)[0]["LeaderId"])]
        return (row.get("Status") == "Follower" and row.get("DirectoryId") not in (None, old)
                and int(row["LogEndOffset"]) >= int(lead["LogEndOffset"]) - 1)
    until(f"node {victim} a voter on its new directory, caught up", recorded_anew)
    new = quorum_replication(bootstrap)[0][victim]["DirectoryId"]
    # Its broker found the data directory remembering the lost one, and marked the new.
    marker = os.path.join(cluster.root, f"n{victim}", "__cluster_metadata", "replaces-a-lost-directory")
    if not os.path.exists(marker):
        fail(f"node {victim}'s new metadata directory is not marked as replacing a lost one")
    host, port = cluster.http[victim]

    def metrics():
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as response:
            lines = response.read().decode().splitlines()
        return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
                for line in lines if line and not line.startswith("#")}
    until(f"node {victim} takes part (strand_raft_awaiting_directory_record 0)",
          lambda: metrics().get("strand_raft_awaiting_directory_record") == 0.0)
    refused = metrics().get("strand_raft_replica_key_refusals_total")
    if refused is None:
        fail(f"node {victim}'s /metrics has no strand_raft_replica_key_refusals_total")
    until(f"node {victim} to be live again", lambda: victim in admin.list_topics(timeout=10).brokers)
    admin.create_topics([NewTopic("after-disk-lost", 1, 3)])["after-disk-lost"].result(30)
    log(f"node {victim} lost its metadata disk: back on directory {new} (was {old}), marked "
        f"as replacing it, a caught-up voter again ({refused:.0f} Raft messages refused on "
        f"replica keys), and topics are created")


def main():
    binary = os.path.abspath(os.environ.get("STRAND_BIN", "target/release/strand"))
    root = tempfile.mkdtemp(prefix="strand-quorum-")
    settings = dict(SETTINGS, auto_leader_rebalance_enable="false")
    cluster = Cluster(binary, root, nodes=5, settings=settings, use_netns=False)
    try:
        cluster.launch()
        admins = {i: AdminClient({"bootstrap.servers": "%s:%d" % cluster.addr[i][:2], "log_level": 2})
                  for i in cluster.ids}
        admin = admins[3]
        bootstrap = "%s:%d" % cluster.addr[3][:2]
        until("5 live brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 5)
        admin.create_topics([NewTopic("elect", 3, 3)])["elect"].result(30)
        # Two replicas on nodes 1 and 2, node 1 preferred; unclean election stays off.
        admin.create_topics([NewTopic("dirty", num_partitions=1, replica_assignment=[[1, 2]],
                                      config={"min.insync.replicas": "1"})])["dirty"].result(30)
        until("both topics led", lambda: all(p.leader >= 0 for t in ("elect", "dirty")
                                             for p in admin.list_topics(t, timeout=10).topics[t].partitions.values()))

        # --- the metadata quorum ----------------------------------------------------
        status, out = quorum_status(bootstrap)
        voters = status.get("CurrentVoters", "")
        if (not status.get("LeaderId", "").isdigit() or int(status["LeaderId"]) not in cluster.ids
                or not status.get("LeaderEpoch", "").isdigit()
                or int(status.get("HighWatermark", "0") or 0) <= 0
                or any(f'"id": {i}' not in voters for i in cluster.ids)
                or status.get("CurrentObservers") != "[]"):
            fail(f"kafka-metadata-quorum describe --status: want a leader among 5 voters, an epoch, "
                 f"a high watermark, no observers\n{out}")
        leader = int(status["LeaderId"])
        log(f"kafka-metadata-quorum --status: leader {leader}, epoch {status['LeaderEpoch']}, "
            f"high watermark {status['HighWatermark']}, voters {sorted(cluster.ids)}")
        rows, out = quorum_replication(bootstrap)
        statuses = sorted(row.get("Status") for row in rows.values())
        if sorted(rows) != cluster.ids or statuses != ["Follower"] * 4 + ["Leader"] \
                or rows[leader].get("Status") != "Leader" \
                or any(int(row["LogEndOffset"]) <= 0 for row in rows.values()):
            fail(f"kafka-metadata-quorum describe --replication: want 5 voters, leader {leader}, "
                 f"log ends above 0\n{out}")
        log(f"kafka-metadata-quorum --replication: 5 voters, log ends "
            f"{ {i: int(r['LogEndOffset']) for i, r in rows.items()} }")
        # A stopped follower's log end stays while the quorum's moves on.
        follower = next(i for i in cluster.ids if i != leader and i != 3)
        cluster.kill(follower)
        stopped_at = int(quorum_replication(bootstrap)[0][follower]["LogEndOffset"])
        admin.create_topics([NewTopic("while-away", 1, 3)])["while-away"].result(30)
        rows, out = quorum_replication(bootstrap)
        if int(rows[follower]["LogEndOffset"]) != stopped_at or int(rows[leader]["LogEndOffset"]) <= stopped_at:
            fail(f"node {follower} is down: its log end should stay at {stopped_at} while the leader's grows\n{out}")
        cluster.start(follower)
        cluster.wait_port(follower)
        until(f"node {follower} to catch up with the metadata log",
              lambda: (lambda r: int(r[follower]["LogEndOffset"]) >= int(r[leader]["LogEndOffset"]))(
                  quorum_replication(bootstrap)[0]))
        until(f"node {follower} to be live again", lambda: follower in admin.list_topics(timeout=10).brokers)
        log(f"a stopped voter's log end stood still at {stopped_at} and caught up after its restart")

        # --- voters --------------------------------------------------------------
        check_voter_changes(cluster, admin, bootstrap)
        check_lost_metadata_disk(cluster, admin, bootstrap)

        # --- preferred -----------------------------------------------------------
        preferred = partition(admin, "elect", 0).replicas[0]
        cluster.kill(preferred, sig=15)  # controlled shutdown: its leaderships move away
        cluster.start(preferred)
        cluster.wait_port(preferred)
        until(f"node {preferred} back in every ISR of elect",
              lambda: all(preferred in p.isrs for p in admin.list_topics("elect", timeout=10)
                          .topics["elect"].partitions.values() if preferred in p.replicas))
        state = partition(admin, "elect", 0)
        if state.leader == preferred:
            fail(f"elect-0 is led by its preferred replica {preferred} already; auto rebalance is off")
        log(f"elect-0: preferred replica {preferred} is in the ISR {state.isrs} but {state.leader} leads")

        code, out = leader_election(bootstrap, "--election-type", "PREFERRED", "--topic", "elect", "--partition", "0")
        if code != 0 or "Successfully completed leader election (PREFERRED) for partitions elect-0" not in out:
            fail(f"kafka-leader-election PREFERRED elect-0: exit {code}\n{out}")
        for i, other in admins.items():
            leader = partition(other, "elect", 0).leader
            if leader != preferred:
                fail(f"broker {i} says elect-0 is led by {leader} after the election, not {preferred}")
        log("kafka-leader-election --election-type PREFERRED --topic elect --partition 0: "
            f"{preferred} leads again, every broker's Metadata agrees")

        code, out = leader_election(bootstrap, "--election-type", "PREFERRED", "--all-topic-partitions")
        if code != 0:
            fail(f"kafka-leader-election PREFERRED --all-topic-partitions: exit {code}\n{out}")
        topics = admin.list_topics(timeout=10).topics
        astray = [(t, p.id, p.leader, p.replicas) for t, meta in topics.items() if t != "dirty"
                  for p in meta.partitions.values() if p.leader != p.replicas[0]]
        if astray:
            fail(f"after --all-topic-partitions, partitions not led by their preferred replica: {astray}\n{out}")
        log(f"--all-topic-partitions: every partition led by its preferred replica ({out.strip()[:200]})")

        results = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("elect", 0),
                                                              TopicPartition("elect", 7)]).result(30)
        errors = {(tp.topic, tp.partition): (err.code() if err else None) for tp, err in results.items()}
        not_needed = errors.get(("elect", 0))
        unknown = errors.get(("elect", 7))
        if not_needed != KafkaError.ELECTION_NOT_NEEDED or unknown != KafkaError.UNKNOWN_TOPIC_OR_PART:
            fail(f"librdkafka elect_leaders: want ELECTION_NOT_NEEDED and UNKNOWN_TOPIC_OR_PART, got {errors}")
        log("librdkafka elect_leaders: ELECTION_NOT_NEEDED for a preferred leader, UNKNOWN_TOPIC_OR_PART for elect-7")

        # --- unclean ---------------------------------------------------------------
        cluster.kill(2)
        until("dirty-0's ISR to shrink to [1]", lambda: partition(admin, "dirty", 0).isrs == [1])
        producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all", "log_level": 2})
        for i in range(10):
            producer.produce("dirty", value=f"before-{i}".encode(), partition=0)
        if producer.flush(30) != 0:
            fail("records to dirty-0 led by node 1 alone were not acknowledged")
        cluster.kill(1)
        until("dirty-0 to lose its leader", lambda: partition(admin, "dirty", 0).leader == -1)
        cluster.start(2)
        cluster.wait_port(2)
        until("node 2 to be live again", lambda: 2 in admin.list_topics(timeout=10).brokers)
        time.sleep(2)
        state = partition(admin, "dirty", 0)
        # Kafka 4.4 (eligible leader replicas on): the last ISR member leaves the ISR for
        # the ELR, and is the last known leader.
        described = describe_partition(bootstrap, "dirty", 0)
        if (state.leader != -1 or state.isrs != [] or described.get("Elr") != "1"
                or described.get("LastKnownElr") != "1"):
            fail(f"dirty-0 should stay offline with ISR [], ELR [1] (no unclean election by default): "
                 f"{state.leader} {state.isrs} {described}")
        log("dirty-0: leader 1 and follower 2 lost, 2 back outside the ISR: offline, ISR [], "
            "kafka-topics --describe: Elr: 1, LastKnownElr: 1")

        code, out = leader_election(bootstrap, "--election-type", "PREFERRED", "--topic", "dirty", "--partition", "0")
        if code == 0 or "PreferredLeaderNotAvailableException" not in out:
            fail(f"PREFERRED election of dirty-0 with its preferred replica down: want a failure, got exit {code}\n{out}")
        log("kafka-leader-election PREFERRED dirty-0: PreferredLeaderNotAvailableException, exit non-zero")

        code, out = leader_election(bootstrap, "--election-type", "UNCLEAN", "--topic", "dirty", "--partition", "0")
        if code != 0 or "Successfully completed leader election (UNCLEAN) for partitions dirty-0" not in out:
            fail(f"kafka-leader-election UNCLEAN dirty-0: exit {code}\n{out}")
        state = partition(admin, "dirty", 0)
        if state.leader != 2 or state.isrs != [2]:
            fail(f"after the unclean election dirty-0 should be led by 2 with ISR [2]: {state.leader} {state.isrs}")
        log("kafka-leader-election UNCLEAN dirty-0: node 2 leads, ISR [2]")

        for i in range(5):
            producer.produce("dirty", value=f"after-{i}".encode(), partition=0)
        if producer.flush(30) != 0:
            fail("records to dirty-0 after the unclean election were not acknowledged")
        code, out = leader_election(bootstrap, "--election-type", "UNCLEAN", "--topic", "dirty", "--partition", "0")
        if code != 0 or "Valid replica already elected for partitions dirty-0" not in out:
            fail(f"a second UNCLEAN election of dirty-0 should be a no-op: exit {code}\n{out}")
        cluster.start(1)
        cluster.wait_port(1)
        until("node 1 back in dirty-0's ISR as a follower",
              lambda: sorted(partition(admin, "dirty", 0).isrs) == [1, 2], timeout=90)
        log("the old leader rejoined dirty-0's ISR as node 2's follower")

        check_eligible_leader_replicas(cluster, admin, bootstrap)

        codes = cluster.stop_all()
        if any(codes.values()):
            fail(f"nodes did not stop cleanly: {codes}")
        print("PASS quorum and elections")
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
