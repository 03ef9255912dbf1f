"""raytuner: multi-task, multi-fidelity autotuning on Ray.

Start with :mod:`raytuner.space` (define a problem), :mod:`raytuner.store`
(where evaluations are kept), :mod:`raytuner.session` (ask/tell with
persistence) and ``raytuner.searchers`` (the Ray Tune faces).

>>> from raytuner.space import ProblemSpace
>>> ProblemSpace.parse({"parameter_space": [{"name": "x", "type": "real",
...                                          "lower_bound": 0, "upper_bound": 1}]}).objectives
['y']
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("raytuner")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"
