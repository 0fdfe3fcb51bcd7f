"""Renderers of a FabricSnapshot: ``table`` (Rich, for people), ``json``, ``prom``."""

from __future__ import annotations

from cwctl.snapshot import FabricSnapshot

FORMATS = ("table", "json", "prom")


def render(
    snapshot: FabricSnapshot,
    fmt: str,
    *,
    color: bool = True,
    width: int = 80,
    prom_paths: bool = False,
    pretty: bool = False,
) -> str:
    """The snapshot as text in one of ``FORMATS`` (``prom_paths``: per-path series too;
    ``json``: compact unless ``pretty``)."""
    if fmt == "json":
        from cwctl.report.jsonenc import encode

        return encode(snapshot.to_json(), pretty=pretty)
    if fmt == "prom":
        from cwctl.report.prom import render_prom

        return render_prom(snapshot, paths=prom_paths)
    from cwctl.report.table import render_table

    return render_table(snapshot, color=color, width=width)
