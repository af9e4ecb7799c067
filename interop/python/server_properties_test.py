"""`strand serve --config server.properties`: a Kafka server.properties (KRaft, combined
mode, as Kafka's own config/server.properties is laid out) configures Strand by Kafka's
names. Checks: the broker listens where `listeners` says and advertises
`advertised.listeners`; settings Strand implements take effect (num.partitions for an
auto-created topic, log.retention.hours behind a topic's retention.ms); DescribeConfigs
reports them as STATIC_BROKER_CONFIG with Kafka's default behind, the rest as
DEFAULT_CONFIG; the names Strand does not implement are listed in one warning; a
nonsense value stops the start, naming the setting.

Runs its own brokers (STRAND_BIN, default target/release/strand).
"""
import os
import socket
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from dataset import check, fail, ok

BIN = os.environ.get("STRAND_BIN", os.path.join(os.path.dirname(__file__), "../../target/release/strand"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_properties(directory, lines):
    path = os.path.join(directory, "server.properties")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def main():
    with tempfile.TemporaryDirectory() as tmp:
        port, controller_port = free_port(), free_port()
        path = write_properties(tmp, [
            "# Kafka's KRaft combined-mode layout",
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "inter.broker.listener.name=PLAINTEXT",
            f"advertised.listeners=PLAINTEXT://localhost:{port}",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "num.network.threads=3",
            "num.io.threads=8",
            f"log.dirs={tmp}/kraft-combined-logs",
            "num.partitions=3",
            "offsets.topic.replication.factor=1",
            "log.retention.hours=24",
            "log.segment.bytes=1073741824",
            "log.retention.check.interval.ms=300000",
        ])
        log_path = os.path.join(tmp, "broker.log")
        with open(log_path, "w") as log:
            broker = subprocess.Popen([BIN, "serve", "--config", path], stdout=log, stderr=subprocess.STDOUT)
        try:
            bootstrap = f"127.0.0.1:{port}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            deadline = time.time() + 30
            while True:
                try:
                    admin.list_topics(timeout=2)
                    break
                except Exception:
                    if time.time() > deadline or broker.poll() is not None:
                        fail(f"the broker did not come up on {bootstrap}: {open(log_path).read()[-2000:]}")
                    time.sleep(0.3)
            ok(f"the broker listens on the PLAINTEXT listener {bootstrap}")
            brokers = admin.list_topics(timeout=10).brokers
            check([(b.host, b.port) for b in brokers.values()] == [("localhost", port)],
                  f"advertised.listeners is what Metadata says ({brokers})")

            text = open(log_path).read()
            warnings = [line for line in text.splitlines() if "does not implement" in line]
            check(len(warnings) == 1, f"one warning for the names Strand does not implement ({warnings})")
            for name in ("num.network.threads", "num.io.threads", "offsets.topic.replication.factor"):
                check(name in warnings[0], f"the warning names {name}")
            for name in ("controller.listener.names", "inter.broker.listener.name", "listener.security.protocol.map"):
                check(name not in warnings[0], f"{name} is read, not ignored")

            producer = Producer({"bootstrap.servers": bootstrap})
            producer.produce("auto-created", value=b"x")
            check(producer.flush(20) == 0, "produced to an auto-created topic")
            partitions = admin.list_topics("auto-created", timeout=10).topics["auto-created"].partitions
            check(len(partitions) == 3, f"num.partitions=3 took effect ({len(partitions)} partitions)")

            resource = ConfigResource(ResourceType.BROKER, "1")
            configs = admin.describe_configs([resource])[resource].result(15)
            STATIC, DEFAULT = 4, 5  # Kafka's ConfigSource numbers

            def source(entry):
                return entry.source if isinstance(entry.source, int) else entry.source.value

            check(configs["num.partitions"].value == "3" and source(configs["num.partitions"]) == STATIC,
                  f"num.partitions is 3, STATIC_BROKER_CONFIG ({configs['num.partitions']})")
            check(configs["log.retention.hours"].value == "24" and source(configs["log.retention.hours"]) == STATIC,
                  "log.retention.hours is 24, STATIC_BROKER_CONFIG")
            check(configs["log.retention.ms"].value is None, "log.retention.ms stays null (not given), as Kafka")
            check(source(configs["auto.create.topics.enable"]) == DEFAULT
                  and configs["auto.create.topics.enable"].value == "true",
                  "an unset setting is DEFAULT_CONFIG with Kafka's default")

            topic = ConfigResource(ResourceType.TOPIC, "auto-created")
            topic_configs = admin.describe_configs([topic])[topic].result(15)
            retention = topic_configs["retention.ms"]
            check(retention.value == str(24 * 3600 * 1000) and source(retention) == STATIC,
                  f"the topic's retention.ms comes from log.retention.hours, STATIC_BROKER_CONFIG ({retention})")
        finally:
            broker.terminate()
            broker.wait(20)

        # A nonsense value: the start fails, naming the setting and why.
        bad = write_properties(tmp, [f"listeners=PLAINTEXT://127.0.0.1:{free_port()}", "num.partitions=many",
                                     f"log.dirs={tmp}/bad"])
        result = subprocess.run([BIN, "serve", "--config", bad], capture_output=True, text=True, timeout=30)
        check(result.returncode != 0, "a nonsense value stops the start")
        check("Invalid value many for configuration num.partitions: Not a number of type INT" in result.stderr,
              f"naming the setting, with Kafka's message ({result.stderr.strip()[-300:]})")
    print("PASS server.properties")


if __name__ == "__main__":
    sys.exit(main())
