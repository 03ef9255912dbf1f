"""Transfer learning from past data: GPTuneCrowd's TLA pool and its ensemble (paper 000, section V).

>>> from raytuner.strategies.transfer import TransferLearning, SourceData, ALGORITHMS
>>> ALGORITHMS[-3:]
('ensemble', 'ensemble_toggling', 'ensemble_prob')
"""

from raytuner.strategies.transfer.data import SourceData, SourceTask
from raytuner.strategies.transfer.engine import (ALGORITHMS, DEFAULT_POOL, ENSEMBLES, FIRST, SINGLE_ALGORITHMS,
                                                 TransferLearning)
from raytuner.strategies.transfer.ensemble import ensemble_probabilities, exploration_rate

__all__ = ["TransferLearning", "SourceData", "SourceTask", "ALGORITHMS", "SINGLE_ALGORITHMS", "ENSEMBLES",
           "DEFAULT_POOL", "FIRST", "ensemble_probabilities", "exploration_rate"]
