"""How well MLA's multitask model predicts the LCBench tasks, against one GP per task.

MLA can only beat single-task BO where its model of each task, fitted on
every task's data, predicts that task better than a GP fitted on the task's
own data. This measures both on the same samples: per seed, each task gets
``n_initial`` LHS samples (the size of the tuners' initial designs); one LCM
over all tasks and one GP per task, both with MLA's default options
(:attr:`MLA.default_options <raytuner.engines.MLA.default_options>`), are fitted on them; each predicts
:data:`REFERENCE_CONFIGURATIONS` fresh LHS configurations of each task, whose
true accuracies the surrogate gives. Per (seed, task) cell:

- ``spearman``: the rank correlation of the predicted means with the truth
  (the whole space: which regions are bad, which good);
- ``top_regret``: the best true accuracy among the configurations less the
  mean true accuracy of the :data:`TOP` configurations the model ranks
  highest (the region BO exploits; accuracy points, lower is better).

A constant prediction ranks nothing: its ``spearman`` is 0 and its top
regret the best less the mean true accuracy (a random pick's).

``lcm_better_top_share`` is the share of cells where the LCM's top regret is
the lower (ties count half).

Example:
    >>> import numpy as np
    >>> truth = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    >>> rho, regret = cell_scores(truth, np.array([0.0, 1.0, 2.0, 3.0, 9.0, 8.0]), top=2)
    >>> round(rho, 4), regret
    (0.9429, 0.5)
    >>> cell_scores(truth, np.zeros(6))
    (0.0, 2.5)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from raytuner.analysis import win_rate
from raytuner.engines import MLA
from raytuner.models import LCM, TrainingData
from raytuner.models.executors import InlineExecutor
from raytuner.problem.sampling import sample_configurations
from raytuner.test_problems.lcbench import OUTPUTS, LCBenchSurrogate

__all__ = ["REFERENCE_CONFIGURATIONS", "TOP", "cell_scores", "model_accuracy", "render_model_accuracy"]

log = logging.getLogger(__name__)

#: How many fresh configurations of each task the models predict.
REFERENCE_CONFIGURATIONS = 500
#: How many of a model's highest-ranked configurations its top regret averages.
TOP = 5


def cell_scores(truth: np.ndarray, predicted: np.ndarray, top: int = TOP) -> tuple[float, float]:
    """``(spearman, top_regret)`` of one model's predicted means against the true values (maximised).

    Args:
        truth: the true values of the reference configurations.
        predicted: the model's predicted means of the same configurations.
        top: how many of the highest-ranked configurations the regret averages.
    """
    if np.ptp(predicted) == 0:  # a constant ranks nothing: its top is a random pick's
        return 0.0, float(truth.max() - truth.mean())
    ranked = np.argsort(-predicted, kind="stable")[:top]
    return float(spearmanr(predicted, truth).statistic), float(truth.max() - truth[ranked].mean())


def model_accuracy(
    surrogate: LCBenchSurrogate, tasks: tuple[int, ...], seeds: tuple[int, ...], samples_per_task: int, epoch: float
) -> dict[str, Any]:
    """The LCM's and the per-task GPs' prediction of each task; ``results["quality_lcbench"]["model_accuracy"]``.

    Fits run inline, so the figures do not depend on the machine.

    Args:
        surrogate: the LCBench surrogate.
        tasks: the LCBench task ids.
        seeds: one set of samples per seed.
        samples_per_task: how many LHS samples each task's models see.
        epoch: the epoch the accuracies are read at.
    """
    problem = surrogate.problem(tasks)
    space = problem.parameter_space
    options = MLA.default_options.over(space)
    scores: dict[str, list[tuple[float, float]]] = {"lcm": [], "independent": []}

    def sample(task_id: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        configs = sample_configurations(problem, {"task_id": task_id}, n, seed=rng)
        values = surrogate.evaluate_many([task_id] * n, configs, [epoch] * n)[:, OUTPUTS.index("val_accuracy")]
        return space.encode(configs), values

    for seed in seeds:
        rng = np.random.default_rng([seed, 27])
        own = [sample(t, samples_per_task, rng) for t in tasks]
        fresh = [sample(t, REFERENCE_CONFIGURATIONS, rng) for t in tasks]
        joint = LCM(options).fit(
            TrainingData([x for x, _ in own], [y for _, y in own]), seed=seed, executor=InlineExecutor()
        )
        for j, ((x, y), (x_ref, y_ref)) in enumerate(zip(own, fresh)):
            alone = LCM(options).fit(TrainingData([x], [y]), seed=seed * 1000 + j, executor=InlineExecutor())
            scores["lcm"].append(cell_scores(y_ref, joint.predict(j, x_ref)[0]))
            scores["independent"].append(cell_scores(y_ref, alone.predict(0, x_ref)[0]))
        log.info(
            "lcbench model accuracy, seed %d: LCM top regret %.3f, per-task GPs %.3f (running means)",
            seed,
            np.mean([s[1] for s in scores["lcm"]]),
            np.mean([s[1] for s in scores["independent"]]),
        )
    lcm_cells, alone_cells = np.array(scores["lcm"]), np.array(scores["independent"])
    share = win_rate(lcm_cells[:, 1], alone_cells[:, 1])  # the lower top regret wins
    return {
        "samples_per_task": samples_per_task,
        "reference_configurations": REFERENCE_CONFIGURATIONS,
        "top": TOP,
        "cells": len(lcm_cells),
        "models": {
            name: {"spearman": round(float(v[:, 0].mean()), 4), "top_regret": round(float(v[:, 1].mean()), 4)}
            for name, v in (("lcm", lcm_cells), ("independent", alone_cells))
        },
        "lcm_better_top_share": round(float(share), 4),
    }


def render_model_accuracy(accuracy: Mapping[str, Any] | None) -> list[str]:
    """The report's lines on the models' accuracy (nothing for results written before it existed).

    Args:
        accuracy: ``results["quality_lcbench"]["model_accuracy"]``, or ``None``.
    """
    if not accuracy:
        return []
    models = accuracy["models"]
    return [
        f"Model accuracy ({accuracy['cells']} cells, {accuracy['samples_per_task']} LHS samples per task, "
        f"{accuracy['reference_configurations']} fresh configurations each): the LCM over all tasks ranks them "
        f"with Spearman {models['lcm']['spearman']}, one GP per task {models['independent']['spearman']}; "
        f"the top {accuracy['top']} each model ranks highest are {models['lcm']['top_regret']} and "
        f"{models['independent']['top_regret']} accuracy points below the best; the LCM's top is the "
        f"better in {accuracy['lcm_better_top_share']} of the cells.",
        "",
    ]
