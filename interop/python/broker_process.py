"""A Strand broker run as a process from a server.properties, for the drivers that test
configuration as Kafka writes it (security, ACLs)."""
import contextlib
import os
import socket
import subprocess
import time

from dataset import check, fail

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("STRAND_BIN", os.path.join(HERE, "../../target/release/strand"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def broker_from(properties, d):
    """Runs `strand serve --config properties` until the block ends, then checks that it
    stopped cleanly and never panicked."""
    log_path = os.path.join(d, "broker.log")
    with open(log_path, "w") as log:
        broker = subprocess.Popen([BIN, "serve", "--config", properties], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 30
        while "listening on" not in open(log_path).read():
            if time.time() > deadline or broker.poll() is not None:
                fail(f"the broker did not start: {open(log_path).read()[-2000:]}")
            time.sleep(0.2)
        yield broker
    finally:
        broker.terminate()
        code = broker.wait(30)
    check(code == 0, f"the broker stopped cleanly ({code})")
    check("panicked" not in open(log_path).read(), "no panic in the broker log")


def one_node_properties(d, ports, settings, protocols=None):
    """Writes a server.properties for one node that is its own metadata quorum (so what
    the controller decides goes through the metadata log), serving `ports` (listener name
    -> port; a name is its protocol unless `protocols` maps it to one) with PLAINTEXT as
    the inter-broker listener, followed by `settings`; returns its path."""
    controller = free_port()
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    protocols = ",".join(f"{name}:{(protocols or {}).get(name, name)}" for name in ports)
    path = os.path.join(d, "server.properties")
    with open(path, "w") as f:
        f.write("\n".join([
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller}",
            f"listeners={listeners},CONTROLLER://127.0.0.1:{controller}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            f"listener.security.protocol.map=CONTROLLER:PLAINTEXT,{protocols}",
            f"log.dirs={d}/logs",
            "offsets.topic.replication.factor=1",
            *settings,
        ]) + "\n")
    return path
