"""raytuner's benchmarks: each writes ``OUT/results.json`` and ``OUT/report.md``.

They live at the repository's root, not in the installed package: run one
from a checkout with ``python -m benchmarks NAME --out DIR [--quick] [--data
DIR]``, or from Python::

    >>> from pathlib import Path
    >>> sorted(BENCHMARKS)
    ['band', 'band-hang', 'crowd', 'crowd-transfer', 'dashboard', 'discrete', 'mla', 'multiobjective', 'service', 'slurm', 'store', 'tla']
    >>> run_benchmark("store", Path("bench_out/store"), quick=True)   # doctest: +SKIP
    {'json_store': {...}, ...}

A benchmark is a module with ``run(out: Path, quick: bool) -> dict``; it is
imported only when it runs, so listing the benchmarks costs nothing. The
peers it measures come from the ``bench`` extra (``pip install -e
'.[bench]'``) and its data from the data folders (:mod:`benchmarks.data`); a
benchmark whose peers or data are missing is refused before it starts,
naming them, rather than failing half-way through its run.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path
from typing import Any

from benchmarks.data import refuse_if_missing
from raytuner.errors import InvalidInputError, MissingPackageError

__all__ = ["BENCHMARKS", "PEER_MODULES", "missing_peers", "run_benchmark"]

#: Benchmark name -> module that defines ``run(out, quick)``.
BENCHMARKS: dict[str, str] = {
    "store": "benchmarks.store",
    "mla": "benchmarks.mla",
    "band": "benchmarks.band",
    "band-hang": "benchmarks.band_hang",
    "tla": "benchmarks.tla",
    "discrete": "benchmarks.discrete",
    "service": "benchmarks.service",
    "crowd": "benchmarks.crowd",
    "multiobjective": "benchmarks.multiobjective",
    "crowd-transfer": "benchmarks.crowd_transfer",
    "slurm": "benchmarks.slurm",
    "dashboard": "benchmarks.dashboard",
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
    "dashboard": ("optuna", "optuna_dashboard"),
}


def missing_peers(name: str) -> list[str]:
    """The modules benchmark ``name`` needs that cannot be imported here.

    Args:
        name: a benchmark's name (one of :data:`BENCHMARKS`).

    >>> missing_peers("store")
    []
    """
    return [module for module in PEER_MODULES.get(name, ()) if importlib.util.find_spec(module) is None]


def run_benchmark(name: str, out: Path, quick: bool = False, data: Path | None = None) -> dict[str, Any]:
    """Run benchmark ``name``, writing its results under ``out``; returns the results.

    ``quick`` shrinks the workload so that the run takes well under a minute.
    An unknown ``name`` raises :class:`~raytuner.errors.InvalidInputError`;
    missing peers raise :class:`~raytuner.errors.MissingPackageError`, missing
    data :class:`~benchmarks.data.MissingDataError`, before anything runs or
    is written.

    Args:
        name: the benchmark to run: ``band``, ``band-hang``, ``crowd``, ``crowd-transfer``, ``dashboard``, ``discrete``, ``mla``,
            ``multiobjective``, ``service``, ``slurm``, ``store`` or ``tla``.
        out: the folder for its ``results.json``, ``report.md`` and plots (made if missing).
        quick: run the small workload instead of the full one (default ``False``).
        data: the data folder searched first (default ``None``: ``$RAYTUNER_SHARED_DATA``, then the
            repository's ``tests/data``, then ``../shared/data``; see :mod:`benchmarks.data`).

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
        raise MissingPackageError(
            f"benchmark {name!r} needs {', '.join(missing)}, which cannot be imported: pip install -e '.[bench]'"
        )
    if data is not None:
        if not Path(data).is_dir():
            raise InvalidInputError("data", f"{data}: does not exist")
        os.environ["RAYTUNER_SHARED_DATA"] = str(Path(data).resolve())  # Ray workers and servers inherit it
    refuse_if_missing(name)
    module = importlib.import_module(module_name)
    results: dict[str, Any] = module.run(Path(out), quick)
    return results
