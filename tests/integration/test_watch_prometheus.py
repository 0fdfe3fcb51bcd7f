"""``cwctl watch`` and a real Prometheus: the server scrapes the watch's /metrics and its
own query API answers with the scan and suspect series; the shipped alert rules pass
``promtool check rules`` and their unit tests (``promtool test rules``); the textfile is
well-formed by ``promtool check metrics``.

Debian's ``prometheus`` (2.42) runs on loopback with its own data directory and a free
port, ``scrape_interval: 1s``; the watch runs as the operator runs it (a subprocess).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.sshfleet import free_tcp_port

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "docs" / "prometheus"
PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")


def _need(tool: str | None, name: str) -> str:
    if tool is None:
        pytest.skip(f"{name} is not installed (Debian: apt-get install prometheus)")
    return tool


def test_the_shipped_alert_rules_check_and_pass_their_unit_tests() -> None:
    promtool = _need(PROMTOOL, "promtool")
    check = subprocess.run(
        [promtool, "check", "rules", str(RULES / "cwctl-alerts.yml")],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "9 rules found" in check.stdout
    tested = subprocess.run(
        [promtool, "test", "rules", "cwctl-alerts.test.yml"],
        capture_output=True,
        text=True,
        cwd=RULES,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_promtool_test_rules_can_fail(tmp_path: Path) -> None:
    """The check above can fail: a test expecting an alert the rules do not raise."""
    promtool = _need(PROMTOOL, "promtool")
    shutil.copy(RULES / "cwctl-alerts.yml", tmp_path)
    text = (RULES / "cwctl-alerts.test.yml").read_text()
    (tmp_path / "t.yml").write_text(text.replace("gpu-007", "gpu-008", 1))
    tested = subprocess.run(
        [promtool, "test", "rules", "t.yml"], capture_output=True, text=True, cwd=tmp_path
    )
    assert tested.returncode != 0


def _watch(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cwctl", "watch", "--sim", *args],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "CWCTL_STATE_DIR": str(tmp_path / "state")},
    )


@pytest.fixture
def watch_metrics(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    port = free_tcp_port()
    textfile = tmp_path / "cwctl.prom"
    proc = _watch(
        tmp_path,
        "--fault",
        "link:leaf1-spine2:down",
        "--interval",
        "0.5",
        "--duration",
        "1",
        "--listen",
        f"127.0.0.1:{port}",
        "--textfile",
        str(textfile),
    )
    try:
        yield port, textfile
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err[-2000:]
        lines = [json.loads(line) for line in err.splitlines()]
        assert lines[-1]["event"] == "stop" and lines[-1]["signal"] is True


@pytest.fixture
def prometheus(tmp_path: Path, watch_metrics: tuple[int, Path]) -> Iterator[str]:
    binary = _need(PROMETHEUS, "prometheus")
    port = free_tcp_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: cwctl\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{watch_metrics[0]}']\n"
    )
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _query(base: str, expr: str) -> list[dict[str, Any]]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            body = json.load(reply)
    except OSError:
        return []  # not up yet
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def _until(base: str, expr: str, timeout_s: float = 60.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = _query(base, expr)
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"Prometheus has no {expr} after {timeout_s:g} s")


def test_prometheus_scrapes_the_watch_and_answers_for_its_series(prometheus: str) -> None:
    up = _until(prometheus, 'up{job="cwctl"} == 1')
    assert up[0]["metric"]["job"] == "cwctl"
    suspects = _until(prometheus, "cwctl_suspect_score")
    assert {s["metric"]["element"] for s in suspects} == {"leaf1-spine2"}
    assert float(suspects[0]["value"][1]) > 0.5
    rounds = _until(prometheus, "cwctl_watch_rounds_total >= 2")
    assert float(rounds[0]["value"][1]) >= 2
    last = _until(prometheus, "time() - cwctl_watch_last_scan_timestamp_seconds")
    assert 0 <= float(last[0]["value"][1]) < 60
    kinds = {
        r["metric"]["kind"]: float(r["value"][1])
        for r in _until(prometheus, "cwctl_watch_suspects")
    }
    assert kinds["link"] == 1 and kinds["switch"] == 0
    reached = _until(prometheus, 'cwctl_watch_hosts{state="reached"}')
    assert float(reached[0]["value"][1]) == 64
    hosts = _until(prometheus, "count(cwctl_host_up == 1)")
    assert float(hosts[0]["value"][1]) == 64


def test_the_textfile_is_valid_for_node_exporter(watch_metrics: tuple[int, Path]) -> None:
    promtool = _need(PROMTOOL, "promtool")
    _, textfile = watch_metrics
    deadline = time.monotonic() + 60
    while not textfile.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    text = textfile.read_text()
    assert 'cwctl_suspect_score{element="leaf1-spine2",kind="link"}' in text
    assert "cwctl_watch_rounds_total" in text
    check = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    left = [p.name for p in textfile.parent.iterdir() if p.name.startswith(textfile.name + ".")]
    assert left == []  # the temporary files of the atomic writes are gone


def _help_and_type(text: str) -> dict[str, tuple[str, ...]]:
    """Each metric's HELP and TYPE lines: what the textfile collector holds fixed."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith(("# HELP ", "# TYPE ")):
            out.setdefault(line.split()[2], []).append(line)
    return {name: tuple(lines) for name, lines in out.items()}


def test_a_scrape_follows_exporter_conventions_round_after_round(
    watch_metrics: tuple[int, Path],
) -> None:
    """promtool accepts a scrape of /metrics; it has the verdict, build and process series
    and no numeric enum; two rounds apart, every metric keeps its HELP and TYPE (node
    exporter's textfile collector refuses one that changes); / is not an exporter."""
    promtool = _need(PROMTOOL, "promtool")
    port, _ = watch_metrics
    url = f"http://127.0.0.1:{port}/metrics"
    first = _scrape(url, rounds_at_least=2)
    check = subprocess.run([promtool, "check", "metrics"], input=first, capture_output=True,
                           text=True)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    assert 'cwctl_verdict{verdict="problems"} 1.0' in first
    assert 'cwctl_verdict{verdict="healthy"} 0.0' in first
    assert "cwctl_build_info{" in first and "process_resident_memory_bytes " in first
    rounds = int(float(first.split("\ncwctl_watch_rounds_total ")[1].split()[0]))
    second = _scrape(url, rounds_at_least=rounds + 2)
    one, other = _help_and_type(first), _help_and_type(second)
    assert {k: one[k] for k in one if k in other} == {k: other[k] for k in one if k in other}
    with pytest.raises(urllib.error.HTTPError) as root:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5)
    assert root.value.code == 404


def _scrape(url: str, *, rounds_at_least: int) -> str:
    deadline = time.monotonic() + 60  # a hang guard
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                text = str(reply.read().decode())
        except OSError:
            text = ""
        if "\ncwctl_watch_rounds_total " in text:
            done = float(text.split("\ncwctl_watch_rounds_total ")[1].split()[0])
            if done >= rounds_at_least:
                return text
        time.sleep(0.2)
    raise AssertionError(f"{url}: fewer than {rounds_at_least} rounds in 60 s")
