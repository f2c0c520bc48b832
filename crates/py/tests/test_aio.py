"""sluice.aio: the blocking calls as awaitables completed from sluice's I/O threads, over
real sockets to the test server."""

import asyncio

import pytest
import sluice
import sluice.aio
from sluice import _native


def _run(coro, loop_kind):
    if loop_kind == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        return uvloop.run(coro)
    return asyncio.run(coro)


@pytest.fixture(params=["asyncio", "uvloop"])
def loop_kind(request):
    return request.param


def test_every_call_round_trips(server, prefix, loop_kind):
    base = f"s3://{server.bucket}/{prefix}"
    client = sluice.aio.Client(endpoint=server.endpoint)

    async def main():
        data = bytes(range(256)) * 4096  # 1 MiB
        etag = await client.put(base + "a", data)
        assert etag and await client.exists(base + "a")
        assert not await client.exists(base + "missing")
        assert bytes(await client.get(base + "a")) == data
        assert bytes(await client.get_range(base + "a", 10, 5)) == data[10:15]
        parts = await client.get_ranges(base + "a", [(0, 4), (100, 200)], etag=etag)
        assert [bytes(p) for p in parts] == [data[0:4], data[100:200]]
        st = await client.stat(base + "a")
        assert st["size"] == len(data) and st["etag"] == etag
        await client.put(base + "b", b"bee")
        many = await client.get_many([base + "b", base + "a"])
        assert bytes(many[0]) == b"bee" and len(many[1]) == len(data)
        keys = [e.key async for e in client.list(base, recursive=True)]
        assert keys == [f"{prefix}a", f"{prefix}b"]
        await client.delete(base + "b")
        assert not await client.exists(base + "b")
        with pytest.raises(FileNotFoundError, match="missing"):
            await client.get(base + "missing")
        with pytest.raises(FileExistsError):
            await client.put(base + "a", b"x", mode="create")

    _run(main(), loop_kind)


def test_thousands_in_flight_from_one_loop(server, prefix, loop_kind):
    base = f"s3://{server.bucket}/{prefix}"
    for i in range(50):
        server.insert(f"{prefix}{i}", bytes([i]) * 1000)

    async def main():
        got = await asyncio.gather(*(sluice.aio.get(f"{base}{i % 50}") for i in range(2000)))
        assert all(bytes(o) == bytes([i % 50]) * 1000 for i, o in enumerate(got))

    _run(main(), loop_kind)


def test_a_cancelled_call_stops_and_never_completes(server, prefix):
    uri = f"s3://{server.bucket}/{prefix}slow"
    server.insert(f"{prefix}slow", b"x" * 100)
    client = sluice.aio.Client(endpoint=server.endpoint)

    async def main():
        server.inject("latency", count=1, seconds=30.0)
        task = asyncio.create_task(client.get(uri))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
        server.clear_faults()
        # The client goes on serving.
        assert bytes(await client.get(uri)) == b"x" * 100

    try:
        asyncio.run(main())
    finally:
        server.clear_faults()


def test_a_call_outside_a_running_loop_raises(server, prefix):
    client = sluice.Client(endpoint=server.endpoint)
    with pytest.raises(RuntimeError, match="no running event loop"):
        _native.aio_get(client, f"s3://{server.bucket}/{prefix}x")


def test_a_listing_that_fails_raises(server, prefix):
    async def main():
        return [e async for e in sluice.aio.list("s3://no-such-bucket-here/x/")]

    with pytest.raises(Exception, match="no-such-bucket-here"):
        asyncio.run(main())


def test_open_streams_reads_and_writes(server, prefix):
    uri = f"s3://{server.bucket}/{prefix}stream"
    client = sluice.aio.Client(endpoint=server.endpoint)
    data = bytes(range(256)) * 20_000  # 5,120,000 bytes: several read-aheads

    async def main():
        async with await client.open(uri, "wb", part_size=5 << 20) as f:
            for i in range(0, len(data), 1 << 20):
                assert await f.write(data[i : i + (1 << 20)]) == len(data[i : i + (1 << 20)])
        f = await client.open(uri)
        assert await f.read(10) == data[:10]
        f.seek(-5, 2)
        assert await f.read() == data[-5:]
        f.seek(3)
        assert await f.read() == data[3:]
        with pytest.raises(FileExistsError):
            async with await client.open(uri, "xb") as f:
                await f.write(b"no")
        with pytest.raises(RuntimeError, match="boom"):
            async with await client.open(uri + ".never", "wb") as f:
                await f.write(b"partial")
                raise RuntimeError("boom")
        assert not await client.exists(uri + ".never")
        with pytest.raises(ValueError, match="mode 'ab'"):
            await client.open(uri, "ab")

    asyncio.run(main())


def test_an_awaitable_of_a_closed_loop_raises_and_never_hangs(server, prefix):
    uri = f"s3://{server.bucket}/{prefix}x"
    server.insert(f"{prefix}x", b"x")
    client = sluice.Client(endpoint=server.endpoint)
    loop = asyncio.new_event_loop()

    async def start():
        return _native.aio_get(client, uri)

    fut = loop.run_until_complete(start())
    loop.close()  # before the answer: its call_soon_threadsafe is refused, quietly

    async def wait():
        return await fut

    with pytest.raises(RuntimeError):
        asyncio.run(asyncio.wait_for(wait(), 10))


def test_a_writer_takes_one_call_at_a_time_and_refuses_after_a_cancel(server, prefix):
    uri = f"s3://{server.bucket}/{prefix}w"
    client = sluice.aio.Client(endpoint=server.endpoint)

    async def main():
        f = await client.open(uri, "wb")
        first = asyncio.create_task(f.write(b"a" * 1000))
        await asyncio.sleep(0)  # the first write is in flight
        with pytest.raises(RuntimeError, match="while a write is in flight"):
            await f.write(b"b")
        await first
        server.inject("latency", count=1, seconds=30.0)
        closing = asyncio.create_task(f.close())
        await asyncio.sleep(0.2)
        closing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closing
        server.clear_faults()
        with pytest.raises(RuntimeError, match="after a cancelled close"):
            await f.write(b"c")
        await f.abort()

    try:
        asyncio.run(main())
    finally:
        server.clear_faults()


def test_a_listing_iterated_both_ways_loses_nothing(server, prefix):
    for i in range(30):
        server.insert(f"{prefix}{i:02}", b"x")
    listing = sluice.Client(endpoint=server.endpoint).list_objects(
        f"s3://{server.bucket}/{prefix}", recursive=True
    )
    first = next(listing)

    async def rest():
        out = []
        while batch := await _native.aio_list_next(listing):
            out.extend(batch)
        return out

    keys = [first.key] + [e.key for e in asyncio.run(rest())]
    assert keys == [f"{prefix}{i:02}" for i in range(30)]
