"""Malformed inventories and flags a hostile or careless operator gives: one line naming
the culprit, exit 2, never a traceback (issue 24)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cwctl.cli import app

HOST = '[[host]]\nname = "a"\naddress = "10.0.0.1"\n'

INVENTORIES = {
    "TOML nested 1 000 deep": (
        HOST + "x = " + "[" * 1000 + "]" * 1000 + "\n",
        "bad.toml:4: TOML syntax error: nested too deep",
    ),
    "an inline table nested 1 000 deep": (
        "a = " + "{x=" * 1000 + "1" + "}" * 1000 + "\n",
        "bad.toml:1: TOML syntax error: nested too deep",
    ),
    "a 100 000-digit integer": (
        HOST + "[probe]\nrate = " + "9" * 100_000 + "\n",
        "bad.toml:5: TOML syntax error: an integer of too many digits",
    ),
    "a jump host whose port is not a number": (
        '[ssh]\njump = "bastion:abc"\n' + HOST,
        "bad.toml:2: key 'ssh.jump': 'bastion:abc' is not [user@]host[:port]: "
        "port 'abc' is not a number from 1 to 65535",
    ),
    "a NUL in an address": (
        '[[host]]\nname = "a"\naddress = "10.0.0.1\\u0000x"\n',
        "bad.toml:3: key 'host[0].address': '10.0.0.1\\x00x' holds a control character ('\\x00')",
    ),
    "an escape sequence in a user": (
        HOST + 'user = "ops\\u001b[2J"\n',
        "bad.toml:4: key 'host[0].user': 'ops\\x1b[2J' holds a control character ('\\x1b')",
    ),
    "a duration of 1e308 and an infinite rate": (
        HOST + "[probe]\nduration = 1e308\nrate = inf\n",
        "bad.toml:5: key 'probe.duration': must be a number > 0 and at most 3600, not 1e+308\n"
        "cwctl: bad.toml:6: key 'probe.rate': must be a number > 0 and at most 1000, not inf",
    ),
}


@pytest.mark.parametrize("name", list(INVENTORIES))
def test_a_malformed_inventory_is_refused_in_one_line_per_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    text, problem = INVENTORIES[name]
    monkeypatch.chdir(tmp_path)
    Path("bad.toml").write_text(text)
    for args in (["inventory", "check", "-i", "bad.toml"], ["scan", "-i", "bad.toml"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert result.stderr == f"cwctl: {problem}\n"


FLAGS = {
    "--duration inf": "'inf' is not a duration",
    "--duration 1e308": "'1e308' is not a duration",
    "--duration 2h": "'2h' is out of range: give 100ms to 1h",
    "--rate 1e300": "must be at most 1000",
    "--rate inf": "must be at most 1000",
}


@pytest.mark.parametrize("flag", list(FLAGS))
def test_a_flag_beyond_its_sane_range_is_refused_before_anything_runs(flag: str) -> None:
    result = CliRunner().invoke(app, ["scan", "--sim", "--hosts", "4", *flag.split()])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert f"invalid value for '{flag.split()[0]}'" in line and FLAGS[flag] in line
