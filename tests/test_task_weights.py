"""The LCM's task weights: signed (GPTune's) or nonnegative (MLA's default)."""

from __future__ import annotations

import numpy as np
import pytest

from raytuner.errors import InvalidInputError
from raytuner.executors import InlineExecutor
from raytuner.models import GPTUNE_LCM, LCM, Hyperparameters, LCMOptions, TrainingData
from raytuner.space import ProblemSpace
from raytuner.strategies import MLA
from raytuner.strategies.band_sampler import LevelSampler
from raytuner.strategies.transfer.tla import TLA2
from raytuner.testing.functions import DEMO_PROBLEM


def _opposed_tasks() -> TrainingData:
    """Two tasks whose values are each other's negatives."""
    X = np.linspace(0.0, 1.0, 12)[:, None]
    y = np.sin(6.0 * X[:, 0])
    return TrainingData([X, X], [y, -y])


def _fit(task_weights: str, data: TrainingData) -> LCM:
    return LCM(LCMOptions(latent=1, n_starts=2, task_weights=task_weights)).fit(
        data, seed=0, executor=InlineExecutor())


def test_signed_weights_model_opposed_tasks_and_nonnegative_ones_do_not() -> None:
    signed, nonnegative = _fit("signed", _opposed_tasks()), _fit("nonnegative", _opposed_tasks())
    assert signed.correlation()[0, 1] < -0.9
    assert (nonnegative.hyperparameters.W >= 0.0).all()
    assert nonnegative.correlation()[0, 1] >= 0.0


def test_a_model_of_one_task_is_fitted_the_same_with_either_weights() -> None:
    X = np.linspace(0.0, 1.0, 9)[:, None]
    data = TrainingData([X], [np.cos(4.0 * X[:, 0])])
    assert _fit("signed", data).hyperparameters == _fit("nonnegative", data).hyperparameters


def test_a_signed_warm_start_enters_a_nonnegative_fit_with_its_columns_turned() -> None:
    hp = Hyperparameters.initial(latent=2, tasks=3, dimension=1, rank=1)
    hp.W[0, :, 0] = [-0.4, -0.3, 0.2]        # mostly negative: negated, the 0.2 becomes 0
    hp.W[1, :, 0] = [0.5, -0.1, 0.3]         # mostly positive: kept, the -0.1 becomes 0
    clipped = hp.clipped(nonnegative=True)
    assert clipped.W[:, :, 0].tolist() == [[0.4, 0.3, 0.0], [0.5, 0.0, 0.3]]
    assert hp.clipped().W.tolist() == hp.W.tolist()
    bounds = Hyperparameters.vector_bounds(2, 3, 1, 1, nonnegative=True)
    assert bounds[2:8] == [(0.0, 10.0)] * 6 and Hyperparameters.vector_bounds(2, 3, 1, 1)[2] == (-10.0, 10.0)


def test_task_weights_are_checked_stored_and_read_back() -> None:
    with pytest.raises(InvalidInputError, match=r"^task_weights: unknown task weights 'positive' "
                                                r"\(allowed: signed, nonnegative\)$"):
        LCMOptions(task_weights="positive")
    options = LCMOptions(task_weights="nonnegative")
    assert LCMOptions.from_dict(options.to_dict()) == options
    stored_before = {k: v for k, v in options.to_dict().items() if k != "task_weights"}
    assert LCMOptions.from_dict(stored_before).task_weights == "signed"     # as every model was fitted then
    assert LCMOptions(**GPTUNE_LCM).task_weights == "signed"


def test_mla_fits_nonnegative_weights_by_default_and_gptuneband_signed_ones() -> None:
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    tasks = [{"t": 1.0}, {"t": 2.0}]
    assert MLA(problem, tasks, seed=0).model.options.task_weights == "nonnegative"
    assert MLA(problem, tasks, seed=0, options=LCMOptions(**GPTUNE_LCM)).model.options.task_weights == "signed"
    # GPTuneBand's samplers and TLA2 are MLAs that keep GPTune's signed weights when given no options
    assert LevelSampler.default_options.task_weights == "signed" and TLA2.default_options.task_weights == "signed"
