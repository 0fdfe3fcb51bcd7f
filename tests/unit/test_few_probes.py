"""A window too short for its rate is said, not passed over as a quiet "no suspects"."""

from __future__ import annotations

from cwctl.report.summary import summary_lines
from cwctl.scan.request import ProbeOverrides, ScanRequest, SimOptions
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.session import analyse
from cwctl.telemetry import THRESHOLDS
from cwctl.transport.sim import simulate


def _scan(duration_s: float, rate: float) -> FabricSnapshot:
    request = ScanRequest(
        sim=SimOptions(hosts=16, hosts_per_leaf=4), overrides=ProbeOverrides(rate=rate)
    )
    return analyse(simulate(request=request, duration_s=duration_s))


def test_one_second_at_the_default_rate_is_too_few_and_the_report_says_so() -> None:
    snapshot = _scan(1.0, 2.0)
    few = snapshot.telemetry["few_probes"]
    assert few == {"pairs_per_peer": 2.0, "rate": 2.0, "duration_s": 1.0, "needed": 8}
    text = "\n".join(summary_lines(snapshot))
    assert "few probes: 2 coded pairs per peer (2/s for 1 s)" in text
    assert "probe for 4 s or more" in text


def test_enough_pairs_per_peer_say_nothing() -> None:
    assert THRESHOLDS.few_pairs_per_peer == 8
    for duration_s, rate in ((4.0, 2.0), (0.5, 40.0)):
        snapshot = _scan(duration_s, rate)
        assert "few_probes" not in snapshot.telemetry
        assert not any("few probes" in line for line in summary_lines(snapshot))
