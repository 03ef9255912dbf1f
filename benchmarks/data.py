"""Where the benchmarks find their data: the data folders, searched in order.

The folders are ``$RAYTUNER_SHARED_DATA`` (set by ``python -m benchmarks
--data DIR``), then the repository's own ``tests/data`` and then
``../shared/data`` beside the repository (the full Kernel Tuner caches live
only there); folders that do not exist are left out. A file is read from the
first folder that holds it, so the repository's small copies serve the tests
and the quick runs, and a benchmark that needs more finds it beside the
repository. A benchmark whose files are in none of them is refused before it
starts, with one line naming the files and the folders looked in.

Example:
    >>> missing_data("store")
    []
    >>> find("no-such-file.json").name
    'no-such-file.json'
"""

from __future__ import annotations

import os
from pathlib import Path

from raytuner.errors import RaytunerError

__all__ = ["DATA_NEEDS", "MissingDataError", "folders", "find", "missing_data", "refuse_if_missing"]

ROOT = Path(__file__).resolve().parents[1]
#: Benchmark name -> the files (relative to a data folder) it cannot run without.
DATA_NEEDS: dict[str, tuple[str, ...]] = {
    "band": ("yahpo_lcbench",),
    "multiobjective": ("yahpo_lcbench",),
    "discrete": tuple(
        f"kernel_tuner/{kernel}.json.gz"
        for kernel in ("gemm_RTX_3090", "convolution_A100", "pnpoly_RTX_3090", "dedispersion_A100")
    ),
    "tla": ("kernel_tuner/dedispersion_A100.json.gz", "kernel_tuner/dedispersion_W7800.json.gz"),
    "crowd-transfer": (
        "yahpo_lcbench",
        "kernel_tuner/dedispersion_A100.json.gz",
        "kernel_tuner/dedispersion_W7800.json.gz",
    ),
}


class MissingDataError(RaytunerError):
    """A benchmark's data files are in none of the data folders; the message names them and the folders."""


def folders() -> list[Path]:
    """The data folders that exist, in the order they are searched (see the module docstring)."""
    candidates = [Path(os.environ["RAYTUNER_SHARED_DATA"])] if os.environ.get("RAYTUNER_SHARED_DATA") else []
    candidates += [ROOT / "tests" / "data", ROOT.parent / "shared" / "data"]
    found: list[Path] = []
    for folder in candidates:
        if folder.is_dir() and folder.resolve() not in [f.resolve() for f in found]:
            found.append(folder)
    return found


def find(relative: str) -> Path:
    """``relative`` in the first data folder that holds it (else under the first folder, for the reader's error).

    Args:
        relative: a file or folder inside a data folder, such as ``kernel_tuner/gemm_RTX_3090.json.gz``.
    """
    searched = folders()
    for folder in searched:
        if (folder / relative).exists():
            return folder / relative
    return (searched[0] if searched else ROOT / "tests" / "data") / relative


def missing_data(name: str) -> list[str]:
    """The files benchmark ``name`` needs that no data folder holds.

    Args:
        name: a benchmark's name.
    """
    return [relative for relative in DATA_NEEDS.get(name, ()) if not find(relative).exists()]


def refuse_if_missing(name: str) -> None:
    """Raise :class:`MissingDataError` if benchmark ``name`` lacks data, naming the files and the folders.

    Args:
        name: a benchmark's name.
    """
    missing = missing_data(name)
    if missing:
        looked = ", ".join(str(folder) for folder in folders()) or "no data folder exists"
        raise MissingDataError(
            f"benchmark {name!r} needs {', '.join(missing)} in a data folder (looked in: {looked}); pass --data DIR"
        )
