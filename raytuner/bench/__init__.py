"""raytuner's benchmarks: each writes ``OUT/results.json`` and ``OUT/report.md``.

Run one from the command line with ``raytuner bench NAME --out DIR [--quick]``,
or from Python::

    >>> from pathlib import Path
    >>> sorted(BENCHMARKS)
    ['band', 'band-hang', 'crowd', 'crowd-transfer', 'discrete', 'mla', 'multiobjective', 'service', 'store', 'tla']
    >>> run_benchmark("store", Path("bench_out/store"), quick=True)   # doctest: +SKIP
    {'json_store': {...}, ...}

A benchmark is a module with ``run(out: Path, quick: bool) -> dict``; it is
imported only when it runs, so listing the benchmarks costs nothing. The
peers it measures come from the ``bench`` extra (``pip install
'raytuner[bench]'``); a benchmark whose peers are missing is refused before it
starts, naming them, rather than failing half-way through its run.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

from raytuner.errors import InvalidInputError, MissingPackageError

__all__ = ["BENCHMARKS", "PEER_MODULES", "missing_peers", "run_benchmark"]

#: Benchmark name -> module that defines ``run(out, quick)``.
BENCHMARKS: dict[str, str] = {
    "store": "raytuner.bench.store",
    "mla": "raytuner.bench.mla",
    "band": "raytuner.bench.band",
    "band-hang": "raytuner.bench.band_hang",
    "tla": "raytuner.bench.tla",
    "discrete": "raytuner.bench.discrete",
    "service": "raytuner.bench.service",
    "crowd": "raytuner.bench.crowd",
    "multiobjective": "raytuner.bench.multiobjective",
    "crowd-transfer": "raytuner.bench.crowd_transfer",
}


#: Benchmark name -> the modules of the ``bench`` extra it cannot run without (the optional ones, such as
#: torch for Optuna's GPSampler, are skipped with a warning instead).
PEER_MODULES: dict[str, tuple[str, ...]] = {
    "mla": ("optuna",),
    "band": ("optuna", "hpbandster", "ConfigSpace", "smac", "onnxruntime"),
    "discrete": ("optuna", "kernel_tuner"),
    "service": ("optuna",),
    "multiobjective": ("optuna", "pyamg", "onnxruntime"),
    "crowd-transfer": ("optuna", "onnxruntime"),
}


def missing_peers(name: str) -> list[str]:
    """The modules benchmark ``name`` needs that cannot be imported here.

    Args:
        name: a benchmark's name (one of :data:`BENCHMARKS`).

    >>> missing_peers("store")
    []
    """
    return [module for module in PEER_MODULES.get(name, ()) if importlib.util.find_spec(module) is None]


def run_benchmark(name: str, out: Path, quick: bool = False) -> dict[str, Any]:
    """Run benchmark ``name``, writing its results under ``out``; returns the results.

    ``quick`` shrinks the workload so that the run takes well under a minute.
    An unknown ``name`` raises :class:`~raytuner.errors.InvalidInputError`;
    missing peers raise :class:`~raytuner.errors.MissingPackageError` before
    anything runs or is written.

    Args:
        name: the benchmark to run: ``band``, ``band-hang``, ``crowd``, ``crowd-transfer``, ``discrete``, ``mla``,
            ``multiobjective``, ``service``, ``store`` or ``tla``.
        out: the folder for its ``results.json``, ``report.md`` and plots (made if missing).
        quick: run the small workload instead of the full one (default ``False``).

    >>> run_benchmark("nope", Path("out"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: name: unknown benchmark 'nope' (allowed: band, band-hang, crowd, ...)
    """
    module_name = BENCHMARKS.get(name)
    if module_name is None:
        raise InvalidInputError("name", f"unknown benchmark {name!r}", allowed=sorted(BENCHMARKS))
    missing = missing_peers(name)
    if missing:
        raise MissingPackageError(f"benchmark {name!r} needs {', '.join(missing)}, which cannot be imported: "
                                  "pip install 'raytuner[bench]'")
    module = importlib.import_module(module_name)
    results: dict[str, Any] = module.run(Path(out), quick)
    return results
