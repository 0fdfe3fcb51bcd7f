"""Record files: round trip (plain and gzip), replay = live analysis, damage refused."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cwctl.errors import RecordError
from cwctl.fabric.topology import Topology, assign_peers, leaf_spine
from cwctl.records import PathRecord, PathTable, ProbeRecord, ProbeTableBuilder
from cwctl.scan.collection import Collection, HostInfo, HostStatus
from cwctl.scan.recordfile import BATCH_ROWS, FILE_FORMAT, read_collection, write_collection
from cwctl.scan.truthpaths import plain_truth
from cwctl.session import analyse

T0 = 1_700_000_000_000_000_000
DATA = Path(__file__).resolve().parents[1] / "data" / "records"


def _with_addresses(topo: Topology, names: list[str]) -> Topology:
    """The topology with fabric addresses, as an inventory with ``addresses`` gives it."""
    switch_of = {f"10.0.{k}.1": leaf for k, leaf in enumerate(topo.leaves)}
    switch_of |= {f"10.9.{j}.1": spine for j, spine in enumerate(topo.spines)}
    host_of: dict[str, tuple[str, str | None]] = {
        f"10.1.0.{i + 1}": (h, "mlx5_0") for i, h in enumerate(names)
    }
    return Topology(
        leaf_of=topo.leaf_of,
        uplinks=topo.uplinks,
        nics=topo.nics,
        switch_of_address=switch_of,
        host_of_address=host_of,
    )


def _paths(peers: dict[str, list[str]]) -> PathTable:
    """A forward and a reverse trace of every probed pair's first port, one hop silent."""
    table = PathTable()
    for n, (src, dsts) in enumerate(sorted(peers.items())):
        for dst in dsts:
            for role, host, peer in (("probe", src, dst), ("reply", dst, src)):
                table.add(
                    PathRecord(
                        host=host,
                        peer=peer,
                        role=role,  # type: ignore[arg-type]
                        src="10.1.0.1" if host == src else "10.1.0.2",
                        sport=40000 if role == "probe" else 50000,
                        dst="10.1.0.2" if host == src else "10.1.0.1",
                        dport=50000 if role == "probe" else 40000,
                        hops=("10.0.0.1", None if n % 2 else "10.9.1.1", "10.0.1.1"),
                        complete=bool(n % 3),
                        t_ns=T0 + n,
                        cached=bool(n % 2),
                        nic="mlx5_0",
                    )
                )
    return table


def synthetic_collection(n_hosts: int = 6, pairs: int = 30, seed: int = 3) -> Collection:
    """Probe records as a fabric with known clock offsets and noisy delays would give."""
    rng = np.random.default_rng(seed)
    names, topo = leaf_spine(n_hosts, hosts_per_leaf=3, n_spines=2)
    offset = {h: int(rng.integers(-50_000, 50_000)) for h in names}
    peers = assign_peers(names, 3, seed=seed, leaf_of=topo.leaf_of)
    builder = ProbeTableBuilder(names)
    for src, dsts in peers.items():
        for dst in dsts:
            for pair in range(pairs):
                for idx in (0, 1):
                    t1 = T0 + pair * 10_000_000 + idx * 20_000 + offset[src]
                    d_fwd, d_rev = (int(x) for x in 5_000 + rng.exponential(800, 2))
                    lost = rng.random() < 0.03
                    t2 = t1 - offset[src] + d_fwd + offset[dst]
                    t3 = t2 + 30_000
                    t4 = t3 - offset[dst] + d_rev + offset[src]
                    builder.add(
                        ProbeRecord(
                            src=src,
                            dst=dst,
                            sport=40000 + pair % 4,
                            pair=pair,
                            idx=idx,
                            gap_ns=20_000,
                            ts="sw",
                            t1=t1,
                            t2=None if lost else t2,
                            t3=None if lost else t3,
                            t4=None if lost else t4,
                            nic="mlx5_0" if idx else None,
                        )
                    )
    hosts = [
        HostInfo(h, f"10.0.0.{i + 1}", topo.leaf_of[h], ("mlx5_0",)) for i, h in enumerate(names)
    ]
    status = {h: HostStatus() for h in names}
    status[names[-1]] = HostStatus("error", f"{names[-1]} line 9: not a JSON record")
    return Collection(
        source="local",
        hosts=hosts,
        table=builder.build(),
        duration_s=0.3,
        status=status,
        topology=_with_addresses(topo, names),
        paths=_paths(peers),
        hello={
            h: {"type": "hello", "v": 1, "host": h, "kernel": "6.1", "port": 5000} for h in names
        },
        gpu={names[0]: [{"type": "gpu", "v": 1, "host": names[0], "status": "no-gpu", "gpus": []}]},
        summaries={h: {"type": "summary", "v": 1, "host": h, "sent": {}} for h in names},
        peers=peers,
        truth={"offset_ns": offset, "faults": []},
        params={"rate": 100.0, "gap_ns": 20000, "ports": 4},
    )


def assert_same_collection(a: Collection, b: Collection) -> None:
    assert b.source == f"replay:{a.source}"
    assert b.hosts == a.hosts
    assert b.table.hosts == a.table.hosts
    for name in ("src", "dst", "sport", "pair", "idx", "gap_ns", "ts", "t1", "t2", "t3", "t4"):
        np.testing.assert_array_equal(getattr(b.table, name), getattr(a.table, name))
    assert [b.table.nics[i] if i >= 0 else None for i in b.table.nic] == [
        a.table.nics[i] if i >= 0 else None for i in a.table.nic
    ]
    assert b.status == a.status
    assert b.topology == a.topology
    assert b.hello == a.hello
    assert b.gpu == a.gpu
    assert b.summaries == a.summaries
    assert b.peers == a.peers
    assert b.truth == a.truth
    assert b.params == a.params
    assert b.duration_s == a.duration_s
    assert sorted(b.paths, key=repr) == sorted(a.paths, key=repr)


@pytest.mark.parametrize("packed", [True, False])  # False: list columns, as before issue 36
@pytest.mark.parametrize("batch_rows", [BATCH_ROWS, 7, 0])  # 0: one probe line per row
@pytest.mark.parametrize("name", ["scan.jsonl", "scan.jsonl.gz"])
def test_round_trip(tmp_path: Path, name: str, batch_rows: int, packed: bool) -> None:
    c = synthetic_collection()
    path = tmp_path / name
    write_collection(c, path, batch_rows=batch_rows, packed=packed)
    if packed and batch_rows:  # the varying integer columns are packed strings
        with gzip.open(path, "rt") if name.endswith(".gz") else path.open() as f:
            batch = next(json.loads(x) for x in f if x.startswith('{"type":"probes"'))
        assert isinstance(batch["t1"], str) and isinstance(batch["dst"], str)
    if name.endswith(".gz"):
        assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert_same_collection(c, read_collection(path))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left


def test_header_names_hosts_topology_and_status(tmp_path: Path) -> None:
    c = synthetic_collection()
    path = tmp_path / "scan.jsonl"
    write_collection(c, path)
    header = json.loads(path.read_text().splitlines()[0])
    assert header["type"] == "header"
    assert header["format"] == FILE_FORMAT
    assert [h["name"] for h in header["hosts"]] == c.host_names
    assert header["hosts"][0]["address"] == "10.0.0.1"
    assert header["topology"]["leaf_of"] == dict(c.topology.leaf_of)
    assert header["status"][c.host_names[-1]]["status"] == "error"
    assert header["records"] == len(path.read_text().splitlines()) - 1


def comparable_snapshot(snapshot: dict[str, Any]) -> str:
    """The snapshot JSON without what legitimately differs: the source, the solver's
    own wall-clock timings (``sync.fit_s``, ``sync.solve_s``) and a replay's capture time."""
    out = dict(snapshot)
    out.pop("source")
    # a replay says when its records were captured (the file's header); the live scan
    # has no file to say it
    out["telemetry"] = {k: v for k, v in out.get("telemetry", {}).items() if k != "captured_ns"}
    out["sync"] = {k: v for k, v in out.get("sync", {}).items() if not k.endswith("_s")}
    return json.dumps(out, sort_keys=True)


def test_replay_gives_the_live_snapshot(tmp_path: Path) -> None:
    c = synthetic_collection()
    path = tmp_path / "scan.jsonl.gz"
    write_collection(c, path)
    live = analyse(c).to_json()
    replayed = analyse(read_collection(path)).to_json()
    assert replayed["source"] == "replay:local"
    assert live["hosts"] and live["paths"]
    assert comparable_snapshot(replayed) == comparable_snapshot(live)


def _write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(lines))


def _saved_lines(tmp_path: Path, batch_rows: int = BATCH_ROWS, packed: bool = True) -> list[str]:
    path = tmp_path / "good.jsonl"
    c = synthetic_collection(n_hosts=4, pairs=3)
    write_collection(c, path, batch_rows=batch_rows, packed=packed)
    return path.read_text().splitlines(keepends=True)


def test_garbage_line_refused_with_its_number(tmp_path: Path) -> None:
    lines = _saved_lines(tmp_path)
    lines[6] = "this is not json\n"
    bad = tmp_path / "bad.jsonl"
    _write_lines(bad, lines)
    with pytest.raises(RecordError, match=r"bad\.jsonl line 7: not a JSON record"):
        read_collection(bad)


def test_bad_probe_field_refused_with_its_number(tmp_path: Path) -> None:
    lines = _saved_lines(tmp_path, batch_rows=0)
    n = next(i for i, line in enumerate(lines) if '"type":"probe"' in line)
    lines[n] = lines[n].replace('"idx":', '"idx":7,"x":')
    bad = tmp_path / "bad.jsonl"
    _write_lines(bad, lines)
    with pytest.raises(RecordError, match=rf"line {n + 1}: key 'idx'"):
        read_collection(bad)


def test_bad_batch_column_refused_with_its_number(tmp_path: Path) -> None:
    lines = _saved_lines(tmp_path, batch_rows=5, packed=False)
    n = [i for i, line in enumerate(lines) if '"type":"probes"' in line][2]
    lines[n] = re.sub(r'"t1":\[\d+', '"t1":[-3', lines[n], count=1)
    bad = tmp_path / "bad.jsonl"
    _write_lines(bad, lines)
    match = rf"bad\.jsonl line {n + 1}: probes column 't1': row 0: -3 is not in"
    with pytest.raises(RecordError, match=match):
        read_collection(bad)


def test_batches_make_smaller_files_than_probe_lines(tmp_path: Path) -> None:
    c = synthetic_collection()
    batched, single = tmp_path / "b.jsonl", tmp_path / "s.jsonl"
    write_collection(c, batched)
    write_collection(c, single, batch_rows=0)
    assert batched.stat().st_size < 0.6 * single.stat().st_size
    assert len(batched.read_text().splitlines()) < len(c.table) // 10


def test_truncated_mid_line_refused(tmp_path: Path) -> None:
    lines = _saved_lines(tmp_path)
    bad = tmp_path / "cut.jsonl"
    _write_lines(bad, [*lines[:-3], lines[-3][:20]])
    with pytest.raises(RecordError, match=rf"line {len(lines) - 2}"):
        read_collection(bad)


def test_truncated_at_a_line_end_refused(tmp_path: Path) -> None:
    lines = _saved_lines(tmp_path)
    bad = tmp_path / "cut.jsonl"
    _write_lines(bad, lines[:-4])
    with pytest.raises(RecordError, match=r"truncated: the header announces"):
        read_collection(bad)


def test_truncated_gzip_refused(tmp_path: Path) -> None:
    path = tmp_path / "scan.jsonl.gz"
    write_collection(synthetic_collection(), path)
    data = path.read_bytes()
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(RecordError, match=r"cut\.jsonl\.gz line \d+: truncated or corrupt gzip"):
        read_collection(cut)


@pytest.mark.parametrize(
    ("first", "message"),
    [
        ("", "empty file"),
        ("hello\n", "no JSON header"),
        ('{"type": "probe"}\n', "first line is not a header"),
        ('{"type": "header", "format": "cwctl.records/9"}\n', "unsupported record file format"),
        ('{"type": "header", "format": "cwctl.records/1", "source": "x"}\n', "'hosts'"),
    ],
)
def test_bad_header_refused_naming_line_1(tmp_path: Path, first: str, message: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(first)
    with pytest.raises(RecordError, match=message) as info:
        read_collection(bad)
    assert "line 1" in str(info.value)


def test_plain_file_named_gz_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl"
    write_collection(synthetic_collection(n_hosts=4, pairs=2), path)
    fake = tmp_path / "fake.jsonl.gz"
    fake.write_bytes(path.read_bytes())
    with pytest.raises(RecordError, match="gzip"):
        read_collection(fake)


def test_gzip_stream_is_the_same_text(tmp_path: Path) -> None:
    c = synthetic_collection(n_hosts=4, pairs=2)
    plain, packed = tmp_path / "a.jsonl", tmp_path / "a.jsonl.gz"
    write_collection(c, plain)
    write_collection(c, packed)
    a = plain.read_text().splitlines()[1:]
    b = gzip.decompress(packed.read_bytes()).decode().splitlines()[1:]
    assert a == b


def test_simulated_scan_replays_identically(tmp_path: Path) -> None:
    from cwctl.scan.request import SimOptions
    from cwctl.transport.sim import simulate

    c = simulate(SimOptions(hosts=8, hosts_per_leaf=4, spines=2, seed=5), 0.3)
    path = tmp_path / "sim.jsonl.gz"
    write_collection(c, path)
    replayed = read_collection(path)
    assert replayed.source == "replay:sim"
    assert c.truth is not None
    assert replayed.truth == json.loads(json.dumps(plain_truth(c.truth)))
    assert replayed.topology == c.topology
    live = comparable_snapshot(analyse(c).to_json())
    assert comparable_snapshot(analyse(replayed).to_json()) == live


def test_paths_and_fabric_addresses_survive_the_round_trip(tmp_path: Path) -> None:
    c = synthetic_collection()
    assert len(c.paths) > 0 and c.topology is not None and c.topology.switch_of_address
    path = tmp_path / "scan.jsonl"
    write_collection(c, path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert sum(rec["type"] == "path" for rec in lines) == len(c.paths)
    back = read_collection(path)
    assert back.topology == c.topology
    for p in c.paths:
        if p.role == "probe":
            assert back.paths.forward(p.host, p.peer, p.sport, nic=p.nic) == p
        else:
            assert back.paths.reverse(p.peer, p.host, p.dport, nic=p.nic) == p
    assert any(None in p.hops for p in back.paths)  # silent hops stay null


def test_a_version_1_file_still_reads(tmp_path: Path) -> None:
    """A file the previous cwctl wrote (format /1, no path records, no address maps)."""
    old = read_collection(DATA / "v1-local-4hosts.jsonl")
    assert old.source == "replay:local" and len(old.table) > 0
    assert len(old.paths) == 0
    assert old.topology is not None and old.topology.switch_of_address == {}
    assert analyse(old).records == len(old.table)
    # and written again, it is a /2 file with the same content
    again = tmp_path / "again.jsonl"
    write_collection(old, again)
    assert (
        json.loads(again.read_text().splitlines()[0])["format"]
        == FILE_FORMAT
        == ("cwctl.records/2")
    )
    assert len(read_collection(again).table) == len(old.table)


def test_a_path_record_in_a_version_1_file_is_refused(tmp_path: Path) -> None:
    lines = (DATA / "v1-local-4hosts.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    header["records"] += 1
    rec = next(iter(_paths({"gpu-001": ["gpu-002"]}))).to_json()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([json.dumps(header), *lines[1:], json.dumps(rec)]) + "\n")
    with pytest.raises(RecordError, match=rf"bad\.jsonl line {len(lines) + 1}: a path record"):
        read_collection(bad)


def test_a_malformed_path_record_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "scan.jsonl"
    write_collection(synthetic_collection(n_hosts=4, pairs=2), path)
    lines = path.read_text().splitlines()
    n = next(i for i, line in enumerate(lines) if '"type":"path"' in line)
    lines[n] = (
        lines[n]
        .replace('"role":"probe"', '"role":"sideways"')
        .replace('"role":"reply"', '"role":"sideways"')
    )
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordError, match=rf"line {n + 1}: path key 'role'"):
        read_collection(path)
