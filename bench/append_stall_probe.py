#!/usr/bin/env python3
"""How often a page-cache append stalls on this disk, with and without reserved blocks.

W3 (acks=1 at a fixed rate) has a latency tail that the broker's own CPU does not
explain: now and then a `pwrite` of one batch to the page cache takes milliseconds. On
ext4 an appended file's blocks are allocated when writeback flushes them (delayed
allocation); that allocation holds the inode's block-map lock and waits on the journal,
and an append arriving meanwhile waits too. Blocks reserved ahead of the end with
`fallocate(FALLOC_FL_KEEP_SIZE)` are already allocated, so writeback has nothing to
allocate. This probe appends 16,589-byte batches (one `strand bench` batch of 16 1 KiB
records) round-robin to 6 files at a fixed rate (118 MB/s: W3's rate), as 6 partitions
would, and times each `pwrite`:

  plain       append to a growing file (Strand before 52e8578, Kafka)
  whole       the whole file reserved up front (1 GiB each)
  ahead       reserve as far ahead as the file holds, at most 4 MiB, when an append
              would pass the reservation (Strand's crates/log/src/preallocation.rs)

    python3 bench/append_stall_probe.py [--dir DIR] [--seconds 35] [--rounds 2]

Prints p50/p99/p99.9/max microseconds of one append and how many took over 1 ms.
Strategies alternate, each round on fresh files. Needs a few GB free in DIR.
"""
import argparse
import ctypes
import os
import shutil
import tempfile
import time

BATCH = os.urandom(16589)
FILES = 6
RATE = 7140  # batches per second: ~118 MB/s
KEEP_SIZE = 1  # FALLOC_FL_KEEP_SIZE
AHEAD_MAX = 4 << 20
libc = ctypes.CDLL(None, use_errno=True)


def reserve(fd: int, offset: int, length: int) -> None:
    if libc.fallocate(fd, KEEP_SIZE, ctypes.c_long(offset), ctypes.c_long(length)) != 0:
        raise OSError(ctypes.get_errno(), "fallocate")


def run(strategy: str, directory: str, seconds: float) -> list[int]:
    fds = []
    for i in range(FILES):
        fd = os.open(os.path.join(directory, f"{strategy}-{i}.log"),
                     os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o644)
        if strategy == "whole":
            reserve(fd, 0, 1 << 30)
        fds.append(fd)
    ends, reserved, latencies = [0] * FILES, [0] * FILES, []
    start = time.perf_counter()
    n = 0
    while time.perf_counter() - start < seconds:
        wait = start + n / RATE - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        i = n % FILES
        began = time.perf_counter_ns()
        end = ends[i] + len(BATCH)
        if strategy == "ahead" and end > reserved[i]:
            reserved[i] = end + min(end, AHEAD_MAX)
            reserve(fds[i], ends[i], reserved[i] - ends[i])
        os.pwrite(fds[i], BATCH, ends[i])
        latencies.append(time.perf_counter_ns() - began)
        ends[i] = end
        n += 1
    for fd in fds:
        os.close(fd)
    return latencies


def report(strategy: str, latencies: list[int]) -> None:
    ordered = sorted(latencies)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(len(ordered) * q))] / 1000

    slow = sum(1 for x in ordered if x > 1_000_000)
    print(f"{strategy:6} appends {len(ordered):7}  p50 {at(0.5):5.0f} us  p99 {at(0.99):5.0f} us  "
          f"p99.9 {at(0.999):6.0f} us  max {ordered[-1] / 1000:7.0f} us  over 1 ms: {slow}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", help="directory on the disk to probe (default: a temporary one)")
    ap.add_argument("--seconds", type=float, default=35)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    for round_ in range(args.rounds):
        for strategy in ["plain", "ahead", "whole"]:
            directory = tempfile.mkdtemp(prefix="append-stall-", dir=args.dir)
            try:
                report(strategy, run(strategy, directory, args.seconds))
            finally:
                shutil.rmtree(directory)


if __name__ == "__main__":
    main()
