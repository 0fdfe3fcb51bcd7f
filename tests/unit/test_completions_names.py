"""bash completes through ':' (``--fault link:<Tab>``) as zsh and fish do, and every
shell completes hosts, plan ids and job ids (issue 35, item 9)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cwctl.actions.journal import Journal
from cwctl.actions.plan import ActionPlan

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = (ROOT / "completions" / "cwctl.bash").read_text()


def _env(**extra: str) -> dict[str, str]:
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "cwctl").exists():
        pytest.skip("the cwctl console script is not installed next to this interpreter")
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **extra}


def bash_complete(line: str, words: list[str], **env: str) -> list[str]:
    """COMPREPLY for the cursor at the end of ``line``, with ``words`` as bash split
    them (at blanks and at ':')."""
    quoted = " ".join(f"'{w}'" for w in words)
    driver = (
        f"{SCRIPT}\n"
        f"COMP_LINE='{line}'; COMP_POINT={len(line)}\n"
        f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}\n"
        "_cwctl_completion cwctl\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", driver], env=_env(**env),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return [w for w in proc.stdout.splitlines() if w]


pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")


def test_fault_completes_after_the_colon_not_to_files() -> None:
    line = "cwctl scan --sim --hosts 16 --fault link:leaf1"
    words = ["cwctl", "scan", "--sim", "--hosts", "16", "--fault", "link", ":", "leaf1"]
    got = bash_complete(line, words)
    assert got and set(got) == {"leaf1-spine1", "leaf1-spine2", "leaf1-spine3", "leaf1-spine4"}
    got = bash_complete("cwctl scan --sim --fault link:", [*words[:2], "--sim", "--fault",
                                                            "link", ":"])  # fmt: skip
    assert "leaf1-spine2" in got and not any(":" in w for w in got)
    got = bash_complete("cwctl scan --sim --fault switch:spine2:", ["cwctl", "scan", "--sim",
                        "--fault", "switch", ":", "spine2", ":"])  # fmt: skip
    assert "down" in got and "lossy=0.02" in got
    assert bash_complete("cwctl sc", ["cwctl", "sc"]) == ["scan"]  # no colon: as before


def test_hosts_complete_for_drain_resume_and_reference() -> None:
    assert bash_complete("cwctl drain --sim gpu-01", ["cwctl", "drain", "--sim", "gpu-01"]) == [
        f"gpu-0{i}" for i in range(10, 20)
    ]
    got = bash_complete("cwctl resume --sim --hosts 8 gpu", ["cwctl", "resume", "--sim",
                        "--hosts", "8", "gpu"])  # fmt: skip
    assert got == [f"gpu-00{i}" for i in range(1, 9)]
    got = bash_complete("cwctl scan --sim --hosts 8 --reference gpu-00", ["cwctl", "scan",
                        "--sim", "--hosts", "8", "--reference", "gpu-00"])  # fmt: skip
    assert got == [f"gpu-00{i}" for i in range(1, 9)]


def test_rollback_completes_the_journals_plans(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    for action_id in ("20261206-100000-aaaa", "20261206-110000-bbbb"):
        plan = ActionPlan("reroute", "spine2", "test", [], id=action_id).to_json()
        journal.append({"event": "intent", "id": action_id, "action": "apply", "plan": plan})
    got = bash_complete("cwctl rollback 2026", ["cwctl", "rollback", "2026"],
                        CWCTL_STATE_DIR=str(tmp_path))  # fmt: skip
    assert got == ["20261206-110000-bbbb", "20261206-100000-aaaa"]  # newest first


def test_job_env_completes_the_simulated_jobs() -> None:
    got = bash_complete("cwctl job-env --sim --jobs 3 ", ["cwctl", "job-env", "--sim", "--jobs",
                        "3", ""])  # fmt: skip
    assert got == ["4100", "4101", "4102"]
