"""Rust's log records reach Python's logging, from the runtime's threads."""

import logging
import socket
import time

import sluice
from sluice._logging import logger_name


def wait_for(caplog, logger, text, seconds=5.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for r in caplog.records:
            if r.name == logger and text in r.getMessage():
                return r
        time.sleep(0.05)
    raise AssertionError(
        f"no {logger} record with {text!r}: {[(r.name, r.getMessage()) for r in caplog.records]}"
    )


def test_retries_and_avoided_endpoints_are_logged(server, prefix, caplog):
    caplog.set_level(logging.INFO, logger="sluice")
    [u] = server.fill(prefix, 1, 1000)
    c = sluice.Client(endpoint=server.endpoint)
    server.inject("slowdown", 1)
    assert len(c.get(u)) == 1000  # a GET's retry resumes from the byte reached
    r = wait_for(caplog, "sluice.core.resume", "resuming GET")
    assert r.levelno == logging.INFO and "SlowDown" in r.getMessage() and prefix in r.getMessage()
    server.inject("slowdown", 1)
    assert c.stat(u)["size"] == 1000
    r = wait_for(caplog, "sluice.core.retry", "retrying")
    assert r.levelno == logging.INFO and "SlowDown" in r.getMessage()

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = "http://127.0.0.1:%d" % s.getsockname()[1]
    spread = sluice.Client(endpoints=[dead, server.endpoint], max_attempts=3)
    for _ in range(2):
        assert len(spread.get(u)) == 1000
    r = wait_for(caplog, "sluice.core.spread", "endpoint avoided")
    assert r.levelno == logging.WARNING and dead in r.getMessage()


def test_logger_names_follow_the_crates():
    assert logger_name("sluice_core::retry") == "sluice.core.retry"
    assert logger_name("sluice_loader::driver") == "sluice.loader.driver"
    assert logger_name("hyper_util::client") == "sluice.hyper_util.client"
