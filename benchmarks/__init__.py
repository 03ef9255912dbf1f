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

__all__ = ["BENCHMARKS", "GPTUNE_BENCHMARKS", "PEER_MODULES", "missing_peers", "run_benchmark"]

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


#: The environment variables naming the gptune-tuner folder and the Python that runs it (set by ``--gptune``
#: and ``--gptune-python``; :mod:`benchmarks.gptune_peer` reads them).
GPTUNE_ENV, GPTUNE_PYTHON_ENV = "RAYTUNER_GPTUNE", "RAYTUNER_GPTUNE_PYTHON"
#: The benchmarks that compare GPTune's own tuner (:mod:`benchmarks.gptune_peer`) where ``gptune`` names it.
GPTUNE_BENCHMARKS = ("band", "mla")


def run_benchmark(
    name: str,
    out: Path,
    quick: bool = False,
    data: Path | None = None,
    gptune: Path | None = None,
    gptune_python: Path | None = None,
    gptune_only: bool = False,
) -> dict[str, Any]:
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
        gptune: the gptune-tuner folder whose GPTune runs beside ours in ``mla`` and ``band`` (default ``None``:
            ``$RAYTUNER_GPTUNE``, and without it that peer is skipped; see :mod:`benchmarks.gptune_peer`).
        gptune_python: the Python that runs GPTune (default ``None``: ``$RAYTUNER_GPTUNE_PYTHON``, else this one).
        gptune_only: run only the comparison with GPTune's own tuner (``mla`` and ``band``; default ``False``).

    >>> run_benchmark("nope", Path("out"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: name: unknown benchmark 'nope' (allowed: band, band-hang, crowd, ...)
    """
    module_name = BENCHMARKS.get(name)
    if module_name is None:
        raise InvalidInputError("name", f"unknown benchmark {name!r}", allowed=sorted(BENCHMARKS))
    if gptune_only and name not in GPTUNE_BENCHMARKS:
        raise InvalidInputError(
            "gptune_only", f"benchmark {name!r} has no GPTune comparison", allowed=GPTUNE_BENCHMARKS
        )
    if gptune_only and gptune is None and not os.environ.get(GPTUNE_ENV):
        raise InvalidInputError(
            "gptune", f"--gptune-only needs the gptune-tuner folder (--gptune DIR or ${GPTUNE_ENV})"
        )
    missing = [] if gptune_only else missing_peers(name)
    if missing:
        raise MissingPackageError(
            f"benchmark {name!r} needs {', '.join(missing)}, which cannot be imported: pip install -e '.[bench]'"
        )
    for key, value in (("data", data), ("gptune", gptune)):
        if value is not None and not Path(value).is_dir():
            raise InvalidInputError(key, f"{value}: does not exist")
    if data is not None:
        os.environ["RAYTUNER_SHARED_DATA"] = str(Path(data).resolve())  # Ray workers and servers inherit it
    if gptune is not None:
        os.environ[GPTUNE_ENV] = str(Path(gptune).resolve())
    if gptune_python is not None:
        os.environ[GPTUNE_PYTHON_ENV] = str(Path(gptune_python).absolute())  # a venv's python: not resolved
    if not gptune_only:
        refuse_if_missing(name)
    module = importlib.import_module(module_name)
    results: dict[str, Any] = (
        module.run(Path(out), quick, gptune_only=True) if gptune_only else module.run(Path(out), quick)
    )
    return results
