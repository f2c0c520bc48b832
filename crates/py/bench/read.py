"""One client process for scripts/measure-get: reads the objects listed in `--uris` (this
rank's shard of them: every `--world`-th from `--rank`) `--epochs` times, each epoch with a new
loader, through sluice.Loader (`--mode loader`), the s3dlio-compatible loop DLIO runs
(`--mode compat`, `while batch := collect_batch(7)`), s3dlio itself with that loop
(`--mode s3dlio`), NVIDIA's multi-storage-client with its Rust client (`--mode msc`:
`StorageClient.read` of each object, `--prefetch` threads), obstore (`--mode obstore`:
`get_async` of each object, `--prefetch` at once on one event loop) or s3torchconnector's
CRT client (`--mode s3tc`: `S3MapDataset` items read on `--prefetch` threads), printing one
JSON line per pass as `sluice get --json` does."""

import argparse
import json
import os
import sys
import time

p = argparse.ArgumentParser()
p.add_argument(
    "--mode", choices=["loader", "compat", "s3dlio", "msc", "obstore", "s3tc"], required=True
)
p.add_argument("--uris", required=True, help="a file of object URIs, one per line")
p.add_argument("--endpoint", required=True)
p.add_argument("--ca-bundle")
p.add_argument(
    "--prefetch",
    type=lambda v: None if v == "auto" else int(v),
    default=16,
    help='objects in flight, or "auto": the loader follows its client\'s controller',
)
p.add_argument(
    "--memory-budget",
    type=lambda v: None if v == "none" else int(v) << 20,
    default=-1,
    help="sluice.Loader's memory_budget in MiB, or \"none\" (default: the loader's)",
)
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--rank", type=int, default=0)
p.add_argument("--world", type=int, default=1)
a = p.parse_args()

# The compat module, like s3dlio, takes its endpoint from the environment.
os.environ["AWS_ENDPOINT_URL_S3"] = os.environ["AWS_ENDPOINT_URL"] = a.endpoint
if a.ca_bundle:
    os.environ["AWS_CA_BUNDLE"] = a.ca_bundle
uris = [u.strip() for u in open(a.uris) if u.strip()][a.rank :: a.world]

if a.mode == "s3dlio":
    import s3dlio
elif a.mode == "msc":
    from concurrent.futures import ThreadPoolExecutor

    from multistorageclient import StorageClient, StorageClientConfig

    bucket = uris[0].split("/")[2]
    msc = StorageClient(
        StorageClientConfig.from_dict(
            {
                "profiles": {
                    "bench": {
                        "storage_provider": {
                            "type": "s3",
                            "options": {
                                "base_path": bucket,
                                "endpoint_url": a.endpoint,
                                "region_name": os.environ.get("AWS_REGION", "us-east-1"),
                                "rust_client": {"allow_http": True},
                            },
                        },
                        "credentials_provider": {
                            "type": "S3Credentials",
                            "options": {
                                "access_key": os.environ["AWS_ACCESS_KEY_ID"],
                                "secret_key": os.environ["AWS_SECRET_ACCESS_KEY"],
                            },
                        },
                    }
                }
            },
            profile="bench",
        )
    )
    keys = [u.split("/", 3)[3] for u in uris]
elif a.mode == "obstore":
    import asyncio

    import obstore
    from obstore.store import S3Store

    ob = S3Store(
        uris[0].split("/")[2],
        endpoint=a.endpoint,
        region=os.environ.get("AWS_REGION", "us-east-1"),
        access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        client_options={"allow_http": True},
    )
    keys = [u.split("/", 3)[3] for u in uris]

    async def read_all(at_once: int) -> int:
        gate = asyncio.Semaphore(at_once)

        async def one(key: str) -> int:
            async with gate:
                got = await obstore.get_async(ob, key)
                return len(await got.bytes_async())

        return sum(await asyncio.gather(*(one(k) for k in keys)))
elif a.mode == "s3tc":
    from concurrent.futures import ThreadPoolExecutor

    from s3torchconnector import S3ClientConfig, S3MapDataset

    s3tc = S3MapDataset.from_objects(
        uris,
        region=os.environ.get("AWS_REGION", "us-east-1"),
        endpoint=a.endpoint,
        s3client_config=S3ClientConfig(force_path_style=True),
    )
else:
    import sluice
    from sluice.compat import s3dlio

for epoch in range(a.epochs):
    t0, c0 = time.perf_counter(), time.process_time()
    total = 0
    if a.mode == "loader":
        budget = {} if a.memory_budget == -1 else {"memory_budget": a.memory_budget}
        loader = sluice.Loader(sluice.Dataset.from_uris(uris), prefetch=a.prefetch, **budget)
        for obj in loader:
            total += len(obj)
        if os.environ.get("READ_STATS"):
            print(json.dumps(loader.stats()), file=sys.stderr)
    elif a.mode == "msc":
        with ThreadPoolExecutor(a.prefetch or 16) as pool:
            total = sum(len(b) for b in pool.map(msc.read, keys))
    elif a.mode == "obstore":
        total = asyncio.run(read_all(a.prefetch or 16))
    elif a.mode == "s3tc":
        with ThreadPoolExecutor(a.prefetch or 16) as pool:
            total = sum(pool.map(lambda i: len(s3tc[i].read()), range(len(s3tc))))
    else:
        opts = {} if a.prefetch is None else {"prefetch": a.prefetch}
        loader = s3dlio.PyBytesAsyncDataLoader(s3dlio.PyDataset.from_uris(uris), opts)
        it = loader.items()
        while batch := it.collect_batch(7):
            total += sum(len(b) for b in batch)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(
        json.dumps(
            {
                "epoch": epoch,
                "bytes": total,
                "seconds": wall,
                "mb_per_s": total / 1e6 / wall,
                "cpu_s_per_gb": cpu / (total / 1e9),
            }
        ),
        flush=True,
    )
