"""DLIO f6796ed's s3dlio sliding-window loop (npz_reader_s3_iterable via _s3_iterable_mixin) in
W fresh spawned workers per pass, as DLIO's non-persistent DataLoader workers: each worker
reads its shard once with PyBytesAsyncDataLoader({"prefetch": 4, "skip_head": False}) and
collect_batch(7), holding each batch until the next. Prints per pass: seconds, MiB/s, and
each worker's VmHWM (MiB). A probe of one loop's memory and speed, quicker than a DLIO run:

    taskset -c 0 sluice serve --no-https --addr 127.0.0.1:9077 --bucket dlio-bench \
        --synthetic 'unet3d_b200/train/img_{i}_of_{n}.npz:7200x146600628±68341808' &
    AWS_ENDPOINT_URL=http://127.0.0.1:9077 AWS_ACCESS_KEY_ID=sluice-test-access \
    AWS_SECRET_ACCESS_KEY=sluice-test-secret AWS_REGION=us-east-1 taskset -c 1 \
        python -m sluice.compat.alias scripts/dlio-e2e.d/unet_probe.py 4 84 3

(the real s3dlio: the same without `-m sluice.compat.alias`, its wheel on PYTHONPATH)."""

import multiprocessing as mp
import os
import sys
import time


def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) // 1024


def worker(idx, uris, q):
    import s3dlio

    ds = s3dlio.PyDataset.from_uris(uris)
    it = s3dlio.PyBytesAsyncDataLoader(ds, {"prefetch": 4, "skip_head": False}).items()
    n = 0
    while batch := it.collect_batch(7):
        n += sum(len(b) for b in batch)
    q.put((idx, n, hwm()))


if __name__ == "__main__":
    w, files, passes = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    import s3dlio

    prefix = os.environ.get("PREFIX", "s3://dlio-bench/unet3d_b200/train/")
    keys = sorted(s3dlio.list(prefix, recursive=True))[:files]
    keys = [k if k.startswith("s3://") else prefix + k for k in keys]
    ctx = mp.get_context("spawn")
    for p in range(passes):
        q = ctx.Queue()
        t = time.perf_counter()
        ps = [ctx.Process(target=worker, args=(i, keys[i::w], q)) for i in range(w)]
        for pr in ps:
            pr.start()
        res = sorted(q.get() for _ in ps)
        for pr in ps:
            pr.join()
        s = time.perf_counter() - t
        n = sum(r[1] for r in res)
        print(
            f"pass {p}: {s:.2f}s {n / s / 2**20:.0f}MiB/s hwm_mib "
            + " ".join(str(r[2]) for r in res),
            flush=True,
        )
