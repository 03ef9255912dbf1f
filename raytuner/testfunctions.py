"""Synthetic objectives from the papers, used by examples, tests and benchmarks.

Example:
    >>> round(demo(0.5, 1.0), 6)
    1.0
    >>> demo_fidelity(0.3, 1.0, b=27, b_max=27) == demo(0.3, 1.0)
    True
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["demo", "demo_fidelity", "demo_grid_minimum", "DEMO_PROBLEM"]

#: The demo problem's spaces (GPTune-Demo: task t in [0, 10], x in [0, 1], minimise y).
DEMO_PROBLEM: dict[str, object] = {
    "input_space": [{"name": "t", "type": "real", "lower_bound": 0.0, "upper_bound": 10.0}],
    "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0.0, "upper_bound": 1.0}],
    "output_space": [{"name": "y", "type": "real", "goal": "minimize"}],
}


def demo(x: float, t: float) -> float:
    """GPTune's demo function (GPTuneBand paper, section 5.1).

    y(x, t) = 1 + exp(-(x + 1)^(t + 1)) cos(2πx) Σ_{i=1..3} sin(2πx(t + 2)^i)
    """
    series = sum(math.sin(2 * math.pi * x * (t + 2) ** i) for i in range(1, 4))
    return 1.0 + math.exp(-((x + 1) ** (t + 1))) * math.cos(2 * math.pi * x) * series


def demo_fidelity(x: float, t: float, b: float, b_max: float, a: float = 2 * math.pi, e: float = 0.1) -> float:
    """The demo function observed at fidelity ``b`` (section 5.1): exact at ``b = b_max``.

    ỹ(x, t, b) = y(x, t) (1 + e cos(a x) (1 - b / b_max)). The paper leaves ``a``
    open; 2π gives one full period of bias over x in [0, 1].
    """
    return demo(x, t) * (1.0 + e * math.cos(a * x) * (1.0 - b / b_max))


def demo_grid_minimum(t: float, points: int = 200_001) -> tuple[float, float]:
    """The demo function's minimum over x for task ``t``, by a dense grid: ``(x*, y*)``."""
    xs = np.linspace(0.0, 1.0, points)
    series = sum(np.sin(2 * np.pi * xs * (t + 2) ** i) for i in range(1, 4))
    ys = 1.0 + np.exp(-((xs + 1) ** (t + 1))) * np.cos(2 * np.pi * xs) * series
    i = int(np.argmin(ys))
    return float(xs[i]), float(ys[i])
