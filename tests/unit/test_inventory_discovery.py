"""`cwctl inventory check` says what the inventory lacks for path discovery."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from cwctl.cli import app
from cwctl.inventory import parse_inventory
from cwctl.inventory.discovery import discovery_gaps

ROOT = Path(__file__).resolve().parents[2]

SWITCHES = """
[[switch]]
name = "spine1"
role = "spine"
addresses = ["10.0.11.2"]

[[switch]]
name = "spine2"
role = "spine"

[[switch]]
name = "leaf1"
role = "leaf"
uplinks = ["spine1", "spine2"]
addresses = ["10.1.1.1", "10.0.11.1"]
"""


def test_every_gap_is_named_with_the_elements_it_concerns() -> None:
    inv = parse_inventory(
        SWITCHES
        + '[[host]]\nname = "a"\naddress = "192.168.0.1"\nleaf = "leaf1"\n'
        + 'probe_address = "10.1.1.2"\n'
        + '[[host]]\nname = "b"\naddress = "192.168.0.2"\nnics = ["eth1", "eth2"]\n'
    )
    gaps = discovery_gaps(inv)
    assert any(g.startswith("switches without addresses") and g.endswith("spine2") for g in gaps)
    assert any(g.startswith("hosts without probe_address") and g.endswith(": b") for g in gaps)
    assert any(g.startswith("hosts with several NICs") and g.endswith(": b") for g in gaps)
    assert any(g.startswith("hosts without a leaf") and g.endswith(": b") for g in gaps)
    assert len(gaps) == 4


def test_a_complete_inventory_lacks_nothing() -> None:
    inv = parse_inventory(
        SWITCHES.replace('role = "spine"\n\n', 'role = "spine"\naddresses = ["10.0.12.2"]\n\n')
        + '[[host]]\nname = "a"\naddress = "192.168.0.1"\nleaf = "leaf1"\nnics = ["e1", "e2"]\n'
        + 'probe_addresses = ["10.1.1.2", "10.1.2.2"]\n'
    )
    assert discovery_gaps(inv) == []


def test_discovery_off_says_why() -> None:
    no_addresses = parse_inventory('[[host]]\nname = "a"\naddress = "h"\n')
    assert discovery_gaps(no_addresses)[0].startswith("off: no [[switch]] lists its addresses")
    off = parse_inventory(
        SWITCHES + '[probe]\ntrace = false\n[[host]]\nname = "a"\naddress = "h"\n'
    )
    assert discovery_gaps(off) == ["off ([probe] trace = false): flows' paths stay unknown"]


def test_inventory_check_prints_the_discovery_lines(tmp_path: Path) -> None:
    (tmp_path / ".ssh").mkdir()  # the example's identity, readable (inventory check reads it)
    (tmp_path / ".ssh" / "id_ed25519").write_text("")
    result = CliRunner().invoke(
        app, ["inventory", "check", "-i", str(ROOT / "inventory.example.toml")],
        env={"HOME": str(tmp_path)},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "path discovery: on, 12 switch addresses, switches answer 1 ICMP/s" in result.stdout
    # 3 hosts a leaf, 10 peers (5 others), 4 ports, 2 spines at 1/s after 12 at once
    assert "  about 1 scan of 2 s to learn every spine a host's flows cross" in result.stdout
    lacks = [line for line in lines if line.startswith("  lacks: ")]
    assert lacks == [
        "  lacks: hosts with several NICs but one probe address (a bad NIC is named as the "
        "host; give probe_addresses, one per NIC): gpu-003"
    ]
