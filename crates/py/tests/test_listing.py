"""``list_objects``: entries page by page as Python iterates."""

import itertools
import time

import pytest
import sluice


def test_entries_come_page_by_page_with_their_attributes(server, client, prefix):
    uris = server.fill(prefix, 2500, 3)  # three pages of S3's 1000
    before = server.requests
    listing = client.list_objects(f"s3://{server.bucket}/{prefix}", recursive=True)
    first = next(listing)
    time.sleep(0.2)  # let the read-ahead run as far as it may
    assert server.requests - before <= 2, "one page ahead of the consumer, not the whole listing"
    rest = list(listing)
    entries = [first] + rest
    assert [e.uri for e in entries] == uris
    e = entries[0]
    assert e.key == uris[0].split("/", 3)[3] and e.size == 3 and not e.is_prefix
    assert e.etag and e.last_modified and e.last_modified > 1.6e9
    assert server.requests - before == 3
    assert list(listing) == [], "an exhausted listing stays exhausted"


def test_not_recursive_gives_prefixes(server, client, prefix):
    for k in ["a/1", "a/2", "b/1", "top"]:
        client.put(f"s3://{server.bucket}/{prefix}{k}", b"x")
    got = {
        (e.key[len(prefix) :], e.is_prefix, e.size)
        for e in client.list_objects(f"s3://{server.bucket}/{prefix}")
    }
    assert got == {("a/", True, None), ("b/", True, None), ("top", False, 1)}
    # The module-level function lists through the default client.
    assert [e.key for e in sluice.list_objects(f"s3://{server.bucket}/{prefix}a/")] == [
        f"{prefix}a/1",
        f"{prefix}a/2",
    ]


def test_a_listing_abandoned_early_or_failing_says_so(server, client, prefix):
    server.fill(prefix, 1500, 1)
    taken = list(
        itertools.islice(client.list_objects(f"s3://{server.bucket}/{prefix}", recursive=True), 5)
    )
    assert len(taken) == 5  # dropping the iterator stops its task
    with pytest.raises(FileNotFoundError, match="no-such-bucket"):
        next(client.list_objects("s3://no-such-bucket/x/"))
    with pytest.raises(ValueError, match="not-a-uri"):
        client.list_objects("not-a-uri")
