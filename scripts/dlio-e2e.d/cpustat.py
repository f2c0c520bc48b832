"""Prints, every 0.5 s until the file STOP exists, the busy share of cpu0 (the server's) and
cpu1 (the client's) from /proc/stat: `HH:MM:SS cpu0% cpu1%`. Beside a run, to see which core
bounds it and when (docs/mlperf.md, retinanet_b200 at 3 ranks):

    taskset -c 0 python3 scripts/dlio-e2e.d/cpustat.py /tmp/stop > cpu.txt &
    RANKS=3 scripts/dlio-e2e --scale ci --runs 1 --workloads retinanet_b200 --libraries sluice DLIO_SRC
    touch /tmp/stop"""

import os
import sys
import time


def snap():
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                fields = line.split()
                v = list(map(int, fields[1:]))
                out[fields[0]] = (sum(v), v[3] + v[4])  # total, idle + iowait
    return out


stop = sys.argv[1]
prev = snap()
while not os.path.exists(stop):
    time.sleep(0.5)
    cur = snap()
    row = []
    for c in ("cpu0", "cpu1"):
        total = cur[c][0] - prev[c][0]
        idle = cur[c][1] - prev[c][1]
        row.append(100 * (total - idle) / total if total else 0)
    prev = cur
    print(f"{time.strftime('%H:%M:%S')} {row[0]:5.1f} {row[1]:5.1f}", flush=True)
