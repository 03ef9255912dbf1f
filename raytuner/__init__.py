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

__all__ = ["__version__", *_HOMES]

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports each on first use
    from raytuner.client import CrowdClient as CrowdClient
    from raytuner.client import RemoteTuner as RemoteTuner
    from raytuner.engines import (
        MLA as MLA,
    )
    from raytuner.engines import (
        TLA1 as TLA1,
    )
    from raytuner.engines import (
        TLA2 as TLA2,
    )
    from raytuner.engines import (
        BanditStructure as BanditStructure,
    )
    from raytuner.engines import (
        DiscreteBO as DiscreteBO,
    )
    from raytuner.engines import (
        GPTuneBand as GPTuneBand,
    )
    from raytuner.engines import (
        RandomSearch as RandomSearch,
    )
    from raytuner.engines import (
        TransferLearning as TransferLearning,
    )
    from raytuner.errors import (
        InvalidInputError as InvalidInputError,
    )
    from raytuner.errors import (
        RaytunerError as RaytunerError,
    )
    from raytuner.errors import (
        StoreError as StoreError,
    )
    from raytuner.problem.records import FunctionEvaluation as FunctionEvaluation
    from raytuner.problem.records import HistoryDocument as HistoryDocument
    from raytuner.problem.space import (
        Categorical as Categorical,
    )
    from raytuner.problem.space import (
        Integer as Integer,
    )
    from raytuner.problem.space import (
        ProblemSpace as ProblemSpace,
    )
    from raytuner.problem.space import (
        Real as Real,
    )
    from raytuner.schedulers import GPTuneBandOptions as GPTuneBandOptions
    from raytuner.schedulers import GPTuneBandScheduler as GPTuneBandScheduler
    from raytuner.searchers import (
        DiscreteBOSearcher as DiscreteBOSearcher,
    )
    from raytuner.searchers import (
        LCMSearcher as LCMSearcher,
    )
    from raytuner.searchers import (
        RandomSearcher as RandomSearcher,
    )
    from raytuner.searchers import (
        TLA2Searcher as TLA2Searcher,
    )
    from raytuner.searchers import (
        TransferLearningSearcher as TransferLearningSearcher,
    )
    from raytuner.searchers import (
        TuningProgress as TuningProgress,
    )
    from raytuner.session.tuning_session import Trial as Trial
    from raytuner.session.tuning_session import TuningSession as TuningSession
    from raytuner.store import (
        JsonStore as JsonStore,
    )
    from raytuner.store import (
        MongoStore as MongoStore,
    )
    from raytuner.store import (
        StoreSource as StoreSource,
    )
    from raytuner.store import (
        open_store as open_store,
    )
    from raytuner.store import (
        read_history_file as read_history_file,
    )
    from raytuner.store import (
        write_history_file as write_history_file,
    )
    from raytuner.view import load_history as load_history

__getattr__, __dir__ = lazy_names(__name__, _HOMES)
