"""``sluice.testing.TestServer(profile=...)``: the server behaves like a real store (latency,
rate limits, bandwidth) and reports what it did in ``stats()``; bad settings are refused with
the keyword at fault named."""

import time

import pytest
import sluice
from sluice import testing  # not `import TestServer`: pytest would try to collect it


def test_a_profile_delays_reads_and_reports_them():
    with testing.TestServer("s3-express") as s, testing.environment(s):
        uris = s.fill("p/", 20, 1000)
        c = sluice.Client()
        for u in uris:
            assert len(c.get(u)) == 1000
        st = s.stats()
    assert st["profile"] == "s3-express"
    assert st["requests"]["get"] >= 20
    assert st["bytes_sent"] >= 20 * 1000
    lat = st["first_byte_latency_ms"]["get"]
    assert lat["count"] == st["requests"]["get"]
    # s3-express: single-digit milliseconds (p50 2 ms, p99 8 ms).
    assert 0.5 < lat["p50"] < 10, lat
    assert set(st["first_byte_latency_ms"]) == {"get"}, "only the classes that were served"


def test_loopback_applies_nothing():
    with testing.TestServer() as s:
        s.fill("p/", 3, 10)
        st = s.stats()
    assert st["profile"] == "loopback"
    assert st["first_byte_latency_ms"] == {}
    assert st["throttled"] == {"get": 0, "put": 0, "list": 0}


def test_a_setting_overrides_the_profile():
    # Applied as `sluice serve` applies its flags, the all-class one first, whatever the order.
    with (
        testing.TestServer("s3-express", get_latency="20ms", first_byte_latency="none") as s,
        testing.environment(s),
    ):
        (uri,) = s.fill("p/", 1, 10)
        t = time.monotonic()
        sluice.Client().get(uri)
        took = time.monotonic() - t
        st = s.stats()
    assert took >= 0.020
    assert st["first_byte_latency_ms"]["get"]["p50"] == pytest.approx(20, rel=0.01)


def test_over_the_rate_the_server_answers_slow_down():
    with testing.TestServer(request_rate="get=5/s") as s, testing.environment(s):
        (uri,) = s.fill("p/", 1, 10)
        c = sluice.Client(max_attempts=1)
        refused = []
        for _ in range(20):
            try:
                c.get(uri)
            except sluice.S3Error as e:
                refused.append(e)
        st = s.stats()
    assert refused, "20 GETs at once against 5/s: some are refused"
    assert all(e.status == 503 and e.code == "SlowDown" for e in refused), refused
    assert st["throttled"]["get"] == len(refused)
    control = c.congestion()
    assert set(control) == set(sluice.Congestion.__annotations__)
    assert control["throttled"] == len(refused)
    assert 1 <= control["limit"] < control["max"], "the client slowed down"
    assert control["last"].startswith("cut to "), control


@pytest.mark.parametrize(
    "kwargs, needles",
    [
        ({"profile": "s3-fast"}, ["profile", "s3-standard"]),
        ({"first_byte_latency": "p50=30ms,p99=10ms"}, ["first_byte_latency", "below p50"]),
        ({"connection_bandwidth": "90"}, ["connection_bandwidth", "no unit", "90MB/s"]),
        ({"request_rate": "get=0/s"}, ["request_rate", "above zero"]),
        ({"bandwidth": "1MB/s"}, ["bandwidth", "unknown setting"]),
    ],
)
def test_bad_settings_name_the_keyword(kwargs, needles):
    with pytest.raises(ValueError) as e:
        testing.TestServer(**kwargs)
    for n in needles:
        assert n in str(e.value), str(e.value)


def test_a_synthetic_server_serves_objects_it_does_not_keep():
    spec = "t/img_{i}_of_{n}.jpeg:3000x5000"
    with testing.TestServer(synthetic=spec, sink=True) as s, testing.environment(s):
        c = sluice.Client()
        uris = c.list(f"s3://{s.bucket}/t/", recursive=True)
        assert len(uris) == 3000 and uris == sorted(uris)
        key = "t/img_2999_of_3000.jpeg"
        assert bytes(c.get(f"s3://{s.bucket}/{key}")) == testing.pattern(key, 5000)
        c.put(f"s3://{s.bucket}/ckpt", b"x" * 1000)
        with pytest.raises(PermissionError, match="InvalidObjectState.*--sink"):
            c.get(f"s3://{s.bucket}/ckpt")


@pytest.mark.parametrize(
    ("spec", "says"),
    [("t/img.jpeg:10x5", "neither a template"), ("a{i}:10x0", "is 0"), ("r:x", "preset")],
)
def test_a_bad_synthetic_spec_is_refused_with_the_part_at_fault(spec, says):
    with pytest.raises(ValueError, match=f"synthetic: .*{says}.*e.g."):
        testing.TestServer(synthetic=spec)
