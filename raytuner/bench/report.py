"""Small helpers the benchmarks share: result files, memory, timing and machine figures.

Example:
    >>> percentile([1.0, 2.0, 3.0, 4.0], 50)
    2.5
    >>> markdown_table(["a", "b"], [[1, "x"]]).splitlines()[2]
    '| 1 | x |'
"""

from __future__ import annotations

import json
import math
import os
import platform
import resource
from pathlib import Path
from typing import Any, Iterable, Sequence

from raytuner.environment import cpu_model

__all__ = ["write_results", "rss_mb", "peak_rss_mb", "percentile", "markdown_table", "machine_info",
           "filesystem_of"]


def write_results(out: Path, results: dict[str, Any], report_md: str) -> None:
    """Write ``out/results.json`` (indent 2) and ``out/report.md``, creating ``out`` if needed."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "results.json", "w", encoding="utf-8") as fh:
        json.dump(results, fh, indent=2, allow_nan=False)
        fh.write("\n")
    (out / "report.md").write_text(report_md if report_md.endswith("\n") else report_md + "\n",
                                   encoding="utf-8")


def rss_mb() -> float | None:
    """This process's resident set size in MiB, from ``/proc/self/statm``; ``None`` without ``/proc``.

    >>> (rss_mb() or 1.0) > 0
    True
    """
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            resident_pages = int(fh.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    """The highest resident set size this process has had, in MiB (``getrusage``)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, linearly interpolated."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def filesystem_of(path: Path) -> str:
    """``"<type> on <device>"`` of the mount holding ``path``, from ``/proc/mounts`` where there is one."""
    target = os.path.realpath(path)
    best = ("", "unknown", "unknown")
    try:
        with open("/proc/mounts", encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) < 3:
                    continue
                device, mount, fstype = parts[0], parts[1], parts[2]
                inside = target == mount or target.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best[0]):
                    best = (mount, fstype, device)
    except OSError:
        return "unknown"
    return f"{best[1]} on {best[2]} (mounted at {best[0] or '?'})"


def machine_info(data_dir: Path | None = None) -> dict[str, Any]:
    """CPU model, core count, OS and Python; with ``data_dir``, the file system it lives on."""
    info: dict[str, Any] = {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "os": platform.platform(),
        "python": platform.python_version(),
    }
    if data_dir is not None:
        info["data_filesystem"] = filesystem_of(data_dir)
    return info
