"""The watch's ``/metrics`` server: bounded, so that scrapes never starve the scans.

prometheus_client's own server gives each connection a thread and a descriptor for as
long as the client likes: 300 half-open connections against a 256-descriptor limit left
the scans without descriptors (every host "unreachable", round after round). Here:

- at most ``MAX_CONNECTIONS`` connections are served at once; one more is accepted and
  closed at once (its descriptor lives microseconds), and the kernel's accept queue, which
  costs the process no descriptor, holds the rest;
- a connection is closed ``DEADLINE_S`` after it was accepted, whatever it has sent (a
  client that trickles its request a byte at a time gets no more than one that stalls);
  each read also times out after ``READ_TIMEOUT_S``;
- one request per connection (HTTP/1.0), ``GET``/``HEAD /metrics`` only: any other path
  is 404, so nothing else on the host looks like an exporter;
- it binds where ``--listen`` says, loopback unless an address is named
  (``parse_listen``), and ``address`` says where it did bind (``127.0.0.1:0`` picks a
  free port: the start line names it). ``settings.WATCH_PORT`` is the port the docs use.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from cwctl.errors import InputError
from cwctl.settings import WATCH_PORT

MAX_CONNECTIONS: Final = 8  # a Prometheus pair and a person with curl need 3
READ_TIMEOUT_S: Final = 5.0  # one read of a request
DEADLINE_S: Final = 10.0  # a whole connection, from accept to close
LOOPBACK: Final = "127.0.0.1"


def parse_listen(text: str) -> tuple[str, int]:
    """``ADDR:PORT`` (``[::1]:PORT`` for IPv6); ``:PORT`` is loopback. Every address is
    named as such, ``0.0.0.0:PORT``: exposing the port is a choice, not a default."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InputError(
            f"--listen {text!r}: give ADDR:PORT, e.g. {LOOPBACK}:{WATCH_PORT} "
            f"(0.0.0.0:{WATCH_PORT} for every address)"
        )
    return host.strip("[]") or LOOPBACK, int(port)


class _Handler(BaseHTTPRequestHandler):
    server: MetricsServer
    timeout = READ_TIMEOUT_S
    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _answer(self, *, body: bool) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            self.send_error(404, "cwctl serves /metrics only")
            return
        try:
            data = generate_latest(self.server.registry)
        except Exception as exc:  # a collector's bug: the scrape fails, never the watch
            self.send_error(500, f"cannot render the metrics: {type(exc).__name__}")
            return
        self.send_response(200)
        self.send_header("Content-Type", CONTENT_TYPE_LATEST)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the watch's stderr is its own log, one JSON line per event."""


class MetricsServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], registry: CollectorRegistry) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
        self.registry = registry
        self.refused = 0  # connections closed at once: the cap was reached
        self._open: dict[socket.socket, float] = {}
        self._lock = threading.Lock()

    @property
    def address(self) -> str:
        host, port = self.server_address[:2]
        host = str(host)
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            full = len(self._open) >= MAX_CONNECTIONS
            if not full:
                self._open[request] = time.monotonic()
        if full:
            self.refused += 1
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._open.pop(request, None)

    def service_actions(self) -> None:
        """Between two polls of the listening socket (every 0.5 s): the connections past
        their deadline are shut down, so their threads end and give the slot back."""
        now = time.monotonic()
        with self._lock:
            late = [s for s, since in self._open.items() if now - since > DEADLINE_S]
        for sock in late:
            with contextlib.suppress(OSError):  # it closed meanwhile
                sock.shutdown(socket.SHUT_RDWR)


def serve(registry: CollectorRegistry, listen: str) -> MetricsServer:
    """Serve ``registry`` at ``listen`` on a daemon thread; stop with ``shutdown()``
    then ``server_close()``."""
    host, port = parse_listen(listen)
    try:
        server = MetricsServer((host, port), registry)
    except OSError as exc:
        raise InputError(f"--listen {listen}: cannot listen there: {exc.strerror or exc}") from None
    threading.Thread(target=server.serve_forever, name="cwctl-metrics", daemon=True).start()
    return server
