"""The watch's /metrics server on real sockets: where --listen binds, the connection
cap (one more is closed at once, the held ones keep their slots), 404 off /metrics."""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request

import pytest
from prometheus_client.registry import CollectorRegistry

from cwctl.errors import InputError
from cwctl.watch import httpd


@pytest.mark.parametrize(
    ("text", "bound"),
    [
        (":19108", ("127.0.0.1", 19108)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("0.0.0.0:19108", ("0.0.0.0", 19108)),
        ("[::1]:19108", ("::1", 19108)),
    ],
)
def test_listen_is_loopback_unless_an_address_is_named(text: str, bound: tuple[str, int]) -> None:
    assert httpd.parse_listen(text) == bound


@pytest.mark.parametrize("text", ["19108", "nowhere", "host:port", ":70000"])
def test_a_listen_without_a_port_is_one_line(text: str) -> None:
    with pytest.raises(InputError, match=r"give ADDR:PORT, e\.g\. 127\.0\.0\.1:19108"):
        httpd.parse_listen(text)


def test_the_cap_closes_one_more_connection_and_keeps_the_held_ones() -> None:
    server = httpd.serve(CollectorRegistry(), "127.0.0.1:0")
    host, port = server.server_address[:2]
    held = []
    try:
        for _ in range(httpd.MAX_CONNECTIONS):
            s = socket.create_connection((host, port))
            s.sendall(b"GET /metr")  # half a request line, never finished
            held.append(s)
        extra = socket.create_connection((host, port))
        extra.settimeout(30)  # a hang guard: the server closes it at once
        assert extra.recv(1) == b""  # closed by the server, unanswered
        extra.close()
        assert server.refused >= 1
        for s in held:
            s.close()
        assert _status(f"http://{host}:{port}/metrics") == 200  # once their slots are free
        with pytest.raises(urllib.error.HTTPError) as other:
            urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=30)
        assert other.value.code == 404
    finally:
        for s in held:
            s.close()
        server.shutdown()
        server.server_close()


def _status(url: str) -> int:
    """The status of a GET, tried again while the server is still freeing slots."""
    for _ in range(200):  # a hang guard
        try:
            with urllib.request.urlopen(url, timeout=30) as reply:
                return int(reply.status)
        except (urllib.error.URLError, ConnectionError) as exc:
            if isinstance(exc, urllib.error.HTTPError):
                raise
            threading.Event().wait(0.05)
    raise AssertionError(f"{url}: no answer")
