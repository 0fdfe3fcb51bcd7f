"""A full state directory before or during an apply (issue 24), on a real tmpfs of 256 KiB
mounted by the test under its own tmp dir (root; unmounted after).

Before: with 0 to 4 pages free, ``reroute --apply`` died with "internal error: OSError
ENOSPC" after 0 to 6 of its 8 steps, the action left interrupted with steps changed.
Now: with too little room for the journal's lines (reserved with ``fallocate`` before the
intent), it is refused before anything is touched; when the disk fills mid-apply (the
reservation punched out from under it), it stops, rolls back what ran and says so.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_journal_kill import wait_stopped_or_exited

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")

SIM = ["--sim", "--hosts", "64"]  # 8 leaves: a reroute off spine2 is 8 steps
APPLY = ["reroute", "spine2", *SIM, "--apply", "--yes"]
PAGE = 4096


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def _env(state: Path, **more: str) -> dict[str, str]:
    return {**os.environ, "CWCTL_STATE_DIR": str(state), **more}


def cwctl(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cwctl.cli", *args],
        env=_env(state),
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def fill(mount: Path, leave_pages: int) -> Path:
    """A filler file taking all but ``leave_pages`` pages of the tmpfs."""
    st = os.statvfs(mount)
    filler = mount / f"filler{len(list(mount.glob('filler*')))}"
    with filler.open("wb") as f:
        pages = st.f_bavail * st.f_frsize // PAGE - leave_pages
        for _ in range(max(0, pages)):
            try:
                f.write(b"\0" * PAGE)
                f.flush()
            except OSError:
                break
    return filler


def sim_state(state: Path) -> dict[str, list[object]]:
    """What the simulator's saved state changes: no file, or weights of 1, change nothing."""
    files = list((state / "sim").glob("*.json")) if (state / "sim").exists() else []
    saved = json.loads(files[0].read_text())["state"] if files else {}
    changed = {k: v for k, v in saved.items() if v}
    changed["ecmp_weight"] = [w for w in changed.get("ecmp_weight", []) if w[2] != 1]
    return {k: v for k, v in changed.items() if v}


def test_too_little_room_for_the_journal_refuses_before_anything_is_touched(
    tmpfs: Path,
) -> None:
    """0 pages free: the action lock cannot take its pid; 1 to 6: the journal cannot
    reserve its lines. Either way one line, exit 2, nothing changed."""
    state = tmpfs / "state"
    state.mkdir(mode=0o700)
    for pages in (0, 1, 3, 6):
        filler = fill(tmpfs, pages)
        out = cwctl(state, *APPLY)
        assert out.returncode == 2, (pages, out.stderr)
        (line,) = out.stderr.strip().splitlines()
        assert line.endswith(": No space left on device: nothing applied"), (pages, line)
        assert sim_state(state) == {}
        journal = state / "journal.jsonl"
        assert not journal.exists() or journal.read_bytes() == b""
        filler.unlink()


def _punch_past_the_end(path: Path) -> None:
    """Free the blocks reserved past the journal's end (fallocate PUNCH_HOLE|KEEP_SIZE)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
    fd = os.open(path, os.O_RDWR)
    try:
        assert libc.fallocate(fd, 3, os.fstat(fd).st_size, 1 << 20) == 0, ctypes.get_errno()
    finally:
        os.close(fd)


@pytest.mark.parametrize("append", [4, 7])
def test_a_disk_that_fills_mid_apply_stops_it_and_rolls_back_what_ran(
    tmpfs: Path, append: int
) -> None:
    """Stopped before its Nth journal line (4: step 2's start; 7: step 3's outcome, after
    it ran), the disk is filled to the last page; resumed, the apply cannot write that
    line: it stops there, undoes what ran, and says so. The simulator's state is back
    to what it was, and the journal still reads (the action as not applied)."""
    state = tmpfs / "state"
    state.mkdir(mode=0o700)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cwctl.cli", *APPLY],
        env=_env(state, CWCTL_FAILPOINT=f"journal:{append}"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    status = wait_stopped_or_exited(proc)
    assert os.WIFSTOPPED(status), "never reached the failpoint"
    _punch_past_the_end(state / "journal.jsonl")
    fill(tmpfs, 0)
    os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    assert "internal error" not in err
    text = out + err
    # lines: intent, then started and outcome per step; the first that found no room (the
    # journal's last page may still take a line or two) is where it stopped
    first = (append - 2) // 2 + 1
    stopped = re.search(
        r"stopped at step (\d+): cannot write the journal \S+: No space left on device; "
        r"(not run|ran, but the journal could not record it)",
        text,
    )
    assert stopped is not None, text
    k = int(stopped.group(1))
    assert k >= first
    steps = dict(re.findall(r"^ *(\d+)\. \[sim\] ([a-z ]+):", text, re.M))
    assert all(steps[str(i)] == "rolled back" for i in range(1, k)), steps
    assert steps[str(k)] in ("not run", "rolled back")
    assert all(steps[str(i)] == "not run" for i in range(k + 1, 9)), steps
    assert "check them by hand" not in text
    assert sim_state(state) == {}  # as before the apply: no change saved
    for filler in tmpfs.glob("filler*"):
        filler.unlink()
    listing = cwctl(state, "journal")
    assert listing.returncode == 0, listing.stderr
