"""Small objects through Python, for the per-request row of docs/benchmarks.md (issue #35):
reads every object under `--prefix` with `sluice.get_many` (batches of `--batch` URIs, as a
caller that keeps what it reads would) and with `sluice.Loader` (iterated, each object's
length taken), `--passes` times each at default settings, printing one JSON line per pass:
objects/s, MB/s and CPU-µs per object of this process.

    taskset -c 1 python crates/py/bench/small.py --prefix s3://sluice-test/ds/

The endpoint and keys come from the standard AWS environment."""

import argparse
import json
import time

import sluice

p = argparse.ArgumentParser()
p.add_argument("--prefix", required=True)
p.add_argument("--batch", type=int, default=1000)
p.add_argument("--passes", type=int, default=2)
p.add_argument("--modes", default="get_many,loader", help="comma-separated: get_many, loader")
a = p.parse_args()

ds = sluice.Dataset.from_prefix(a.prefix)
uris = sluice.list(a.prefix, recursive=True)


def timed(mode, read):
    for n in range(a.passes):
        t0, c0 = time.perf_counter(), time.process_time()
        objects, total = read()
        secs, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(
            json.dumps(
                {
                    "mode": mode,
                    "pass": n,
                    "objects": objects,
                    "mb_per_s": total / secs / 1e6,
                    "objects_per_s": objects / secs,
                    "cpu_us_per_object": cpu / objects * 1e6,
                }
            )
        )


def many():
    total = 0
    for i in range(0, len(uris), a.batch):
        total += sum(len(o) for o in sluice.get_many(uris[i : i + a.batch]))
    return len(uris), total


def loader():
    n = total = 0
    for obj in sluice.Loader(ds):
        n += 1
        total += len(obj)
    return n, total


for mode in a.modes.split(","):
    timed(mode, {"get_many": many, "loader": loader}[mode])
