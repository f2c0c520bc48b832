"""The objects named in KEYS_FILE (one key a line, bucket sluice-test, SIZE bytes each)
read by asyncio tasks, TASKS at a time, from one process; prints
"objects/s cpu_us_per_object". Used by scripts/measure-aio.

    python read.py sluice|obstore|harness ENDPOINT KEYS_FILE TASKS SIZE

`harness` sends nothing: each task yields to the loop once and returns SIZE, so its figures
are what this loop of tasks costs any asyncio client, before a byte moves.
"""

import asyncio
import os
import resource
import sys
import time


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def main(kind, endpoint, keys, tasks, size):
    count = len(keys)
    if kind == "sluice":
        import sluice.aio

        client = sluice.aio.Client(endpoint=endpoint)

        async def get(key):
            return len(await client.get(f"s3://sluice-test/{key}"))
    elif kind == "harness":

        async def get(key):
            await asyncio.sleep(0)
            return size
    else:
        import obstore
        from obstore.store import S3Store

        store = S3Store(
            "sluice-test",
            endpoint=endpoint,
            region="us-east-1",
            access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
            secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
            client_options={"allow_http": True},
        )

        async def get(key):
            resp = await obstore.get_async(store, key)
            return len(await resp.bytes_async())

    # One request first: connections and the runtime started before the clock.
    await get(keys[0])
    limit = asyncio.Semaphore(tasks)

    async def one(key):
        async with limit:
            return await get(key)

    c0, t0 = cpu(), time.perf_counter()
    sizes = await asyncio.gather(*(one(k) for k in keys))
    t, c = time.perf_counter() - t0, cpu() - c0
    assert sum(sizes) == count * size, f"{kind} read {sum(sizes)} bytes"
    print(f"{count / t:.0f} {c / count * 1e6:.1f}")


with open(sys.argv[3]) as f:
    names = f.read().split()
asyncio.run(main(sys.argv[1], sys.argv[2], names, int(sys.argv[4]), int(sys.argv[5])))
