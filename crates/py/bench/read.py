"""One client process for scripts/measure-get: reads every object under URI `--epochs`
times through sluice.Loader (`--mode loader`) or the s3dlio-compatible loop DLIO runs
(`--mode compat`), printing one JSON line per pass as `sluice get --json` does."""

import argparse
import json
import os
import time

p = argparse.ArgumentParser()
p.add_argument("uri")
p.add_argument("--mode", choices=["loader", "compat"], required=True)
p.add_argument("--endpoint", required=True)
p.add_argument("--ca-bundle")
p.add_argument("--prefetch", type=int, default=16)
p.add_argument("--epochs", type=int, default=2)
a = p.parse_args()

# The compat module, like s3dlio, takes its endpoint from the environment.
os.environ["AWS_ENDPOINT_URL_S3"] = a.endpoint
if a.ca_bundle:
    os.environ["AWS_CA_BUNDLE"] = a.ca_bundle

import sluice  # noqa: E402
from sluice.compat import s3dlio  # noqa: E402

ds = sluice.Dataset.from_prefix(a.uri)
for epoch in range(a.epochs):
    t0, c0 = time.perf_counter(), time.process_time()
    total = 0
    if a.mode == "loader":
        for obj in sluice.Loader(ds, prefetch=a.prefetch):
            total += len(obj)
    else:
        it = s3dlio.PyBytesAsyncDataLoader(s3dlio.PyDataset.from_uris(ds.uris), {"prefetch": a.prefetch}).items()
        while batch := it.collect_batch(7):
            total += sum(len(b) for b in batch)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"epoch": epoch, "bytes": total, "seconds": wall,
                      "mb_per_s": total / 1e6 / wall, "cpu_s_per_gb": cpu / (total / 1e9)}))
