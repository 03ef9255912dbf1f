"""Surrogate models: the Linear Coregionalization Model (one task: a GP).

>>> from raytuner.models import LCM, LCMOptions, TrainingData, FittedLCM, Hyperparameters
"""

from raytuner.models.data import TrainingData
from raytuner.models.fitted import FittedLCM, Standardisation
from raytuner.models.hyperparameters import Hyperparameters
from raytuner.models.lcm import LCM
from raytuner.models.options import GPTUNE_LCM, FitReport, LCMOptions

__all__ = [
    "LCM",
    "LCMOptions",
    "GPTUNE_LCM",
    "FitReport",
    "FittedLCM",
    "Hyperparameters",
    "Standardisation",
    "TrainingData",
]
