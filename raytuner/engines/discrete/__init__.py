"""Bayesian optimisation for discrete, constrained search spaces with invalid configurations (GPU kernels).

See :class:`DiscreteBO` and Willemsen et al. (2021), "Bayesian Optimization
for auto-tuning GPU kernels".

>>> from raytuner.engines.discrete import DiscreteBO, METHODS
>>> METHODS
('advanced_multi', 'multi', 'ei', 'pi', 'lcb')
"""

from raytuner.engines.discrete.candidates import CandidateSet
from raytuner.engines.discrete.engine import METHODS, DiscreteBO
from raytuner.engines.discrete.gp import CandidateGP
from raytuner.engines.discrete.portfolio import AdvancedMulti, Multi, Single, contextual_variance

__all__ = [
    "DiscreteBO",
    "METHODS",
    "CandidateSet",
    "CandidateGP",
    "Single",
    "Multi",
    "AdvancedMulti",
    "contextual_variance",
]
