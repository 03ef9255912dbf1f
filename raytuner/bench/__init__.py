"""raytuner's benchmarks: each writes ``OUT/results.json`` and ``OUT/report.md``.

Run one from the command line with ``raytuner bench NAME --out DIR [--quick]``,
or from Python::

    >>> from pathlib import Path
    >>> sorted(BENCHMARKS)
    ['band', 'crowd', 'crowd-transfer', 'discrete', 'mla', 'multiobjective', 'service', 'store', 'tla']
    >>> run_benchmark("store", Path("bench_out/store"), quick=True)   # doctest: +SKIP
    {'json_store': {...}, ...}

A benchmark is a module with ``run(out: Path, quick: bool) -> dict``; it is
imported only when it runs, so listing the benchmarks costs nothing.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from raytuner.errors import InvalidInputError

__all__ = ["BENCHMARKS", "run_benchmark"]

#: Benchmark name -> module that defines ``run(out, quick)``.
BENCHMARKS: dict[str, str] = {
    "store": "raytuner.bench.store",
    "mla": "raytuner.bench.mla",
    "band": "raytuner.bench.band",
    "tla": "raytuner.bench.tla",
    "discrete": "raytuner.bench.discrete",
    "service": "raytuner.bench.service",
    "crowd": "raytuner.bench.crowd",
    "multiobjective": "raytuner.bench.multiobjective",
    "crowd-transfer": "raytuner.bench.crowd_transfer",
}


def run_benchmark(name: str, out: Path, quick: bool = False) -> dict[str, Any]:
    """Run benchmark ``name``, writing its results under ``out``; returns the results.

    ``quick`` shrinks the workload so that the run takes well under a minute.
    An unknown ``name`` raises :class:`~raytuner.errors.InvalidInputError`.

    Args:
        name: the benchmark to run: ``band``, ``crowd``, ``crowd-transfer``, ``discrete``, ``mla``,
            ``multiobjective``, ``service``, ``store`` or ``tla``.
        out: the folder for its ``results.json``, ``report.md`` and plots (made if missing).
        quick: run the small workload instead of the full one (default ``False``).

    >>> run_benchmark("nope", Path("out"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: name: unknown benchmark 'nope' (allowed: band, crowd, crowd-transfer, ...)
    """
    module_name = BENCHMARKS.get(name)
    if module_name is None:
        raise InvalidInputError("name", f"unknown benchmark {name!r}", allowed=sorted(BENCHMARKS))
    module = importlib.import_module(module_name)
    results: dict[str, Any] = module.run(Path(out), quick)
    return results
