"""A Java interop app run by a cluster test as a child process.

The app (interop/java/streams-eos-cluster.sh, interop/java/streams-groups-failover.sh)
prints "progress: k=v ..." every second, "ready: k=v ..." once it runs, an answer line per
command it reads on stdin, "ok: ..."/"FAIL: ..." per check and "PASS..." at the end of
"stop". A thread reads its stdout: the latest progress and the answers are kept, every line
is logged but the answers (the test logs what it uses) and progress more often than every
5 s. Its stderr (the client log) is <root>/java.log. It runs in a session of its own, so
stop() kills the script, timeout and the JVM together.
"""

import os
import signal
import subprocess
import threading
import time

from cluster import fail, log


class JavaApp:
    ANSWERS = ()  # prefixes of the lines that answer a command
    QUIET = ()    # prefixes of the lines not logged

    def __init__(self, command, root, **env):
        self.lines = []
        self.progress = {}
        self.answers = []
        self.ready = None
        self.cond = threading.Condition()
        self.shown_progress = 0.0
        self.stderr = open(os.path.join(root, "java.log"), "w")
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True,
            env=dict(os.environ, **env), start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    @staticmethod
    def _fields(line, prefix):
        return dict(kv.split("=", 1) for kv in line[len(prefix):].split())

    def _read(self):
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            with self.cond:
                self.lines.append(line)
                if line.startswith("progress: "):
                    self.progress = self._fields(line, "progress: ")
                elif line.startswith(self.ANSWERS):
                    self.answers.append(line)
                elif line.startswith("ready: "):
                    self.ready = self._fields(line, "ready: ")
                self.cond.notify_all()
            if line.startswith(self.QUIET):
                continue
            if line.startswith("progress: "):
                if time.time() - self.shown_progress < 5:
                    continue
                self.shown_progress = time.time()
            log(f"  app: {line}")

    def alive(self):
        return self.proc.poll() is None

    def require_alive(self, what):
        if not self.alive():
            self.reader.join(10)
            fails = [line for line in self.lines if line.startswith("FAIL")]
            fail(f"{what}: the app exited {self.proc.returncode}"
                 + (f" ({fails[0]})" if fails else ""))

    def updates(self):
        """The committed count updates the app's read_committed reader has seen."""
        with self.cond:
            return int(self.progress.get("updates", 0))

    def send(self, command):
        try:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.require_alive(f"command {command}")

    def ask(self, command, deadline):
        """Sends a command; its answer line, or None if none came before the deadline."""
        with self.cond:
            seen = len(self.answers)
        self.send(command)
        with self.cond:
            while len(self.answers) == seen and self.alive() and time.time() < deadline:
                self.cond.wait(1)
            answer = self.answers[seen] if len(self.answers) > seen else None
        self.require_alive(command)
        return answer

    def diagnose(self):
        """Prints what may explain a stall (before wait_updates fails)."""

    def wait_updates(self, target, timeout, what):
        deadline = time.time() + timeout
        while self.updates() < target:
            self.require_alive(what)
            if time.time() > deadline:
                with self.cond:
                    progress = dict(self.progress)
                self.diagnose()
                fail(f"{what}: {self.updates()} committed count updates read, not {target}, "
                     f"within {timeout} s (progress {progress})")
            time.sleep(0.2)

    def finish(self, timeout):
        """Stops the input ("stop"): the app runs its final checks and must pass them."""
        log("stopping the input; the app's final checks")
        self.send("stop")
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            fail(f"the app did not finish within {timeout} s of stop")
        self.reader.join(10)
        if code != 0 or not any(line.startswith("PASS") for line in self.lines):
            fails = [line for line in self.lines if line.startswith("FAIL")]
            fail(f"the app exited {code}: {fails[0] if fails else 'no PASS line'}; "
                 f"client log {self.stderr.name}")

    def rebalances(self, prefix):
        """REBALANCING transitions after the first RUNNING, in the state-change lines
        (those starting with prefix)."""
        states = [line for line in self.lines if line.startswith(prefix)]
        first = next((k for k, line in enumerate(states) if line.endswith("-> RUNNING")), len(states))
        return sum(1 for line in states[first:] if line.endswith("-> REBALANCING"))

    def client_log(self):
        with open(self.stderr.name, errors="replace") as f:
            return f.read()

    def stop(self):
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        self.stderr.close()
