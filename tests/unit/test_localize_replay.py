"""``cwctl scan --replay`` on records from an independent fabric model.

``telemetry_synth`` is a model of its own (its own ECMP hash, its own switch addresses,
no code shared with ``cwctl.sim``); its probe and path records go through a record file
and ``cwctl scan --replay`` like an agent's would. The localiser sees only the records
and the topology in the file's header.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cwctl.cli import app
from cwctl.scan.recordfile import write_collection
from tests.unit.telemetry_synth import Synth, make


def _replay(tmp_path: Path, synth: Synth) -> tuple[int, dict]:
    collection, _ = make(synth)
    path = tmp_path / "records.jsonl"
    write_collection(collection, path)
    result = CliRunner().invoke(app, ["scan", "--replay", str(path), "--format", "json"])
    return result.exit_code, json.loads(result.stdout) if result.stdout else {}


@pytest.mark.parametrize(
    ("fault", "element"),
    [
        ({"loss": {"spine2": 1.0}}, "spine2"),
        ({"loss": {"leaf3-spine1": 0.05}}, "leaf3-spine1"),
        ({"delay_ns": {"spine4": 6000.0}}, "spine4"),
    ],
)
def test_replayed_independent_records_name_the_element(
    tmp_path: Path, fault: dict, element: str
) -> None:
    code, report = _replay(tmp_path, Synth(discovered=0.5, seed=3, **fault))
    assert code == 3
    top = report["suspects"][0]
    assert (top["element"], top.get("candidates")) == (element, None)


def test_replayed_records_without_paths_give_candidates_and_exit_3(tmp_path: Path) -> None:
    code, report = _replay(tmp_path, Synth(discovered=0.0, seed=4, loss={"spine3": 1.0}))
    assert code == 3
    top = report["suspects"][0]
    assert "spine3" in top["candidates"] and len(top["candidates"]) > 1


def test_replayed_healthy_independent_fabric_exits_0(tmp_path: Path) -> None:
    code, report = _replay(tmp_path, Synth(discovered=0.5, seed=5))
    assert code == 0, report.get("suspects")
    assert report["suspects"] == [] and "unlocalised" not in report


def test_loss_no_element_explains_is_unlocalised_and_exits_3(tmp_path: Path) -> None:
    # one directed pair loses 5 %: too little for either host (or anything on the way)
    # to be a suspect, too much to call the fabric healthy
    collection, _ = make(Synth(discovered=0.5, seed=6))
    pair = (collection.table.hosts[int(collection.table.src[0])],
            collection.table.hosts[int(collection.table.dst[0])])  # fmt: skip
    code, report = _replay(tmp_path, Synth(discovered=0.5, seed=6, pair_loss={pair: 0.05}))
    assert code == 3
    assert report["suspects"] == [], [s["element"] for s in report["suspects"]]
    lost = report["unlocalised"]
    assert lost["signals"].get("loss", 0) >= 1 and lost["paths"] >= 1
    assert f"{pair[0]}→{pair[1]}" in lost["evidence"] or f"{pair[1]}→{pair[0]}" in lost["evidence"]


@pytest.mark.parametrize(("side", "code"), [("first", 0), ("pairs", 3)])
def test_a_delay_on_one_probe_of_each_pair_is_the_probings_not_the_paths(
    tmp_path: Path, side: str, code: int
) -> None:
    # 8 us on one directed pair: a queue on the path that comes and goes holds both
    # probes of the coded pairs it meets and is a finding nothing explains; on the first
    # probes only (seen on the namespace
    # fabric's kernel stamps, the reply to a pair's first probe waiting on its host) it is
    # the probing's own doing, and a healthy fabric exits 0
    base = Synth(discovered=1.0, seed=6, pairs=200, ports=2)
    collection, _ = make(base)
    pair = (collection.table.hosts[int(collection.table.src[0])],
            collection.table.hosts[int(collection.table.dst[0])])  # fmt: skip
    synth = Synth(discovered=1.0, seed=6, pairs=200, ports=2, pair_delay_ns={pair: 8000.0},
                  pair_delay_side=side)  # fmt: skip
    got, report = _replay(tmp_path, synth)
    assert got == code, report.get("unlocalised")
    assert report["suspects"] == [], [s["element"] for s in report["suspects"]]
    if code:
        assert f"{pair[0]}→{pair[1]}" in report["unlocalised"]["evidence"]
    else:
        assert "unlocalised" not in report
