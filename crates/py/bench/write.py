"""Uploads and checkpoints through Python, for the write rows of docs/benchmarks.md (issue
#35). One JSON line per object or checkpoint: bytes, seconds and this process's CPU-seconds
(all its threads, Rust's included) of the timed part only; building the data is not timed.

    put         sluice.put(URI, bytes) of each --files file, read into memory first
    writer      sluice.open(URI, "wb").write() of each file's bytes in --chunk pieces
    torch-save  sluice.torch.save(state, --uri) of a state dict of --gib GiB
    torch-load  sluice.torch.load(--uri), checked against the state torch-save writes
    make-ckpt   torch.save(state, --path): the same state as a local file (setup, untimed)

    taskset -c 1 python crates/py/bench/write.py put --files LIST --dest s3://b/put/

The endpoint and keys come from the standard AWS environment."""

import argparse
import json
import os
import time

import sluice

p = argparse.ArgumentParser()
p.add_argument("mode", choices=["put", "writer", "torch-save", "torch-load", "make-ckpt"])
p.add_argument("--files", help="a file listing local paths, one per line (put, writer)")
p.add_argument("--dest", help="an s3:// prefix ending in / the files are written under")
p.add_argument("--chunk", type=int, default=1 << 20, help="bytes per write() for writer")
p.add_argument("--uri", help="the checkpoint's object (torch-save, torch-load)")
p.add_argument("--path", help="the checkpoint's local file (make-ckpt)")
p.add_argument("--gib", type=float, default=2.0, help="size of the checkpoint's state dict")
p.add_argument("--no-crc32", action="store_true", help="torch-save: without the records' CRC-32")
a = p.parse_args()

TENSOR = 32 << 20  # bytes per tensor: a state dict of many layers, as a model's is


def report(mode, nbytes, secs, cpu):
    print(json.dumps({"mode": mode, "bytes": nbytes, "seconds": secs, "cpu_seconds": cpu}))


def timed(mode, nbytes, work):
    t0, c0 = time.perf_counter(), time.process_time()
    out = work()
    report(mode, nbytes, time.perf_counter() - t0, time.process_time() - c0)
    return out


def state_dict():
    import torch

    n = max(1, int(a.gib * (1 << 30)) // TENSOR)
    return {f"layer{i}.weight": torch.full((TENSOR // 4,), float(i)) for i in range(n)}


def write_file(uri, data):
    view = memoryview(data)
    with sluice.open(uri, "wb") as f:
        for i in range(0, len(view), a.chunk):
            f.write(view[i : i + a.chunk])


if a.mode in ("put", "writer"):
    paths = [line.strip() for line in open(a.files) if line.strip()]
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        uri = a.dest + os.path.basename(path)
        if a.mode == "put":
            timed(a.mode, len(data), lambda: sluice.put(uri, data))
        else:
            timed(a.mode, len(data), lambda: write_file(uri, data))
elif a.mode == "make-ckpt":
    import torch

    torch.save(state_dict(), a.path)
elif a.mode == "torch-save":
    import sluice.torch

    state = state_dict()
    nbytes = sum(t.numel() * t.element_size() for t in state.values())
    timed(a.mode, nbytes, lambda: sluice.torch.save(state, a.uri, crc32=not a.no_crc32))
else:
    import sluice.torch

    size = sluice.stat(a.uri)["size"]
    state = timed(a.mode, size, lambda: sluice.torch.load(a.uri))
    want = state_dict()
    assert state.keys() == want.keys(), "the loaded checkpoint has other tensors"
    for k, t in want.items():
        assert state[k].equal(t), f"{k} differs from what was saved"
