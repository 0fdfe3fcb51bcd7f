"""Safe file output (``cwctl.runtime.atomic``) on real files, FIFOs, devices and symlinks, and the
scan command checking every output path before it scans."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cwctl.actions import nccl
from cwctl.cli import app
from cwctl.errors import InputError
from cwctl.runtime import atomic

SIM = ["scan", "--sim", "--hosts", "8", "--hosts-per-leaf", "4", "--duration", "0.2"]


def test_new_files_get_the_mode_of_their_kind_and_existing_ones_keep_theirs(
    tmp_path: Path,
) -> None:
    report, records = tmp_path / "r.json", tmp_path / "rec.jsonl"
    atomic.write_text(report, "a")
    atomic.write_text(records, "a", mode=atomic.PRIVATE_MODE)
    assert report.stat().st_mode & 0o777 == 0o644
    assert records.stat().st_mode & 0o777 == 0o600
    secret = tmp_path / "secret.json"
    secret.write_text("old")
    secret.chmod(0o600)
    atomic.write_text(secret, "new")  # a report over a private file stays private
    assert secret.read_text() == "new" and secret.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "rec.jsonl", "secret.json"]


def test_a_preplanted_temp_name_cannot_redirect_the_write(tmp_path: Path) -> None:
    """The old helper wrote through ``.NAME.tmp-<pid>``; a link planted there aimed the
    write at any file. Now the temporary name is random and created exclusively."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    target = tmp_path / "out.json"
    (tmp_path / f".out.json.tmp-{os.getpid()}").symlink_to(victim)
    atomic.write_text(target, "report")
    assert victim.read_text() == "precious" and target.read_text() == "report"


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda p: os.mkfifo(p), "not a regular file (a FIFO)"),
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: p.symlink_to(p.parent / "elsewhere"), "is a symlink; give the real path"),
    ],
)
def test_non_regular_targets_are_refused_and_left_alone(
    tmp_path: Path, make: object, why: str
) -> None:
    target = tmp_path / "out"
    make(target)  # type: ignore[operator]
    before = os.lstat(target)
    with pytest.raises(InputError, match=re.escape(why)):
        atomic.write_text(target, "x", option="--out")
    assert os.lstat(target).st_ino == before.st_ino
    assert not (tmp_path / "elsewhere").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temp file left


def test_a_device_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"--heatmap /dev/full: not a regular file \(a char"):
        atomic.check_output("/dev/full", "--heatmap")


def test_tilde_is_expanded_and_empty_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    atomic.write_text("~/r.txt", "x")
    assert (tmp_path / "r.txt").read_text() == "x"
    with pytest.raises(InputError, match="--out: empty path"):
        atomic.check_output("", "--out")


def test_a_failed_writer_leaves_the_target_and_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "t"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic.replacing(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["t"]


# --- the CLI: checked before the scan -----------------------------------------------


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CWCTL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_empty_out_is_one_line_not_a_traceback(cwd: Path) -> None:
    result = CliRunner().invoke(app, [*SIM, "--out", ""])
    assert result.exit_code == 2  # typer hands '' over as Path('.'): the directory here
    assert result.stderr == "cwctl: --out .: is a directory\n"


def test_a_fifo_out_is_refused_before_the_scan(cwd: Path) -> None:
    os.mkfifo(cwd / "pipe")
    result = CliRunner().invoke(app, [*SIM, "--save-records", "rec.gz", "--out", "pipe"])
    assert result.exit_code == 2 and "--out pipe: not a regular file (a FIFO)" in result.stderr
    assert not (cwd / "rec.gz").exists()  # refused before probing: nothing was recorded


def test_a_directory_heatmap_is_refused_before_the_scan(cwd: Path) -> None:
    (cwd / "pics").mkdir()
    result = CliRunner().invoke(app, [*SIM, "--save-records", "rec.gz", "--heatmap", "pics"])
    assert result.exit_code == 2 and "--heatmap pics: is a directory" in result.stderr
    assert not (cwd / "rec.gz").exists()


def test_out_and_save_records_expand_tilde(cwd: Path) -> None:
    result = CliRunner().invoke(
        app, [*SIM, "--format", "json", "--out=~/r.json", "--save-records=~/rec.jsonl"]
    )
    assert result.exit_code in (0, 3), result.stderr
    assert json.loads((cwd / "r.json").read_text())["schema"] == "cwctl.scan/1"
    assert (cwd / "rec.jsonl").stat().st_mode & 0o777 == 0o600


def test_nccl_programs_expand_tilde_on_the_host(tmp_path: Path) -> None:
    """``--nccl-conf ~/.nccl.conf``: ``~`` is the host's home (here HOME=tmp_path)."""
    conf = tmp_path / ".nccl.conf"
    conf.write_text("NCCL_DEBUG=WARN\n")
    env = {**os.environ, "HOME": str(tmp_path)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", *args], capture_output=True, text=True, env=env, timeout=30
        )

    read = run(nccl.READ_PROGRAM, "~/.nccl.conf", "NCCL_IB_HCA")
    assert nccl.parse_read(read.stdout, "h") == (True, None)
    key, backup = "NCCL_IB_HCA", "~/.nccl.conf.cwctl-1"
    assert run(nccl.SET_PROGRAM, "~/.nccl.conf", key, "^=mlx5_1", "unset", backup).returncode == 0
    assert conf.read_text() == "NCCL_DEBUG=WARN\nNCCL_IB_HCA=^=mlx5_1\n"
    assert run(nccl.RESTORE_PROGRAM, "~/.nccl.conf", backup, key, "^=mlx5_1").returncode == 0
    assert conf.read_text() == "NCCL_DEBUG=WARN\n" and not (tmp_path / "~").exists()
    with pytest.raises(InputError, match="absolute path or one under ~"):
        nccl.check_conf_path("nccl.conf")


def test_fsync_dir_syncs_a_directory_refuses_anything_else_and_leaks_no_fd(
    tmp_path: Path,
) -> None:
    open_fds = len(os.listdir("/proc/self/fd"))
    atomic.fsync_dir(tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        atomic.fsync_dir(tmp_path / "file")
    with pytest.raises(FileNotFoundError):
        atomic.fsync_dir(tmp_path / "missing")
    assert len(os.listdir("/proc/self/fd")) == open_fds


def test_the_journal_syncs_its_directory_through_the_same_helper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cwctl.actions import journal

    synced: list[Path] = []
    monkeypatch.setattr(journal, "fsync_dir", synced.append)
    book = journal.Journal(tmp_path / "state")
    book.append({"kind": "note"})
    book.append({"kind": "note"}, sync_dir=True)
    assert synced == [tmp_path / "state"]
