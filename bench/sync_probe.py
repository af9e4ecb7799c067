#!/usr/bin/env python3
"""What a flush-before-ack append costs on this disk, by sync strategy.

W2 (acks=all with an fdatasync before every acknowledgement) is bound by the disk's sync
latency. This probe measures the strategies a broker could use, on the same directory
the benchmark uses, with N writer threads each appending 16 KiB batches (one W2 batch of
`strand bench`) to its own file, as N partitions would:

  fdatasync        each writer syncs its own file after each append (what Strand does;
                   concurrent syncs on ext4/XFS share journal commits)
  syncfs           each writer syncs the whole filesystem instead
  rounds-syncfs    writers queue; one leader syncs the filesystem for everyone queued
                   (a data-directory-wide group commit) -- tried for W2 at fb7f958
  fallocate        fdatasync into a file preallocated with fallocate (unwritten extents)
  prezeroed        fdatasync into a file whose blocks were written (zeros) beforehand, so
                   an append changes no file size or extent (PostgreSQL's WAL recycling)

    python3 bench/sync_probe.py [--dir DIR] [--writers 5] [--batches 2000]

Prints microseconds of wall time per batch (lower is better), MB/s, and p50 of one sync.
"""
import argparse
import ctypes
import os
import statistics
import tempfile
import threading
import time

BATCH = b"x" * 16384
libc = ctypes.CDLL(None, use_errno=True)


def syncfs(fd: int) -> None:
    if libc.syncfs(fd) != 0:
        raise OSError(ctypes.get_errno(), "syncfs")


class Rounds:
    """One leader at a time syncs the filesystem for every writer queued before it."""

    def __init__(self):
        self.cond = threading.Condition()
        self.started = self.completed = 0
        self.in_progress = False

    def sync(self, fd: int) -> None:
        with self.cond:
            target = self.started + 1
            while self.completed < target:
                if self.in_progress:
                    self.cond.wait()
                    continue
                self.in_progress = True
                self.started += 1
                self.cond.release()
                try:
                    syncfs(fd)
                finally:
                    self.cond.acquire()
                    self.in_progress = False
                    self.completed += 1
                    self.cond.notify_all()


def run(directory: str, name: str, writers: int, batches: int) -> None:
    paths = [os.path.join(directory, f"probe-{name}-{i}") for i in range(writers)]
    fds = [os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644) for p in paths]
    size = len(BATCH) * batches
    if name == "fallocate":
        for fd in fds:
            os.posix_fallocate(fd, 0, size)
    if name == "prezeroed":
        for fd in fds:
            os.write(fd, b"\0" * size)
            os.fsync(fd)
            os.lseek(fd, 0, os.SEEK_SET)
    rounds = Rounds()
    sync = {"syncfs": syncfs, "rounds-syncfs": rounds.sync}.get(name, os.fdatasync)
    latencies: list[float] = []

    def writer(fd: int) -> None:
        mine = []
        for _ in range(batches):
            os.write(fd, BATCH)
            started = time.perf_counter()
            sync(fd)
            mine.append(time.perf_counter() - started)
        latencies.extend(mine)

    started = time.perf_counter()
    threads = [threading.Thread(target=writer, args=(fd,)) for fd in fds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    for fd, path in zip(fds, paths):
        os.close(fd)
        os.unlink(path)
    total = writers * batches
    print(f"{name:14s} {elapsed / total * 1e6:7.1f} us/batch {total * len(BATCH) / elapsed / 1e6:6.0f} MB/s"
          f"   sync p50 {statistics.median(latencies) * 1e6:5.0f} us")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="a directory on the disk to probe")
    ap.add_argument("--writers", type=int, default=5, help="concurrent appenders (partitions)")
    ap.add_argument("--batches", type=int, default=2000, help="16 KiB batches per writer")
    args = ap.parse_args()
    print(f"{args.writers} writers x {args.batches} batches of 16 KiB in {args.dir}")
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        for name in ["fdatasync", "syncfs", "rounds-syncfs", "fallocate", "prezeroed"]:
            run(directory, name, args.writers, args.batches)


if __name__ == "__main__":
    main()
