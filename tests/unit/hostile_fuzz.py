"""A seeded mutation loop over valid record files and inventories (issue 24).

Run as a child process by ``test_hostile_fuzz.py`` (``python -m tests.unit.hostile_fuzz
SEED CASES DIR``), so its peak memory is its own: every case goes through the CLI
(``cwctl scan --replay`` in each output format, ``cwctl inventory check``) in process,
under an alarm of ``CASE_S`` seconds. It prints one JSON line: the cases run, the ones
that broke a rule (an exit other than 0, 2, 3; a traceback or "internal error"; the
alarm), and its own peak RSS.
"""

from __future__ import annotations

import copy
import json
import random
import signal
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from cwctl.cli import app
from cwctl.scan.recordfile import write_collection
from tests.unit.test_recordfile import synthetic_collection

CASE_S = 20  # a case past this is a hang
ROOT = Path(__file__).resolve().parents[2]

HOSTILE: list[Any] = [
    None, True, -1, 0, 2**63, 2**64, -(2**70), 1e308, -1e308, 0.5, "", "x", "\x1b[2J\n",
    "\x00", [], {}, [1, "a", None], {"a": {"b": [1]}}, 1 << 20, "sw", "gpu-001",
    "A" * 5000, [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
]  # fmt: skip
TOML_VALUES = [
    "inf", "nan", "-inf", "1e308", "-1", "0", '"\\u0000"', '"x\\u001b[2J"', "9" * 5000,
    "[" * 50 + "]" * 50, "{a=1}", '"bastion:abc"', '"a@:22"', "true", '""', "[1, 2]",
    '"10.0.0.1"', "3.5", '"leaf1"', "[[1]]",
]  # fmt: skip


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:8]):
            out += _paths(v, (*prefix, i))
    return out


def _set(rec: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    node = rec
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return rec


def mutate_records(rng: random.Random, lines: list[str]) -> str:
    lines = list(lines)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines))
        op = rng.random()
        if op < 0.65:
            try:
                rec = json.loads(lines[i])
            except ValueError:  # an earlier mutation of this case broke it already
                continue
            if op < 0.55:  # a value somewhere replaced by a hostile one
                rec = _set(copy.deepcopy(rec), rng.choice(_paths(rec)), rng.choice(HOSTILE))
            elif isinstance(rec, dict) and rec:  # a key dropped
                rec.pop(rng.choice(list(rec)))
            lines[i] = json.dumps(rec) + "\n"
        elif op < 0.75:
            lines.insert(i, lines[i])  # a line twice
        elif op < 0.82:
            del lines[i]
        elif op < 0.9:
            lines[i] = lines[i][: rng.randrange(len(lines[i]))]  # cut short
        else:  # bytes flipped
            chars = list(lines[i])
            for _ in range(rng.randint(1, 4)):
                chars[rng.randrange(len(chars))] = chr(rng.randrange(0x20, 0x7F))
            lines[i] = "".join(chars)
    if rng.random() < 0.7:  # the header's count made right, so the records themselves are read
        try:
            header = json.loads(lines[0])
            header["records"] = sum(1 for line in lines[1:] if line.strip())
            lines[0] = json.dumps(header) + "\n"
        except (ValueError, TypeError, KeyError, IndexError, RecursionError):
            pass
    return "".join(lines)


def mutate_toml(rng: random.Random, lines: list[str]) -> str:
    lines = list(lines)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines))
        op = rng.random()
        if op < 0.6 and "=" in lines[i]:
            key = lines[i].split("=", 1)[0]
            lines[i] = f"{key}= {rng.choice(TOML_VALUES)}\n"
        elif op < 0.75:
            lines.insert(i, lines[i])
        elif op < 0.9:
            del lines[i]
        else:
            chars = list(lines[i] or " ")
            chars[rng.randrange(len(chars))] = chr(rng.randrange(0x20, 0x7F))
            lines[i] = "".join(chars)
    return "".join(lines)


class Hang(Exception):
    pass


def _alarm(_sig: int, _frame: Any) -> None:
    raise Hang


def run(seed: int, cases: int, work: Path) -> dict[str, Any]:
    rng = random.Random(seed)
    good = work / "good.jsonl"
    write_collection(synthetic_collection(n_hosts=4, pairs=3), good)
    record_lines = good.read_text().splitlines(keepends=True)
    toml_lines = (ROOT / "inventory.example.toml").read_text().splitlines(keepends=True)
    runner = CliRunner()
    broken: list[dict[str, Any]] = []
    codes: dict[str, int] = {}
    signal.signal(signal.SIGALRM, _alarm)
    for n in range(cases):
        if n % 2 == 0:
            path = work / f"case{n}.jsonl"
            path.write_text(mutate_records(rng, record_lines))
            fmt = rng.choice(["table", "json", "prom"])
            args = ["scan", "--replay", str(path), "--format", fmt]
        else:
            path = work / f"case{n}.toml"
            path.write_text(mutate_toml(rng, toml_lines))
            args = ["inventory", "check", "-i", str(path)]
        signal.alarm(CASE_S)
        try:
            result = runner.invoke(app, args)
            code, output = result.exit_code, result.output
            crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
        except Hang:
            code, output, crashed = -1, "hang", True
        finally:
            signal.alarm(0)
        codes[str(code)] = codes.get(str(code), 0) + 1
        if crashed or code not in (0, 2, 3) or "Traceback" in output or "internal error" in output:
            broken.append({"case": n, "args": args[:2], "code": code, "output": output[-400:]})
            path.rename(path.with_name(f"broken-{path.name}"))
        else:
            path.unlink()
    return {"cases": cases, "codes": codes, "broken": broken, "peak_rss_kib": _peak_rss_kib()}


def _peak_rss_kib() -> int:
    """This process's own peak RSS: the high-water mark of its memory map since ``exec``
    (``VmHWM``). Not ``ru_maxrss``, which keeps the parent's peak across the ``exec``: run
    from an xdist worker that had grown to a gigabyte, the loop read 1 070 392 KiB."""
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])


if __name__ == "__main__":
    seed, cases, work = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    print(json.dumps(run(seed, cases, work)))
