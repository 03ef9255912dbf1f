"""raytuner: multi-task, multi-fidelity autotuning on Ray.

``import raytuner as rt`` gives the names a user needs; each is imported when
it is first used, so ``import raytuner`` loads neither Ray nor gRPC:

- a problem: :class:`ProblemSpace` (and :class:`Real`, :class:`Integer`, :class:`Categorical`);
- tuning driven from Python: :class:`TuningSession` with an engine (:class:`MLA`, :class:`GPTuneBand`,
  :class:`TLA1`, :class:`TLA2`, :class:`TransferLearning`, :class:`DiscreteBO`, :class:`RandomSearch`);
- where evaluations are kept: :class:`JsonStore` (default), :class:`MongoStore`, :func:`open_store`,
  GPTune files with :func:`read_history_file` and :func:`write_history_file`, and :func:`load_history`
  to look at a history;
- the Ray Tune faces: :class:`LCMSearcher`, :class:`TransferLearningSearcher`, :class:`TLA2Searcher`,
  :class:`DiscreteBOSearcher`, :class:`RandomSearcher`, :class:`GPTuneBandScheduler`;
- a remote service: :class:`RemoteTuner`, :class:`CrowdClient`.

Example:
    >>> import raytuner as rt
    >>> problem = rt.ProblemSpace.parse(
    ...     {"parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}]}
    ... )
    >>> problem.objectives
    ['y']
    >>> rt.MLA.__module__
    'raytuner.engines.mla'
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from raytuner.lazy import lazy_names

try:
    __version__ = version("raytuner")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

#: Each public name and the module it comes from (imported on first use).
_HOMES: dict[str, str] = {
    **dict.fromkeys(("ProblemSpace", "Real", "Integer", "Categorical"), "raytuner.problem.space"),
    **dict.fromkeys(("TuningSession", "Trial"), "raytuner.session.tuning_session"),
    **dict.fromkeys(
        ("MLA", "GPTuneBand", "BanditStructure", "TLA1", "TLA2", "TransferLearning", "DiscreteBO", "RandomSearch"),
        "raytuner.engines",
    ),
    **dict.fromkeys(
        ("JsonStore", "MongoStore", "open_store", "StoreSource", "read_history_file", "write_history_file"),
        "raytuner.store",
    ),
    "load_history": "raytuner.view",
    **dict.fromkeys(("FunctionEvaluation", "HistoryDocument"), "raytuner.problem.records"),
    **dict.fromkeys(("RaytunerError", "InvalidInputError", "StoreError"), "raytuner.errors"),
    **dict.fromkeys(
        (
            "LCMSearcher",
            "TransferLearningSearcher",
            "TLA2Searcher",
            "DiscreteBOSearcher",
            "RandomSearcher",
            "TuningProgress",
        ),
        "raytuner.searchers",
    ),
    **dict.fromkeys(("GPTuneBandScheduler", "GPTuneBandOptions"), "raytuner.schedulers"),
    **dict.fromkeys(("RemoteTuner", "CrowdClient"), "raytuner.client"),
}

__all__ = [
    "__version__",
    "ProblemSpace",
    "Real",
    "Integer",
    "Categorical",
    "TuningSession",
    "Trial",
    "MLA",
    "GPTuneBand",
    "BanditStructure",
    "TLA1",
    "TLA2",
    "TransferLearning",
    "DiscreteBO",
    "RandomSearch",
    "JsonStore",
    "MongoStore",
    "open_store",
    "StoreSource",
    "read_history_file",
    "write_history_file",
    "load_history",
    "FunctionEvaluation",
    "HistoryDocument",
    "RaytunerError",
    "InvalidInputError",
    "StoreError",
    "LCMSearcher",
    "TransferLearningSearcher",
    "TLA2Searcher",
    "DiscreteBOSearcher",
    "RandomSearcher",
    "TuningProgress",
    "GPTuneBandScheduler",
    "GPTuneBandOptions",
    "RemoteTuner",
    "CrowdClient",
]  # the names of _HOMES (tests/test_public_api.py checks)

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports each on first use
    from raytuner.client import CrowdClient, RemoteTuner
    from raytuner.engines import (
        MLA,
        TLA1,
        TLA2,
        BanditStructure,
        DiscreteBO,
        GPTuneBand,
        RandomSearch,
        TransferLearning,
    )
    from raytuner.errors import InvalidInputError, RaytunerError, StoreError
    from raytuner.problem.records import FunctionEvaluation, HistoryDocument
    from raytuner.problem.space import Categorical, Integer, ProblemSpace, Real
    from raytuner.schedulers import GPTuneBandOptions, GPTuneBandScheduler
    from raytuner.searchers import (
        DiscreteBOSearcher,
        LCMSearcher,
        RandomSearcher,
        TLA2Searcher,
        TransferLearningSearcher,
        TuningProgress,
    )
    from raytuner.session.tuning_session import Trial, TuningSession
    from raytuner.store import (
        JsonStore,
        MongoStore,
        StoreSource,
        open_store,
        read_history_file,
        write_history_file,
    )
    from raytuner.view import load_history

__getattr__, __dir__ = lazy_names(__name__, _HOMES)
