"""The JSON of a simulated scan matches docs/scan-json.md field by field."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cwctl.cli import app

DOC = Path(__file__).resolve().parents[2] / "docs" / "scan-json.md"
SECTIONS = {
    "Top level": "top",
    "`hosts[]`": "hosts",
    "`paths[]`": "paths",
    "`paths[].ports[]`": "ports",
    "`suspects[]`": "suspects",
    "`telemetry`": "telemetry",
    "`unlocalised`": "unlocalised",
}
TYPES = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "object": (dict,),
    "array": (list,),
    "boolean": (bool,),
}
Field = tuple[tuple[type, ...], bool, bool]  # python types, nullable, always


def documented_fields() -> dict[str, dict[str, Field]]:
    """Parse the field tables of docs/scan-json.md: section -> field -> (types, null, always)."""
    out: dict[str, dict[str, Field]] = {}
    section = None
    for line in DOC.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip()
            section = SECTIONS.get(title)
            if section:
                out[section] = {}
            continue
        m = re.match(r"\| `([a-z_0-9]+)` \| ([a-z ]+) \| (yes|no) \|", line)
        if section and m:
            words = m.group(2).split(" or ")
            types = tuple(t for w in words if w != "null" for t in TYPES[w])
            out[section][m.group(1)] = (types, "null" in words, m.group(3) == "yes")
    return out


def check(obj: dict[str, Any], fields: dict[str, Field], where: str) -> None:
    undocumented = set(obj) - set(fields)
    assert not undocumented, f"{where}: fields not in docs/scan-json.md: {undocumented}"
    for name, (types, nullable, always) in fields.items():
        if name not in obj:
            assert not always, f"{where}: missing field {name!r}"
            continue
        value = obj[name]
        if value is None:
            assert nullable, f"{where}.{name} is null but documented as never null"
            continue
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        assert ok, f"{where}.{name}: {type(value).__name__} is not {types}"


def test_the_doc_has_every_section() -> None:
    fields = documented_fields()
    assert set(fields) == set(SECTIONS.values())
    assert {"schema", "hosts", "paths", "suspects", "truth"} <= set(fields["top"])


@pytest.fixture(scope="module")
def scan_json() -> dict[str, Any]:
    result = CliRunner().invoke(
        app,
        ["scan", "--sim", "--hosts", "24", "--duration", "0.5", "--rate", "100",
         "--format", "json",
         "--fault", "switch:spine2:down", "--fault", "link:leaf1-spine3:lossy=0.05"],
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    return json.loads(result.stdout)


def test_simulated_scan_json_matches_the_documented_schema(scan_json: dict[str, Any]) -> None:
    fields = documented_fields()
    check(scan_json, fields["top"], "scan")
    assert scan_json["schema"] == "cwctl.scan/1"
    assert scan_json["source"] == "sim"
    for host in scan_json["hosts"]:
        check(host, fields["hosts"], f"hosts[{host['name']}]")
    assert scan_json["paths"]
    for path in scan_json["paths"]:
        check(path, fields["paths"], f"paths[{path['src']}->{path['dst']}]")
        for port in path["ports"]:
            check(port, fields["ports"], "ports[]")
    assert scan_json["suspects"]
    for suspect in scan_json["suspects"]:
        check(suspect, fields["suspects"], f"suspects[{suspect['element']}]")
        assert suspect["kind"] in ("switch", "link", "nic", "host")
        assert 0.0 <= suspect["score"] <= 1.0
    check(scan_json["telemetry"], fields["telemetry"], "telemetry")


def test_an_unlocalised_loss_matches_the_documented_schema() -> None:
    # the object as the snapshot writes it (telemetry/verdicts.py builds its content)
    from cwctl.scan.snapshot import FabricSnapshot

    snap = FabricSnapshot(source="sim", reference=None, duration_s=1.0, hosts=[],
                          unlocalised={"paths": 2, "flows": 3, "signals": {"loss": 3},
                                       "evidence": "unlocalised loss on 2 paths: ..."})  # fmt: skip
    out = snap.to_json()
    check(out["unlocalised"], documented_fields()["unlocalised"], "unlocalised")
    assert not snap.healthy


def test_suspects_name_the_injected_faults(scan_json: dict[str, Any]) -> None:
    names = [s["element"] for s in scan_json["suspects"]]
    assert names[:2] == ["spine2", "leaf1-spine3"] or set(names[:2]) == {
        "spine2",
        "leaf1-spine3",
    }
    assert set(scan_json["truth"]["faults"]) == {"spine2", "leaf1-spine3"}


def test_json_is_compact_by_default_and_indented_with_pretty() -> None:
    args = ["scan", "--sim", "--hosts", "8", "--duration", "0.3", "--rate", "2", "--format", "json"]
    compact = CliRunner().invoke(app, args)
    pretty = CliRunner().invoke(app, [*args, "--pretty"])
    # 0.3 s at 2 pairs/s: too few probes to tell, so inconclusive (exit 3)
    assert compact.exit_code == pretty.exit_code == 3, compact.output + pretty.output
    assert json.loads(compact.stdout)["verdict"] == "inconclusive"
    assert compact.stdout.count("\n") == 1 and compact.stdout.endswith("}\n")
    assert '\n  "schema": "cwctl.scan/1"' in pretty.stdout
    a, b = json.loads(compact.stdout), json.loads(pretty.stdout)
    for report in (a, b):
        report["sync"].pop("fit_s"), report["sync"].pop("solve_s")
    assert a == b  # the same seeded scan; only the solver's own timings differ


def test_report_encoder_writes_what_the_stdlib_reads() -> None:
    import numpy as np

    from cwctl.report.jsonenc import encode

    obj = {
        "a": np.float64(1.5),
        "b": np.int64(7),
        "c": np.arange(3),
        "d": float("nan"),
        "e": [None, True, "x"],
        3: "int key",
    }
    assert json.loads(encode(obj)) == {
        "a": 1.5,
        "b": 7,
        "c": [0, 1, 2],
        "d": None,
        "e": [None, True, "x"],
        "3": "int key",
    }


@pytest.mark.parametrize("pretty", [False, True])
@pytest.mark.parametrize("n", [0, 1, 2, 5])
@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({"a": 1, "s": {"x": [1, {}], "y": []}}, {"z": 'q\n"paths":[]', "e": {}}),
        ({}, {"z": [1.5, None]}),
        ({"a": "é"}, {}),
        ({}, {}),
    ],
)
def test_a_list_written_in_chunks_is_the_whole_objects_bytes(
    pretty: bool, n: int, before: dict[str, Any], after: dict[str, Any]
) -> None:
    import cwctl.report.jsonenc as jsonenc

    items = [{"i": i, "l": [i, {"k": None}], "e": [], "f": i / 3, "s": "a\n é"} for i in range(n)]
    # chunk edges inside the list and at its end; an empty chunk writes nothing
    chunks = [items[i : i + 2] for i in range(0, n, 2)] + [[]]
    pieces = list(jsonenc.encode_chunks({**before, "paths": [], **after}, "paths", chunks,
                                        pretty=pretty))  # fmt: skip
    whole = jsonenc.encode_bytes({**before, "paths": items, **after}, pretty=pretty)
    assert b"".join(pieces) == whole
    assert len(pieces) == 3 + (n + 1) // 2


@pytest.mark.parametrize("pretty", [False, True])
def test_a_scans_json_in_pieces_is_its_snapshots_whole_json(pretty: bool) -> None:
    from cwctl.report import render_bytes
    from cwctl.report.jsonenc import encode_bytes
    from cwctl.scan.request import SimOptions
    from cwctl.session import analyse
    from cwctl.transport.sim import simulate

    snap = analyse(simulate(SimOptions(hosts=16, faults=("link:leaf1-spine2:lossy=0.1",)), 0.5))
    assert len(snap.paths) > 100
    pieces = list(render_bytes(snap, "json", pretty=pretty))
    assert b"".join(pieces) == encode_bytes(snap.to_json(), pretty=pretty)
    assert json.loads(b"".join(pieces))["paths"][0]["ports"]


def test_json_to_out_is_what_stdout_gets(tmp_path: Path) -> None:
    args = ["scan", "--sim", "--hosts", "8", "--duration", "0.3", "--rate", "100", "--format",
            "json"]  # fmt: skip
    out_file = tmp_path / "scan.json"
    printed = CliRunner().invoke(app, args)
    written = CliRunner().invoke(app, [*args, "--out", str(out_file)])
    assert printed.exit_code == written.exit_code == 0, printed.output + written.output
    assert written.stdout == ""
    assert out_file.stat().st_mode & 0o777 == 0o644
    text = out_file.read_text()
    assert text.count("\n") == 1 and text.endswith("}\n")
    a, b = json.loads(printed.stdout), json.loads(text)
    for report in (a, b):
        report["sync"].pop("fit_s"), report["sync"].pop("solve_s")
    assert a == b and a["paths"]
    assert not list(tmp_path.glob(".scan.json.*"))  # no temporary file left


def test_a_reader_that_leaves_early_is_no_error() -> None:
    import subprocess
    import sys

    # more paths than one chunk (4 096), so the writes go on after the reader has left
    proc = subprocess.Popen(
        [sys.executable, "-m", "cwctl", "--quiet", "scan", "--sim", "--hosts", "256",
         "--duration", "1", "--format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(20) == b'{"schema":"cwctl.sca'
    proc.stdout.close()  # as `| head -c 20` does
    err = proc.stderr.read()
    assert proc.wait(timeout=120) in (0, 3), err
    assert err == b""


def test_json_pieces_reach_a_text_only_stdout() -> None:
    import contextlib
    import io

    from cwctl.cli.app import write_output

    out = io.StringIO()  # no .buffer, as under contextlib.redirect_stdout
    with contextlib.redirect_stdout(out):
        write_output(iter([b'{"a":', '"é"'.encode(), b"}\n"]), None)
    assert out.getvalue() == '{"a":"é"}\n'
