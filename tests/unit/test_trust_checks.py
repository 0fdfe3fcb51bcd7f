"""Trust checks on what the operator types: reserved host names, gateway and prefix
syntax (the checks against what hosts report are in tests/integration/test_route_checks.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cwctl.actions.route import check_prefix, parse_gateways
from cwctl.errors import InputError
from cwctl.inventory import load_inventory


@pytest.mark.parametrize("name", ["local", "sim"])
def test_a_host_named_like_this_machine_is_refused(tmp_path: Path, name: str) -> None:
    """A host named ``local`` used to run its steps on the operator's own machine."""
    path = tmp_path / "inv.toml"
    path.write_text(f'[[host]]\nname = "gpu-001"\naddress = "10.0.0.1"\n\n'
                    f'[[host]]\nname = "{name}"\naddress = "10.0.0.2"\n')  # fmt: skip
    with pytest.raises(InputError) as err:
        load_inventory(path)
    assert f"{path}:6: key 'host[1].name': '{name}' is reserved" in str(err.value)


def test_a_switch_or_scheduler_host_named_local_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "inv.toml"
    path.write_text('[scheduler]\nkind = "slurm"\nhost = "local"\n\n'
                    '[[switch]]\nname = "local"\nrole = "spine"\n\n'
                    '[[host]]\nname = "gpu-001"\naddress = "10.0.0.1"\n')  # fmt: skip
    with pytest.raises(InputError) as err:
        load_inventory(path)
    text = str(err.value)
    assert "'scheduler.host': 'local' is reserved; omit host" in text
    assert "'switch[0].name': 'local' is reserved" in text


def test_gateway_and_prefix_syntax() -> None:
    assert parse_gateways(["spine2=10.0.2.1", "spine1= 10.0.1.1 "]) == {
        "10.0.2.1": "spine2",
        "10.0.1.1": "spine1",
    }
    with pytest.raises(InputError, match=r"'10\.0\.2\.300' is not an IP address"):
        parse_gateways(["spine2=10.0.2.300"])
    with pytest.raises(InputError, match="given for both spine1 and spine2"):
        parse_gateways(["spine1=10.0.2.1", "spine2=10.0.2.1"])
    assert check_prefix("10.0.0.0/8") == "10.0.0.0/8"
    with pytest.raises(InputError, match=r"--prefix '10\.0\.0\.1/8': not a network"):
        check_prefix("10.0.0.1/8")
