"""Transfer learning from past data, in one place.

GPTuneCrowd's TLA pool and its ensemble (paper 000, section V):
:class:`TransferLearning` (the engine ``transfer``); and GPTune's TLA1 and TLA2
(paper 003, section 5): :class:`TLA1` predicts a new task's optimum (the
engine ``tla1``, :class:`TLA1Engine`), :class:`TLA2` (the engine ``tla2``)
tunes it from the source tasks' LCM.

>>> from raytuner.engines.transfer import TransferLearning, SourceData, ALGORITHMS
>>> ALGORITHMS[-3:]
('ensemble', 'ensemble_toggling', 'ensemble_prob')
"""

from raytuner.engines.transfer.data import SourceData, SourceTask
from raytuner.engines.transfer.engine import (
    ALGORITHMS,
    DEFAULT_POOL,
    ENSEMBLES,
    FIRST,
    SINGLE_ALGORITHMS,
    TransferLearning,
)
from raytuner.engines.transfer.ensemble import ensemble_probabilities, exploration_rate
from raytuner.engines.transfer.tla import TLA1, TLA2, OptimumPrediction, best_per_task, centred_sample
from raytuner.engines.transfer.tla1_engine import TLA1Engine

__all__ = [
    "TransferLearning",
    "SourceData",
    "SourceTask",
    "ALGORITHMS",
    "SINGLE_ALGORITHMS",
    "ENSEMBLES",
    "DEFAULT_POOL",
    "FIRST",
    "ensemble_probabilities",
    "exploration_rate",
    "TLA1",
    "TLA1Engine",
    "TLA2",
    "OptimumPrediction",
    "best_per_task",
    "centred_sample",
]
