"""Analysis of tuning results: the comparison metrics of the papers (R-tilde, R-bar, win rates).

Example:
    >>> import numpy as np
    >>> from raytuner.analysis import relative_performance, r_bar
    >>> r = relative_performance({"a": np.array([1.0, 2.0]), "b": np.array([2.0, 1.0])})
    >>> r_bar(r["a"])
    1.5
"""

from raytuner.analysis.metrics import (
    best_so_far,
    evaluations_to_reach,
    r_bar,
    relative_performance,
    win_rate,
    win_rate_se,
)
from raytuner.analysis.sensitivity import SensitivityResult, reduce_space, sobol_analysis
from raytuner.analysis.summary import task_summary
from raytuner.analysis.surrogate import SurrogateModel, surrogate_from_records

__all__ = [
    "relative_performance",
    "r_bar",
    "win_rate",
    "win_rate_se",
    "best_so_far",
    "evaluations_to_reach",
    "task_summary",
    "SurrogateModel",
    "surrogate_from_records",
    "SensitivityResult",
    "sobol_analysis",
    "reduce_space",
]
