"""The papers' test problems: their spaces and objectives, for examples, tests and benchmarks.

This module holds the synthetic ones (GPTune's demo function, Branin,
Ishigami, a mixed 12-parameter function); :mod:`raytuner.test_problems.amg` is the
PyAMG convection-diffusion solve (needs PyAMG) and
:mod:`raytuner.test_problems.lcbench` the YAHPO LCBench surrogate (needs
onnxruntime and the surrogate's files).

Example:
    >>> round(demo(0.5, 1.0), 6)
    1.0
    >>> demo_fidelity(0.3, 1.0, b=27, b_max=27) == demo(0.3, 1.0)
    True
    >>> round(branin(math.pi, 2.275, **BRANIN_CLASSIC), 6)
    0.397887
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "demo",
    "demo_fidelity",
    "demo_grid_minimum",
    "DEMO_PROBLEM",
    "branin",
    "branin_grid_minimum",
    "BRANIN_PROBLEM",
    "BRANIN_CLASSIC",
    "ISHIGAMI_PROBLEM",
    "ishigami",
    "ishigami_indices",
    "MIXED12_PROBLEM",
    "MIXED12_INDICES",
    "mixed12",
]

#: The demo problem's spaces (GPTune-Demo: task t in [0, 10], x in [0, 1], minimise y).
DEMO_PROBLEM: dict[str, Any] = {
    "input_space": [{"name": "t", "type": "real", "lower_bound": 0.0, "upper_bound": 10.0}],
    "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0.0, "upper_bound": 1.0}],
    "output_space": [{"name": "y", "type": "real", "goal": "minimize"}],
}

#: The Branin function's classic task parameters (https://www.sfu.ca/~ssurjano/branin.html).
BRANIN_CLASSIC: dict[str, float] = {
    "a": 1.0,
    "b": 5.1 / (4 * math.pi**2),
    "c": 5 / math.pi,
    "r": 6.0,
    "s": 10.0,
    "t": 1 / (8 * math.pi),
}

#: The Branin problem as a tuning problem with six task parameters (GPTuneCrowd paper, section VI-A).
#: The paper gives no task ranges; these bracket the classic values a = 1, b = 5.1/(4π²) ≈ 0.129,
#: c = 5/π ≈ 1.59, r = 6, s = 10, t = 1/(8π) ≈ 0.0398. The tuning parameters keep the classic
#: domain x1 in [-5, 10], x2 in [0, 15]; y is minimised (and positive over these ranges).
BRANIN_PROBLEM: dict[str, Any] = {
    "input_space": [
        {"name": "a", "type": "real", "lower_bound": 0.5, "upper_bound": 1.5},
        {"name": "b", "type": "real", "lower_bound": 0.1, "upper_bound": 0.15},
        {"name": "c", "type": "real", "lower_bound": 1.0, "upper_bound": 2.0},
        {"name": "r", "type": "real", "lower_bound": 5.0, "upper_bound": 7.0},
        {"name": "s", "type": "real", "lower_bound": 8.0, "upper_bound": 12.0},
        {"name": "t", "type": "real", "lower_bound": 0.03, "upper_bound": 0.05},
    ],
    "parameter_space": [
        {"name": "x1", "type": "real", "lower_bound": -5.0, "upper_bound": 10.0},
        {"name": "x2", "type": "real", "lower_bound": 0.0, "upper_bound": 15.0},
    ],
    "output_space": [{"name": "y", "type": "real", "goal": "minimize"}],
}


def demo(x: float, t: float) -> float:
    """GPTune's demo function (GPTuneBand paper, section 5.1).

    y(x, t) = 1 + exp(-(x + 1)^(t + 1)) cos(2πx) Σ_{i=1..3} sin(2πx(t + 2)^i)

    Args:
        x: the tuning parameter, in [0, 1].
        t: the task parameter, in [0, 10].
    """
    series = sum(math.sin(2 * math.pi * x * (t + 2) ** i) for i in range(1, 4))
    return 1.0 + math.exp(-((x + 1) ** (t + 1))) * math.cos(2 * math.pi * x) * series


def demo_fidelity(x: float, t: float, b: float, b_max: float, a: float = 2 * math.pi, e: float = 0.1) -> float:
    """The demo function observed at fidelity ``b`` (section 5.1): exact at ``b = b_max``.

    ỹ(x, t, b) = y(x, t) (1 + e cos(a x) (1 - b / b_max)). The paper leaves ``a``
    open; 2π gives one full period of bias over x in [0, 1].

    Args:
        x: the tuning parameter, in [0, 1].
        t: the task parameter, in [0, 10].
        b: the fidelity, at most ``b_max``.
        b_max: the highest fidelity.
        a: the bias's angular frequency (default 2π).
        e: the bias's size (default 0.1).
    """
    return demo(x, t) * (1.0 + e * math.cos(a * x) * (1.0 - b / b_max))


def demo_grid_minimum(t: float, points: int = 200_001) -> tuple[float, float]:
    """The demo function's minimum over x for task ``t``, by a dense grid: ``(x*, y*)``.

    Args:
        t: the task parameter.
        points: grid points (default 200 001).
    """
    xs = np.linspace(0.0, 1.0, points)
    series = sum(np.sin(2 * np.pi * xs * (t + 2) ** i) for i in range(1, 4))
    ys = 1.0 + np.exp(-((xs + 1) ** (t + 1))) * np.cos(2 * np.pi * xs) * series
    i = int(np.argmin(ys))
    return float(xs[i]), float(ys[i])


def branin(x1: float, x2: float, a: float, b: float, c: float, r: float, s: float, t: float) -> float:
    """The Branin function with its six task parameters (GPTuneCrowd paper, section VI-A).

    y = a (x2 - b x1² + c x1 - r)² + s (1 - t) cos(x1) + s; with :data:`BRANIN_CLASSIC`
    its three global minima are y = 0.397887 at (-π, 12.275), (π, 2.275) and (3π, 2.475).

    Args:
        x1: the first tuning parameter, in [-5, 10].
        x2: the second, in [0, 15].
        a: task parameter (classic 1).
        b: task parameter (classic 5.1/(4π²)).
        c: task parameter (classic 5/π).
        r: task parameter (classic 6).
        s: task parameter (classic 10).
        t: task parameter (classic 1/(8π)).
    """
    return a * (x2 - b * x1**2 + c * x1 - r) ** 2 + s * (1 - t) * math.cos(x1) + s


def branin_grid_minimum(task: Mapping[str, float], points: int = 1001) -> tuple[tuple[float, float], float]:
    """Branin's minimum over x1 in [-5, 10], x2 in [0, 15] for ``task``: a dense grid, then a bounded polish.

    Args:
        task: the six task parameters (``a`` ... ``t``).
        points: grid points per axis (default 1001).

    >>> (x1, x2), y = branin_grid_minimum(BRANIN_CLASSIC)
    >>> round(y, 6), abs(abs(x1) - math.pi) < 1e-4 or abs(x1 - 3 * math.pi) < 1e-4
    (0.397887, True)
    """
    from scipy.optimize import minimize

    p = {k: float(task[k]) for k in ("a", "b", "c", "r", "s", "t")}
    x1s, x2s = np.meshgrid(np.linspace(-5.0, 10.0, points), np.linspace(0.0, 15.0, points), indexing="ij")
    ys = p["a"] * (x2s - p["b"] * x1s**2 + p["c"] * x1s - p["r"]) ** 2 + p["s"] * (1 - p["t"]) * np.cos(x1s) + p["s"]
    i = np.unravel_index(int(np.argmin(ys)), ys.shape)
    start = np.array([x1s[i], x2s[i]])
    best = minimize(lambda z: branin(z[0], z[1], **p), start, method="L-BFGS-B", bounds=[(-5.0, 10.0), (0.0, 15.0)])
    if best.success and float(best.fun) <= float(ys[i]):
        return (float(best.x[0]), float(best.x[1])), float(best.fun)
    return (float(start[0]), float(start[1])), float(ys[i])


#: The Ishigami function's problem space: x1, x2, x3 in [-pi, pi], output ``y``.
ISHIGAMI_PROBLEM: dict[str, Any] = {
    "parameter_space": [
        {"name": f"x{i}", "type": "real", "lower_bound": -math.pi, "upper_bound": math.pi} for i in (1, 2, 3)
    ],
    "output_space": [{"name": "y", "type": "real"}],
}


def ishigami(config: Mapping[str, float], a: float = 7.0, b: float = 0.1) -> float:
    """The Ishigami function, the standard test of sensitivity analysis.

    Args:
        config: ``x1``, ``x2``, ``x3``, each in [-π, π].
        a: default 7.
        b: default 0.1.

    >>> round(ishigami({"x1": math.pi / 2, "x2": 0.0, "x3": 1.0}), 3)
    1.1
    """
    return math.sin(config["x1"]) + a * math.sin(config["x2"]) ** 2 + b * config["x3"] ** 4 * math.sin(config["x1"])


def ishigami_indices(a: float = 7.0, b: float = 0.1) -> tuple[list[float], list[float]]:
    """The analytic first-order (S1) and total (ST) Sobol indices of x1, x2, x3.

    Args:
        a: the function's ``a`` (default 7).
        b: the function's ``b`` (default 0.1).

    >>> [round(v, 3) for v in ishigami_indices()[0]], [round(v, 3) for v in ishigami_indices()[1]]
    ([0.314, 0.442, 0.0], [0.558, 0.442, 0.244])
    """
    pi = math.pi
    v1 = 0.5 * (1 + b * pi**4 / 5) ** 2
    v2 = a**2 / 8
    v13 = b**2 * pi**8 * (1 / 18 - 1 / 50)
    total = v1 + v2 + v13
    return [v1 / total, v2 / total, 0.0], [(v1 + v13) / total, v2 / total, v13 / total]


#: Twelve tuning parameters of which three matter (``x0``, ``nb``, ``alg``): a Table V-like case.
MIXED12_PROBLEM: dict[str, Any] = {
    "parameter_space": [{"name": f"x{i}", "type": "real", "lower_bound": 0, "upper_bound": 1} for i in range(10)]
    + [
        {"name": "nb", "type": "integer", "lower_bound": 1, "upper_bound": 8},
        {"name": "alg", "type": "categorical", "categories": ["lu", "qr", "svd"]},
    ],
    "output_space": [{"name": "runtime", "type": "real"}],
}
MIXED12_ALGORITHM_EFFECT = {"lu": 0.0, "qr": 2.0, "svd": -1.5}
#: Its analytic first-order indices (the function is additive, so S1 = ST): variances 0.8, 0.84, 2.0556.
MIXED12_INDICES = {"x0": 0.8 / 3.6956, "nb": 0.84 / 3.6956, "alg": 2.0556 / 3.6956}


def mixed12(config: Mapping[str, Any]) -> float:
    """``3 x0^2 + 0.4 nb + effect(alg) + 10``: the other nine parameters do nothing.

    Args:
        config: the twelve parameters of :data:`MIXED12_PROBLEM` (``x0``, ``nb``, ``alg`` matter).

    >>> mixed12({"x0": 1.0, "nb": 5, "alg": "qr"})
    17.0
    """
    return (
        3.0 * float(config["x0"]) ** 2 + 0.4 * float(config["nb"]) + MIXED12_ALGORITHM_EFFECT[str(config["alg"])] + 10.0
    )
