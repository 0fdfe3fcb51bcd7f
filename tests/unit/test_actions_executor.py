"""The executor with a real local runner, the NCCL edit programs on real files, the journal.

Commands here are real (``touch``, ``rm``, ``python3``); where a step must fail, a
tmp-dir stand-in script that exits 1 plays the failing tool, named as such.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cwctl.actions import nccl
from cwctl.actions.executor import (
    FAILED,
    NOT_RUN,
    OK,
    ROLLED_BACK,
    apply_plan,
    execute,
)
from cwctl.actions.history import find, history
from cwctl.actions.journal import ActionLock, Journal
from cwctl.actions.plan import ActionPlan, Step
from cwctl.actions.runners import LocalRunner
from cwctl.errors import CwctlError, InputError

PY = sys.executable


def stand_in(tmp_path: Path, name: str, code: int) -> str:
    """A stand-in executable (NOT the real tool) that logs its argv and exits ``code``."""
    path = tmp_path / name
    log = tmp_path / f"{name}.log"
    path.write_text(
        f"#!{PY}\nimport json, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"sys.exit({code})\n"
    )
    path.chmod(0o755)
    return str(path)


def touch_step(path: Path) -> Step:
    return Step(
        "local", f"create {path.name}", argv=("touch", str(path)), undo_argv=("rm", str(path))
    )


async def test_all_steps_run_in_order(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    plan = ActionPlan("reroute", "x", "test", [touch_step(a), touch_step(b)])
    execution = await execute(plan, LocalRunner())
    assert execution.status == "applied"
    assert [o.status for o in execution.outcomes] == [OK, OK]
    assert a.exists() and b.exists()


async def test_failed_step_stops_and_rolls_back_what_ran(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    failing = stand_in(tmp_path, "failing-tool", 1)
    plan = ActionPlan(
        "reroute",
        "x",
        "test",
        [
            touch_step(a),
            touch_step(b),
            Step("local", "the failing tool", argv=(failing, "go"), undo_argv=(failing, "undo")),
            touch_step(c),
        ],
    )
    journal = Journal(tmp_path / "state")
    execution = await apply_plan(plan, LocalRunner(), journal)
    assert execution.failed == 2
    assert [o.status for o in execution.outcomes] == [ROLLED_BACK, ROLLED_BACK, FAILED, NOT_RUN]
    assert not a.exists() and not b.exists() and not c.exists()
    # the failed step itself was run once and never "undone"
    assert (tmp_path / "failing-tool.log").read_text().splitlines() == ['["go"]']
    (action,) = history(journal).actions
    assert action.status == "failed" and action.steps[2]["rc"] == 1
    assert [action.step_status(i) for i in range(4)] == [ROLLED_BACK, ROLLED_BACK, FAILED, NOT_RUN]
    with pytest.raises(InputError, match="did not apply"):
        find(journal, None)


async def test_missing_executable_is_a_failed_step(tmp_path: Path) -> None:
    plan = ActionPlan("drain", "x", "t", [Step("local", "nope", argv=(str(tmp_path / "nope"),))])
    execution = await execute(plan, LocalRunner())
    assert execution.failed == 0 and execution.outcomes[0].rc == 127


def run_py(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, *args], capture_output=True, text=True, timeout=30)


def test_nccl_set_and_restore_on_a_real_file(tmp_path: Path) -> None:
    conf = tmp_path / "nccl.conf"
    original = "# site settings\nNCCL_DEBUG=WARN\nNCCL_IB_HCA=^=mlx5_3\n"
    conf.write_text(original)
    conf.chmod(0o640)
    backup = str(conf) + ".cwctl-1"
    read = run_py("-c", nccl.READ_PROGRAM, str(conf), "NCCL_IB_HCA")
    assert nccl.parse_read(read.stdout, "h") == (True, "^=mlx5_3")
    done = run_py(
        "-c", nccl.SET_PROGRAM, str(conf), "NCCL_IB_HCA", "^=mlx5_3,mlx5_1", "=^=mlx5_3", backup
    )
    assert done.returncode == 0, done.stderr
    assert conf.read_text() == "# site settings\nNCCL_DEBUG=WARN\nNCCL_IB_HCA=^=mlx5_3,mlx5_1\n"
    assert conf.stat().st_mode & 0o777 == 0o640
    again = run_py("-c", nccl.SET_PROGRAM, str(conf), "NCCL_IB_HCA", "x", "=^=mlx5_3", backup + "b")
    assert again.returncode != 0 and "not what the plan read" in again.stderr
    undo = run_py("-c", nccl.RESTORE_PROGRAM, str(conf), backup)
    assert undo.returncode == 0, undo.stderr
    assert conf.read_text() == original and not Path(backup).exists()


def test_nccl_set_on_a_missing_file_and_restore_removes_it(tmp_path: Path) -> None:
    conf = tmp_path / "nccl.conf"
    backup = str(conf) + ".cwctl-2"
    hostile = "'; rm -rf / #"
    done = run_py("-c", nccl.SET_PROGRAM, str(conf), "NCCL_SOCKET_IFNAME", hostile, "unset", backup)
    assert done.returncode == 0, done.stderr
    assert conf.read_text() == f"NCCL_SOCKET_IFNAME={hostile}\n"
    assert run_py("-c", nccl.RESTORE_PROGRAM, str(conf), backup).returncode == 0
    assert not conf.exists() and not Path(backup + ".none").exists()
    missing = run_py("-c", nccl.RESTORE_PROGRAM, str(conf), backup)
    assert missing.returncode != 0 and "no backup" in missing.stderr


def test_nccl_set_never_writes_through_a_preplanted_temp_name(tmp_path: Path) -> None:
    """The old SET wrote ``PATH.cwctl-tmp``: a link planted there aimed it elsewhere."""
    conf, victim = tmp_path / "nccl.conf", tmp_path / "victim"
    conf.write_text("NCCL_DEBUG=WARN\n")
    victim.write_text("precious\n")
    (tmp_path / "nccl.conf.cwctl-tmp").symlink_to(victim)
    done = run_py(
        "-c", nccl.SET_PROGRAM, str(conf), "NCCL_IB_HCA", "^=mlx5_1", "unset", str(conf) + ".b"
    )
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "precious\n"
    assert conf.read_text() == "NCCL_DEBUG=WARN\nNCCL_IB_HCA=^=mlx5_1\n"
    assert not conf.is_symlink() and conf.stat().st_mode & 0o777 == 0o644


def test_nccl_restore_of_a_change_that_never_ran_changes_nothing(tmp_path: Path) -> None:
    """An apply killed before its step ran: the undo (with KEY VALUE) leaves the file."""
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_IB_HCA=^=mlx5_3\n")
    backup = str(conf) + ".cwctl-3"
    undo = run_py("-c", nccl.RESTORE_PROGRAM, str(conf), backup, "NCCL_IB_HCA", "^=mlx5_3,mlx5_1")
    assert undo.returncode == 0 and "nothing to restore" in undo.stdout
    assert conf.read_text() == "NCCL_IB_HCA=^=mlx5_3\n"
    # the new value is there but the backup is gone: that is a failure, not a no-op
    conf.write_text("NCCL_IB_HCA=^=mlx5_3,mlx5_1\n")
    gone = run_py("-c", nccl.RESTORE_PROGRAM, str(conf), backup, "NCCL_IB_HCA", "^=mlx5_3,mlx5_1")
    assert gone.returncode != 0 and "no backup" in gone.stderr


def test_nccl_programs_agree_which_line_of_a_repeated_key_counts(tmp_path: Path) -> None:
    """NCCL reads the file top to bottom, so the last ``KEY=`` line is the value: the read
    the plan shows, the check before writing and the undo's check all see that one."""
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_IB_HCA=^=mlx5_0\nNCCL_DEBUG=WARN\n NCCL_IB_HCA = ^=mlx5_3 \n")
    read = run_py("-c", nccl.READ_PROGRAM, str(conf), "NCCL_IB_HCA")
    assert nccl.parse_read(read.stdout, "h") == (True, "^=mlx5_3")
    backup = str(conf) + ".cwctl-4"
    stale = run_py("-c", nccl.SET_PROGRAM, str(conf), "NCCL_IB_HCA", "x", "=^=mlx5_0", backup)
    assert stale.returncode != 0 and "'^=mlx5_3' now" in stale.stderr
    new = "^=mlx5_3,mlx5_1"
    done = run_py("-c", nccl.SET_PROGRAM, str(conf), "NCCL_IB_HCA", new, "=^=mlx5_3", backup)
    assert done.returncode == 0, done.stderr
    assert conf.read_text() == f"NCCL_IB_HCA={new}\nNCCL_DEBUG=WARN\n"  # one line now
    Path(backup).unlink()  # the undo finds the new value but no backup: a failure
    gone = run_py("-c", nccl.RESTORE_PROGRAM, str(conf), backup, "NCCL_IB_HCA", new)
    assert gone.returncode != 0 and "no backup" in gone.stderr
    conf.write_text(f"NCCL_IB_HCA={new}\nNCCL_IB_HCA=^=mlx5_3\n")  # the last line is not it
    never = run_py("-c", nccl.RESTORE_PROGRAM, str(conf), backup, "NCCL_IB_HCA", new)
    assert never.returncode == 0 and "nothing to restore" in never.stdout


_APPENDER = """
import sys
from pathlib import Path
from cwctl.actions.journal import Journal
j = Journal(Path(sys.argv[1]))
for i in range(int(sys.argv[3])):
    j.append({"id": f"{sys.argv[2]}-{i}", "event": "apply", "status": "applied", "pad": "x" * 5000})
"""


def test_concurrent_appends_never_interleave(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen([PY, "-c", _APPENDER, str(tmp_path), f"p{n}", "40"]) for n in range(4)
    ]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    lines = (tmp_path / "journal.jsonl").read_text().splitlines()
    assert len(lines) == 160
    assert {json.loads(line)["id"] for line in lines} == {
        f"p{n}-{i}" for n in range(4) for i in range(40)
    }


def test_one_action_at_a_time(tmp_path: Path) -> None:
    with (
        ActionLock(tmp_path),
        pytest.raises(CwctlError, match="another cwctl action is running"),
        ActionLock(tmp_path),
    ):
        pass
    with ActionLock(tmp_path):  # released: free again
        pass
