"""A Strand cluster of N processes for fault-injection tests.

With root, every node runs in its own network namespace (10.77.0.<id>, joined by a bridge
whose host side is 10.77.0.254, where the clients run), so a node can be cut off from its
peers with iptables while clients still reach it: a real network partition. Without root
the nodes share loopback (distinct ports) and partitions are not available.

Faults: kill(node, SIGKILL) / start(node), pause(node) (SIGSTOP) / resume(node),
isolate(node) / heal(node), stop_all() / start_all().
"""

import os
import signal
import socket
import subprocess
import sys
import time

# STRAND_CLUSTER_NET (0-99) picks the bridge, namespaces and subnet, so two clusters can
# run side by side on one machine (each test run with its own number).
NET = int(os.environ.get("STRAND_CLUSTER_NET", "0"))
BRIDGE = f"strand-br{NET}" if NET else "strand-br"
SUBNET = f"10.77.{NET}"
HOST_IP = f"{SUBNET}.254"
KAFKA_PORT = 9092
QUORUM_PORT = 9093
HTTP_PORT = 9644


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def fail(message):
    log(f"FAIL: {message}")
    sys.exit(1)


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)


def until(what, check, timeout=60):
    """Polls `check` until it returns something truthy (exceptions count as not yet) and
    returns that; fails the test after `timeout` seconds, with the last exception seen."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            result = check()
            if result:
                return result
        except Exception as error:  # not there yet
            last = error
        time.sleep(0.3)
    fail(f"timed out waiting for {what} ({last})")


def watermarks(consumer, tp, timeout=90):
    """(low, high) of a partition, retrying while leadership is still moving.

    After a fault heals, the first answer may be NOT_LEADER_FOR_PARTITION or
    LEADER_NOT_AVAILABLE until the client's metadata catches up, as with Kafka.
    """
    from confluent_kafka import KafkaError, KafkaException
    moving = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
              KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TIMED_OUT, KafkaError._TRANSPORT,
              KafkaError._ALL_BROKERS_DOWN}
    deadline = time.time() + timeout
    while True:
        try:
            return consumer.get_watermark_offsets(tp, timeout=10)
        except KafkaException as error:
            code = error.args[0].code() if error.args else None
            if code not in moving or time.time() > deadline:
                raise
            log(f"watermarks of {tp.topic}-{tp.partition}: {error.args[0].name()}; retrying")
            time.sleep(1)


def java_hash(text):
    """Java's String.hashCode (UTF-16 code units, i32 wrap)."""
    h = 0
    data = text.encode("utf-16-be")
    for k in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[k:k + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def coordinator_partition(key, partitions=50):
    """The partition, hence the coordinator, of a transactional id in __transaction_state
    or of a group id in __consumer_offsets, as Kafka places them (50 partitions each)."""
    h = java_hash(key)
    return 0 if h == -(1 << 31) else abs(h) % partitions


def partition_leader(admin, topic, partition, timeout=60):
    """(leader, replicas (the preferred leader first), ISR) of a partition per Metadata,
    waiting (with a deadline) for it to have a leader."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            meta = admin.list_topics(topic, timeout=5).topics[topic]
            if meta.error is None and partition in meta.partitions:
                p = meta.partitions[partition]
                if p.leader >= 0:
                    return p.leader, list(p.replicas), sorted(p.isrs)
        except Exception:
            pass
        time.sleep(0.5)
    fail(f"no leader for {topic}-{partition} within {timeout} s")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, binary, root, nodes=3, settings=None, use_netns=None, lazyfs=None,
                 kafka=None):
        self.binary = binary
        self.root = root
        # kafka: run Apache Kafka 4.4 (interop/kafka/run-kafka.sh) instead of Strand, for
        # comparison under the same faults; its server.properties lines, beyond the
        # cluster's own (node ids, listeners, voters, replication factors).
        self.kafka = kafka
        self.kafka_cluster_id = None
        # strand-lazyfs: with it each node's data directory is a mount of it over
        # ROOT/nI.disk, and lose_power(i) loses what the node had not fsynced.
        self.lazyfs = lazyfs
        self.mounts = {}
        self.ids = list(range(1, nodes + 1))
        self.settings = settings or {}
        self.use_netns = (os.geteuid() == 0) if use_netns is None else use_netns
        self.procs = {}
        self.paused = set()
        self.isolated = set()
        self.logs = {}
        if self.use_netns:
            self.addr = {i: (f"{SUBNET}.{i}", KAFKA_PORT, QUORUM_PORT) for i in self.ids}
            self.http = {i: (f"{SUBNET}.{i}", HTTP_PORT) for i in self.ids}
        else:
            self.addr = {i: ("127.0.0.1", free_port(), free_port()) for i in self.ids}
            self.http = {i: ("127.0.0.1", free_port()) for i in self.ids}
        os.makedirs(root, exist_ok=True)
        config = os.path.join(root, "node.toml")
        with open(config, "w") as f:
            for key, value in self.settings.items():
                f.write(f"{key} = {value}\n")
        self.config = config

    # --- network ---------------------------------------------------------------------
    def ns(self, i):
        return f"strand{NET}-n{i}" if NET else f"strand-n{i}"

    def setup_network(self):
        if not self.use_netns:
            return
        self.teardown_network()
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
        sh("ip", "addr", "add", f"{HOST_IP}/24", "dev", BRIDGE)
        sh("ip", "link", "set", BRIDGE, "up")
        # Bridged traffic may pass the host's FORWARD chain (br_netfilter): let it through.
        sh("iptables", "-I", "FORWARD", "-i", BRIDGE, "-j", "ACCEPT", check=False)
        for i in self.ids:
            ns, host_end, node_end = self.ns(i), f"s{NET}n{i}h", f"s{NET}n{i}c"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", host_end, "type", "veth", "peer", "name", node_end)
            sh("ip", "link", "set", node_end, "netns", ns)
            sh("ip", "link", "set", host_end, "master", BRIDGE)
            sh("ip", "link", "set", host_end, "up")
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{SUBNET}.{i}/24", "dev", node_end)
            sh("ip", "netns", "exec", ns, "ip", "link", "set", node_end, "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")

    def teardown_network(self):
        if not self.use_netns:
            return
        for i in self.ids:
            sh("ip", "netns", "del", self.ns(i), check=False)
            sh("ip", "link", "del", f"s{NET}n{i}h", check=False)
        sh("iptables", "-D", "FORWARD", "-i", BRIDGE, "-j", "ACCEPT", check=False)
        sh("ip", "link", "del", BRIDGE, check=False)

    def isolate(self, i):
        """Cuts node i off from every other node (clients still reach it)."""
        if not self.use_netns:
            raise RuntimeError("network partitions need root (network namespaces)")
        for j in self.ids:
            if j != i:
                peer = f"{SUBNET}.{j}"
                sh("ip", "netns", "exec", self.ns(i), "iptables", "-A", "INPUT", "-s", peer, "-j", "DROP")
                sh("ip", "netns", "exec", self.ns(i), "iptables", "-A", "OUTPUT", "-d", peer, "-j", "DROP")
        self.isolated.add(i)

    def heal(self, i):
        if self.use_netns:
            sh("ip", "netns", "exec", self.ns(i), "iptables", "-F", check=False)
        self.isolated.discard(i)

    # --- processes -------------------------------------------------------------------
    def bootstrap(self):
        return ",".join(f"{h}:{p}" for h, p, _ in self.addr.values())

    def controllers(self):
        return ",".join(f"{i}@{h}:{q}" for i, (h, _, q) in self.addr.items())

    # --- disks -----------------------------------------------------------------------
    def data_dir(self, i):
        return os.path.join(self.root, f"n{i}")

    def log_dir(self, i):
        """Where node i keeps its partitions (Kafka: kafka-logs inside run-kafka.sh's dir)."""
        return os.path.join(self.data_dir(i), "kafka-logs") if self.kafka is not None else self.data_dir(i)

    def mount(self, i):
        """Mounts node i's data directory through strand-lazyfs (if the cluster has it)."""
        if self.lazyfs is None or (i in self.mounts and self.mounts[i].poll() is None):
            return
        backing, mountpoint = self.data_dir(i) + ".disk", self.data_dir(i)
        os.makedirs(backing, exist_ok=True)
        os.makedirs(mountpoint, exist_ok=True)
        out = open(os.path.join(self.root, f"n{i}.lazyfs.log"), "a")
        self.mounts[i] = subprocess.Popen([self.lazyfs, backing, mountpoint], stdout=out, stderr=out)
        until(f"node {i}'s data directory mounted",
              lambda: any(line.split()[1] == mountpoint for line in open("/proc/mounts")), timeout=10)

    def lose_power(self, i):
        """Node i loses power: the node and its file system are killed at once (its data
        not yet fsynced is lost), then the dead mount is detached. start(i) powers it on."""
        self.kill(i)
        fs = self.mounts.pop(i, None)
        if fs is not None:
            fs.kill()
            fs.wait()
            sh("umount", "-l", self.data_dir(i), check=False)

    def unmount_all(self):
        """Unmounts every data directory cleanly (data written back): nodes stopped first."""
        for i, fs in list(self.mounts.items()):
            if fs.poll() is None:
                fs.send_signal(signal.SIGTERM)
                try:
                    fs.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    fs.kill()
                    fs.wait()
                    sh("umount", "-l", self.data_dir(i), check=False)
            del self.mounts[i]

    def kafka_command(self, i):
        """run-kafka.sh for node i of a 3-voter combined-mode Kafka cluster."""
        host, port, quorum = self.addr[i]
        if self.kafka_cluster_id is None:
            import base64
            import uuid
            self.kafka_cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        os.makedirs(self.data_dir(i), exist_ok=True)
        cluster_id = os.path.join(self.data_dir(i), "cluster.id")
        if not os.path.exists(cluster_id):
            with open(cluster_id, "w") as f:
                f.write(self.kafka_cluster_id + "\n")
        replication = min(3, len(self.ids))
        lines = [
            f"node.id={i}",
            f"controller.quorum.voters={self.controllers()}",
            f"listeners=PLAINTEXT://{host}:{port},CONTROLLER://{host}:{quorum}",
            f"advertised.listeners=PLAINTEXT://{host}:{port}",
            f"default.replication.factor={replication}",
            f"offsets.topic.replication.factor={replication}",
            f"transaction.state.log.replication.factor={replication}",
            f"transaction.state.log.min.isr={min(2, replication)}",
        ] + list(self.kafka)
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kafka", "run-kafka.sh")
        return [script, self.data_dir(i), str(port)] + lines

    def start(self, i):
        self.mount(i)
        host, port, quorum = self.addr[i]
        command = [self.binary, "serve", "--node-id", str(i), "--config", self.config,
                   "--data-dir", self.data_dir(i),
                   "--listen", f"{host}:{port}", "--controllers", self.controllers(),
                   "--http-listen", "%s:%d" % self.http[i]]
        if self.kafka is not None:
            command = self.kafka_command(i)
        if self.use_netns:
            command = ["ip", "netns", "exec", self.ns(i)] + command
        out = open(os.path.join(self.root, f"n{i}.log"), "a")
        out.write(f"\n===== start {time.strftime('%H:%M:%S')}\n")
        out.flush()
        env = dict(os.environ, STRAND_LOG=os.environ.get("STRAND_LOG", "info,openraft=off"))
        env.setdefault("STRAND_KAFKA_HEAP_OPTS", "-Xmx768m -Xms768m")
        self.procs[i] = subprocess.Popen(command, stdout=out, stderr=out, env=env)
        self.paused.discard(i)

    def start_all(self):
        for i in self.ids:
            if not self.running(i):
                self.start(i)

    def running(self, i):
        proc = self.procs.get(i)
        return proc is not None and proc.poll() is None

    def kill(self, i, sig=signal.SIGKILL):
        proc = self.procs.get(i)
        if proc is None or proc.poll() is not None:
            return
        if i in self.paused:
            proc.send_signal(signal.SIGCONT)
            self.paused.discard(i)
        proc.send_signal(sig)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def pause(self, i):
        if self.running(i):
            self.procs[i].send_signal(signal.SIGSTOP)
            self.paused.add(i)

    def resume(self, i):
        if self.running(i):
            self.procs[i].send_signal(signal.SIGCONT)
        self.paused.discard(i)

    def stop_all(self, sig=signal.SIGTERM):
        """Stops every node; returns {node: exit code}."""
        for i in self.ids:
            if i in self.paused:
                self.resume(i)
        for i in self.ids:
            proc = self.procs.get(i)
            if proc is not None and proc.poll() is None:
                proc.send_signal(sig)
        codes = {}
        for i in self.ids:
            proc = self.procs.get(i)
            if proc is None:
                continue
            try:
                codes[i] = proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                proc.kill()
                codes[i] = proc.wait()
        return codes

    def stop_checked(self):
        """stop_all(); a node that panicked or did not exit 0 fails the test."""
        codes = self.stop_all()
        panicked = [i for i in self.ids
                    if "panicked" in open(os.path.join(self.root, f"n{i}.log"), errors="replace").read()]
        if panicked:
            fail(f"nodes {panicked} panicked; see {self.root}")
        if any(code != 0 for code in codes.values()):
            fail(f"nodes did not stop cleanly: {codes}; see {self.root}")

    def heal_all(self):
        for i in list(self.isolated):
            self.heal(i)
        for i in list(self.paused):
            self.resume(i)
        self.start_all()

    def launch(self):
        """Network, every node started and listening (or RuntimeError)."""
        self.setup_network()
        self.start_all()
        for i in self.ids:
            # Three JVMs starting at once on two cores take a while.
            if not self.wait_port(i, timeout=120 if self.kafka is not None else 30):
                raise RuntimeError(f"node {i} did not start; see {self.root}/n{i}.log")

    def destroy(self):
        """Kills every node and removes the network (the data stays)."""
        for i in self.ids:
            self.kill(i)
        self.unmount_all()
        self.teardown_network()

    def wait_port(self, i, timeout=30):
        host, port, _ = self.addr[i]
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with socket.create_connection((host, port), timeout=1):
                    return True
            except OSError:
                time.sleep(0.1)
        return False
