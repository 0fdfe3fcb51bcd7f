"""Renderers of a FabricSnapshot: ``table`` (Rich, for people), ``json``, ``prom``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cwctl.scan.snapshot import FabricSnapshot

FORMATS = ("table", "json", "prom")


def render(
    snapshot: FabricSnapshot,
    fmt: str,
    *,
    color: bool = True,
    width: int = 80,
    prom_paths: bool = False,
    pretty: bool = False,
    source: str | None = None,
    fold: bool = True,
) -> str:
    """The snapshot as text in one of ``FORMATS`` (``prom_paths``: per-path series too;
    ``json``: compact unless ``pretty``; ``table``: its "Next:" lines name ``source``, the
    flags that name the hosts, or none without it; ``fold`` False: prose lines unbroken,
    for a pipe or a file)."""
    if fmt in BINARY:
        return b"".join(render_bytes(snapshot, fmt, prom_paths=prom_paths, pretty=pretty)).decode()
    from cwctl.report.table import render_table

    return render_table(snapshot, color=color, width=width, source=source, fold=fold)


def _with_truth(snapshot: FabricSnapshot, pretty: bool) -> dict[str, Any]:
    """The snapshot's JSON less its paths, the truth's paths written from their columns
    (``TruthPaths.json_text``; indented, from their dicts)."""
    import orjson

    from cwctl.scan.truthpaths import TruthPaths, plain_truth

    out = snapshot.to_json(paths=False)
    truth = out.get("truth")
    if truth is not None and isinstance(truth.get("paths"), TruthPaths):
        paths = truth["paths"]
        out["truth"] = (
            plain_truth(truth) if pretty else {**truth, "paths": orjson.Fragment(paths.json_text())}
        )
    return out


BINARY = ("json", "prom")  # formats made as UTF-8 bytes, written as they are


def render_bytes(
    snapshot: FabricSnapshot, fmt: str, *, prom_paths: bool = False, pretty: bool = False
) -> Iterator[bytes]:
    """The snapshot in ``json`` or ``prom`` as UTF-8, in pieces to write one after another
    (a large scan's JSON is never held whole, nor its paths' dicts)."""
    if fmt == "json":
        from cwctl.report.jsonenc import CHUNK, encode_chunks
        from cwctl.scan.pathreports import json_chunks

        paths = json_chunks(snapshot.paths, CHUNK, text=not pretty)  # indented: from dicts
        yield from encode_chunks(_with_truth(snapshot, pretty), "paths", paths, pretty=pretty)
    elif fmt == "prom":
        from cwctl.report.prom import prom_bytes

        yield prom_bytes(snapshot, paths=prom_paths)
    else:
        raise ValueError(f"not a binary format: {fmt!r}")
