"""`strand serve` on free ports, for the drivers that use its HTTP listener (metrics,
console): its Kafka and HTTP addresses read from its first lines."""
import os
import re
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.abspath(os.environ.get("STRAND_BIN", os.path.join(HERE, "../../target/release/strand")))


class HttpBroker:
    """Started with `extra` serve arguments; `fail(message)` is called (after the broker
    is killed) when it does not start within 30 s."""

    def __init__(self, root, *extra, fail):
        os.makedirs(root, exist_ok=True)
        self.log_path = os.path.join(root, "broker.log")
        self.stderr_path = os.path.join(root, "broker.err")
        self.process = subprocess.Popen(
            [BIN, "serve", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
             "--data-dir", os.path.join(root, "data"), *extra],
            stdout=open(self.log_path, "w"), stderr=open(self.stderr_path, "w"))
        deadline = time.time() + 30
        self.kafka = self.http = None
        while self.http is None:
            text = open(self.log_path).read()
            kafka = re.search(r"listening on (127\.0\.0\.1:\d+)", text)
            http = re.search(r"serving HTTP on (127\.0\.0\.1:\d+)", text)
            if kafka and http:
                self.kafka, self.http = kafka.group(1), http.group(1)
            elif time.time() > deadline or self.process.poll() is not None:
                self.process.kill()
                fail(f"the broker did not start: {text} {open(self.stderr_path).read()}")
            time.sleep(0.1)
