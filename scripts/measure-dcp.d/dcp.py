"""A sharded torch.distributed.checkpoint saved once and loaded by each reader; used by
scripts/measure-dcp.

    python dcp.py save URI FILES FILE_MB      FILES shards of FILE_MB, 32 MiB tensors
    python dcp.py load READER URI SHARE       load SHARE (1.0 or 0.1) of the tensors twice in
                                              one process: prints "first_s warm_s bytes"

Readers: sluice (sluice.torch.dcp.StorageReader), s3tc (s3torchconnector's S3StorageReader,
its default reader: DCPOptimizedS3Reader in 1.5.0), s3tc-sequential (S3StorageReader with
S3ReaderConstructor.sequential(), its plain reader). Credentials and endpoint from the
environment (AWS_ENDPOINT_URL_S3).
"""

import os
import sys
import time

import torch
import torch.distributed.checkpoint as dcp

TENSOR = 32 << 20  # bytes


def state(files, file_mb):
    n = files * (file_mb << 20) // TENSOR
    return {f"layer{i:03}": torch.zeros(TENSOR // 4) for i in range(n)}


def reader(kind, uri):
    if kind == "sluice":
        from sluice.torch.dcp import StorageReader

        return StorageReader(uri)
    from s3torchconnector import S3ClientConfig, S3ReaderConstructor
    from s3torchconnector._s3client import S3Client
    from s3torchconnector.dcp import S3StorageReader

    cfg = S3ClientConfig(force_path_style=True)
    opts = dict(region="us-east-1", path=uri, s3client_config=cfg)
    if kind == "s3tc-sequential":
        opts["reader_constructor"] = S3ReaderConstructor.sequential()
    r = S3StorageReader(**opts)
    # S3StorageReader takes no endpoint: its file system's client is replaced by one that
    # has it (the same constructor, with `endpoint`).
    r.fs._client = S3Client(region="us-east-1", endpoint=os.environ["AWS_ENDPOINT_URL_S3"],
                            s3client_config=cfg)
    return r


def main():
    if sys.argv[1] == "save":
        from sluice.torch.dcp import StorageWriter

        uri, files, file_mb = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        s = state(files, file_mb)
        for i, t in enumerate(s.values()):
            t.fill_(float(i))
        dcp.save(s, storage_writer=StorageWriter(uri, thread_count=files))
        return
    kind, uri, share = sys.argv[2], sys.argv[3], float(sys.argv[4])
    keys = sorted(_keys(uri))
    chosen = keys[:: max(1, round(1 / share))]
    times = []
    for _ in range(2):
        target = {k: torch.empty(TENSOR // 4) for k in chosen}
        t = time.perf_counter()
        dcp.load(target, storage_reader=reader(kind, uri))
        times.append(time.perf_counter() - t)
        for k in chosen:
            assert float(target[k][-1]) == float(int(k[5:])), f"{kind}: {k} came back wrong"
    print(f"{times[0]:.3f} {times[1]:.3f} {len(chosen) * TENSOR}")


def _keys(uri):
    from sluice.torch.dcp import StorageReader

    return list(StorageReader(uri).read_metadata().state_dict_metadata)


if __name__ == "__main__":
    main()
