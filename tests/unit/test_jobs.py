"""The job map: Slurm's and Kubernetes' outputs parsed (saved outputs), the simulated job
set, which jobs a suspect hurts, and what a plan touches."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cwctl.errors import InputError
from cwctl.fabric.names import sim_host_names
from cwctl.jobs import Job, JobMap, JobRead
from cwctl.jobs.affected import (
    flows_move,
    flows_steered,
    hurt,
    loses_node,
    protected,
    protected_in,
    sits_on,
    touched_json,
)
from cwctl.jobs.k8s import parse_pods
from cwctl.jobs.simjobs import sim_jobs
from cwctl.jobs.slurm import expand_hostlist, parse_squeue, parse_squeue_json
from cwctl.scan.snapshot import Suspect

DATA = Path(__file__).parent.parent / "data"


def test_hostlists_expand_as_scontrol_show_hostnames_does() -> None:
    assert expand_hostlist("gpu-[001-003,009],login-1") == [
        "gpu-001", "gpu-002", "gpu-003", "gpu-009", "login-1",
    ]  # fmt: skip
    assert expand_hostlist("r[1-2]n[08-09]") == ["r1n08", "r1n09", "r2n08", "r2n09"]
    assert expand_hostlist("(null)") == []
    for bad in ("gpu-[3-1]", "gpu-[a-b]", "gpu-[1-2", "gpu-1-2]"):
        with pytest.raises(InputError, match="host list"):
            expand_hostlist(bad)


@given(st.lists(st.integers(0, 999), min_size=1, max_size=30, unique=True))
def test_a_compressed_list_expands_to_its_hosts(numbers: list[int]) -> None:
    numbers.sort()
    runs = []  # Slurm's compression: consecutive numbers as ranges, zero padded to 3
    for _, group in itertools.groupby(enumerate(numbers), lambda t: t[1] - t[0]):
        run = [n for _, n in group]
        runs.append(f"{run[0]:03d}" + (f"-{run[-1]:03d}" if len(run) > 1 else ""))
    text = f"gpu-[{','.join(runs)}]"
    assert expand_hostlist(text) == [f"gpu-{n:03d}" for n in numbers]


def test_squeue_lines_become_jobs_on_inventory_hosts() -> None:
    known = {f"gpu-{i:03d}": f"gpu-{i:03d}" for i in range(1, 12)} | {"sc2835n1": "h1"}
    jobs, skipped = parse_squeue((DATA / "slurm" / "squeue-running.txt").read_text(), known)
    assert skipped == []
    assert [j.id for j in jobs] == ["1", "2", "4471_3", "4480"]
    first = jobs[0]
    assert (first.user, first.name, first.nodes) == ("root", "llama pretrain|x",
                                                     ("sc2835n1", "sc2835n2"))  # fmt: skip
    assert first.hosts == ("h1",)  # sc2835n2 is no inventory host
    assert dict(first.marks) == {"comment": "protected run"}  # QoS (null): unset
    assert jobs[1].hosts == () and dict(jobs[1].marks) == {}
    array = jobs[2]
    assert array.nodes == ("gpu-001", "gpu-002", "gpu-003", "gpu-009", "login-1")
    assert array.hosts == ("gpu-001", "gpu-002", "gpu-003", "gpu-009")
    assert dict(array.marks) == {"qos": "high"}
    assert jobs[3].name == "name with \x1f inside"


def test_a_row_that_is_not_a_jobs_is_skipped_with_a_warning_not_the_read() -> None:
    text = "JOBID PARTITION NAME USER ST TIME NODES NODELIST\n7\x1fbob\x1f\x1fn1\x1f\x1fok\n"
    jobs, skipped = parse_squeue(text, {})
    assert [j.id for j in jobs] == ["7"]
    assert skipped == ["squeue line 1 skipped: not a job's row: 'JOBID PARTITION NAME USER ST "
                       "TIME NODES NODELIST'"]  # fmt: skip


def test_hostile_job_names_split_no_job_in_squeues_json() -> None:
    """Saved from the test Slurm (22.05.8): job 1's name holds U+2028, CR, VT, FS and NEL;
    job 2's a newline and a whole forged row for a job 101 of mallory's."""
    known = {"sq34n1": "h1", "sq34n2": "h2"}
    jobs, skipped = parse_squeue_json((DATA / "slurm" / "squeue-hostile.json").read_text(), known)
    assert skipped == []
    assert [(j.id, j.user, j.hosts) for j in jobs] == [
        ("1", "root", ("h1",)),
        ("2", "root", ("h2",)),
    ]
    assert jobs[0].name == "eval\u2028run\rx\x0bv\x1cs\x85n"
    assert dict(jobs[0].marks) == {"comment": "protected"}
    assert jobs[1].name.startswith("x\n101\x1fmallory")


def test_hostile_job_names_in_squeues_rows_break_only_their_own_row() -> None:
    """The same jobs through -o: job 1 whole (records end at \\n only); job 2's name cut at
    its newline, and the row it forged is read as a job (why --json is read first)."""
    text = (DATA / "slurm" / "squeue-hostile.txt").read_bytes().decode()
    jobs, skipped = parse_squeue(text, {"sq34n1": "h1"})
    assert [j.id for j in jobs] == ["1", "2", "101"]
    assert jobs[0].name == "eval\u2028run\rx\x0bv\x1cs\x85n"
    assert skipped == []


def test_a_job_id_on_two_rows_drops_both() -> None:
    row = "101\x1f{}\x1f\x1fn1\x1f\x1fname\n"
    jobs, skipped = parse_squeue(row.format("alice") + row.format("mallory"), {})
    assert jobs == [] and skipped == ["squeue lines 1, 2 skipped: job 101 on 2 rows"]


def test_squeue_json_that_is_not_json_is_an_error_of_the_read() -> None:
    with pytest.raises(InputError, match="squeue --json: not JSON"):
        parse_squeue_json("squeue: error: unrecognized option '--json'", {})


def test_running_pods_become_workloads_by_node() -> None:
    known = {"gpu-001": "gpu-001", "gpu-002": "gpu-002", "gpu-009": "gpu-009"}
    jobs = {j.id: j for j in parse_pods((DATA / "k8s" / "pods-running.json").read_text(), known)}
    # the DaemonSet's pod, cwctl's own agent pod and the pending pod are no jobs
    assert sorted(jobs) == ["default/debug-shell", "ml-research/llama-70b", "team-b/eval-sweep-7"]
    llama = jobs["ml-research/llama-70b"]
    assert llama.nodes == ("gpu-001.cluster.local", "gpu-009.cluster.local")
    assert llama.hosts == ("gpu-001", "gpu-009")  # by short name
    assert llama.user == "ml-research"
    assert llama.marks["label:cwctl.io/protected"] == "true"
    assert jobs["team-b/eval-sweep-7"].hosts == ("gpu-002",)
    assert jobs["default/debug-shell"].hosts == ()  # login-3 is no inventory host
    with pytest.raises(InputError, match="not JSON"):
        parse_pods("error: You must be logged in", known)


def test_the_simulated_job_set_is_seeded_and_takes_each_host_once() -> None:
    hosts = sim_host_names(64, "gpu")
    a, b = sim_jobs(hosts, 8, 1), sim_jobs(hosts, 8, 1)
    assert a == b and len(a.jobs) == 8
    assert sim_jobs(hosts, 8, 2) != a
    taken = [h for j in a.jobs for h in j.hosts]
    assert len(taken) == len(set(taken)) and set(taken) <= set(hosts)
    assert len(sim_jobs(hosts[:3], 10, 1).jobs) <= 3  # fewer when the hosts run out


def job(i: str, *hosts: str, **marks: str) -> Job:
    return Job(i, "u", f"n{i}", hosts, hosts, marks)


LEAF = {"a1": "leaf1", "a2": "leaf1", "b1": "leaf2", "b2": "leaf2", "c1": "leaf3"}


def test_where_an_element_sits() -> None:
    hosts = list(LEAF)
    assert sits_on("a1", hosts, LEAF) == "a1"
    assert sits_on("a1/mlx5_0", hosts, LEAF) == "a1"
    assert sits_on("a1-leaf1", hosts, LEAF) == "a1"
    assert sits_on("a1-leaf2", hosts, LEAF) is None  # not its access link
    assert sits_on("leaf1-spine2", hosts, LEAF) is None


def test_what_a_plan_touches() -> None:
    jobs = JobMap([job("1", "a1", "b1"), job("2", "a2", "a1"), job("3", "b2", "c1")])
    assert [(j.id, how) for j, how in loses_node(jobs, "a1")] == [
        ("1", "loses node a1"), ("2", "loses node a1"),
    ]  # fmt: skip
    moved = flows_move(jobs, leaves=["leaf1"], spine="spine2", leaf_of=LEAF, what="x")
    assert [j.id for j, _ in moved] == ["1"]  # 2 stays inside leaf1; 3 never reaches it
    assert protected({"comment": "protected"}, ["qos=high", "comment=protected"])
    assert protected({"qos": "normal"}, ["qos=high"]) is None
    assert protected({"label:team": "x"}, ["label:team"]) == "label:team"
    steered = flows_steered(jobs, [("a1", "b1"), ("b1", "a1"), ("a2", "b2")], "spine2")
    assert [(j.id, how.split(" leave")[0]) for j, how in steered] == [
        ("1", "new connections of 2 of its host pairs")
    ]  # 2 has a2 but not b2; 3 has b2 but not a2
    plan = touched_json(moved + loses_node(JobMap([job("7", "c1", qos="high")]), "c1"))
    assert protected_in(plan, ["qos=high"]) == ["7 (qos=high)"]


def test_a_host_suspect_counts_the_pairs_with_an_end_there_and_no_others() -> None:
    import numpy as np

    from cwctl.scan.snapshot import Crossings

    hosts = list(LEAF)
    ix = {h: i for i, h in enumerate(hosts)}
    pair = (np.array([ix["a2"]]), np.array([ix["b1"]]))  # the one probed pair: a2-b1
    c = Crossings(hosts, [LEAF[h] for h in hosts], pair, {"b1": pair, "leaf1-spine1": pair},
                  {"b1": {("leaf1", "leaf2")}, "leaf1-spine1": {("leaf1", "leaf2")}})  # fmt: skip
    jobs = JobMap([job("1", "a1", "b2"), job("2", "a2", "b1", "b2")])
    on_b1 = hurt(Suspect("b1", "host", 0.9, ""), jobs, c, LEAF)
    assert [(j["id"], j["paths_hit"], j["paths"]) for j in on_b1] == [("2", 2, 3)]
    # a fabric element: job 1's unprobed leaf1-leaf2 pair likely crosses it too
    link = hurt(Suspect("leaf1-spine1", "link", 0.9, ""), jobs, c, LEAF)
    assert [(j["id"], j["paths_hit"]) for j in link] == [("2", 2), ("1", 1)]


def test_a_host_suspect_hurts_the_jobs_on_it_even_without_paths() -> None:
    jobs = JobMap([job("1", "a1"), job("2", "b1", "b2")])
    found = hurt(Suspect("a1/mlx5_1", "nic", 0.9, ""), jobs, None, LEAF)
    assert found == [
        {"id": "1", "user": "u", "name": "n1", "nodes": 1, "paths_hit": 0, "paths": 0,
         "on_node": ["a1"]}
    ]  # fmt: skip
    assert JobRead("slurm", jobs.jobs).to_json() == {"scheduler": "slurm", "running": 2}


def test_a_steering_plan_names_the_jobs_of_the_pairs_it_steers(tmp_path: Path) -> None:
    from cwctl.actions.inventorytarget import InventoryTarget
    from cwctl.actions.jobs import touched
    from cwctl.actions.plan import ActionPlan, Step
    from cwctl.inventory import load_inventory

    inv = tmp_path / "inv.toml"
    inv.write_text(
        "".join(f'[[host]]\nname = "{h}"\naddress = "10.0.0.{i}"\n\n' for i, h in enumerate(LEAF))
    )
    plan = ActionPlan("reroute", "leaf1-spine2", "", [Step("a1", "nft")])
    plan.steering = {"suspect": "leaf1-spine2", "pools": [
        {"host": "a1", "peer": "b1"}, {"host": "b2", "peer": "c1"},
    ]}  # fmt: skip
    read = JobRead("slurm", (job("1", "a1", "b1"), job("2", "a2"), job("3", "b2", "c1")))
    found = touched(plan, InventoryTarget(load_inventory(inv)), read)
    assert [j.id for j, _ in found] == ["1", "3"]
    assert "1 of its host pairs" in found[0][1] and "leaf1-spine2" in found[0][1]
