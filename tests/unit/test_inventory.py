"""The inventory: the model, its overrides and topology, and every kind of rejection."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cwctl.cli import app
from cwctl.config.tomlcheck import key_lines
from cwctl.errors import InputError
from cwctl.inventory import (
    Host,
    InventoryError,
    ProbeSettings,
    Switch,
    load_inventory,
    parse_inventory,
    summarize,
)
from cwctl.inventory.model import SECTIONS, section_keys

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "inventories"
EXAMPLE = ROOT / "inventory.example.toml"
BROKEN = sorted((DATA / "broken").glob("*.toml"))


def _expectations(path: Path) -> list[str]:
    """The `# expect: <fragment>` lines at the top of a broken inventory."""
    out = []
    for line in path.read_bytes().decode("utf-8", "replace").splitlines():
        if not line.startswith("# expect: "):
            break
        out.append(line.removeprefix("# expect: "))
    return out


# --- the example and the model -----------------------------------------------------------


def test_example_loads_with_every_section() -> None:
    inv = load_inventory(EXAMPLE)
    assert [h.name for h in inv.hosts] == [f"gpu-00{i}" for i in range(1, 7)]
    assert [s.name for s in inv.switches] == ["spine1", "spine2", "leaf1", "leaf2"]
    assert inv.ssh.user == "ops"
    assert inv.ssh.jump == "bastion.example.com"
    assert inv.ssh.connect_timeout == 10.0
    assert inv.probe == ProbeSettings()  # the example shows the defaults (cwctl/settings.py)
    assert inv.scheduler.kind == "slurm" and inv.scheduler.host == "slurm-ctl"
    assert inv.host("gpu-001").nics == ("mlx5_0", "mlx5_1")
    assert inv.host("gpu-001").gpus == 8
    assert inv.path == EXAMPLE


# every section of the file and the keys the loader accepts in it
LOADER_KEYS = [(section, section_keys(section)) for section in SECTIONS]


def test_example_sets_every_key_the_loader_knows() -> None:
    """The example shows every key: each key path the loader accepts appears in it."""
    text = EXAMPLE.read_text()
    lines = key_lines(text)
    shown = {re.sub(r"\[\d+\]", "", k) for k in lines}
    # keys whose absence means something (the budget's rate and window) are shown commented
    shown |= {f"probe.{m}" for m in re.findall(r"^# (\w+) = ", text, re.MULTILINE)}
    for table, keys in LOADER_KEYS:
        for key in keys:
            assert f"{table}.{key}" in shown, f"{table}.{key} missing from the example"


def test_every_key_is_documented() -> None:
    doc = (ROOT / "docs" / "inventory.md").read_text()
    for table, keys in LOADER_KEYS:
        for key in keys:
            assert f"`{key}`" in doc, f"{table}.{key} is not in docs/inventory.md"


def test_defaults_from_a_minimal_inventory() -> None:
    inv = load_inventory(DATA / "valid" / "minimal.toml")
    assert inv.hosts == (Host(name="node1", address="127.0.0.1"),)
    assert inv.switches == ()
    assert inv.ssh.port == 22 and inv.ssh.user is None and inv.ssh.known_hosts is None
    assert inv.ssh.concurrency == 128 and inv.ssh.python == "python3"
    assert inv.probe.port == 0 and inv.probe.rate is None and inv.probe.budget is None
    assert inv.scheduler.kind == "none" and inv.scheduler.host is None
    assert inv.topology() is None


def test_host_overrides_and_endpoint() -> None:
    inv = load_inventory(DATA / "valid" / "overrides.toml")
    a, b, c = inv.endpoint("a"), inv.endpoint("b"), inv.endpoint(inv.host("c"))
    assert (a.user, a.port, a.python) == ("root", 22, "python3.12")
    assert (b.user, b.port, b.python) == ("ops", 2200, "python3.12")
    assert (c.user, c.port, c.python) == ("ops", 2200, "/usr/bin/python3")
    assert inv.host("b").port is None  # the model keeps "not given" apart from the default


def test_paths_are_expanded_and_resolved_against_the_inventory() -> None:
    inv = load_inventory(DATA / "valid" / "overrides.toml")
    assert inv.ssh.identity == str(DATA / "valid" / "keys" / "id_ed25519")
    assert inv.ssh.known_hosts == os.path.join(os.path.expanduser("~"), "kh")


def test_relative_path_from_another_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "inv").mkdir()
    (tmp_path / "inv" / "i.toml").write_text(
        '[ssh]\nidentity = "../k/id"\n[[host]]\nname = "a"\naddress = "h"\n'
    )
    monkeypatch.chdir(tmp_path / "inv")
    assert load_inventory("i.toml").ssh.identity == str(tmp_path / "k" / "id")


def test_topology_from_switches() -> None:
    topo = load_inventory(EXAMPLE).topology()
    assert topo is not None
    assert topo.leaf_of["gpu-001"] == "leaf1" and topo.leaf_of["gpu-006"] == "leaf2"
    assert topo.uplinks == {"leaf1": ("spine1", "spine2"), "leaf2": ("spine1", "spine2")}
    assert topo.leaves == ["leaf1", "leaf2"] and topo.spines == ["spine1", "spine2"]
    assert topo.nics["gpu-003"] == ("mlx5_0", "mlx5_1")


def test_leaf_without_uplinks_is_a_topology_leaf() -> None:
    inv = parse_inventory(
        '[[switch]]\nname = "tor"\nrole = "leaf"\n'
        '[[host]]\nname = "a"\naddress = "h1"\nleaf = "tor"\n'
        '[[host]]\nname = "b"\naddress = "h2"\n'
    )
    assert inv.switches == (Switch(name="tor", role="leaf"),)
    topo = inv.topology()
    assert topo is not None and topo.leaf_of == {"a": "tor"} and topo.uplinks == {"tor": ()}


def test_host_lookup_names_the_missing_host() -> None:
    inv = load_inventory(EXAMPLE)
    with pytest.raises(InputError, match="no host named 'gpu-999'"):
        inv.host("gpu-999")


def test_summary_lists_hosts_per_leaf_switches_scheduler_and_probe() -> None:
    text = summarize(load_inventory(EXAMPLE))
    assert "6 hosts, 4 switches (2 leaves, 2 spines)" in text
    assert re.search(r"leaf1\s+3\s+gpu-001, gpu-002, gpu-003", text)
    assert re.search(r"leaf2\s+3\s+gpu-004, gpu-005, gpu-006", text)
    assert re.search(r"leaf1\s+leaf\s+uplinks spine1, spine2", text)
    assert "scheduler: slurm on slurm-ctl" in text
    assert "probe: each command's budget (scan quick, tui watch), 10 peers per host" in text
    assert "1 host overrides user, port or python" in text


def test_summary_of_hosts_without_leaves() -> None:
    text = summarize(load_inventory(DATA / "valid" / "minimal.toml"))
    assert re.search(r"\(no leaf\)\s+1\s+node1", text)
    assert "scheduler: none" in text


def test_same_address_on_another_port_is_another_host() -> None:
    inv = parse_inventory(
        '[[host]]\nname = "a"\naddress = "127.0.0.1"\nport = 2201\n'
        '[[host]]\nname = "b"\naddress = "127.0.0.1"\nport = 2202\n'
    )
    assert [inv.endpoint(h).port for h in inv.hosts] == [2201, 2202]


def test_fabric_addresses_map_to_switches_and_host_nics() -> None:
    inv = load_inventory(EXAMPLE)
    switch_of = inv.switch_of_address()
    assert switch_of["10.0.11.2"] == "spine1" and switch_of["10.0.22.2"] == "spine2"
    assert switch_of["10.0.12.1"] == "leaf1" and switch_of["10.2.1.1"] == "leaf2"
    assert len(switch_of) == 2 + 2 + 4 + 4
    host_of = inv.host_of_address()
    assert host_of["10.1.2.2"] == ("gpu-001", "mlx5_1")
    assert host_of["10.1.1.4"] == ("gpu-003", None)  # one probe address, no NIC named
    assert inv.host("gpu-001").probe_binds() == (("mlx5_0", "10.1.1.2"), ("mlx5_1", "10.1.2.2"))
    topo = inv.topology()
    assert topo is not None
    assert topo.switch_of_address == switch_of and topo.host_of_address == host_of


def test_probe_address_defaults_to_the_ssh_address() -> None:
    inv = parse_inventory('[[host]]\nname = "a"\naddress = "10.9.0.1"\n')
    assert inv.host("a").probe_binds() == ((None, "10.9.0.1"),)
    assert inv.host_of_address() == {"10.9.0.1": ("a", None)}


def test_addresses_are_kept_in_canonical_form() -> None:
    inv = parse_inventory(
        '[[switch]]\nname = "s"\nrole = "spine"\naddresses = ["FE80::0001", " 10.0.0.1"]\n'
        '[[host]]\nname = "a"\naddress = "h"\nprobe_address = "2001:DB8::0:1"\n'
    )
    assert inv.switch("s").addresses == ("fe80::1", "10.0.0.1")
    assert inv.host("a").probe_address == "2001:db8::1"


def test_switch_endpoint_fills_gaps_from_ssh() -> None:
    inv = load_inventory(EXAMPLE)
    leaf1, leaf2 = inv.switch_endpoint("leaf1"), inv.switch_endpoint(inv.switch("leaf2"))
    assert (leaf1.address, leaf1.user, leaf1.port, leaf1.python) == (
        "192.168.100.11",
        "root",
        22,
        "python3",
    )
    assert (leaf2.address, leaf2.user, leaf2.port) == ("192.168.100.12", "ops", 22)
    assert inv.switch("leaf1").kind == "linux" and inv.switch("spine1").kind is None
    with pytest.raises(InputError, match="switch 'spine1' has no kind/address"):
        inv.switch_endpoint("spine1")
    with pytest.raises(InputError, match="no switch named 'spine9'"):
        inv.switch("spine9")


def test_hosts_sharing_an_ssh_address_may_share_it_as_probe_address() -> None:
    inv = parse_inventory(
        '[[host]]\nname = "a"\naddress = "127.0.0.1"\nport = 2201\n'
        '[[host]]\nname = "b"\naddress = "127.0.0.1"\nport = 2202\n'
    )
    assert [h.probe_binds() for h in inv.hosts] == [((None, "127.0.0.1"),)] * 2


# --- rejections ----------------------------------------------------------------------------


def test_there_are_enough_broken_inventories() -> None:
    assert len(BROKEN) >= 10
    for path in BROKEN:
        assert _expectations(path), f"{path.name} has no '# expect:' line"


@pytest.mark.parametrize("path", BROKEN, ids=[p.stem for p in BROKEN])
def test_broken_inventory_is_rejected_with_its_message(path: Path) -> None:
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    problems = caught.value.problems
    for fragment in _expectations(path):
        assert any(fragment in p for p in problems), (fragment, problems)
    for problem in problems:
        assert re.match(rf"{re.escape(str(path))}:\d+: ", problem), problem


@pytest.mark.parametrize("path", BROKEN, ids=[p.stem for p in BROKEN])
def test_broken_inventory_exits_2_through_the_cli(path: Path) -> None:
    result = CliRunner().invoke(app, ["inventory", "check", "-i", str(path)])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines and all(line.startswith(f"cwctl: {path}:") for line in lines), lines
    for fragment in _expectations(path):
        assert fragment in result.stderr
    assert "Traceback" not in result.output


def test_all_problems_are_reported_together_in_line_order() -> None:
    path = DATA / "broken" / "many_problems.toml"
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    lines = [int(p.split(":")[1]) for p in caught.value.problems]
    assert len(lines) == 5 and lines == sorted(lines)


def home_with_a_key(directory: Path) -> dict[str, str]:
    """HOME where the example's identity (~/.ssh/id_ed25519) is readable: inventory check
    reads it, as a scan does."""
    (directory / ".ssh").mkdir()
    (directory / ".ssh" / "id_ed25519").write_text("")
    return {"HOME": str(directory)}


def test_example_checks_clean_through_the_cli(tmp_path: Path) -> None:
    home = home_with_a_key(tmp_path)
    result = CliRunner().invoke(app, ["inventory", "check", "-i", str(EXAMPLE)], env=home)
    assert result.exit_code == 0, result.output
    assert "6 hosts" in result.stdout and result.stderr == ""


def test_inventory_from_the_environment(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["inventory", "check"], env={"CWCTL_INVENTORY": str(DATA / "valid" / "minimal.toml")}
    )
    assert result.exit_code == 0, result.output
    assert "node1" in result.stdout


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match=r"nope\.toml: no such file"):
        load_inventory(tmp_path / "nope.toml")


def test_directory_instead_of_a_file(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="is a directory"):
        load_inventory(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "secret.toml"
    path.write_text('[[host]]\nname = "a"\naddress = "b"\n')
    path.chmod(0)
    with pytest.raises(InventoryError, match=r"secret\.toml: cannot read: Permission denied"):
        load_inventory(path)


def test_path_through_a_file(tmp_path: Path) -> None:
    """A path whose parent is a file cannot be read, for root too."""
    (tmp_path / "plain").write_text("x")
    with pytest.raises(InventoryError, match=r"cannot read: Not a directory"):
        load_inventory(tmp_path / "plain" / "inventory.toml")


def test_syntax_error_at_end_of_file_names_the_last_line() -> None:
    with pytest.raises(InventoryError) as caught:
        parse_inventory('[[host]]\nname = "a"\naddress = [\n', label="f.toml")
    assert caught.value.problems == ["f.toml:3: TOML syntax error: Invalid value (at end of file)"]


def test_array_table_under_host_is_an_unknown_key_with_its_line() -> None:
    text = '[[host]]\nname = "a"\naddress = "h"\n\n[host.extra]\nx = 1\n'
    with pytest.raises(InventoryError) as caught:
        parse_inventory(text, label="f.toml")
    assert caught.value.problems == ["f.toml:5: key 'host[0].extra': unknown key"]


def test_inline_host_array_points_at_its_key() -> None:
    text = 'host = [\n  { name = "a", address = "h", lef = "x" },\n]\n'
    with pytest.raises(InventoryError) as caught:
        parse_inventory(text, label="f.toml")
    assert caught.value.problems == [
        "f.toml:1: key 'host[0].lef': unknown key (did you mean 'leaf'?)"
    ]


def test_empty_host_array() -> None:
    with pytest.raises(InventoryError, match="key 'host': the host array is empty"):
        parse_inventory("host = []\n", label="f.toml")


def test_host_entry_that_is_not_a_table() -> None:
    with pytest.raises(InventoryError, match=r"key 'host\[0\]': must be a table, not an integer"):
        parse_inventory("host = [1]\n", label="f.toml")


def test_nics_must_be_strings() -> None:
    text = '[[host]]\nname = "a"\naddress = "h"\nnics = ["ok", 3]\n'
    with pytest.raises(InventoryError, match=r"f.toml:4: key 'host\[0\]\.nics\[1\]'"):
        parse_inventory(text, label="f.toml")


def test_key_lines_follows_headers_and_skips_multiline_strings() -> None:
    text = (
        '[ssh]\nuser = "x"\n[[host]]\nname = """\nport = 9\n"""\naddress = "a"\n'
        '[[host]]\n"name" = "b"\nssh.port = 3\n'
    )
    lines = key_lines(text)
    assert lines["ssh"] == 1 and lines["ssh.user"] == 2
    assert lines["host[0]"] == 3 and lines["host[0].name"] == 4
    assert "host[0].port" not in lines  # inside the multi-line string
    assert lines["host[0].address"] == 7
    assert lines["host[1].name"] == 9 and lines["host[1].ssh.port"] == 10


def test_typo_of_a_key_from_another_section_names_that_section() -> None:
    text = '[[host]]\nname = "a"\naddress = "h"\nconcurency = 3\n'
    with pytest.raises(InventoryError) as caught:
        parse_inventory(text, label="f.toml")
    assert caught.value.problems == [
        "f.toml:4: key 'host[0].concurency': unknown key (did you mean 'concurrency', in [ssh]?)"
    ]


def test_summary_of_a_big_leaf_shows_its_ends() -> None:
    hosts = "".join(f'[[host]]\nname = "n{i:03}"\naddress = "10.0.0.{i}"\n' for i in range(1, 21))
    text = summarize(parse_inventory(hosts))
    assert re.search(r"\(no leaf\)\s+20\s+n001, n002, n003, \.\.\., n019, n020$", text, re.M)


def test_switches_and_hosts_override_ssh_defaults_alike() -> None:
    inv = parse_inventory(
        '[ssh]\nuser = "ops"\nport = 2200\npython = "python3.12"\n\n'
        '[[switch]]\nname = "leaf1"\nrole = "leaf"\nkind = "linux"\naddress = "192.0.2.1"\n'
        'port = 2222\npython = "/usr/bin/python3"\n\n'
        '[[switch]]\nname = "leaf2"\nrole = "leaf"\nkind = "linux"\naddress = "192.0.2.2"\n'
        'user = "root"\n\n'
        '[[host]]\nname = "a"\naddress = "192.0.2.11"\nleaf = "leaf1"\nport = 2222\n'
        'python = "/usr/bin/python3"\n\n'
        '[[host]]\nname = "b"\naddress = "192.0.2.12"\nleaf = "leaf2"\nuser = "root"\n'
    )
    ends = [inv.switch_endpoint("leaf1"), inv.switch_endpoint("leaf2")]
    ends += [inv.endpoint("a"), inv.endpoint("b")]
    reach = {e.name: (e.address, e.user, e.port, e.python) for e in ends}
    assert reach == {
        "leaf1": ("192.0.2.1", "ops", 2222, "/usr/bin/python3"),
        "leaf2": ("192.0.2.2", "root", 2200, "python3.12"),
        "a": ("192.0.2.11", "ops", 2222, "/usr/bin/python3"),
        "b": ("192.0.2.12", "root", 2200, "python3.12"),
    }
