"""Brokers for the consumer-group interop tests, each on a free loopback port in its own
temp dir: Strand (STRAND_BIN, default target/release/strand) with a group-test config
(group_initial_rebalance_delay_ms = 0, group_min_session_timeout_ms = 1000), or, for
comparing behaviour, Apache Kafka (4.4.0, or the release STRAND_KAFKA_VERSION names)
through interop/kafka/run-kafka.sh with the same two settings. Optionally the KIP-848 session timeout and heartbeat interval
(consumer_session_timeout_ms, consumer_heartbeat_interval_ms): Strand's
group_consumer_session_timeout_ms / group_consumer_heartbeat_interval_ms, Kafka's
group.consumer.session.timeout.ms / group.consumer.heartbeat.interval.ms (with the
group.consumer.min.* bounds lowered to allow them). Every broker started here is killed when the Python process exits, however
it exits (atexit, SIGTERM and SIGINT handlers).

As a command, runs a program against a fresh broker and stops the broker afterwards:

    python3 interop/python/group_brokers.py [--kafka] [--timeout S] -- CMD [ARGS...]

CMD gets STRAND_BOOTSTRAP=127.0.0.1:PORT. Exits with CMD's status, or 1 if the broker did
not stop cleanly (SIGTERM -> exit 0 for Strand) or its log has a panic.
"""
import argparse
import atexit
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("STRAND_BIN", os.path.join(ROOT, "target", "release", "strand"))
RUN_KAFKA = os.path.join(ROOT, "interop", "kafka", "run-kafka.sh")
KAFKA_CLI = os.path.join(ROOT, "interop", "kafka", "kafka-cli.sh")

_live = []  # Popen objects of brokers still running
_groups = []  # Popen objects of child process groups (killed whole)


def _kill_all():
    for process in list(_groups):
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:
                pass
    for process in list(_live):
        if process.poll() is None:
            try:
                process.kill()
                process.wait(10)
            except Exception:
                pass


def _on_signal(signum, _frame):
    _kill_all()
    sys.exit(128 + signum)


atexit.register(_kill_all)
signal.signal(signal.SIGTERM, _on_signal)
signal.signal(signal.SIGINT, _on_signal)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _wait_listening(port, process, seconds, log_path):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"broker exited with {process.returncode} while starting; log {log_path}:\n"
                               + _tail(log_path))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"broker did not listen on {port} within {seconds}s; log {log_path}:\n" + _tail(log_path))


def _tail(path, lines=40):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


class StrandBroker:
    kind = "strand"

    def __init__(self, workdir, initial_rebalance_delay_ms=0, min_session_timeout_ms=1000,
                 consumer_session_timeout_ms=None, consumer_heartbeat_interval_ms=None):
        self.workdir = workdir
        self.data_dir = os.path.join(workdir, "data")
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.config = os.path.join(workdir, "strand.toml")
        with open(self.config, "w") as f:
            f.write(f"group_initial_rebalance_delay_ms = {initial_rebalance_delay_ms}\n"
                    f"group_min_session_timeout_ms = {min_session_timeout_ms}\n")
            if consumer_session_timeout_ms is not None:
                f.write(f"group_consumer_session_timeout_ms = {consumer_session_timeout_ms}\n")
            if consumer_heartbeat_interval_ms is not None:
                f.write(f"group_consumer_heartbeat_interval_ms = {consumer_heartbeat_interval_ms}\n")
        self.process = None
        self.logs = []

    def start(self):
        self.log_path = os.path.join(self.workdir, f"broker-{len(self.logs)}.log")
        self.logs.append(self.log_path)
        log = open(self.log_path, "w")
        self.process = subprocess.Popen([BIN, "serve", "--listen", self.bootstrap, "--data-dir", self.data_dir,
                                         "--config", self.config], stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
        log.close()
        _live.append(self.process)
        _wait_listening(self.port, self.process, 30, self.log_path)

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Sends sig and waits; returns the exit code (None if it had to be killed)."""
        process, self.process = self.process, None
        if process is None:
            return None
        process.send_signal(sig)
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
            code = None
        _live.remove(process)
        return code

    def clean_stop_code(self):
        """The exit code a clean SIGTERM shutdown gives."""
        return 0

    def panics(self):
        return [p for p in self.logs if "panicked" in open(p, errors="replace").read()]


class KafkaBroker:
    """Apache Kafka 4.4.0 (or STRAND_KAFKA_VERSION; KRaft, combined mode) through
    interop/kafka/run-kafka.sh."""
    kind = "kafka"

    def __init__(self, workdir, initial_rebalance_delay_ms=0, min_session_timeout_ms=1000,
                 consumer_session_timeout_ms=None, consumer_heartbeat_interval_ms=None):
        self.workdir = workdir
        self.data_dir = os.path.join(workdir, "kafka")
        while True:
            port = free_port()
            if port + 1000 <= 65535 and _port_free(port + 1000):
                break
        self.port = port
        self.bootstrap = f"127.0.0.1:{port}"
        self.settings = [f"group.initial.rebalance.delay.ms={initial_rebalance_delay_ms}",
                         f"group.min.session.timeout.ms={min_session_timeout_ms}"]
        # Kafka's defaults (45000 / 5000) are also the lower bounds: lower those with them.
        if consumer_session_timeout_ms is not None:
            self.settings += [f"group.consumer.session.timeout.ms={consumer_session_timeout_ms}",
                              f"group.consumer.min.session.timeout.ms={min(consumer_session_timeout_ms, 45000)}"]
        if consumer_heartbeat_interval_ms is not None:
            self.settings += [f"group.consumer.heartbeat.interval.ms={consumer_heartbeat_interval_ms}",
                              f"group.consumer.min.heartbeat.interval.ms={min(consumer_heartbeat_interval_ms, 5000)}"]
        self.process = None
        self.logs = []

    def start(self):
        self.log_path = os.path.join(self.workdir, f"kafka-{len(self.logs)}.out")
        self.logs.append(self.log_path)
        log = open(self.log_path, "w")
        self.process = subprocess.Popen([RUN_KAFKA, self.data_dir, str(self.port)] + self.settings,
                                        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        _live.append(self.process)
        _wait_listening(self.port, self.process, 120, self.log_path)
        # The port opens a little before the broker has joined its own quorum.
        deadline = time.time() + 60
        while time.time() < deadline and "Kafka Server started" not in open(self.log_path).read():
            time.sleep(0.1)

    def stop(self, sig=signal.SIGTERM, timeout=60):
        process, self.process = self.process, None
        if process is None:
            return None
        process.send_signal(sig)
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
            code = None
        _live.remove(process)
        return code

    def clean_stop_code(self):
        return 143  # the JVM's exit status after a SIGTERM handled by its shutdown hooks

    def panics(self):
        return []


def make_broker(kind, workdir, **kwargs):
    return (KafkaBroker if kind == "kafka" else StrandBroker)(workdir, **kwargs)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kafka", action="store_true", help="run Apache Kafka (4.4.0, or STRAND_KAFKA_VERSION) instead of Strand")
    parser.add_argument("--timeout", type=float, default=600, help="seconds CMD may run (default 600)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    with tempfile.TemporaryDirectory(prefix="strand-groups-") as workdir:
        broker = make_broker("kafka" if args.kafka else "strand", workdir)
        broker.start()
        print(f"=== {broker.kind} broker on {broker.bootstrap}", flush=True)
        env = dict(os.environ, STRAND_BOOTSTRAP=broker.bootstrap)
        started = time.time()
        child = subprocess.Popen(command, env=env, start_new_session=True)
        _groups.append(child)
        try:
            status = child.wait(args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            print(f"FAIL: {' '.join(command)} did not finish within {args.timeout:.0f}s", flush=True)
            status = 1
        elapsed = time.time() - started
        code = broker.stop()
        if code != broker.clean_stop_code():
            print(f"FAIL: broker exit status after SIGTERM was {code}; log:\n{_tail(broker.log_path)}", flush=True)
            status = status or 1
        for path in broker.panics():
            print(f"FAIL: broker panicked; log {path}:\n{_tail(path)}", flush=True)
            status = status or 1
        if status != 0:
            print(f"--- broker log tail ({broker.log_path}):\n{_tail(broker.log_path)}", flush=True)
        print(f"=== {' '.join(command)}: status {status}, {elapsed:.1f}s", flush=True)
    sys.exit(status)


if __name__ == "__main__":
    main()
