"""The data files the tests read, all inside the repository (``tests/data``; its README names each licence).

Example:
    >>> (DATA / "gptune" / "GPTune-Demo.json").is_file()
    True
"""

from __future__ import annotations

from pathlib import Path

#: The repository's test data folder (the layout of ``../shared/data``, trimmed to what the tests read).
DATA = Path(__file__).resolve().parent / "data"
#: GPTune's own history file for its demo function (BSD-3, ``data/gptune/License.txt``).
GPTUNE_DEMO = DATA / "gptune" / "GPTune-Demo.json"
#: Kernel Tuner caches, subsets of the published ones (MIT, ``data/kernel_tuner/LICENSE``).
KERNEL_TUNER = DATA / "kernel_tuner"
