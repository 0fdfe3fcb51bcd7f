"""What signing probes costs the agent: one datagram sealed and one opened, per probe.

``python -m bench auth`` (a few seconds): the agent's own path for one exchange's
datagrams, side by side in one run, best of 3:

- ``plain``: ``wire.encode`` + ``wire.decode`` (no signing, as before probe/auth.py);
- ``keyed BLAKE2b``: ``Auth.seal`` + ``Auth.open`` (what the agent does: 8-byte MAC);
- ``HMAC-SHA256``: the same datagram with ``hmac.digest(key, ..., "sha256")[:8]`` in
  place of BLAKE2b, the alternative the issue named.

Printed: nanoseconds per datagram sealed and opened, the ratio to plain, and what it
means at the default rate (K = 10 peers, 100 coded pairs/s each: every host seals and
opens about 8 000 datagrams per second as prober and answerer), as a share of one core.
"""

from __future__ import annotations

import hmac
import os
import time
from collections.abc import Callable

from cwctl.probe.auth import Auth
from cwctl.probe.wire import KIND_REPLY, decode, encode

N = int(os.environ.get("CWCTL_BENCH_DATAGRAMS", "100000"))
REPEAT = 3
DATAGRAMS_PER_S = 4 * 2 * 100 * 10  # probe, reply, follow-up (+ the other side's) per host


def best_ns(fn: Callable[[], None]) -> float:
    best = float("inf")
    for _ in range(REPEAT):
        t0 = time.perf_counter_ns()
        fn()
        best = min(best, (time.perf_counter_ns() - t0) / N)
    return best


def main() -> None:
    key, nonce = os.urandom(32), os.urandom(8)
    auth = Auth(key, nonce)
    headers = [encode(KIND_REPLY, i, 1, 3, i, 10**18 + i, 10**18 + 2 * i) for i in range(N)]

    def plain() -> None:
        for h in headers:
            decode(encode(KIND_REPLY, 7, 1, 3, 7, 10**18, 10**18))
            decode(h)

    def blake() -> None:
        for h in headers:
            auth.open(auth.seal(encode(KIND_REPLY, 7, 1, 3, 7, 10**18, 10**18)))
            auth.open(auth.seal(h))

    def hmac_sha256() -> None:
        for h in headers:
            for header in (encode(KIND_REPLY, 7, 1, 3, 7, 10**18, 10**18), h):
                data = nonce + hmac.digest(key, nonce + header, "sha256")[:8] + header
                tag = hmac.digest(key, data[:8] + data[16:], "sha256")[:8]
                hmac.compare_digest(tag, data[8:16]) and decode(data[16:])

    rows = [("plain", best_ns(plain) / 2)]
    rows.append(("keyed BLAKE2b", best_ns(blake) / 2))
    rows.append(("HMAC-SHA256", best_ns(hmac_sha256) / 2))
    base = rows[0][1]
    print(f"{N} datagrams, best of {REPEAT}; per datagram encoded+sealed and opened+decoded")
    print(f"{'':16}{'ns/datagram':>12}{'x plain':>9}{'core share at defaults':>24}")
    for name, ns in rows:
        share = ns * DATAGRAMS_PER_S / 1e9
        print(f"{name:16}{ns:12.0f}{ns / base:9.2f}{share:23.2%}")


if __name__ == "__main__":
    main()
