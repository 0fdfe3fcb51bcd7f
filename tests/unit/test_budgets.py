"""Probe budgets: which one a scan runs at, what overrides it, and what it says it costs."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cwctl import settings
from cwctl.cli import app
from cwctl.errors import InputError
from cwctl.inventory import ProbeSettings
from cwctl.scan import budgets
from cwctl.scan.request import ProbeOverrides, ScanRequest, SimOptions
from cwctl.transport.plan import resolve_probe
from cwctl.transport.sim import SimSource

QUICK = settings.BUDGETS[settings.BUDGET_QUICK]
WATCH = settings.BUDGETS[settings.BUDGET_WATCH]


def test_the_command_chooses_unless_the_inventory_or_the_flag_does() -> None:
    scan, tui = ScanRequest(), ScanRequest().at_budget("watch")
    quick, watch = resolve_probe(scan), resolve_probe(tui)
    assert (quick.rate, quick.duration, quick.ports) == (QUICK.rate, 2.0, 2)
    assert (watch.rate, watch.duration, watch.ports) == (WATCH.rate, 5.0, 4)
    assert resolve_probe(scan, ProbeSettings(ports=4)).ports == 4  # the inventory's wins
    pinned = ProbeSettings(budget="watch")
    assert resolve_probe(scan, pinned).budget == "watch"
    assert resolve_probe(ScanRequest(budget="quick").at_budget("watch"), pinned).rate == QUICK.rate


def test_explicit_rate_and_duration_win_over_the_budget() -> None:
    inv = ProbeSettings(rate=7.0)
    got = resolve_probe(ScanRequest().at_budget("watch"), inv)
    assert (got.budget, got.rate, got.duration) == ("watch", 7.0, WATCH.duration_s)
    flagged = ScanRequest(overrides=ProbeOverrides(rate=3.0), duration_s=1.5)
    got = resolve_probe(flagged, inv)
    assert (got.rate, got.duration) == (3.0, 1.5)


def test_an_unknown_budget_is_one_line_naming_where() -> None:
    with pytest.raises(InputError, match="--budget 'slow': give quick or watch"):
        budgets.choose("slow", None, "quick")


def test_the_cost_follows_the_wire_and_the_measured_cpu() -> None:
    quick, watch = budgets.cost(QUICK.rate, 10), budgets.cost(WATCH.rate, 10)
    # 6 datagrams of 80 bytes per pair each end: 3.84 kbit/s per pair/s per peer
    assert quick.kbit_s == pytest.approx(3.84 * QUICK.rate * 10)
    assert quick.probes_s == 2 * QUICK.rate * 10
    # the watch budget is under issue 14's bar: 1 % of a core and 100 kbit/s
    assert watch.kbit_s < 100 and watch.core_pct < 1.0
    assert quick.core_pct > 10 * budgets.AGENT_CPU_FIXED_PCT


def test_a_scan_states_its_budget_and_cost_in_the_header_and_json(tmp_path: Path) -> None:
    import json

    runner = CliRunner()
    table = runner.invoke(app, ["scan", "--sim", "--hosts", "16", "--no-discovery"])
    assert "budget quick (100 pairs/s/peer × 2 s): per agent 2,000 probes/s" in table.output
    out = runner.invoke(
        app,
        ["scan", "--sim", "--hosts", "16", "--budget", "watch", "--rate", "4", "--format", "json"],
    )
    b = json.loads(out.stdout)["telemetry"]["budget"]
    assert (b["name"], b["rate"], b["duration_s"], b["own"]) == ("watch", 4.0, 5.0, False)
    assert b["kbit_s"] == pytest.approx(3.84 * 4 * 10, abs=0.1)


def test_a_simulated_source_probes_each_scan_at_its_request_s_budget() -> None:
    import asyncio

    request = ScanRequest(sim=SimOptions(hosts=8, discovery=False))
    source = SimSource(request.at_budget("watch"))
    sparse = asyncio.run(source.scan(request.at_budget("watch")))
    dense = asyncio.run(source.scan(request))  # --verify's rescan on the same model
    assert sparse.duration_s == WATCH.duration_s and dense.duration_s == QUICK.duration_s
    per_s = [len(c.table) / c.duration_s for c in (sparse, dense)]
    assert per_s[1] == pytest.approx(per_s[0] * QUICK.rate / WATCH.rate, rel=0.05)


def test_an_inventory_budget_key_is_checked(tmp_path: Path) -> None:
    bad = tmp_path / "inv.toml"
    bad.write_text('[probe]\nbudget = "fast"\n[[host]]\nname = "a"\naddress = "10.0.0.1"\n')
    result = CliRunner().invoke(app, ["inventory", "check", "-i", str(bad)])
    assert result.exit_code == 2
    assert "inv.toml:2: key 'probe.budget': must be one of quick | watch" in result.output


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_quick_scan_names_a_slow_spine_first(seed: int) -> None:
    """The quick budget's 2 s must trace the flows a slow spine is found on: two source
    ports per peer (with four, the switches' ICMP limits left most spines unknown and no
    suspect was named on seeds 1, 2, 4 and 5)."""
    import json

    argv = ["scan", "--sim", "--seed", str(seed), "--fault", "switch:spine1:slow"]
    result = CliRunner().invoke(app, [*argv, "--format", "json"])
    assert result.exit_code == 3, result.output
    report = json.loads(result.stdout)
    assert report["telemetry"]["budget"]["name"] == "quick"
    assert report["suspects"][0]["element"] == "spine1"


def test_the_collector_caps_a_budget_s_rate_by_the_fleet_s_rows() -> None:
    """Each agent's budget is per agent; the fleet's rows all come to one workstation:
    above settings.SCAN_MAX_ROWS the budget's rate per peer falls to the fleet's share."""
    request = ScanRequest()  # scan: quick, 100 pairs/s x 2 s, 10 peers
    assert resolve_probe(request, hosts=1000).rate == 100.0  # 4 M rows: the cap itself
    capped = resolve_probe(request, hosts=10_000)
    assert capped.rate == pytest.approx(10.0)
    rows = 2 * 10_000 * capped.peers * capped.rate * float(capped.duration or 0.0)
    assert rows == pytest.approx(settings.SCAN_MAX_ROWS)
    assert resolve_probe(request, hosts=64).rate == 100.0  # 63 peers at most, 10 probed
    # the operator's rate is not capped; nor is the watch budget (2 M rows a window)
    explicit = ScanRequest(overrides=ProbeOverrides(rate=100.0))
    assert resolve_probe(explicit, hosts=10_000).rate == 100.0
    watch = ScanRequest().at_budget(settings.BUDGET_WATCH)
    assert resolve_probe(watch, hosts=10_000).rate == settings.BUDGETS["watch"].rate


def test_a_capped_scan_says_so() -> None:
    from cwctl.transport.plan import budget_params

    probe = resolve_probe(ScanRequest(), hosts=10_000)
    params = budget_params(probe, 10_000)
    assert params["fleet_capped"] and params["own"] and params["rate"] == pytest.approx(10.0)
    assert not budget_params(resolve_probe(ScanRequest(), hosts=256), 256)["fleet_capped"]


def test_flag_overrides_are_typed_and_only_what_was_given_wins() -> None:
    """What the flags give replaces the inventory's; what they leave None keeps it; the
    seed is the scan's, not a probe setting; a key no flag has is a TypeError, not a
    setting silently dropped."""
    base = ProbeSettings(rate=40.0, peers=5, ports=3)
    over = ProbeOverrides(rate=7.0, seed=11).over(base)
    assert (over.rate, over.peers, over.ports, over.gap_us) == (7.0, 5, 3, base.gap_us)
    with pytest.raises(TypeError):
        ProbeOverrides(**{"rates": 7.0})  # type: ignore[arg-type]
