"""The watch's metrics as a scrape reads them (prometheus_client's own parser), and the
/metrics endpoint over real HTTP on loopback."""

from __future__ import annotations

import urllib.request
from pathlib import Path

from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from cwctl.scan.request import ScanRequest, SimOptions
from cwctl.watch.metrics import registry_of, serve
from cwctl.watch.policy import Allow, Policy
from cwctl.watch.rounds import Watch


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_a_failed_scan_is_an_error_of_the_round_and_the_watch_goes_on(
    tmp_path: Path,
) -> None:
    log: list[dict] = []
    watch = Watch(ScanRequest(replay=tmp_path / "gone.jsonl"), log=log.append)
    try:
        assert await watch.round() is None
        assert await watch.round() is None
    finally:
        await watch.aclose()
    got = samples(generate_latest(registry_of(watch.metrics)).decode())
    assert got[("cwctl_watch_rounds_total", ())] == 2
    assert got[("cwctl_watch_errors_total", (("kind", "scan"),))] == 2
    assert ("cwctl_watch_last_scan_timestamp_seconds", ()) not in got  # never finished one
    assert [e["event"] for e in log] == ["error", "error"] and "gone.jsonl" in log[0]["error"]


async def test_health_suspects_decisions_and_acted_on_series() -> None:
    request = ScanRequest(
        sim=SimOptions(hosts=32, faults=("link:leaf1-spine2:down",)), duration_s=1
    )
    policy = Policy(rounds=1, allow=(Allow("link", "reroute"),))
    watch = Watch(request, policy=policy)
    server = serve(watch.metrics, "127.0.0.1:0")
    try:
        await watch.round()
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            text = reply.read().decode()
    finally:
        server.shutdown()
        server.server_close()
        await watch.aclose()
    got = samples(text)
    assert got[("cwctl_watch_hosts", (("state", "reached"),))] == 32
    assert got[("cwctl_watch_hosts", (("state", "unreached"),))] == 0
    assert got[("cwctl_watch_suspects", (("kind", "link"),))] == 1
    assert got[("cwctl_watch_suspects", (("kind", "gpu"),))] == 0
    assert got[("cwctl_suspect_score", (("element", "leaf1-spine2"), ("kind", "link")))] > 0.5
    assert got[("cwctl_watch_decisions_total", (("code", "policy"), ("verb", "act")))] == 1
    key = (("action", "reroute"), ("outcome", "acted"))
    assert got[("cwctl_watch_actions_total", key)] == 1
    assert got[("cwctl_watch_acted_on", (("action", "reroute"), ("element", "leaf1-spine2")))] == 1
    assert got[("cwctl_watch_policy_dry_run", ())] == 0
    assert got[("cwctl_watch_records", ())] > 0
