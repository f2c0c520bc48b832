"""Runs a command and writes the peak resident memory of its whole process tree.

    python peak_rss.py OUT_FILE TIMEOUT_S CMD [ARGS...]

Samples every 0.25 s the sum of RSS over the command and all its descendants (DLIO's ranks,
DataLoader workers, checkpoint writers), writes the largest sum in MiB to OUT_FILE and exits
with the command's status; a command still running after TIMEOUT_S seconds is killed with
all its descendants (a hung DLIO run must not hang the matrix) and the status is 124. RSS counts shared pages once per process, so shared-memory
buffers mapped by several processes are counted more than once: an upper bound. The sampler
moves itself to CPU 0 (the server's core) after starting the command, so it does not take
time from the client's core that the command was started on."""

import os
import subprocess
import sys
import time

import psutil

out, timeout, cmd = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
deadline = time.monotonic() + timeout
child = subprocess.Popen(cmd)
try:
    os.sched_setaffinity(0, {0})
except OSError:
    pass
root = psutil.Process(child.pid)
peak = 0
while child.poll() is None:
    total = 0
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        procs = []
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    peak = max(peak, total)
    if time.monotonic() > deadline:
        for p in reversed(procs):
            try:
                p.kill()
            except psutil.Error:
                pass
        child.wait()
        print(
            f"peak_rss: killed after {timeout:.0f} s: {' '.join(cmd)[:200]}",
            file=sys.stderr,
        )
        break
    time.sleep(0.25)
with open(out, "w") as f:
    f.write(f"{peak / 2**20:.0f}\n")
sys.exit(124 if time.monotonic() > deadline else child.returncode)
