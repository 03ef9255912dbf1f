"""Ray Tune searchers backed by raytuner engines (installed as ``raytuner.searchers``).

The GPTuneBand scheduler's own searcher is ``raytuner.schedulers.GPTuneBandSearcher``
(get it from the scheduler: ``band.searcher()``).

Every searcher takes Ray's ``param_space`` as Ray's own searchers do: build it with
``from_param_space(task_keys=[...], store=..., problem_name=...)`` and give ``tune.Tuner`` the
``param_space``, ``metric`` and ``mode`` (see :mod:`raytuner.searchers.param_space`). Every face
answers ``best(task)`` and ``best_per_task()`` (:class:`~raytuner.searchers.common.SessionResults`).

>>> from raytuner.searchers import (DiscreteBOSearcher, LCMSearcher, RandomSearcher, ServiceCallback,
...                                 EngineSearcher, TLA2Searcher, TransferLearningSearcher, TuningProgress)
"""

from raytuner.searchers.common import SessionResults
from raytuner.searchers.discrete_searcher import DiscreteBOSearcher
from raytuner.searchers.engine_searcher import EngineSearcher, RandomSearcher
from raytuner.searchers.lcm_searcher import LCMSearcher
from raytuner.searchers.progress import TuningProgress
from raytuner.searchers.service_callback import ServiceCallback
from raytuner.searchers.tla_searcher import TLA2Searcher, TransferLearningSearcher

__all__ = [
    "EngineSearcher",
    "RandomSearcher",
    "LCMSearcher",
    "TransferLearningSearcher",
    "TLA2Searcher",
    "DiscreteBOSearcher",
    "ServiceCallback",
    "TuningProgress",
    "SessionResults",
]
